"""The attention kind of every attention block, read off the mask the model builds.

transformers builds one boolean mask per kind of layer (``masking_utils``) from index
tensors: ``q_idx`` and ``kv_idx`` come from ``arange``; causal is ``kv_idx <= q_idx``
(``le.Tensor``), a bidirectional window ``abs(q_idx - kv_idx) <= w`` (``le.Scalar``), a
causal window adds ``kv_idx > q_idx - w`` (``gt.Tensor``), full attention the vacuous
``q_idx >= 0`` and padding an ``index`` into the attention-mask input. Eager models turn the
boolean mask into numbers (``where``) or apply it with ``masked_fill`` before ``softmax``.

The walk from the mask goes back only through boolean nodes and the integer index
arithmetic that feeds them, and stops at ``arange`` and the model's inputs: position-bucket
code has ``abs``, ``sub`` and comparisons of its own, but it computes numbers, never the
boolean condition, so the walk never reaches it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.facts.walk import (
    INDEX_DTYPES,
    argument,
    computed_in,
    inside,
    literal,
    op,
    operators,
    stack_key,
    stack_of,
)
from bertgraph.model.families.record import FEED_FORWARD

ATTENTION_OPS = ("scaled_dot_product_attention", "softmax")
SDPA_MASK = 3  # scaled_dot_product_attention(query, key, value, attn_mask)
# Integer ops that compute index tensors from ``arange`` (and the mask input's own arithmetic).
INDEX_OPS = frozenset(
    {"add", "sub", "abs", "mul", "neg", "unsqueeze", "squeeze", "view", "reshape", "expand", "slice", "select"}
    | {"to", "to_copy", "clone", "contiguous", "alias", "lift_fresh_copy", "index"}
)
# Ops between the scores (or a float mask) and the boolean condition that masks them.
SCORE_OPS = frozenset({"add", "sub", "contiguous", "expand", "to", "to_copy", "clone", "unsqueeze", "slice", "view"})
# Ops along the key's path back to its projection whose output keeps the heads dimension readable.
KEY_PATH_OPS = frozenset(
    {"reshape", "view", "unsafe_view", "expand", "unsqueeze", "transpose", "permute", "contiguous", "clone"}
    | {"add", "mul", "to", "to_copy", "alias", "slice", "split", "split_with_sizes", "unbind", "chunk", "select"}
)


def attention_operators(graph: nx.DiGraph) -> list[str]:
    """The attention ops in execution order: a softmax inside a feed-forward module is a
    mixture-of-experts router choosing experts, not attention."""
    modules = graph.graph.get(g.G_MODULES, {})
    found = []
    for node in operators(graph, ATTENTION_OPS):
        entry = modules.get(str(graph.nodes[node].get(g.MODULE, "")), {})
        if op(graph, node) == "softmax" and isinstance(entry, dict) and entry.get(g.M_ROLE) == FEED_FORWARD:
            continue
        found.append(node)
    return found


def annotate_attention(graph: nx.DiGraph) -> dict[str, dict[str, int]]:
    """Write the attention facts on every attention op and its module; summarise per stack.

    Returns (and stores as ``attention_kinds``) ``{stack path: {label: count}}``.
    """
    modules = graph.graph.get(g.G_MODULES, {})
    counts: dict[str, Counter[str]] = {}
    for node in attention_operators(graph):
        facts = attention_facts(graph, node)
        data = graph.nodes[node]
        data.update(facts)
        module = str(data.get(g.MODULE, ""))
        entry = modules.get(module)
        if isinstance(entry, dict) and g.ATTENTION not in entry:
            entry.update(facts)
        counts.setdefault(stack_key(graph, module), Counter())[g.attention_label(facts)] += 1
    summary = {stack: dict(sorted(found.items())) for stack, found in sorted(counts.items())}
    if summary:
        graph.graph[g.G_ATTENTION] = summary
    return summary


def attention_facts(graph: nx.DiGraph, node: str) -> dict[str, Any]:
    """The attention keys of one attention op (``attention``, ``window``, ``padding_mask``, heads)."""
    sdpa = op(graph, node) == "scaled_dot_product_attention"
    mask = argument(graph, node, SDPA_MASK) if sdpa else argument(graph, node, 0)
    found = read_mask(graph, mask_conditions(graph, mask) if mask is not None else [])
    if sdpa and literal(graph, node, "is_causal") is True:
        found["causal"] = True
    facts: dict[str, Any] = {}
    keys_at = node if sdpa else eager_products(graph, node)[0]  # eager: the product before the softmax
    if keys_at is not None and keys_from_another_stack(graph, keys_at):
        facts[g.ATTENTION] = g.CROSS
    elif found["window"] is not None:
        facts[g.ATTENTION] = g.CAUSAL_SLIDING_WINDOW if found["causal_window"] else g.SLIDING_WINDOW
        facts[g.WINDOW] = found["window"]
    else:
        facts[g.ATTENTION] = g.CAUSAL if found["causal"] else g.BIDIRECTIONAL
    if found["padding"]:
        facts[g.PADDING_MASK] = ", ".join(found["padding"])
    facts.update(heads(graph, node, sdpa, keys_at))
    return facts


# Ops between eager attention's score product and its softmax (scale, mask, casts, Gemma-2's logit
# soft-capping ``tanh(scores / c) * c``), and between the softmax and the product with the values
# (casts, dropout).
_SCORE_OPS = frozenset(
    {"mul", "div", "add", "sub", "tanh", "to", "_to_copy", "masked_fill", "where", "type_as", "float"}
)
_WEIGHT_OPS = _SCORE_OPS | {"dropout", "native_dropout"}


def eager_products(graph: nx.DiGraph, softmax: str) -> tuple[str | None, str | None]:
    """The matrix products of eager attention around ``softmax``: queries × keys (its argument 1
    is the key, transposed) and weights × values (argument 1 the value); None where not found."""
    return _product(graph, softmax, backward=True), _product(graph, softmax, backward=False)


def _product(graph: nx.DiGraph, softmax: str, backward: bool) -> str | None:
    current = softmax
    for _ in range(8):
        found = [argument(graph, current, 0)] if backward else list(graph.successors(current))
        nexts = [n for n in found if n is not None and graph.nodes[n].get(g.KIND) == g.OPERATOR]
        if len(nexts) != 1:
            return None
        current = nexts[0]
        name = op(graph, current)
        if name in ("matmul", "bmm"):
            return current
        if name not in (_SCORE_OPS if backward else _WEIGHT_OPS):
            return None
    return None


def mask_conditions(graph: nx.DiGraph, start: str) -> list[str]:
    """The boolean nodes that decide a mask: ``start`` itself when boolean, else those reached
    back through the score arithmetic (``where``'s condition, ``masked_fill``'s mask)."""
    return mask_walk(graph, start)[0]


def mask_walk(graph: nx.DiGraph, start: str) -> tuple[list[str], set[str]]:
    """:func:`mask_conditions` and every node the walk passed on the way (the score arithmetic)."""
    found: list[str] = []
    seen: set[str] = set()
    todo = [start]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        data = graph.nodes[node]
        if data.get(g.DTYPE) == "bool":
            found.append(node)
            continue
        name = op(graph, node)
        if name in ("where", "masked_fill"):
            condition = argument(graph, node, 0 if name == "where" else 1)
            if condition is not None:
                todo.append(condition)
            if name == "masked_fill":
                scores = argument(graph, node, 0)
                todo.extend([scores] if scores is not None else [])
        elif name in SCORE_OPS:
            todo.extend(str(source) for source in graph.predecessors(node))
    return sorted(found, key=lambda n: graph.nodes[n].get(g.ORDER, 0)), seen


def condition_nodes(graph: nx.DiGraph, conditions: list[str]) -> tuple[set[str], list[str]]:
    """The boolean subgraph behind ``conditions`` with its index arithmetic, and the inputs it reads.

    Only boolean nodes and integer index ops are entered; ``arange`` and inputs end the walk.
    """
    visited: set[str] = set()
    inputs: list[str] = []
    todo = list(conditions)
    while todo:
        node = todo.pop()
        if node in visited:
            continue
        visited.add(node)
        data = graph.nodes[node]
        if data.get(g.KIND) == g.INPUT:
            inputs.append(node)
            continue
        if op(graph, node) == "arange":
            continue
        todo.extend(str(source) for source in graph.predecessors(node) if _on_condition_path(graph, source))
    return visited, sorted(set(inputs))


def _on_condition_path(graph: nx.DiGraph, node: str) -> bool:
    """An input, a boolean node, or integer index arithmetic (``arange`` included)."""
    data = graph.nodes[node]
    if data.get(g.KIND) == g.INPUT or data.get(g.DTYPE) == "bool":
        return True
    return data.get(g.DTYPE) in INDEX_DTYPES and op(graph, node) in INDEX_OPS | {"arange"}


def read_mask(graph: nx.DiGraph, conditions: list[str]) -> dict[str, Any]:
    """What the boolean subgraph behind a mask says: causal, a window, padding from which inputs.

    Conditions are joined with ``and`` (transformers' ``and_masks``), so of two windows the narrower
    is the one attention sees; that also leaves the answer free of the order the nodes are read in.
    """
    nodes, inputs = condition_nodes(graph, conditions)
    found: dict[str, Any] = {"causal": False, "window": None, "causal_window": False, "padding": inputs}
    windows: list[tuple[int, bool]] = []  # (width, causal form); the causal form first at equal width
    for node in nodes:
        name = op(graph, node)
        tensors = len(graph.nodes[node].get(g.INPUTS, []))
        if name == "le" and tensors == 2:
            found["causal"] = True  # kv_idx <= q_idx
        elif name == "le" and tensors == 1 and op(graph, argument(graph, node, 0)) == "abs":
            window = literal(graph, node, 1)  # abs(q_idx - kv_idx) <= w
            if isinstance(window, int):
                windows.append((window, False))
        elif name == "gt" and tensors == 2:
            window = _lower_bound(graph, argument(graph, node, 1))  # kv_idx > q_idx - w
            if window is not None:
                windows.append((window, True))
    if windows:
        width, causal_form = min(windows, key=lambda found_window: (found_window[0], not found_window[1]))
        found["window"], found["causal_window"] = width, causal_form
    return found


def _lower_bound(graph: nx.DiGraph, shifted: str | None) -> int | None:
    """``w`` of a query index shifted back by ``w`` ≥ 1: ``q_idx - w``, or ``q_idx + (-w)`` as some code
    writes it. A shift of 0 or forward keeps no key before the query's own, so it is no window."""
    if shifted is None:
        return None
    amount = literal(graph, shifted, 1)
    if not isinstance(amount, int):
        return None
    back = {"sub": amount, "add": -amount}.get(op(graph, shifted))
    return back if back is not None and back > 0 else None


def keys_from_another_stack(graph: nx.DiGraph, node: str) -> bool:
    """Whether the keys are computed from another stack's output (cross-attention).

    Walks back from the key argument through the ops of the attention module and looks at
    where the tensors entering the module come from.
    """
    key = argument(graph, node, 1)
    module = str(graph.nodes[node].get(g.MODULE, ""))
    own = stack_of(graph, module)
    if key is None or own is None:
        return False
    for source in computed_in(graph, key, module):
        if graph.nodes[source].get(g.KIND) != g.OPERATOR or inside(graph, source, module):
            continue
        other = stack_of(graph, str(graph.nodes[source].get(g.MODULE, "")))
        if other is not None and other != own:
            return True
    return False


def heads(graph: nx.DiGraph, node: str, sdpa: bool, keys_at: str | None = None) -> dict[str, int]:
    """Query heads (the query's second dimension) and key/value heads: the fewest heads on the
    key's path back to its projection, before grouped-query attention repeats them."""
    shape = graph.nodes[argument(graph, node, 0) or node].get(g.SHAPE, []) if sdpa else graph.nodes[node].get(g.SHAPE)
    if not isinstance(shape, list) or len(shape) != 4 or not isinstance(shape[1], int):
        return {}
    q_heads, head_size = shape[1], shape[3]
    if sdpa:
        current = argument(graph, node, 1)
    else:  # eager: the key is the score product's (``keys_at``) second operand, transposed ([…, size, length])
        current = argument(graph, keys_at, 1) if keys_at is not None else None
        key = graph.nodes[current].get(g.SHAPE) if current is not None else None
        if not (isinstance(key, list) and len(key) == 4):
            return {g.Q_HEADS: q_heads, g.KV_HEADS: q_heads}
        head_size = key[2]
    kv_heads = q_heads
    steps = 0
    while current is not None and steps < 64:
        data = graph.nodes[current]
        found = data.get(g.SHAPE, [])
        if len(found) == 4 and found[3] == head_size and isinstance(found[1], int):
            kv_heads = min(kv_heads, found[1])
        if op(graph, current) not in KEY_PATH_OPS:
            break
        current, steps = argument(graph, current, 0), steps + 1
    return {g.Q_HEADS: q_heads, g.KV_HEADS: kv_heads}
