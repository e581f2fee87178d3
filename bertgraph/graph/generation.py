"""What generating text costs: the KV cache and one decode step, from the attention facts and the per-op polynomials.

**KV cache.** Every attention block whose keys a generating model keeps — causal
self-attention, a causal sliding window, cross-attention — caches its keys and values:
``batch × kv_heads × tokens × (key head size + value head size)`` elements per block, read
off the scaled dot-product attention op (its key and value shapes; the key/value heads the
facts pass found before grouped-query attention repeats them). A full block keeps every
token of its key length (``seq``; a decoder's own ``tgt`` and the encoder's ``seq`` for
cross-attention); a sliding-window block of ``w`` keeps ``min(seq, w - 1)``, as
transformers' ``DynamicSlidingWindowLayer`` does (the token being decoded makes ``w``).
Bidirectional and two-sided window blocks (encoders) keep nothing.

**A latent cache (MLA).** DeepSeek's multi-head latent attention makes each head's keys and
values from one small vector per token: a linear layer (``kv_b_proj``) decompresses the latent
``c`` into every head's non-rotary key part and value, and one rotary key part per token is shared
by every head. transformers caches ``c`` and that rotary part (``kv_lora_rank + qk_rope_head_dim``
elements per token and layer), and decompresses the whole cache at every step. Such a block is
told by its values: they come, through reshapes only, from a linear layer that makes the keys too,
widens what it reads, and whose input the queries do not read (a key/value projection of the hidden
state, fused or not, shares its input with the queries'). Its cache is that input's width plus
the key's part the decompression does not make (the key head size less the decompressed key part:
per head output less the value head size); the per-head keys and values attention reads are
:attr:`CacheLayer.decompressed`, the second figure.

**Decode step.** One generated token with ``seq`` tokens cached (``tgt`` in an
encoder-decoder, whose encoder output stays cached too) runs every op of the forward pass at
a length of 1 — but attention's own products, whose key length is the cached length plus the
new token (``min(seq, w - 1) + 1`` in a window), and cross-attention, whose keys are the
encoder's ``seq``. An encoder-decoder's step does not run the encoder, nor cross-attention's
key and value projections (ops whose cost has the encoder length and not the decoder's): both
are cached. A latent cache's decompression runs over every cached token and the new one, as
transformers runs it. The count is matmul FLOPs as ``torch.utils.flop_counter`` counts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.costbase import (
    DECODER,
    CostError,
    evaluate,
    has_decoder_length,
    has_weight_operand,
    itemsize,
    node_poly,
    sequence_name,
    shape_poly,
)
from bertgraph.graph.facts.attention import eager_products
from bertgraph.graph.facts.walk import argument, computed_in
from bertgraph.graph.formulas import numel
from bertgraph.graph.masked import attention_facts_of, divide
from bertgraph.graph.poly import Poly, PolyError, summed, total

CACHED_KINDS = (g.CAUSAL, g.CAUSAL_SLIDING_WINDOW, g.CROSS)
SDPA_TARGETS = ("aten.scaled_dot_product_attention.default",)


@dataclass(frozen=True)
class CacheLayer:
    """What one attention block caches: elements per cached token and how many tokens it keeps."""

    node: str
    module: str
    kind: str
    window: int | None
    per_token: Poly  # batch × kv_heads × (key + value head size); a latent cache: batch × its width
    tokens: Poly  # the key length, or min(key length, w - 1)
    dtype: str
    decompressed: Poly | None = None  # a latent cache: per token, the keys and values of every head

    def elements(self) -> Poly:
        return self.per_token * self.tokens


def length_name(poly: Poly) -> str:
    """The one dimension a length is (``seq``, ``tgt``); raises :class:`CostError` otherwise."""
    names = sorted(poly.names())
    if len(names) != 1 or poly != Poly.var(names[0]):
        raise CostError(f"an attention block's key length is {poly}, not one named length")
    return names[0]


def _attention_nodes(graph: nx.DiGraph) -> list[str]:
    return [
        node
        for node in g.ops_in_order(graph)
        if graph.nodes[node].get(g.KIND) == g.OPERATOR and graph.nodes[node].get(g.ATTENTION)
    ]


def cache_layers(graph: nx.DiGraph) -> list[CacheLayer]:
    """Every attention block that caches keys and values, in execution order.

    Raises :class:`CostError` when an attention block's operands are not a scaled dot-product
    attention's (an eager trace's ``softmax``, an ONNX file), so no cache is ever guessed.
    """
    layers = []
    for node in _attention_nodes(graph):
        data = graph.nodes[node]
        kind = str(data[g.ATTENTION])
        if kind not in CACHED_KINDS:
            continue
        shapes = _key_and_value(graph, node)
        if shapes is None:
            raise CostError(
                f"{data.get(g.MODULE) or node}: the KV cache is read off attention's keys and values, and "
                "this attention block's are not found (fused: its operands; eager: the products around its "
                "softmax), so none is guessed"
            )
        try:
            key, value = (shape_poly(shape) for shape in shapes)
        except PolyError as error:
            raise CostError(f"{data.get(g.MODULE) or node}: the key shape is not known ({error})") from error
        heads = Poly.of(int(data.get(g.KV_HEADS) or 0) or key[1])  # the facts pass's: before repeat_kv
        length = key[-2]
        window = data.get(g.WINDOW) if kind == g.CAUSAL_SLIDING_WINDOW else None
        tokens = Poly.capped(length_name(length), int(window) - 1) if isinstance(window, int) else length
        per_token = numel(key[:-3]) * heads * (key[-1] + value[-1])
        latent = _latent_width(graph, node, key, value) if kind != g.CROSS else None
        module, dtype = str(data.get(g.MODULE, "")), str(data.get(g.DTYPE))
        if latent is None:
            layers.append(CacheLayer(node, module, kind, window, per_token, tokens, dtype))
        else:
            layers.append(CacheLayer(node, module, kind, window, numel(key[:-3]) * latent, tokens, dtype, per_token))
    return layers


# Ops that only lay a tensor out (between a value and the linear layer that made it).
LAYOUT_OPS = frozenset(
    {"view", "reshape", "_unsafe_view", "unsafe_view", "transpose", "permute", "contiguous", "clone", "expand"}
    | {"unsqueeze", "squeeze", "split", "split_with_sizes", "slice", "select", "chunk", "unbind", "to", "_to_copy"}
    | {"alias"}
)


def _operands(graph: nx.DiGraph, node: str) -> tuple[str | None, str | None, str | None]:
    """The query, key and value nodes of an attention block (fused: its operands; eager: of its two products)."""
    if graph.nodes[node].get(g.TARGET) in SDPA_TARGETS:
        return argument(graph, node, 0), argument(graph, node, 1), argument(graph, node, 2)
    scores, weighted = eager_products(graph, node)
    query, key = (argument(graph, scores, i) if scores is not None else None for i in (0, 1))
    return query, key, argument(graph, weighted, 1) if weighted is not None else None


def decompression(graph: nx.DiGraph, node: str) -> str | None:
    """The linear layer that decompresses a latent cache into an attention block's keys and values (MLA),
    or None: the op its values come from through reshapes only, when its keys are made from it too and
    the queries do not read its input."""
    query, key, current = _operands(graph, node)
    for _ in range(16):
        if current is None or graph.nodes[current].get(g.KIND) != g.OPERATOR:
            return None
        data = graph.nodes[current]
        if data.get(g.PARAM_NAMES) or data.get(g.SHARED_PARAMS):
            break
        if str(data.get(g.OP, "")) not in LAYOUT_OPS:
            return None
        current = argument(graph, current, 0)
    else:
        return None
    latent, module = argument(graph, current, 0), str(graph.nodes[node].get(g.MODULE))
    if latent is None or query is None or key is None or latent in computed_in(graph, query, module):
        return None
    return current if current in computed_in(graph, key, module) else None


def _latent_width(graph: nx.DiGraph, node: str, key: tuple[Poly, ...], value: tuple[Poly, ...]) -> int | None:
    """Elements per token of a latent cache (see the module doc); None for a block caching keys and values."""
    made = decompression(graph, node)
    latent = argument(graph, made, 0) if made is not None else None
    if made is None or latent is None:
        return None
    heads = graph.nodes[node].get(g.Q_HEADS)
    length = length_name(key[-2])
    width_in = _width(graph.nodes[latent].get(g.SHAPE), length)
    width_out = _width(graph.nodes[made].get(g.SHAPE), length)
    key_size, value_size = key[-1].constant(), value[-1].constant()
    if width_in is None or width_out is None or key_size is None or value_size is None:
        return None
    if not isinstance(heads, int) or heads < 1 or width_out % heads or width_out <= width_in:
        return None  # a decompression makes more than it reads
    shared_key = key_size - (width_out // heads - value_size)  # the key's part no head's decompression makes
    return width_in + shared_key if 0 <= shared_key <= key_size else None


def _width(shape: Any, length: str) -> int | None:
    """Elements per token of a ``[batch…, length, widths…]`` shape: the product of its whole-number sizes, when
    its named sizes are the batch and this one length."""
    if not isinstance(shape, list) or sum(size == length for size in shape) != 1:
        return None
    if not all(isinstance(size, int) or size in (length, "batch") for size in shape):
        return None
    width = 1
    for size in shape:
        width *= size if isinstance(size, int) else 1
    return width


def _key_and_value(graph: nx.DiGraph, node: str) -> tuple[Any, Any] | None:
    """Key and value shapes (``[batch, kv_heads, length, head size]``) of an attention block.

    Fused attention has them as its operands; eager attention (``--attention eager``) as the
    operands of the product before its softmax (the key, transposed) and after it (the value).
    Heads are as multiplied (after repeat_kv); the caller takes the facts pass's key/value heads.
    """
    data = graph.nodes[node]
    if data.get(g.TARGET) in SDPA_TARGETS:
        inputs = data.get(g.INPUTS, [])
        return (inputs[1], inputs[2]) if len(inputs) >= 3 else None
    scores, weighted = eager_products(graph, node)
    if scores is None or weighted is None:
        return None
    if argument(graph, scores, 1) is None or argument(graph, weighted, 1) is None:
        return None
    # as each product read them: an operand made by a split is one of its outputs, not the node's first
    key_shape, value_shape = (_operand_shape(graph, product, 1) for product in (scores, weighted))
    if not (isinstance(key_shape, list) and isinstance(value_shape, list) and len(key_shape) == len(value_shape) == 4):
        return None
    # As multiplied: the key transposed, [batch, heads, head size, length], the value [batch, heads, length, size].
    batch, _, size, length = key_shape
    return [batch, key_shape[1], length, size], [batch, value_shape[1], length, value_shape[3]]


def _operand_shape(graph: nx.DiGraph, node: str, position: int) -> Any:
    inputs = graph.nodes[node].get(g.INPUTS, [])
    return inputs[position] if len(inputs) > position else None


def kv_cache_elements(graph: nx.DiGraph) -> Poly:
    """Elements the KV cache holds once ``seq`` tokens (an encoder-decoder: ``seq`` and ``tgt``) are in it:
    times :func:`~bertgraph.graph.costbase.itemsize` of a dtype, its bytes in that dtype."""
    return total(layer.elements() for layer in cache_layers(graph))


def kv_cache_bytes(graph: nx.DiGraph, dtype: str | None = None) -> Poly:
    """Bytes the KV cache holds once ``seq`` tokens (an encoder-decoder: ``seq`` and ``tgt``) are in it.

    Each block at its traced dtype, or at ``dtype`` when given.
    """
    return total(layer.elements() * (itemsize(dtype or layer.dtype) or 0) for layer in cache_layers(graph))


def decompressed_kv_cache_bytes(graph: nx.DiGraph, dtype: str | None = None) -> Poly | None:
    """Bytes of a cache that kept every head's keys and values where the model caches a latent (MLA),
    every other block as it caches; None for a model with no latent cache."""
    layers = cache_layers(graph)
    if all(layer.decompressed is None for layer in layers):
        return None
    return total(
        (layer.decompressed or layer.per_token) * layer.tokens * (itemsize(dtype or layer.dtype) or 0)
        for layer in layers
    )


def is_generative(graph: nx.DiGraph) -> bool:
    """Whether the model has an attention block that caches (a decoder)."""
    return any(graph.nodes[node].get(g.ATTENTION) in CACHED_KINDS for node in _attention_nodes(graph))


# --- one decode step ---------------------------------------------------------------------------------


def step_name(graph: nx.DiGraph) -> str:
    """The length a decode step advances: the decoder's ``tgt``, or the sequence of a decoder-only model."""
    return DECODER if has_decoder_length(graph) else sequence_name(graph)


def _encoder_only_work(graph: nx.DiGraph, data: Mapping[str, Any], poly: Poly, step: str) -> bool:
    """An encoder-decoder's op that a decode step does not run: the encoder's, or cross-attention's
    key and value projections of the encoder output (costs in ``seq`` without ``tgt``)."""
    if step != DECODER or step in poly.names():
        return False
    module = str(data.get(g.MODULE, ""))
    in_encoder = any(
        (module == path or module.startswith(path + ".")) and kind == "encoder"
        for path, kind in graph.graph.get(g.G_STACKS, {}).items()
    )
    return in_encoder or bool(poly.names())


def decode_step_flops(graph: nx.DiGraph) -> Poly:
    """Matmul FLOPs of one decode step with the step length's tokens cached (see the module doc)."""
    step = step_name(graph)
    seq = sequence_name(graph)
    one = {step: Poly.const(1)}
    # a latent cache's decompression runs over the cached tokens and the new one
    decompressing = {
        made: _cached_keys(graph.nodes[node], step)
        for node in _attention_nodes(graph)
        if graph.nodes[node].get(g.ATTENTION) in (g.CAUSAL, g.CAUSAL_SLIDING_WINDOW)
        and (made := decompression(graph, node)) is not None
    }
    result = Poly()
    for node in g.ops_in_order(graph):
        data = graph.nodes[node]
        if data.get(g.KIND) != g.OPERATOR:
            continue
        poly = node_poly(data, g.MATMUL_FLOPS)
        if not poly or _encoder_only_work(graph, data, poly, step):
            continue
        if has_weight_operand(graph, node):
            result = result + poly.substitute({step: decompressing[node]} if node in decompressing else one)
            continue
        facts = attention_facts_of(graph, data)
        kind = facts.get(g.ATTENTION)
        if kind not in CACHED_KINDS:
            raise CostError(
                f"{data.get(g.MODULE) or node}: a decode step runs {kind or 'unlabelled'} attention, "
                "which caches nothing; only decoders generate"
            )
        if kind == g.CROSS:
            keys = Poly.var(seq)
            per_pair = divide(poly, ((step, 1), (seq, 1)))
        else:
            keys = _cached_keys(facts, step)
            per_pair = divide(poly, ((step, 2),))
        result = result + per_pair * keys
    return result


def _cached_keys(facts: Mapping[str, Any], step: str) -> Poly:
    """The keys a decode step's self-attention reads: the cached tokens (``min(step, w - 1)`` in a window), its own."""
    window = facts.get(g.WINDOW)
    return (Poly.capped(step, int(window) - 1) if isinstance(window, int) else Poly.var(step)) + 1


def generate(
    graph: nx.DiGraph, sizes: Mapping[str, int], tokens: int, prefill: Poly, dtype: str | None = None
) -> dict[str, int]:
    """Prefill at ``sizes`` and ``tokens`` decode steps after it: their matmul FLOPs and the cache at the end.

    The decode steps run with ``sizes[step]``, …, ``sizes[step] + tokens - 1`` tokens cached; their sum is
    taken in closed form (:func:`~bertgraph.graph.poly.summed`), so any number of tokens costs the same time.
    """
    step = step_name(graph)
    start = sizes[step]
    steps = evaluate(summed(decode_step_flops(graph), step, start, start + tokens - 1), sizes)
    first = evaluate(prefill, sizes)
    return {
        "tokens": tokens,
        "prefill_flops": first,
        "decode_flops": steps,
        "total_flops": first + steps,
        "kv_cache_bytes": evaluate(kv_cache_bytes(graph, dtype), {**sizes, step: sizes[step] + tokens}),
    }


SUMMARY_TOKENS = 4096
SUMMARY_DTYPE = "bfloat16"


def kv_cache_summary(
    graph: nx.DiGraph, tokens: int = SUMMARY_TOKENS, dtype: str = SUMMARY_DTYPE
) -> dict[str, Any] | None:
    """A decoder's KV cache at ``tokens`` (an encoder-decoder's input and decoder both that long), batch 1;
    None for a model that caches nothing or whose cache the graph cannot give."""
    if not is_generative(graph):
        return None
    try:
        poly = kv_cache_bytes(graph, dtype)
    except CostError:
        return None
    sizes = {name: tokens for name in poly.dims()} | {"batch": 1}
    found = {
        "tokens": tokens,
        "dtype": dtype,
        "formula": str(poly),
        "readable": poly.readable(),
        "bytes": evaluate(poly, sizes),
    }
    decompressed = decompressed_kv_cache_bytes(graph, dtype)
    if decompressed is not None:  # MLA: the figure above is the latent; this, every head's keys and values
        found["decompressed_bytes"] = evaluate(decompressed, sizes)
    return found
