"""Mermaid flowcharts of a :class:`~bertgraph.render.diagram.Diagram`, for Markdown that GitHub renders.

Mermaid refuses diagrams above 500 edges or 50,000 characters by default, and GitHub
cannot raise those limits. :func:`generate_mermaid` therefore folds repeats, then goes
to shallower depths, until the diagram fits, and says what it did in ``notes``.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import networkx as nx

from bertgraph.errors import RenderError
from bertgraph.files import write_atomic
from bertgraph.graph.views import OPERATOR_LEVEL
from bertgraph.render import style
from bertgraph.render.caption import wrapped
from bertgraph.render.diagram import HEAT_LABELS, Diagram, Node, build, residual_label
from bertgraph.render.escape import mermaid_front_matter, mermaid_id, mermaid_text
from bertgraph.render.records import Cluster

MAX_EDGES = 500
# Characters in a line of the caption's facts in the legend: as narrow as the legend's own entries.
FACTS_CHARACTERS = 36
MAX_TEXT = 50_000

# Mermaid's brackets for each shape of style.Look, and its arrow for each line style (linkStyle
# then gives every edge its look's colour and dashes, so dashed residuals and dotted masks differ).
_SHAPES = {"box": ('["', '"]'), "ellipse": ('(["', '"])'), "io": ('[/"', '"/]'), "circle": ('(("', '"))')}
_ARROWS = {"solid": "-->", "dashed": "-.->", "dotted": "-.->", "bold": "==>"}
_DASHES = {"dashed": "stroke-dasharray:6 4", "dotted": "stroke-dasharray:2 3"}


class MermaidResult(NamedTuple):
    text: str
    depth: int
    folded: bool
    notes: list[str]


def _label(node: Node) -> str:
    return "<br/>".join([f"<b>{mermaid_text(node.title)}</b>", *(mermaid_text(line) for line in node.lines)])


def generate_lines(diagram: Diagram, theme: str = "light", ids: dict[str, str] | None = None) -> Iterable[str]:
    """Mermaid flowchart lines for ``diagram``; ``ids``, when given, is filled with each node's Mermaid id."""
    colours = style.theme(theme)
    ids = {} if ids is None else ids
    taken: set[str] = set()

    def node_id(name: str) -> str:
        if name not in ids:
            ids[name] = mermaid_id(name, taken)
        return ids[name]

    def cluster_id(name: str) -> str:
        return node_id("cluster " + name)

    yield "---"
    # Mermaid has one title line, centred over the drawing: the name alone (with the caption's facts it
    # was the widest thing drawn, T5's 2,333 px); the facts open the legend, in short lines.
    yield f"title: {mermaid_front_matter(diagram.title)}"
    yield "---"
    if theme == "dark":
        yield '%%{init: {"theme": "dark"}}%%'
    yield "flowchart TB"
    nodes_in, children, invisible = _placement(diagram)
    # An encoder-decoder's legend inside its backbone, which no edge may leave: there mermaid.js keeps the
    # order the stacks are written in (see _placement). Anyone else's at top level.
    sided = {diagram.sides.get(node.id) for node in diagram.nodes} >= {"encoder", "decoder"}
    alone = not any(c.role == "head" for c in diagram.clusters)  # a head's edges leave the backbone anyway
    host = next((c.id for c in diagram.clusters if c.parent is None and c.role == "backbone" and sided and alone), None)
    legend = list(_legend_lines(diagram, node_id, cluster_id))

    def emit(parent: str | None, indent: str) -> Iterable[str]:
        for node in nodes_in.get(parent, []):
            opening, closing = _SHAPES[style.look(node.kind, theme).shape]
            yield f"{indent}{node_id(node.id)}{opening}{_label(node)}{closing}"
        for cluster in children.get(parent, []):
            title = " " if cluster.id in invisible else mermaid_text(cluster.title)
            yield f'{indent}subgraph {cluster_id(cluster.id)}["{title}"]'
            # Stated, so that a box no edge leaves is not laid out left to right (mermaid.js turns the
            # direction of such a subgraph, and T5's backbone came out 2.8 times as wide).
            yield f"{indent}  direction TB"
            yield from emit(cluster.id, indent + "  ")
            if cluster.id == host:
                yield from (f"{indent}  {line}" for line in legend)
            yield f"{indent}end"

    yield from emit(None, "  ")
    if host is None:
        yield from (f"  {line}" for line in legend)
    for edge in diagram.edges:
        label = residual_label(edge.label) if edge.style == "residual" else edge.label
        arrow = _ARROWS[style.edge_look(edge.style, theme).line]
        text = f'|"{mermaid_text(label)}"|' if label else ""
        yield f"  {node_id(edge.source)} {arrow}{text} {node_id(edge.target)}"
    yield from _link_styles(diagram, theme)

    yield from _legend_below(diagram, node_id)

    yield from _class_lines(diagram, colours, theme, node_id)
    yield from _cluster_styles(diagram, theme, cluster_id)
    if diagram.caption:
        page = "#ffffff" if colours["background"] == "white" else colours["background"]
        yield f"  style {node_id('legend facts')} fill:{page},stroke:{page},color:{colours['text']}"


def _legend_lines(diagram: Diagram, node_id: Any, cluster_id: Any) -> Iterable[str]:
    """The legend's subgraph (unindented): the caption's facts in short lines, then a box per kind."""
    if not (diagram.kinds or diagram.scale or diagram.caption):
        return
    yield f'subgraph {cluster_id("legend")}["legend"]'
    yield "  direction TB"
    if diagram.caption:
        facts = [part for line in diagram.caption for part in wrapped(line, FACTS_CHARACTERS)]
        yield f'  {node_id("legend facts")}["{"<br/>".join(mermaid_text(fact) for fact in facts)}"]'
    for kind in diagram.kinds:
        yield f'  {node_id("legend " + kind)}["{mermaid_text(diagram.kind_name(kind))}"]'
    if diagram.cross:
        yield f'  {node_id("legend cross")}["{mermaid_text("thick arrows: encoder output into cross-attention")}"]'
    if diagram.compare:
        yield f'  {node_id("legend highlight")}["only in this variant"]'
    if diagram.scale:
        yield f'  subgraph {cluster_id("legend scale")}["{mermaid_text(diagram.scale)}"]'
        yield "    direction LR"
        for index, label in enumerate(HEAT_LABELS):
            yield f'    {node_id(f"legend heat {index}")}["{mermaid_text(label)}"]'
        yield "  end"
    yield "end"


def _legend_keys(diagram: Diagram) -> list[str]:
    """The legend's own entries, in the order they are written (the heat scale keeps its row)."""
    keys = ["legend facts"] if diagram.caption else []
    keys += [f"legend {kind}" for kind in diagram.kinds]
    keys += ["legend cross"] if diagram.cross else []
    keys += ["legend highlight"] if diagram.compare else []
    return keys


def _legend_below(diagram: Diagram, node_id: Any) -> Iterable[str]:
    """Invisible links that put the legend's entries in a column under the drawing: beside it, the legend
    made the drawing a third wider; linked to nothing, mermaid.js lays it out by itself, left of the rest."""
    keys = _legend_keys(diagram)
    # under an output: one the backbone holds when the legend is in it (render/mermaid.generate_lines)
    inside = diagram.sides and not any(c.role == "head" for c in diagram.clusters)
    outputs = [n for n in diagram.bottom if diagram.sides.get(n)] if inside else diagram.bottom
    anchor = outputs[-1] if outputs else diagram.nodes[-1].id if diagram.nodes else None
    if anchor is None or not keys:
        return
    chain = [anchor, *keys]
    for above, below in itertools.pairwise(chain):
        yield f"  {node_id(above)} ~~~ {node_id(below)}"


def _placement(
    diagram: Diagram,
) -> tuple[dict[str | None, list[Node]], dict[str | None, list[Cluster]], set[str]]:
    """Nodes and clusters by the cluster they are written in, and the frames written without a look.

    An encoder-decoder's outputs go inside its backbone: then no edge leaves the backbone, and
    mermaid.js lays it out by itself, keeping the order its boxes are written in, right-hand first —
    the decoder's frame before the encoder's, as render/dot.py writes them. Where the stacks are
    single boxes (depth 1), each stack's inputs, box and output are framed without a look, so that
    the frames, written decoder first, put the encoder left. Outside an encoder-decoder the outputs
    stay at top level, under everything.
    """
    clusters = list(diagram.clusters)
    membership = dict(diagram.membership)
    invisible: set[str] = set()
    sided = {diagram.sides.get(node.id) for node in diagram.nodes} >= {"encoder", "decoder"}
    tops = [c.id for c in clusters if c.parent is None and c.role == "backbone"]
    if sided and tops:
        for output in diagram.bottom:
            if diagram.sides.get(output):  # made by a stack (a classifier's logits stay outside)
                membership[output] = tops[0]
        for side in ("decoder", "encoder"):
            members = [
                n.id for n in diagram.nodes if diagram.sides.get(n.id) == side and membership.get(n.id) == tops[0]
            ]
            if members and not [
                c for c in clusters if c.parent == tops[0] and _side_of(diagram, c.id, clusters) == side
            ]:
                frame = f"{tops[0]} {side} side"
                clusters.append(Cluster(frame, "", tops[0], "module"))
                invisible.add(frame)
                membership.update(dict.fromkeys(members, frame))
    nodes_in: dict[str | None, list[Node]] = defaultdict(list)
    for node in diagram.nodes:
        inside = node.id not in diagram.bottom or (sided and node.id in diagram.sides)
        nodes_in[membership.get(node.id) if inside else None].append(node)
    children: dict[str | None, list[Cluster]] = defaultdict(list)
    for cluster in clusters:
        children[cluster.parent].append(cluster)
    if sided:
        for found in children.values():
            found.sort(key=lambda c: _side_of(diagram, c.id, clusters) != "decoder")
    return nodes_in, children, invisible


def _side_of(diagram: Diagram, cluster: str, clusters: list[Cluster]) -> str | None:
    """The stack side every node inside ``cluster`` (at any depth) is on, or None."""
    inside = {cluster}
    grew = True
    while grew:
        more = {c.id for c in clusters if c.parent in inside} - inside
        grew = bool(more)
        inside |= more
    found = {diagram.sides.get(n.id) for n in diagram.nodes if diagram.membership.get(n.id) in inside}
    return found.pop() if len(found) == 1 else None


def _link_styles(diagram: Diagram, theme: str) -> Iterable[str]:
    """Each edge style's colour, width and dashes, as style.py gives them (edges numbered as written)."""
    numbers: dict[str, list[str]] = defaultdict(list)
    for number, edge in enumerate(diagram.edges):
        numbers[edge.style].append(str(number))
    for edge_style in sorted(numbers):
        line = style.edge_look(edge_style, theme)
        look = [f"stroke:{line.stroke}", f"stroke-width:{2 if line.line == 'bold' else 1}px"]
        look += [_DASHES[line.line]] if line.line in _DASHES else []
        yield f"  linkStyle {','.join(numbers[edge_style])} {','.join(look)}"


def _class_lines(diagram: Diagram, colours: dict[str, Any], theme: str, node_id: Any) -> Iterable[str]:
    members: dict[str, list[str]] = defaultdict(list)
    for node in diagram.nodes:
        base = f"k_{node.kind.replace('-', '_')}" if node.heat is None else f"h_{node.heat}"
        members[base + ("_hl" if node.highlight else "")].append(node_id(node.id))
    for kind in diagram.kinds:
        members[f"k_{kind.replace('-', '_')}"].append(node_id("legend " + kind))
    if diagram.compare:
        members["k_other_hl"].append(node_id("legend highlight"))
    if diagram.cross:
        members["k_attention_cross"].append(node_id("legend cross"))
    if diagram.scale:
        for index in range(len(HEAT_LABELS)):
            members[f"h_{index}"].append(node_id(f"legend heat {index}"))
    for name in sorted(members):
        key = name[2:].removesuffix("_hl")
        if name.startswith("h_"):
            fill, stroke, text = colours["heat"][int(key)]
        else:
            fill, stroke, text = style.look(key.replace("_", "-"), theme)[:3]
        line = f"fill:{fill},stroke:{stroke},color:{text}"
        if name.endswith("_hl"):
            line = f"fill:{fill},stroke:{colours['added']},color:{text},stroke-width:3px"
        yield f"  classDef {name} {line}"
        yield f"  class {','.join(members[name])} {name}"


def _cluster_styles(diagram: Diagram, theme: str, cluster_id: Any) -> Iterable[str]:
    for cluster in diagram.clusters:
        frame, width = style.cluster_look(cluster.role, cluster.highlight, theme)
        look = f"fill:{frame.fill},stroke:{frame.stroke},stroke-width:{width:g}px,color:{frame.text}"
        look += f",{_DASHES['dashed']}" if frame.line == "dashed" else ""
        yield f"  style {cluster_id(cluster.id)} {look}"


def generate_mermaid(
    graph: nx.DiGraph,
    depth: int = 2,
    fold: bool = True,
    theme: str = "light",
    compare: nx.DiGraph | None = None,
    annotate: str | None = None,
    edge_labels: str = "changes",
) -> MermaidResult:
    """Mermaid text that renders within Mermaid's default limits.

    Tries the requested depth first; when it would exceed 500 edges or 50,000
    characters, folds repeats, then steps to shallower depths, noting each step.
    ``annotate`` (``params``, ``flops``, ``memory``) puts that figure on every node and colours by share;
    ``edge_labels`` (``shapes``, ``changes``, ``none``) says which edges show their shape.
    """
    depth = min(depth, OPERATOR_LEVEL)
    notes: list[str] = []
    attempts = [(depth, fold)] + ([(depth, True)] if not fold else [])
    attempts += [(d, True) for d in range(depth - 1, -1, -1)]
    for level, folded in attempts:
        diagram = build(graph, level, folded, compare, annotate, edge_labels)
        text = "\n".join(generate_lines(diagram, theme)) + "\n"
        edges = len(diagram.edges) + len(_legend_keys(diagram))  # and the links that put the legend under it
        if edges <= MAX_EDGES and len(text) <= MAX_TEXT:
            if (level, folded) != (depth, fold):
                notes.append(
                    f"the Mermaid diagram at depth {depth}{'' if fold else ' unfolded'} would exceed Mermaid's "
                    f"limits ({MAX_EDGES} edges, {MAX_TEXT:,} characters), which GitHub cannot raise; "
                    f"wrote depth {level}{' with repeats folded' if folded else ''} instead"
                )
            return MermaidResult(text, level, folded, notes)
    raise RenderError("no depth of this model fits Mermaid's limits; write SVG instead")


def fenced(text: str) -> str:
    """Mermaid text inside a Markdown code fence, as GitHub renders it."""
    return f"```mermaid\n{text}```\n"


def write_mermaid(graph: nx.DiGraph, path: str | Path, **options: Any) -> Path:
    result = generate_mermaid(graph, **options)
    text = fenced(result.text) if str(path).lower().endswith(".md") else result.text
    return write_atomic(path, text)
