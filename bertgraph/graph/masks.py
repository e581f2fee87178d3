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

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from bertgraph.errors import BertgraphError
from bertgraph.graph import schema as g
from bertgraph.graph.facts.attention import ATTENTION_OPS, SCORE_OPS, SDPA_MASK, condition_nodes, mask_walk
from bertgraph.graph.facts.walk import argument, literal, op, operators, stack_of
from bertgraph.graph.poly import Poly, PolyError
from bertgraph.model.fields import LIMITS

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
    """One distinct mask of a stack: the layers it applies to, and allowed[q][k] (1 or 0; a row is
    bytes, so a mask of thousands of tokens stays small and its rows count their allowed keys fast)."""

    stack: str  # "encoder", "decoder" or "cross"
    kind: str
    layers: tuple[int, ...]
    allowed: tuple[bytes, ...]
    query_padding: tuple[bool, ...]
    key_padding: tuple[bool, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "kind": self.kind,
            "layers": list(self.layers),
            "allowed": [list(r) for r in self.allowed],
        }


# The example a figure is drawn on when none is asked: 8 tokens, the last 2 padding, unless a window
# needs more to show. A quarter of the tokens are padding, as 2 of 8 are, so a window shows on the real
# three quarters: 3w tokens for a window of w keys each side (a band with its corners cut), 2w for a
# causal window of w keys (the triangle cut off below w). The decoder has three quarters of the tokens,
# so cross-attention's grid is as wide as the encoder's and less tall: another sequence's keys.
SEQ_LEN, PAD = 8, 2


def window_reach(graph: nx.DiGraph) -> int:
    """The fewest tokens at which every sliding window of ``graph`` shows (0 for a model without)."""
    most = 0
    for node in operators(graph, ATTENTION_OPS):
        data = graph.nodes[node]
        window = data.get(g.WINDOW)
        if isinstance(window, int) and data.get(g.ATTENTION) in (g.SLIDING_WINDOW, g.CAUSAL_SLIDING_WINDOW):
            most = max(most, 3 * window if data[g.ATTENTION] == g.SLIDING_WINDOW else 2 * window)
    return most


def example_for(
    graphs: Iterable[nx.DiGraph], seq_len: int | None = None, pad: int | None = None, decoder_len: int | None = None
) -> Example:
    """The example to evaluate ``graphs``' masks on: what was asked, else one on which every kind of mask
    looks distinct — a sliding window narrower than the example (ModernBERT's 64 each side: 192 tokens,
    the last 48 padding, where 8 tokens drew it as a bidirectional grid), a decoder shorter than the
    encoder (cross-attention no longer drawn as the encoder's own grid).

    A length chosen here is the longest a model wants — enough for its windows, within its own
    positions (a window as wide as those shows as far as the model reaches) — and at most the longest
    one may ask for (``LIMITS["mask"]``)."""
    if seq_len is not None:
        length = seq_len
    else:
        length = min(max((_wanted(graph) for graph in graphs), default=SEQ_LEN), LIMITS["mask"].maximum)
    if pad is None:
        pad = PAD if length <= SEQ_LEN else min(length, decoder_len or length) // 4
    if decoder_len is None:
        decoder_len = max(3 * length // 4, min(length, pad + 1))
    return Example(length, pad, decoder_len)


def _wanted(graph: nx.DiGraph) -> int:
    """The tokens ``graph``'s masks want: enough for every window, within the model's learned positions
    (its config's ``max_position``), if it has any."""
    reach = max(SEQ_LEN, window_reach(graph))
    positions = graph.graph.get(g.G_CONFIG, {}).get("max_position")
    return min(reach, positions) if isinstance(positions, int) and positions > 0 else reach


def model_masks(graph: nx.DiGraph, example: Example) -> list[Mask]:
    """Every distinct mask of the model, grouped per stack in the order the stacks first attend."""
    groups: dict[tuple[str, str, tuple[bytes, ...]], list[int]] = {}
    padding: dict[tuple[str, str, tuple[bytes, ...]], tuple[list[bool], list[bool]]] = {}
    counters: dict[str, int] = {}
    evaluated = Evaluated()  # layers share their mask's computation: run it once
    for node in operators(graph, ATTENTION_OPS):
        stack = stack_name(graph, node)
        layer = counters.get(stack, 0)
        counters[stack] = layer + 1
        allowed, query_len, key_len = evaluate_mask(graph, node, example, evaluated)
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


@dataclass
class Evaluated:
    """What one model's attention ops have evaluated so far, for the next ones: the rows of each mask
    computation (by what it computes: Gemma-2 adds one mask to each layer's scores, the same sum in
    every layer of a kind), and the value of each node of a mask's boolean subgraph."""

    rows: dict[Any, tuple[tuple[bytes, ...], int, int]] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)


def evaluate_mask(
    graph: nx.DiGraph, node: str, example: Example, evaluated: Evaluated | None = None
) -> tuple[tuple[bytes, ...], int, int]:
    """allowed[q][k] of one attention op on the example, with its query and key lengths."""
    import torch

    evaluated = evaluated or Evaluated()
    sizes = example.sizes()
    data = graph.nodes[node]
    sdpa = op(graph, node) == "scaled_dot_product_attention"
    inputs = data.get(g.INPUTS, [])
    if sdpa:
        query_len, key_len = _size(inputs[0][-2], sizes), _size(inputs[1][-2], sizes)
    else:
        query_len, key_len = _size(data[g.SHAPE][-2], sizes), _size(data[g.SHAPE][-1], sizes)
    start = argument(graph, node, SDPA_MASK) if sdpa else argument(graph, node, 0)
    causal = sdpa and literal(graph, node, "is_causal") is True
    plan = _plan(graph, start) if start is not None else None
    key = (_signature(graph, start, *plan) if start is not None and plan else None, causal, query_len, key_len)
    if key in evaluated.rows:
        return evaluated.rows[key]
    allowed = torch.ones(query_len, key_len, dtype=torch.bool)
    if start is not None and plan is not None:
        value = _evaluate(graph, start, *plan, example, evaluated.values)
        if value.dtype != torch.bool:
            value = value > torch.finfo(value.dtype).min  # an additive mask: the minimum masks
        value = torch.broadcast_to(value, (*value.shape[:-2], query_len, key_len))
        allowed = value.reshape(-1, query_len, key_len)[0].clone()
    if causal:
        allowed &= torch.ones(query_len, key_len, dtype=torch.bool).tril()  # the kernel's own causal mask
    cells = allowed.to(torch.uint8).contiguous().numpy().tobytes()
    evaluated.rows[key] = (tuple(cells[q * key_len : (q + 1) * key_len] for q in range(query_len)), query_len, key_len)
    return evaluated.rows[key]


def _plan(graph: nx.DiGraph, start: str) -> tuple[set[str], list[str]]:
    """The mask subgraph behind ``start``: its boolean subgraph's nodes, and the score arithmetic between
    it and the attention op in execution order."""
    conditions, passed = mask_walk(graph, start)
    nodes, _ = condition_nodes(graph, conditions)
    # The walk also met the tensors it stopped at (the scores' matmul, a position bias): not evaluated.
    scores = {node for node in passed if op(graph, node) in SCORE_OPS | {"where", "masked_fill"}} - nodes
    return nodes, sorted(scores, key=lambda n: graph.nodes[n].get(g.ORDER, 0))


def _signature(graph: nx.DiGraph, start: str, nodes: set[str], scores: list[str]) -> Any:
    """What a mask computation computes: its boolean subgraph, and each score op with its literals and
    where its arguments come from (that subgraph, an earlier score op, or zeros from outside), so two
    layers that add one mask to their own scores evaluate once."""
    index = {name: number for number, name in enumerate(scores)}
    steps = []
    for name in scores:
        data = graph.nodes[name]
        sources = []
        for source in graph.predecessors(name):
            edge = graph.edges[source, name]
            found = source if source in nodes else index.get(source, f"zeros {edge.get(g.SHAPE)} {edge.get(g.DTYPE)}")
            sources.append((tuple(edge.get(g.ARGS, [])), str(found)))
        literals = json.dumps(data.get(g.LITERALS) or {}, sort_keys=True)
        steps.append((str(data.get(g.TARGET)), literals, tuple(sorted(sources))))
    return frozenset(nodes), tuple(steps), index.get(start, start)


def _evaluate(
    graph: nx.DiGraph, start: str, nodes: set[str], scores: list[str], example: Example, known: dict[str, Any]
) -> Any:
    """The value of ``start``: the mask subgraph behind it run in execution order (``known``: values of
    the boolean subgraph's nodes found before, kept for the next call; the score arithmetic is per call)."""
    wanted = nodes | set(scores)
    found = dict(known)
    try:  # zeros from outside broadcast over their leading dimensions (heads): one head's worth of work
        value = _run_all(graph, start, wanted, nodes, example, found, narrow=True)
        known.update(found)
        return value
    except RuntimeError:  # an op that needs the recorded shape (a view to literal sizes)
        return _run_all(graph, start, wanted, nodes, example, {}, narrow=False)


def _run_all(
    graph: nx.DiGraph,
    start: str,
    wanted: set[str],
    nodes: set[str],
    example: Example,
    known: dict[str, Any],
    narrow: bool,
) -> Any:
    values: dict[str, Any] = {}
    for name in sorted(wanted, key=lambda n: graph.nodes[n].get(g.ORDER, 0)):
        data = graph.nodes[name]
        if name in known:
            values[name] = known[name]
        elif data.get(g.KIND) == g.INPUT:
            values[name] = example_input(graph, name, example)
        else:
            values[name] = _run(graph, name, values, wanted, example, narrow)
        if name in nodes:
            known[name] = values[name]
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


def _run(
    graph: nx.DiGraph, node: str, values: dict[str, Any], wanted: set[str], example: Example, narrow: bool = False
) -> Any:
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
    tensors = _tensor_arguments(graph, node, values, wanted, sizes, narrow)
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
    graph: nx.DiGraph, node: str, values: dict[str, Any], wanted: set[str], sizes: dict[str, int], narrow: bool
) -> list[Any]:
    """The op's tensor arguments in argument order; those from outside the subgraph are zeros (``narrow``:
    of size 1 in every dimension but the last two, which broadcasts to the same values per head)."""
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
                if narrow:
                    shape = [1] * (len(shape) - 2) + shape[-2:]
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
