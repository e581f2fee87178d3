"""Helpers every stage shares, on graphs made by hand."""

from __future__ import annotations

import networkx as nx

from bertgraph.graph import schema as g
from tests.graph_fixtures import op


def test_total_params_counts_nodes_without_the_attribute_as_zero() -> None:
    graph = g.new_graph()
    graph.add_node("a", **{g.PARAMS: 5})
    graph.add_node("b")  # a node from another tool, with no parameter count
    graph.add_node("c", **{g.PARAMS: "7"})  # GraphML may hand back numbers as text
    assert g.total_params(graph) == 12


def _graph() -> nx.DiGraph:
    graph = g.new_graph(name="toy")
    graph.add_node("in", **g.io_attributes(g.INPUT, ["batch"], "int64", 0))
    graph.add_node("n7", **op("enc.q", "linear", 5, params=3))
    graph.add_node("n3", **op("enc", "add", 2))
    graph.add_node("n9", **op("enc", "add", 7))
    graph.add_node("n1", **op("enc", "add", 9))
    graph.add_node("out", **g.io_attributes(g.OUTPUT, ["batch"], "float32", 11))
    graph.add_edges_from([("in", "n3"), ("n3", "n7"), ("n7", "n9"), ("n9", "n1"), ("n1", "out")], args=[0])
    return graph


def test_canonical_names_say_where_an_op_ran_and_orders_are_renumbered() -> None:
    graph = _graph()
    result = g.canonicalize(graph)
    assert list(result) == ["in", "enc:add", "enc.q:linear", "enc:add_1", "enc:add_2", "out"]
    assert [result.nodes[n][g.ORDER] for n in result] == [0, 1, 2, 3, 4, 5]
    assert list(result.edges) == [
        ("in", "enc:add"),
        ("enc:add", "enc.q:linear"),
        ("enc.q:linear", "enc:add_1"),
        ("enc:add_1", "enc:add_2"),
        ("enc:add_2", "out"),
    ]
    assert result.edges["in", "enc:add"] == {"args": [0]}
    assert result.graph == {"name": "toy"}
    assert result.nodes["enc.q:linear"][g.PARAMS] == 3
    assert graph.nodes["n7"][g.ORDER] == 5  # the input is left as it was


def test_canonical_names_of_ops_without_module_or_op() -> None:
    graph = g.new_graph()
    graph.add_node("b", **{g.KIND: g.OPERATOR, g.ORDER: 1})
    graph.add_node("a", **{g.KIND: g.OPERATOR, g.ORDER: 2})
    assert list(g.canonicalize(graph)) == [":", ":_1"]


def test_ordered_copy_inserts_in_execution_order() -> None:
    result = g.ordered_copy(_graph())
    assert list(result) == ["in", "n3", "n7", "n9", "n1", "out"]
    assert next(iter(result.edges)) == ("in", "n3")
    assert result.graph == {"name": "toy"}


def test_dead_ops_are_pruned_unless_they_read_parameters() -> None:
    graph = _graph()
    graph.add_node("dead", **op("enc", "mul", 3))
    graph.add_node("deader", **op("enc", "relu", 4))
    graph.add_node("weights", **op("enc.k", "linear", 6, params=4))
    graph.add_node("feeds_weights", **op("enc", "slice", 1))
    graph.add_edges_from([("n3", "dead"), ("dead", "deader"), ("feeds_weights", "weights")])
    g.prune_dead(graph)
    assert sorted(graph) == sorted(["in", "n7", "n3", "n9", "n1", "out", "weights", "feeds_weights"])
    lonely = g.new_graph()
    lonely.add_node("x", **g.io_attributes(g.INPUT, [1], "int64", 0))
    lonely.add_node("y", **g.io_attributes(g.OUTPUT, [1], "int64", 1))
    lonely.add_node("z", **op("", "add", 2))
    g.prune_dead(lonely)
    assert sorted(lonely) == ["x", "y"]


def test_attention_labels() -> None:
    assert g.attention_label({g.ATTENTION: g.SLIDING_WINDOW, g.WINDOW: 64}) == "sliding-window(64)"
    assert g.attention_label({g.ATTENTION: g.CAUSAL_SLIDING_WINDOW, g.WINDOW: 8}) == "causal-sliding-window(8)"
    assert g.attention_label({g.ATTENTION: g.CAUSAL, g.WINDOW: 8}) == "causal"
    assert g.attention_label({g.ATTENTION: g.SLIDING_WINDOW}) == "sliding-window"
    assert g.attention_label({g.ATTENTION: g.SLIDING_WINDOW, g.WINDOW: "64"}) == "sliding-window"
    assert g.attention_label({g.ATTENTION: 3}) == ""
    assert g.attention_label({}) == ""


def test_io_attributes() -> None:
    assert g.io_attributes(g.INPUT, ["batch"], "int64", 3) == {
        "kind": "input",
        "shape": ["batch"],
        "dtype": "int64",
        "module": "",
        "module_type": "",
        "params": 0,
        "order": 3,
    }


def test_ordered_copy_orders_each_nodes_successors() -> None:
    graph = _graph()
    graph.add_edge("in", "n9")  # inserted after in → n3, read later in execution order
    graph.add_edge("n3", "n1")
    result = g.ordered_copy(graph)
    assert list(result.successors("in")) == ["n3", "n9"]
    assert list(result.successors("n3")) == ["n7", "n1"]
    shuffled = nx.DiGraph()
    shuffled.add_nodes_from(graph.nodes(data=True))
    shuffled.add_edges_from([("n3", "n1"), ("in", "n9"), *graph.edges])
    assert list(g.ordered_copy(shuffled).successors("n3")) == ["n7", "n1"]


def test_sum_costs_counts_weight_bytes_of_members_that_have_them_and_merges_unsupported_ops() -> None:
    members = [
        {g.PARAM_BYTES: 8, g.COST_UNSUPPORTED: ["b.op", "a.op"]},
        {g.MATMUL_FLOPS: "2*batch"},
        {g.PARAM_BYTES: 4, g.COST_UNSUPPORTED: ["a.op"]},
    ]
    result = g.sum_costs(members)
    assert result[g.PARAM_BYTES] == 12
    assert result[g.COST_UNSUPPORTED] == ["a.op", "b.op"]
    assert result[g.MATMUL_FLOPS] == "2*batch"
    assert g.COST_UNSUPPORTED not in g.sum_costs([{g.PARAM_BYTES: 4}])


def test_ops_in_order_breaks_ties_by_id() -> None:
    graph = nx.DiGraph()
    for node in ("c", "a", "b"):
        graph.add_node(node, **op("m", "relu", 0))
    graph.add_node("first", **op("m", "relu", -1))
    assert g.ops_in_order(graph) == ["first", "a", "b", "c"]
