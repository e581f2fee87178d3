"""Helpers every stage shares, on graphs made by hand."""

from __future__ import annotations

from bertgraph.graph import schema as g


def test_total_params_counts_nodes_without_the_attribute_as_zero() -> None:
    graph = g.new_graph()
    graph.add_node("a", **{g.PARAMS: 5})
    graph.add_node("b")  # a node from another tool, with no parameter count
    graph.add_node("c", **{g.PARAMS: "7"})  # GraphML may hand back numbers as text
    assert g.total_params(graph) == 12
