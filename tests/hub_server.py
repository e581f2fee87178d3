"""A Hugging Face Hub of the tests' own on 127.0.0.1: the endpoints huggingface_hub calls, from files on disk.

It answers what huggingface_hub 2.x asks for (read off its source: ``HfApi.model_info``,
``hf_hub_download``, ranged ``GET`` of a safetensors file):

* ``GET /api/models/{repo}/revision/{rev}?blobs=true``: the commit (``sha``) and ``siblings`` with sizes;
* ``HEAD`` and ``GET /{repo}/resolve/{rev}/{path}``: ``ETag``, ``X-Repo-Commit``, ``Content-Length``
  (``X-Linked-Size`` and ``X-Linked-Etag`` for safetensors files, as the Hub's LFS files), ``Range``
  answered with 206 and ``Content-Range``;
* errors as the Hub sends them: ``X-Error-Code`` ``RepoNotFound``, ``RevisionNotFound``,
  ``EntryNotFound`` (404) and ``GatedRepo`` (401 without a token, 403 with a wrong one).

Every request is recorded, and :meth:`HubServer.violations` lists those a client of bertgraph
must never make: a ``.py`` file asked for, a safetensors file read past its header.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

# The Hub's own first read of a header: huggingface_hub asks for the first 100 kB.
HEADER_GUESS = 100_000


@dataclass
class Repo:
    """A repository: each commit's files, the branches and tags that name commits, and its gate."""

    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    token: str | None = None  # gated: files open only with this token
    stall: set[str] = field(default_factory=set)  # files whose resolve requests are never answered
    hidden: set[str] = field(default_factory=set)  # files listed but answered EntryNotFound (a Hub out of step)
    sizes: dict[str, int] = field(default_factory=dict)  # sizes to claim instead of the real ones

    def add(self, files: dict[str, bytes], ref: str = "main") -> str:
        """A new commit holding ``files``, which ``ref`` now names; returns its hash."""
        digest = hashlib.sha1(json.dumps(sorted((k, hashlib.sha1(v).hexdigest()) for k, v in files.items())).encode())
        commit = digest.hexdigest()
        self.commits[commit] = dict(files)
        self.refs[ref] = commit
        return commit

    def commit_of(self, revision: str) -> str | None:
        return revision if revision in self.commits else self.refs.get(revision)


def folder_files(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder`` (what ``save_pretrained`` wrote), by name."""
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


class Request(dict[str, Any]):
    """One request: ``method``, ``path``, ``range``, ``authorization``, ``sent`` (body bytes)."""


class HubServer:
    """The server, on a free port of 127.0.0.1, in a thread; ``url`` is its endpoint."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[Request] = []
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                hub._answer(self, body=True)

            def do_HEAD(self) -> None:
                hub._answer(self, body=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        # shutdown() waits for the loop's next poll: at the default 0.5 s, a third of a second per test.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._server.shutdown()
        self._server.server_close()

    def repo(self, repo_id: str) -> Repo:
        return self.repos.setdefault(repo_id, Repo())

    # --- what a client must never do ------------------------------------------------------
    def violations(self) -> list[str]:
        """Requests that read a weights file beyond its header, or ask for code."""
        found = []
        for request in self.requests:
            path = request["path"]
            if path.endswith(".py"):
                found.append(f"asked for code: {request['method']} {path}")
            if not path.endswith(".safetensors") or request["method"] != "GET":
                continue
            limit = max(HEADER_GUESS, request["header"] + 8)
            if request["range"] is None:
                found.append(f"read a whole weights file: {path}")
            elif request["range_end"] is None or request["range_end"] > limit:
                found.append(f"read past the header: {path} {request['range']} (header {request['header']} bytes)")
            if request["sent"] > limit + 1:
                found.append(f"sent {request['sent']} bytes of {path}")
        return found

    def asked(self, method: str | None = None) -> list[str]:
        """The paths asked for, in order (of one method)."""
        return [r["path"] for r in self.requests if method is None or r["method"] == method]

    # --- answering --------------------------------------------------------------------------
    def _answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        url = urlsplit(handler.path)
        path = unquote(url.path)
        asked = re.fullmatch(r"bytes=(\d+)-(\d+)", handler.headers.get("Range") or "")
        request = Request(
            method=handler.command,
            path=path,
            range=handler.headers.get("Range"),
            range_end=int(asked.group(2)) if asked else None,  # the last byte asked for (none: to the end)
            authorization=handler.headers.get("Authorization"),
            sent=0,
            header=0,
        )
        with self._lock:
            self.requests.append(request)
        api = re.fullmatch(r"/api/models/([^/]+/[^/]+)/revision/(.+)", path)
        if api:
            self._model_info(handler, api.group(1), api.group(2), body)
            return
        resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if resolve and resolve.group(3) in self.repo(resolve.group(1)).stall:
            self._stopped.wait()  # accepted, read, never answered
            return
        if resolve:
            self._resolve(handler, request, resolve.group(1), resolve.group(2), resolve.group(3), body)
            return
        self._send(handler, 404, b"not found", {}, body)

    def _model_info(self, handler: BaseHTTPRequestHandler, repo_id: str, revision: str, body: bool) -> None:
        repo = self.repos.get(repo_id)
        if repo is None:
            self._error(handler, 404, "RepoNotFound", "Repository not found", body)
            return
        commit = repo.commit_of(revision)
        if commit is None:
            self._error(handler, 404, "RevisionNotFound", "Invalid rev id", body)
            return
        siblings = []
        for name, content in sorted(repo.commits[commit].items()):
            size = repo.sizes.get(name, len(content))
            sibling: dict[str, Any] = {"rfilename": name, "size": size, "blobId": hashlib.sha1(content).hexdigest()}
            if name.endswith(".safetensors"):
                sibling["lfs"] = {"size": size, "sha256": hashlib.sha256(content).hexdigest(), "pointerSize": 134}
            siblings.append(sibling)
        info = {
            "id": repo_id,
            "sha": commit,
            "private": False,
            "gated": "manual" if repo.token else False,
            "siblings": siblings,
        }
        self._send(handler, 200, json.dumps(info).encode(), {"Content-Type": "application/json"}, body)

    def _resolve(
        self, handler: BaseHTTPRequestHandler, request: Request, repo_id: str, revision: str, name: str, body: bool
    ) -> None:
        repo = self.repos.get(repo_id)
        if repo is None:
            self._error(handler, 404, "RepoNotFound", "Repository not found", body)
            return
        commit = repo.commit_of(unquote(revision))
        if commit is None:
            self._error(handler, 404, "RevisionNotFound", "Invalid rev id", body)
            return
        if repo.token is not None and request["authorization"] != f"Bearer {repo.token}":
            status = 401 if request["authorization"] is None else 403
            self._error(handler, status, "GatedRepo", "Access to model is restricted", body)
            return
        content = repo.commits[commit].get(name)
        if content is None or name in repo.hidden:
            self._error(handler, 404, "EntryNotFound", "Entry not found", body, {"X-Repo-Commit": commit})
            return
        if name.endswith(".safetensors") and len(content) >= 8:
            request["header"] = struct.unpack("<Q", content[:8])[0]
        etag = hashlib.sha256(content).hexdigest()
        headers = {"ETag": f'"{etag}"', "X-Repo-Commit": commit, "Accept-Ranges": "bytes"}
        if name.endswith(".safetensors"):
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(content))})
        status, part = 200, content
        asked = re.fullmatch(r"bytes=(\d+)-(\d*)", request["range"] or "")
        if asked:
            start = int(asked.group(1))
            end = min(int(asked.group(2)) if asked.group(2) else len(content) - 1, len(content) - 1)
            status, part = 206, content[start : end + 1]
            headers["Content-Range"] = f"bytes {start}-{end}/{len(content)}"
        request["sent"] = len(part) if body else 0
        self._send(handler, status, part, headers, body)

    def _error(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        code: str,
        message: str,
        body: bool,
        extra: dict[str, str] | None = None,
    ) -> None:
        headers = {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"}
        self._send(handler, status, json.dumps({"error": message}).encode(), {**headers, **(extra or {})}, body)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict[str, str], body: bool) -> None:
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if body:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client read what it wanted
                handler.wfile.write(data)


class SilentServer:
    """Accepts connections and never answers: a listening socket nobody reads from."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"

    def stop(self) -> None:
        self._socket.close()


def closed_port_url() -> str:
    """An endpoint where nothing listens: a port bound and released."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
