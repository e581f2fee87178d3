"""Tensor liveness, the activation peak and training arithmetic, in-process.

The liveness rules are checked on hand-built graphs small enough to follow by hand (each
expected number is worked out in a comment); the attention op's transient storage and the
parameter arithmetic on the committed bert-tiny graph (3 layers, 4,584,450 parameters).
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import pytest

from bertgraph.graph import memory
from bertgraph.graph import schema as g
from bertgraph.graph.poly import Poly
from tests.graph_fixtures import bert_tiny, chain, op

PARAMETERS = 4_584_450
SDPA = "bert.encoder.layer.0.attention.self:scaled_dot_product_attention"


def small(b_dtype: str = "float32") -> nx.DiGraph:
    """``x → a → v (a view of a) → b → c → y``, and ``v → c``: a lives until c through its view.

    Positions (inputs and outputs count): x 0, a 1, v 2, b 3, c 4, y 5.
    """
    graph = nx.DiGraph()
    graph.add_node("x", **g.io_attributes(g.INPUT, ["batch", 4], "float32", 0))
    graph.add_node("a", **op("m", "linear", 1, shape=["batch", 8]))
    graph.add_node("v", **op("m", "view", 2, shape=["batch", 8], alias=True))
    graph.add_node("b", **op("m", "mul", 3, shape=["batch", 2], dtype=b_dtype))
    graph.add_node("c", **op("m", "add", 4, shape=["batch", 4], dtype="float16"))
    graph.add_node("y", **g.io_attributes(g.OUTPUT, ["batch", 4], "float16", 5))
    graph.add_edge("x", "a")
    graph.add_edge("a", "v", **{g.ALIAS: True})
    graph.add_edges_from([("v", "b"), ("b", "c"), ("v", "c"), ("x", "c"), ("c", "y")])
    return graph


def test_allocations_and_their_live_spans() -> None:
    found, unknown = memory.allocations(small())
    assert unknown == []
    assert found == [
        memory.Allocation("a", Poly.parse("8*batch"), "float32", 1, 4),  # read through its view by c
        memory.Allocation("b", Poly.parse("2*batch"), "float32", 3, 4),
        memory.Allocation("c", Poly.parse("4*batch"), "float16", 4, 6),  # a model output: to the end
    ]


def test_the_peak_is_right_after_the_op_that_reaches_it() -> None:
    # batch 3: a 24 × 4 = 96 bytes from position 1, b 6 × 4 = 24 from 3, c 12 × 2 = 24 from 4:
    # 96 after a, 120 after b, 144 after c (a and b are freed only after c has run).
    assert memory.peak_activation(small(), {"batch": 3}) == memory.Peak(144, "c", [])
    # at float32 c takes 48; at bfloat16 every tensor takes 2 bytes an element: 48 + 12 + 24
    assert memory.peak_activation(small(), {"batch": 3}, "float32").bytes == 168
    assert memory.peak_activation(small(), {"batch": 3}, "bfloat16").bytes == 84
    # an int64 tensor keeps its 8 bytes whatever float width is asked for: 48 + 48 + 24
    assert memory.peak_activation(small("int64"), {"batch": 3}, "bfloat16").bytes == 120
    assert memory.peak_activation(small("int64"), {"batch": 3}).bytes == 96 + 48 + 24


def test_storage_is_freed_after_its_last_reader() -> None:
    # Without v → c, a is freed after b: 96 + 24 after b, then 24 (b) + 24 (c) after c.
    graph = small()
    graph.remove_edge("v", "c")
    assert memory.allocations(graph)[0][0].end == 3
    assert memory.peak_activation(graph, {"batch": 3}) == memory.Peak(120, "b", [])
    # A tensor nothing reads lives only while its op runs.
    graph.add_node("z", **op("m", "exp", 6, shape=["batch", 100]))
    found = {a.node: a for a in memory.allocations(graph)[0]}
    assert (found["z"].start, found["z"].end) == (6, 6)
    assert memory.peak_activation(graph, {"batch": 3}) == memory.Peak(24 + 1200, "z", [])


def test_views_of_inputs_and_of_unknown_sizes_allocate_nothing() -> None:
    graph = small()
    graph.add_node("w", **op("m", "view", 1, shape=["batch", 4], alias=True))  # a view of the input
    graph.add_edge("x", "w", **{g.ALIAS: True})
    graph.add_edge("w", "c")
    graph.nodes["b"][g.SHAPE] = ["?", 2]
    graph.add_node("u", **op("m", "view", 3, shape=["?"], alias=True))  # a view of b, whose size is unknown
    graph.add_edge("b", "u", **{g.ALIAS: True})
    graph.add_edge("u", "y")
    graph.add_node("k", **op("m", "view", 2, shape=["batch", 8], alias=True))  # a view with no aliased edge
    graph.add_edge("a", "k")
    graph.add_edge("k", "y")
    found, unknown = memory.allocations(graph)
    assert unknown == ["b"]
    # positions now: x 0, a 1, w 2, k 3, v 4, b 5, u 6, c 7, y 8; k's output does not keep a alive
    assert [(a.node, a.start, a.end) for a in found] == [("a", 1, 7), ("c", 7, 9)]
    assert memory.peak_activation(graph, {"batch": 3}) == memory.Peak(96 + 24, "c", ["b"])


def test_allocations_are_listed_by_position_and_every_one_freed() -> None:
    # z runs first and a second: listed by position, not by name. A scalar without a recorded shape is 1 element.
    graph = nx.DiGraph()
    graph.add_node("z", **op("m", "exp", 1, shape=["batch", 2]))
    graph.add_node("a", **op("m", "exp", 2, shape=["batch", 2]))
    graph.add_node("s", **op("m", "sum", 3))
    del graph.nodes["s"][g.SHAPE]
    graph.add_edges_from([("z", "a"), ("a", "s"), ("z", "s")])
    found, _ = memory.allocations(graph)
    assert [(a.node, a.numel) for a in found] == [("z", Poly.parse("2*batch")), ("a", Poly.parse("2*batch")), ("s", 1)]
    # Two storages freed after the same op (a and b after c) are both freed: z then peaks at 24 + 1,200.
    graph = small()
    graph.add_node("z", **op("m", "exp", 6, shape=["batch", 100]))
    graph.add_edge("c", "z")
    assert memory.peak_activation(graph, {"batch": 3}) == memory.Peak(24 + 1200, "z", [])


def test_nothing_allocated_has_no_peak() -> None:
    graph = nx.DiGraph()
    graph.add_node("x", **g.io_attributes(g.INPUT, ["batch"], "float32", 0))
    assert memory.peak_activation(graph, {"batch": 2}) == memory.Peak(0, "", [])


def test_fused_attention_holds_a_float_mask_and_a_row_statistic_while_it_runs() -> None:
    graph = bert_tiny()
    mask, rows = memory.transient(graph, SDPA)
    assert mask == Poly.parse("batch*seq**2")  # the boolean [batch, 1, seq, seq] mask, as float32
    assert rows == Poly.parse("2*batch*seq")  # log-sum-exp per query row of each of 2 heads
    assert memory.transient(graph, "bert.encoder.layer.0.attention.self.query:linear") == (Poly(), Poly())
    graph.nodes[SDPA][g.INPUTS] = []
    assert memory.transient(graph, SDPA) == (Poly(), Poly())
    graph = bert_tiny()
    graph.nodes[SDPA][g.INPUTS][0] = ["?"]
    assert memory.transient(graph, SDPA) == (Poly(), Poly())
    graph = bert_tiny()
    for source in graph.predecessors(SDPA):
        if graph.edges[source, SDPA].get(g.DTYPE) == "bool":
            graph.edges[source, SDPA][g.SHAPE] = ["?"]
    assert memory.transient(graph, SDPA) == (Poly(), Poly.parse("2*batch*seq"))
    graph = bert_tiny()
    del graph.nodes[SDPA][g.INPUTS]
    assert memory.transient(graph, SDPA) == (Poly(), Poly())


def test_the_attention_transient_counts_at_the_attention_op() -> None:
    # x → sdpa (query [batch, 2, 3, 4], a boolean [batch, 1, 3, 3] mask) → y: at batch 1 it writes
    # 24 float32 elements (96 bytes) and holds 9 mask elements as float32 (36) and 6 row sums (24).
    graph = nx.DiGraph()
    graph.add_node("x", **g.io_attributes(g.INPUT, ["batch", 2, 3, 4], "float32", 0))
    graph.add_node("m", **g.io_attributes(g.INPUT, ["batch", 1, 3, 3], "bool", 1))
    attrs: dict[str, Any] = {g.INPUTS: [["batch", 2, 3, 4]] * 3 + [["batch", 1, 3, 3]]}
    graph.add_node("s", **op("m", "scaled_dot_product_attention", 2, shape=["batch", 2, 3, 4], **attrs))
    graph.nodes["s"][g.TARGET] = memory.ATTENTION_TARGETS[0]
    graph.add_node("y", **g.io_attributes(g.OUTPUT, ["batch", 2, 3, 4], "float32", 3))
    graph.add_edge("x", "s", **{g.SHAPE: ["batch", 2, 3, 4], g.DTYPE: "float32"})
    graph.add_edge("m", "s", **{g.SHAPE: ["batch", 1, 3, 3], g.DTYPE: "bool"})
    graph.add_edge("s", "y")
    assert memory.peak_activation(graph, {"batch": 1}) == memory.Peak(96 + 36 + 24, "s", [])
    # an earlier op of 120 bytes read by nothing: the attention op, holding 96 + 60 while it runs, is higher
    graph.add_node("p", **op("m", "exp", 1, shape=["batch", 30]))
    assert memory.peak_activation(graph, {"batch": 1}) == memory.Peak(96 + 36 + 24, "s", [])
    # at float16 the output and the float mask halve; the row statistic stays float32
    assert memory.peak_activation(graph, {"batch": 1}, "float16").bytes == 48 + 18 + 24
    assert memory.input_bytes(graph, {"batch": 2}) == 2 * 24 * 4 + 2 * 9
    del graph.edges["m", "s"][g.SHAPE]  # a boolean mask of no recorded shape: a scalar
    assert memory.transient(graph, "s") == (Poly.const(1), Poly.parse("6*batch"))


def test_inputs_and_parameters_of_bert_tiny() -> None:
    graph = bert_tiny()
    assert memory.input_bytes(graph, {"batch": 2, "seq": 5}) == 3 * 8 * 10  # three int64 [batch, seq] inputs
    graph.nodes["input_ids"][g.SHAPE] = ["?", "seq"]  # left out, and the inputs after it still counted
    graph.nodes["attention_mask"][g.DTYPE] = "nonsense"
    assert memory.input_bytes(graph, {"batch": 2, "seq": 5}) == 8 * 10
    del graph.nodes["attention_mask"][g.SHAPE]
    graph.nodes["attention_mask"][g.DTYPE] = "int32"
    assert memory.input_bytes(graph, {"batch": 2, "seq": 5}) == 8 * 10 + 4  # a scalar input
    graph = bert_tiny()
    assert memory.traced_float_dtype(graph) == "float32"
    assert memory.parameter_bytes(graph) == 4 * PARAMETERS
    assert memory.parameter_bytes(graph, "float16") == 2 * PARAMETERS
    rows = g.parameter_rows(graph)
    rows[0]["dtype"] = "int8"  # not a float: no width asked for changes it
    words = int(rows[0]["numel"])
    assert memory.parameter_bytes(graph, "bfloat16") == 2 * (PARAMETERS - words) + words
    assert memory.parameter_bytes(graph) == 4 * (PARAMETERS - words) + words
    for row in rows[:40]:
        row["dtype"] = "bfloat16"
    assert memory.traced_float_dtype(graph) == "bfloat16"  # the dtype most parameters have
    for row in rows:
        del row["dtype"]  # none recorded: float32
    assert memory.parameter_bytes(graph) == 4 * PARAMETERS
    assert memory.parameter_bytes(graph, "float16") == 2 * PARAMETERS
    assert memory.traced_float_dtype(graph) == "float32"
    assert memory.traced_float_dtype(nx.DiGraph()) == "float32"
    assert memory._bytes_per_element("nonsense", None) == 0
    assert memory._bytes_per_element("nonsense", "float16") == 0
    assert memory._bytes_per_element("float16", None) == 2


def test_training_memory_of_bert_tiny() -> None:
    graph = bert_tiny()
    full = memory.training_memory(graph)
    assert full["dtype"] == "float32"
    assert full["trainable_parameters"] == PARAMETERS and full["frozen_parameters"] == 0
    assert full["rows"] == [
        {"what": f"{what} (float32)", "dtype": "float32", "bytes_per_parameter": 4, "bytes": 4 * PARAMETERS}
        for what in ("weights", "gradients", "Adam first moment", "Adam second moment")
    ]
    assert full["total"] == 16 * PARAMETERS and full["bytes_per_parameter"] == 16
    half = memory.training_memory(graph, "bfloat16")
    assert [row["bytes_per_parameter"] for row in half["rows"]] == [2, 2, 4, 4, 4]
    assert half["rows"][2]["what"] == "master weights (float32)" and half["rows"][0]["dtype"] == "bfloat16"
    assert half["total"] == 16 * PARAMETERS
    # Frozen: the classifier's 258 parameters keep their weights only.
    frozen = memory.training_memory(graph, "float16", ["classifier.weight", "classifier.bias"])
    assert (frozen["trainable_parameters"], frozen["frozen_parameters"]) == (PARAMETERS - 258, 258)
    assert [row["bytes"] for row in frozen["rows"]] == [
        2 * PARAMETERS,
        2 * (PARAMETERS - 258),
        4 * (PARAMETERS - 258),
        4 * (PARAMETERS - 258),
        4 * (PARAMETERS - 258),
    ]
    for row in g.parameter_rows(graph):
        if row["name"] == "classifier.bias":
            row["trainable"] = False
    marked = memory.training_memory(graph, "float32", ["classifier.weight"])
    assert marked["frozen_parameters"] == 258
    assert memory.training_memory(graph)["frozen_parameters"] == 2
    with pytest.raises(ValueError, match=r"^training memory is known for float32, float16, bfloat16, not int8$"):
        memory.training_memory(graph, "int8")
    with pytest.raises(ValueError, match=r"^no parameter named 'a\.b' to freeze; names are as in model\."):
        memory.training_memory(graph, "float32", ["classifier.bias", "z", "a.b"])


def test_freeze_patterns_and_frozen_names() -> None:
    graph = bert_tiny()
    assert memory.freeze_patterns(graph, ["classifier.bias"]) == ["classifier.bias"]
    assert memory.freeze_patterns(graph, ["classifier"]) == ["classifier.weight", "classifier.bias"]
    layer = memory.freeze_patterns(graph, ["bert.encoder.layer.[02].*.LayerNorm.bias", "classifier.bias"])
    assert layer == [
        "bert.encoder.layer.0.attention.output.LayerNorm.bias",
        "bert.encoder.layer.0.output.LayerNorm.bias",
        "bert.encoder.layer.2.attention.output.LayerNorm.bias",
        "bert.encoder.layer.2.output.LayerNorm.bias",
        "classifier.bias",
    ]
    assert memory.freeze_patterns(graph, ["classifier.bias", "classifier"]) == ["classifier.bias", "classifier.weight"]
    assert memory.freeze_patterns(graph, ["bert.pooler.dense"]) == [
        "bert.pooler.dense.weight",
        "bert.pooler.dense.bias",
    ]
    with pytest.raises(ValueError) as raised:
        memory.freeze_patterns(graph, ["classifier", "classif"])
    assert str(raised.value) == (
        "--freeze 'classif' matches no parameter; give a parameter name, a module path or a glob as in "
        "model.named_parameters() (e.g. 'bert.embeddings.word_embeddings.weight')"
    )
    with pytest.raises(ValueError, match=r"\(e\.g\. 'embeddings\.word_embeddings\.weight'\)$"):
        memory.freeze_patterns(nx.DiGraph(), ["x"])
    with pytest.raises(ValueError, match="'Classifier.bias' matches no parameter"):
        memory.freeze_patterns(graph, ["Classifier.bias"])  # names are matched case by case
    assert memory.frozen_names(graph) == frozenset()
    g.parameter_rows(graph)[1]["trainable"] = False
    assert memory.frozen_names(graph, ["x"]) == {"x", "bert.embeddings.position_embeddings.weight"}
    assert memory.frozen_names(chain(["A"])) == frozenset()
    for row in g.parameter_rows(graph):
        del row["trainable"]  # none recorded: trainable
    assert memory.frozen_names(graph) == frozenset()
    assert memory.training_memory(graph)["trainable_parameters"] == PARAMETERS
