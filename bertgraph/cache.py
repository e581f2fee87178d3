"""On-disk cache of traced graphs, so repeated commands import neither torch nor transformers.

The key covers everything that changes a graph: the full config, the head, the example
size, the identity of the weights file, and the versions of bertgraph, torch,
transformers and Python (read from package metadata, without importing them). A corrupt,
unreadable or stale entry is ignored and rebuilt. ``BERTGRAPH_CACHE_DIR`` moves the
cache; ``--no-cache`` (or ``BERTGRAPH_NO_CACHE=1``) turns it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import networkx as nx

from bertgraph.errors import BertgraphError
from bertgraph.graph import io as graph_io
from bertgraph.model import ModelSpec

FORMAT = 2  # bump when the graph schema changes
# The code that makes a graph: an edited copy of bertgraph never reads an older graph.
_GRAPH_CODE = ("model", "model/families", "tracing", "graph")


def cache_dir() -> Path:
    override = os.environ.get("BERTGRAPH_CACHE_DIR")
    if override:
        return Path(override)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("bertgraph")) / "graphs"


def enabled() -> bool:
    return os.environ.get("BERTGRAPH_NO_CACHE", "") in ("", "0")


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


def _code_digest() -> str:
    digest = hashlib.sha256()
    for folder in _GRAPH_CODE:
        for file in sorted((Path(__file__).parent / folder).glob("*.py")):
            digest.update(file.name.encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def key(spec: ModelSpec, kind: str = "trace") -> str:
    """The cache key of a spec's graph."""
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
        "versions": {
            "bertgraph": __version__,
            "code": _code_digest(),
            "torch": _version("torch"),
            "transformers": _version("transformers"),
            "python": ".".join(map(str, sys.version_info[:2])),
        },
    }
    text = json.dumps(material, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def load(spec: ModelSpec) -> nx.DiGraph | None:
    """The cached graph of ``spec``, or None when absent, unreadable or stale."""
    path = cache_dir() / f"{key(spec)}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            return None
        return graph_io.from_node_link(data["graph"])
    except (OSError, ValueError, KeyError, TypeError, nx.NetworkXError):
        return None


def store(spec: ModelSpec, graph: nx.DiGraph) -> None:
    """Write ``graph`` under ``spec``'s key; a cache that cannot be written is skipped."""
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        payload = json.dumps({"format": FORMAT, "graph": graph_io.to_node_link(graph)}, separators=(",", ":"))
        handle, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(payload)
        os.replace(temporary, directory / f"{key(spec)}.json")
    except OSError:
        return


@contextlib.contextmanager
def building(spec: ModelSpec) -> Iterator[None]:
    """Hold the build lock of ``spec``'s graph: processes building docs side by side trace it once.

    The second process waits, then finds the graph in the cache. Where the cache folder
    cannot be written, or the platform has no ``fcntl``, there is no lock.
    """
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle = os.open(directory / f"{key(spec)}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)
