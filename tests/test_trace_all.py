"""Every preset with every head traces on the meta device, and every count adds up."""

from __future__ import annotations

import pytest

from bertgraph.graph import schema as g
from bertgraph.graph import stats, views
from bertgraph.model import HEADS, build_model, resolve
from bertgraph.model.presets import PRESETS
from bertgraph.tracing import trace


@pytest.mark.slow
@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("head", list(HEADS))
def test_preset_and_head_trace_with_exact_totals(preset: str, head: str) -> None:
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
    repeats = [d.get(g.REPEAT) for _, d in folded.nodes(data=True) if d.get(g.MODULE_TYPE) == "BertLayer"]
    assert repeats == [layers]
    inputs = [n for n, d in graph.nodes(data=True) if d[g.KIND] == g.INPUT]
    assert inputs == ["input_ids", "attention_mask", "token_type_ids"]
    dims = ["batch", "choices", "seq"] if head == "multiple-choice" else ["batch", "seq"]
    assert all(graph.nodes[n][g.SHAPE] == dims for n in inputs)
