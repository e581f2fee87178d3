"""A drawing as Graphviz laid it out, as plain data: what the editable writers draw from.

Any DOT bertgraph writes — a model's diagram, the families figures, a comparison — is laid out
once by ``dot -Tjson`` (:func:`bertgraph.render.graphviz_run.laid_out`), the same layout the SVG
is drawn from, and read here into boxes, frames (clusters), arrows and the title block, each
with its stable id and classes (:mod:`bertgraph.render.ids`), its colours as Graphviz painted
them and its text as Graphviz placed it (size, weight, colour, baseline, alignment). The TikZ
and draw.io writers (:mod:`bertgraph.render.tikz`, :mod:`bertgraph.render.drawio`) only
translate this data, so every format shows the same positions and the same looks.

Coordinates are Graphviz points (1/72 inch) with y growing upward, the origin at the drawing's
bottom left.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bertgraph.errors import RenderError

Point = tuple[float, float]


@dataclass(frozen=True)
class Run:
    """A piece of text: its baseline point, alignment there (``l``, ``c``, ``r``), and font."""

    x: float
    y: float
    align: str
    width: float
    text: str
    size: float
    bold: bool
    italic: bool
    colour: str


@dataclass(frozen=True)
class Paint:
    """How an outline is drawn and filled: colours as ``#rrggbb`` (None: not painted)."""

    fill: str | None
    stroke: str | None
    width: float
    dash: str  # "solid", "dashed" or "dotted"


@dataclass(frozen=True)
class Box:
    """A node: centre and size, shape, paint and text lines; ``parent`` is the innermost frame's id."""

    id: str
    classes: tuple[str, ...]
    x: float
    y: float
    width: float
    height: float
    shape: str  # "box", "ellipse", "circle" or "none" (text only)
    radius: float  # of a rounded box's corners (0: square)
    paint: Paint
    runs: tuple[Run, ...]
    tooltip: str
    parent: str | None

    @property
    def left(self) -> float:
        return self.x - self.width / 2

    @property
    def top(self) -> float:
        return self.y + self.height / 2


@dataclass(frozen=True)
class Frame:
    """A cluster: its rectangle, paint and title; ``parent`` is the enclosing frame's id."""

    id: str
    classes: tuple[str, ...]
    left: float
    bottom: float
    right: float
    top: float
    radius: float
    paint: Paint
    runs: tuple[Run, ...]
    parent: str | None


@dataclass(frozen=True)
class Arrow:
    """An edge: the cubic Bézier Graphviz drew (``points``: start, then three points per piece),
    the tip its arrowhead reaches (None: no head), the head's length and width, paint and label."""

    id: str
    classes: tuple[str, ...]
    source: str
    target: str
    points: tuple[Point, ...]
    tip: Point | None
    head: tuple[float, float]
    paint: Paint
    runs: tuple[Run, ...]


@dataclass(frozen=True)
class Mark:
    """A filled shape outside every node (a legend swatch in the title block): its corners and paint."""

    points: tuple[Point, ...]
    paint: Paint


@dataclass(frozen=True)
class Layout:
    """A whole drawing: its size and background, frames outermost first, boxes, arrows, the title block."""

    width: float
    height: float
    background: str | None
    frames: tuple[Frame, ...]
    boxes: tuple[Box, ...]
    arrows: tuple[Arrow, ...]
    title: tuple[Run, ...]
    marks: tuple[Mark, ...]

    def box(self, box_id: str) -> Box:
        return next(box for box in self.boxes if box.id == box_id)

    def legend_classes(self, mark: Mark) -> tuple[str, ...]:
        """A legend swatch's classes: ``legend`` and those of the boxes painted like it (or of the
        edges drawn in its colour), so writers style a swatch as the role it explains."""
        for box in self.boxes:
            if (box.paint.fill, box.paint.stroke) == (mark.paint.fill, mark.paint.stroke):
                return ("legend", *(name for name in box.classes if name != "added"))
        for arrow in self.arrows:
            if arrow.paint.stroke == mark.paint.fill == mark.paint.stroke:
                return ("legend", *arrow.classes)
        return ("legend",)

    def looks(self) -> list[str]:
        """Every class that decides a look, in the order the drawing first uses it."""
        seen: dict[str, None] = {}
        elements: list[Frame | Box | Arrow] = [*self.frames, *self.boxes, *self.arrows]
        for element in elements:
            seen.update(dict.fromkeys(element.classes))
        return list(seen)


def read_layout(dot_source: str) -> Layout:
    """Lay ``dot_source`` out with Graphviz and read the result (see :func:`parse_layout`)."""
    from bertgraph.render import graphviz_run

    return parse_layout(graphviz_run.laid_out(dot_source))


def parse_layout(data: dict[str, Any]) -> Layout:
    """Graphviz's ``-Tjson`` output as a :class:`Layout`.

    Raises:
        RenderError: the layout lacks what every drawing has (a bounding box, node positions).
    """
    try:
        left, bottom, right, top = (float(v) for v in str(data["bb"]).split(","))
    except (KeyError, ValueError) as error:
        raise RenderError("Graphviz's layout has no bounding box to read") from error
    objects: list[dict[str, Any]] = list(data.get("objects", []))
    frame_of = _innermost_frames(objects)
    boxes, frames, names = [], [], {}
    for item in objects:
        if "invis" in str(item.get("style", "")):
            continue  # drawn nowhere: the points that hold the page's corners (render/untangle.framed)
        if "pos" in item:
            box = _box(item, frame_of)
            names[item["_gvid"]] = box.id
            boxes.append(box)
        elif str(item.get("name", "")).startswith("cluster") and "bb" in item:
            frames.append(_frame(item, frame_of))
    arrows = [_arrow(edge, names) for edge in data.get("edges", []) if edge.get("_draw_")]
    title = tuple(_runs(data.get("_ldraw_", [])))
    marks = tuple(_marks(_shapes(data.get("_ldraw_", []))))
    background = next((paint.fill for _, paint in _shapes(data.get("_draw_", []))), None)
    return Layout(
        width=right - left,
        height=top - bottom,
        background=background,
        frames=tuple(frames),
        boxes=tuple(boxes),
        arrows=tuple(arrows),
        title=title,
        marks=marks,
    )


def _ident(item: dict[str, Any]) -> str:
    return str(item.get("id") or item.get("name", ""))


def _classes(item: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(item.get("class", "")).split())


def _innermost_frames(objects: list[dict[str, Any]]) -> dict[int, str]:
    """For each node and cluster (by ``_gvid``), the id of the innermost cluster around it."""
    children: dict[int, list[int]] = {item["_gvid"]: list(item.get("subgraphs", [])) for item in objects}
    parent = {child: gvid for gvid, kids in children.items() for child in kids}

    def depth(gvid: int) -> int:
        return 0 if gvid not in parent else 1 + depth(parent[gvid])

    clusters = [item for item in objects if str(item.get("name", "")).startswith("cluster") and "nodes" in item]
    found: dict[int, str] = {}
    for cluster in sorted(clusters, key=lambda c: depth(c["_gvid"])):  # deeper clusters overwrite outer ones
        members = list(cluster.get("nodes", [])) + [gvid for gvid in _below(cluster["_gvid"], children)]
        for member in members:
            found[member] = _ident(cluster)
    return found


def _below(gvid: int, children: dict[int, list[int]]) -> Iterable[int]:
    for child in children.get(gvid, []):
        yield child
        yield from _below(child, children)


def _box(item: dict[str, Any], frame_of: dict[int, str]) -> Box:
    x, y = _point(item["pos"])
    width, height = float(item.get("width", 0)) * 72, float(item.get("height", 0)) * 72
    shapes = _shapes(item.get("_draw_", []), curves=True)  # a rounded outline without a fill is an open curve
    paint = shapes[0][1] if shapes else Paint(None, None, 0.0, "solid")
    shape = str(item.get("shape", "box"))
    drawn = "none" if not shapes else "ellipse" if shape in ("ellipse", "oval") else shape
    drawn = drawn if drawn in ("ellipse", "circle", "none") else "box"
    rounded = "rounded" in str(item.get("style", ""))
    radius = _corner(shapes[0][0], x - width / 2, y + height / 2) if rounded and shapes else 0.0
    return Box(
        id=_ident(item),
        classes=_classes(item),
        x=x,
        y=y,
        width=width,
        height=height,
        shape=drawn,
        radius=radius,
        paint=paint,
        runs=tuple(_runs(item.get("_ldraw_", []))),
        tooltip=_unescaped(str(item.get("tooltip", ""))),
        parent=frame_of.get(item["_gvid"]),
    )


def _frame(item: dict[str, Any], frame_of: dict[int, str]) -> Frame:
    left, bottom, right, top = (float(v) for v in str(item["bb"]).split(","))
    shapes = _shapes(item.get("_draw_", []), curves=True)  # a rounded frame without a fill is an open curve
    paint = shapes[0][1] if shapes else Paint(None, None, 0.0, "solid")
    rounded = "rounded" in str(item.get("style", ""))
    return Frame(
        id=_ident(item),
        classes=_classes(item),
        left=left,
        bottom=bottom,
        right=right,
        top=top,
        radius=_corner(shapes[0][0], left, top) if rounded and shapes else 0.0,
        paint=paint,
        runs=tuple(_runs(item.get("_ldraw_", []))),
        parent=frame_of.get(item["_gvid"]),
    )


def _arrow(edge: dict[str, Any], names: dict[int, str]) -> Arrow:
    curve = next((points for points, _ in _shapes(edge["_draw_"], curves=True)), ())
    paint = next((paint for _, paint in _shapes(edge["_draw_"], curves=True)), Paint(None, None, 1.0, "solid"))
    heads = _shapes(edge.get("_hdraw_", []))
    tip = _end(str(edge.get("pos", "")), "e")
    head = (0.0, 0.0)
    if tip is not None and heads and len(heads[0][0]) >= 3:
        head = _head_size(heads[0][0], tip)
    runs = [run for key in ("_ldraw_", "_xldraw_", "_hldraw_", "_tldraw_") for run in _runs(edge.get(key, []))]
    return Arrow(
        id=_ident(edge) if edge.get("id") else f"edge{edge.get('_gvid', '')}",
        classes=_classes(edge),
        source=names[edge["tail"]],
        target=names[edge["head"]],
        points=tuple(curve),
        tip=tip,
        head=head,
        paint=Paint(None, paint.stroke, paint.width, paint.dash),
        runs=tuple(runs),
    )


def _head_size(corners: tuple[Point, ...], tip: Point) -> tuple[float, float]:
    """An arrowhead's length (tip to the middle of its base) and width (across its base).

    >>> _head_size(((51.0, 46.0), (47.5, 36.0), (44.0, 46.0)), (47.5, 36.0))
    (10.0, 7.0)
    """
    apex = min(corners, key=lambda p: (p[0] - tip[0]) ** 2 + (p[1] - tip[1]) ** 2)
    base = [p for p in corners if p != apex]
    width = max(((ax - bx) ** 2 + (ay - by) ** 2) ** 0.5 for ax, ay in base for bx, by in base)
    middle = (sum(x for x, _ in base) / len(base), sum(y for _, y in base) / len(base))
    length = ((apex[0] - middle[0]) ** 2 + (apex[1] - middle[1]) ** 2) ** 0.5
    return round(length, 1), round(width, 1)  # a tenth: one arrowsize gives one head, whatever its angle


def _point(text: str) -> Point:
    x, y = (float(v) for v in text.split(",")[:2])
    return x, y


def _end(pos: str, which: str) -> Point | None:
    """The arrowhead's tip in an edge's ``pos`` (``e,x,y …``), or None."""
    for token in pos.split():
        if token.startswith(which + ","):
            return _point(token[2:])
    return None


def _corner(points: tuple[Point, ...], left: float, top: float) -> float:
    """A rounded outline's corner radius: where its top edge starts, measured from the left side."""
    on_top = [x for x, y in points if abs(y - top) < 0.5]  # the bounding box is rounded to a tenth
    return round(min(on_top) - left, 2) if on_top else 0.0


_WIDTH = re.compile(r"setlinewidth\(([\d.]+)\)")


def colour(text: str) -> str | None:
    """An xdot colour as ``#rrggbb``; None for a transparent one.

    >>> colour("#FFFFFE00"), colour("#b6a5d5"), colour("#000000ff")
    (None, '#b6a5d5', '#000000')
    """
    text = text.strip().lower()
    if not re.fullmatch(r"#[0-9a-f]{6}([0-9a-f]{2})?", text):
        return None  # named colours do not reach the xdot output: Graphviz writes every colour as RGB
    if len(text) == 9 and text[7:] == "00":
        return None
    return text[:7]


def _shapes(ops: list[dict[str, Any]], curves: bool = False) -> list[tuple[tuple[Point, ...], Paint]]:
    """Every outline drawn by ``ops`` with the paint in force when it was drawn.

    A filled op (``P``, ``B``, ``E``) fills with the fill colour and strokes with the pen colour;
    ``curves`` keeps the open Bézier curves (``b``) too, which are edges' lines.
    """
    found = []
    pen, fill, width, dash = "#000000", None, 1.0, "solid"
    for op in ops:
        kind = op.get("op")
        if kind == "c":
            pen = colour(str(op.get("color", ""))) or ""
        elif kind == "C":
            fill = colour(str(op.get("color", "")))
        elif kind == "S":
            style = str(op.get("style", ""))
            if style in ("dashed", "dotted", "solid"):
                dash = style
            elif style == "bold":
                width = 2.0
            elif _WIDTH.fullmatch(style):
                width = float(_WIDTH.fullmatch(style).group(1))  # type: ignore[union-attr]
        elif kind in ("P", "B", "E", "p", "b", "e", "L"):
            if kind in ("b", "L") and not curves:
                continue
            filled = kind in ("P", "B", "E")
            points = op.get("points") or _ellipse(op.get("rect", []))
            found.append(
                (
                    tuple((float(x), float(y)) for x, y in points),
                    Paint(fill if filled else None, pen or None, width, dash),
                )
            )
    return found


def _marks(shapes: list[tuple[tuple[Point, ...], Paint]]) -> Iterable[Mark]:
    """Filled shapes, each with the outline Graphviz draws right after it over the same points."""
    for index, (points, paint) in enumerate(shapes):
        if not paint.fill:
            continue
        following = shapes[index + 1] if index + 1 < len(shapes) else None
        if following is not None and following[0] == points and not following[1].fill:
            paint = Paint(paint.fill, following[1].stroke, following[1].width, following[1].dash)
        yield Mark(points, paint)


def _ellipse(rect: list[float]) -> list[list[float]]:
    """An xdot ellipse (centre, radii) as its bounding corners."""
    if len(rect) != 4:
        return []
    x, y, rx, ry = (float(v) for v in rect)
    return [[x - rx, y - ry], [x + rx, y + ry]]


def _runs(ops: list[dict[str, Any]]) -> Iterable[Run]:
    """The texts of ``ops``, each with the font, weight and colour in force."""
    size, face, pen, flags = 14.0, "", "#000000", 0
    for op in ops:
        kind = op.get("op")
        if kind == "F":
            size, face = float(op.get("size", size)), str(op.get("face", ""))
        elif kind == "c":
            pen = colour(str(op.get("color", ""))) or pen
        elif kind == "t":
            flags = int(op.get("fontchar", 0))
        elif kind == "T" and str(op.get("text", "")).strip():
            x, y = (float(v) for v in op["pt"])
            bold = bool(flags & 1) or "bold" in face.lower()
            italic = bool(flags & 2) or "italic" in face.lower() or "oblique" in face.lower()
            yield Run(
                x, y, str(op.get("align", "l")), float(op.get("width", 0)), str(op["text"]), size, bold, italic, pen
            )


def _unescaped(text: str) -> str:
    r"""A DOT escString as the text it shows: ``\n``, ``\l``, ``\r`` line breaks, ``\\`` a backslash.

    >>> _unescaped(r"a\nb\\c\ld")
    'a\nb\\c\nd'
    """
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) in "nlr" else m.group(1), text)


def lines(runs: Iterable[Run]) -> list[list[Run]]:
    """Runs grouped into lines (one baseline each), top line first, each line left to right."""
    grouped: dict[float, list[Run]] = {}
    for run in runs:
        grouped.setdefault(round(run.y, 1), []).append(run)
    return [sorted(grouped[y], key=lambda r: r.x) for y in sorted(grouped, reverse=True)]


def number(value: float) -> str:
    """A coordinate (points) as the writers spell it: as short as it is exact to a hundredth.

    >>> number(12.0), number(3.14159), number(-0.004)
    ('12', '3.14', '0')
    """
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def bezier(points: tuple[Point, ...], t: float) -> list[Point]:
    """Points at parameter ``t`` of each cubic piece of ``points`` (start, then three points per piece).

    >>> bezier(((0, 0), (0, 1), (1, 1), (1, 0)), 0.5)
    [(0.5, 0.75)]
    """
    found = []
    for index in range(0, len(points) - 3, 3):
        (x0, y0), (x1, y1), (x2, y2), (x3, y3) = points[index : index + 4]
        u = 1 - t
        found.append(
            (
                u**3 * x0 + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t**3 * x3,
                u**3 * y0 + 3 * u * u * t * y1 + 3 * u * t * t * y2 + t**3 * y3,
            )
        )
    return found
