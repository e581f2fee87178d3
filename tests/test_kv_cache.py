"""The KV cache equals what transformers' own cache holds after a prompt, byte for byte."""

from __future__ import annotations

import pytest

from bertgraph.graph import costbase, generation
from bertgraph.graph import schema as g
from tests.generation_runs import CONFIGS, PROMPTS, WINDOW, cache_tensors, graph_of, prompt, real_model, sizes_of


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_cache_bytes_equal_transformers_cache_tensors(name: str, dtype: str) -> None:
    import torch

    graph = graph_of(name)
    formula = generation.kv_cache_bytes(graph, dtype)
    model = real_model(name, "sdpa", getattr(torch, dtype))
    for batch, seq in PROMPTS:
        cache, _ = prompt(name, model, batch, seq)
        tensors = cache_tensors(cache)
        assert {str(tensor.dtype) for tensor in tensors} == {f"torch.{dtype}"}
        assert costbase.evaluate(formula, sizes_of(name, batch, seq)) == sum(t.nbytes for t in tensors), (batch, seq)


def test_grouped_query_heads_and_windows_shape_the_cache() -> None:
    layers = generation.cache_layers(graph_of("qwen2-sliding"))
    assert [layer.window for layer in layers] == [None, None, WINDOW, WINDOW]
    assert [str(layer.tokens) for layer in layers] == ["seq"] * 2 + [f"min(seq, {WINDOW - 1})"] * 2
    kv_heads = CONFIGS["qwen2-sliding"]["num_key_value_heads"]
    head_size = CONFIGS["qwen2-sliding"]["hidden_size"] // CONFIGS["qwen2-sliding"]["num_attention_heads"]
    assert {str(layer.per_token) for layer in layers} == {f"{kv_heads * 2 * head_size}*batch"}


def test_an_encoder_decoder_caches_its_decoder_and_the_encoder_output() -> None:
    kinds = [(layer.kind, str(layer.tokens)) for layer in generation.cache_layers(graph_of("t5"))]
    assert kinds == [(g.CAUSAL, "tgt"), (g.CROSS, "seq")] * CONFIGS["t5"]["num_layers"]


def test_an_encoder_caches_nothing(traced) -> None:  # type: ignore[no-untyped-def]
    graph = traced("bert-tiny").graph
    assert not generation.is_generative(graph)
    assert generation.kv_cache_bytes(graph) == 0


@pytest.mark.parametrize("name", list(CONFIGS))
def test_an_eager_trace_gives_the_same_cache_and_decode_step(name: str) -> None:
    """Eager attention (matmul, softmax, matmul; repeat_kv's copies before the products) caches what
    transformers' cache holds, and its decode step and attention kinds are the fused trace's."""
    eager, fused = graph_of(name, "eager"), graph_of(name)
    assert not any(d.get(g.TARGET) in generation.SDPA_TARGETS for _, d in eager.nodes(data=True))
    formula = generation.kv_cache_bytes(eager)
    model = real_model(name, "eager")
    for batch, seq in PROMPTS:
        cache, _ = prompt(name, model, batch, seq)
        expected = sum(t.nbytes for t in cache_tensors(cache))
        assert costbase.evaluate(formula, sizes_of(name, batch, seq)) == expected, (batch, seq)
    assert generation.decode_step_flops(eager) == generation.decode_step_flops(fused)
    assert eager.graph[g.G_ATTENTION] == fused.graph[g.G_ATTENTION]

    def heads(graph: object) -> list[tuple[object, object]]:
        return sorted({(d.get(g.Q_HEADS), d.get(g.KV_HEADS)) for _, d in graph.nodes(data=True) if d.get(g.ATTENTION)})  # type: ignore[attr-defined]

    assert heads(eager) == heads(fused)  # key/value heads before repeat_kv, in eager attention too
