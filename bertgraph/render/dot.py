"""Graphviz DOT for a :class:`~bertgraph.render.diagram.Diagram`.

Labels are HTML-like (bold names, small grey detail lines); every piece of text goes
through :func:`~bertgraph.render.escape.dot_html` or
:func:`~bertgraph.render.escape.dot_string`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import networkx as nx

from bertgraph.files import write_atomic
from bertgraph.render import style
from bertgraph.render.diagram import (
    HEAT_LABELS,
    Cluster,
    Diagram,
    Node,
    build,
    residual_label,
)
from bertgraph.render.escape import dot_html, dot_id, dot_string
from bertgraph.render.ids import ElementIds, class_text, look_classes

FONT = "Helvetica,Arial,sans-serif"


def _attrs(**values: str | float | int) -> str:
    """``[key=value, ...]``; values that start with ``<`` are HTML labels, kept as they are."""
    parts = []
    for key, value in values.items():
        text = str(value)
        parts.append(f"{key}={text}" if text.startswith("<") and text.endswith(">") else f"{key}={dot_string(text)}")
    return "[" + ", ".join(parts) + "]"


def _node_label(node: Node, detail: str) -> str:
    lines = [f"<b>{dot_html(node.title)}</b>"]
    lines += [f'<font point-size="9" color="{detail}">{dot_html(line)}</font>' for line in node.lines]
    return "<" + "<br/>".join(lines) + ">"


# A module box's title longer than this goes on two lines, its class on the second: a box is at
# least as wide as its title, and mT5's "DenseReluDense · MT5DenseGatedActDense · 1.57M params"
# was the widest thing in its layers (at depth 3 the drawing was 137 points wider for it).
TITLE_CHARACTERS = 24


def _cluster_label(cluster: Cluster) -> str:
    if cluster.role in ("backbone", "head", "variant"):
        return f"<<b>{dot_html(cluster.title)}</b>>"
    parts = cluster.title.split(" · ")
    if len(cluster.title) <= TITLE_CHARACTERS or len(parts) < 3:
        return f"<{dot_html(cluster.title)}>"
    first = " · ".join([parts[0], *parts[2:]])
    return f'<{dot_html(first)}<br align="left"/>{dot_html(parts[1])}<br align="left"/>>'  # left, as labeljust


# Graphviz's shape and style for each shape of style.Look.
_SHAPES = {
    "box": ("box", "rounded,filled"),
    "ellipse": ("ellipse", "filled"),
    "io": ("box", "rounded,filled,dashed"),
    "circle": ("circle", "filled"),
}


def node_classes(node: Node) -> list[str]:
    """A box's classes: its role and kind, its heat bin when annotated, ``added`` when highlighted."""
    classes = look_classes(node.kind, node.base)
    classes += [f"heat-{node.heat}"] if node.heat is not None else []
    return classes + (["added"] if node.highlight else [])


def cluster_classes(cluster: Cluster) -> list[str]:
    return [f"cluster-{cluster.role}"] + (["added"] if cluster.highlight else [])


def cluster_name(cluster: Cluster) -> str:
    """The name a frame's id comes from: its module path, or for the backbone, head and variant frames a
    name no module has (``bertgraph.head``, not the ``head`` module some models have)."""
    if cluster.role in ("backbone", "head", "variant") and cluster.id.endswith(cluster.role):
        return cluster.id[: -len(cluster.role)] + "bertgraph." + cluster.role
    return cluster.id


def _node_line(node: Node, colours: dict[str, Any], theme: str, ident: str, element: str) -> str:
    kind = style.look(node.kind, theme)
    fill, stroke, text = kind.fill, kind.stroke, kind.text
    if node.heat is not None:
        fill, stroke, text = colours["heat"][node.heat]
    shape, drawn = _SHAPES[kind.shape]
    attrs: dict[str, str | float] = {
        "id": element,
        "class": class_text(node_classes(node)),
        # Every line in the text colour of the node's own fill: grey details were 2.3:1 on causal attention.
        "label": _node_label(node, text),
        "tooltip": node.tooltip,
        "fillcolor": fill,
        "color": stroke,
        "fontcolor": text,
    }
    if shape != "box":
        attrs["shape"] = shape
    if drawn != "rounded,filled":
        attrs["style"] = drawn
    if node.highlight:
        attrs["penwidth"] = 2.5
        attrs["color"] = colours["added"]
    return f"{dot_string(ident)} {_attrs(**attrs)}"


def _cluster_lines(cluster: Cluster, theme: str, element: str) -> list[str]:
    frame, width = style.cluster_look(cluster.role, cluster.highlight, theme)
    return [
        f"id={dot_string(element)}",
        f"class={dot_string(class_text(cluster_classes(cluster)))}",
        f"label={_cluster_label(cluster)}",
        f"tooltip={dot_string(cluster.title)}",
        f'style="rounded,filled{",dashed" if frame.line == "dashed" else ""}"',
        f"fillcolor={dot_string(frame.fill)}",
        f"color={dot_string(frame.stroke)}",
        f"penwidth={width}",
        f"fontcolor={dot_string(frame.text)}",
        "labeljust=l",
    ]


# Legend entries per row: a row under the caption instead of a column beside the drawing (the
# column cost BERT's depth-2 drawing 130 of its 1,049 points of width).
LEGEND_PER_ROW = 4


def _swatch(fill: str, border: str, name: str, colours: dict[str, Any], attrs: str = "") -> str:
    return (
        f'<td bgcolor="{fill}" color="{border}" border="1" width="14"{attrs}> </td>'
        f'<td align="left"><font point-size="10" color="{colours["text"]}">{dot_html(name)}</font></td>'
    )


def _legend_cells(diagram: Diagram, colours: dict[str, Any], theme: str) -> list[str]:
    cells = []
    for kind in diagram.kinds:
        swatch = style.look(kind, theme)
        cells.append(_swatch(swatch.fill, swatch.stroke, diagram.kind_name(kind), colours))
    if diagram.cross:
        cross = style.edge_look("cross", theme).stroke
        cells.append(_swatch(cross, cross, style.EDGE_KINDS["cross"], colours, ' height="3"'))
    if diagram.compare:
        cells.append(
            f'<td color="{colours["added"]}" border="2" width="14"> </td>'
            f'<td align="left"><font point-size="10" color="{colours["text"]}">only in this variant</font></td>'
        )
    return cells


def _rows(cells: list[str]) -> str:
    rows = [cells[i : i + LEGEND_PER_ROW] for i in range(0, len(cells), LEGEND_PER_ROW)]
    return "".join("<tr>" + "".join(row) + "</tr>" for row in rows)


def _legend(diagram: Diagram, colours: dict[str, Any], theme: str) -> list[str]:
    """The legend as rows of swatches (tables inside the title block); the heat scale as one more."""
    tables = []
    cells = _legend_cells(diagram, colours, theme)
    if cells:
        tables.append(f'<table border="0" cellspacing="2" cellpadding="1">{_rows(cells)}</table>')
    if diagram.scale:
        heat = [_swatch(p.fill, p.border, label, colours) for p, label in zip(colours["heat"], HEAT_LABELS)]
        tables.append(
            f'<table border="0" cellspacing="2" cellpadding="1"><tr><td colspan="{2 * LEGEND_PER_ROW}" align="left">'
            f'<font point-size="10" color="{colours["text"]}"><b>{dot_html(diagram.scale)}</b></font></td></tr>'
            f"{_rows(heat)}</table>"
        )
    return tables


def _title(diagram: Diagram, colours: dict[str, Any], theme: str) -> str:
    """Title, subtitle, caption lines and legend: one HTML-like table at the top left."""
    texts = [
        f'<font point-size="18"><b>{dot_html(diagram.title)}</b></font>',
        f'<font point-size="11" color="{colours["muted"]}">{dot_html(diagram.subtitle)}</font>',
    ]
    texts += [f'<font point-size="11" color="{colours["text"]}">{dot_html(line)}</font>' for line in diagram.caption]
    rows = [f'<tr><td align="left">{text}</td></tr>' for text in texts]
    rows += [f'<tr><td align="left">{table}</td></tr>' for table in _legend(diagram, colours, theme)]
    return '<<table border="0" cellspacing="0" cellpadding="1">' + "".join(rows) + "</table>>"


def generate_lines(
    diagram: Diagram,
    theme: str = "light",
    dpi: int | None = None,
    ids: dict[str, str] | None = None,
    edge_xlabels: bool = False,
    element_ids: dict[str, str] | None = None,
) -> Iterable[str]:
    """DOT source lines for ``diagram``.

    ``ids``, when given, is filled with the DOT id of every node and cluster (Graphviz
    writes them into the SVG's ``<title>`` elements). ``element_ids`` is filled with the
    stable id (:mod:`bertgraph.render.ids`) of every node, by the diagram's node id: Graphviz
    writes it as the ``id`` of the node's SVG group, which is how a viewer finds it.
    ``edge_xlabels`` places edge labels after layout instead of giving them ranks of their
    own: a large drawing lays out several times faster, at the cost of labels that may
    sit less neatly.
    """
    colours = style.theme(theme)
    title = _title(diagram, colours, theme)
    yield "digraph bertgraph {"
    graph_attrs = {
        "rankdir": "TB",
        "newrank": "true",
        "compound": "true",
        "fontname": FONT,
        "bgcolor": colours["background"],
        "fontcolor": colours["text"],
        "label": title,
        "labelloc": "t",
        "labeljust": "l",
        # 18 points between neighbours: an encoder-decoder's layers have a dozen edges running
        # beside them (skips, masks, the position bias handed to the folded layers); at 0.3 they
        # alone made T5's depth-3 drawing 43 points wider.
        "nodesep": 0.25,
        "ranksep": 0.42,
        "pad": 0.3,
    }
    if dpi:
        graph_attrs["dpi"] = dpi
    yield f"  graph {_attrs(**graph_attrs)}"
    node_defaults = _attrs(
        fontname=FONT, shape="box", style="rounded,filled", fontsize=11, margin="0.16,0.06", penwidth=1.2
    )
    edge_defaults = _attrs(
        fontname=FONT, fontsize=9, color=colours["edge"], fontcolor=colours["muted"], arrowsize=0.6, penwidth=1.1
    )
    yield f"  node {node_defaults}"
    yield f"  edge {edge_defaults}"

    nodes_in = diagram.nodes_by_cluster()
    children = diagram.clusters_by_parent()

    ids = {} if ids is None else ids

    def ident(name: str) -> str:
        return dot_id(name, ids)

    elements = ElementIds()

    # Graphviz places the clusters of one rank right to left in the order they are written
    # (measured on every encoder-decoder at depths 2-4): the right-hand stack goes first.
    righthand: set[str | None] = set()
    parents = {c.id: c.parent for c in diagram.clusters}
    for _, right in diagram.left_of:
        cluster = diagram.membership.get(right)
        while cluster is not None:
            righthand.add(cluster)
            cluster = parents.get(cluster)

    # An encoder-decoder's outputs sit in its backbone (render/compact.py); written before the
    # stacks they changed which stack Graphviz placed first (T5 at depths 2 and 4), after them not.
    last = set(diagram.bottom)

    def emit(parent: str | None, indent: str) -> Iterable[str]:
        nodes = nodes_in.get(parent, [])
        for node in nodes:
            if node.id not in last or parent is None:
                yield indent + _node_line(node, colours, theme, ident(node.id), elements(node.id))
        for cluster in sorted(children.get(parent, []), key=lambda c: c.id not in righthand):
            yield f"{indent}subgraph {dot_string('cluster_' + ident('cluster ' + cluster.id))} {{"
            for line in _cluster_lines(cluster, theme, elements(cluster_name(cluster))):
                yield f"{indent}  {line}"
            yield from emit(cluster.id, indent + "  ")
            yield f"{indent}}}"
        for node in nodes:
            if node.id in last and parent is not None:
                yield indent + _node_line(node, colours, theme, ident(node.id), elements(node.id))

    yield from emit(None, "  ")
    roles = {node.id: node.role for node in diagram.nodes}
    for edge in diagram.edges:
        label_key = "xlabel" if edge_xlabels else "label"
        attrs: dict[str, str | float] = {"id": elements.edge(edge.source, edge.target), "class": f"edge-{edge.style}"}
        attrs.update({label_key: f" {edge.label} "} if edge.label else {})
        line = style.edge_look(edge.style, theme)
        if line.line != "solid":
            attrs["style"] = line.line
        if line.stroke != colours["edge"]:
            attrs["color"] = line.stroke
        if edge.style == "residual":
            attrs[label_key] = f" {residual_label(edge.label)} "
        crosses = diagram.sides.get(edge.source) == "encoder" != diagram.sides.get(edge.target, "encoder")
        if edge.style == "cross" or (crosses and (edge.style != "mask" or roles.get(edge.target) == "stack")):
            # Ranked like every edge (the decoder's cross-attention sits below the encoder's output), but
            # pulling neither stack's column toward the other: cross-attention, and its padding mask where the
            # decoder is one box (inside a frame the mask pulls only a row; let loose, it ran round the encoder).
            attrs["weight"] = "0"
        yield f"  {dot_string(ident(edge.source))} -> {dot_string(ident(edge.target))} {_attrs(**attrs)}"
    for group in diagram.same_rank:
        yield "  { rank=same; " + " ".join(dot_string(ident(n)) + ";" for n in group) + " }"
    for above, under in diagram.below:
        # Invisible: it only ranks ``under`` lower; no data runs along it (the layout rules ignore it).
        yield f"  {dot_string(ident(above))} -> {dot_string(ident(under))} [style=invis]"
    if diagram.bottom:
        yield "  { rank=max; " + " ".join(dot_string(ident(n)) + ";" for n in diagram.bottom) + " }"
        # Left to right in this order (the encoder's output first), outside every box, where Graphviz
        # keeps a flat edge's ends in its direction: the encoder's column then stands left of the
        # decoder's at every depth (a T5 of 4 + 3 layers drew the decoder left at depth 1).
        if any(diagram.sides.get(node) == "encoder" for node in diagram.bottom):
            for left, right in zip(diagram.bottom, diagram.bottom[1:]):
                yield f"  {dot_string(ident(left))} -> {dot_string(ident(right))} [style=invis]"
    yield "}"
    if element_ids is not None:
        element_ids.update({node.id: elements(node.id) for node in diagram.nodes})


def generate_dot(
    graph: nx.DiGraph,
    depth: int = 2,
    fold: bool = True,
    theme: str = "light",
    compare: nx.DiGraph | None = None,
    dpi: int | None = None,
    annotate: str | None = None,
    edge_labels: str = "changes",
) -> str:
    """DOT source of the diagram of ``graph`` (beside ``compare`` when given).

    ``annotate`` (``params``, ``flops``, ``memory``) puts that figure on every node and colours by share;
    ``edge_labels`` (``shapes``, ``changes``, ``none``) says which edges show their shape.
    """
    diagram = build(graph, depth, fold, compare, annotate, edge_labels)
    return "\n".join(generate_lines(diagram, theme, dpi)) + "\n"


def write_dot(graph: nx.DiGraph, path: str | Path, **options: Any) -> Path:
    return write_atomic(path, generate_dot(graph, **options))
