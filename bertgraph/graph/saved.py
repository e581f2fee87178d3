"""What autograd saves for the backward pass of one training step, from the eval-mode graph.

The graph is traced in eval mode; in training mode three things change, and this module
replays them: dropout with ``p > 0`` writes a new tensor (eval-mode dropout is an alias of
its input) and saves its scaled noise; attention with a training dropout probability
(the ``training_dropout`` literal the tracer reads off the attention module) runs the
CPU math kernel instead of the fused one; every op whose output depends on a trainable
parameter records what its backward needs.

One rule per op (:data:`SAVES`, keyed like :mod:`~bertgraph.graph.formulas`) says which
of its operands (by argument position), whether its output, and which new tensors (a
layer norm's mean and reciprocal deviation, dropout's noise, attention's log-sum-exp)
autograd keeps, as PyTorch's CPU kernels do (``tools/autograd/derivatives.yaml``).
A saved operand counts once however many ops save it (it is one storage, found through
views), and parameters, buffers and model inputs are not counted: they exist anyway.
An op on the gradient's path without a rule is *unsupported* and listed, never counted as
zero in silence; an op off it (integer masks, position ids) saves nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.costbase import itemsize, shape_poly
from bertgraph.graph.formulas import FLOAT_DTYPES, numel, op_key, registrar
from bertgraph.graph.poly import Poly, PolyError

TRAINING_DROPOUT = "training_dropout"
FLOAT32 = 4


class Op(NamedTuple):
    """What a rule sees of one op in training mode."""

    inputs: list[tuple[Poly, ...]]  # shapes of the tensor arguments, argument order (parameters included)
    out: tuple[Poly, ...]
    dtype: str
    grad: list[bool]  # per argument: does autograd track it (a trainable parameter or a tracked op output)
    literals: dict[str, object]


class Saves(NamedTuple):
    args: tuple[int, ...] = ()  # argument positions whose tensors are saved
    output: bool = False
    new: tuple[tuple[Poly, int], ...] = ()  # (elements, bytes per element) of tensors only the op's backward holds


Rule = Callable[[Op], Saves]
SAVES: dict[str, Rule] = {}
NOTHING = Saves()


# Register a rule for the op keys (``aten.linear``).
saves = registrar(SAVES, "a rule")


def _width(dtype: str) -> int:
    return itemsize(dtype) or FLOAT32


@saves(
    "aten.add",
    "aten.sub",
    "aten.add_",
    "aten.sub_",
    "aten.neg",
    "aten.mean",
    "aten.sum",
    "aten.cat",
    "aten.contiguous",
    "aten.clone",
    "aten.to",
    "aten.view",
    "aten.reshape",
    "aten.transpose",
    "aten.permute",
    "aten.unsqueeze",
    "aten.squeeze",
    "aten.expand",
    "aten.slice",
    "aten.select",
    "aten.split",
    "aten.alias",
    "aten.chunk",
    "aten.flatten",
    "aten.t",
    "aten._to_copy",
    "aten.unflatten",
)
def _linear_in_inputs(op: Op) -> Saves:
    # gradients pass through unchanged, summed, scattered or cast: nothing kept but sizes
    return NOTHING


@saves("aten.linear", "aten.matmul", "aten.mm", "aten.bmm")
def _product(op: Op) -> Saves:
    # each operand is needed for the other's gradient
    first, second = op.grad[0], op.grad[1]
    return Saves(args=tuple(i for i, needed in ((0, second), (1, first)) if needed))


@saves("aten.addmm", "aten.baddbmm")
def _product_plus(op: Op) -> Saves:
    first, second = op.grad[1], op.grad[2]
    return Saves(args=tuple(i for i, needed in ((1, second), (2, first)) if needed))


@saves("aten.mul", "aten.mul_")
def _mul(op: Op) -> Saves:
    if len(op.inputs) < 2:
        return NOTHING  # by a number
    return Saves(args=tuple(i for i, other in ((0, 1), (1, 0)) if op.grad[other]))


@saves("aten.div", "aten.div_")
def _div(op: Op) -> Saves:
    if len(op.inputs) < 2:
        return NOTHING
    # self's gradient needs the divisor; the divisor's needs both
    return Saves(args=(1, 0) if op.grad[1] else (1,))


@saves("aten.layer_norm")
def _layer_norm(op: Op) -> Saves:
    rows = numel(op.inputs[0][:-1])
    width = _width(op.dtype)  # the CPU kernel keeps them in the input's dtype
    return Saves(args=(0,), new=((rows, width), (rows, width)))  # mean and reciprocal deviation


@saves("aten.gelu", "aten.silu", "aten.pow", "aten.log", "aten.sin", "aten.cos", "aten.abs", "aten.erf")
def _of_input(op: Op) -> Saves:
    return Saves(args=(0,))


@saves("aten.tanh", "aten.sigmoid", "aten.relu", "aten.rsqrt", "aten.sqrt", "aten.exp", "aten.softmax", "aten._softmax")
def _of_output(op: Op) -> Saves:
    return Saves(output=True)


@saves("aten.where")
def _where(op: Op) -> Saves:
    return Saves(args=(0,))  # the condition picks where gradients go


@saves("aten.masked_fill")
def _masked_fill(op: Op) -> Saves:
    return Saves(args=(1,))


@saves("aten.embedding")
def _embedding(op: Op) -> Saves:
    return Saves(args=(1,))  # the indices


@saves("aten.dropout")
def _dropout(op: Op) -> Saves:
    p = float(str(op.literals.get("1", 0.0)))
    if p <= 0:
        return NOTHING
    # on the CPU, at::dropout multiplies by scaled Bernoulli noise of the input's dtype and keeps it
    return Saves(new=((numel(op.out), _width(op.dtype)),))


@saves("aten.scaled_dot_product_attention")
def _attention(op: Op) -> Saves:
    query, key, value = op.inputs[0], op.inputs[1], op.inputs[2]
    scores = numel((*query[:-1], key[-2]))
    width = _width(op.dtype)
    if float(str(op.literals.get(TRAINING_DROPOUT, 0.0))) > 0:
        width = max(width, FLOAT32)  # on the CPU the math kernel computes half-precision inputs in float32
        # the math kernel: scaled query and key, the softmax, its dropout noise and the dropped weights, and the
        # value as the batched product reads it: a contiguous copy (a view only at batch 1, left out of the formula)
        new = ((numel(query), width), (numel(key), width), (numel(value), width), *((scores, width),) * 3)
        return Saves(new=new)
    # the fused CPU kernel: query, key, value, output and the log-sum-exp per query row. The trace has a mask
    # tensor, but on a batch without padding transformers passes none (is_causal, or no mask at all)
    return Saves(args=(0, 1, 2), output=True, new=((numel(query[:-1]), FLOAT32),))


def _fused(data: dict[str, object]) -> bool:
    literals = data.get(g.LITERALS) or {}
    assert isinstance(literals, dict)
    return op_key(str(data.get(g.TARGET, ""))) == "aten.scaled_dot_product_attention" and not float(
        str(literals.get(TRAINING_DROPOUT, 0.0))
    )


def _free_copy(graph: nx.DiGraph, node: str, root: dict[str, str | None]) -> bool:
    """A ``contiguous`` of fused attention's output transposed back to [batch, seq, heads, dim]: free at run time.

    The CPU fused kernel writes its output in that memory order, so the copy the trace records returns its input.
    """
    data = graph.nodes[node]
    if op_key(str(data.get(g.TARGET, ""))) != "aten.contiguous":
        return False
    owners = [root.get(source) for source in graph.predecessors(node)]
    return len(owners) == 1 and owners[0] is not None and _fused(graph.nodes[owners[0]])


def _unrepeated(graph: nx.DiGraph, node: str) -> str:
    """The key or value before ``repeat_kv`` (unsqueeze, expand, reshape) copied its grouped heads.

    In a run, transformers hands the CPU kernel the grouped tensor itself (``enable_gqa``); the trace records the copy.
    """
    data = graph.nodes[node]
    if op_key(str(data.get(g.TARGET, ""))) != "aten.reshape" or data.get(g.ALIAS):
        return node
    current = node
    for _ in range(2):  # reshape ← expand ← unsqueeze
        sources = list(graph.predecessors(current))
        if len(sources) != 1:
            return node
        current = sources[0]
        if op_key(str(graph.nodes[current].get(g.TARGET, ""))) not in ("aten.expand", "aten.unsqueeze"):
            return node
    return current if op_key(str(graph.nodes[current].get(g.TARGET, ""))) == "aten.unsqueeze" else node


class Saved(NamedTuple):
    bytes: Poly
    unsupported: list[str]  # ops on the gradient's path without a rule (left out)
    by_node: dict[str, Poly]  # op → the bytes kept for it: its saved output's storage, the new tensors it keeps


def saved_activation_bytes(graph: nx.DiGraph, frozen: frozenset[str] = frozenset()) -> Saved:
    """The bytes autograd keeps for backward after one training-mode forward, a polynomial.

    ``frozen``: parameter names that do not require gradients (ops reading only those are not tracked).
    Each saved storage is charged to the op that wrote it, each new tensor to the op that keeps it,
    so ``by_node`` sums to ``bytes`` and a module's share is what its own ops put on the tape.
    """
    order = g.ops_in_order(graph)
    root: dict[str, str | None] = {}  # node → the op owning its storage; None: a parameter's or an input's
    tracked: dict[str, bool] = {}
    size: dict[str, Poly] = {}
    saved: set[str] = set()
    extra: dict[str, Poly] = {}
    unsupported: list[str] = []
    for node in order:
        data = graph.nodes[node]
        if data.get(g.KIND) != g.OPERATOR:
            continue
        try:
            inputs = [shape_poly(s) for s in data.get(g.INPUTS, [])]
            out = shape_poly(data.get(g.SHAPE, []))
        except PolyError:
            unsupported.append(str(data.get(g.TARGET, "")))
            root[node], tracked[node] = None, False
            continue
        dtype = str(data.get(g.DTYPE, ""))
        literals = dict(data.get(g.LITERALS, {}))
        sources: dict[int, str] = {}
        for source in graph.predecessors(node):
            for position in graph.edges[source, node].get(g.ARGS, []):
                sources[position] = source
        trainable = any(name not in frozen for name in [*data.get(g.PARAM_NAMES, []), *data.get(g.SHARED_PARAMS, [])])
        grad = [tracked.get(sources[i], False) if i in sources else trainable for i in range(len(inputs))]
        tracked[node] = dtype in FLOAT_DTYPES and any(grad)
        key = op_key(str(data.get(g.TARGET, "")))
        rule = SAVES.get(key)
        training_copy = key == "aten.dropout" and rule is not None and rule(Op(inputs, out, dtype, grad, literals)).new
        if (data.get(g.ALIAS) and not training_copy) or _free_copy(graph, node, root):
            shared = [s for s in graph.predecessors(node) if graph.edges[s, node].get(g.ALIAS)]
            root[node] = root.get(shared[0]) if shared else None
        else:
            root[node] = node
            size[node] = numel(out) * _width(dtype)
        if not tracked[node]:
            continue
        if rule is None:
            unsupported.append(key)
            continue
        found = rule(Op(inputs, out, dtype, grad, literals))
        for position in found.args:
            owner = root.get(_unrepeated(graph, sources[position])) if position in sources else None
            if owner is not None:
                saved.add(owner)
        if found.output and root[node] is not None:
            saved.add(str(root[node]))
        for elements, width in found.new:
            extra[node] = extra.get(node, Poly()) + elements * width
    by_node = dict(extra)
    for owner in saved:
        by_node[owner] = by_node.get(owner, Poly()) + size[owner]
    total = Poly()
    for node in sorted(by_node):
        total = total + by_node[node]
    return Saved(total, sorted(set(unsupported)), dict(sorted(by_node.items())))


def annotate_saved(graph: nx.DiGraph, frozen: frozenset[str] = frozenset(), kept: Any = None) -> nx.DiGraph:
    """A copy of ``graph`` whose ops carry :data:`~bertgraph.graph.schema.SAVED_BYTES` (views sum it);
    ``kept``: :func:`saved_activation_bytes` of the graph, when the caller has it already."""
    shown = graph.copy()
    for node, poly in (kept or saved_activation_bytes(graph, frozen)).by_node.items():
        shown.nodes[node][g.SAVED_BYTES] = str(poly)
    return shown
