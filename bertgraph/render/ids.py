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
