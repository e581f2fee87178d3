"""One decode step's matmul FLOPs equal FlopCounterMode on a real cached step (eager attention, CPU)."""

from __future__ import annotations

import pytest

from bertgraph.graph import cost, costbase, generation
from tests.generation_runs import CONFIGS, PROMPTS, graph_of, prompt, real_model, sizes_of


def counted_step(model: object, cache: object, step: dict[str, object]) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(**step, past_key_values=cache, use_cache=True)  # type: ignore[operator]
    return int(counter.get_total_flops())


@pytest.mark.parametrize("name", list(CONFIGS))
def test_decode_step_equals_a_real_cached_step(name: str) -> None:
    formula = generation.decode_step_flops(graph_of(name))
    model = real_model(name, "eager")
    for batch, seq in PROMPTS:
        cache, step = prompt(name, model, batch, seq)
        assert costbase.evaluate(formula, sizes_of(name, batch, seq)) == counted_step(model, cache, step), (batch, seq)


@pytest.mark.parametrize(("name", "seq"), [("qwen2-sliding", 12), ("t5", 12), ("gemma2", 4)])
def test_generating_tokens_is_prefill_then_steps(name: str, seq: int) -> None:
    """--generate N: the prefill's count, then N real steps, each with one more token cached (Qwen2's
    window of 16 and Gemma-2's of 8 filling up on the way)."""
    graph = graph_of(name)
    batch, tokens = 1, 6
    sizes = sizes_of(name, batch, seq)
    prefill = cost.model_totals(graph)["matmul_flops"]
    planned = generation.generate(graph, sizes, tokens, prefill)
    model = real_model(name, "eager")
    cache, step = prompt(name, model, batch, seq)
    counted = 0
    for _ in range(tokens):
        counted += counted_step(model, cache, step)
    assert planned["decode_flops"] == counted
    assert planned["total_flops"] == counted + costbase.evaluate(prefill, sizes)
    from tests.generation_runs import cache_tensors

    assert planned["kv_cache_bytes"] == sum(tensor.nbytes for tensor in cache_tensors(cache))
