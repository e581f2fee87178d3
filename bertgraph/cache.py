"""On-disk cache of traced graphs, so repeated commands import neither torch nor transformers.

The key covers everything that changes a graph: the full config, the head, the example
size, the identity of the weights file, and the versions of bertgraph, torch,
transformers and Python (read from package metadata, without importing them). An entry
is served only after it is checked (:func:`load`): a corrupt, unreadable, stale or
doubtful entry is ignored and rebuilt. ``BERTGRAPH_CACHE_DIR`` moves the
cache; ``--no-cache`` (or ``BERTGRAPH_NO_CACHE=1``) turns it off.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import stat
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import networkx as nx

from bertgraph.errors import BertgraphError, one_line
from bertgraph.files import exclusive_lock, remove_stale_in, temporary_file
from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.graph.validate import graph_problem, node_link_problem
from bertgraph.model import ModelSpec
from bertgraph.model.counts import bert_parameter_total

FORMAT = 3  # bump when the graph schema or the entry layout changes
# The code that makes a graph, every module below these folders (graph/facts, model/families, …):
# an edited copy of bertgraph never reads an older graph.
_GRAPH_CODE = ("model", "tracing", "graph")
# An entry is one graph: bert-large's operator graph is about 20 MB. Anything bigger is not an entry.
MAX_ENTRY_BYTES = 1 << 28


def cache_dir() -> Path:
    override = os.environ.get("BERTGRAPH_CACHE_DIR")
    if override:
        return Path(os.path.expanduser(override))
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("bertgraph")) / "graphs"


def enabled() -> bool:
    return os.environ.get("BERTGRAPH_NO_CACHE", "") in ("", "0")


@functools.cache  # installed versions and the code do not change under a running process
def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def _file_identity(path: Path | None) -> dict[str, Any] | None:
    """Path, size and modification time of a weights file (and of an index's shards)."""
    if path is None:
        return None
    files = [path]
    if path.name.endswith(".index.json"):
        from bertgraph.model.checkpoint import read_index

        with contextlib.suppress(BertgraphError):  # resolve() has reported a bad index already
            files += [path.parent / shard for shard in sorted(set(read_index(path).values()))]
    identity = []
    for file in files:
        try:
            stat = file.stat()
            identity.append([str(file.resolve()), stat.st_size, stat.st_mtime_ns])
        except OSError:
            identity.append([str(file), None, None])
    return {"files": identity}


def graph_code_files() -> list[Path]:
    """Every module whose code shapes a traced graph, in a stable order."""
    root = Path(__file__).parent
    return sorted(file for folder in _GRAPH_CODE for file in (root / folder).rglob("*.py"))


@functools.cache
def _code_digest() -> str:
    digest = hashlib.sha256()
    root = Path(__file__).parent
    for file in graph_code_files():
        digest.update(file.relative_to(root).as_posix().encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def key_material(spec: ModelSpec, kind: str = "trace") -> dict[str, Any]:
    """Everything the key of ``spec``'s graph covers, as plain JSON data.

    An entry stores its key material too, and is served only when that equals the
    material of the spec asking: a file renamed or copied to another key is not trusted.
    """
    from bertgraph.version import __version__

    material = {
        "format": FORMAT,
        "kind": kind,
        "name": spec.name,
        "config": spec.config,
        "head": spec.head,
        "example": list(spec.example_shape),
        "weights": _file_identity(spec.weights),
        "pickle": _file_identity(spec.pickle_weights) if spec.allow_pickle else None,
        "attention": spec.attention,
        "dtype": spec.dtype,
        "checkpoint": spec.checkpoint.digest() if spec.checkpoint is not None else None,
        "versions": {
            "bertgraph": __version__,
            "code": _code_digest(),
            "torch": _version("torch"),
            "transformers": _version("transformers"),
            "python": ".".join(map(str, sys.version_info[:2])),
        },
    }
    normal: dict[str, Any] = json.loads(json.dumps(material, sort_keys=True, default=str))
    return normal


def key(spec: ModelSpec, kind: str = "trace") -> str:
    """The cache key of a spec's graph."""
    text = json.dumps(key_material(spec, kind), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# Temporary entries of earlier bertgraph versions (``tmpXXXXXXXX.tmp``, ``.entry.XXXXXXXX.tmp``):
# they carry no pid, so only their age tells they are abandoned; a write takes seconds.
_OLD_TEMPORARY = re.compile(r"^(?:tmp|\.entry\.)[a-z0-9_]{8}\.tmp$")
OLD_TEMPORARY_AGE = 3600.0  # seconds


def remove_old_temporaries(directory: Path) -> list[Path]:
    """Remove temporary files an earlier version left in the cache folder over an hour ago."""
    import time

    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not _OLD_TEMPORARY.match(entry.name) or not entry.is_file(follow_symlinks=False):
            continue
        with contextlib.suppress(OSError):
            if now - entry.stat(follow_symlinks=False).st_mtime > OLD_TEMPORARY_AGE:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def entry_path(spec: ModelSpec) -> Path:
    return cache_dir() / f"{key(spec)}.json"


def load(spec: ModelSpec) -> nx.DiGraph | None:
    """The cached graph of ``spec``, or None when absent, unreadable, stale or in any doubt.

    An entry is two lines: a header (format, key material, SHA-256 of the second line)
    and the graph as node-link JSON. It is served only when the format is this one, the
    stored key material equals the spec's, the digest matches, the graph passes
    :func:`~bertgraph.graph.validate.graph_problem`, and it describes this spec: name,
    head, sizes, and the parameter total the config implies.
    """
    try:
        content = _read_entry(entry_path(spec))
        if content is None:
            return None
        head, _, body = content.partition(b"\n")
        header = json.loads(head)
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            return None
        if header.get("key") != key_material(spec):
            return None
        if hashlib.sha256(body).hexdigest() != header.get("digest"):
            return None
        data = json.loads(body)
    except (OSError, ValueError, RecursionError):
        return None
    try:
        return checked_graph(data, spec)
    except Exception:  # a doubt the checks did not foresee is still a doubt: rebuild, never crash
        return None


def _read_entry(path: Path) -> bytes | None:
    """The bytes of the entry at ``path``, or None (with one warning line) when it is not a regular
    file of at most :data:`MAX_ENTRY_BYTES`: a FIFO would block the read, a link to a device
    (``/dev/zero``) would never end it."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    with os.fdopen(handle, "rb") as stream:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            _warn(f"skipped cache entry {path}: it is not a regular file; remove it")
            return None
        content = stream.read(MAX_ENTRY_BYTES + 1)
    if len(content) > MAX_ENTRY_BYTES:
        _warn(f"skipped cache entry {path}: larger than {MAX_ENTRY_BYTES >> 20} MB, so not an entry; remove it")
        return None
    return content


def _warn(message: str) -> None:
    print(f"bertgraph: warning: {one_line(message)}", file=sys.stderr)


def checked_graph(data: Any, spec: ModelSpec) -> nx.DiGraph | None:
    """The graph in node-link ``data`` when it is sound and describes ``spec``, else None."""
    if node_link_problem(data) is not None:
        return None
    graph = graph_io.from_node_link(data)
    if graph_problem(graph) is not None or _spec_problem(graph, spec) is not None:
        return None
    return graph


def _spec_problem(graph: nx.DiGraph, spec: ModelSpec) -> str | None:
    """What makes a well-formed graph the wrong graph for ``spec``, or None."""
    facts = graph.graph
    if (facts[g.G_NAME], facts[g.G_HEAD], facts[g.G_MODEL_CLASS]) != (spec.name, spec.head, spec.model_class):
        return "another model or head"
    if facts[g.G_CONFIG] != spec.summary():
        return "other sizes"
    # The closed-form total is BERT's; other families are checked by schema and sizes alone.
    expected = bert_parameter_total(spec.config, spec.head) if spec.model_type == "bert" else None
    if expected is not None and _row_total(graph) != expected:
        return f"{_row_total(graph)} parameters where the config implies {expected}"
    return None


def _row_total(graph: nx.DiGraph) -> int:
    return sum(int(row["numel"]) for row in graph.graph[g.G_PARAMETERS])


def store(spec: ModelSpec, graph: nx.DiGraph) -> None:
    """Write ``graph`` under ``spec``'s key; a cache that cannot be written is skipped.

    The entry is written to a temporary file and moved into place, and the temporary
    file is removed whatever fails (a full disk, an entry path that is a folder). One left
    by a process killed outright (SIGKILL) is removed by the next write to the cache.
    """
    directory = cache_dir()
    temporary = ""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        body = json.dumps(graph_io.to_node_link(graph), separators=(",", ":")).encode()
        header = {"format": FORMAT, "key": key_material(spec), "digest": hashlib.sha256(body).hexdigest()}
        remove_stale_in(directory)
        remove_old_temporaries(directory)
        handle, temporary = temporary_file(entry_path(spec))
        with os.fdopen(handle, "wb") as stream:
            stream.write(json.dumps(header, separators=(",", ":")).encode() + b"\n" + body)
        os.replace(temporary, entry_path(spec))
        temporary = ""
    except OSError:
        return
    finally:
        if temporary:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


@contextlib.contextmanager
def building(spec: ModelSpec) -> Iterator[None]:
    """Hold the build lock of ``spec``'s graph: processes building docs side by side trace it once.

    The second process waits, then finds the graph in the cache. Where the cache folder
    cannot be written, there is no lock.
    """
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        yield
        return
    with exclusive_lock(directory / f"{key(spec)}.lock"):
        yield
