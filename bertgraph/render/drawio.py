"""A laid-out drawing as a draw.io file (``.drawio``: an uncompressed ``mxfile``).

Drawn from :class:`~bertgraph.render.layout.Layout`, Graphviz's layout of the DOT the SVG
comes from, so every cell sits where the SVG puts it:

- every box is a vertex at its laid-out geometry, every cluster a container whose boxes
  and inner clusters are its children (moving a cluster in draw.io moves what it holds);
- every edge is attached to its source and target cells at the points Graphviz's spline
  leaves and enters them, through waypoints along that spline, so it follows a moved box;
- cells of one role share one style string; each cell is a ``UserObject`` carrying its
  stable id, its classes (``role-attention kind-causal``) and its tooltip, which draw.io
  shows under Edit Data.

Units are Graphviz points (1 draw.io unit each); draw.io's y grows downward.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from bertgraph.render.escape import drawio_html, xml_attribute
from bertgraph.render.layout import Arrow, Box, Frame, Layout, Paint, Point, Run, bezier, lines, number
from bertgraph.version import __version__

FONT = "Helvetica"
ROOT, LAYER = "0", "1"  # the model's root cell and its one layer, as draw.io writes them


def _style(*names: str, **values: str | float | int | None) -> str:
    """A draw.io style string: bare names (a shape: ``ellipse``, ``text``), then keys in a fixed order
    (None values left out).

    >>> _style("ellipse", fillColor="#ffffff", dashed=None, strokeWidth=1.25)
    'ellipse;fillColor=#ffffff;strokeWidth=1.25;'
    """
    parts = list(names)
    for key, value in values.items():
        if value is None:
            continue
        text = number(value) if isinstance(value, float) else str(value)
        parts.append(f"{key}={text}")
    return ";".join(parts) + ";"


def _dash(dash: str) -> dict[str, str | None]:
    if dash == "dashed":
        return {"dashed": "1", "dashPattern": None}
    if dash == "dotted":
        return {"dashed": "1", "dashPattern": "1 3"}
    return {"dashed": None, "dashPattern": None}


def _label(runs: Iterable[Run], size: float, colour: str | None) -> str:
    """Text lines as a draw.io HTML label; a run's size and colour written where they differ from the cell's."""
    rows = []
    for row in lines(runs):
        pieces = []
        for run in row:
            text = drawio_html(run.text.strip())
            text = f"<b>{text}</b>" if run.bold else text
            text = f"<i>{text}</i>" if run.italic else text
            attributes = f' style="font-size: {number(run.size)}px;"' if run.size != size else ""
            attributes += f' color="{run.colour}"' if run.colour != colour else ""
            pieces.append(f"<font{attributes}>{text}</font>" if attributes else text)
        rows.append(" ".join(pieces))
    # lines a font size apart, as Graphviz sets them (draw.io's own line height is 1.2)
    return '<div style="line-height: 1;">' + "<br>".join(rows) + "</div>" if rows else ""


def _cell(ident: str, classes: tuple[str, ...], label: str, tooltip: str, cell: str, geometry: str) -> Iterable[str]:
    """One cell wrapped in a ``UserObject`` with its id, classes and tooltip (draw.io's Edit Data)."""
    data = f"label={xml_attribute(label)}"
    data += f" class={xml_attribute(' '.join(classes))}" if classes else ""
    data += f" tooltip={xml_attribute(tooltip)}" if tooltip else ""
    yield f"        <UserObject id={xml_attribute(ident)} {data}>"
    yield f"          <mxCell {cell}>"
    yield f"            {geometry}"
    yield "          </mxCell>"
    yield "        </UserObject>"


class _Place:
    """Graphviz points (y up) to draw.io coordinates (y down), relative to a cell's parent container."""

    def __init__(self, layout: Layout) -> None:
        self.height = layout.height
        self.frames = {frame.id: frame for frame in layout.frames}

    def origin(self, parent: str | None) -> Point:
        """Where a container's top left corner is, in the page's coordinates (the page's for no container)."""
        if parent is None or parent not in self.frames:
            return 0.0, 0.0
        frame = self.frames[parent]
        return frame.left, self.height - frame.top

    def page(self, point: Point) -> Point:
        return point[0], self.height - point[1]

    def geometry(self, left: float, top: float, width: float, height: float, parent: str | None) -> str:
        x0, y0 = self.origin(parent)
        x, y = left - x0, self.height - top - y0
        return (
            f'<mxGeometry x="{number(x)}" y="{number(y)}" width="{number(width)}" '
            f'height="{number(height)}" as="geometry" />'
        )


def _left_edge(run: Run) -> float:
    """Where a run of text starts (Graphviz anchors it at its start, middle or end)."""
    return run.x - (run.width / 2 if run.align == "c" else run.width if run.align == "r" else 0.0)


def _outline(radius: float, paint: Paint, first: Run | None) -> dict[str, str | float | None]:
    """The style keys of a box's or frame's outline and of its text's first run."""
    return {
        "rounded": "1" if radius else "0",
        "absoluteArcSize": "1" if radius else None,
        "arcSize": 2 * radius if radius else None,
        "html": "1",
        "whiteSpace": "nowrap",
        "fillColor": paint.fill or "none",
        "strokeColor": paint.stroke or "none",
        "strokeWidth": paint.width if paint.stroke else None,
        **_dash(paint.dash),
        "fontFamily": FONT,
        "fontSize": first.size if first else None,
        "fontColor": first.colour if first else None,
    }


def _frame_lines(frame: Frame, place: _Place) -> Iterable[str]:
    first = frame.runs[0] if frame.runs else None
    style = _style(
        container="1",
        collapsible="0",
        recursiveResize="0",
        **_outline(frame.radius, frame.paint, first),
        align="left",
        verticalAlign="top",
        spacingLeft=max(0.0, _left_edge(first) - frame.left - 2) if first else None,
        spacingTop=max(0.0, frame.top - first.y - first.size - 2) if first else None,
    )
    label = _label(frame.runs, first.size, first.colour) if first else ""
    parent = frame.parent if frame.parent in place.frames else LAYER
    cell = f'style="{style}" vertex="1" parent={xml_attribute(parent or LAYER)}'
    geometry = place.geometry(frame.left, frame.top, frame.right - frame.left, frame.top - frame.bottom, frame.parent)
    yield from _cell(frame.id, frame.classes, label, "", cell, geometry)


def _box_lines(box: Box, place: _Place) -> Iterable[str]:
    first = box.runs[0] if box.runs else None
    ellipse = ("ellipse", "shape=ellipse", "perimeter=ellipsePerimeter")  # draw.io's named style, spelt out
    shapes = {"ellipse": ellipse, "circle": (*ellipse, "aspect=fixed"), "none": ("text",)}
    style = _style(
        *shapes.get(box.shape, ()),
        **_outline(box.radius, box.paint, first),
        align="center",
        verticalAlign="middle",
    )
    label = _label(box.runs, first.size, first.colour) if first else ""
    parent = box.parent if box.parent in place.frames else LAYER
    cell = f'style="{style}" vertex="1" parent={xml_attribute(parent or LAYER)}'
    geometry = place.geometry(box.left, box.top, box.width, box.height, box.parent)
    yield from _cell(box.id, box.classes, label, box.tooltip, cell, geometry)


def _fraction(point: Point, box: Box) -> tuple[float, float]:
    """Where ``point`` lies on ``box``, as draw.io's exit and entry fractions (0 left/top, 1 right/bottom)."""
    x = (point[0] - box.left) / box.width if box.width else 0.5
    y = (box.top - point[1]) / box.height if box.height else 0.5
    return round(min(1.0, max(0.0, x)), 5), round(min(1.0, max(0.0, y)), 5)


def _waypoints(arrow: Arrow) -> list[Point]:
    """Points along Graphviz's spline between its ends: each piece's thirds and the joints between pieces."""
    thirds = list(zip(bezier(arrow.points, 1 / 3), bezier(arrow.points, 2 / 3)))
    joints = [arrow.points[index] for index in range(3, len(arrow.points) - 1, 3)]
    found: list[Point] = []
    for index, (first, second) in enumerate(thirds):
        found += [first, second]
        if index < len(joints):
            found.append(joints[index])
    return found


def _middle(points: list[Point]) -> Point:
    """The point halfway along a polyline (where draw.io centres an edge's label)."""
    lengths = [((bx - ax) ** 2 + (by - ay) ** 2) ** 0.5 for (ax, ay), (bx, by) in itertools.pairwise(points)]
    left = sum(lengths) / 2
    for (ax, ay), (bx, by), length in zip(points, points[1:], lengths):
        if left <= length and length:
            share = left / length
            return ax + (bx - ax) * share, ay + (by - ay) * share
        left -= length
    return points[-1]


def _arrow_lines(arrow: Arrow, place: _Place, boxes: dict[str, Box]) -> Iterable[str]:
    if not arrow.points:
        return
    source, target = boxes[arrow.source], boxes[arrow.target]
    end = arrow.tip if arrow.tip is not None else arrow.points[-1]
    exit_x, exit_y = _fraction(arrow.points[0], source)
    entry_x, entry_y = _fraction(end, target)
    first = arrow.runs[0] if arrow.runs else None
    style = _style(
        edgeStyle="none",
        curved="1",
        html="1",
        rounded="0",
        endArrow="block" if arrow.tip is not None else "none",
        endFill="1" if arrow.tip is not None else None,
        endSize=arrow.head[0] if arrow.tip is not None else None,
        strokeColor=arrow.paint.stroke or "none",
        strokeWidth=arrow.paint.width,
        **_dash(arrow.paint.dash),
        fontFamily=FONT,
        labelBackgroundColor="none",
        exitX=exit_x,
        exitY=exit_y,
        exitPerimeter="0",
        entryX=entry_x,
        entryY=entry_y,
        entryPerimeter="0",
    )
    waypoints = [place.page(point) for point in _waypoints(arrow)]
    shown = [place.page(arrow.points[0]), *waypoints, place.page(end)]
    points = "".join(f'<mxPoint x="{number(x)}" y="{number(y)}" />' for x, y in waypoints)
    offset = ""
    if first is not None:
        middle = _middle(shown)
        centre = place.page((first.x, first.y + first.size / 3))
        offset = f'<mxPoint x="{number(centre[0] - middle[0])}" y="{number(centre[1] - middle[1])}" as="offset" />'
    geometry = f'<mxGeometry relative="1" as="geometry"><Array as="points">{points}</Array>{offset}</mxGeometry>'
    label = _label(arrow.runs, 0.0, None)  # the label's font in its text: an edge's style is its role's alone
    ends = f"source={xml_attribute(arrow.source)} target={xml_attribute(arrow.target)}"
    cell = f'style="{style}" edge="1" parent="{LAYER}" {ends}'
    yield from _cell(arrow.id, arrow.classes, label, "", cell, geometry)


def _title_lines(layout: Layout, place: _Place) -> Iterable[str]:
    """The title block: each text where Graphviz put it, each legend swatch as a small rectangle."""
    for number_, mark in enumerate(layout.marks, 1):
        xs, ys = [x for x, _ in mark.points], [y for _, y in mark.points]
        style = _style(
            rounded="0",
            html="1",
            fillColor=mark.paint.fill or "none",
            strokeColor=mark.paint.stroke or "none",
        )
        geometry = place.geometry(min(xs), max(ys), max(xs) - min(xs), max(ys) - min(ys), None)
        cell = f'style="{style}" vertex="1" parent="{LAYER}"'
        yield from _cell(f"bertgraph-legend-{number_}", layout.legend_classes(mark), "", "", cell, geometry)
    for number_, run in enumerate(layout.title, 1):
        style = _style(
            "text",
            html="1",
            whiteSpace="nowrap",
            strokeColor="none",
            fillColor="none",
            fontFamily=FONT,
            fontSize=run.size,
            fontColor=run.colour,
            fontStyle=(1 if run.bold else 0) + (2 if run.italic else 0),
            align={"c": "center", "r": "right"}.get(run.align, "left"),
            verticalAlign="middle",
            spacing="0",
        )
        left, top = _left_edge(run), run.y + run.size * 0.9
        geometry = place.geometry(left, top, run.width, run.size * 1.2, None)
        cell = f'style="{style}" vertex="1" parent="{LAYER}"'
        yield from _cell(f"bertgraph-title-{number_}", ("title",), drawio_html(run.text.strip()), "", cell, geometry)


def generate_drawio(layout: Layout, title: str = "") -> Iterable[str]:
    """The lines of a draw.io file drawing ``layout`` in one diagram named ``title``."""
    place = _Place(layout)
    boxes = {box.id: box for box in layout.boxes}
    yield f'<mxfile host="bertgraph" agent={xml_attribute("bertgraph " + __version__)} compressed="false">'
    yield f'  <diagram id="bertgraph" name={xml_attribute(title or "bertgraph")}>'
    yield (
        f'    <mxGraphModel grid="0" gridSize="10" guides="1" tooltips="1" connect="1" arrows="1" fold="1" '
        f'page="0" pageScale="1" pageWidth="{number(layout.width)}" pageHeight="{number(layout.height)}" '
        f'background="{layout.background or "#ffffff"}" math="0" shadow="0">'
    )
    yield "      <root>"
    yield f'        <mxCell id="{ROOT}" />'
    yield f'        <mxCell id="{LAYER}" parent="{ROOT}" />'
    yield from _title_lines(layout, place)
    for frame in layout.frames:  # outermost first: a container is written before what it holds
        yield from _frame_lines(frame, place)
    for box in layout.boxes:
        yield from _box_lines(box, place)
    for arrow in layout.arrows:
        yield from _arrow_lines(arrow, place, boxes)
    yield "      </root>"
    yield "    </mxGraphModel>"
    yield "  </diagram>"
    yield "</mxfile>"


def drawio_text(layout: Layout, title: str = "") -> str:
    return "\n".join(generate_drawio(layout, title)) + "\n"
