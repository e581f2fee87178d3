"""Every preset with every head traces on the meta device, and every count adds up."""

from __future__ import annotations

import re

import pytest

from bertgraph.graph import schema as g
from bertgraph.graph import stats, views
from bertgraph.model import HEADS, build_model, resolve
from bertgraph.model.presets import PRESETS
from bertgraph.tracing import trace
from tests.matrix import each_once

BERT_PRESETS = sorted(name for name, config in PRESETS.items() if config["model_type"] == "bert")


@pytest.mark.slow
@pytest.mark.parametrize(("preset", "head"), each_once(BERT_PRESETS, list(HEADS)))
def test_preset_and_head_trace_with_exact_totals(preset: str, head: str) -> None:
    """Every BERT preset and every head (each preset once, each head at least once; every pair
    with ``BERTGRAPH_FULL_MATRIX=1``): the presets differ only in sizes, the heads in classes."""
    spec = resolve(preset, head)
    module = build_model(spec)
    expected = sum(p.numel() for p in module.parameters())
    graph = trace(spec)

    assert graph.graph[g.G_MODEL_CLASS] == HEADS[head]
    assert g.total_params(graph) == expected
    assert stats.parameter_stats(graph)["total"] == expected
    assert sum(stats.parameter_stats(graph)["groups"].values()) == expected
    assert "unread_parameters" not in graph.graph
    layers = PRESETS[preset]["num_hidden_layers"]
    for level in range(5):
        shown = views.view(graph, level)
        assert g.total_params(shown) == expected, f"level {level}"
    folded = views.view(graph, 2)
    roles = {path: info.get(g.M_ROLE) for path, info in graph.graph[g.G_MODULES].items()}
    layer_nodes = [d for _, d in folded.nodes(data=True) if roles.get(re.sub(r"\.0-\d+", ".0", d[g.MODULE])) == "layer"]
    repeats = [d.get(g.REPEAT) for d in layer_nodes]
    assert repeats == [layers]
    inputs = [n for n, d in graph.nodes(data=True) if d[g.KIND] == g.INPUT]
    assert inputs == ["input_ids", "attention_mask", "token_type_ids"]
    dims = ["batch", "choices", "seq"] if head == "multiple-choice" else ["batch", "seq"]
    assert all(graph.nodes[n][g.SHAPE] == dims for n in inputs)
