"""What tracing records for cost: each op's argument shapes in order, and which ops allocate nothing."""

from __future__ import annotations

from collections.abc import Callable

from bertgraph.api import Architecture
from bertgraph.graph import schema as g

LAYER = "encoder.layer.0"


def test_ops_record_argument_shapes_in_argument_order(traced: Callable[..., Architecture]) -> None:
    graph = traced("bert-tiny").graph
    query = graph.nodes[f"{LAYER}.attention.self.query:linear"]
    assert query[g.INPUTS] == [["batch", "seq", 128], [128, 128], [128]]  # input, weight, bias
    intermediate = graph.nodes[f"{LAYER}.intermediate.dense:linear"]
    assert intermediate[g.INPUTS] == [["batch", "seq", 128], [512, 128], [512]]
    attention = graph.nodes[f"{LAYER}.attention.self:scaled_dot_product_attention"]
    assert attention[g.INPUTS] == [
        ["batch", 2, "seq", 64],
        ["batch", 2, "seq", 64],
        ["batch", 2, "seq", 64],
        ["batch", 1, "seq", "seq"],
    ]


def test_views_and_eval_dropout_alias_their_input(traced: Callable[..., Architecture]) -> None:
    graph = traced("bert-tiny").graph
    view = f"{LAYER}.attention.self:view"
    dropout = f"{LAYER}.output.dropout:dropout"
    assert graph.nodes[view].get(g.ALIAS) is True
    assert graph.nodes[dropout].get(g.ALIAS) is True
    assert graph.edges[f"{LAYER}.attention.self.query:linear", view].get(g.ALIAS) is True
    assert graph.edges[f"{LAYER}.output.dense:linear", dropout].get(g.ALIAS) is True
    # A copy and a computation allocate their own output.
    assert g.ALIAS not in graph.nodes[f"{LAYER}.attention.self:contiguous"]
    assert g.ALIAS not in graph.nodes[f"{LAYER}.intermediate.dense:linear"]
    residual = f"{LAYER}.output:add"
    assert all(g.ALIAS not in graph.edges[source, residual] for source in graph.predecessors(residual))


def test_parameters_record_their_dtype(traced: Callable[..., Architecture]) -> None:
    rows = traced("bert-tiny").graph.graph[g.G_PARAMETERS]
    assert {row["dtype"] for row in rows} == {"float32"}
