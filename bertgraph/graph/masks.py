"""The attention masks a model computes, evaluated from its own trace on a concrete padded example.

For every attention op the facts pass's walk (:func:`~bertgraph.graph.facts.attention.mask_walk`
and :func:`~bertgraph.graph.facts.attention.condition_nodes`) finds the mask subgraph: the boolean
condition, its index arithmetic back to ``arange`` and the inputs, and the score arithmetic
between it and the attention op. That subgraph is run op by op with real torch ops (each node's
``target`` called with its tensor arguments by the edges' ``args`` and its ``literals``), sizes
substituted for ``batch`` = 1, ``seq`` = N and ``tgt`` = M, the inputs an example whose last K
tokens are padding. Tensors entering from outside the subgraph (the scores, a position bias) are
zeros, so an additive mask reads as allowed wherever it stays above the dtype's minimum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx

from bertgraph.errors import BertgraphError
from bertgraph.graph import schema as g
from bertgraph.graph.facts.attention import ATTENTION_OPS, SCORE_OPS, SDPA_MASK, condition_nodes, mask_walk
from bertgraph.graph.facts.walk import argument, literal, op, operators, stack_of
from bertgraph.graph.poly import Poly, PolyError

_TENSOR = ("Tensor", "Optional[Tensor]")


class MaskError(BertgraphError, ValueError):
    """A mask subgraph that cannot be evaluated (an op or argument this evaluator does not know)."""


@dataclass(frozen=True)
class Example:
    """The concrete example: N tokens (M decoder tokens), the last K of each padding."""

    seq_len: int = 8
    pad: int = 2
    decoder_len: int | None = None

    @property
    def target_len(self) -> int:
        return self.seq_len if self.decoder_len is None else self.decoder_len

    def sizes(self) -> dict[str, int]:
        return {"batch": 1, "seq": self.seq_len, "tgt": self.target_len}

    def padding(self, length: int) -> list[bool]:
        """Which of ``length`` positions are padding (the last K, at least one real token kept)."""
        real = max(1, length - self.pad)
        return [position >= real for position in range(length)]


@dataclass(frozen=True)
class Mask:
    """One distinct mask of a stack: the layers it applies to, and allowed[q][k]."""

    stack: str  # "encoder", "decoder" or "cross"
    kind: str
    layers: tuple[int, ...]
    allowed: tuple[tuple[int, ...], ...]
    query_padding: tuple[bool, ...]
    key_padding: tuple[bool, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "kind": self.kind,
            "layers": list(self.layers),
            "allowed": [list(r) for r in self.allowed],
        }


def model_masks(graph: nx.DiGraph, example: Example) -> list[Mask]:
    """Every distinct mask of the model, grouped per stack in the order the stacks first attend."""
    groups: dict[tuple[str, str, tuple[tuple[int, ...], ...]], list[int]] = {}
    padding: dict[tuple[str, str, tuple[tuple[int, ...], ...]], tuple[list[bool], list[bool]]] = {}
    counters: dict[str, int] = {}
    for node in operators(graph, ATTENTION_OPS):
        stack = stack_name(graph, node)
        layer = counters.get(stack, 0)
        counters[stack] = layer + 1
        allowed, query_len, key_len = evaluate_mask(graph, node, example)
        key = (stack, g.attention_label(graph.nodes[node]), allowed)
        groups.setdefault(key, []).append(layer)
        padding[key] = (example.padding(query_len), example.padding(key_len))
    return [
        Mask(
            stack,
            kind,
            tuple(layers),
            allowed,
            tuple(padding[stack, kind, allowed][0]),
            tuple(padding[stack, kind, allowed][1]),
        )
        for (stack, kind, allowed), layers in groups.items()
    ]


def stack_name(graph: nx.DiGraph, node: str) -> str:
    """``cross`` for cross-attention; else ``encoder`` or ``decoder`` by the model's structure."""
    data = graph.nodes[node]
    if data.get(g.ATTENTION) == g.CROSS:
        return "cross"
    structure = graph.graph.get(g.G_STRUCTURE)
    if structure == "encoder-only":
        return "encoder"
    if structure == "decoder-only":
        return "decoder"
    container = stack_of(graph, str(data.get(g.MODULE, ""))) or ""
    return "decoder" if "decoder" in container.split(".")[-2:] or container.startswith("decoder") else "encoder"


def evaluate_mask(graph: nx.DiGraph, node: str, example: Example) -> tuple[tuple[tuple[int, ...], ...], int, int]:
    """allowed[q][k] of one attention op on the example, with its query and key lengths."""
    import torch

    sizes = example.sizes()
    data = graph.nodes[node]
    sdpa = op(graph, node) == "scaled_dot_product_attention"
    inputs = data.get(g.INPUTS, [])
    if sdpa:
        query_len, key_len = _size(inputs[0][-2], sizes), _size(inputs[1][-2], sizes)
    else:
        query_len, key_len = _size(data[g.SHAPE][-2], sizes), _size(data[g.SHAPE][-1], sizes)
    start = argument(graph, node, SDPA_MASK) if sdpa else argument(graph, node, 0)
    allowed = torch.ones(query_len, key_len, dtype=torch.bool)
    if start is not None:
        value = _evaluate(graph, start, example)
        if value.dtype != torch.bool:
            value = value > torch.finfo(value.dtype).min  # an additive mask: the minimum masks
        value = torch.broadcast_to(value, (*value.shape[:-2], query_len, key_len))
        allowed = value.reshape(-1, query_len, key_len)[0].clone()
    if sdpa and literal(graph, node, "is_causal") is True:
        allowed &= torch.ones(query_len, key_len, dtype=torch.bool).tril()  # the kernel's own causal mask
    rows = tuple(tuple(int(cell) for cell in row) for row in allowed.tolist())
    return rows, query_len, key_len


def _evaluate(graph: nx.DiGraph, start: str, example: Example) -> Any:
    """The value of ``start``: the mask subgraph behind it run in execution order."""
    conditions, passed = mask_walk(graph, start)
    nodes, _ = condition_nodes(graph, conditions)
    # The walk also met the tensors it stopped at (the scores' matmul, a position bias): not evaluated.
    scores = {node for node in passed if op(graph, node) in SCORE_OPS | {"where", "masked_fill"}}
    wanted = nodes | scores
    values: dict[str, Any] = {}
    for name in sorted(wanted, key=lambda n: graph.nodes[n].get(g.ORDER, 0)):
        data = graph.nodes[name]
        if data.get(g.KIND) == g.INPUT:
            values[name] = example_input(graph, name, example)
        else:
            values[name] = _run(graph, name, values, wanted, example)
    return values[start]


def example_input(graph: nx.DiGraph, name: str, example: Example) -> Any:
    """A model input on the example: the attention masks 1 then K zeros, token ids with the pad token."""
    import torch

    data = graph.nodes[name]
    shape = [_size(dim, example.sizes()) for dim in data.get(g.SHAPE, [])]
    length = shape[-1] if shape else 0
    padding = torch.tensor(example.padding(length), dtype=torch.bool)
    dtype = _dtype(str(data.get(g.DTYPE, "int64")))
    if name.endswith("attention_mask"):
        return torch.broadcast_to(~padding, shape).to(dtype).clone()
    if name.endswith("input_ids"):
        pad_id = int(graph.graph.get(g.G_CONFIG, {}).get("pad_token_id") or 0)
        ids = torch.where(padding, pad_id, pad_id + 1 + torch.arange(length) % 50)
        return torch.broadcast_to(ids, shape).to(dtype).clone()
    return torch.zeros(shape, dtype=dtype)


def _run(graph: nx.DiGraph, node: str, values: dict[str, Any], wanted: set[str], example: Example) -> Any:
    """One op of the subgraph: its aten overload called with the recorded arguments."""
    import torch

    data = graph.nodes[node]
    target = str(data.get(g.TARGET, ""))
    parts = target.split(".")
    try:
        overload = getattr(getattr(torch.ops.aten, parts[1]), parts[2])
    except (AttributeError, IndexError):
        raise MaskError(f"cannot evaluate the mask op {target!r} of {node}") from None
    sizes = example.sizes()
    tensors = _tensor_arguments(graph, node, values, wanted, sizes)
    literals = data.get(g.LITERALS) or {}
    arguments = overload._schema.arguments
    single = [i for i, a in enumerate(arguments) if str(a.type) in _TENSOR]
    kwargs: dict[str, Any] = {}
    slot = 0
    for position, argument_schema in enumerate(arguments):
        kind, name = str(argument_schema.type), argument_schema.name
        if kind in _TENSOR:
            if slot < len(tensors):
                kwargs[name] = tensors[slot]
                slot += 1
            elif str(position) in literals:
                kwargs[name] = _literal(literals[str(position)], sizes)
            continue
        if kind.startswith("List[") and "Tensor" in kind:
            later = sum(1 for i in single if i > position)
            count = max(0, len(tensors) - slot - later)
            kwargs[name] = tensors[slot : slot + count]
            slot += count
            continue
        found = literals.get(str(position), literals.get(name))
        if found is not None:
            kwargs[name] = _literal(found, sizes)
        elif name == "dtype":
            kwargs[name] = _dtype(str(data.get(g.DTYPE, "float32")))
        elif name == "device":
            kwargs[name] = torch.device("cpu")
        elif kind.startswith("List[") and "int" in kind.lower():
            kwargs[name] = [_size(dim, sizes) for dim in data.get(g.SHAPE, [])]
        elif not argument_schema.has_default_value() and kind.startswith("Optional["):
            kwargs[name] = None
        elif not argument_schema.has_default_value():
            raise MaskError(f"cannot evaluate the mask op {target!r} of {node}: no value for {name!r}")
    return overload(**kwargs)


def _tensor_arguments(
    graph: nx.DiGraph, node: str, values: dict[str, Any], wanted: set[str], sizes: dict[str, int]
) -> list[Any]:
    """The op's tensor arguments in argument order; those from outside the subgraph are zeros."""
    import torch

    shapes = graph.nodes[node].get(g.INPUTS, [])
    found: list[Any] = [None] * len(shapes)
    for source in graph.predecessors(node):
        edge = graph.edges[source, node]
        for position in edge.get(g.ARGS, []):
            if source in wanted and source in values:
                found[position] = values[source]
            else:
                shape = [_size(dim, sizes) for dim in edge.get(g.SHAPE, shapes[position])]
                found[position] = torch.zeros(shape, dtype=_dtype(str(edge.get(g.DTYPE, "float32"))))
    for position, value in enumerate(found):
        if value is None:  # a parameter or constant the graph keeps no edge for
            found[position] = torch.zeros([_size(dim, sizes) for dim in shapes[position]])
    return found


def _literal(value: Any, sizes: dict[str, int]) -> Any:
    if isinstance(value, list):
        return [_literal(item, sizes) for item in value]
    if value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, str):
        return _size(value, sizes)
    return value


def _size(dim: Any, sizes: dict[str, int]) -> int:
    if isinstance(dim, int):
        return dim
    try:
        return Poly.parse(str(dim)).evaluate(sizes)
    except (PolyError, KeyError):
        raise MaskError(f"cannot evaluate the size {dim!r}") from None


def _dtype(name: str) -> Any:
    import torch

    found = getattr(torch, name, None)
    if not isinstance(found, torch.dtype):
        raise MaskError(f"cannot evaluate a mask of dtype {name!r}")
    return found
