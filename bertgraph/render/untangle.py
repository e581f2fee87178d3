"""Edges clear of frame titles: a laid-out drawing whose edges cross a frame's title, redrawn so none does.

Graphviz keeps the band it reserves for a cluster's label free of nodes, not of edges: an edge
into a frame from above runs through its title wherever the node it enters sits (19 of 21 drawings
at depths 2-3 did). Titles as nodes of their own stopped that but made the drawings twice as wide,
so the layout stays as dot makes it, and only what crosses is redrawn: :func:`clear_titles` reads
the layout (``dot -Tdot``, and what it draws, ``-Tjson``), and for each edge that runs through a
title it drops the edge's route, puts an invisible box over every title, and leaves the route to
be found again round the boxes when the positioned drawing is rendered (``neato -n2``, which
keeps every position and every other route). Pure text in, text out: the one Graphviz runner
(:mod:`bertgraph.render.graphviz_run`) runs the programs.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

# Points of clear space kept between an edge and the text of a title.
MARGIN = 1.0


class Box(NamedTuple):
    """A rectangle in Graphviz points, y upward."""

    left: float
    bottom: float
    right: float
    top: float

    def holds(self, x: float, y: float, margin: float = MARGIN) -> bool:
        return self.left - margin <= x <= self.right + margin and self.bottom - margin <= y <= self.top + margin


def title_boxes(layout: dict[str, Any]) -> dict[str, Box]:
    """Cluster name → the box its title text covers, from ``-Tjson``'s drawing operations (xdot).

    >>> title_boxes({"objects": [{"name": "cluster_a", "bb": "0,0,9,9", "_ldraw_": [
    ...     {"op": "F", "size": 10.0}, {"op": "T", "pt": [2, 5], "align": "l", "width": 4, "text": "ab"}]}]})
    {'cluster_a': Box(left=2.0, bottom=3.0, right=6.0, top=15.0)}
    """
    boxes = {}
    for item in layout.get("objects", []):
        if not str(item.get("name", "")).startswith("cluster") or "bb" not in item:
            continue
        spans = list(_text_spans(item.get("_ldraw_", [])))
        if spans:
            boxes[str(item["name"])] = _union(spans)
    return boxes


def _union(boxes: list[Box]) -> Box:
    return Box(
        min(b.left for b in boxes), min(b.bottom for b in boxes), max(b.right for b in boxes), max(b.top for b in boxes)
    )


def _text_spans(ops: Iterable[dict[str, Any]]) -> Iterable[Box]:
    """One box per line of text: from the baseline a fifth of the size down to the size up."""
    size = 14.0
    for op in ops:
        if op.get("op") == "F":
            size = float(op["size"])
        elif op.get("op") == "T" and str(op.get("text", "")).strip():
            x, y = (float(v) for v in op["pt"])
            width = float(op["width"])
            left = {"l": x, "c": x - width / 2, "r": x - width}[str(op.get("align", "l"))]
            yield Box(left, y - size / 5, left + width, y + size)


def routes(layout: dict[str, Any]) -> list[tuple[str, str, list[tuple[float, float]]]]:
    """(tail, head, points along its route) of every drawn edge (invisible ones left out)."""
    names = {item["_gvid"]: str(item["name"]) for item in layout.get("objects", []) if "_gvid" in item}
    return [
        (
            names[edge["tail"]],
            names[edge["head"]],
            [p for op in edge.get("_draw_", []) if op.get("op") == "b" for p in _walk(op["points"])],
        )
        for edge in layout.get("edges", [])
        if edge.get("style") != "invis"
    ]


def _walk(controls: list[list[float]]) -> list[tuple[float, float]]:
    """Points along a route no more than about a point apart."""
    found: list[tuple[float, float]] = []
    for i in range(0, len(controls) - 3, 3):
        piece = controls[i : i + 4]
        length = sum(math.dist(a, b) for a, b in itertools.pairwise(piece))
        points = bezier(piece, steps=max(16, int(length)))
        found += points if not found else points[1:]
    return found


Route = tuple[str, str, list[tuple[float, float]]]


def crossing_edges(
    layout: dict[str, Any], titles: dict[str, Box] | None = None, drawn: list[Route] | None = None
) -> list[tuple[str, str]]:
    """(tail, head) names of the drawn edges whose route runs through a title (``titles``: where they are
    now; ``drawn``: :func:`routes` of ``layout``, when already read)."""
    boxes = list((title_boxes(layout) if titles is None else titles).values())
    # each title filed under the bands of height _BAND it reaches (margin included): a point is checked
    # against the titles of its own band only (bert-large unfolded has 400 titles and 1,000 long routes)
    filed: dict[int, list[Box]] = {}
    for box in boxes:
        for band in range(int((box.bottom - MARGIN) // _BAND), int((box.top + MARGIN) // _BAND) + 1):
            filed.setdefault(band, []).append(box)
    found = []
    for tail, head, points in routes(layout) if drawn is None else drawn:
        if any(box.holds(x, y) for x, y in points for box in filed.get(int(y // _BAND), ())):
            found.append((tail, head))
    return found


# Height of the bands the occupied things of a drawing are filed in, to find those beside a title fast.
_BAND = 16.0


def placed_titles(layout: dict[str, Any], drawn: list[Route] | None = None) -> dict[str, Box]:
    """Each title where no edge, edge label or node is: where Graphviz put it when that place is clear,
    else the leftmost clear stretch of its band (the frame's width at the title's height) it fits in.

    A title no stretch of its band holds stays where it was; its crossing edges are routed anew.
    """
    titles = title_boxes(layout)
    # only the bands beside a title are read: a route's points elsewhere are never filed (bert-large
    # unfolded has half a million of them)
    wanted = {band for box in titles.values() for band in _bands_beside(box)}
    filed: dict[int, list[Box]] = {}
    for _, _, points in routes(layout) if drawn is None else drawn:
        for x, y in points:
            band = int(y // _BAND)
            if band in wanted:
                filed.setdefault(band, []).append(Box(x, y, x, y))
    others = _node_boxes(layout)
    for edge in layout.get("edges", []):
        others += list(_text_spans(edge.get("_ldraw_", [])))
    for thing in others:
        for band in range(int(thing.bottom // _BAND), int(thing.top // _BAND) + 1):
            if band in wanted:
                filed.setdefault(band, []).append(thing)
    frames = {str(item["name"]): item for item in layout.get("objects", []) if "bb" in item and "name" in item}
    placed = {}
    for name, box in titles.items():
        left, _, right, _ = (float(v) for v in str(frames[name]["bb"]).split(","))
        near = {id(thing): thing for band in _bands_beside(box) for thing in filed.get(band, [])}
        within = [o for o in near.values() if o.top >= box.bottom - MARGIN and o.bottom <= box.top + MARGIN]
        placed[name] = _clear_stretch(box, sorted(within), left + 8, right - 8)
    return placed


def _bands_beside(box: Box) -> range:
    """The bands a title's clear space reaches."""
    return range(int((box.bottom - 4 * MARGIN) // _BAND), int((box.top + 4 * MARGIN) // _BAND) + 1)


def _clear_stretch(box: Box, band: list[Box], left: float, right: float) -> Box:
    """``box`` moved along its band to the first place between ``left`` and ``right`` nothing in ``band``
    comes within three times :data:`MARGIN` of."""
    width, clear = box.right - box.left, 3 * MARGIN

    def free(start: float) -> bool:
        return not any(
            o.right >= start - clear
            and o.left <= start + width + clear
            and o.top >= box.bottom - clear
            and o.bottom <= box.top + clear
            for o in band
        )

    if free(box.left):
        return box
    for start in sorted(x for x in {left, *(o.right + clear + 0.5 for o in band)} if x >= left):
        if start + width > right:
            break
        if free(start):
            return Box(start, box.bottom, start + width, box.top)
    return box


def bezier(points: list[list[float]], steps: int = 16) -> list[tuple[float, float]]:
    """Points along a piecewise cubic Bézier (xdot's ``b``: a start, then three points per piece).

    >>> bezier([[0, 0], [0, 1], [1, 1], [1, 0]], steps=2)
    [(0.0, 0.0), (0.5, 0.75), (1.0, 0.0)]
    """
    found = [(float(points[0][0]), float(points[0][1]))]
    for i in range(1, len(points) - 2, 3):
        (x0, y0), (x1, y1), (x2, y2), (x3, y3) = points[i - 1 : i + 3]
        for step in range(1, steps + 1):
            t = step / steps
            a, b, c, d = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t**2, t**3
            found.append((a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3))
    return found


# A DOT id as ``dot -Tdot`` writes one: quoted, a name, or a number.
_ID = r'"(?:[^"\\]|\\.)*"|[A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*|-?(?:\d+(?:\.\d*)?|\.\d+)'
_EDGE = re.compile(rf"^(\s*)({_ID})\s*->\s*({_ID})\s*\[", re.MULTILINE)


def _unquoted(ident: str) -> str:
    return ident[1:-1].replace('\\"', '"') if ident.startswith('"') else ident


def _attribute_end(text: str, start: int) -> int:
    """The index just past the ``]`` closing the attribute list opened at ``start`` (quotes and <…> skipped)."""
    depth, index = 0, start + 1
    while index < len(text):
        char = text[index]
        if char == '"':
            index += 1
            while index < len(text) and text[index] != '"':
                index += 2 if text[index] == "\\" else 1
        elif char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "]" and depth == 0:
            return index + 1
        index += 1
    raise ValueError("unterminated attribute list in Graphviz's output")


_SUBGRAPH = re.compile(rf"^\s*subgraph\s+({_ID})\s*\{{", re.MULTILINE)
_LABEL_AT = re.compile(r'\blp="([-\d.e]+),([-\d.e]+)"')


def _moved_labels(laid: str, layout: dict[str, Any], moved: dict[str, Box]) -> str:
    """``laid`` with each moved cluster's label position (``lp``, its centre) shifted as its title was."""
    if not moved:
        return laid
    was = title_boxes(layout)
    pieces, last = [], 0
    for match in _SUBGRAPH.finditer(laid):
        name = _unquoted(match.group(1))
        if name not in moved:
            continue
        label = _LABEL_AT.search(laid, match.end())
        if label is None:
            continue
        shift = moved[name].left - was[name].left
        x, y = float(label.group(1)) + shift, label.group(2)
        pieces += [laid[last : label.start()], f'lp="{x:g},{y}"']
        last = label.end()
    pieces.append(laid[last:])
    return "".join(pieces)


def clear_titles(laid: str, layout: dict[str, Any]) -> str:
    """``laid`` (``dot -Tdot``, :func:`framed`) to render with ``neato -n2``: every position as dot laid it
    out, but where ``layout`` (what ``neato -n2`` draws of ``laid``, ``-Tjson``) shows an edge through a
    title, the title moved along its band to a clear stretch, or where there is none the edge taken round
    the title's end (:func:`reroute`)."""
    drawn = routes(layout)
    titles = placed_titles(layout, drawn)
    where = title_boxes(layout)
    moved = {name: box for name, box in titles.items() if box != where[name]}
    laid = _moved_labels(laid, layout, moved)
    crossing = set(crossing_edges(layout, titles, drawn))
    if not crossing:
        return laid
    controls = _controls(layout)
    dx, dy = _shift(laid, layout)
    obstacles = list(titles.values()) + _node_boxes(layout)
    # titles one above the other (a frame's and its first nested frame's) are gone round as one
    boxes = sorted(_merged(list(titles.values())), key=lambda b: -b.top)
    page = Box(*(float(v) for v in str(layout.get("bb", "0,0,0,0")).split(",")))
    pieces, last = [], 0
    for match in _EDGE.finditer(laid):
        key = (_unquoted(match.group(2)), _unquoted(match.group(3)))
        end = _attribute_end(laid, match.end() - 1)
        attributes = laid[match.end() : end]
        route = _ROUTE_POS.search(attributes)
        if key not in crossing or key not in controls or "invis" in attributes or route is None:
            continue
        rerouted = reroute(controls[key], boxes, obstacles, page)
        spline = " ".join(f"{x - dx:.2f},{y - dy:.2f}" for x, y in rerouted)
        pieces += [laid[last : match.end()], attributes[: route.start()], f'pos="{route.group(1)}{spline}"']
        pieces.append(attributes[route.end() :])
        last = end
    pieces.append(laid[last:])
    return "".join(pieces)


_ROUTE_POS = re.compile(r'\bpos="((?:[es],[-\d.e]+,[-\d.e]+\s+)*)(?:[^"\\]|\\.|\\\n)*"')


def _controls(layout: dict[str, Any]) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(tail, head) → the control points of each drawn edge's route, as ``-Tjson`` gives them."""
    names = {item["_gvid"]: str(item["name"]) for item in layout.get("objects", []) if "_gvid" in item}
    found = {}
    for edge in layout.get("edges", []):
        for op in edge.get("_draw_", []):
            if op.get("op") == "b" and edge.get("style") != "invis":
                found[names[edge["tail"]], names[edge["head"]]] = [(float(x), float(y)) for x, y in op["points"]]
    return found


def _node_boxes(layout: dict[str, Any]) -> list[Box]:
    boxes = []
    for item in layout.get("objects", []):
        if "pos" in item and "width" in item:
            x, y = (float(v) for v in str(item["pos"]).split(","))
            half_width, half_height = float(item["width"]) * 36, float(item["height"]) * 36
            boxes.append(Box(x - half_width, y - half_height, x + half_width, y + half_height))
    return boxes


Point = tuple[float, float]


def reroute(controls: list[Point], boxes: list[Box], obstacles: list[Box], page: Box | None = None) -> list[Point]:
    """A route's control points (a piecewise cubic Bézier) taken round each of ``boxes`` it runs through:
    the pieces that run through one become a polyline that goes round the box's nearer end (:func:`detour`),
    every other piece stays as it was.

    >>> [(round(x, 1), round(y, 1)) for x, y in reroute([(5, 10), (5, 7), (5, 3), (5, 0)], [Box(0, 4, 8, 6)], [])[::3]]
    [(5, 10), (15.5, 10.0), (15.5, 0.0), (5.0, 0.0)]
    """
    pieces = [controls[i : i + 4] for i in range(0, len(controls) - 3, 3)]
    samples: list[tuple[float, float, int]] = []
    for number, piece in enumerate(pieces):
        length = sum(math.dist(a, b) for a, b in itertools.pairwise(piece))
        points = bezier([list(p) for p in piece], steps=max(16, int(length / 2)))
        samples += [(x, y, number) for x, y in (points if number == 0 else points[1:])]
    touched: set[int] = set()
    reach = _extent((x, y) for x, y, _ in samples)
    for _ in range(3):  # a way round one title can meet another: go round again, a few times at most
        changed: set[int] = set()
        for box in boxes:
            if not _overlap(box, reach, _DETOUR_PAD + 1):
                changed = set()  # a box the route passes nowhere near: no way round it (a large drawing has hundreds)
                continue
            samples, changed = detour(samples, box, obstacles, page)
            touched |= changed
            if changed:
                reach = _extent((x, y) for x, y, _ in samples)
        near = [box for box in boxes if _overlap(box, reach, MARGIN + 1)]
        if not changed and not any(box.holds(x, y) for box in near for x, y, _ in samples):
            break
    found = [controls[0]]
    number = 0
    while number < len(pieces):
        if number not in touched:
            found += pieces[number][1:]
            number += 1
            continue
        block = number
        while block + 1 < len(pieces) and block + 1 in touched:
            block += 1
        line = simplified(
            [
                found[-1],
                *((x, y) for x, y, piece in samples if number <= (piece if piece >= 0 else -1 - piece) <= block),
            ]
        )
        curve = smooth(line)
        drawn = bezier([list(p) for p in curve])
        extent = _extent(drawn)
        near = [b for b in boxes if _overlap(b, extent, MARGIN + 1)]
        clear = not any(b.holds(x, y) for b in near for x, y in drawn)
        found += (curve if clear else cubic(line))[1:]
        number = block + 1
    return found


def detour(
    samples: list[tuple[float, float, int]], box: Box, obstacles: list[Box], page: Box | None = None
) -> tuple[list[tuple[float, float, int]], set[int]]:
    """``samples`` (points along a route, each with its piece) bowed round the nearer end of ``box`` where
    they run through it: leaving the route a little above the box, passing its end, rejoining a little
    below — round the other end when the nearer way meets another obstacle; and the pieces so changed."""
    pad = _DETOUR_PAD
    padded = Box(box.left - pad, box.bottom - pad, box.right + pad, box.top + pad)
    inside = [i for i, (x, y, _) in enumerate(samples) if padded.holds(x, y, 0)]
    if not inside or inside[0] == 0 or inside[-1] == len(samples) - 1:
        return samples, set()
    reach = max(10.0, box.top - box.bottom)
    bends = {i for i, (x, y, piece) in enumerate(samples) if piece < 0}  # a way round an earlier title
    before = inside[0] - 1
    while before > 0 and samples[before][1] < padded.top + reach and before not in bends:
        before -= 1
    after = inside[-1] + 1
    while after < len(samples) - 1 and samples[after][1] > padded.bottom - reach and after not in bends:
        after += 1
    (x_in, y_in, piece_in), (x_out, y_out, piece_out) = samples[before], samples[after]
    piece_in, piece_out = _piece(samples, before), _piece(samples, after)
    middle = (x_in + x_out) / 2
    # the nearer end first, but one that stays on the page (``page``) before one that widens it
    outside = (lambda x: not page.left <= x <= page.right) if page is not None else (lambda x: False)
    sides = sorted(
        (padded.left - 2 * pad, padded.right + 2 * pad), key=lambda side: (outside(side), abs(side - middle))
    )
    others = [
        o
        for o in obstacles
        if not (box.left <= o.left and o.right <= box.right and box.bottom <= o.bottom and o.top <= box.top)
    ]
    side = sides[0]
    for candidate in sides:
        trial = [(x_in, y_in), (candidate, padded.top), (candidate, padded.bottom), (x_out, y_out)]
        extent = _extent(trial)
        near = [other for other in others if _overlap(other, extent, MARGIN + 1)]
        if not any(_meets(a, b, other) for a, b in itertools.pairwise(trial) for other in near):
            side = candidate
            break
    top, bottom = min(padded.top + pad, y_in), max(padded.bottom - pad, y_out)  # never back up the page
    # the way's points carry their piece negative (-1 - piece): a later way round stops at them
    corners = [(x_in, y_in), (side, top), (side, bottom), (x_out, y_out)]
    way: list[tuple[float, float, int]] = []
    for number, (start, end) in enumerate(itertools.pairwise(corners)):
        steps = max(1, int(math.dist(start, end) / 2))
        piece = -1 - (piece_in if number == 0 else piece_out)
        way += [
            (start[0] + (end[0] - start[0]) * k / steps, start[1] + (end[1] - start[1]) * k / steps, piece)
            for k in range(1, steps + (number < 2))
        ]
    return [*samples[: before + 1], *way, *samples[after:]], set(range(piece_in, piece_out + 1))


# How far a way round a title keeps from it.
_DETOUR_PAD = 2 * MARGIN + 0.5


def _extent(points: Iterable[tuple[float, float]]) -> Box:
    """The smallest box holding ``points``."""
    xs, ys = zip(*points, strict=True)
    return Box(min(xs), min(ys), max(xs), max(ys))


def _overlap(box: Box, other: Box, margin: float) -> bool:
    """Whether ``box`` grown by ``margin`` on every side meets ``other``."""
    return (
        box.left - margin <= other.right
        and other.left <= box.right + margin
        and box.bottom - margin <= other.top
        and other.bottom <= box.top + margin
    )


def _piece(samples: list[tuple[float, float, int]], index: int) -> int:
    piece = samples[index][2]
    return piece if piece >= 0 else -1 - piece


def smooth(points: list[Point]) -> list[Point]:
    """The control points of a Catmull-Rom curve through ``points`` as a piecewise cubic Bézier: the way
    round a title bends instead of turning corners.

    >>> smooth([(0, 0), (3, 0)])
    [(0, 0), (0.5, 0.0), (2.5, 0.0), (3, 0)]
    """
    found = [points[0]]
    for i in range(len(points) - 1):
        before, start, end = points[max(i - 1, 0)], points[i], points[i + 1]
        beyond = points[min(i + 2, len(points) - 1)]
        low, high = sorted((start[1], end[1]))
        found += [  # each piece kept between its ends' heights: the curve never turns back up the page
            (start[0] + (end[0] - before[0]) / 6, min(max(start[1] + (end[1] - before[1]) / 6, low), high)),
            (end[0] - (beyond[0] - start[0]) / 6, min(max(end[1] - (beyond[1] - start[1]) / 6, low), high)),
            end,
        ]
    return found


def simplified(points: list[Point], tolerance: float = 0.5) -> list[Point]:
    """``points`` with those dropped that lie within ``tolerance`` of the line through their neighbours kept
    (Ramer-Douglas-Peucker): a route's sampled curve in a few straight pieces.

    >>> simplified([(0, 0), (1, 0.1), (2, 0), (3, 5)])
    [(0, 0), (2, 0), (3, 5)]
    """
    keep = [False] * len(points)
    keep[0] = keep[-1] = True
    stack = [(0, len(points) - 1)]
    while stack:
        first, last = stack.pop()
        (x0, y0), (x1, y1) = points[first], points[last]
        length = math.hypot(x1 - x0, y1 - y0) or 1.0
        far, index = 0.0, -1
        for i in range(first + 1, last):
            x, y = points[i]
            distance = abs((x1 - x0) * (y0 - y) - (x0 - x) * (y1 - y0)) / length
            if distance > far:
                far, index = distance, i
        if far > tolerance:
            keep[index] = True
            stack += [(first, index), (index, last)]
    return [point for point, kept in zip(points, keep, strict=True) if kept]


def _meets(a: Point, b: Point, box: Box) -> bool:
    """Whether the straight piece from ``a`` to ``b`` comes within :data:`MARGIN` of ``box``."""
    steps = max(1, int(math.dist(a, b) / 2))
    return any(box.holds(a[0] + (b[0] - a[0]) * k / steps, a[1] + (b[1] - a[1]) * k / steps) for k in range(steps + 1))


def cubic(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """A polyline as the control points of a piecewise cubic Bézier (straight pieces), as ``pos`` wants them.

    >>> cubic([(0, 0), (3, 0)])
    [(0, 0), (1.0, 0.0), (2.0, 0.0), (3, 0)]
    """
    found = [points[0]]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        found += [(x0 + (x1 - x0) / 3, y0 + (y1 - y0) / 3), (x0 + 2 * (x1 - x0) / 3, y0 + 2 * (y1 - y0) / 3), (x1, y1)]
    return found


def _shift(laid: str, layout: dict[str, Any]) -> tuple[float, float]:
    """How far ``neato -n2`` moved dot's positions: where it drew the first corner :func:`framed` placed."""
    found = _BOUNDS.search(laid)
    for item in layout.get("objects", []):
        if item.get("name") == "bertgraph corner 0" and found is not None:
            x, y = (float(v) for v in str(item["pos"]).split(","))
            return x - float(found.group(1)), y - float(found.group(2))
    return 0.0, 0.0


def _merged(boxes: list[Box], gap: float = 6 * MARGIN, rise: float = 48.0) -> list[Box]:
    """``boxes`` with any two closer than ``gap`` across or ``rise`` up and down joined into the box round
    both: nested frames' titles stand one above another, and are gone round as one.

    >>> _merged([Box(0, 0, 2, 1), Box(0, 1.5, 2, 3), Box(9, 9, 10, 10)])
    [Box(left=0, bottom=0, right=2, top=3), Box(left=9, bottom=9, right=10, top=10)]
    """
    merged = list(boxes)
    joined = True
    while joined:
        joined = False
        for a, b in itertools.combinations(merged, 2):
            if (
                a.left <= b.right + gap
                and b.left <= a.right + gap
                and a.bottom <= b.top + rise
                and b.bottom <= a.top + rise
            ):
                merged = [box for box in merged if box not in (a, b)] + [_union([a, b])]
                joined = True
                break
    return sorted(merged)


def _appended(text: str, statements: list[str]) -> str:
    """``text`` with ``statements`` added before its graph's closing brace."""
    closing = text.rstrip().rfind("}")
    return text[:closing] + "".join(f"{statement}\n" for statement in statements) + "}\n"


_BOUNDS = re.compile(r'\bbb="([-\d.e]+),([-\d.e]+),([-\d.e]+),([-\d.e]+)"')


def framed(laid: str) -> str:
    """``laid`` (``dot -Tdot``) with two invisible points on the corners of dot's bounding box.

    Drawn from positions, ``neato -n2`` takes the page from what it draws and leaves out the margin
    dot kept around the title block (8 points), and then draws each frame's title 8 points further
    right than its edges: with the corners held the page and every title stay where dot put them.

    >>> framed(chr(10).join(["digraph {", 'graph [bb="0,0,10,20"];', "}"])).count("bertgraph corner")
    2
    """
    found = _BOUNDS.search(laid)
    if found is None:
        return laid
    left, bottom, right, top = (float(v) for v in found.groups())
    return _appended(
        laid,
        [
            f'\t"bertgraph corner {number}" [shape=point, style=invis, width=0, height=0, pos="{x:g},{y:g}"];'
            for number, (x, y) in enumerate(((left, bottom), (right, top)))
        ],
    )
