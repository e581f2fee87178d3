"""Stable ids and role classes for every drawn element, the same in every format.

Graphviz copies a DOT element's ``id`` and ``class`` into its SVG ``<g>``; TikZ names its
nodes and styles, and draw.io its cells, from the same ids and classes. An id comes from the
module path (:func:`~bertgraph.render.escape.element_id`), so a module keeps its id at every
depth and in every run — ``bert-pooler`` is the pooler's box at depth 1 and its frame at
depth 2 — and a style sheet, a script or an editor can find it. Classes name what a box looks
like it is: ``role-attention kind-causal``, ``role-feed-forward``; frames are ``cluster-…``,
arrows ``edge-…``.
"""

from __future__ import annotations

import re

from bertgraph.render.escape import element_id

# The attention kinds' colour kinds (render/style.py ATTENTION_COLOURS) as class names.
_ATTENTION_KINDS = {"sliding": "sliding-window"}


class ElementIds:
    """Ids for the elements of one drawing: stable per name, unique within the drawing.

    Two names that spell the same id (which module paths do not) keep the first its id and
    number the next, in the order the drawing is written, so the result is deterministic.

    >>> ids = ElementIds()
    >>> ids("bert.pooler"), ids("bert.pooler"), ids("bert-pooler"), ids.edge("bert.pooler", "classifier")
    ('bert-pooler', 'bert-pooler', 'bert-pooler-2', 'bert-pooler__classifier')
    """

    def __init__(self) -> None:
        self._by_name: dict[str, str] = {}
        self._used: set[str] = set()

    def __call__(self, name: str) -> str:
        if name not in self._by_name:
            self._by_name[name] = self._claim(element_id(name))
        return self._by_name[name]

    def edge(self, source: str, target: str) -> str:
        """The id of the arrow from ``source`` to ``target`` (both names given to this table)."""
        return self._claim(f"{self(source)}__{self(target)}")

    def _claim(self, base: str) -> str:
        candidate, number = base, 2
        while candidate in self._used:
            candidate, number = f"{base}-{number}", number + 1
        self._used.add(candidate)
        return candidate

    def names(self) -> dict[str, str]:
        """Every name given so far and its id."""
        return dict(self._by_name)


def look_classes(kind: str, base: str = "") -> list[str]:
    """The role class of a box of colour kind ``kind`` (see :mod:`bertgraph.render.style`), and its kind.

    A layer coloured as its self-attention stays a layer (``base`` is the kind before the
    attention kind refined it).

    >>> look_classes("attention-causal"), look_classes("attention-causal", "block")
    (['role-attention', 'kind-causal'], ['role-block', 'kind-causal'])
    >>> look_classes("feed-forward"), look_classes("attention-sliding")
    (['role-feed-forward'], ['role-attention', 'kind-sliding-window'])
    """
    if kind.startswith("attention-"):
        refined = kind.removeprefix("attention-")
        role = "block" if base == "block" else "attention"
        return [f"role-{role}", f"kind-{_ATTENTION_KINDS.get(refined, refined)}"]
    return [f"role-{kind}"]


def class_text(classes: list[str]) -> str:
    """Classes as one attribute value, each made safe (a role named by a graph keeps to the id alphabet).

    >>> class_text(["role-attention", "kind-causal", "heat-3"])
    'role-attention kind-causal heat-3'
    """
    return " ".join(element_id(name) for name in classes)


_GRAPH_GROUP = re.compile(r'<g id="[^"]*" class="graph[^"]*"[^>]*>')
_POLYGON = re.compile(r'<polygon fill="([^"]*)" stroke="([^"]*)"')


def _legend_looks() -> dict[tuple[str, str], list[str]]:
    """The (fill, border) of every legend swatch a diagram can draw, in either theme, and its classes."""
    from bertgraph.render import style

    looks: dict[tuple[str, str], list[str]] = {}
    for name in style.THEMES:
        colours = style.theme(name)
        for kind, palette in colours["kinds"].items():
            # an attention kind's swatch stands for every box of that kind, attention block or layer
            classes = [name for name in look_classes(kind) if name.startswith("kind-")] or look_classes(kind)
            looks.setdefault((palette.fill.lower(), palette.border.lower()), classes)
        for bin_, palette in enumerate(colours["heat"]):
            looks.setdefault((palette.fill.lower(), palette.border.lower()), [f"heat-{bin_}"])
        cross = colours["kinds"]["attention-cross"].border.lower()
        looks.setdefault((cross, cross), ["edge-cross"])
    return looks


def legend_classes(svg: str) -> str:
    """Graphviz's SVG of a diagram with each legend swatch classed like the boxes it explains.

    The legend is part of the title block (an HTML-like label), whose cells Graphviz gives no
    class; a swatch's fill polygon and the outline drawn over it get ``legend`` and the class of
    what it explains (``legend role-feed-forward``, ``legend kind-causal``), so a style sheet that
    restyles a role or an attention kind restyles its swatch too.

    >>> svg = '<g id="graph0" class="graph">\\n<polygon fill="white" stroke="transparent" points="0,0"/>'
    >>> svg += '\\n<polygon fill="#b6939b" stroke="transparent" points="0,0"/>\\n'
    >>> svg += '<polygon fill="none" stroke="#cf222e" points="0,0"/>\\n<g id="n" class="node">'
    >>> print(legend_classes(svg))
    <g id="graph0" class="graph">
    <polygon fill="white" stroke="transparent" points="0,0"/>
    <polygon class="legend kind-causal" fill="#b6939b" stroke="transparent" points="0,0"/>
    <polygon class="legend kind-causal" fill="none" stroke="#cf222e" points="0,0"/>
    <g id="n" class="node">
    """
    opening = _GRAPH_GROUP.search(svg)
    if opening is None:
        return svg
    start = opening.end()
    end = svg.find("<g ", start)
    end = len(svg) if end < 0 else end
    looks = _legend_looks()
    fills = {fill: classes for (fill, _), classes in looks.items()}
    pending: tuple[str, list[str]] | None = None  # a swatch's border, awaited right after its fill
    seen = 0

    def mark(match: re.Match[str]) -> str:
        nonlocal pending, seen
        seen += 1
        if seen == 1:
            return match.group(0)  # the background, which may share a swatch's colour (dark input/output)
        fill, stroke = match.group(1).lower(), match.group(2).lower()
        classes: list[str] | None = None
        if fill == "none" and pending is not None and stroke == pending[0]:
            classes = pending[1]
            pending = None
        elif stroke == "transparent" and fill in fills:
            border = next(b for (f, b) in looks if f == fill)
            classes = fills[fill]
            pending = (border, classes)
        if classes is None:
            return match.group(0)
        return f'<polygon class="{class_text(["legend", *classes])}" fill="{match.group(1)}" stroke="{match.group(2)}"'

    return svg[:start] + _POLYGON.sub(mark, svg[start:end]) + svg[end:]
