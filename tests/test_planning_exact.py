"""The planning numbers in-process, every figure derived from the models' configs or the module docs.

The committed graphs of the tiny models (``tests/fixtures/planning/``) and small hand-built graphs
give each rule of :mod:`bertgraph.graph.generation`, :mod:`~bertgraph.graph.masked` and
:mod:`~bertgraph.graph.saved` a case it alone decides: a value head size unlike the key's, an
encoder op whose cost names no length, a grouped-head copy. Nothing here traces or runs a model, so
mutation testing checks each mutant of these modules in about a second.
"""

from __future__ import annotations

import re
from typing import Any

import networkx as nx
import pytest

from bertgraph.graph import costbase, generation, masked, saved
from bertgraph.graph import schema as g
from bertgraph.graph.costbase import CostError
from bertgraph.graph.poly import Poly
from tests.generation_runs import CONFIGS, WINDOW, graph_of

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def _llama() -> tuple[int, int, int]:
    config = CONFIGS["llama"]
    head = config["hidden_size"] // config["num_attention_heads"]
    return config["num_hidden_layers"], config["num_key_value_heads"], head


def _expected_layers(name: str) -> list[tuple[str, str, int | None, str, str]]:
    """(module, kind, window, elements per token, tokens) of each caching block, from the config."""
    config = CONFIGS[name]
    if name == "t5":
        per = f"{config['num_heads'] * 2 * config['d_kv']}*batch"
        return [
            row
            for i in range(config["num_layers"])
            for row in (
                (f"decoder.block.{i}.layer.0.SelfAttention", g.CAUSAL, None, per, "tgt"),
                (f"decoder.block.{i}.layer.1.EncDecAttention", g.CROSS, None, per, "seq"),
            )
        ]
    if name == "deepseek":  # the latent and the shared rotary key part, per token
        per = f"{config['kv_lora_rank'] + config['qk_rope_head_dim']}*batch"
        return [(f"model.layers.{i}.self_attn", g.CAUSAL, None, per, "seq") for i in range(config["num_hidden_layers"])]
    if name == "gpt2":
        per = f"{config['n_head'] * 2 * (config['n_embd'] // config['n_head'])}*batch"
        return [(f"transformer.h.{i}.attn", g.CAUSAL, None, per, "seq") for i in range(config["n_layer"])]
    head = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    per = f"{config['num_key_value_heads'] * 2 * head}*batch"
    rows = []
    for i in range(config["num_hidden_layers"]):
        if "layer_types" in config:  # Gemma-2: each layer's kind stated
            slides = config["layer_types"][i] == "sliding_attention"
        else:  # Qwen2: the layers from max_window_layers on slide
            slides = config.get("use_sliding_window") and i >= config["max_window_layers"]
        window = config["sliding_window"] if slides else None
        kind = g.CAUSAL_SLIDING_WINDOW if slides else g.CAUSAL
        rows.append((f"model.layers.{i}.self_attn", kind, window, per, f"min(seq, {window - 1})" if window else "seq"))
    return rows


@pytest.mark.parametrize("attention", [None, "eager"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_cache_layers_follow_each_config(name: str, attention: str | None) -> None:
    graph = graph_of(name, attention)
    layers = generation.cache_layers(graph)
    found = [(layer.module, layer.kind, layer.window, str(layer.per_token), str(layer.tokens)) for layer in layers]
    assert found == _expected_layers(name)
    for layer in layers:
        assert layer.dtype == "float32"
        assert graph.nodes[layer.node][g.MODULE] == layer.module
        assert layer.elements() == layer.per_token * layer.tokens
    assert [layer.node for layer in layers] == [n for n in g.ops_in_order(graph) if n in {x.node for x in layers}]


def test_a_latent_cache_is_the_latent_and_shared_rotary_key_and_its_heads_are_the_second_figure() -> None:
    """DeepSeek's MLA: the cache holds kv_lora_rank + qk_rope_head_dim per token and layer (what transformers'
    cache holds); every head's keys and values, decompressed by kv_b_proj, are the second figure; a decode step
    decompresses every cached token and the new one. Blocks that cache their keys and values have no latent."""
    config = CONFIGS["deepseek"]
    layers, heads = config["num_hidden_layers"], config["num_attention_heads"]
    latent = config["kv_lora_rank"] + config["qk_rope_head_dim"]
    per_head = heads * (config["qk_nope_head_dim"] + config["qk_rope_head_dim"] + config["v_head_dim"])
    for attention in (None, "eager"):
        graph = graph_of("deepseek", attention)
        cached = generation.cache_layers(graph)
        assert [str(layer.decompressed) for layer in cached] == [f"{per_head}*batch"] * layers
        assert generation.kv_cache_bytes(graph, "bfloat16") == 2 * layers * latent * b * s
        assert generation.decompressed_kv_cache_bytes(graph, "bfloat16") == 2 * layers * per_head * b * s
        made = [generation.decompression(graph, layer.node) for layer in cached]
        assert made == [f"model.layers.{i}.self_attn.kv_b_proj:linear" for i in range(layers)]
        # each cached token costs a decode step its attention products per key and its decompression
        width = costbase.node_poly(graph.nodes[made[0]], g.MATMUL_FLOPS)
        made_per_token = heads * (config["qk_nope_head_dim"] + config["v_head_dim"])  # keys' other part and values
        assert width == 2 * config["kv_lora_rank"] * made_per_token * b * s
        pairs = [
            dict(costbase.node_poly(d, g.MATMUL_FLOPS).terms()).get((("batch", 1), ("seq", 2)), 0)
            for n, d in graph.nodes(data=True)
            if not costbase.has_weight_operand(graph, n)
        ]
        per_cached = dict(generation.decode_step_flops(graph).terms())[(("batch", 1), ("seq", 1))]
        assert per_cached == sum(pairs) + layers * 2 * config["kv_lora_rank"] * made_per_token
    for name in CONFIGS:
        if name != "deepseek":
            graph = graph_of(name)
            assert all(layer.decompressed is None for layer in generation.cache_layers(graph)), name
            assert generation.decompressed_kv_cache_bytes(graph) is None, name


def test_a_latent_needs_keys_made_from_it_too_and_a_decompression_that_widens() -> None:
    """A value projection whose input the queries do not read is no decompression when the keys are not made
    from it as well (separate projections of a separately normalised input), nor when it narrows what it reads."""
    graph = graph_of("deepseek")
    node = generation.cache_layers(graph)[0].node
    made = generation.decompression(graph, node)
    assert made is not None
    _, key, _ = generation._operands(graph, node)
    apart = graph.copy()
    apart.remove_edges_from([(source, key) for source in list(apart.predecessors(key))])
    assert generation.decompression(apart, node) is None
    assert generation.cache_layers(apart)[0].decompressed is None  # then the block caches its keys and values
    narrow = graph.copy()  # each node's attributes copied: the committed graph keeps its own
    latent = next(iter(narrow.predecessors(made)))
    made_width = narrow.nodes[made][g.SHAPE][-1]
    narrow.nodes[latent][g.SHAPE] = [*narrow.nodes[latent][g.SHAPE][:-1], made_width]  # reads as much as it makes
    assert generation.decompression(narrow, node) == made
    assert generation.cache_layers(narrow)[0].decompressed is None


def test_cache_bytes_are_layers_times_heads_times_tokens_times_the_dtype_width() -> None:
    layers, kv_heads, head = _llama()
    for attention in (None, "eager"):
        graph = graph_of("llama", attention)
        for dtype in (None, "float32", "bfloat16"):
            width = BYTES[dtype or "float32"]
            for batch, seq in ((1, 1), (3, 70)):
                expected = layers * batch * kv_heads * seq * 2 * head * width
                bytes_ = costbase.evaluate(generation.kv_cache_bytes(graph, dtype), {"batch": batch, "seq": seq})
                assert bytes_ == expected, (attention, dtype, batch, seq)
    # a window keeps w - 1 tokens once the prompt is longer
    config = CONFIGS["qwen2-sliding"]
    per = config["num_key_value_heads"] * 2 * (config["hidden_size"] // config["num_attention_heads"]) * 2
    poly = generation.kv_cache_bytes(graph_of("qwen2-sliding"), "bfloat16")
    for seq in (3, WINDOW - 1, WINDOW, 50):
        assert costbase.evaluate(poly, {"batch": 2, "seq": seq}) == 2 * per * (2 * seq + 2 * min(seq, WINDOW - 1))


def test_the_summary_is_the_cache_at_4096_tokens_in_bfloat16_batch_one() -> None:
    layers, kv_heads, head = _llama()
    graph = graph_of("llama")
    poly = generation.kv_cache_bytes(graph, "bfloat16")
    assert generation.kv_cache_summary(graph) == {
        "tokens": 4096,
        "dtype": "bfloat16",
        "formula": str(poly),
        "readable": poly.readable(),
        "bytes": layers * kv_heads * 4096 * 2 * head * 2,
    }
    assert str(poly) == f"{layers * kv_heads * 2 * head * 2}*batch*seq"
    small = generation.kv_cache_summary(graph, tokens=10, dtype="float32")
    assert small is not None and small["bytes"] == layers * kv_heads * 10 * 2 * head * 4
    assert (small["tokens"], small["dtype"]) == (10, "float32")
    # an encoder-decoder: its input and its decoder both that long
    t5 = CONFIGS["t5"]
    both = generation.kv_cache_summary(graph_of("t5"))
    assert both is not None and both["bytes"] == t5["num_layers"] * 2 * t5["num_heads"] * 4096 * 2 * t5["d_kv"] * 2
    window = generation.kv_cache_summary(graph_of("qwen2-sliding"), tokens=100)
    qwen = CONFIGS["qwen2-sliding"]
    per_token = qwen["num_key_value_heads"] * 2 * (qwen["hidden_size"] // qwen["num_attention_heads"]) * 2
    assert window is not None and window["bytes"] == per_token * (2 * 100 + 2 * (WINDOW - 1))


def test_no_summary_for_an_encoder_or_a_cache_the_graph_cannot_give() -> None:
    encoder = graph_of("modernbert")
    assert not generation.is_generative(encoder)
    assert generation.kv_cache_summary(encoder) is None
    assert generation.kv_cache_bytes(encoder) == 0
    broken = graph_of("llama").copy()
    for node in generation._attention_nodes(broken):
        broken.nodes[node][g.TARGET] = "aten.softmax.default"  # no products around it: no keys to read
    assert generation.is_generative(broken)
    with pytest.raises(CostError, match="model.layers.0.self_attn: the KV cache is read off"):
        generation.kv_cache_bytes(broken)
    assert generation.kv_cache_summary(broken) is None


def test_only_operators_are_attention_blocks() -> None:
    graph = nx.DiGraph()
    graph.add_node("x", **{g.KIND: g.INPUT, g.ATTENTION: g.CAUSAL, g.ORDER: 0})
    assert not generation.is_generative(graph)
    assert generation.cache_layers(graph) == []
    assert generation.is_generative(graph_of("t5")) and generation.is_generative(graph_of("gpt2"))


def test_a_length_is_one_named_dimension() -> None:
    assert generation.length_name(Poly.var("tgt")) == "tgt"
    for poly in (Poly.var("seq") * 2, Poly.var("seq") * Poly.var("tgt"), Poly.const(5), Poly.var("seq") + 1):
        with pytest.raises(CostError, match=re.escape(f"key length is {poly}, not one named length")):
            generation.length_name(poly)


def _one_block(**changes: Any) -> nx.DiGraph:
    """llama's graph with every attention block's facts changed alike."""
    graph = graph_of("llama").copy()
    for node in generation._attention_nodes(graph):
        graph.nodes[node].update(changes)
    return graph


def test_cache_heads_come_from_the_facts_pass_or_else_the_key() -> None:
    _, kv_heads, head = _llama()
    heads = CONFIGS["llama"]["num_attention_heads"]
    for facts, expected in (({g.KV_HEADS: None}, heads), ({g.KV_HEADS: 0}, heads), ({g.KV_HEADS: 1}, 1)):
        found = {str(layer.per_token) for layer in generation.cache_layers(_one_block(**facts))}
        assert found == {f"{expected * 2 * head}*batch"}, facts
    assert {str(layer.per_token) for layer in generation.cache_layers(graph_of("llama"))} == {
        f"{kv_heads * 2 * head}*batch"
    }


def test_a_window_only_caps_a_causal_sliding_window() -> None:
    capped = generation.cache_layers(_one_block(**{g.ATTENTION: g.CAUSAL_SLIDING_WINDOW, g.WINDOW: 5}))
    assert {(str(layer.tokens), layer.window) for layer in capped} == {("min(seq, 4)", 5)}
    ignored = generation.cache_layers(_one_block(**{g.WINDOW: 5}))  # causal: a stray window means nothing
    assert {(str(layer.tokens), layer.window) for layer in ignored} == {("seq", None)}
    no_size = generation.cache_layers(_one_block(**{g.ATTENTION: g.CAUSAL_SLIDING_WINDOW, g.WINDOW: "5"}))
    assert {(str(layer.tokens), layer.window) for layer in no_size} == {("seq", "5")}
    kinds = generation.cache_layers(_one_block(**{g.ATTENTION: g.BIDIRECTIONAL}))
    assert kinds == []


def test_key_and_value_shapes_of_fused_attention_are_its_operands() -> None:
    graph = _one_block(**{g.INPUTS: [["batch", 4, "seq", 8], ["batch", 4, "seq", 6], ["batch", 4, "seq", 10]]})
    layers, kv_heads, _ = _llama()
    assert {str(layer.per_token) for layer in generation.cache_layers(graph)} == {f"{kv_heads * (6 + 10)}*batch"}
    with_choices = _one_block(**{g.INPUTS: [["batch", 3, 4, "seq", 8]] * 3})
    assert {str(layer.per_token) for layer in generation.cache_layers(with_choices)} == {f"{3 * kv_heads * 16}*batch"}
    for inputs in ([["batch", 4, "seq", 8]] * 2, []):
        with pytest.raises(CostError, match="model.layers.0.self_attn: the KV cache"):
            generation.cache_layers(_one_block(**{g.INPUTS: inputs}))
    unnamed = _one_block(**{g.MODULE: ""}, **{g.INPUTS: []})
    first = generation._attention_nodes(unnamed)[0]
    with pytest.raises(CostError, match=f"^{first}: the KV cache"):
        generation.cache_layers(unnamed)
    unknown = _one_block(**{g.INPUTS: [["batch", 4, "seq", 8], ["batch", 4, "seq//2", 8], ["batch", 4, "seq", 8]]})
    with pytest.raises(CostError, match=r"model.layers.0.self_attn: the key shape is not known \("):
        generation.cache_layers(unknown)
    no_dtype = _one_block(**{g.DTYPE: "bfloat16"})
    assert {layer.dtype for layer in generation.cache_layers(no_dtype)} == {"bfloat16"}
    assert costbase.evaluate(generation.kv_cache_bytes(no_dtype), {"batch": 1, "seq": 1}) == layers * kv_heads * 16 * 2


def _eager_value(graph: nx.DiGraph, shape: list[Any]) -> nx.DiGraph:
    """``graph`` with the value read by each weights × values product given ``shape`` (as the product read it)."""
    from bertgraph.graph.facts.attention import eager_products

    graph = graph.copy()
    for node in generation._attention_nodes(graph):
        _, weighted = eager_products(graph, node)
        assert weighted is not None
        inputs = graph.nodes[weighted][g.INPUTS]
        graph.nodes[weighted][g.INPUTS] = [inputs[0], shape, *inputs[2:]]
    return graph


def test_eager_keys_are_read_transposed_and_values_as_they_are() -> None:
    _, kv_heads, head = _llama()
    wider = _eager_value(graph_of("llama", "eager"), ["batch", 4, "seq", 12])
    assert {str(layer.per_token) for layer in generation.cache_layers(wider)} == {f"{kv_heads * (head + 12)}*batch"}
    assert {str(layer.tokens) for layer in generation.cache_layers(wider)} == {"seq"}
    other_length = _eager_value(graph_of("llama", "eager"), ["batch", 4, "tgt", 12])
    assert {str(layer.tokens) for layer in generation.cache_layers(other_length)} == {"seq"}  # the key's length
    no_kv = graph_of("gpt2", "eager").copy()  # GPT-2 has no grouped heads: the key's own count
    for node in generation._attention_nodes(no_kv):
        no_kv.nodes[node][g.KV_HEADS] = None
    gpt2 = CONFIGS["gpt2"]
    expected = f"{gpt2['n_head'] * 2 * (gpt2['n_embd'] // gpt2['n_head'])}*batch"
    assert {str(layer.per_token) for layer in generation.cache_layers(no_kv)} == {expected}
    for shape in (["batch", 4, "seq"], "batch", ["batch", 4, "seq", 8, 1]):
        with pytest.raises(CostError, match="the KV cache is read off"):
            generation.cache_layers(_eager_value(graph_of("llama", "eager"), shape))  # type: ignore[arg-type]


def test_cache_layer_details_without_module_inputs_or_a_known_width() -> None:
    graph = graph_of("llama").copy()
    for node in generation._attention_nodes(graph):
        del graph.nodes[node][g.MODULE]
    assert {layer.module for layer in generation.cache_layers(graph)} == {""}
    no_inputs = graph_of("llama").copy()
    for node in generation._attention_nodes(no_inputs):
        del no_inputs.nodes[node][g.INPUTS]
    with pytest.raises(
        CostError,
        match=r"are not found \(fused: its operands; eager: the products around its softmax\), so none is guessed$",
    ):
        generation.cache_layers(no_inputs)
    # a width nobody knows is no width guessed
    assert generation.kv_cache_bytes(graph_of("llama"), "int4") == 0
    five = generation.cache_layers(_one_block(**{g.INPUTS: [["batch", 3, 4, "seq", 8]] * 3}))
    assert {str(layer.tokens) for layer in five} == {"seq"}  # the length is the key's second-last dimension


def _break_eager(graph: nx.DiGraph, scores: bool) -> nx.DiGraph:
    """Eager llama with, per block, the scores product made unrecognisable or the value's edge unlabelled."""
    from bertgraph.graph.facts.attention import eager_products
    from bertgraph.graph.facts.walk import argument

    graph = graph.copy()
    for node in generation._attention_nodes(graph):
        product, weighted = eager_products(graph, node)
        assert product is not None and weighted is not None
        if scores:
            graph.nodes[product][g.OP] = "conv2d"
        else:
            value = argument(graph, weighted, 1)
            graph.edges[value, weighted][g.ARGS] = []
    return graph


def test_eager_attention_without_either_product_or_operand_has_no_cache() -> None:
    for scores in (True, False):
        with pytest.raises(CostError, match="model.layers.0.self_attn: the KV cache is read off"):
            generation.cache_layers(_break_eager(graph_of("llama", "eager"), scores))


def _op(graph: nx.DiGraph, name: str, module: str, flops: Poly | None, **facts: Any) -> None:
    """An op of ``module`` costing ``flops`` matmul FLOPs; ``weight=True``: it reads a parameter."""
    weight = facts.pop("weight", False)
    data: dict[str, Any] = {g.KIND: g.OPERATOR, g.MODULE: module, g.ORDER: len(graph), **facts}
    if flops is not None:
        data[g.MATMUL_FLOPS] = str(flops)
    if weight:
        data[g.PARAM_NAMES] = [f"{module}.weight"]
    graph.add_node(name, **data)


b, s, t = Poly.var("batch"), Poly.var("seq"), Poly.var("tgt")


def _decoder(length: str = "seq") -> nx.DiGraph:
    """A decoder-only graph: a projection, a last-token head, causal and windowed (w = 4) attention by SDPA."""
    n = Poly.var(length)
    graph = nx.DiGraph(**{g.G_EXAMPLE: {"batch": 1, length: 8}, g.G_STACKS: {"layers": "decoder"}})
    sdpa = {g.TARGET: generation.SDPA_TARGETS[0], g.INPUTS: [["batch", 2, length, 4]] * 3, g.DTYPE: "float32"}
    _op(graph, "proj", "layers.0.q", 6 * b * n, weight=True)
    _op(graph, "scores", "layers.0.attn", 10 * b * n * n, **sdpa, **{g.ATTENTION: g.CAUSAL, g.KV_HEADS: 2})
    window = {g.ATTENTION: g.CAUSAL_SLIDING_WINDOW, g.WINDOW: 4, g.KV_HEADS: 2}
    _op(graph, "windowed", "layers.1.attn", 2 * b * n * n, **sdpa, **window)
    _op(graph, "head", "head", 6 * b, weight=True)  # on the last token only: no length in its cost
    _op(graph, "free", "layers.0.add", None)
    graph.add_node("not-an-op", **{g.KIND: g.INPUT, g.MATMUL_FLOPS: str(100 * n), g.ORDER: -1})
    return graph


def _decoder_step(batch: int, cached: int) -> int:
    """The module doc's rule by hand: weights at one token, attention over the cached tokens and the new one."""
    return 6 * batch + 10 * batch * (cached + 1) + 2 * batch * (min(cached, 3) + 1) + 6 * batch


@pytest.mark.parametrize("length", ["seq", "sequence"])
def test_a_decode_step_runs_weights_at_one_token_and_attention_over_the_cache(length: str) -> None:
    graph = _decoder(length)
    assert generation.step_name(graph) == length
    step = generation.decode_step_flops(graph)
    for batch, cached in ((1, 1), (2, 3), (3, 9)):
        assert costbase.evaluate(step, {"batch": batch, length: cached}) == _decoder_step(batch, cached)


def test_generating_is_the_prefill_then_one_step_per_token_and_the_cache_at_the_end() -> None:
    graph = _decoder()
    prefill = 100 * s + 7
    for tokens, dtype, width in ((3, None, 4), (1, "bfloat16", 2), (0, None, 4)):
        planned = generation.generate(graph, {"batch": 2, "seq": 5}, tokens, prefill, dtype)
        steps = sum(_decoder_step(2, 5 + i) for i in range(tokens))
        final = 5 + tokens
        cache = 2 * 2 * (4 + 4) * width * (final + min(final, 3))
        assert planned == {
            "tokens": tokens,
            "prefill_flops": 507,
            "decode_flops": steps,
            "total_flops": 507 + steps,
            "kv_cache_bytes": cache,
        }


def test_generating_any_number_of_tokens_is_the_sum_of_its_steps_in_closed_form() -> None:
    """Every step from the first cached token on, across the window's cap (3 tokens kept) and far past it:
    the closed form is the step-by-step sum, and a hundred thousand steps are the module doc's rule summed
    by hand (each step's count is linear in the cached length once the window is full)."""
    graph = _decoder()
    for start in (1, 2, 3, 4):
        for tokens in range(12):
            planned = generation.generate(graph, {"batch": 2, "seq": start}, tokens, s)
            assert planned["decode_flops"] == sum(_decoder_step(2, start + i) for i in range(tokens)), (start, tokens)
    tokens = 10**5
    planned = generation.generate(graph, {"batch": 3, "seq": 1}, tokens, s)
    last = tokens  # cached lengths 1 … tokens
    full = sum(_decoder_step(3, cached) for cached in range(1, 3))  # 1, 2: the window not yet full
    slope = _decoder_step(3, 4) - _decoder_step(3, 3)
    steps = last - 2  # cached lengths 3 … last
    full += steps * _decoder_step(3, 3) + slope * (steps - 1) * steps // 2
    assert planned["decode_flops"] == full and planned["tokens"] == tokens
    assert planned["kv_cache_bytes"] == 3 * 2 * (4 + 4) * 4 * ((1 + tokens) + 3)


def _encoder_decoder() -> nx.DiGraph:
    graph = nx.DiGraph(
        **{g.G_EXAMPLE: {"batch": 1, "seq": 8, "tgt": 4}, g.G_STACKS: {"enc": "encoder", "dec": "decoder"}}
    )
    _op(graph, "enc.linear", "enc.0.ff", 4 * b * s, weight=True)
    _op(graph, "enc.scores", "enc.0.attn", 12 * b * s * s, **{g.ATTENTION: g.BIDIRECTIONAL})
    _op(graph, "enc.const", "enc.0.bias", Poly.const(7), weight=True)  # the encoder's, though it names no length
    _op(graph, "enc.own", "enc", Poly.const(17), weight=True)
    _op(graph, "encx.const", "encx.table", Poly.const(11), weight=True)  # not the encoder: a name that starts alike
    _op(graph, "dec.linear", "dec.0.ff", 3 * b * t, weight=True)
    _op(graph, "dec.kv", "dec.0.cross.k", 5 * b * s, weight=True)  # cross-attention's keys: cached
    _op(graph, "dec.const", "dec.0.table", Poly.const(2), weight=True)
    sdpa = {g.TARGET: generation.SDPA_TARGETS[0], g.KV_HEADS: 2, g.DTYPE: "float32"}
    keys = {g.INPUTS: [["batch", 2, "tgt", 4]] * 3}
    _op(graph, "dec.self", "dec.0.self", 8 * b * t * t, **sdpa, **keys, **{g.ATTENTION: g.CAUSAL})
    keys = {g.INPUTS: [["batch", 2, "tgt", 4], ["batch", 2, "seq", 4], ["batch", 2, "seq", 4]]}
    _op(graph, "dec.cross", "dec.0.cross", 9 * b * t * s, **sdpa, **keys, **{g.ATTENTION: g.CROSS})
    return graph


def test_an_encoder_decoders_step_skips_the_encoder_and_cross_attentions_projections() -> None:
    graph = _encoder_decoder()
    assert generation.step_name(graph) == "tgt"
    step = generation.decode_step_flops(graph)
    for batch, seq, tgt in ((1, 8, 1), (2, 5, 7)):
        expected = 11 + 3 * batch + 2 + 8 * batch * (tgt + 1) + 9 * batch * seq
        assert costbase.evaluate(step, {"batch": batch, "seq": seq, "tgt": tgt}) == expected
    planned = generation.generate(graph, {"batch": 1, "seq": 8, "tgt": 2}, 2, Poly.const(1))
    assert planned["decode_flops"] == sum(11 + 3 + 2 + 8 * (tgt + 1) + 9 * 8 for tgt in (2, 3))
    # the cache at the end: the decoder's 2 + 2 tokens and the encoder's 8, 2 heads × (4 + 4) float32 each
    assert planned["kv_cache_bytes"] == 2 * 8 * 4 * (4 + 8)
    # without its stacks recorded, an op is the encoder's by its cost alone: the constants are run
    del graph.graph[g.G_STACKS]
    expected = 17 + 7 + 11 + 3 + 2 + 8 * 2 + 9 * 8
    assert costbase.evaluate(generation.decode_step_flops(graph), {"batch": 1, "seq": 8, "tgt": 1}) == expected


def test_an_encoder_stack_in_a_decoder_only_graph_is_run_at_each_step() -> None:
    graph = _decoder()
    graph.graph[g.G_STACKS] = {"layers": "encoder", "head": "encoder"}
    assert costbase.evaluate(generation.decode_step_flops(graph), {"batch": 2, "seq": 3}) == _decoder_step(2, 3)


def test_a_decode_step_refuses_attention_that_caches_nothing() -> None:
    for kind, said in ((g.BIDIRECTIONAL, g.BIDIRECTIONAL), (None, "unlabelled")):
        graph = _decoder()
        graph.nodes["scores"][g.ATTENTION] = kind
        with pytest.raises(CostError, match=f"^layers.0.attn: a decode step runs {said} attention, which caches"):
            generation.decode_step_flops(graph)
    graph = _decoder()
    graph.nodes["scores"][g.ATTENTION] = None
    graph.nodes["scores"][g.MODULE] = ""
    with pytest.raises(CostError, match="^scores: a decode step runs unlabelled attention, which caches nothing; only"):
        generation.decode_step_flops(graph)


def _pairs_by_hand(kind: str, window: int | None, n: int) -> int:
    """The (query, key) pairs a mask of ``kind`` allows over ``n`` tokens, counted one by one."""
    allowed = {
        g.CAUSAL: lambda q, k: k <= q,
        g.CAUSAL_SLIDING_WINDOW: lambda q, k: q - (window or 0) < k <= q,
        g.SLIDING_WINDOW: lambda q, k: abs(q - k) <= (window or 0),
    }.get(kind, lambda q, k: True)
    if window is None:
        allowed = {g.CAUSAL: allowed}.get(kind, lambda q, k: True)
    return sum(1 for q in range(n) for k in range(n) if allowed(q, k))


@pytest.mark.parametrize(
    ("kind", "window"),
    [
        (g.CAUSAL, None),
        (g.CAUSAL_SLIDING_WINDOW, 1),
        (g.CAUSAL_SLIDING_WINDOW, 4),
        (g.SLIDING_WINDOW, 0),
        (g.SLIDING_WINDOW, 3),
        (g.CAUSAL_SLIDING_WINDOW, None),
        (g.SLIDING_WINDOW, None),
        (g.BIDIRECTIONAL, None),
        (g.CROSS, None),
    ],
)
def test_allowed_pairs_are_the_pairs_the_mask_lets_through(kind: str, window: int | None) -> None:
    twice = masked.twice_allowed_pairs(kind, window, "tgt")
    assert twice.dims() <= {"tgt"}
    for n in range(1, 12):
        assert costbase.evaluate(twice, {"tgt": n}) == 2 * _pairs_by_hand(kind, window, n), n


def test_the_pairs_of_a_product_are_its_lengths() -> None:
    assert masked.product_pairs(6 * b * s * s + 2 * s * s) == (("seq", 2),)
    assert masked.product_pairs(6 * b * t * s * Poly.var("choices")) == (("seq", 1), ("tgt", 1))
    for poly in (6 * b, 6 * b * s * t * Poly.var("other")):
        with pytest.raises(CostError, match=re.escape(f"an attention product's cost {poly} has no query and key")):
            masked.product_pairs(poly)


def test_a_product_divided_by_its_pairs() -> None:
    assert masked.divide(6 * b * s * s + 4 * s * s, (("seq", 2),)) == 6 * b + 4
    assert masked.divide(6 * b * s * t, (("seq", 1), ("tgt", 1))) == 6 * b
    assert masked.divide(2 * s * s * s, (("seq", 2),)) == 2 * s
    for poly, by in ((6 * b * s * s + 4 * s, 2), (6 * b * s, 2), (6 * b * t, 2), (6 * b * t, 1)):
        with pytest.raises(CostError, match=re.escape(f"an attention product's cost {poly} is not per query and key")):
            masked.divide(poly, (("seq", by),) if by == 2 else (("seq", 1), ("tgt", 1)))
    assert str(masked._halve(6 * b + 4)) == "3*batch + 2"
    with pytest.raises(CostError, match=re.escape("3*batch + 4 is not a whole number of FLOPs when halved")):
        masked._halve(3 * b + 4)


def test_attention_facts_are_the_products_own_or_its_modules() -> None:
    graph = nx.DiGraph(**{g.G_MODULES: {"a": {g.ATTENTION: g.CAUSAL}, "odd": "not a record", "": {"x": 1}}})
    own = {g.ATTENTION: g.CROSS, g.MODULE: "a"}
    assert masked.attention_facts_of(graph, own) is own
    assert masked.attention_facts_of(graph, {g.MODULE: "a"}) == {g.ATTENTION: g.CAUSAL}
    assert masked.attention_facts_of(graph, {g.MODULE: "odd"}) == {}
    assert masked.attention_facts_of(graph, {g.MODULE: "b"}) == {}
    assert masked.attention_facts_of(graph, {}) == {"x": 1}  # no module: the model's own entry
    assert masked.attention_facts_of(nx.DiGraph(), {g.MODULE: "a"}) == {}


def test_masked_flops_count_allowed_pairs_of_each_product_and_skip_weights() -> None:
    graph = nx.DiGraph(
        **{g.G_MODULES: {"eager": {g.ATTENTION: g.CAUSAL_SLIDING_WINDOW, g.WINDOW: 3}, "sized": {g.WINDOW: "3"}}}
    )
    graph.add_node("input", **{g.KIND: g.INPUT, g.MATMUL_FLOPS: str(3 * s * s), g.ATTENTION: g.CAUSAL})
    _op(graph, "proj", "layers.q", 6 * b * s, weight=True)
    _op(graph, "full", "layers.full", 3 * b * s * s, **{g.ATTENTION: g.BIDIRECTIONAL})
    _op(graph, "fixed", "layers.fixed", 5 * b)  # a product of no length, outside attention: as it is
    _op(graph, "causal", "layers.attn", 10 * b * s * s, **{g.ATTENTION: g.CAUSAL})
    _op(graph, "eager", "eager", 4 * b * s * s)  # eager attention: the facts are its module's
    _op(graph, "cross", "layers.cross", 8 * b * s * t, **{g.ATTENTION: g.CAUSAL})  # two lengths: every pair
    _op(graph, "window", "layers.w", 2 * b * s * s, **{g.ATTENTION: g.SLIDING_WINDOW, g.WINDOW: 1})
    _op(graph, "unsized", "layers.u", 2 * b * s * s, **{g.ATTENTION: g.SLIDING_WINDOW, g.WINDOW: "1"})
    _op(graph, "unlabelled", "elsewhere", 2 * b * s * s)
    _op(graph, "free", "layers.add", None, **{g.ATTENTION: g.CAUSAL})
    poly = masked.masked_attention_flops(graph)
    for batch, n, tgt in ((1, 1, 1), (2, 5, 3), (1, 9, 2)):
        expected = (
            3 * batch * n * n
            + 5 * batch
            + 10 * batch * _pairs_by_hand(g.CAUSAL, None, n)
            + 4 * batch * _pairs_by_hand(g.CAUSAL_SLIDING_WINDOW, 3, n)
            + 8 * batch * n * tgt
            + 2 * batch * _pairs_by_hand(g.SLIDING_WINDOW, 1, n)
            + 2 * batch * n * n
            + 2 * batch * n * n
        )
        assert costbase.evaluate(poly, {"batch": batch, "seq": n, "tgt": tgt}) == expected, (batch, n)
    assert masked._halve(Poly.const(2**60 + 2)) == Poly.const(2**59 + 1)  # exact beyond a float's precision


# --- what autograd saves, on hand-built graphs whose every byte the module doc's rules give ---------


def _saved_op(graph: nx.DiGraph, name: str, target: str, shape: list[Any], *sources: str, **facts: Any) -> None:
    """An op reading ``sources`` as its arguments 0, 1, …; ``alias`` on it makes it (and its first edge) a view."""
    inputs = facts.pop("inputs", None)
    data = {g.KIND: g.OPERATOR, g.TARGET: target, g.SHAPE: shape, g.DTYPE: "float32", g.ORDER: len(graph)}
    data[g.MODULE] = name
    data.update(facts)
    data[g.INPUTS] = inputs if inputs is not None else [graph.nodes[source][g.SHAPE] for source in sources]
    graph.add_node(name, **data)
    for position, source in enumerate(sources):
        graph.add_edge(source, name, **{g.ARGS: [position], g.ALIAS: bool(facts.get(g.ALIAS)) and position == 0})


ROW = ["batch", "seq", 8]  # 8 float32 per token: 32 bytes
WEIGHT = {"inputs": [ROW, [8, 8]]}


def _layer() -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_node("x", **{g.KIND: g.INPUT, g.SHAPE: ROW, g.ORDER: -1})
    _saved_op(graph, "lin", "aten.linear.default", ROW, "x", **WEIGHT, **{g.PARAM_NAMES: ["lin.weight"]})
    _saved_op(graph, "act", "aten.gelu.default", ROW, "lin")  # keeps lin's output
    _saved_op(graph, "v", "aten.view.default", ROW, "act", **{g.ALIAS: True})
    _saved_op(graph, "lin2", "aten.linear.default", ROW, "v", **WEIGHT, **{g.SHARED_PARAMS: ["lin.weight"]})
    _saved_op(
        graph, "norm", "aten.layer_norm.default", ROW, "lin2", inputs=[ROW, [8]], **{g.PARAM_NAMES: ["norm.weight"]}
    )
    _saved_op(graph, "drop", "aten.dropout.default", ROW, "norm", **{g.ALIAS: True, g.LITERALS: {"1": 0.1}})
    _saved_op(graph, "soft", "aten._softmax.default", ROW, "drop")
    _saved_op(graph, "drop0", "aten.dropout.default", ROW, "soft", **{g.ALIAS: True, g.LITERALS: {"1": 0.0}})
    _saved_op(graph, "mul", "aten.mul.Tensor", ROW, "drop0", "act")  # both already kept: counted once
    _saved_op(graph, "weird", "aten.weirdop.default", ROW, "mul")
    _saved_op(graph, "unknown", "aten.gelu.default", ["batch", "?"], "mul")
    _saved_op(graph, "ids", "aten.mul.Tensor", ROW, "lin", **{g.DTYPE: "int64", "inputs": [ROW, ROW]})
    _saved_op(graph, "after", "aten.gelu.default", ROW, "ids")  # off the gradient's path
    _saved_op(graph, "lin3", "aten.linear.default", ROW, "x", **WEIGHT, **{g.PARAM_NAMES: ["frozen.weight"]})
    _saved_op(graph, "act3", "aten.gelu.default", ROW, "lin3")
    return graph


def test_saved_bytes_of_a_layer_follow_each_rule() -> None:
    graph = _layer()
    found = saved.saved_activation_bytes(graph)
    row = 32 * b * s
    expected = {"act": row, "act3": 0, "drop": row, "lin": row, "lin2": row, "lin3": row, "norm": 8 * b * s}
    expected["soft"] = row
    del expected["act3"]
    assert found.by_node == expected
    assert list(found.by_node) == sorted(expected)
    assert found.bytes == 7 * row - row + 8 * b * s
    assert found.unsupported == ["aten.gelu.default", "aten.weirdop"]
    frozen = saved.saved_activation_bytes(graph, frozenset({"frozen.weight"}))
    assert frozen.by_node == {k: v for k, v in expected.items() if k != "lin3"}
    assert frozen.bytes == found.bytes - row
    # lin.weight frozen (lin2 shares it): nothing tracked before the norm, which keeps lin2's output, and mul
    # keeps act for the gradient of its other operand
    shared = saved.saved_activation_bytes(graph, frozenset({"lin.weight"}))
    assert shared.by_node == {k: v for k, v in expected.items() if k != "lin"}


def test_an_op_that_saves_its_output_charges_the_storage_it_views() -> None:
    graph = _layer()
    _saved_op(graph, "tail", "aten.view.default", ROW, "lin2", **{g.ALIAS: True})
    _saved_op(graph, "relu", "aten.relu.default", ROW, "tail", **{g.ALIAS: True})  # a view: its source's storage
    found = saved.saved_activation_bytes(graph)
    assert "relu" not in found.by_node and found.by_node["lin2"] == 32 * b * s
    loose = _layer()
    _saved_op(loose, "relu", "aten.relu.default", ROW, "lin2", **{g.ALIAS: True})
    loose.edges["lin2", "relu"][g.ALIAS] = False  # a view of nothing found: no storage of its own to keep
    assert saved.saved_activation_bytes(loose).by_node == saved.saved_activation_bytes(_layer()).by_node


QUERY, KEY = ["batch", 4, "seq", 4], ["batch", 2, "seq", 4]


def _attention(training_dropout: float = 0.0) -> nx.DiGraph:
    """Grouped-query attention: keys and values of 2 heads repeated to 4, fused attention, its output back."""
    graph = nx.DiGraph()
    graph.add_node("x", **{g.KIND: g.INPUT, g.SHAPE: ROW, g.ORDER: -1})
    linear = {**WEIGHT, g.PARAM_NAMES: ["w"]}
    _saved_op(graph, "q", "aten.linear.default", QUERY, "x", **linear)
    for name in ("k", "v"):
        _saved_op(graph, name, "aten.linear.default", KEY, "x", **linear)
        _saved_op(graph, f"{name}.u", "aten.unsqueeze.default", ["batch", 2, 1, "seq", 4], name, **{g.ALIAS: True})
        _saved_op(graph, f"{name}.e", "aten.expand.default", ["batch", 2, 2, "seq", 4], f"{name}.u", **{g.ALIAS: True})
        _saved_op(graph, f"{name}.r", "aten.reshape.default", QUERY, f"{name}.e")
    literals = {saved.TRAINING_DROPOUT: training_dropout} if training_dropout else {}
    sdpa = "aten.scaled_dot_product_attention.default"
    _saved_op(graph, "att", sdpa, QUERY, "q", "k.r", "v.r", **{g.LITERALS: literals})
    _saved_op(graph, "tr", "aten.transpose.int", ["batch", "seq", 4, 4], "att", **{g.ALIAS: True})
    _saved_op(graph, "cont", "aten.contiguous.default", ["batch", "seq", 4, 4], "tr")
    _saved_op(graph, "out", "aten.linear.default", ROW, "cont", **linear)
    return graph


def test_fused_attention_keeps_its_operands_before_the_repeat_and_its_output() -> None:
    found = saved.saved_activation_bytes(_attention())
    head = 16 * b * s  # 4 heads × 4 elements per token
    assert found.by_node == {"att": 4 * head + 4 * (4 * b * s), "k": 2 * head, "q": 4 * head, "v": 2 * head}
    assert not found.unsupported


def test_attention_with_training_dropout_runs_the_math_kernel_and_its_output_is_copied() -> None:
    found = saved.saved_activation_bytes(_attention(0.1))
    elements = 16 * b * s
    scores = 4 * b * s * s
    assert found.by_node == {"att": 3 * 4 * elements + 3 * 4 * scores, "cont": 4 * elements}


def test_only_a_reshape_of_an_expanded_unsqueeze_is_a_repeat() -> None:
    repeat_copy = 4 * 16 * b * s  # the reshape's own storage: 4 heads
    variants: dict[str, Any] = {
        "the expand is something else": lambda graph: graph.nodes["k.e"].update({g.TARGET: "aten.clone.default"}),
        "the first is not an unsqueeze": lambda graph: graph.nodes["k.u"].update({g.TARGET: "aten.expand.default"}),
        "the reshape is a view": lambda graph: (
            graph.nodes["k.r"].update({g.ALIAS: True}),
            graph.edges["k.e", "k.r"].update({g.ALIAS: True}),
        ),
        "a copy of another op": lambda graph: graph.nodes["k.r"].update({g.TARGET: "aten.clone.default"}),
        "two sources": lambda graph: graph.add_edge("x", "k.e", **{g.ARGS: [1]}),
        "two sources of the reshape": lambda graph: graph.add_edge("x", "k.r", **{g.ARGS: [1]}),
    }
    for what, change in variants.items():
        graph = _attention()
        change(graph)
        found = saved.saved_activation_bytes(graph).by_node
        if what == "the reshape is a view":  # a view of the repeat is still k's storage
            assert found["k"] == 32 * b * s and "k.r" not in found, what
        else:
            assert found.get("k.r") == repeat_copy and "k" not in found, what


def test_a_copy_of_attentions_output_is_free_only_after_fused_attention() -> None:
    graph = _attention()
    graph.nodes["cont"][g.TARGET] = "aten.clone.default"  # not the contiguous the kernel makes free
    assert saved.saved_activation_bytes(graph).by_node["cont"] == 64 * b * s
    graph = _attention()
    graph.add_edge("q", "cont", **{g.ARGS: [1]})  # two sources: not attention's output alone
    assert saved.saved_activation_bytes(graph).by_node["cont"] == 64 * b * s
    graph = _attention()
    graph.nodes["tr"][g.ALIAS] = False  # a copy between: the contiguous reads it, not attention
    assert saved.saved_activation_bytes(graph).by_node["cont"] == 64 * b * s
    graph = _attention()
    graph.nodes["att"][g.TARGET] = "aten.matmul.default"  # not attention at all
    assert saved.saved_activation_bytes(graph).by_node["cont"] == 64 * b * s


def test_annotating_saved_bytes_marks_a_copy_only() -> None:
    graph = _attention()
    found = saved.saved_activation_bytes(graph)
    shown = saved.annotate_saved(graph)
    assert {n: d[g.SAVED_BYTES] for n, d in shown.nodes(data=True) if g.SAVED_BYTES in d} == {
        n: str(p) for n, p in found.by_node.items()
    }
    assert not any(g.SAVED_BYTES in d for _, d in graph.nodes(data=True))
    frozen = saved.annotate_saved(graph, frozenset({"w"}))
    assert not any(g.SAVED_BYTES in d for _, d in frozen.nodes(data=True))
    given = saved.Saved(Poly.const(1), [], {"q": Poly.const(1)})
    kept = saved.annotate_saved(graph, kept=given)
    assert {n: d[g.SAVED_BYTES] for n, d in kept.nodes(data=True) if g.SAVED_BYTES in d} == {"q": "1"}


def test_saved_bytes_take_each_ops_width_and_keep_what_later_ops_read() -> None:
    half = _layer()
    for _, data in half.nodes(data=True):
        if data.get(g.DTYPE) == "float32":
            data[g.DTYPE] = "bfloat16"
    row = 16 * b * s
    expected = {"act": row, "drop": row, "lin": row, "lin2": row, "lin3": row, "norm": 4 * b * s, "soft": row}
    assert saved.saved_activation_bytes(half).by_node == expected
    graph = _layer()
    # a training dropout writes a tensor of its own: an op reading it keeps that, not the norm's output
    _saved_op(graph, "lin5", "aten.linear.default", ROW, "drop", **WEIGHT, **{g.PARAM_NAMES: ["lin5.weight"]})
    # tied weights: an op trained only through a parameter it shares
    _saved_op(graph, "lin4", "aten.linear.default", ROW, "x", **WEIGHT, **{g.SHARED_PARAMS: ["tied.weight"]})
    _saved_op(graph, "act4", "aten.gelu.default", ROW, "lin4")
    # an op whose shape is unknown is not tracked: what reads it keeps nothing
    _saved_op(graph, "relu", "aten.relu.default", ROW, "unknown", inputs=[ROW])
    # a width the dtype table lacks is taken as float32's
    _saved_op(graph, "odd", "aten.mul.Tensor", ROW, "x", **{g.DTYPE: "uint4", "inputs": [ROW]})
    _saved_op(graph, "mul2", "aten.mul.Tensor", ROW, "odd", "act")
    # an op without recorded operands, and an edge that fills none of them
    _saved_op(graph, "zeros", "aten.gelu.default", ROW, **{g.PARAM_NAMES: ["z"]})
    del graph.nodes["zeros"][g.INPUTS]
    graph.add_edge("x", "zeros")
    found = saved.saved_activation_bytes(graph).by_node
    row = 32 * b * s
    assert found == {
        "act": row,
        "drop": 2 * row,  # its noise and its output
        "lin": row,
        "lin2": row,
        "lin3": row,
        "lin4": row,
        "norm": 8 * b * s,
        "odd": row,
        "soft": row,
    }


def test_the_cache_in_elements_times_an_item_size_is_its_bytes() -> None:
    for name in CONFIGS:
        graph = graph_of(name)
        elements = generation.kv_cache_elements(graph)
        assert elements and elements.dims() <= {"batch", "seq", "tgt"}
        for dtype, width in BYTES.items():
            assert generation.kv_cache_bytes(graph, dtype) == elements * width, (name, dtype)
