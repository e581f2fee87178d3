"""How a model knows where a token is, read off the ops that use positions.

- ``absolute``: a learned table read by ``embedding`` at indices computed from ``arange``,
  ``cumsum`` (RoBERTa's ids from padding) or a stored table of position ids — not straight
  from a model input, as the token and token-type tables are.
- ``relative-buckets``: a learned table read at ``log`` buckets of the difference of two
  positions (T5, MPNet): a bias added to the attention scores.
- ``relative``: attention scores against relative-position projections, ``gather``\\ ed at
  such differences (DeBERTa's disentangled attention).
- ``rotary``: ``rotate_half`` — the ``neg`` of one ``slice`` of the queries or keys
  concatenated with the other — multiplied by a tensor computed by ``sin``.
"""

from __future__ import annotations

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.facts.walk import argument, op, operators, stack_of

EMBEDDING_INDICES = 1  # embedding(weight, indices)
GATHER_INDEX = 1  # gather(self, dim, index): the second tensor argument


def annotate_position(graph: nx.DiGraph) -> dict[str, list[str]]:
    """Store (as ``position_kinds``) and return ``{stack path: [position kinds]}``.

    A kind found outside every stack (BERT's position table in ``embeddings``) holds for
    every stack; a model without stacks keeps it under ``""``.
    """
    found: dict[str | None, set[str]] = {}
    for kind, module in position_uses(graph):
        found.setdefault(stack_of(graph, module), set()).add(kind)
    stacks = list(graph.graph.get(g.G_STACKS, {})) or [""]
    everywhere = found.pop(None, set())
    summary = {
        stack: [kind for kind in g.POSITION_KINDS if kind in found.get(stack, set()) | everywhere] for stack in stacks
    }
    graph.graph[g.G_POSITION] = summary
    return summary


def position_uses(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """Every use of positions the ops show: (kind, module path of the op), in execution order."""
    uses = []
    for node in operators(graph, ("embedding", "gather", "neg")):
        name = op(graph, node)
        kind = None
        if name == "embedding":
            kind = _embedding_kind(graph, node)
        elif name == "gather":
            kind = _gather_kind(graph, node)
        elif _rotates_half(graph, node):
            kind = g.ROTARY
        if kind is not None:
            uses.append((kind, str(graph.nodes[node].get(g.MODULE, ""))))
    return uses


def _index_ops(graph: nx.DiGraph, node: str | None) -> tuple[set[str], bool]:
    """The ops that compute an index tensor (itself included), and whether a model input feeds it."""
    if node is None:
        return set(), False
    found = {node} | nx.ancestors(graph, node)
    ops = {op(graph, n) for n in found}
    reads_input = any(graph.nodes[n].get(g.KIND) == g.INPUT for n in found)
    return ops, reads_input


def _embedding_kind(graph: nx.DiGraph, node: str) -> str | None:
    indices = argument(graph, node, EMBEDDING_INDICES)
    if indices is not None and graph.nodes[indices].get(g.KIND) == g.INPUT:
        return None  # token ids or token types, straight from the input
    ops, reads_input = _index_ops(graph, indices)
    if {"log", "sub", "arange"} <= ops:
        return g.RELATIVE_BUCKETS
    if ops & {"arange", "cumsum"} or not reads_input:
        return g.ABSOLUTE
    return None


def _gather_kind(graph: nx.DiGraph, node: str) -> str | None:
    ops, _ = _index_ops(graph, argument(graph, node, GATHER_INDEX))
    return g.RELATIVE if {"sub", "arange"} <= ops else None


def _rotates_half(graph: nx.DiGraph, node: str) -> bool:
    """``neg(slice(x))`` concatenated, and the concatenation multiplied by something from ``sin``."""
    if op(graph, argument(graph, node, 0)) != "slice":
        return False
    for joined in graph.successors(node):
        if op(graph, joined) != "cat":
            continue
        for product in graph.successors(joined):
            if op(graph, product) != "mul":
                continue
            others = [s for s in graph.predecessors(product) if s != joined]
            if any(op(graph, a) == "sin" for other in others for a in {other} | nx.ancestors(graph, other)):
                return True
    return False
