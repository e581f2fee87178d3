"""The MkDocs plugin: ```` ```bertgraph ```` fences drawn at build time.

In ``mkdocs.yml``::

    plugins:
      - bertgraph:            # all settings optional
          theme: auto         # default theme of every diagram (auto, light, dark)
          format: svg         # default format (svg, mermaid, html, table, summary)
          cache_dir: .cache/bertgraph

and in a page::

    ```bertgraph
    model: bert-base-uncased
    head: sequence-classification
    depth: 2
    edge-labels: none      # shapes, changes (default), none
    ```

The fence's body is YAML with the Sphinx directive's options. Each fence becomes inline
SVG (``svg``), a ```` ```mermaid ```` fence for sites that render Mermaid (MkDocs
Material), the interactive page in an iframe (``html``) or a text block (``table``,
``summary``). The plugin works in one event, ``on_page_markdown``; a fence it cannot draw
is a warning naming the page and the fence's line (``mkdocs build --strict`` then fails),
and the page is built without it.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

from mkdocs.config import base
from mkdocs.config import config_options as c
from mkdocs.plugins import BasePlugin

from bertgraph.docs.request import FORMATS, TEXT_FORMATS, THEMES, DiagramRequest, join_models, model_names, parse
from bertgraph.errors import BertgraphError, first_line

log = logging.getLogger("mkdocs.plugins.bertgraph")
_OPENING = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


class BertgraphConfig(base.Config):
    theme = c.Choice(THEMES, default="auto")
    format = c.Choice(FORMATS, default="svg")
    cache_dir = c.Type(str, default=".cache/bertgraph")


class Fence:
    """One ```` ```bertgraph ```` fence: where it is and what it says."""

    def __init__(self, first: int, last: int, body: str) -> None:
        self.first, self.last, self.body = first, last, body


def find_fences(markdown: str) -> list[Fence]:
    """The ``bertgraph`` fences of a page (0-based first and last line), skipping those inside other fences.

    >>> page = "a\\n```bertgraph\\nmodel: x\\n```\\n````md\\n```bertgraph\\n```\\n````"
    >>> [(f.first, f.last, f.body) for f in find_fences(page)]
    [(1, 3, 'model: x')]
    """
    lines = markdown.split("\n")
    fences: list[Fence] = []
    index = 0
    while index < len(lines):
        opening = _OPENING.match(lines[index])
        if not opening:
            index += 1
            continue
        fence = opening.group("fence")
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = next((i for i in range(index + 1, len(lines)) if closing.match(lines[i])), len(lines))
        if opening.group("info").strip() == "bertgraph":
            fences.append(Fence(index, end, "\n".join(lines[index + 1 : end])))
        index = end + 1
    return fences


def _code_fence(text: str, language: str) -> str:
    """``text`` in a backtick fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language}\n{text.rstrip(chr(10))}\n{ticks}"


class BertgraphPlugin(BasePlugin[BertgraphConfig]):
    """Draws ```` ```bertgraph ```` fences (entry point ``bertgraph`` in ``mkdocs.plugins``)."""

    def __init__(self) -> None:
        self._renderer: Any = None

    def _drawer(self, config: Any) -> Any:
        if self._renderer is None:
            from bertgraph.docs.renderer import DiagramRenderer

            self._renderer = DiagramRenderer(
                _site_root(config) / self.config.cache_dir,
                on_render=lambda what: log.info("bertgraph: drew %s", what),
                on_trace=lambda what: log.info("bertgraph: traced %s", what),
            )
        return self._renderer

    def on_page_markdown(self, markdown: str, /, *, page: Any, config: Any, files: Any) -> str:
        fences = find_fences(markdown)
        if not fences:
            return markdown
        where = _page_path(page, config)
        offset = _front_matter_lines(page, markdown)
        self._draw_ahead(fences, config, _page_folder(page))
        lines = markdown.split("\n")
        folder = _page_folder(page)
        for fence in reversed(fences):
            line = fence.first + 1 + offset
            try:
                replacement = self._draw(fence.body, config, folder)
            except BertgraphError as error:
                line += getattr(error, "line", 0)  # the fence's own line that is wrong, when known
                log.warning("%s:%d: bertgraph: %s", where, line, first_line(error))
                replacement = ""
            lines[fence.first : fence.last + 1] = ["", *replacement.split("\n"), ""]
        return "\n".join(lines)

    def _draw_ahead(self, fences: list[Fence], config: Any, folder: Path | None) -> None:
        """Draw the page's SVG and HTML pieces together (their layouts overlap); errors wait for their fence."""
        requests = []
        for fence in fences:
            try:
                request = self._request(fence.body, folder)
            except BertgraphError:
                continue
            if request.format != "mermaid" and request.format not in TEXT_FORMATS:
                requests.append(request)
        if requests:
            self._drawer(config).html_all(requests)

    def _draw(self, body: str, config: Any, folder: Path | None) -> str:
        return self._markdown(self._request(body, folder), config)

    def _request(self, body: str, folder: Path | None) -> DiagramRequest:
        options = fence_options(body)
        if isinstance(options.get("model"), str) and folder is not None:
            # a figure of several models names each one (separated by commas, or by spaces without one)
            figure = options.get("figure") not in (None, "diagram")
            names = model_names(options["model"]) if figure else [options["model"]]
            options["model"] = join_models([page_relative(name, folder) for name in names])
        if isinstance(options.get("css"), str) and folder is not None:
            options["css"] = str(folder / os.path.expanduser(options["css"]))  # beside the page, as models are
        return parse(options, {"theme": self.config.theme, "format": self.config.format})

    def _markdown(self, request: DiagramRequest, config: Any) -> str:
        drawer = self._drawer(config)
        if request.format == "mermaid":
            return _code_fence(drawer.mermaid(request, warn=lambda note: log.info("bertgraph: %s", note)), "mermaid")
        if request.format in TEXT_FORMATS:
            return _code_fence(drawer.text(request), "text")
        # Markdown passes an HTML block through untouched until its first blank line.
        return "\n".join(line for line in drawer.html(request).split("\n") if line.strip())


class FenceError(BertgraphError):
    """A fence that is not 'option: value' lines; ``line`` is the wrong line within the fence (1: its first)."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.line = line


def fence_options(body: str) -> dict[str, Any]:
    r"""The options of a fence's YAML body; an option given twice is an error, not the last one silently.

    >>> fence_options("model: bert-tiny\ndepth: 3")
    {'model': 'bert-tiny', 'depth': 3}
    >>> fence_options("model: a\ndepth: 2\ndepth: 3")
    Traceback (most recent call last):
    ...
    bertgraph.docs.mkdocs.FenceError: option 'depth' is given twice (lines 2 and 3 of the fence); keep one
    """
    import yaml

    class _Loader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise FenceError(
                        f"option {key!r} is given twice (lines {seen[key]} and {line} of the fence); keep one", line
                    )
                seen[key] = line
            return super().construct_mapping(node, deep=deep)

    try:
        options = yaml.load(body, Loader=_Loader) if body.strip() else {}  # _Loader is a SafeLoader
    except yaml.YAMLError as error:
        raise FenceError(f"the fence is not YAML ({first_line(error)}); write one 'option: value' a line") from None
    except TypeError as error:  # a key YAML cannot hash (a list as an option name)
        raise FenceError(f"the fence holds 'option: value' lines ({first_line(error)})") from None
    if not isinstance(options, dict):
        raise FenceError("the fence holds 'option: value' lines, starting with 'model: bert-base-uncased'")
    return options


def page_relative(model: str, folder: Path) -> str:
    """A local path in a fence read from the page's folder, as Sphinx reads a directive's.

    A preset or hub id is left as written. A relative path that exists only from the
    working directory is not taken from there: the page's folder is named, so the error
    says where bertgraph looked.
    """
    path = Path(os.path.expanduser(model))
    if path.is_absolute():
        return model
    beside = folder / path
    if beside.exists() or path.exists():
        return str(beside)
    return model


def _page_folder(page: Any) -> Path | None:
    source = getattr(page.file, "abs_src_path", None)
    return Path(source).parent if source else None


def _page_path(page: Any, config: Any) -> str:
    """The page's source file as the author would name it (relative to mkdocs.yml's folder)."""
    source = getattr(page.file, "abs_src_path", None)
    if source:
        try:
            return os.path.relpath(source, _site_root(config))
        except ValueError:
            return str(source)
    return str(page.file.src_uri)


def _site_root(config: Any) -> Path:
    """The folder of ``mkdocs.yml``; the working directory for a config that came from no file."""
    return Path(config.config_file_path).resolve().parent if config.config_file_path else Path.cwd()


def _front_matter_lines(page: Any, markdown: str) -> int:
    """How many lines of YAML front matter MkDocs took off the top of the page."""
    source = getattr(page.file, "abs_src_path", None)
    try:
        text = Path(source).read_text(encoding="utf-8-sig") if source else ""  # line ends read as \n
    except OSError:
        return 0
    if not text.endswith(markdown):
        return 0
    return text[: len(text) - len(markdown)].count("\n")
