"""Render Mermaid diagram texts with the real mermaid.js inside headless Chromium.

The pinned mermaid package lives in ``tests/mermaid`` (``npm ci --prefix tests/mermaid``) and Chromium is the
distribution package (``/usr/bin/chromium``); nothing here downloads a browser.  All diagrams of one call are rendered
by one page: it renders them one after another and only writes its results element once every render has finished,
so a missing element means the page never completed (and the error says so, with Chromium's stderr). The page
opens in a Chromium kept for the whole test process (:mod:`tests.cdp`): a launch costs about 1.5 s of CPU, a
page in a running browser a sixth of that, and the SVGs are the same byte for byte.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import json
import re
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, NamedTuple

from tests.cdp import CHROMIUM_ENV, CHROMIUM_NAMES, Browser, BrowserError, chromium_path

__all__ = ["CHROMIUM_ENV", "CHROMIUM_NAMES", "chromium_path"]  # found and started by tests.cdp, named here too

MERMAID_DIR = Path(__file__).resolve().parent / "mermaid"
MERMAID_JS = MERMAID_DIR / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
# Mermaid's own defaults, spelled out so nobody "fixes" a failure by raising them: GitHub renders with these.
MAX_EDGES = 500
MAX_TEXT_SIZE = 50_000
SETUP_HINT = "apt-get install -y chromium && npm ci --prefix tests/mermaid"

_RESULTS_ID = "bertgraph-mermaid-results"
# Mermaid answers an over-long text with a successfully rendered placeholder diagram instead of an exception.
_TEXT_SIZE_MSG = "Maximum text size in diagram exceeded"
# What mermaid draws when a diagram fails and it renders its error diagram anyway.
_SYNTAX_ERROR_MARKERS = ("Syntax error in text", 'aria-roledescription="error"')


class MermaidResult(NamedTuple):
    """Outcome of rendering one diagram: ``ok`` only when mermaid parsed and rendered it with no error at all."""

    ok: bool
    error: str
    svg: str


def mermaid_version() -> str | None:
    """Version of the installed mermaid package, or None when ``npm ci`` has not been run."""
    try:
        return str(json.loads((MERMAID_JS.parents[1] / "package.json").read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        return None


def browser_available() -> str | None:
    """Why browser rendering is impossible here (a human-readable reason), or None when it is available."""
    problems = []
    if chromium_path() is None:
        problems.append(f"Chromium not found (looked for ${CHROMIUM_ENV}, {', '.join(CHROMIUM_NAMES)})")
    if not MERMAID_JS.is_file():
        problems.append(f"mermaid is not installed ({MERMAID_JS} is missing)")
    if not problems:
        return None
    return "; ".join(problems) + f"; run: {SETUP_HINT}"


# The page keeps mermaid's default limits and the strict security level, i.e. what GitHub does.
_PAGE_TEMPLATE = """<!doctype html>
<html><head><meta charset="utf-8"><title>mermaid render</title></head>
<body>
<script id="bertgraph-mermaid-input" type="application/json">__INPUT__</script>
<script src="__MERMAID_URL__"></script>
<script>
(async () => {
  const results = [];
  let fatal = "";
  let captured = [];
  // Anything mermaid reports through console.error or an uncaught error counts against the current diagram.
  const originalError = console.error.bind(console);
  console.error = (...args) => { captured.push(args.map(String).join(" ")); originalError(...args); };
  window.addEventListener("error", (e) => captured.push("uncaught: " + e.message));
  window.addEventListener("unhandledrejection", (e) => captured.push("unhandled rejection: " + String(e.reason)));
  try {
    if (typeof mermaid === "undefined") throw new Error("mermaid.min.js did not load from __MERMAID_URL__");
    mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
    const items = JSON.parse(document.getElementById("bertgraph-mermaid-input").textContent);
    for (let i = 0; i < items.length; i++) {
      const [name, text] = items[i];
      captured = [];
      let error = "";
      let svg = "";
      try {
        await mermaid.parse(text);
        svg = (await mermaid.render("bertgraph-d" + i, text)).svg;
      } catch (e) {
        error = (e && e.message) ? String(e.message) : String(e);
        if (!error) error = "mermaid threw " + Object.prototype.toString.call(e);
      }
      // Failed renders can leave their scratch elements behind; drop them so later diagrams start clean.
      for (const el of document.querySelectorAll("[id^='dbertgraph-d'], [id^='ibertgraph-d']")) el.remove();
      results.push({ name, error, svg, console: captured });
    }
  } catch (e) {
    fatal = String((e && e.stack) || e);
  }
  const json = JSON.stringify({ results, fatal });
  // Base64 of UTF-8 survives the DOM dump byte for byte, whatever the SVGs contain.
  const bytes = new TextEncoder().encode(json);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  const pre = document.createElement("pre");
  pre.id = "__RESULTS_ID__";
  pre.textContent = btoa(binary);
  document.body.appendChild(pre);
})();
</script>
</body></html>
"""


def _page(diagrams: dict[str, str]) -> str:
    payload = json.dumps(list(diagrams.items()), ensure_ascii=True)
    # Inside a <script> element only "</script" or "<!--" could end the data early; escaping "<" rules both out.
    payload = payload.replace("<", "\\u003c")
    return (
        _PAGE_TEMPLATE.replace("__INPUT__", payload)
        .replace("__MERMAID_URL__", MERMAID_JS.as_uri())
        .replace("__RESULTS_ID__", _RESULTS_ID)
    )


def _tail(data: bytes | str, limit: int = 4000) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return text[-limit:] if text.strip() else "(empty)"


def _judge(text: str, raw: dict[str, Any]) -> MermaidResult:
    error = str(raw.get("error") or "")
    svg = str(raw.get("svg") or "")
    console = [str(line) for line in raw.get("console") or []]
    if not error and _TEXT_SIZE_MSG in svg:
        error = f"{_TEXT_SIZE_MSG}: mermaid drew its placeholder instead (maxTextSize {MAX_TEXT_SIZE})"
    if not error and len(text) > MAX_TEXT_SIZE:
        # Mermaid measures only after dropping %% comments and front matter; the raw length is the safe bound.
        error = f"{_TEXT_SIZE_MSG}: text is {len(text)} characters, over maxTextSize {MAX_TEXT_SIZE}"
    if not error and any(marker in svg for marker in _SYNTAX_ERROR_MARKERS):
        error = "mermaid rendered its syntax error diagram"
    if not error and not svg.lstrip().startswith("<svg"):
        error = "mermaid returned no SVG"
    if not error and console:
        error = "console errors: " + " | ".join(console)
    return MermaidResult(ok=not error, error=error, svg=svg)


# One Chromium per test process (and executable), kept between renders; each render is a page of its own
# at a URL of its own, so a page is never read before it has replaced the last one. Chromium's stderr goes to
# a file in a folder of the process's own, removed at exit with the browsers.
_BROWSERS: dict[str, Browser] = {}
_FOLDER: list[tempfile.TemporaryDirectory[str]] = []


def _stderr_file(chromium: str) -> Path:
    """Where the browser started from ``chromium`` writes its stderr: one file each."""
    if not _FOLDER:
        _FOLDER.append(tempfile.TemporaryDirectory(prefix="bertgraph-mermaid-browser-"))
    return Path(_FOLDER[0].name) / f"stderr-{hashlib.sha256(chromium.encode()).hexdigest()[:12]}.log"


def _said(chromium: str) -> str:
    path = _stderr_file(chromium)
    return _tail(path.read_bytes()) if path.exists() else "(empty)"


@atexit.register
def _close_browsers() -> None:
    while _BROWSERS:
        _BROWSERS.popitem()[1].close()
    while _FOLDER:
        _FOLDER.pop().cleanup()


def _browser(chromium: str, timeout: float) -> Browser:
    """The process's Chromium, started (or started again, if it ended) when needed."""
    browser = _BROWSERS.get(chromium)
    if browser is None or not browser.running():
        _BROWSERS.pop(chromium, None)
        _stderr_file(chromium).write_bytes(b"")
        started = time.monotonic()
        try:
            browser = Browser(timeout=timeout, stderr=_stderr_file(chromium))
        except (BrowserError, OSError) as error:  # a browser that exits at once leaves a broken pipe
            if time.monotonic() - started >= timeout:
                late = f"Chromium did not finish within {timeout:.0f}s ({error}); stderr:\n{_said(chromium)}"
                raise RuntimeError(late) from None
            raise RuntimeError(
                "the mermaid page never wrote its results (the browser ended before it answered); "
                f"Chromium stderr:\n{_said(chromium)}"
            ) from None
        _BROWSERS[chromium] = browser
    browser.timeout = timeout
    return browser


def _render_page(chromium: str, page: Path, timeout: float) -> str:
    """The results element's text once the page at ``page`` wrote it."""
    browser = _browser(chromium, timeout)
    url = page.as_uri()
    results = f"document.getElementById({json.dumps(_RESULTS_ID)})"
    try:
        browser.forget()
        browser.open(url)
        browser.wait_for(f"location.href === {json.dumps(url)} && {results} !== null", timeout=timeout)
        return str(browser.evaluate(f"{results}.textContent"))
    except (BrowserError, OSError) as error:
        _BROWSERS.pop(chromium).kill()
        raise RuntimeError(
            f"the mermaid page never wrote its results: Chromium did not finish within {timeout:.0f}s ({error}); "
            f"stderr:\n{_said(chromium)}"
        ) from None


def render_mermaid(diagrams: dict[str, str], timeout: float = 120) -> dict[str, MermaidResult]:
    """Render every diagram with mermaid.js in one headless Chromium page; results keyed like ``diagrams``.

    A diagram is ``ok`` only if ``mermaid.parse`` and ``mermaid.render`` both succeeded, nothing was logged through
    ``console.error``, and the SVG is neither mermaid's error diagram nor its "maximum text size" placeholder.
    Raises RuntimeError when the environment is missing pieces or the browser run itself breaks down.
    """
    if not diagrams:
        return {}
    reason = browser_available()
    if reason:
        raise RuntimeError(reason)
    chromium = chromium_path()
    assert chromium is not None
    with tempfile.TemporaryDirectory(prefix="bertgraph-mermaid-") as tmp:
        page = Path(tmp) / "render.html"
        page.write_text(_page(diagrams), encoding="utf-8")
        text = _render_page(chromium, page, timeout)
    data = json.loads(base64.b64decode(text).decode("utf-8"))
    if data.get("fatal"):
        raise RuntimeError(f"the mermaid page failed: {data['fatal']}")
    results = data["results"]
    if [r["name"] for r in results] != list(diagrams):
        raise RuntimeError(f"the mermaid page returned {len(results)} results for {len(diagrams)} diagrams")
    return {r["name"]: _judge(diagrams[r["name"]], r) for r in results}


class _TextCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.tags: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag in ("style", "script"):
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script") and self._hidden:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def svg_text(svg: str) -> str:
    """The text a reader sees in an SVG: character data with entities decoded, ``<style>`` contents left out."""
    collector = _TextCollector()
    collector.feed(svg)
    collector.close()
    return "".join(collector.parts)


def svg_elements(svg: str) -> set[str]:
    """Lower-cased names of all elements in an SVG (to tell markup apart from text that merely looks like it)."""
    collector = _TextCollector()
    collector.feed(svg)
    collector.close()
    return set(collector.tags)


class _NodeCentres(HTMLParser):
    """Each flowchart node's centre in the SVG's own coordinates: the translate()s of its groups summed."""

    def __init__(self) -> None:
        super().__init__()
        self.stack = [(0.0, 0.0)]
        self.found: dict[str, tuple[float, float]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "g":
            return
        values = dict(attrs)
        x, y = self.stack[-1]
        moved = re.match(r"translate\(([-\d.]+),\s*([-\d.]+)\)", values.get("transform") or "")
        if moved:
            x, y = x + float(moved.group(1)), y + float(moved.group(2))
        self.stack.append((x, y))
        node = re.search(r"flowchart-([A-Za-z0-9_]+)-\d+$", values.get("id") or "")
        if node:
            self.found[node.group(1)] = (x, y)

    def handle_endtag(self, tag: str) -> None:
        if tag == "g":
            self.stack.pop()


def node_centres(svg: str) -> dict[str, tuple[float, float]]:
    """Where mermaid.js put each node (id as written in the Mermaid text): x rightward, y downward."""
    parser = _NodeCentres()
    parser.feed(svg)
    return parser.found


def svg_width(svg: str) -> float:
    """The laid-out drawing's width (its viewBox)."""
    found = re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+)', svg)
    assert found, "no viewBox"
    return float(found.group(1))
