"""How a model knows where a token is, read off the ops that use positions.

- ``absolute``: a learned table read by ``embedding`` at indices computed from ``arange``,
  ``cumsum`` (RoBERTa's ids from padding) or a stored table of position ids — not straight
  from a model input, as the token and token-type tables are.
- ``relative-buckets``: a learned table read at ``log`` buckets of the difference of two
  positions (T5, MPNet): a bias added to the attention scores.
- ``relative``: attention scores against relative-position projections, ``gather``\\ ed at
  such differences (DeBERTa's disentangled attention), computed from positions alone: an index
  that reads a weight (a mixture of experts' top-k choice, made from the hidden states) is no
  position, whatever ``arange`` and ``sub`` lie upstream of it.
- ``rotary``: ``rotate_half`` — the ``neg`` of one ``slice`` of the queries or keys
  concatenated with the other — multiplied by a tensor computed by ``sin``; or the rotation of
  interleaved pairs (DeepSeek's ``rope_interleave``, on MLA's rotary part of each head):
  ``x[..., 0::2] · cos − x[..., 1::2] · sin``, each factor read from the ``cos`` and ``sin`` tables.
"""

from __future__ import annotations

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.facts.walk import argument, literal, op, operators, stack_of

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
    for node in operators(graph, ("embedding", "gather", "neg", "sub")):
        name = op(graph, node)
        kind = None
        if name == "embedding":
            kind = _embedding_kind(graph, node)
        elif name == "gather":
            kind = _gather_kind(graph, node)
        elif _rotates_half(graph, node) if name == "neg" else _rotates_pairs(graph, node):
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
    index = argument(graph, node, GATHER_INDEX)
    if index is None:
        return None
    computed = {index} | nx.ancestors(graph, index)
    if not {"sub", "arange"} <= {op(graph, n) for n in computed}:
        return None
    reads_weights = any(graph.nodes[n].get(g.PARAM_NAMES) or graph.nodes[n].get(g.SHARED_PARAMS) for n in computed)
    return None if reads_weights else g.RELATIVE


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


# slice(x, dim, start, end, step): the literals of an interleaved half, x[..., start::2]
SLICE_START, SLICE_STEP = "2", "4"
# Ops between a cos or sin table and the factor a rotation multiplies by (casts, halves, broadcasting).
TABLE_OPS = frozenset({"to", "_to_copy", "slice", "unsqueeze", "view", "reshape", "expand", "mul", "index", "select"})


def _rotates_pairs(graph: nx.DiGraph, node: str) -> bool:
    """``x[..., 0::2] · cos − x[..., 1::2] · sin``: the first half of rotating interleaved pairs."""
    halves, tables = [], []
    for position in (0, 1):
        product = argument(graph, node, position)
        if op(graph, product) != "mul" or product is None:
            return False
        factors = [argument(graph, product, 0), argument(graph, product, 1)]
        half = next((f for f in factors if _interleaved_half(graph, f)), None)
        if half is None:
            return False
        halves.append(half)
        tables.append(_table(graph, next((f for f in factors if f != half), None)))
    same_source = argument(graph, halves[0], 0) == argument(graph, halves[1], 0)
    starts = {literal(graph, half, SLICE_START) or 0 for half in halves}
    return same_source and starts == {0, 1} and tables == ["cos", "sin"]


def _interleaved_half(graph: nx.DiGraph, node: str | None) -> bool:
    return node is not None and op(graph, node) == "slice" and literal(graph, node, SLICE_STEP) == 2


def _table(graph: nx.DiGraph, node: str | None) -> str:
    """``cos`` or ``sin`` when ``node`` is read from that table (through casts and broadcasting), else ``""``."""
    for _ in range(8):
        name = op(graph, node)
        if name in ("cos", "sin") or name not in TABLE_OPS or node is None:
            return name if name in ("cos", "sin") else ""
        node = argument(graph, node, 0)
    return ""
