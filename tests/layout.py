"""What Graphviz laid out for a diagram (``dot -Tjson``), and the structural rules read off it.

The rules are checked on the layout, not on the DOT text: an edge drawn upward is found by the
coordinates Graphviz gave its ends, whatever attribute (``constraint=false``, a rank hint)
caused it; an edge through a frame's title by its spline's points against the title's text; a
text too faint by its colour against the fill painted under it. The benchmark that counts
broken drawings (``benchmarks/drawings.py``) uses the same functions as the tests.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field

import networkx as nx

from bertgraph.graph import roles, stats, views
from bertgraph.graph import schema as g
from bertgraph.render import dot
from bertgraph.render.diagram import Diagram
from tests.colour import contrast


@dataclass(frozen=True)
class Box:
    """A rectangle in Graphviz points, y growing upward (Graphviz's own convention)."""

    left: float
    bottom: float
    right: float
    top: float

    def holds(self, x: float, y: float, margin: float = 0.0) -> bool:
        return self.left - margin <= x <= self.right + margin and self.bottom - margin <= y <= self.top + margin

    @property
    def area(self) -> float:
        return (self.right - self.left) * (self.top - self.bottom)


@dataclass(frozen=True)
class Shape:
    """A node as drawn: its box, Graphviz shape and style, fill and outline colours."""

    box: Box
    shape: str
    style: str
    fill: str
    stroke: str


@dataclass(frozen=True)
class Line:
    """An edge as drawn: its diagram style, the DOT line style and colour, and points along its spline."""

    tail: str
    head: str
    style: str
    drawn: str
    colour: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Paint:
    """A filled area, in the order Graphviz paints them (what is painted later lies on top)."""

    box: Box
    fill: str
    ellipse: bool = False

    def holds(self, x: float, y: float) -> bool:
        if not self.box.holds(x, y):
            return False
        if not self.ellipse:
            return True
        cx, cy = (self.box.left + self.box.right) / 2, (self.box.bottom + self.box.top) / 2
        rx, ry = (self.box.right - self.box.left) / 2, (self.box.top - self.box.bottom) / 2
        return ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 <= 1


@dataclass(frozen=True)
class Text:
    """A piece of text as drawn: its words, the middle of its line, its size and colour."""

    text: str
    x: float
    y: float
    size: float
    colour: str


@dataclass(frozen=True)
class Layout:
    """Node centres and cluster boxes by the diagram's ids; edges as (source, target, style) with their labels."""

    centres: dict[str, tuple[float, float]]
    clusters: dict[str, Box]
    edges: list[tuple[str, str, str]]
    labels: dict[tuple[str, str], str] = field(default_factory=dict)  # the text Graphviz set on each edge
    shapes: dict[str, Shape] = field(default_factory=dict)
    lines: list[Line] = field(default_factory=list)
    titles: dict[str, Box] = field(default_factory=dict)  # each cluster's title text
    paints: list[Paint] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)


def lay_out(diagram: Diagram, theme: str = "light") -> Layout:
    """Lay the diagram's DOT source out as bertgraph draws it (``graphviz_run.render``: the real ``dot``,
    then its positions drawn by ``neato -n2``) and read back what was drawn (``-Tjson``)."""
    ids: dict[str, str] = {}
    source = "\n".join(dot.generate_lines(diagram, theme, ids=ids))
    data = json.loads(drawn_json(source))
    by_dot = {dot_name: name for name, dot_name in ids.items()}
    objects = data.get("objects", [])
    centres: dict[str, tuple[float, float]] = {}
    clusters: dict[str, Box] = {}
    names: dict[int, str] = {}
    shapes: dict[str, Shape] = {}
    titles: dict[str, Box] = {}
    texts = _texts(data.get("_ldraw_", []))
    backgrounds = _paints(data.get("_draw_", [])) + _paints(data.get("_ldraw_", []))  # the page, legend swatches
    frames: list[Paint] = []
    fills: list[Paint] = []
    for item in objects:
        name = item.get("name", "")
        if "pos" in item:
            x, y = (float(v) for v in item["pos"].split(","))
            key = by_dot.get(name, name)
            centres[key] = (x, y)
            names[item["_gvid"]] = key
            half_width, half_height = float(item["width"]) * 36, float(item["height"]) * 36
            box = Box(x - half_width, y - half_height, x + half_width, y + half_height)
            shapes[key] = Shape(
                box, item.get("shape", ""), item.get("style", ""), item.get("fillcolor", ""), item.get("color", "")
            )
            fills += _paints(item.get("_draw_", []))
            drawn = _texts(item.get("_ldraw_", []))
            texts += drawn
            if key.startswith("title ") and drawn:  # a frame's title drawn as a node of its own
                titles[key[len("title ") :]] = _extent(drawn)
        elif "bb" in item and name.startswith("cluster_"):
            left, bottom, right, top = (float(v) for v in item["bb"].split(","))
            cluster = by_dot.get(name[len("cluster_") :], name).removeprefix("cluster ")
            clusters[cluster] = Box(left, bottom, right, top)
            frames += _paints(item.get("_draw_", []))
            title = _texts(item.get("_ldraw_", []))
            texts += title
            if title:
                titles[cluster] = _extent(title)
    style = {(e.source, e.target): e.style for e in diagram.edges}
    edges, labels, lines = [], {}, []
    for edge in data.get("edges", []):
        tail, head = names[edge["tail"]], names[edge["head"]]
        if (tail, head) in style and edge.get("style") != "invis":  # not the invisible edges that only order nodes
            edges.append((tail, head, style[tail, head]))
            labels[tail, head] = str(edge.get("label") or edge.get("xlabel") or "").strip()
            points = tuple(p for op in edge.get("_draw_", []) if op["op"] == "b" for p in _bezier(op["points"]))
            drawn = edge.get("style", "solid")
            lines.append(Line(tail, head, style[tail, head], drawn, edge.get("color", ""), points))
            texts += _texts(edge.get("_ldraw_", []))
    # Frames nest, so a larger one is painted first; nodes lie on top of every frame.
    paints = backgrounds + sorted(frames, key=lambda paint: -paint.box.area) + fills
    return Layout(centres, clusters, edges, labels, shapes, lines, titles, paints, [t.text_of() for t in texts])


@dataclass(frozen=True)
class _Drawn:
    """A text op of xdot: where its line sits, how wide and tall, in which colour."""

    text: str
    x: float
    y: float
    width: float
    size: float
    colour: str

    def text_of(self) -> Text:
        return Text(self.text, self.x, self.y, self.size, self.colour)


def _extent(texts: list[_Drawn]) -> Box:
    """The box the lines of a text cover."""
    return Box(
        min(t.x - t.width / 2 for t in texts),
        min(t.y - t.size / 2 for t in texts),
        max(t.x + t.width / 2 for t in texts),
        max(t.y + t.size / 2 for t in texts),
    )


def _texts(ops: list[dict[str, object]]) -> list[_Drawn]:
    """The texts of an xdot op list, each at the middle of its line (xdot gives the baseline's start)."""
    found, size, colour = [], 14.0, "#000000"
    for op in ops:
        if op["op"] == "F":
            size = float(op["size"])  # type: ignore[arg-type]
        elif op["op"] == "c":
            colour = str(op["color"])
        elif op["op"] == "T" and str(op["text"]).strip():
            x, y = (float(v) for v in op["pt"])  # type: ignore[attr-defined]
            width = float(op["width"])  # type: ignore[arg-type]
            centre = {"l": x + width / 2, "c": x, "r": x - width / 2}[str(op["align"])]
            found.append(_Drawn(str(op["text"]).strip(), centre, y + size * 0.3, width, size, colour))
    return found


def _paints(ops: list[dict[str, object]]) -> list[Paint]:
    """The filled shapes of an xdot op list (polygons, ellipses, rounded boxes), with their fill."""
    found, fill = [], ""
    for op in ops:
        if op["op"] == "C":
            fill = str(op["color"])
        elif op["op"] in ("P", "B"):
            xs, ys = zip(*op["points"])  # type: ignore[call-overload]
            found.append(Paint(Box(min(xs), min(ys), max(xs), max(ys)), fill))
        elif op["op"] == "E":
            x, y, rx, ry = (float(v) for v in op["rect"])  # type: ignore[attr-defined]
            found.append(Paint(Box(x - rx, y - ry, x + rx, y + ry), fill, ellipse=True))
    return [paint for paint in found if not _transparent(paint.fill)]


def _transparent(colour: str) -> bool:
    return colour in ("", "none", "transparent") or (len(colour) == 9 and colour.endswith("00"))


def _bezier(points: list[list[float]], steps: int = 12) -> list[tuple[float, float]]:
    """Points along a piecewise cubic Bézier (xdot's ``b`` op: a start, then three points per piece)."""
    found = [(points[0][0], points[0][1])]
    for i in range(1, len(points) - 2, 3):
        (x0, y0), (x1, y1), (x2, y2), (x3, y3) = points[i - 1 : i + 3]
        for step in range(1, steps + 1):
            t = step / steps
            a, b, c, d = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t**2, t**3
            found.append((a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3))
    return found


def drawn_json(source: str) -> bytes:
    """Graphviz's ``-Tjson`` of what bertgraph draws for ``source``; an older bertgraph (whose runner
    draws images only, as the drawings benchmark runs it) laid out by ``dot`` alone, as it drew."""
    from bertgraph.errors import RenderError
    from bertgraph.render import graphviz_run

    try:
        return graphviz_run.render(source, "json")
    except RenderError:
        return subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, check=True).stdout


def cycles(diagram: Diagram) -> list[list[str]]:
    """The diagram's cycles as strongly connected pieces of more than one node (and self-loops)."""
    drawn = nx.DiGraph((e.source, e.target) for e in diagram.edges)
    found = [sorted(piece) for piece in nx.strongly_connected_components(drawn) if len(piece) > 1]
    found += [[a] for a, b in drawn.edges if a == b]
    return sorted(found)


def upward_edges(layout: Layout) -> list[tuple[str, str, str]]:
    """Edges whose head is not strictly below its tail in the laid-out drawing."""
    return [(a, b, s) for a, b, s in layout.edges if layout.centres[a][1] <= layout.centres[b][1]]


_RANGE = re.compile(r"\.(\d+)-(\d+)(?:/(\d+))?(?=$|[.:])")


def summary_folds(graph: nx.DiGraph, depth: int) -> set[str]:
    """The folded sibling ranges ``summary`` shows down to display ``depth``: ``encoder.block.1-5``.

    Only of modules the trace runs: one that never runs (``not run`` in ``summary``) is not drawn.
    """
    folds = set()
    for row in stats.summary_rows(graph, depth=depth):
        if row.get("repeat", 1) > 1 and not row["in_fold"] and row.get("runs", True):
            container, first = row["path"].rsplit(".", 1)
            period = int(row.get("period", 1))
            last = int(first) + (int(row["repeat"]) - 1) * period
            folds.add(f"{container}.{first}-{last}" + (f"/{period}" if period > 1 else ""))
    return folds


def drawn_folds(diagram: Diagram) -> set[str]:
    """The folded ranges a diagram draws, read off its node and cluster ids."""
    folds = set()
    for name in [n.id for n in diagram.nodes] + [c.id for c in diagram.clusters]:
        for match in _RANGE.finditer(name):
            folds.add(name[: match.end()])
    return folds


def fold_mismatches(graph: nx.DiGraph, diagram: Diagram, depth: int) -> set[str]:
    """Folds only one of ``summary`` and the diagram makes (both empty: they agree)."""
    return summary_folds(graph, depth) ^ drawn_folds(diagram)


# --- legibility: titles, contrast ---------------------------------------------------------------

# Points of clear space an edge keeps from the text of a frame's title.
TITLE_MARGIN = 1.0


def title_crossings(layout: Layout) -> list[tuple[str, str, str]]:
    """(tail, head, cluster) for every edge whose drawn path runs through a cluster's title."""
    return [
        (line.tail, line.head, cluster)
        for line in layout.lines
        for cluster, title in sorted(layout.titles.items())
        if any(title.holds(x, y, TITLE_MARGIN) for x, y in line.points)
    ]


# WCAG 2 AA: text on its background at 4.5:1 at least.
MIN_CONTRAST = 4.5


def background(layout: Layout, x: float, y: float) -> str:
    """The fill painted last under point (``x``, ``y``)."""
    under = [paint.fill for paint in layout.paints if paint.holds(x, y)]
    return under[-1] if under else "#ffffff"


def faint_texts(layout: Layout, minimum: float = MIN_CONTRAST) -> list[tuple[str, str, str, float]]:
    """(text, colour, background, ratio) for every text drawn below ``minimum`` contrast with what lies under it."""
    found = []
    for text in layout.texts:
        under = background(layout, text.x, text.y)
        ratio = contrast(text.colour, under)
        if ratio < minimum:
            found.append((text.text, text.colour, under, round(ratio, 2)))
    return found


# --- truth: residuals start where the added tensor is made ----------------------------------------


def _ops_of(graph: nx.DiGraph, data: dict[str, object]) -> set[str]:
    """The operator nodes a view node stands for, read off its module (a fold: the first sibling)."""
    if data.get(g.KIND) != g.MODULE_NODE:
        return set()
    module = roles.lookup_path(str(data.get(g.MODULE, "")))
    own = bool(data.get(g.OWN_OPS))
    found = set()
    for node, op in graph.nodes(data=True):
        if op.get(g.KIND) != g.OPERATOR:
            continue
        where = str(op.get(g.MODULE, ""))
        if where == module or (not own and views.is_within(where, module)):
            found.add(node)
    return found


# Ops that return their input itself when nothing needs converting; the export records them anyway.
_RETURNS_INPUT = {"to", "_to_copy", "type_as", "contiguous", "alias", "detach", "lift_fresh_copy"}


def _made_by(graph: nx.DiGraph, node: str) -> str:
    """The op whose tensor ``node`` hands on: back through casts that returned their input (same shape, dtype)."""
    data = graph.nodes[node]
    while data.get(g.ALIAS) and data.get(g.OP) in _RETURNS_INPUT:
        same = [
            p
            for p in graph.predecessors(node)
            if (graph.nodes[p].get(g.SHAPE), graph.nodes[p].get(g.DTYPE)) == (data.get(g.SHAPE), data.get(g.DTYPE))
        ]
        if len(same) != 1:
            break
        node, data = same[0], graph.nodes[same[0]]
    return node


def residual_origins(graph: nx.DiGraph, diagram: Diagram, depth: int, layout: Layout) -> list[tuple[str, str]]:
    """Residual edges drawn (read off the layout) from a node that did not make the tensor they carry.

    For a drawn skip ``tail → head``: among the operator edges from ``tail``'s ops into ``head``'s
    adds, one must carry a tensor ``tail`` itself made — not one it only handed on through a cast
    that returned its input (LLaMA's norm, whose ``to(float32)`` the export records).
    """
    shown = views.view(graph, depth)
    wrong = []
    for line in layout.lines:
        if line.style != "residual" or line.tail not in shown or line.head not in shown:
            continue
        tail, head = _ops_of(graph, shown.nodes[line.tail]), _ops_of(graph, shown.nodes[line.head])
        reads = [(u, v) for v in head if graph.nodes[v].get(g.OP) == "add" for u in graph.predecessors(v) if u in tail]
        if reads and not any(_made_by(graph, u) in tail for u, _ in reads):
            wrong.append((line.tail, line.head))
    return wrong


# --- encoder-decoders: the encoder's column left, each stack's own things in its own frame --------------


def stack_frames(graph: nx.DiGraph, diagram: Diagram) -> dict[str, str]:
    """``encoder`` / ``decoder`` → the id of the cluster that frames that stack's part, where one does."""
    ids = {cluster.id for cluster in diagram.clusters}
    found = {}
    for stack, side in roles.stack_kinds(graph).items():
        owner = stack.rsplit(".", 1)[0] if "." in stack else stack
        for candidate in (owner, stack):
            if candidate in ids and candidate != graph.graph.get(g.G_BACKBONE, ""):
                found[side] = candidate
                break
    return found


def sides(graph: nx.DiGraph, diagram: Diagram, depth: int) -> dict[str, str]:
    """Each drawn node's stack side (``encoder``/``decoder``), for nodes that lie in one."""
    shown = views.view(graph, depth)
    found = {}
    for node in diagram.nodes:
        if node.shape != "io" and node.id in shown:
            side = roles.stack_side(graph, str(shown.nodes[node.id].get(g.MODULE, "")))
            if side:
                found[node.id] = side
    return found


def decoder_left(graph: nx.DiGraph, diagram: Diagram, depth: int, layout: Layout) -> list[str]:
    """What of the decoder is drawn left of the encoder: its frame, or (no frames, depth 1) its boxes' centres."""
    if roles.structure(graph) != roles.ENCODER_DECODER:
        return []
    frames = stack_frames(graph, diagram)
    if {"encoder", "decoder"} <= set(frames):
        encoder, decoder = layout.clusters[frames["encoder"]], layout.clusters[frames["decoder"]]
        return [] if encoder.right <= decoder.left else [f"{frames['decoder']} frame"]
    # Each stack a single box: the decoder's right of the encoder's (below it, it may reach under it).
    side = sides(graph, diagram, depth)
    encoder = [layout.centres[n][0] for n, s in side.items() if s == "encoder" and n in layout.centres]
    decoder = {n: layout.centres[n][0] for n, s in side.items() if s == "decoder" and n in layout.centres}
    return [n for n, x in decoder.items() if encoder and x <= max(encoder)]


def foreign_inputs(graph: nx.DiGraph, diagram: Diagram, depth: int) -> list[str]:
    """Inputs drawn inside a stack's frame although that stack never reads them (BART's attention_mask
    in the decoder's, while the encoder reads it first)."""
    frames = stack_frames(graph, diagram)
    if len(frames) < 2:
        return []
    parents = {c.id: c.parent for c in diagram.clusters}
    side = sides(graph, diagram, depth)
    wrong = []
    for node in diagram.nodes:
        if node.shape != "io":
            continue
        chain, cluster = set(), diagram.membership.get(node.id)
        while cluster is not None:
            chain.add(cluster)
            cluster = parents.get(cluster)
        readers = {side.get(e.target) for e in diagram.edges if e.source == node.id} - {None}
        for stack, frame in frames.items():
            if frame in chain and readers and stack not in readers:
                wrong.append(node.id)
            # read by both stacks: drawn with the first that reads it, the encoder
            if frame in chain and stack == "decoder" and "encoder" in readers:
                wrong.append(node.id)
    return sorted(set(wrong))


def through_other_stack(graph: nx.DiGraph, diagram: Diagram, depth: int, layout: Layout) -> list[tuple[str, str]]:
    """Edges that run through a stack's frame without an end in it (the encoder's output snaking down
    between the decoder's blocks)."""
    frames = stack_frames(graph, diagram)
    parents = {c.id: c.parent for c in diagram.clusters}

    def within(node: str, frame: str) -> bool:
        cluster = diagram.membership.get(node)
        while cluster is not None and cluster != frame:
            cluster = parents.get(cluster)
        return cluster == frame

    wrong = []
    for frame in frames.values():
        box = layout.clusters.get(frame)
        if box is None:
            continue
        for line in layout.lines:
            if within(line.tail, frame) or within(line.head, frame):
                continue
            if sum(1 for x, y in line.points if box.holds(x, y, -2.0)) > 2:
                wrong.append((line.tail, line.head))
    return wrong
