"""Drive Debian's headless Chromium over the DevTools protocol, through a pipe (no browser download, no port).

Chromium started with ``--remote-debugging-pipe`` reads protocol messages on file descriptor 3 and writes its answers
on 4, each a JSON text ending in a NUL byte. :class:`Browser` starts it, opens one page and keeps every event it
sends: console messages, exceptions, log entries and network requests, so a test can assert there were none it did
not expect. The Mermaid harness (:mod:`tests.mermaid_browser`) keeps one for the whole test process.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

CHROMIUM_ENV = "BERTGRAPH_CHROMIUM"
CHROMIUM_NAMES = ("chromium", "chromium-browser")


def chromium_path() -> str | None:
    """The Chromium executable to use: ``$BERTGRAPH_CHROMIUM`` if set, else the first one on PATH."""
    override = os.environ.get(CHROMIUM_ENV)
    if override:
        return override if Path(override).is_file() else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _kill_group(pid: int) -> None:
    # Started in a session of its own, so its whole process tree goes; it may have exited on its own.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


class BrowserError(RuntimeError):
    """The browser or the protocol failed (not the page under test)."""


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 800, timeout: float = 60, stderr: Path | None = None) -> None:
        chromium = chromium_path()
        if chromium is None:
            raise BrowserError("Chromium not found (apt-get install -y chromium)")
        self.timeout = timeout
        self.events: list[dict[str, Any]] = []
        self._replies: dict[int, dict[str, Any]] = {}
        self._changed = threading.Condition()
        self._next_id = 0
        self._ended = False  # the browser closed its end of the pipe
        self._profile = tempfile.TemporaryDirectory(prefix="bertgraph-cdp-")
        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-quic",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-sync",
            "--disable-extensions",
            "--disable-breakpad",
            "--disable-dev-shm-usage",
            "--mute-audio",
            "--hide-scrollbars",
            f"--window-size={width},{height}",
            f"--user-data-dir={self._profile.name}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()
        # Above 4, so that moving them onto 3 and 4 in the child cannot overwrite one of them.
        to_browser_read, from_browser_write = (_high(fd) for fd in (to_browser_read, from_browser_write))

        def onto_3_and_4() -> None:
            os.dup2(to_browser_read, 3)  # dup2's copies are inherited by Chromium; the originals are not
            os.dup2(from_browser_write, 4)

        errors: int | IO[bytes] = subprocess.DEVNULL if stderr is None else stderr.open("ab")
        self._process = subprocess.Popen(
            [chromium, *flags],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            close_fds=False,  # Python's own descriptors are not inheritable (PEP 446); 3 and 4 must stay
            preexec_fn=onto_3_and_4,
            start_new_session=True,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        if not isinstance(errors, int):
            errors.close()  # the browser holds its own copy
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            self.session = self._attach()
        except BaseException:
            self.kill()  # a browser that never answered is not waited for
            raise

    # --- protocol ---------------------------------------------------------------------
    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                with self._changed:
                    self._ended = True  # the process may not be reaped yet: send() must not wait for it
                    self._changed.notify_all()
                return
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if message.get("method") == "Page.javascriptDialogOpening":
                    self._dismiss_dialog(message.get("sessionId"))
                with self._changed:
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self.events.append(message)
                    self._changed.notify_all()

    def _dismiss_dialog(self, session: str | None) -> None:
        """Close an alert at once (the event stays recorded): an open dialog would stop the page."""
        message = {"id": -1, "method": "Page.handleJavaScriptDialog", "params": {"accept": False}, "sessionId": session}
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")

    def send(self, method: str, params: dict[str, Any] | None = None, session: bool = True) -> dict[str, Any]:
        """Send one command and wait for its result."""
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session and getattr(self, "session", None):
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        with self._changed:
            while ident not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or not self.running():
                    raise BrowserError(f"no answer to {method} within {self.timeout:.0f} s")
                self._changed.wait(left)
            reply = self._replies.pop(ident)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return dict(reply.get("result", {}))

    def _attach(self) -> str:
        targets = self.send("Target.getTargets", session=False)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        session = self.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}, session=False)
        self.session = str(session["sessionId"])
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable")
        return self.session

    # --- page ---------------------------------------------------------------------------
    def open(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except BrowserError:  # the page is still being replaced by the next one
                value = None
            if value:
                return value
            time.sleep(0.05)
        raise BrowserError(f"{expression} stayed false for {timeout:.0f} s")

    def click(self, x: float, y: float) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def drag(self, start: tuple[float, float], end: tuple[float, float], steps: int = 5) -> None:
        x0, y0 = start
        x1, y1 = end
        self.send(
            "Input.dispatchMouseEvent", {"type": "mousePressed", "x": x0, "y": y0, "button": "left", "buttons": 1}
        )
        for step in range(1, steps + 1):
            x, y = x0 + (x1 - x0) * step / steps, y0 + (y1 - y0) * step / steps
            self.send(
                "Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y, "button": "left", "buttons": 1}
            )
        self.send("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": x1, "y": y1, "button": "left"})

    def wheel(self, x: float, y: float, delta_y: float) -> None:
        self.send("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": x, "y": y, "deltaX": 0, "deltaY": delta_y})

    def key(self, key: str, code: int) -> None:
        params = {"key": key, "code": key, "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code}
        self.send("Input.dispatchKeyEvent", {"type": "rawKeyDown", **params})
        if key == "Enter":
            self.send("Input.dispatchKeyEvent", {"type": "char", "text": "\r", **params})
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", **params})

    def type_text(self, text: str) -> None:
        self.send("Input.insertText", {"text": text})

    def touch(self, kind: str, points: list[tuple[float, float]]) -> None:
        """One touch event (``touchStart``, ``touchMove``, ``touchEnd``); finger ``i`` is ``points[i]``."""
        touches = [{"x": x, "y": y, "id": i, "radiusX": 4, "radiusY": 4, "force": 1} for i, (x, y) in enumerate(points)]
        self.send("Input.dispatchTouchEvent", {"type": kind, "touchPoints": [] if kind == "touchEnd" else touches})

    def emulate(self, width: int, height: int, mobile: bool = False) -> None:
        """Show the page in a viewport of ``width`` × ``height`` CSS px (a phone: ``mobile``, touch)."""
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
        )
        self.send("Emulation.setTouchEmulationEnabled", {"enabled": mobile, "maxTouchPoints": 5 if mobile else 1})

    def screenshot(self, path: Path) -> Path:
        """A PNG of what the viewport shows now."""
        import base64

        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"]))
        return path

    def forget(self) -> None:
        """Drop the events recorded so far: :meth:`problems` and :meth:`requests` start afresh."""
        with self._changed:
            self.events.clear()

    # --- what happened ------------------------------------------------------------------
    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries (CSP violations among them)."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
                found.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                found.append("exception: " + json.dumps(params["exceptionDetails"])[:500])
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                found.append("log: " + params["entry"]["text"])
            elif method == "Page.javascriptDialogOpening":
                found.append(f"dialog: {params.get('type')} {params.get('message')!r}")
        return found

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def running(self) -> bool:
        """Whether the browser is still there to answer."""
        return not self._ended and self._process.poll() is None

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.send("Browser.close", session=False)
        self._end(wait=10)

    def kill(self) -> None:
        """End the browser at once (one that stopped answering), its profile with it."""
        self._end(wait=0)

    def _end(self, wait: float) -> None:
        try:
            self._process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            _kill_group(self._process.pid)
            self._process.wait()
        os.close(self._to_browser)
        self._reader.join(timeout=5)
        os.close(self._from_browser)
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _high(fd: int) -> int:
    import fcntl

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


def file_url(path: Path, fragment: str = "") -> str:
    return path.resolve().as_uri() + (f"#{fragment}" if fragment else "")
