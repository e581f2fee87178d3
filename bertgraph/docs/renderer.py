"""Draw what a docs page asked for, as little as possible.

Two caches keep a docs build cheap:

- graphs: a model is traced once per build process (an in-process memo in front of the
  on-disk graph cache); processes building side by side (``sphinx-build -j 2``) take the
  cache's build lock, so the second one reads what the first traced;
- drawings: every finished drawing is kept in a folder the builder owns, under a key of
  everything that shapes it (the request, the graph cache key of its model, bertgraph's
  rendering code). A rebuild draws only what changed; a hit needs neither torch nor the
  graph.

Drawings of one model at several depths, themes and formats share their views: each
(graph, depth, folding) is computed once per process (:class:`~bertgraph.graph.views.KeptViews`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import networkx as nx

from bertgraph import cache
from bertgraph.docs.request import DiagramRequest
from bertgraph.errors import BertgraphError
from bertgraph.files import write_atomic
from bertgraph.graph.views import KeptViews
from bertgraph.model import ModelSpec
from bertgraph.version import __version__

if TYPE_CHECKING:
    from concurrent.futures import Executor

_GRAPHS: dict[str, nx.DiGraph] = {}
_GRAPHS_LOCK = threading.Lock()
_VIEWS = KeptViews()  # the memoised graphs are never changed, so their views can be kept
_CODE: list[str] = []
_LAYOUT_WORKERS = min(4, os.cpu_count() or 1)  # Graphviz runs beside the Python work of the next diagrams
# The folders whose code shapes a drawing (the graph code is in the graph cache key).
_DRAWING_CODE = ("render", "render/assets", "docs")


def graph_of(spec: ModelSpec, on_trace: Callable[[str], None] | None = None) -> nx.DiGraph:
    """The graph of ``spec``: from this process's memo, the graph cache, or one trace (reported to ``on_trace``)."""
    use_cache = cache.enabled()
    key = _memo_key(spec)
    with _GRAPHS_LOCK:
        if key in _GRAPHS:
            return _GRAPHS[key]
        graph = cache.load(spec) if use_cache else None
        if graph is None:
            with cache.building(spec) if use_cache else contextlib.nullcontext():
                graph = cache.load(spec) if use_cache else None
                if graph is None:
                    from bertgraph.api import annotated_trace

                    graph = annotated_trace(spec)
                    _set_aside_what_lives_on()
                    if use_cache:
                        cache.store(spec, graph)
                    if on_trace:
                        on_trace(f"{spec.name} ({spec.head})")
        _GRAPHS[key] = graph
        _VIEWS.add(graph)
        return graph


def _memo_key(spec: ModelSpec) -> str:
    return cache.key(spec) if cache.enabled() else repr(spec)


def _set_aside_what_lives_on() -> None:
    """Spare later collections and the builder's exit a walk over every object torch made.

    A trace ends with a collection, so what is left is what lives on: torch, transformers,
    the model classes and the graph. The next trace's collections, the builder's own and the
    interpreter's last ones at exit would visit those millions of objects again (about a
    quarter of a second each; a second at exit, more than several diagrams cost). Frozen
    objects are not visited (``gc.freeze``); they are still freed as their modules are torn
    down. Objects made after the last trace are frozen at exit.
    """
    from bertgraph.tracing import collector

    collector.set_aside()


def _code_digest() -> str:
    if not _CODE:
        digest = hashlib.sha256(__version__.encode())
        root = Path(__file__).resolve().parent.parent
        for folder in _DRAWING_CODE:
            for file in sorted((root / folder).glob("*.*")):
                digest.update(file.name.encode())
                digest.update(file.read_bytes())
        _CODE.append(digest.hexdigest()[:16])
    return _CODE[0]


class DiagramRenderer:
    """Draws requests into one drawings folder; ``on_render`` hears of every drawing actually made.

    Parameters:
        folder: where finished drawings are kept (``None``: kept nowhere).
        on_render: called with a description of each drawing made (a cache miss).
        on_trace: called with the model of each trace made (a graph cache miss).
    """

    def __init__(
        self,
        folder: Path | None,
        on_render: Callable[[str], None] | None = None,
        on_trace: Callable[[str], None] | None = None,
    ) -> None:
        self.folder = folder
        self.on_render = on_render
        self.on_trace = on_trace
        self._made: dict[str, bytes] = {}  # drawn ahead by html_all, by key

    def key(self, request: DiagramRequest, output: str) -> str:
        """The drawings-folder key of ``request`` drawn as ``output``."""
        material = {
            "request": request.as_dict(),
            "output": output,
            "graphs": [cache.key(spec) for spec in request.specs()],
            "code": _code_digest(),
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]

    def _kept(self, key: str, suffix: str) -> bytes | None:
        if self.folder is None:
            return None
        try:
            return (self.folder / f"{key}{suffix}").read_bytes()
        except OSError:
            return None

    def _keep(self, key: str, suffix: str, data: bytes) -> None:
        if self.folder is None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_atomic(self.folder / f"{key}{suffix}", data)
        except OSError:
            return  # a read-only drawings folder only costs time

    def _drawn(self, request: DiagramRequest, output: str, suffix: str, draw: Callable[[], bytes]) -> bytes:
        key = self.key(request, output)
        kept = self._kept(key, suffix)
        if kept is not None:
            return kept
        with _VIEWS.active():
            data = draw()
        self._keep(key, suffix, data)
        if self.on_render:
            self.on_render(f"{request.describe()} as {output}")
        return data

    def _graphs(self, request: DiagramRequest) -> tuple[nx.DiGraph, nx.DiGraph | None]:
        graph = graph_of(request.spec(), self.on_trace)
        return graph, graph_of(request.spec(request.compare), self.on_trace) if request.compare else None

    # --- what builders ask for --------------------------------------------------------
    def html(self, request: DiagramRequest) -> str:
        """The drawing as a piece of an HTML page: inline SVG (svg, mermaid) or an iframe (html)."""
        output = _html_output(request)
        made = self._made.get(self.key(request, output))
        if made is not None:
            return made.decode("utf-8")
        return self._drawn(request, output, ".html", lambda: self._start_html(request, None)()).decode("utf-8")

    def html_all(self, requests: Sequence[DiagramRequest]) -> None:
        """Draw the HTML pieces of ``requests`` ahead of :meth:`html`, Graphviz laying out beside the rest.

        Each layout runs while the next diagrams' DOT is written and their models traced, so
        a page of diagrams costs about its Python work. A request that fails is left for
        :meth:`html` to draw again and report where the builder can say which directive it was.
        """
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=_LAYOUT_WORKERS)
        try:
            with _VIEWS.active():
                self._draw_together(requests, pool)
        finally:
            pool.shutdown(cancel_futures=True)  # an interrupted build starts no more layouts; none outlive this call

    def _draw_together(self, requests: Sequence[DiagramRequest], pool: Executor) -> None:
        keyed: list[tuple[str, DiagramRequest]] = []
        for request in requests:
            try:
                keyed.append((self.key(request, _html_output(request)), request))
            except BertgraphError:  # a model that no longer resolves: html() reports it at its directive
                continue
        started: dict[str, tuple[DiagramRequest, Callable[[], bytes]]] = {}
        # Layouts start before the next trace: those whose graphs are at hand first.
        for key, request in sorted(keyed, key=lambda pair: self._traces_needed(pair[1])):
            if key in started or key in self._made or self._kept(key, ".html") is not None:
                continue
            try:
                started[key] = (request, self._start_html(request, pool))
            except BertgraphError:
                continue
        page_order = dict.fromkeys(key for key, _ in keyed)
        for key in (key for key in page_order if key in started):  # finished in the page's order, as logged
            request, finish = started[key]
            try:
                data = finish()
            except BertgraphError:
                continue
            self._made[key] = data
            self._keep(key, ".html", data)
            if self.on_render:
                self.on_render(f"{request.describe()} as {_html_output(request)}")

    def _traces_needed(self, request: DiagramRequest) -> int:
        return sum(_memo_key(spec) not in _GRAPHS for spec in request.specs())

    def _start_html(self, request: DiagramRequest, pool: Executor | None) -> Callable[[], bytes]:
        """Begin drawing ``request`` (graphs, DOT); the returned call gives the bytes once Graphviz is done.

        With ``pool``, Graphviz lays the SVG out in it; without, here and now.
        """
        from bertgraph.render import embed, graphviz_run

        if request.figure != "diagram":
            graphs = [graph_of(spec, self.on_trace) for spec in request.specs()]
            source = figure_source(graphs, request)
            key = self.key(request, "inline-svg")
            label = f"{request.figure} of {', '.join(request.names())}"
            if pool is None:
                svg = graphviz_run.render(source, "svg")
                return lambda: _svg_fragment(svg, label, request, key).encode("utf-8")
            made = pool.submit(graphviz_run.render, source, "svg")
            return lambda: _svg_fragment(made.result(), label, request, key).encode("utf-8")
        graph, compare = self._graphs(request)
        if request.format == "html":
            from bertgraph.render.html import generate_html

            page = generate_html(
                graph, request.depth, not request.unfold, request.theme, compare, request.edge_labels, request.css
            )
            data = embed.iframe(page, _title(graph, request)).encode("utf-8")
            return lambda: data
        source = _svg_source(graph, compare, request)
        key = self.key(request, "inline-svg")
        if pool is None:
            svg = graphviz_run.render(source, "svg")
            return lambda: _svg_fragment(svg, _label(graph, request), request, key).encode("utf-8")
        layout = pool.submit(graphviz_run.render, source, "svg")
        return lambda: _svg_fragment(layout.result(), _label(graph, request), request, key).encode("utf-8")

    def png(self, request: DiagramRequest) -> tuple[str, bytes]:
        """A PNG for print builders (LaTeX): its stable file name and bytes."""

        def draw() -> bytes:
            from bertgraph.render import PNG_DPI, graphviz_run

            if request.figure != "diagram":
                graphs = [graph_of(spec, self.on_trace) for spec in request.specs()]
                return graphviz_run.render(figure_source(graphs, request, PNG_DPI), "png")
            graph, compare = self._graphs(request)
            return graphviz_run.render(_svg_source(graph, compare, request, PNG_DPI), "png")

        return f"bertgraph-{self.key(request, 'png')}.png", self._drawn(request, "png", ".png", draw)

    def text(self, request: DiagramRequest) -> str:
        """The table (``table``: every parameter and the groups; ``summary``: the module tree) as text."""

        def draw() -> bytes:
            from bertgraph.graph import stats
            from bertgraph.render import text

            graph = graph_of(request.spec(), self.on_trace)  # one model's table
            if request.format == "table":
                lines = text.generate_params(stats.parameter_stats(graph))
            else:
                lines = text.generate_summary(stats.summary(graph, depth=request.depth, fold=not request.unfold))
            return ("\n".join(lines) + "\n").encode("utf-8")

        return self._drawn(request, "text", ".txt", draw).decode("utf-8")

    def mermaid(self, request: DiagramRequest, warn: Callable[[str], None] | None = None) -> str:
        """Mermaid text for sites that render Mermaid in the browser."""

        def draw() -> bytes:
            from bertgraph.render import mermaid

            graph, compare = self._graphs(request)
            theme = "dark" if request.theme == "dark" else "light"
            result = mermaid.generate_mermaid(
                graph, request.depth, not request.unfold, theme, compare, edge_labels=request.edge_labels
            )
            for note in result.notes:
                if warn:
                    warn(note)
            return result.text.encode("utf-8")

        return self._drawn(request, "mermaid", ".mmd", draw).decode("utf-8")


def _title(graph: nx.DiGraph, request: DiagramRequest) -> str:
    from bertgraph.graph import schema as g

    return f"{graph.graph.get(g.G_NAME, request.model)} · {graph.graph.get(g.G_MODEL_CLASS, '')}"


def _html_output(request: DiagramRequest) -> str:
    return "page" if request.format == "html" else "inline-svg"


def _inline_svg(graph: nx.DiGraph, compare: nx.DiGraph | None, request: DiagramRequest, key: str) -> str:
    from bertgraph.render import graphviz_run

    svg = graphviz_run.render(_svg_source(graph, compare, request), "svg")
    return _svg_fragment(svg, _label(graph, request), request, key)


def _label(graph: nx.DiGraph, request: DiagramRequest) -> str:
    return f"{_title(graph, request)}, depth {request.depth}"


def figure_source(graphs: list[nx.DiGraph], request: DiagramRequest, dpi: int | None = None) -> str:
    """The DOT of a figure of several models: the families schematic, or their attention masks."""
    if request.figure == "schematic":
        from bertgraph.render import schematic

        return "\n".join(schematic.generate_lines(graphs, dpi)) + "\n"
    from bertgraph.graph.masks import example_for
    from bertgraph.render import masks

    example = example_for(graphs, request.seq_len)
    found = masks.masks_of(zip(request.names(), graphs), example)
    return masks.dot_source(found, dpi)


def _svg_source(graph: nx.DiGraph, compare: nx.DiGraph | None, request: DiagramRequest, dpi: int | None = None) -> str:
    """The diagram's DOT (``dpi``: a PNG's), refused as every Graphviz layout is when dot would take minutes."""
    from bertgraph.render import dot, graphviz_run

    theme = "dark" if request.theme == "dark" else "light"
    diagram = dot.build(graph, request.depth, not request.unfold, compare, edge_labels=request.edge_labels)
    graphviz_run.check_size(len(diagram.edges))
    return "\n".join(dot.generate_lines(diagram, theme, dpi)) + "\n"


def _svg_fragment(image: bytes, label: str, request: DiagramRequest, key: str) -> str:
    """The laid-out SVG as the page's piece: ids of its own, its label, the theme's styling."""
    from bertgraph.render import embed
    from bertgraph.render.ids import legend_classes

    svg = legend_classes(image.decode("utf-8"))
    body = embed.inline_svg(svg, f"bg{key[:8]}-", label)
    restyled, style = "", ""
    if request.css:
        from bertgraph.render.restyle import scoped

        # scoped to this drawing: the page holds the theme's own markup and other drawings
        restyled = f" bertgraph-css-{hashlib.sha256(request.css.encode()).hexdigest()[:8]}"
        style = f"<style>{scoped(request.css, '.' + restyled.strip())}</style>"
    if request.theme == "auto":
        themed = embed.auto_theme_style("bertgraph-auto")
        return f'<div class="bertgraph bertgraph-auto{restyled}">{themed}{style}{body}</div>'
    return f'<div class="bertgraph bertgraph-{request.theme}{restyled}">{style}{body}</div>'
