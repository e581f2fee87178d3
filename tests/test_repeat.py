"""Layers grown from a two-layer trace equal a full trace, byte for byte."""

from __future__ import annotations

import pytest

from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.model import HEADS, resolve
from bertgraph.tracing import trace
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
