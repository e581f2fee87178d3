"""Small readers of the operator graph the fact passes share: arguments, literals, stacks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g

INDEX_DTYPES = frozenset({"int64", "int32", "int16", "int8", "uint8"})


def argument(graph: nx.DiGraph, node: str, position: int) -> str | None:
    """The node that fills tensor argument ``position`` of ``node`` (by the edges' ``args``)."""
    for source in graph.predecessors(node):
        if position in graph.edges[source, node].get(g.ARGS, []):
            return str(source)
    return None


def literal(graph: nx.DiGraph, node: str, key: int | str) -> Any:
    """A literal argument of ``node`` by position or keyword, None when it has none there."""
    return graph.nodes[node].get(g.LITERALS, {}).get(str(key))


def op(graph: nx.DiGraph, node: str | None) -> str:
    """The op name of ``node`` ("" for an input, an output or no node)."""
    if node is None:
        return ""
    data = graph.nodes[node]
    return str(data.get(g.OP, "")) if data.get(g.KIND) == g.OPERATOR else ""


def operators(graph: nx.DiGraph, names: Iterable[str]) -> list[str]:
    """The op nodes whose op is one of ``names``, in execution order."""
    wanted = frozenset(names)
    return [n for n in g.ops_in_order(graph) if op(graph, n) in wanted]


def stack_of(graph: nx.DiGraph, module: str) -> str | None:
    """The layer stack a module belongs to: inside its layer list, or beside it in the module that
    holds the list (BART's ``encoder.embed_positions`` is the encoder's). None outside every stack."""
    stacks = list(graph.graph.get(g.G_STACKS, {}))
    for container in stacks:
        if module == container or module.startswith(container + "."):
            return container
    best: str | None = None
    for container in stacks:
        parent, dot, _ = container.rpartition(".")  # a list at the top has no holder but the model
        inside = dot and (module == parent or module.startswith(parent + "."))
        if inside and (best is None or len(container) > len(best)):
            best = container
    return best


def stack_key(graph: nx.DiGraph, module: str) -> str:
    """:func:`stack_of` as a graph-level key: "" for what is outside every stack."""
    return stack_of(graph, module) or ""


def inside(graph: nx.DiGraph, node: str, module: str) -> bool:
    """Whether ``node`` is an op of ``module`` or of a module below it."""
    path = str(graph.nodes[node].get(g.MODULE, ""))
    return graph.nodes[node].get(g.KIND) == g.OPERATOR and (path == module or path.startswith(module + "."))


def computed_in(graph: nx.DiGraph, start: str, module: str) -> set[str]:
    """``start`` and every node it is computed from inside ``module``: the walk back stops at the
    nodes that feed the module (which are included)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if inside(graph, current, module):
            todo.extend(str(source) for source in graph.predecessors(current))
    return seen
