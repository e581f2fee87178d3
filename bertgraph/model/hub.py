"""Models on the Hugging Face Hub by id: a config and safetensors headers, never a weight.

The one module that talks to the network (through huggingface_hub). A hub id
(``org/name``, ``org/name@revision``) is read from the standard Hugging Face cache when
it is there, by the cache's documented layout and without importing huggingface_hub, so a
model once fetched costs what a preset costs. Otherwise it is fetched (:func:`located`):

1. ``/api/models/{id}/revision/{rev}``: the commit and the file list with sizes;
2. ``config.json`` and ``model.safetensors.index.json`` with ``hf_hub_download``, into the
   cache (refused before the download when over :data:`~bertgraph.model.fields.MAX_CONFIG_BYTES`);
3. each safetensors file's header with range requests: the first
   :data:`FIRST_BYTES` bytes, and the rest of the header if it is longer — never a byte of
   the weights, never a ``.py`` file. The headers are validated as a local file's are and kept
   in the cache's assets folder (``$HF_HOME/assets/bertgraph/models--org--name/COMMIT.json``).

The fetch runs in a child process that is killed after :func:`fetch_seconds`, so no
server, however silent, holds a command longer; every failure is one line, and whatever
the fetch added to the cache is taken back (:class:`_CacheChanges`), so the next run starts
clean. ``HF_HUB_OFFLINE`` (or ``--offline``) forbids fetching; ``HF_ENDPOINT``,
``HF_TOKEN`` (or a stored login), ``HF_HOME`` and ``HF_HUB_CACHE`` mean what they mean to
huggingface_hub.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertgraph.errors import BertgraphError, CheckpointError, ModelReferenceError, first_line, one_line
from bertgraph.files import exclusive_lock, path_kind, write_atomic
from bertgraph.model.checkpoint import MAX_INDEX_BYTES, TensorEntry, check_index, header_length, parse_header
from bertgraph.model.checkpoint import read_index as read_index_file
from bertgraph.model.fields import MAX_CONFIG_BYTES
from bertgraph.model.stored import Checkpoint, checkpoint_of
from bertgraph.version import __version__

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# A hub id: ``org/name``, then ``@revision`` (a branch, tag or commit; ``refs/pr/1`` too).
HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+?)(?:@(?P<revision>[\w.][\w./-]*))?$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
DEFAULT_REVISION = "main"
DEFAULT_ENDPOINT = "https://huggingface.co"
FETCH_SECONDS = 25.0  # the whole fetch, from starting the child to the last header (BERTGRAPH_HUB_TIMEOUT overrides)
MAX_FETCH_SECONDS = 3600.0
REQUEST_SECONDS = 10.0  # one request, within what is left of the above (HF_HUB_DOWNLOAD_TIMEOUT overrides)
FIRST_BYTES = 100_000  # the first request for a header (huggingface_hub's guess: 97 % of headers fit)
PARALLEL_HEADERS = 8  # headers fetched at once (a 163-shard model)
RECORD_FORMAT = 1
LIBRARY = "bertgraph"  # who is asking, in the user agent huggingface_hub sends
_TRUE = ("1", "ON", "YES", "TRUE")


class HubError(ModelReferenceError):
    """A hub model that cannot be fetched: not there, gated, no answer, or not a model bertgraph reads."""


@dataclass(frozen=True)
class HubReference:
    """A model on the Hub: its id and the revision asked for (``None``: the default branch)."""

    repo_id: str
    revision: str | None = None

    @property
    def asked(self) -> str:
        return self.revision or DEFAULT_REVISION

    def __str__(self) -> str:
        return f"{self.repo_id}@{self.revision}" if self.revision else self.repo_id


def hub_reference(text: str, revision: str | None = None) -> HubReference | None:
    """``org/name`` or ``org/name@revision`` as a :class:`HubReference`; None when ``text`` is no hub id.

    ``revision`` (``--revision``) applies when the text names none; both, differing, is an error.

    >>> hub_reference("google/gemma-2-2b@v1.0"), hub_reference("bert-base-uncased")
    (HubReference(repo_id='google/gemma-2-2b', revision='v1.0'), None)
    """
    found = HUB_ID.match(text)
    if found is None or text.startswith((".", "/")) or ".." in text or "--" in found.group("repo"):
        return None
    named = found.group("revision")
    if named and revision and named != revision:
        raise ModelReferenceError(f"{text} names revision {named} and --revision says {revision}; give one of them")
    chosen = named or revision
    if chosen is not None and (chosen.endswith("/") or "//" in chosen):
        raise ModelReferenceError(f"revision {chosen!r} is not a branch, tag or commit name")
    return HubReference(found.group("repo"), chosen)


def offline(flag: bool | None = None) -> bool:
    """Fetching is forbidden: ``--offline``, or ``HF_HUB_OFFLINE`` (``TRANSFORMERS_OFFLINE``) set true."""
    if flag:
        return True
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.upper() in _TRUE


def _env_path(name: str, default: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(os.environ.get(name) or default)))


def hf_home() -> Path:
    default = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
    return _env_path("HF_HOME", default)


def hub_cache_dir() -> Path:
    """Where huggingface_hub keeps models (read now, so a variable set after start-up counts)."""
    legacy = os.environ.get("HUGGINGFACE_HUB_CACHE") or str(hf_home() / "hub")
    return _env_path("HF_HUB_CACHE", legacy)


def assets_dir() -> Path:
    """huggingface_hub's folder for what libraries derive from models (``cached_assets_path``)."""
    legacy = os.environ.get("HUGGINGFACE_ASSETS_CACHE") or str(hf_home() / "assets")
    return _env_path("HF_ASSETS_CACHE", legacy)


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def repo_folder(repo_id: str) -> str:
    return "models--" + repo_id.replace("/", "--")


def _record_folder(repo_id: str) -> Path:
    return assets_dir() / "bertgraph" / repo_folder(repo_id)


def _record_path(repo_id: str, commit: str) -> Path:
    return _record_folder(repo_id) / f"{commit}.json"


# --- the cache, read without the network ---------------------------------------------------


@dataclass(frozen=True)
class HubSnapshot:
    """A hub model in the local cache.

    Attributes:
        reference: the id and revision asked for.
        commit: the commit the revision named when it was fetched.
        folder: its snapshot folder (``config.json`` inside).
        checkpoint: what its safetensors headers say (None: no safetensors checkpoint, or
            not fetched: a snapshot some other tool left with its config only, read offline).
        headers: ``record`` (the headers bertgraph fetched), ``files`` (the checkpoint itself is
            in the snapshot), ``none`` (the model has no safetensors checkpoint) or ``unknown``.
    """

    reference: HubReference
    commit: str
    folder: Path
    checkpoint: Checkpoint | None
    headers: str

    @property
    def name(self) -> str:
        return str(self.reference)

    @property
    def complete(self) -> bool:
        return self.headers != "unknown"


def cached(reference: HubReference) -> HubSnapshot | None:
    """The snapshot of ``reference`` in the cache, or None; reads files only (no huggingface_hub)."""
    folder = hub_cache_dir() / repo_folder(reference.repo_id)
    commit = reference.asked if _COMMIT.match(reference.asked) else _read_ref(folder / "refs" / reference.asked)
    if commit is None:
        return None
    snapshot = folder / "snapshots" / commit
    if path_kind(snapshot / "config.json").kind != "file":
        return None
    if _has_checkpoint_files(snapshot):
        return HubSnapshot(reference, commit, snapshot, None, "files")
    record = _read_record(reference.repo_id, commit, snapshot)
    if record is None:
        return HubSnapshot(reference, commit, snapshot, None, "unknown")
    checkpoint, state = record
    return HubSnapshot(reference, commit, snapshot, checkpoint, state)


def _read_ref(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            text = handle.read(100).decode("ascii", "replace").strip()
    except OSError:
        return None
    return text if _COMMIT.match(text) else None


def _has_checkpoint_files(snapshot: Path) -> bool:
    """The snapshot holds a whole safetensors checkpoint (a download by another tool)."""
    if path_kind(snapshot / SINGLE_FILE).kind == "file":
        return True
    index = snapshot / INDEX_FILE
    if path_kind(index).kind != "file":
        return False
    try:
        shards = set(read_index_file(index).values())
    except BertgraphError:
        return False
    return all(path_kind(snapshot / shard).kind == "file" for shard in shards)


def _read_record(repo_id: str, commit: str, snapshot: Path) -> tuple[Checkpoint | None, str] | None:
    """The headers fetched for ``commit``, validated again; None when absent or in any doubt."""
    try:
        data = json.loads(_record_path(repo_id, commit).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT or data.get("commit") != commit:
        return None
    files = data.get("files")
    if not isinstance(files, dict):
        return None
    if not files:
        return None, "none"
    source = f"{repo_id}@{commit}"
    try:
        headers = {
            name: _parse_stored_header(source, name, entry["header"].encode("utf-8"), entry["size"])
            for name, entry in files.items()
        }
        if data.get("sharded"):
            check_index(f"{source}:{INDEX_FILE}", read_index_file(snapshot / INDEX_FILE), headers)
    except (BertgraphError, KeyError, TypeError, AttributeError):
        return None
    return checkpoint_of(headers, source, bool(data.get("sharded"))), "record"


def _parse_stored_header(source: str, name: str, raw: bytes, size: int) -> dict[str, TensorEntry]:
    if not isinstance(size, int) or isinstance(size, bool):
        raise CheckpointError(f"{source}:{name} has no size")
    return parse_header(raw, size - 8 - len(raw), f"{source}:{name}")


# --- fetching ---------------------------------------------------------------------------------


@contextlib.contextmanager
def located(reference: HubReference, offline_only: bool = False) -> Iterator[HubSnapshot]:
    """The snapshot of ``reference``: from the cache, or fetched into it.

    Offline, a snapshot with its config alone is used as it is (no checkpoint facts); online it
    is completed. What a fetch added to the cache is removed again when it fails, or when the
    ``with`` block raises (a config bertgraph cannot draw), so a failed run leaves nothing.

    Raises:
        HubError: offline and not cached, or the fetch failed (one line saying what to do).
    """
    found = cached(reference)
    if found is not None and (found.complete or offline(offline_only)):
        yield found
        return
    if offline(offline_only):
        raise HubError(
            f"{reference} is not in the Hugging Face cache ({hub_cache_dir()}) and fetching is off "
            "(--offline or HF_HUB_OFFLINE); run once online to fetch its config and checkpoint headers"
        )
    with _repo_lock(reference.repo_id):
        found = cached(reference)  # another process may have fetched it meanwhile
        if found is not None and found.complete:
            yield found
            return
        changes = _CacheChanges(reference.repo_id)
        try:
            _fetch(reference)
            found = cached(reference)
            if found is None or not found.complete:
                raise HubError(f"{reference} was fetched but is not in the cache ({hub_cache_dir()}); run again")
            yield found
        except BaseException:
            changes.undo()
            raise


@contextlib.contextmanager
def _repo_lock(repo_id: str) -> Iterator[None]:
    """One fetch of a repository at a time across processes (docs builds read pages in parallel).

    The lock file lives in the temporary folder, so it adds nothing to the Hugging Face cache.
    """
    key = hashlib.sha256(f"{hub_cache_dir()}\0{repo_id}".encode()).hexdigest()[:24]
    folder = Path(tempfile.gettempdir()) / f"bertgraph-hub-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
        private = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077
    except OSError:
        private = False
    if not private:  # someone else's folder, or a link: no lock rather than one in a place we do not own
        yield
        return
    with exclusive_lock(folder / f"{key}.lock", 0o600):
        yield


def fetch_seconds() -> float:
    """How long a whole fetch may take: ``BERTGRAPH_HUB_TIMEOUT`` seconds, else :data:`FETCH_SECONDS`.

    A slow link fetching many shards' headers needs longer; a script that must fail fast, less.
    """
    raw = os.environ.get("BERTGRAPH_HUB_TIMEOUT", "").strip()
    if not raw:
        return FETCH_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_FETCH_SECONDS:  # also false for nan
        raise HubError(
            f"BERTGRAPH_HUB_TIMEOUT={raw[:40]!r} is not a number of seconds above 0 and at most "
            f"{MAX_FETCH_SECONDS:g}; set it to, say, 60, or unset it for {FETCH_SECONDS:g} s"
        )
    return seconds


def _fetch(reference: HubReference) -> None:
    """Fetch in a child process (:func:`fetch_main`), killed after :func:`fetch_seconds`."""
    seconds = fetch_seconds()
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    if root not in _site_folders():  # a source tree: the child imports this very bertgraph
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    env["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    # The user agent's extras cost a request of their own (an agent registry, kept in HF_HOME): the
    # fetch makes only the requests it needs.
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    command = [
        sys.executable,
        "-c",
        "from bertgraph.model.hub import fetch_main; fetch_main()",
        reference.repo_id,
        reference.asked,
        str(seconds),
    ]
    try:
        done = subprocess.run(
            command, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=seconds, check=False
        )
    except subprocess.TimeoutExpired:
        raise HubError(
            f"no answer from {endpoint()} within {seconds:g} s while fetching {reference}; check the network "
            "and HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use only models in the cache"
        ) from None
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        raise HubError(answer["error"])
    if not (isinstance(answer, dict) and answer.get("commit")):
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise HubError(f"fetching {reference} failed (status {done.returncode}): {said[-1] if said else 'no message'}")


def _site_folders() -> set[str]:
    """Where the interpreter finds installed packages (never put first on a child's path: they
    would come before the standard library)."""
    import site

    found = [*site.getsitepackages(), site.getusersitepackages()]
    return {str(Path(folder).resolve()) for folder in found}


class _CacheChanges:
    """What a fetch may add to the cache — the repository's folder and lock folder, the headers'
    record, the cache's marker file — noted before it runs, so that a failure can take it back:
    new files and folders removed, a revision's ref given its old commit again."""

    def __init__(self, repo_id: str) -> None:
        cache = hub_cache_dir()
        self.roots = [
            cache / repo_folder(repo_id),
            cache / ".locks" / repo_folder(repo_id),
            _record_folder(repo_id),
        ]
        self.marker = cache / "CACHEDIR.TAG"
        self.had_marker = self.marker.exists()
        self.before: set[Path] = set()
        self.refs: dict[Path, bytes] = {}
        self.new_folders: list[Path] = []
        for root in self.roots:
            self._note_missing_parents(root)
            self.before.update(_walk(root))
        for path in _walk(self.roots[0] / "refs"):  # a revision's commit, which a fetch may move on
            with contextlib.suppress(OSError):
                if path.is_file():
                    self.refs[path] = path.read_bytes()

    def _note_missing_parents(self, root: Path) -> None:
        for folder in [root, *root.parents]:
            if folder.exists() or folder in self.new_folders:
                break
            self.new_folders.append(folder)

    def undo(self) -> None:
        for root in self.roots:
            added = [path for path in _walk(root) if path not in self.before]
            for path in sorted(added, key=lambda p: len(p.parts), reverse=True):
                with contextlib.suppress(OSError):
                    if path.is_dir() and not path.is_symlink():
                        path.rmdir()
                    else:
                        path.unlink()
        for path, content in self.refs.items():
            with contextlib.suppress(OSError):
                if not path.exists() or path.read_bytes() != content:
                    path.write_bytes(content)
        if not self.had_marker:
            self.marker.unlink(missing_ok=True)
        for folder in sorted(self.new_folders, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()


def _walk(root: Path) -> list[Path]:
    """Every path under ``root`` (folders, files, links; links not followed)."""
    found: list[Path] = []
    if not root.is_dir() or root.is_symlink():
        return found
    for folder, folders, files in os.walk(root):
        base = Path(folder)
        found += [base / name for name in folders]
        found += [base / name for name in files]
    return found


# --- the child process: the only code that imports huggingface_hub --------------------------


def fetch_main() -> None:
    """The fetch child: ``REPO REVISION SECONDS`` in ``sys.argv``; one JSON line out."""
    repo_id, revision, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    reference = HubReference(repo_id, None if revision == DEFAULT_REVISION else revision)
    try:
        commit = _fetch_here(reference, time.monotonic() + seconds)
        answer: dict[str, Any] = {"commit": commit}
    except BertgraphError as error:
        answer = {"error": str(error)}
    except Exception as error:  # everything else becomes one line too
        answer = {"error": _say(error, reference)}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


def _fetch_here(reference: HubReference, deadline: float) -> str:
    """Fetch ``reference``'s config, index and headers into the cache; returns the commit."""
    from huggingface_hub import HfApi

    per_request = float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT") or REQUEST_SECONDS)

    def timeout() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return min(per_request, left)

    repo_id, revision = reference.repo_id, reference.asked
    info = HfApi(library_name=LIBRARY, library_version=__version__).model_info(
        repo_id, revision=revision, files_metadata=True, timeout=timeout()
    )
    commit = str(info.sha or "")
    if not _COMMIT.match(commit):
        raise HubError(f"{endpoint()} gave no commit for {reference}; is HF_ENDPOINT a Hugging Face Hub?")
    sizes = {sibling.rfilename: sibling.size for sibling in info.siblings or []}
    if "config.json" not in sizes:
        raise HubError(
            f"{reference} has no config.json; bertgraph draws transformers models, whose config.json says what "
            "they are (a GGUF-only or non-transformers repository has none)"
        )
    _check_size(reference, "config.json", sizes["config.json"], MAX_CONFIG_BYTES, "a config.json is a few kilobytes")
    config = _download(repo_id, "config.json", revision, timeout())
    if config.parent.name != commit:
        raise HubError(f"{reference} moved to another commit while it was fetched; run again")
    source = f"{repo_id}@{commit}"
    weight_map: dict[str, str] | None = None
    if INDEX_FILE in sizes:
        _check_size(reference, INDEX_FILE, sizes[INDEX_FILE], MAX_INDEX_BYTES, "an index is a list of names")
        index = _download(repo_id, INDEX_FILE, commit, timeout())
        weight_map = read_index_file(index)
        shards = sorted(set(weight_map.values()))
        absent = [shard for shard in shards if shard not in sizes]
        if absent:
            raise HubError(f"{source}: {INDEX_FILE} names {absent[0]}, which the repository does not hold")
    else:
        shards = [SINGLE_FILE] if SINGLE_FILE in sizes else []
    known = {shard: _size(reference, shard, sizes[shard]) for shard in shards}
    raw = _headers(repo_id, commit, known, timeout)
    headers = {shard: _parse_stored_header(source, shard, raw[shard], known[shard]) for shard in shards}
    if weight_map is not None:
        check_index(f"{source}:{INDEX_FILE}", weight_map, headers)
    record = {
        "format": RECORD_FORMAT,
        "repo": repo_id,
        "commit": commit,
        "sharded": weight_map is not None,
        "files": {shard: {"size": sizes[shard], "header": raw[shard].decode("utf-8")} for shard in shards},
    }
    path = _record_path(repo_id, commit)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(record, sort_keys=True))
    return commit


def _download(repo_id: str, name: str, revision: str, timeout: float) -> Path:
    """One small file into the cache (its ``HEAD``, then its ``GET``), as every Hugging Face library does."""
    from huggingface_hub import hf_hub_download

    path = hf_hub_download(
        repo_id, name, revision=revision, etag_timeout=timeout, library_name=LIBRARY, library_version=__version__
    )
    return Path(path)


def _size(reference: HubReference, name: str, size: int | None) -> int:
    """A file's size, which the header check needs (the tensors must end where the file does)."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise HubError(f"{endpoint()} gave no size for {reference}'s {name}; is HF_ENDPOINT a Hugging Face Hub?")
    return size


def _check_size(reference: HubReference, name: str, size: int | None, limit: int, why: str) -> None:
    if size is not None and size > limit:
        raise HubError(f"{reference}: {name} is {size:,} bytes, above the {limit // 2**20} MB bertgraph reads; {why}")


def _headers(repo_id: str, commit: str, sizes: dict[str, int], timeout: Any) -> dict[str, bytes]:
    """Each file's header bytes (the JSON after the 8-byte length), fetched side by side."""
    from concurrent.futures import ThreadPoolExecutor

    if not sizes:
        return {}
    with ThreadPoolExecutor(min(PARALLEL_HEADERS, len(sizes))) as pool:
        futures = {name: pool.submit(_header, repo_id, commit, name, size, timeout) for name, size in sizes.items()}
        return {name: future.result() for name, future in futures.items()}


def _header(repo_id: str, commit: str, name: str, size: int, timeout: Any) -> bytes:
    """One safetensors header by range requests; never more than the header is read, whatever the server sends."""
    from huggingface_hub import hf_hub_url

    origin = f"{repo_id}@{commit}:{name}"
    url = hf_hub_url(repo_id, name, revision=commit)
    first = max(8, min(FIRST_BYTES, size))
    data = _range(url, 0, first, timeout)
    length = header_length(data[:8], size, origin)
    if 8 + length <= len(data):
        return data[8 : 8 + length]
    rest = _range(url, 8, length, timeout)
    if len(rest) != length:
        raise CheckpointError(f"{origin}: the server sent {len(rest):,} of the header's {length:,} bytes; run again")
    return rest


def _range(url: str, start: int, count: int, timeout: Any) -> bytes:
    """``count`` bytes of ``url`` from ``start``: a range request, read no further even if the server ignores it."""
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    headers = {
        **build_hf_headers(library_name=LIBRARY, library_version=__version__),
        "Range": f"bytes={start}-{start + count - 1}",
        "Accept-Encoding": "identity",
    }
    with get_session().stream("GET", url, headers=headers, timeout=timeout()) as response:
        if response.status_code >= 400:
            response.read()
        hf_raise_for_status(response)
        chunks: list[bytes] = []
        got = 0
        skip = start if response.status_code == 200 else 0  # the whole file despite the range
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            got += len(chunk)
            if got >= skip + count:
                break
        return b"".join(chunks)[skip : skip + count]


def _say(error: BaseException, reference: HubReference) -> str:
    """One line for what went wrong talking to the Hub, with what to do."""
    from huggingface_hub import errors

    try:  # huggingface_hub 2's HTTP client, whose exceptions say the network failed
        import httpx2

        timeouts: tuple[type[BaseException], ...] = (TimeoutError, httpx2.TimeoutException)
        transport: tuple[type[BaseException], ...] = (OSError, httpx2.TransportError)
    except ImportError:
        timeouts, transport = (TimeoutError,), (OSError,)

    if isinstance(error, errors.LocalEntryNotFoundError) and error.__cause__ is not None:
        return _say(error.__cause__, reference)  # hf_hub_download's wrapper of the answer that failed
    where = endpoint()
    login = "set HF_TOKEN (or run `hf auth login`)"
    if isinstance(error, errors.GatedRepoError):
        return (
            f"{reference.repo_id} is gated: accept its licence on {where}/{reference.repo_id} and {login} with an "
            "account that has access"
        )
    if isinstance(error, errors.RepositoryNotFoundError):
        return f"no model {reference.repo_id} on {where}, or it is private: check the id, or {login} for a private one"
    if isinstance(error, errors.RevisionNotFoundError):
        return f"{reference.repo_id} has no revision {reference.asked!r}; give a branch, tag or commit it has"
    if isinstance(error, errors.RemoteEntryNotFoundError):
        return f"{reference} lacks a file its file list names ({first_line(error)}); run again"
    if isinstance(error, timeouts):
        return (
            f"no answer from {where} in time while fetching {reference}; check the network and HF_ENDPOINT, or set "
            "HF_HUB_OFFLINE=1 to use only models in the cache"
        )
    if isinstance(error, transport) and not isinstance(error, errors.HfHubHTTPError):
        return (
            f"cannot reach {where} to fetch {reference} ({one_line(first_line(error))}); check the network and "
            "HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use only models in the cache"
        )
    if isinstance(error, errors.HfHubHTTPError):
        status = error.response.status_code if error.response is not None else "an error"
        return f"{where} answered {status} while fetching {reference}: {first_line(error)}"
    return f"fetching {reference} failed: {type(error).__name__}: {first_line(error)}"
