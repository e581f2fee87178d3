"""The cost pass on a committed bert-tiny graph (3 layers, sequence classification), in-process.

The costs stored in the file are removed and the pass run again; every number it gives is
compared with BERT's arithmetic for hidden size H = 128, feed-forward FF = 512, 2 heads of 64,
3 layers and 2 labels:

- matmul FLOPs per token and layer: Q, K, V and the output projection 4 · 2H², the feed-forward
  2 · 2H·FF, so 3 · (8H² + 4H·FF) = 1,179,648·batch·seq; attention QKᵀ and AV 2 · 2 · heads · 64 per
  query and key, 3 · 512 = 1,536·batch·seq²; pooler 2H² and classifier 2 · 2H per row, 33,280·batch;
- other FLOPs per token: embeddings two adds and a layer norm, 2H + 5H; each layer six biases
  (4H + FF + H), two residual adds, two layer norms of 5 per element and a GELU: 3,200; each
  score 5 (softmax 3, scale, mask); the pooler's bias and tanh and the classifier's bias per row;
- parameters: 4,584,450 (the embeddings, 3 · 198,272 per layer, pooler and classifier), 4 bytes each.
"""

from __future__ import annotations

import copy
from typing import Any

import networkx as nx
import pytest

from bertgraph.graph import cost, costbase, costtable, memory
from bertgraph.graph import schema as g
from bertgraph.graph.poly import Poly
from tests.generation_runs import graph_of
from tests.graph_fixtures import bert_tiny, chain
from tests.test_moe_exact import fused, with_products

H, FF, LAYERS = 128, 512, 3
PARAMETERS = 30522 * H + 512 * H + 2 * H + 2 * H + LAYERS * (4 * (H * H + H) + (H * FF + FF) + (FF * H + H) + 4 * H)
PARAMETERS += H * H + H + 2 * H + 2
LINEAR = f"{LAYERS * (8 * H * H + 4 * H * FF)}*batch*seq + {2 * H * H + 2 * 2 * H}*batch"
ATTENTION = f"{LAYERS * 2 * 2 * 2 * 64}*batch*seq**2"
OTHER = f"{LAYERS * 5 * 2}*batch*seq**2 + {7 * H + LAYERS * (4 * H + FF + H + 2 * H + 2 * 5 * H + FF)}*batch*seq"
OTHER += f" + {2 * H + 2}*batch"
COST_KEYS = (g.MATMUL_FLOPS, g.OTHER_FLOPS, g.ACTIVATION_BYTES, g.PARAM_BYTES, g.COST_UNSUPPORTED)


def recosted(graph: nx.DiGraph | None = None) -> nx.DiGraph:
    """The graph with its stored costs removed and the pass run again."""
    graph = bert_tiny() if graph is None else graph
    for _, data in graph.nodes(data=True):
        for key in COST_KEYS:
            data.pop(key, None)
    assert not cost.has_costs(graph)
    return cost.annotate(graph)


def test_bert_tiny_totals_are_berts_arithmetic() -> None:
    graph = recosted()
    assert cost.has_costs(graph)
    totals = cost.model_totals(graph)
    assert str(totals[cost.LINEAR_FLOPS]) == LINEAR
    assert str(totals[cost.ATTENTION_FLOPS]) == ATTENTION
    assert totals[g.MATMUL_FLOPS] == Poly.parse(LINEAR) + Poly.parse(ATTENTION)
    assert str(totals[g.OTHER_FLOPS]) == OTHER
    assert totals[cost.FLOPS] == totals[g.MATMUL_FLOPS] + totals[g.OTHER_FLOPS]
    assert sum(data.get(g.PARAM_BYTES, 0) for _, data in graph.nodes(data=True)) == 4 * PARAMETERS
    assert sum(row["numel"] for row in g.parameter_rows(graph)) == PARAMETERS
    assert cost.unsupported(graph) == {} and cost.uncounted_products(graph) == {}


def test_parameter_bytes_follow_each_parameters_dtype() -> None:
    graph = bert_tiny()
    for row in g.parameter_rows(graph):
        if row["name"].startswith("classifier."):
            row["dtype"] = "float16"
        if row["name"] == "bert.pooler.dense.bias":
            del row["dtype"]  # no dtype recorded: float32
    ops = recosted(graph).nodes
    assert ops["classifier:linear"][g.PARAM_BYTES] == 2 * (2 * H + 2)
    assert ops["bert.pooler.dense:linear"][g.PARAM_BYTES] == 4 * (H * H + H)


def test_every_op_gets_its_figures_and_views_write_nothing() -> None:
    graph = recosted()
    ops = {n: d for n, d in graph.nodes(data=True) if d[g.KIND] == g.OPERATOR}
    assert all(key in data for data in ops.values() for key in (g.MATMUL_FLOPS, g.OTHER_FLOPS, g.PARAM_BYTES))
    assert not any(g.PARAM_BYTES in d for _, d in graph.nodes(data=True) if d[g.KIND] != g.OPERATOR)
    query = ops["bert.encoder.layer.0.attention.self.query:linear"]
    assert query[g.PARAM_BYTES] == 4 * (H * H + H)
    assert query[g.ACTIVATION_BYTES] == f"{4 * H}*batch*seq"
    assert ops["bert.embeddings.word_embeddings:embedding"][g.PARAM_BYTES] == 4 * 30522 * H
    assert ops["bert.encoder.layer.0.attention.self:view"][g.ACTIVATION_BYTES] == "0"  # a view writes nothing
    assert ops["bert:and_1"][g.ACTIVATION_BYTES] == "batch*seq**2"  # the boolean mask, a byte per pair
    assert ops["bert:arange"][g.ACTIVATION_BYTES] == "8*batch"  # int64 indices
    assert ops["bert:add"][g.OTHER_FLOPS] == "0"  # integer arithmetic
    assert ops["bert:add"][g.ACTIVATION_BYTES] == "8*seq"


def test_a_layer_writes_eleven_hidden_sized_tensors_and_two_feed_forward_ones() -> None:
    # q, k, v, attention, its contiguous copy, the output projection, two residual adds, two layer
    # norms and the feed-forward's output (H each); the intermediate and its GELU (FF each): float32.
    costs = cost.module_costs(recosted())
    layer = costs["bert.encoder.layer.1"]
    assert str(layer[g.ACTIVATION_BYTES]) == f"{4 * (11 * H + 2 * FF)}*batch*seq"
    assert str(layer[g.MATMUL_FLOPS]) == f"512*batch*seq**2 + {8 * H * H + 4 * H * FF}*batch*seq"
    assert layer[cost.FLOPS] == layer[g.MATMUL_FLOPS] + layer[g.OTHER_FLOPS]
    assert layer[g.SAVED_BYTES] == Poly()
    whole = cost.model_totals(recosted())
    # the whole model: 3 layers as above; the embeddings' five float32 tensors of H per token and the
    # position table's per position; the mask's boolean per token twice (to, index) and per pair, its
    # int64 positions (one per row, four per position) and booleans per position (ge, and) and the
    # one of new_ones; the pooler's linear and tanh (H floats per row) and the classifier's 2 floats.
    per_token = LAYERS * 4 * (11 * H + 2 * FF) + 5 * 4 * H + 2
    assert str(whole[g.ACTIVATION_BYTES]) == (
        f"batch*seq**2 + {per_token}*batch*seq + {2 * 4 * H + 4 * 2 + 8}*batch + {4 * H + 4 * 8 + 2}*seq + 1"
    )
    assert costs[""][g.MATMUL_FLOPS] == whole[g.MATMUL_FLOPS] and costs[""][cost.FLOPS] == whole[cost.FLOPS]
    assert costs["bert"][g.MATMUL_FLOPS] == whole[g.MATMUL_FLOPS] - Poly.parse("512*batch")
    assert str(costs["classifier"][g.OTHER_FLOPS]) == "2*batch"


def test_a_folded_row_sums_every_layer_it_stands_for() -> None:
    rows = {row["path"]: row for row in cost.cost_rows(recosted(), depth=3)}
    folded = rows["bert.encoder.layer.0"]
    assert folded["repeat"] == LAYERS
    assert str(folded["polys"][g.MATMUL_FLOPS]) == f"1536*batch*seq**2 + {LAYERS * (8 * H * H + 4 * H * FF)}*batch*seq"
    assert rows[""]["polys"][cost.FLOPS] == cost.model_totals(recosted())[cost.FLOPS]
    inside = [row for row in rows.values() if row.get("in_fold")]
    assert inside and all(row["polys"][g.MATMUL_FLOPS] != folded["polys"][g.MATMUL_FLOPS] for row in inside)
    unfolded = {row["path"]: row for row in cost.cost_rows(recosted(), depth=3, fold=False)}
    assert str(unfolded["bert.encoder.layer.2"]["polys"][g.MATMUL_FLOPS]) == "512*batch*seq**2 + 393216*batch*seq"
    for index in range(LAYERS):  # a row that does not stand for several is its own module alone
        layer = unfolded[f"bert.encoder.layer.{index}"]
        assert str(layer["polys"][g.MATMUL_FLOPS]) == "512*batch*seq**2 + 393216*batch*seq"
    # the depth asked for, counted from the backbone: its children and the head's modules, no deeper
    shallow = [row["path"] for row in cost.cost_rows(recosted(), depth=1)]
    assert shallow == ["", "bert", "bert.embeddings", "bert.encoder", "bert.pooler", "classifier", "dropout"]
    assert [row["path"] for row in cost.cost_rows(recosted(), depth=0)] == ["", "bert"]


def test_members_of_a_folded_row() -> None:
    assert cost._members("a.layer.3", 3) == ["a.layer.3", "a.layer.4", "a.layer.5"]
    assert cost._members("a.layer.3", 1) == ["a.layer.3"]
    assert cost._members("a.layer.3", 2) == ["a.layer.3", "a.layer.4"]
    assert cost._members("a.layer.x", 3) == ["a.layer.x"]
    assert cost._members("layer", 3) == ["layer"]
    assert cost._ancestors("") == [""]
    assert cost._ancestors("a.b") == ["", "a", "a.b"]


def node(**attrs: Any) -> dict[str, Any]:
    data: dict[str, Any] = {g.KIND: g.OPERATOR, g.OP: "linear", g.TARGET: "aten.linear.default", g.DTYPE: "float32"}
    data.update(attrs)
    return data


LINEAR_NODE = node(**{g.SHAPE: [2, 3], g.INPUTS: [[2, 5], [3, 5], [3]], g.PARAM_NAMES: ["w", "b"]})


def test_one_op_costs_and_every_reason_it_has_none() -> None:
    dtypes, numels = {"w": "float16", "b": "int8"}, {"w": 15, "b": 3}
    found = cost.op_cost(LINEAR_NODE, dtypes, numels)
    assert found == {
        g.PARAM_BYTES: 15 * 2 + 3 * 1,
        g.ACTIVATION_BYTES: "24",
        g.MATMUL_FLOPS: str(2 * 2 * 3 * 5),
        g.OTHER_FLOPS: "6",
    }
    assert cost.op_cost(LINEAR_NODE, {}, {"w": 15})[g.PARAM_BYTES] == 60  # float32 unless told; unknown: none
    assert cost.op_cost(LINEAR_NODE, {"w": "nonsense"}, {"w": 15})[g.PARAM_BYTES] == 60
    unknown = cost.op_cost(node(**{g.SHAPE: ["?", 3], g.INPUTS: [[2, 5], [3, 5]]}), {}, {})
    assert unknown == {g.PARAM_BYTES: 0, g.COST_UNSUPPORTED: ["aten.linear.default (shape unknown)"]}
    unknown = cost.op_cost(node(**{g.SHAPE: [2, 3], g.INPUTS: [["seq//2", 5], [3, 5]]}), {}, {})
    assert unknown[g.COST_UNSUPPORTED] == ["aten.linear.default (shape unknown)"]
    short = cost.op_cost(node(**{g.SHAPE: [2, 3], g.INPUTS: [[2, 5]]}), {}, {})
    assert short[g.COST_UNSUPPORTED] == ["aten.linear.default (shape unknown)"] and g.MATMUL_FLOPS not in short
    assert short[g.ACTIVATION_BYTES] == "24"
    nameless = cost.op_cost(node(**{g.SHAPE: [2], g.DTYPE: ""}), {}, {})
    assert nameless == {g.PARAM_BYTES: 0, g.COST_UNSUPPORTED: ["aten.linear.default (dtype unknown)"]}
    untyped = node(**{g.SHAPE: [2]})
    del untyped[g.DTYPE]  # no dtype recorded at all: unknown, as an empty one
    assert cost.op_cost(untyped, {}, {}) == nameless
    odd = cost.op_cost(node(**{g.SHAPE: [2], g.DTYPE: "complex32"}), {}, {})
    assert odd[g.COST_UNSUPPORTED] == ["aten.linear.default (dtype complex32)"]
    no_formula = cost.op_cost(node(**{g.TARGET: "aten.fancy.default", g.SHAPE: [2, 4], g.ALIAS: True}), {}, {})
    assert no_formula == {g.PARAM_BYTES: 0, g.ACTIVATION_BYTES: "0", g.COST_UNSUPPORTED: ["aten.fancy.default"]}
    by_op = cost.op_cost({g.OP: "aten.add.Tensor", g.SHAPE: [2], g.DTYPE: "float64"}, {}, {})
    assert by_op[g.OTHER_FLOPS] == "2" and by_op[g.ACTIVATION_BYTES] == "16"  # no target: the op's name
    empty = cost.op_cost({g.DTYPE: "bool"}, {}, {})
    assert empty == {g.PARAM_BYTES: 0, g.ACTIVATION_BYTES: "1", g.COST_UNSUPPORTED: [""]}


def test_itemsizes_and_shapes() -> None:
    assert [costbase.itemsize(d) for d in ("float64", "bfloat16", "float8_e5m2", "int32", "bool", "uint16")] == [
        8,
        2,
        1,
        4,
        1,
        2,
    ]
    assert costbase.itemsize("complex64") == 8 and costbase.itemsize("nope") is None
    assert costbase.shape_poly([2, "batch*seq"]) == (Poly.const(2), Poly.parse("batch*seq"))


def with_unknown_products(count: int, source: str = "torch.export") -> nx.DiGraph:
    graph = bert_tiny()
    graph.graph[g.G_SOURCE] = source
    linears = [n for n in g.ops_in_order(graph) if graph.nodes[n].get(g.OP) == "linear"][:count]
    for name in linears:
        graph.nodes[name][g.SHAPE] = ["?", 128]
    graph.nodes["bert.encoder.layer.0.intermediate.intermediate_act_fn:gelu"][g.SHAPE] = ["?"]
    return recosted(graph)


def test_a_product_without_a_formula_is_refused_as_such() -> None:
    """An einsum's FLOPs hang on its equation, which no formula sees: the refusal says that, not
    that shapes were unknown, even beside products whose shapes are unknown."""
    graph = bert_tiny()
    query = "bert.encoder.layer.0.attention.self.query:linear"
    graph.nodes[query][g.TARGET] = "aten.einsum.default"
    graph = recosted(graph)
    assert cost.uncounted_products(graph) == {"aten.einsum.default": 1}
    with pytest.raises(costbase.CostError) as raised:
        cost.check_products_counted(graph)
    assert str(raised.value) == (
        "bert-tiny: 1 matrix product (aten.einsum.default) has no FLOP formula in bertgraph, so the matmul "
        "FLOPs cannot be counted exactly; summary and params still count the model"
    )
    two = bert_tiny()
    for name in (query, "bert.encoder.layer.1.attention.self.key:linear"):
        two.nodes[name][g.TARGET] = "aten.einsum.default"
    with pytest.raises(costbase.CostError) as raised:
        cost.check_products_counted(recosted(two))
    assert str(raised.value).startswith(
        "bert-tiny: 2 matrix products (2 × aten.einsum.default) have no FLOP formula in bertgraph, so the matmul "
    )
    both = bert_tiny()
    both.nodes[query][g.TARGET] = "onnx::Einsum"
    both.nodes["bert.pooler.dense:linear"][g.SHAPE] = ["?", 128]
    with pytest.raises(costbase.CostError, match=r"^bert-tiny: 1 matrix product \(onnx::Einsum\) has no FLOP formula"):
        cost.check_products_counted(recosted(both))


def test_a_product_without_a_cost_is_refused_in_one_line() -> None:
    graph = with_unknown_products(2)
    assert cost.uncounted_products(graph) == {"aten.linear.default": 2}
    assert cost.unsupported(graph) == {
        "aten.gelu.default (shape unknown)": 1,
        "aten.linear.default (shape unknown)": 2,
    }
    with pytest.raises(costbase.CostError) as raised:
        cost.check_products_counted(graph)
    assert str(raised.value) == (
        "bert-tiny: 2 matrix products (2 × aten.linear.default) have shapes tracing could not work out, so the "
        "matmul FLOPs cannot be counted exactly; give the model's config, or an ONNX file whose shapes are known "
        "(bertgraph onnx writes one)"
    )
    one = with_unknown_products(1, "onnx")
    with pytest.raises(
        costbase.CostError,
        match=r"^model\.onnx: 1 matrix product \(aten\.linear\.default\) has shapes "
        r"ONNX shape inference could not",
    ):
        cost.check_products_counted(one, "model.onnx")
    del one.graph[g.G_NAME]
    with pytest.raises(costbase.CostError, match=r"^the model: 1 matrix product"):
        cost.check_products_counted(one)
    cost.check_products_counted(recosted())  # every product counted: no error
    two = bert_tiny()
    two.nodes["bert.pooler.dense:linear"][g.SHAPE] = ["?", 128]
    sdpa = "bert.encoder.layer.1.attention.self:scaled_dot_product_attention"
    two.nodes[sdpa][g.SHAPE] = ["?"]
    with pytest.raises(
        costbase.CostError,
        match=r"^bert-tiny: 2 matrix products \(aten\.linear\.default, "
        r"aten\.scaled_dot_product_attention\.default\) have shapes",
    ):
        cost.check_products_counted(recosted(two))
    # an op known by its name alone (no target recorded) is still a matrix product
    nameless = bert_tiny()
    nameless.nodes["bert.pooler.dense:linear"][g.TARGET] = ""
    nameless.nodes["bert.pooler.dense:linear"][g.OP] = "aten.linear.default"
    nameless.nodes["bert.pooler.dense:linear"][g.SHAPE] = ["?", 128]
    assert cost.uncounted_products(recosted(nameless)) == {"aten.linear.default": 1}
    gelu_only = bert_tiny()
    gelu_only.nodes["bert.pooler.activation:tanh"][g.SHAPE] = ["?", 128]
    cost.check_products_counted(recosted(gelu_only))
    assert cost.uncounted_products(recosted(gelu_only)) == {}


def test_a_weight_operand_is_a_parameter_or_an_op_reading_only_parameters() -> None:
    graph = nx.DiGraph()
    graph.add_node("x", **{g.KIND: g.INPUT})
    graph.add_node("t", **node(**{g.OP: "Transpose", g.PARAM_NAMES: ["w"]}))
    graph.add_node("m", **node(**{g.OP: "MatMul"}))
    graph.add_node("s", **node(**{g.OP: "MatMul", g.SHARED_PARAMS: ["w"]}))
    graph.add_node("a", **node(**{g.OP: "MatMul"}))
    graph.add_edges_from([("x", "t"), ("x", "m"), ("m", "a"), ("x", "a")])
    assert costbase.reads_weights(graph.nodes["s"]) and not costbase.reads_weights(graph.nodes["m"])
    assert costbase.has_weight_operand(graph, "s")
    assert not costbase.has_weight_operand(graph, "a")  # both operands activations: attention
    assert not costbase.has_weight_operand(graph, "m")  # the transpose reads the input too
    graph.remove_edge("x", "t")
    graph.add_edge("t", "m")
    assert costbase.has_weight_operand(graph, "m")
    graph.nodes["t"][g.KIND] = g.INPUT
    assert not costbase.has_weight_operand(graph, "m")


def test_node_polynomials_read_text_and_default_to_zero() -> None:
    assert costbase.node_poly({g.MATMUL_FLOPS: "2*seq"}, g.MATMUL_FLOPS) == Poly.parse("2*seq")
    assert costbase.node_poly({g.MATMUL_FLOPS: 7}, g.MATMUL_FLOPS) == Poly()
    assert costbase.node_poly({}, g.MATMUL_FLOPS) == Poly()
    assert costbase.node_flops({g.MATMUL_FLOPS: "seq", g.OTHER_FLOPS: "3"}) == Poly.parse("seq + 3")


def test_sizes() -> None:
    graph = bert_tiny()
    assert costbase.sequence_name(graph) == "seq" and not costbase.has_decoder_length(graph)
    assert costbase.sizes_for(graph) == {"batch": 1, "seq": 128}
    assert costbase.sizes_for(graph, seq=7, batch=3) == {"batch": 3, "seq": 7}
    assert costbase.sizes_for(graph, example={"seq": 5}) == {"seq": 5}
    with pytest.raises(costbase.CostError, match=r"^bert-tiny has no decoder length: a decoder length applies to "):
        costbase.sizes_for(graph, decoder=4)
    graph.graph[g.G_NAME] = ""
    with pytest.raises(costbase.CostError, match=r"^this model has no decoder length"):
        costbase.sizes_for(graph, decoder=4)
    onnx = nx.DiGraph(**{g.G_EXAMPLE: {"batch": 1, "sequence": 9}})
    assert costbase.sequence_name(onnx) == "sequence"
    assert costbase.sizes_for(onnx, seq=4) == {"batch": 1, "sequence": 4}
    assert costbase.sequence_name(nx.DiGraph(**{g.G_EXAMPLE: {"sequence": 9, "seq": 9}})) == "seq"
    assert costbase.sequence_name(nx.DiGraph()) == "seq"
    assert not costbase.has_decoder_length(nx.DiGraph()) and costbase.sizes_for(nx.DiGraph(), batch=2) == {"batch": 2}
    t5 = graph_of("t5")
    assert costbase.has_decoder_length(t5)
    example = costbase.sizes_for(t5)
    assert costbase.sizes_for(t5, seq=20)["tgt"] == 20  # the decoder follows the input
    assert costbase.sizes_for(t5, seq=20, decoder=6) == {**example, "seq": 20, "tgt": 6}
    assert costbase.sizes_for(t5, decoder=6)["seq"] == example["seq"]
    assert costbase.at_length({"batch": 2, "seq": 3}, "seq", 9) == {"batch": 2, "seq": 9}
    assert costbase.at_length({"seq": 3, "tgt": 4}, "seq", 9) == {"seq": 9, "tgt": 9}
    assert costbase.size_label({"batch": 1, "seq": 128}) == "batch=1, seq=128"


def test_evaluating_needs_every_dimension() -> None:
    poly = Poly.parse("2*batch*seq + tgt")
    assert costbase.evaluate(poly, {"batch": 2, "seq": 3, "tgt": 1}) == 13
    with pytest.raises(costbase.CostError) as raised:
        costbase.evaluate(poly, {"batch": 2, "x": 1})
    assert str(raised.value) == "the cost depends on the dimension 'seq', which has no size here (known: batch, x)"
    with pytest.raises(costbase.CostError, match=r"dimension 'batch', which has no size here \(known: none\)$"):
        costbase.evaluate(poly, {})


def test_attention_overtakes_the_linear_layers_at_769_tokens() -> None:
    # 1,536·s² ≥ 1,179,648·s + 33,280 first holds at s = 769 (at 768 the left side is 33,280 short).
    totals = cost.model_totals(recosted())
    linear, attention = totals[cost.LINEAR_FLOPS], totals[cost.ATTENTION_FLOPS]
    assert cost.crossover(linear, attention, {"batch": 1, "seq": 128}, "seq") == 769
    assert cost.crossover(linear, attention, {"batch": 4, "seq": 1}, "seq") == 769
    seq = Poly.var("seq")
    assert cost.crossover(100 * seq, seq * seq, {}, "seq") == 100
    assert cost.crossover(64 * seq, seq * seq, {}, "seq") == 64  # a power of two: the doubling lands on it
    assert cost.crossover(seq, seq * seq, {}, "seq") == 1
    assert cost.crossover(2 * seq, seq * seq, {}, "seq") == 2  # not at 1, at 2 (4 ≥ 4)
    assert cost.crossover(3 * seq, seq * seq, {}, "seq") == 3
    assert all(type(cost.crossover(k * seq, seq * seq, {}, "seq")) is int for k in (3, 100, 1000))
    assert cost.crossover(Poly(), Poly(), {}, "seq") == 1
    assert cost.crossover(1000 * seq, seq * seq, {}, "seq", limit=1024) == 1000
    assert cost.crossover(1000 * seq, seq * seq, {}, "seq", limit=1023) is None
    assert cost.crossover(seq, Poly(), {}, "seq") is None
    tgt = Poly.var("tgt")  # an encoder-decoder's decoder length follows the sweep
    assert cost.crossover(100 * seq, seq * tgt, {"tgt": 1}, "seq") == 100


def test_flops_curves_at_each_length() -> None:
    curves = cost.flops_curves(recosted(), [1, 769], {"batch": 2, "seq": 128})
    assert curves == {
        cost.LINEAR_FLOPS: [2 * (1179648 + 33280), 2 * (1179648 * 769 + 33280)],
        cost.ATTENTION_FLOPS: [2 * 1536, 2 * 1536 * 769 * 769],
        g.OTHER_FLOPS: [2 * (30 + 10496 + 258), 2 * (30 * 769 * 769 + 10496 * 769 + 258)],
    }


def test_the_attention_a_graph_runs() -> None:
    assert costtable.attention_implementation(bert_tiny()) == "sdpa"
    assert costtable.attention_implementation(graph_of("gpt2", "eager")) == "eager"
    assert costtable.attention_implementation(chain(["softmax"])) == "eager"
    assert costtable.attention_implementation(chain(["Softmax"])) == "eager"
    assert costtable.attention_implementation(chain(["add", "mul"])) == "none"


def test_the_cost_report_of_bert_tiny() -> None:
    sizes = [{"batch": 1, "seq": 16}, {"batch": 2, "seq": 64}]
    report = costtable.cost_report(bert_tiny(), sizes)
    flops = [costbase.evaluate(Poly.parse(LINEAR) + Poly.parse(ATTENTION) + Poly.parse(OTHER), s) for s in sizes]
    assert report["total"][cost.FLOPS]["values"] == flops
    assert report["total"][cost.LINEAR_FLOPS]["formula"] == LINEAR
    assert report["total"][cost.ATTENTION_FLOPS]["readable"] == "1,536·batch·seq²"
    assert costtable.MASKED_ATTENTION_FLOPS in report["total"] and costtable.KV_CACHE not in report["total"]
    assert (report["model"], report["head"], report["model_class"]) == (
        "bert-tiny",
        "sequence-classification",
        "BertForSequenceClassification",
    )
    assert report["sizes"] == sizes and report["unsupported"] == {} and report["notes"] == []
    assert report["assumptions"]["attention"] == "sdpa" and report["assumptions"]["dtype"] == "float32"
    rows = {row["path"]: row for row in report["rows"]}
    assert rows[""]["share"] == [1.0, 1.0] and rows[""]["flops"]["values"] == flops
    assert rows["classifier"]["matmul_flops"]["values"] == [512, 1024]
    assert all("saved_bytes" in row for row in report["rows"])
    assert rows["bert.encoder.layer.0"]["repeat"] == LAYERS
    assert set(rows[""]) >= {"path", "name", "type", "level", "depth", "in_fold", "activation_bytes"}
    memory = report["memory"]
    assert memory["parameter_bytes"] == 4 * PARAMETERS
    assert memory["input_bytes"] == [3 * 8 * 16, 3 * 8 * 128]  # three int64 inputs per token
    assert memory["dtype"] == "float32" and len(memory["peak_activation_bytes"]) == 2
    assert report["training"]["total"] == 16 * PARAMETERS  # weights, gradients and Adam's two moments
    saved = report["training"]["activations"]["values"]
    assert memory["training_activation_bytes"] == saved
    assert report["training"]["total_with_activations"] == [16 * PARAMETERS + value for value in saved]
    half = costtable.cost_report(bert_tiny(), sizes[:1], dtype="bfloat16")
    assert half["memory"]["parameter_bytes"] == 2 * PARAMETERS and half["assumptions"]["dtype"] == "bfloat16"
    assert half["training"]["activations"]["dtype"] == "float32"  # what the graph was traced in


def test_generating_is_refused_for_an_encoder_and_an_onnx_file() -> None:
    with pytest.raises(costbase.CostError, match=r"^bert-tiny does not generate \(no causal or cross-attention "):
        costtable.cost_report(bert_tiny(), [{"batch": 1, "seq": 8}], generate=4)
    onnx = bert_tiny()
    onnx.graph[g.G_SOURCE] = "onnx"
    with pytest.raises(costbase.CostError, match=r"^--generate needs the attention facts an ONNX file does not record"):
        costtable.cost_report(onnx, [{"batch": 1, "seq": 8}], generate=4)
    report = costtable.cost_report(onnx, [{"batch": 1, "seq": 8}])
    assert report["notes"] == [costtable.ONNX_ATTENTION_NOTE, costtable.ONNX_TRAINING_NOTE]
    assert report["memory"]["training_activation_bytes"] is None and "activations" not in report["training"]
    assert not any("saved_bytes" in row for row in report["rows"])
    assert costtable.MASKED_ATTENTION_FLOPS not in report["total"]
    assert costtable.planning_totals(onnx, "float32") == ({}, [costtable.ONNX_ATTENTION_NOTE])
    assert costbase.from_onnx(onnx) and not costbase.from_onnx(bert_tiny())


def test_a_decoder_plans_its_cache_and_steps() -> None:
    graph = graph_of("gpt2")
    found, notes = costtable.planning_totals(graph, "float32")
    assert notes == [] and set(found) == {costtable.MASKED_ATTENTION_FLOPS, costtable.KV_CACHE, costtable.DECODE_FLOPS}
    report = costtable.cost_report(graph, [{"batch": 1, "seq": 8}], generate=3)
    assert len(report["generate"]) == 1 and report["generate"][0]["kv_cache_bytes"] > 0


def test_the_report_costs_a_graph_without_costs_and_its_options_reach_every_part() -> None:
    sizes = [{"batch": 1, "seq": 16}]
    plain = costtable.cost_report(recosted(), sizes)
    stripped = recosted()
    for _, data in stripped.nodes(data=True):
        for key in COST_KEYS:
            data.pop(key, None)
    assert costtable.cost_report(stripped, sizes) == plain  # the pass runs first when the graph has no costs
    rows = {row["path"]: row for row in plain["rows"]}
    assert rows["classifier"]["repeat"] == 1 and "calls" not in rows["classifier"]
    assert rows["classifier"]["other_flops"]["values"] == [2]
    # every module's row carries what autograd keeps for it: the whole model's row all of it
    assert rows[""]["saved_bytes"]["values"] == plain["training"]["activations"]["values"]
    assert rows[""]["saved_bytes"]["values"][0] > 0
    assert "unsupported" in plain["training"]["activations"]
    found = memory.peak_activation(recosted(), sizes[0])
    assert (plain["memory"]["peak_activation_bytes"], plain["memory"]["peak_at"]) == ([found.bytes], [found.node])
    assert plain["assumptions"] == {
        "attention": "sdpa",
        "dtype": "float32",
        "flops": "matmul FLOPs count 2 per multiply-add, as torch.utils.flop_counter does; "
        "attention_matmul_flops_masked counts only the pairs the mask allows, which FlopCounterMode does not",
    }
    shallow = costtable.cost_report(recosted(), sizes, depth=1, fold=False)
    assert [row["path"] for row in shallow["rows"]] == [row["path"] for row in cost.cost_rows(recosted(), 1, False)]
    assert [row["path"] for row in shallow["rows"]] != [row["path"] for row in plain["rows"]]
    half = costtable.cost_report(recosted(), sizes, dtype="bfloat16")
    assert half["memory"]["peak_activation_bytes"][0] < found.bytes
    # Frozen feed-forward inputs: no gradient state for them, and their inputs need not be kept.
    frozen = [row["name"] for row in g.parameter_rows(recosted()) if ".intermediate.dense." in row["name"]]
    cold = costtable.cost_report(recosted(), sizes, frozen=frozen)
    assert cold["training"]["frozen_parameters"] == LAYERS * (H * FF + FF)
    assert cold["training"]["activations"]["values"][0] < plain["training"]["activations"]["values"][0]


def test_a_report_at_size_zero_has_no_shares() -> None:
    report = costtable.cost_report(recosted(), [{"batch": 0, "seq": 8}])
    assert all(row["share"] == [0.0] for row in report["rows"])


def test_a_nameless_graph_reports_empty_names() -> None:
    graph = recosted()
    for key in (g.G_NAME, g.G_HEAD, g.G_MODEL_CLASS):
        del graph.graph[key]
    report = costtable.cost_report(graph, [{"batch": 1, "seq": 8}])
    assert (report["model"], report["head"], report["model_class"]) == ("", "", "")
    with pytest.raises(costbase.CostError) as raised:
        costtable.cost_report(graph, [{"batch": 1, "seq": 8}], generate=2)
    assert str(raised.value) == (
        "this model does not generate (no causal or cross-attention that caches keys); --generate applies to "
        "decoders such as gpt2 or t5-small"
    )


def test_a_decoders_cache_is_planned_in_the_dtype_asked_for() -> None:
    graph = graph_of("gpt2")
    sizes = [{"batch": 1, "seq": 8}]
    full = costtable.cost_report(graph, sizes, generate=3)
    half = costtable.cost_report(graph, sizes, generate=3, dtype="bfloat16")
    assert half["total"][costtable.KV_CACHE]["values"][0] * 2 == full["total"][costtable.KV_CACHE]["values"][0]
    assert half["generate"][0]["kv_cache_bytes"] * 2 == full["generate"][0]["kv_cache_bytes"]
    found, _ = costtable.planning_totals(graph, "bfloat16")
    assert found[costtable.KV_CACHE] * 2 == costtable.planning_totals(graph, "float32")[0][costtable.KV_CACHE]


def test_planning_notes_say_why_a_figure_is_left_out() -> None:
    """A causal product whose cost names no lengths has no mask-aware count and no decode step; a key
    of unknown length no cache. Each note says why, and the other figures stay."""
    graph = copy.deepcopy(graph_of("gpt2"))  # the committed graph is read once and shared
    sdpa = "transformer.h.1.attn:scaled_dot_product_attention"
    graph.nodes[sdpa][g.MATMUL_FLOPS] = "128*batch"
    found, notes = costtable.planning_totals(graph, "float32")
    assert notes == [
        "no mask-aware attention FLOPs: an attention product's cost 128*batch has no query and key lengths",
        "no KV cache or decode step: an attention product's cost 128*batch is not per query and key",
    ]
    assert found == {}  # the note says there is no cache either: none is given
    graph = copy.deepcopy(graph_of("gpt2"))
    graph.nodes[sdpa][g.INPUTS][1] = ["batch", 4, "?", 8]
    found, notes = costtable.planning_totals(graph, "float32")
    assert len(notes) == 1 and notes[0].startswith("no KV cache or decode step: transformer.h.1.attn: the key shape")
    assert set(found) == {costtable.MASKED_ATTENTION_FLOPS}
    # a decoder whose cache cannot be counted is no model that "does not generate": the error says why
    with pytest.raises(costbase.CostError) as raised:
        costtable.cost_report(graph, [{"batch": 1, "seq": 8}], generate=2)
    assert str(raised.value) == (
        "gpt2: --generate cannot be planned, no KV cache or decode step: transformer.h.1.attn: the key shape is "
        "not known (not a polynomial: '?')"
    )
    del graph.graph[g.G_NAME]
    with pytest.raises(
        costbase.CostError, match=r"^this model: --generate cannot be planned, no KV cache or decode step"
    ):
        costtable.cost_report(graph, [{"batch": 1, "seq": 8}], generate=2)


def test_a_mixture_of_experts_plans_every_expert_running() -> None:
    """Fused experts, 2 of 4 per token: the grouped products' 64 FLOPs per token are 128 with all 4,
    the router's 100 stay (tests/test_moe_exact.py)."""
    found, notes = costtable.planning_totals(with_products(fused()), "float32")
    assert notes == []
    assert found[costtable.ALL_EXPERTS_FLOPS] == Poly.parse("228*batch*seq")
    assert found[costtable.MASKED_ATTENTION_FLOPS] == Poly.parse("164*batch*seq")  # no attention facts: all pairs


def test_the_report_rows_follow_its_options() -> None:
    sizes = [{"batch": 1, "seq": 16}]
    frozen = [row["name"] for row in g.parameter_rows(recosted()) if ".intermediate.dense." in row["name"]]
    cold = costtable.cost_report(recosted(), sizes, frozen=frozen)
    rows = {row["path"]: row for row in cold["rows"]}
    assert rows[""]["saved_bytes"]["values"] == cold["training"]["activations"]["values"]
    unfolded = {row["path"]: row for row in costtable.cost_report(recosted(), sizes, depth=3, fold=False)["rows"]}
    assert {f"bert.encoder.layer.{index}" for index in range(LAYERS)} <= set(unfolded)
    assert unfolded["bert.encoder.layer.1"]["repeat"] == 1
    shared = chain(list("AB"))
    shared.graph[g.G_SHARED] = {"stack.layer.0": 2}
    rows = {row["path"]: row for row in costtable.cost_report(shared, [{"batch": 1}])["rows"]}
    assert rows["stack.layer.0"]["calls"] == 2 and "calls" not in rows["stack.layer.1"]
