"""Layers grown from a few traced layers equal a full trace, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.model import HEADS, ModelSpec, build_model, resolve
from bertgraph.model.families.generic import small_config
from bertgraph.tracing import trace
from bertgraph.tracing.export import shrunk_config, stack_plans
from bertgraph.tracing.grow import GrowError, check_parameters, grow_stacks


@pytest.mark.parametrize("head", list(HEADS))
def test_grown_graph_equals_full_trace(head: str) -> None:
    spec = resolve("bert-tiny", head, overrides={"layers": 5})
    grown, full = trace(spec, grow=True), trace(spec, grow=False)
    assert "".join(graph_io.generate_json(grown)) == "".join(graph_io.generate_json(full))
    assert g.total_params(grown) == g.total_params(full)


def test_grown_graph_of_a_real_preset_equals_full_trace() -> None:
    spec = resolve("bert-medium", "masked-lm")
    assert "".join(graph_io.generate_json(trace(spec))) == "".join(graph_io.generate_json(trace(spec, grow=False)))


def test_parameter_check_catches_a_wrong_count() -> None:
    spec = resolve("bert-tiny", "sequence-classification")
    graph = trace(spec)
    numel = {row["name"]: row["numel"] for row in graph.graph[g.G_PARAMETERS]}
    check_parameters(graph, numel)
    with pytest.raises(GrowError, match="does not read every parameter"):
        check_parameters(graph, {**numel, "bert.encoder.layer.9.output.dense.weight": 10})
    node = next(n for n, d in graph.nodes(data=True) if d.get(g.PARAMS))
    graph.nodes[node][g.PARAMS] += 1
    with pytest.raises(GrowError, match="its names say otherwise"):
        check_parameters(graph, numel)


def test_nothing_to_grow_leaves_the_graph_as_traced() -> None:
    graph = trace(resolve("bert-tiny"))
    assert "".join(graph_io.generate_json(grow_stacks(graph, []))) == "".join(graph_io.generate_json(graph))


def _hybrid_spec(tmp_path: Path, layers: int) -> ModelSpec:
    """A hybrid stack without a record: linear attention with a full layer every second, the first
    layer's feed-forward dense and every later one experts (neither period named by a field)."""
    config = small_config("bailing_hybrid", layer_group_size=2, first_k_dense_replace=1, num_hidden_layers=layers)
    config.update(layer_types=None, mlp_layer_types=None)  # derived again for this depth by the config class
    (tmp_path / "config.json").write_text(json.dumps(config, default=str))
    return resolve(str(tmp_path))


@pytest.mark.slow
def test_a_hybrid_stack_is_grown_from_its_pattern_and_equals_a_full_trace(tmp_path: Path) -> None:
    spec = _hybrid_spec(tmp_path, 6)  # the fewest layers that leave some to grow (each traced one costs seconds)
    [(_, plan)] = stack_plans(spec, build_model(spec))
    assert (plan.special, plan.period, plan.traced) == (1, 2, 4)
    grown, full = trace(spec, grow=True), trace(spec, grow=False)
    assert "".join(graph_io.generate_json(grown)) == "".join(graph_io.generate_json(full))


def test_a_deep_hybrid_default_config_traces_a_few_layers(tmp_path: Path) -> None:
    """The type's own default (42 layers, 512 experts): 12 layers traced, not all 42, which took
    no answer in minutes."""
    config = small_config("bailing_hybrid", "default")
    assert config["num_hidden_layers"] == 42
    (tmp_path / "config.json").write_text(json.dumps(config, default=str))
    spec = resolve(str(tmp_path))
    [(_, plan)] = stack_plans(spec, build_model(spec))
    assert (plan.layers, plan.special, plan.period, plan.traced) == (42, 2, 6, 12)
    small = shrunk_config(spec, [(spec.family.stacks[0], plan)])
    assert small["mlp_layer_types"] == ["dense"] * 2 + ["sparse"] * 10
    assert small["layer_types"] == (["linear_attention"] * 5 + ["full_attention"]) * 2
