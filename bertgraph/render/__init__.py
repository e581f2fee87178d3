"""Renderers: each turns plain data or a view graph into text of one format.

Every module has ``generate_*`` functions that return text (or yield lines) and
``write_*`` functions that write them. Escaping for a format lives in
:mod:`bertgraph.render.escape`; what a diagram shows is decided once, in
:mod:`bertgraph.render.diagram`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx

from bertgraph.errors import BertgraphError

SUFFIX_FORMATS = {
    ".svg": "svg",
    ".png": "png",
    ".pdf": "pdf",
    ".dot": "dot",
    ".gv": "dot",
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".md": "mermaid",
    ".graphml": "graphml",
    ".json": "json",
    ".html": "html",
    ".htm": "html",
    ".tex": "tex",
    ".drawio": "drawio",
}
PNG_DPI = 144


def diagram_format(path: Path, requested: str | None) -> str:
    """The format to write ``path`` in: as requested, else from its suffix; they must agree.

    >>> diagram_format(Path("bert.svg"), None), diagram_format(Path("a.md"), "mermaid")
    ('svg', 'mermaid')
    """
    implied = SUFFIX_FORMATS.get(path.suffix.lower())
    if requested is None:
        if implied is None:
            raise BertgraphError(
                f"cannot tell the format of {path.name}; use a suffix such as .svg .png .pdf .dot .mmd .md .html "
                ".tex .drawio or pass --format"
            )
        return implied
    if implied is not None and implied != requested:
        raise BertgraphError(
            f"--format {requested} does not match the file name {path.name}; "
            f"use a .{'mmd' if requested == 'mermaid' else requested} name or drop --format"
        )
    return requested


def write_diagram(
    graph: nx.DiGraph,
    path: Path,
    *,
    depth: int = 2,
    fold: bool = True,
    theme: str = "light",
    compare: nx.DiGraph | None = None,
    fmt: str | None = None,
    warn: Callable[[str], None] | None = None,
    annotate: str | None = None,
    edge_labels: str = "changes",
    css: str = "",
) -> Path:
    """Write a diagram of ``graph`` to ``path`` in one step (nothing is left behind on failure).

    ``annotate`` (``params``, ``flops``, ``memory``) puts that figure on every node and colours
    nodes by their share of the model total; graph files ignore it (they carry every figure).
    ``edge_labels`` (``shapes``, ``changes``, ``none``) says which edges show their shape;
    graph files ignore it too. ``css`` (a style sheet checked by
    :func:`bertgraph.render.restyle.check_style_sheet`) restyles an SVG or the page's drawings.
    ``tex`` and ``drawio`` write the drawing for TikZ and draw.io (:mod:`bertgraph.render.editable`).

    Only ``path`` is written. An image needs Graphviz: when ``dot`` is missing, or the
    diagram is too large for it to lay out in reasonable time, the error says which
    format or option does the job instead.
    """
    from bertgraph.files import write_atomic

    fmt = diagram_format(path, fmt)
    if theme == "auto" and fmt != "html":
        raise BertgraphError(
            f"--theme auto needs an interactive .html page; a {fmt} file has one theme: use light or dark"
        )
    options: dict[str, Any] = {"fold": fold, "theme": theme, "compare": compare, "edge_labels": edge_labels}
    if fmt == "html":
        if annotate:
            raise BertgraphError(
                "--annotate colours SVG, PNG, PDF, DOT and Mermaid diagrams, not the interactive .html page; "
                "write one of those formats"
            )
        from bertgraph.render import html

        return write_atomic(path, html.generate_html(graph, depth=depth, css=css, **options))
    if annotate:
        options["annotate"] = annotate
    if fmt == "mermaid":
        from bertgraph.render import mermaid

        result = mermaid.generate_mermaid(graph, depth=depth, **options)
        for note in result.notes:
            if warn:
                warn(note)
        text = mermaid.fenced(result.text) if path.suffix.lower() == ".md" else result.text
        return write_atomic(path, text)
    if fmt in ("graphml", "json"):
        from bertgraph.graph import io as graph_io
        from bertgraph.graph import views

        data = views.view(graph, depth, fold=fold)
        text = graph_io.graph_file_text(data, fmt)
        return write_atomic(path, text)
    if fmt == "dot":
        from bertgraph.render import dot

        return write_atomic(path, dot.generate_dot(graph, depth=depth, **options))
    if fmt in ("tex", "drawio"):
        from bertgraph.render.editable import editable_text

        source, title = laid_out_source(graph, fmt, depth=depth, output=path, **options)
        return write_atomic(path, editable_text(source, fmt, title))
    image = render_image(graph, fmt, depth=depth, output=path, **options)
    if css and fmt == "svg":
        from bertgraph.render.restyle import restyled_svg

        image = restyled_svg(image.decode("utf-8"), css).encode("utf-8")
    return write_atomic(path, image)


def render_image(
    graph: nx.DiGraph,
    fmt: str,
    *,
    depth: int = 2,
    fold: bool = True,
    theme: str = "light",
    compare: nx.DiGraph | None = None,
    annotate: str | None = None,
    output: Path | None = None,
    edge_labels: str = "changes",
) -> bytes:
    """SVG, PNG or PDF bytes of the diagram, laid out by Graphviz (checked to be feasible first)."""
    from bertgraph.render import graphviz_run

    source, _ = laid_out_source(
        graph,
        fmt,
        depth=depth,
        fold=fold,
        theme=theme,
        compare=compare,
        annotate=annotate,
        output=output,
        edge_labels=edge_labels,
    )
    image = graphviz_run.render(source, fmt)
    if fmt == "svg":
        from bertgraph.render.ids import legend_classes

        return legend_classes(image.decode("utf-8")).encode("utf-8")
    return image


def laid_out_source(
    graph: nx.DiGraph, fmt: str, *, depth: int = 2, theme: str = "light", output: Path | None = None, **options: Any
) -> tuple[str, str]:
    """The DOT source of a diagram Graphviz is about to lay out as ``fmt``, and its title.

    ``options`` are :func:`bertgraph.render.diagram.build`'s (``fold``, ``compare``, ``annotate``, ``edge_labels``).

    Raises:
        RenderError: Graphviz is missing, or the diagram is too large for it to lay out in reasonable time.
    """
    from bertgraph.render import dot, graphviz_run

    graphviz_run.require_dot(output)
    diagram = dot.build(graph, depth, **options)
    graphviz_run.check_size(len(diagram.edges))
    source = "\n".join(dot.generate_lines(diagram, theme, PNG_DPI if fmt == "png" else None)) + "\n"
    return source, diagram.title
