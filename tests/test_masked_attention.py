"""Mask-aware attention FLOPs: the dense count per pair times the pairs a real forward pass lets through."""

from __future__ import annotations

from typing import Any

import pytest

from bertgraph.graph import cost, costbase, masked
from bertgraph.graph import schema as g
from tests.generation_runs import CONFIGS, ENCODER_DECODERS, ENCODERS, graph_of, real_model


def allowed_pairs(name: str, seq: int) -> list[int]:
    """Per attention block in execution order, the (query, key) pairs an eager forward gives weight (head 0)."""
    import torch

    model = real_model(name, "eager")
    vocab = {**CONFIGS, **ENCODERS}[name]["vocab_size"]
    ids = torch.randint(1, vocab, (1, seq), generator=torch.Generator().manual_seed(seq))
    with torch.no_grad():
        if name in ENCODER_DECODERS:
            out = model(input_ids=ids, decoder_input_ids=ids, output_attentions=True)
            decoder = [t for pair in zip(out.decoder_attentions, out.cross_attentions) for t in pair]
            attentions: Any = list(out.encoder_attentions) + decoder
        else:
            attentions = model(input_ids=ids, output_attentions=True).attentions
    return [int((layer[0, 0] > 0).sum()) for layer in attentions]


def per_pair_costs(name: str, sizes: dict[str, int]) -> list[int]:
    graph = graph_of(name)
    found = []
    for node in g.ops_in_order(graph):
        data = graph.nodes[node]
        if data.get(g.ATTENTION):
            poly = costbase.node_poly(data, g.MATMUL_FLOPS)
            found.append(costbase.evaluate(masked.divide(poly, masked.product_pairs(poly)), sizes))
    return found


@pytest.mark.parametrize("name", ["gpt2", "qwen2-sliding", "t5", "modernbert"])
@pytest.mark.parametrize("seq", [5, 40])
def test_masked_flops_count_exactly_the_allowed_pairs(name: str, seq: int) -> None:
    sizes = {"batch": 1, "seq": seq, **({"tgt": seq} if name in ENCODER_DECODERS else {})}
    pairs = allowed_pairs(name, seq)
    per_pair = per_pair_costs(name, sizes)
    assert len(pairs) == len(per_pair)
    graph = graph_of(name)
    expected = sum(p * c for p, c in zip(pairs, per_pair))
    assert costbase.evaluate(masked.masked_attention_flops(graph), sizes) == expected
    dense = costbase.evaluate(cost.model_totals(graph)[cost.ATTENTION_FLOPS], sizes)
    assert dense == sum(c * seq * seq for c in per_pair)
    assert expected < dense if seq > 20 else expected <= dense  # every model here masks something at 40
