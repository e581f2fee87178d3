"""Formats people edit — TikZ (``.tex``) and draw.io (``.drawio``) — from any DOT bertgraph writes.

One entry point for every figure: a model's diagram, the families figures, a comparison of
two models. The DOT is laid out once by Graphviz (:mod:`bertgraph.render.layout`, the layout
the SVG is drawn from) and written by the format's writer, so a figure gains both formats by
handing its DOT source to :func:`editable_text`.
"""

from __future__ import annotations

FORMATS = ("tex", "drawio")


def editable_text(dot_source: str, fmt: str, title: str = "") -> str:
    """``dot_source`` laid out by Graphviz and written as ``fmt`` (``tex`` or ``drawio``).

    Raises:
        RenderError: Graphviz is missing or rejects the source, or ``fmt`` is not one of :data:`FORMATS`.
    """
    from bertgraph.errors import RenderError
    from bertgraph.render.layout import read_layout

    if fmt not in FORMATS:
        raise RenderError(f"unknown editable format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    layout = read_layout(dot_source)
    if fmt == "tex":
        from bertgraph.render.tikz import tikz_text

        return tikz_text(layout, title)
    from bertgraph.render.drawio import drawio_text

    return drawio_text(layout, title)
