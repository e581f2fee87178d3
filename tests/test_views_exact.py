"""Views computed in-process from a committed bert-tiny graph and hand-built chains, checked exactly.

These tests trace nothing and start no process, so they also serve the mutation run
(docs/mutation.md): each mutant of graph/views.py is checked in about a second.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import pytest

from bertgraph.graph import schema as g
from bertgraph.graph import views
from bertgraph.graph.poly import Poly
from tests.graph_fixtures import bert_tiny, chain, interleaved_chain, op

TOTAL = 4_584_450  # bert-tiny, 3 layers, sequence classification: the sum of its parameter rows
LAYER = 198_272  # one BertLayer of hidden 128, intermediate 512 (4·(128²+128) + 2·256 + 2·(128·512) + 512 + 128)


def modules(shown: nx.DiGraph) -> list[tuple[str, str, str, int, int, bool]]:
    """(id, module, type, params, repeat, own ops) of every module node, in insertion order."""
    return [
        (n, d[g.MODULE], d[g.MODULE_TYPE], d[g.PARAMS], d.get(g.REPEAT, 1), d.get(g.OWN_OPS, False))
        for n, d in shown.nodes(data=True)
        if d[g.KIND] == g.MODULE_NODE
    ]


def cost_sums(shown: nx.DiGraph) -> dict[str, Any]:
    totals: dict[str, Any] = {key: Poly() for key in g.POLY_ATTRS}
    totals[g.PARAM_BYTES] = 0
    for _, data in shown.nodes(data=True):
        repeat = int(data.get(g.REPEAT, 1)) if data.get(g.KIND) != g.MODULE_NODE else 1
        for key in g.POLY_ATTRS:
            if key in data:
                totals[key] = totals[key] + Poly.parse(data[key])
        totals[g.PARAM_BYTES] += int(data.get(g.PARAM_BYTES, 0)) * (repeat if repeat < 0 else 1)
    return {key: str(value) for key, value in totals.items()}


# --- module paths --------------------------------------------------------------------------------


def test_display_levels_skip_the_backbone_and_list_containers() -> None:
    assert views.display_levels("bert.encoder.layer.3.attention", "bert") == (
        "bert.encoder",
        "bert.encoder.layer.3",
        "bert.encoder.layer.3.attention",
    )
    assert views.display_levels("bert.encoder.layer.0-11", "bert") == ("bert.encoder", "bert.encoder.layer.0-11")
    assert views.display_levels("enc.layer.1-19/3.x", "") == ("enc", "enc.layer.1-19/3", "enc.layer.1-19/3.x")
    assert views.display_levels("enc.layer.a.x", "") == ("enc", "enc.layer", "enc.layer.a", "enc.layer.a.x")
    assert views.display_levels("bert", "bert") == ()
    assert views.display_levels("", "") == ()
    assert views.display_levels("a.b", "") == ("a", "a.b")


def test_display_names_and_paths() -> None:
    assert views.display_name("bert.pooler.dense", "bert") == "pooler.dense"
    assert views.display_name("bert", "bert") == ""
    assert views.display_name("bertx.pooler", "bert") == "bertx.pooler"
    assert views.display_name("bert.pooler", "") == "bert.pooler"
    assert views.own_ops_id("bert.embeddings") == "bert.embeddings:ops"
    assert views.in_backbone("bert.x", "bert") and views.in_backbone("bert", "bert")
    assert views.in_backbone("classifier", "") and not views.in_backbone("classifier", "bert")
    assert not views.in_backbone("bertx", "bert")
    assert views.is_within("a.b", "a") and views.is_within("a", "a") and views.is_within("x", "")
    assert not views.is_within("ab", "a") and not views.is_within("a", "a.b")


def test_a_negative_level_is_an_error() -> None:
    with pytest.raises(ValueError, match="level must be 0 or more, got -1"):
        views.view(bert_tiny(), -1)
    assert len(views.view(bert_tiny(), 0)) == 5


# --- levels of detail ----------------------------------------------------------------------------

COUNTS = {  # level → (nodes, edges) folded, (nodes, edges) unfolded
    0: ((5, 4), (5, 4)),
    1: ((10, 9), (10, 9)),
    2: ((18, 17), (20, 21)),
    3: ((31, 34), (59, 72)),
    4: ((64, 68), (112, 126)),
    7: ((64, 68), (112, 126)),
}


@pytest.mark.parametrize("level", sorted(COUNTS))
@pytest.mark.parametrize("fold", [True, False])
def test_every_view_keeps_the_parameters_and_the_costs(level: int, fold: bool) -> None:
    graph = bert_tiny()
    shown = views.view(graph, level, fold=fold)
    assert (len(shown), len(shown.edges)) == COUNTS[level][0 if fold else 1]
    assert g.total_params(shown) == TOTAL
    names = sorted(name for _, d in shown.nodes(data=True) for name in d.get(g.PARAM_NAMES, []))
    assert names == sorted(row["name"] for row in g.parameter_rows(graph))
    assert cost_sums(shown) == cost_sums(graph)
    assert shown.graph == graph.graph
    assert views.view(graph, level, fold=fold).nodes(data=True) == shown.nodes(data=True)  # the input is unchanged


def test_level_zero_is_the_model() -> None:
    shown = views.view(bert_tiny(), 0)
    assert modules(shown) == [("", "", "BertForSequenceClassification", TOTAL, 1, False)]
    assert list(shown.edges) == [("input_ids", ""), ("attention_mask", ""), ("token_type_ids", ""), ("", "logits")]


def test_level_zero_of_a_model_without_a_class_name_is_nameless() -> None:
    graph = bert_tiny()
    del graph.graph[g.G_MODULES][""]
    assert modules(views.view(graph, 0))[0][2] == "BertForSequenceClassification"  # the class, from the graph
    del graph.graph[g.G_MODEL_CLASS]
    assert modules(views.view(graph, 0))[0][2] == ""


def test_level_one_is_the_parts() -> None:
    shown = views.view(bert_tiny(), 1)
    assert modules(shown) == [
        ("bert.embeddings", "bert.embeddings", "BertEmbeddings", 3_972_864, 1, False),
        ("bert:ops", "bert", "BertModel", 0, 1, True),
        ("bert.encoder", "bert.encoder", "BertEncoder", 3 * LAYER, 1, False),
        ("bert.pooler", "bert.pooler", "BertPooler", 16_512, 1, False),
        ("dropout", "dropout", "Dropout", 0, 1, False),
        ("classifier", "classifier", "Linear", 258, 1, False),
    ]
    assert shown.nodes["bert.encoder"][g.SHAPE] == ["batch", "seq", 128]
    assert shown.nodes["bert:ops"][g.SHAPE] == ["batch", 1, "seq", "seq"]  # the attention mask
    assert shown.nodes["bert:ops"][g.DTYPE] == "bool"
    assert shown.nodes["bert.encoder"][g.ORDER] == 34
    assert shown.edges["bert:ops", "bert.encoder"][g.SHAPE] == ["batch", 1, "seq", "seq"]


def test_level_one_of_a_base_model_has_no_backbone_prefix() -> None:
    shown = views.view(bert_tiny("base"), 1)
    assert [m[0] for m in modules(shown)] == ["embeddings", ":ops", "encoder", "pooler"]
    assert modules(shown)[1] == (":ops", "", "BertModel", 0, 1, True)


def test_level_two_folds_the_layers() -> None:
    shown = views.view(bert_tiny(), 2)
    assert modules(shown) == [
        ("bert.embeddings:ops", "bert.embeddings", "BertEmbeddings", 0, 1, True),
        ("bert.embeddings.word_embeddings", "bert.embeddings.word_embeddings", "Embedding", 3_906_816, 1, False),
        ("bert.embeddings.token_type_embeddings", "bert.embeddings.token_type_embeddings", "Embedding", 256, 1, False),
        ("bert.embeddings:ops.1", "bert.embeddings", "BertEmbeddings", 0, 1, True),
        ("bert.embeddings.position_embeddings", "bert.embeddings.position_embeddings", "Embedding", 65_536, 1, False),
        ("bert.embeddings.LayerNorm", "bert.embeddings.LayerNorm", "LayerNorm", 256, 1, False),
        ("bert.embeddings.dropout", "bert.embeddings.dropout", "Dropout", 0, 1, False),
        ("bert:ops", "bert", "BertModel", 0, 1, True),
        ("bert.encoder.layer.0-2", "bert.encoder.layer.0-2", "BertLayer", 3 * LAYER, 3, False),
        ("bert.pooler:ops", "bert.pooler", "BertPooler", 0, 1, True),
        ("bert.pooler.dense", "bert.pooler.dense", "Linear", 16_512, 1, False),
        ("bert.pooler.activation", "bert.pooler.activation", "Tanh", 0, 1, False),
        ("dropout", "dropout", "Dropout", 0, 1, False),
        ("classifier", "classifier", "Linear", 258, 1, False),
    ]
    layer = shown.nodes["bert.encoder.layer.0-2"]
    assert layer[g.ORDER] == 34  # the first op of layer 2 stands for the three
    assert layer[g.OPS][:3] == ["linear", "view", "transpose"]
    assert len(layer[g.PARAM_NAMES]) == 3 * 16
    assert shown.nodes["bert.embeddings:ops"][g.SHAPE] == [1, "seq"]  # the position-id slice
    assert shown.nodes["bert.embeddings:ops"][g.OPS] == ["slice"]
    assert set(shown.predecessors("bert.encoder.layer.0-2")) == {"bert.embeddings.dropout", "bert:ops"}
    assert list(shown.successors("bert.encoder.layer.0-2")) == ["bert.pooler:ops"]
    assert shown.edges["bert.embeddings.LayerNorm", "bert.embeddings.dropout"][g.ALIAS] is True
    assert shown.edges["bert.embeddings.word_embeddings", "bert.embeddings:ops.1"]["args"] == [0]


def test_level_two_unfolded_has_three_layers() -> None:
    shown = views.view(bert_tiny(), 2, fold=False)
    layers = [m for m in modules(shown) if ".layer." in m[0]]
    assert layers == [(f"bert.encoder.layer.{i}",) * 2 + ("BertLayer", LAYER, 1, False) for i in range(3)]
    assert shown.has_edge("bert.encoder.layer.0", "bert.encoder.layer.1")
    assert shown.has_edge("bert:ops", "bert.encoder.layer.2")
    assert [shown.nodes[f"bert.encoder.layer.{i}"][g.ORDER] for i in range(3)] == [34, 58, 82]


def test_anatomy_bridges_layout_ops_and_keeps_leaf_modules() -> None:
    shown = views.view(bert_tiny(), 3)
    layer = [n for n in shown if n.startswith("bert.encoder.layer.0-2")]
    assert layer == [
        "bert.encoder.layer.0-2.attention.self.query",
        "bert.encoder.layer.0-2.attention.self.key",
        "bert.encoder.layer.0-2.attention.self.value",
        "bert.encoder.layer.0-2.attention.self:scaled_dot_product_attention",
        "bert.encoder.layer.0-2.attention.output.dense",
        "bert.encoder.layer.0-2.attention.output.dropout",
        "bert.encoder.layer.0-2.attention.output:add",
        "bert.encoder.layer.0-2.attention.output.LayerNorm",
        "bert.encoder.layer.0-2.intermediate.dense",
        "bert.encoder.layer.0-2.intermediate.intermediate_act_fn",
        "bert.encoder.layer.0-2.output.dense",
        "bert.encoder.layer.0-2.output.dropout",
        "bert.encoder.layer.0-2.output:add",
        "bert.encoder.layer.0-2.output.LayerNorm",
    ]
    assert not any(d.get(g.OP) in views.LAYOUT_OPS for _, d in shown.nodes(data=True))
    sdpa = "bert.encoder.layer.0-2.attention.self:scaled_dot_product_attention"
    assert shown.nodes[sdpa][g.KIND] == g.OPERATOR  # a computation of the module itself keeps its op node
    assert shown.nodes[sdpa][g.REPEAT] == 3
    assert set(shown.predecessors(sdpa)) == {
        "bert.encoder.layer.0-2.attention.self.query",
        "bert.encoder.layer.0-2.attention.self.key",
        "bert.encoder.layer.0-2.attention.self.value",
        "bert:ops",
    }
    # The copy (contiguous) writes a tensor: its bytes go to the op that reads it.
    dense = shown.nodes["bert.encoder.layer.0-2.attention.output.dense"]
    assert dense[g.ACTIVATION_BYTES] == str(Poly.parse("1536*batch*seq") + Poly.parse("1536*batch*seq"))
    assert shown.nodes["bert.encoder.layer.0-2.attention.output.dense"][g.MODULE_TYPE] == "Linear"
    embedding_sum = [n for n in shown if n.startswith("bert.embeddings:ops")]
    assert embedding_sum == ["bert.embeddings:ops"]  # the two adds feed each other: one node
    assert (
        shown.nodes["bert.embeddings:ops"][g.OPS] == ["add", "add_1"]
        or len(shown.nodes["bert.embeddings:ops"][g.OPS]) >= 1
    )


def test_anatomy_of_a_base_model_names_the_root_ops() -> None:
    shown = views.anatomy(bert_tiny("base"))
    assert ":ops" in shown or any(n.startswith(":ops") for n in shown)
    assert g.total_params(shown) == TOTAL - 258


# --- bridging layout ops -------------------------------------------------------------------------


def _layout_graph(cost: dict[str, Any], neighbours: bool = True) -> nx.DiGraph:
    graph = g.new_graph()
    graph.add_node("x", **g.io_attributes(g.INPUT, ["batch", 4], "float32", 0))
    if neighbours:
        graph.add_node("a", **op("m.a", "linear", 1, matmul_flops="8", activation_bytes="16"))
    graph.add_node("v", **op("m", "clone", 2, module_type="M", **cost))
    if neighbours:
        graph.add_node("b", **op("m.b", "linear", 3, matmul_flops="8", activation_bytes="16"))
        graph.add_node("c", **op("m.c", "relu", 4, activation_bytes="16"))
        graph.add_edges_from([("x", "a"), ("a", "v"), ("v", "c"), ("v", "b")], shape=["batch", 4], dtype="float32")
    else:
        graph.add_edge("x", "v", shape=["batch", 4], dtype="float32")
    graph.add_node("y", **g.io_attributes(g.OUTPUT, ["batch", 4], "float32", 9))
    graph.add_edge("b" if neighbours else "v", "y", shape=["batch", 4], dtype="float32")
    return graph


def _layout_graph_without_readers(cost: dict[str, Any]) -> nx.DiGraph:
    """The layout op's two readers turned into graph outputs: no op reads what it makes."""
    graph = _layout_graph(cost)
    for node in ("b", "c"):
        graph.nodes[node][g.KIND] = g.OUTPUT
    return graph


def test_a_free_layout_op_is_bridged() -> None:
    shown = views.bridge_layout_ops(_layout_graph({"activation_bytes": "0", "param_bytes": 64}))
    assert "v" not in shown
    assert sorted(shown.edges) == [("a", "b"), ("a", "c"), ("b", "y"), ("x", "a")]
    assert shown.nodes["b"][g.ACTIVATION_BYTES] == "16"


def test_a_costly_layout_op_hands_its_cost_to_the_first_reader() -> None:
    shown = views.bridge_layout_ops(_layout_graph({"activation_bytes": "4*batch", "other_flops": "2"}))
    assert "v" not in shown
    assert shown.nodes["b"][g.ACTIVATION_BYTES] == str(Poly.parse("16") + Poly.parse("4*batch"))
    assert shown.nodes["b"][g.OTHER_FLOPS] == "2"
    assert shown.nodes["c"][g.ACTIVATION_BYTES] == "16"
    assert shown.nodes["a"][g.ACTIVATION_BYTES] == "16"


def test_a_costly_layout_op_without_readers_hands_its_cost_back() -> None:
    graph = _layout_graph_without_readers({"activation_bytes": "4"})
    shown = views.bridge_layout_ops(graph)
    assert "v" not in shown
    assert shown.nodes["a"][g.ACTIVATION_BYTES] == "20"


def test_a_costly_layout_op_with_no_op_around_it_stays() -> None:
    shown = views.bridge_layout_ops(_layout_graph({"activation_bytes": "4"}, neighbours=False))
    assert "v" in shown and list(shown.edges) == [("x", "v"), ("v", "y")]


def test_a_layout_op_that_reads_parameters_stays() -> None:
    shown = views.bridge_layout_ops(_layout_graph({"params": 3}))
    assert "v" in shown


# --- folding -------------------------------------------------------------------------------------


def test_fold_plan_segments() -> None:
    assert views.fold_plan([]) == []
    assert views.fold_plan(["A"]) == [(0, 1, 1)]
    assert views.fold_plan(list("AA")) == [(0, 1, 2)]
    assert views.fold_plan(list("ABBBB")) == [(0, 1, 1), (1, 1, 4)]
    assert views.fold_plan(list("ASSGSSGSSG")) == [(0, 1, 1), (1, 3, 3)]
    assert views.fold_plan(list("ABAB")) == [(0, 2, 2)]
    assert views.fold_plan(list("ABABA")) == [(0, 2, 2), (4, 1, 1)]
    assert views.fold_plan(list("AAAA")) == [(0, 1, 4)]  # one run, never two pairs
    assert views.fold_plan(list("AABAAB")) == [(0, 3, 2)]
    assert views.fold_plan(list("AABB")) == [(0, 1, 2), (2, 1, 2)]
    eight = list("ABCDEFGH")
    assert views.fold_plan(eight * 2) == [(0, 8, 2)]
    nine = list("ABCDEFGHI")
    assert views.fold_plan(nine * 2) == [(i, 1, 1) for i in range(18)]  # periods above MAX_PERIOD are not sought


def test_fold_repeats_names_runs_and_periods() -> None:
    shown = views.view(chain(list("ABBBB")), 4)
    assert sorted(shown) == ["stack.layer.0:A", "stack.layer.1-4:B", "x", "y"]
    node = shown.nodes["stack.layer.1-4:B"]
    assert (node[g.MODULE], node[g.REPEAT], node[g.PARAMS], node[g.ORDER]) == ("stack.layer.1-4", 4, 40, 2)
    assert node[g.PARAM_NAMES] == [f"stack.layer.{i}.weight" for i in range(1, 5)]
    assert node[g.PARAM_BYTES] == 160
    assert list(shown.edges) == [
        ("x", "stack.layer.0:A"),
        ("stack.layer.0:A", "stack.layer.1-4:B"),
        ("stack.layer.1-4:B", "y"),
    ]

    periodic = views.view(chain(list("ASSGSSG")), 4)
    assert sorted(n for n in periodic if n not in "xy") == [
        "stack.layer.0:A",
        "stack.layer.1-4/3:S",
        "stack.layer.2-5/3:S",
        "stack.layer.3-6/3:G",
    ]
    assert periodic.nodes["stack.layer.1-4/3:S"][g.REPEAT] == 2
    assert periodic.nodes["stack.layer.3-6/3:G"][g.PARAMS] == 20
    # Within one period the chain stays; between periods it folds away.
    assert sorted(periodic.edges) == sorted(
        [
            ("x", "stack.layer.0:A"),
            ("stack.layer.0:A", "stack.layer.1-4/3:S"),
            ("stack.layer.1-4/3:S", "stack.layer.2-5/3:S"),
            ("stack.layer.2-5/3:S", "stack.layer.3-6/3:G"),
            ("stack.layer.3-6/3:G", "y"),
        ]
    )


def test_a_gap_in_the_indices_breaks_the_row() -> None:
    graph = chain(list("AAAA"))
    graph = nx.relabel_nodes(graph, {"stack.layer.3:A": "stack.layer.5:A"})
    graph.nodes["stack.layer.5:A"][g.MODULE] = "stack.layer.5"
    graph.nodes["stack.layer.5:A"][g.PARAM_NAMES] = ["stack.layer.5.weight"]
    shown = views.view(graph, 4)
    assert sorted(n for n in shown if n not in "xy") == ["stack.layer.0-2:A", "stack.layer.5:A"]
    assert shown.nodes["stack.layer.0-2:A"][g.REPEAT] == 3
    assert g.REPEAT not in shown.nodes["stack.layer.5:A"]


def test_folding_twice_multiplies_the_repeat() -> None:
    graph = chain(list("AAA"))
    for node in graph:
        graph.nodes[node][g.REPEAT] = 2 if graph.nodes[node][g.KIND] == g.OPERATOR else 1
    shown = views.fold_repeats(graph)
    assert shown.nodes["stack.layer.0-2:A"][g.REPEAT] == 6


def test_node_ids_not_named_after_the_sibling_keep_their_id() -> None:
    graph = nx.relabel_nodes(chain(list("AA")), {"stack.layer.0:A": "first", "stack.layer.1:A": "second"})
    shown = views.fold_repeats(graph)
    assert sorted(shown) == ["first", "x", "y"]
    assert shown.nodes["first"][g.MODULE] == "stack.layer.0-1"
    graph = nx.relabel_nodes(
        chain(list("AA")), {"stack.layer.0:A": "stack.layer.0x", "stack.layer.1:A": "stack.layer.1x"}
    )
    assert sorted(views.fold_repeats(graph)) == ["stack.layer.0x", "x", "y"]
    graph = nx.relabel_nodes(
        chain(list("AA")), {"stack.layer.0:A": "stack.layer.0.a", "stack.layer.1:A": "stack.layer.1.a"}
    )
    assert sorted(views.fold_repeats(graph)) == ["stack.layer.0-1.a", "x", "y"]


def test_a_view_cannot_fold_without_the_operator_content() -> None:
    shown = views.view(bert_tiny(), 2, fold=False)
    with pytest.raises(
        ValueError, match=r"^fold a view with the sibling_content\(\) of the operator graph it was made from$"
    ):
        views.fold_repeats(shown)
    assert views.fold_repeats(shown, views.sibling_content(bert_tiny()))  # with it, it folds
    assert "bert.encoder.layer.0-2" in views.fold_repeats(shown, views.sibling_content(bert_tiny()))
    assert "bert.encoder.layer.0" in views.fold_repeats(shown, {})  # unknown content folds with none


@pytest.mark.parametrize(("edited", "boxes"), [(1, ["0", "1", "2"]), (2, ["0-1", "2"]), (0, ["0", "1-2"])])
def test_a_layer_that_runs_another_activation_stays_apart(edited: int, boxes: list[str]) -> None:
    graph = bert_tiny()
    gelu = f"bert.encoder.layer.{edited}.intermediate.intermediate_act_fn:gelu"
    graph.nodes[gelu][g.OP] = "relu"
    for depth in (2, 3, 4):
        shown = views.view(graph, depth)
        found = sorted({d[g.MODULE].split(".")[3] for _, d in shown.nodes(data=True) if ".layer." in d[g.MODULE]})
        assert found == boxes, depth


def test_sibling_content_ignores_the_index_only() -> None:
    content = views.sibling_content(bert_tiny())
    assert sorted(content) == [f"bert.encoder.layer.{i}" for i in range(3)]
    assert len(set(content.values())) == 1
    assert all(len(digest) == 64 for digest in content.values())
    for attribute, value in [
        (g.MODULE_TYPE, "Other"),
        (g.TARGET, "aten.gelu.other"),
        (g.SHAPE, ["batch", "seq", 7]),
        (g.DTYPE, "float16"),
        (g.INPUTS, [["batch"]]),
        (g.ALIAS, True),
        (g.PARAMS, 1),
        (g.PARAM_NAMES, ["x"]),
        (g.SHARED_PARAMS, ["y"]),
        (g.REPEAT, 2),
        (g.OWN_OPS, True),
        (g.KIND, g.MODULE_NODE),
        (g.ATTENTION, g.CAUSAL),
    ]:
        changed = bert_tiny()
        changed.nodes["bert.encoder.layer.1.intermediate.intermediate_act_fn:gelu"][attribute] = value
        digests = views.sibling_content(changed)
        assert digests["bert.encoder.layer.1"] != digests["bert.encoder.layer.0"], attribute
        assert digests["bert.encoder.layer.0"] == digests["bert.encoder.layer.2"], attribute


def test_sibling_content_covers_the_wiring() -> None:
    gelu = "bert.encoder.layer.1.intermediate.intermediate_act_fn:gelu"
    for attribute, value in [(g.SHAPE, [1]), (g.DTYPE, "int8"), (g.ALIAS, True), (g.TENSORS, 2)]:
        changed = bert_tiny()
        source = next(iter(changed.predecessors(gelu)))
        changed.edges[source, gelu][attribute] = value
        digests = views.sibling_content(changed)
        assert digests["bert.encoder.layer.1"] != digests["bert.encoder.layer.0"], attribute
    # An op read outside its layer.
    changed = bert_tiny()
    changed.add_edge(gelu, "logits")
    assert len(set(views.sibling_content(changed).values())) == 2
    # The mask every layer reads counts by where it comes from.
    changed = bert_tiny()
    sdpa = "bert.encoder.layer.1.attention.self:scaled_dot_product_attention"
    mask = [s for s in changed.predecessors(sdpa) if ".layer." not in s]
    assert len(mask) == 1
    changed.add_node("other_mask", **dict(changed.nodes[mask[0]]))
    data = changed.edges[mask[0], sdpa]
    changed.remove_edge(mask[0], sdpa)
    changed.add_edge("other_mask", sdpa, **data)
    changed.add_edge("other_mask", "bert.encoder.layer.2.attention.self:scaled_dot_product_attention", **data)
    changed.remove_edge(mask[0], "bert.encoder.layer.2.attention.self:scaled_dot_product_attention")
    digests = views.sibling_content(changed)
    assert digests["bert.encoder.layer.1"] == digests["bert.encoder.layer.2"] != digests["bert.encoder.layer.0"]


def test_the_relative_path_cuts_only_the_sibling() -> None:
    assert views._relative("a.layer.3.x", "a.layer.3") == ".x"
    assert views._relative("a.layer.3", "a.layer.3") == ""
    assert views._relative("a.layer.30.x", "a.layer.3") == "a.layer.30.x"


# --- merging -------------------------------------------------------------------------------------


def test_merged_edges_count_the_tensors_they_stand_for() -> None:
    graph = g.new_graph()
    graph.add_node("x", **g.io_attributes(g.INPUT, [2], "float32", 0))
    graph.add_node("p", **op("a.p", "linear", 1))
    graph.add_node("q", **op("a.q", "linear", 2))
    graph.add_node("r", **op("b", "add", 3))
    graph.add_node("s", **op("b", "mul", 4))
    graph.add_edges_from([("x", "p"), ("x", "q"), ("p", "r"), ("q", "r"), ("p", "s")], shape=[2], dtype="float32")
    shown = views.merge_nodes(graph, lambda node, data: data[g.MODULE].split(".")[0])
    assert sorted(shown.edges) == [("a", "b"), ("x", "a")]
    assert shown.edges["a", "b"][g.TENSORS] == 2
    assert g.TENSORS not in shown.edges["x", "a"]  # one tensor, read twice
    assert shown.nodes["a"][g.OPS] == ["linear"]
    assert shown.nodes["b"][g.OPS] == ["add", "mul"]
    assert shown.nodes["b"][g.ORDER] == 3


def test_own_ops_split_into_connected_pieces() -> None:
    graph = g.new_graph()
    graph.add_node("x", **g.io_attributes(g.INPUT, [2], "float32", 0))
    graph.add_node("first", **op("m", "slice", 1, module_type="M"))
    graph.add_node("child", **op("m.c", "linear", 2, params=5))
    graph.add_node("second", **op("m", "add", 3, module_type="M"))
    graph.add_node("third", **op("m", "mul", 4, module_type="M"))
    graph.add_edges_from([("x", "first"), ("first", "child"), ("child", "second"), ("second", "third")])
    graph.graph[g.G_MODULES] = {"m": {"type": "M"}, "m.c": {"type": "Linear"}}
    shown = views.collapse(graph, 2)
    assert list(shown) == ["x", "m:ops", "m.c", "m:ops.1"]
    assert shown.nodes["m:ops.1"][g.OPS] == ["add", "mul"]
    assert shown.nodes["m:ops"][g.OWN_OPS] is True and shown.nodes["m:ops"][g.MODULE] == "m"
    assert shown.nodes["m.c"][g.MODULE_TYPE] == "Linear" and g.OWN_OPS not in shown.nodes["m.c"]
    assert shown.nodes["m:ops.1"][g.SHAPE] == ["batch", 4]
    # At depth 1 everything is the module m.
    assert list(views.collapse(graph, 1)) == ["x", "m"]
    assert views.collapse(graph, 1).nodes["m"][g.PARAMS] == 5


def test_a_group_spanning_modules_is_marked_own_ops() -> None:
    graph = g.new_graph()
    graph.add_node("a", **op("m.a", "linear", 0, module_type="Linear"))
    graph.add_node("b", **op("n.b", "relu", 1, module_type="ReLU", repeat=3))
    graph.add_edge("a", "b")
    shown = views.merge_nodes(graph, lambda node, data: "group")
    node = shown.nodes["group"]
    assert node[g.OWN_OPS] is True
    assert node[g.MODULE] == "m.a" and node[g.MODULE_TYPE] == "Linear"
    assert node[g.REPEAT] == 3
    assert node[g.SHAPE] == ["batch", 4]


def test_the_exit_node_is_the_last_one_read_outside() -> None:
    graph = g.new_graph()
    graph.add_node("a", **op("m", "linear", 0, shape=[1]))
    graph.add_node("b", **op("m", "relu", 1, shape=[2]))
    graph.add_node("c", **op("m", "add", 2, shape=[3]))
    graph.add_node("d", **op("n", "mul", 3, shape=[4]))
    graph.add_edges_from([("a", "b"), ("b", "d"), ("a", "c"), ("c", "b")])
    assert views._exit_node(graph, ["a", "b", "c"]) == "b"
    assert views._exit_node(graph, ["d"]) == "d"
    shown = views.merge_nodes(graph, lambda node, data: data[g.MODULE])
    assert shown.nodes["m"][g.SHAPE] == [2]


def test_keep_ids_keeps_a_lone_op_as_it_is() -> None:
    graph = g.new_graph()
    graph.add_node("a", **op("m", "linear", 0))
    graph.add_node("b", **op("m", "relu", 1))
    graph.add_edge("a", "b")
    shown = views.merge_nodes(graph, lambda node, data: node, keep_ids=True)
    assert dict(shown.nodes(data=True)) == dict(graph.nodes(data=True))
    merged = views.merge_nodes(graph, lambda node, data: node)
    assert merged.nodes["a"][g.KIND] == g.MODULE_NODE


# --- keeping views -------------------------------------------------------------------------------


def test_kept_views_are_computed_once_and_handed_out_as_copies() -> None:
    graph = bert_tiny()
    kept = views.KeptViews()
    kept.add(graph)
    kept.add(graph)  # adding twice keeps what was computed
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert kept.get(graph, "k", compute) == 1 and kept.get(graph, "k", compute) == 1
    assert kept.get(bert_tiny(), "k", compute) == 2  # another graph is not kept
    with kept.active():
        first = views.view(graph, 2)
        first.remove_node("classifier")
        second = views.view(graph, 2)
        assert "classifier" in second
        assert views.sibling_content(graph) is not views.sibling_content(graph)
        assert views.sibling_content(graph) == views.sibling_content(bert_tiny())
        stored = kept._graphs[id(graph)][1]
        assert ("view", 2, True) in stored and "sibling_content" in stored
    assert views._KEPT.get() is None
    assert views.view(graph, 2).nodes(data=True) == second.nodes(data=True)


def test_kept_views_end_with_their_block_even_on_error() -> None:
    kept = views.KeptViews()
    with pytest.raises(RuntimeError), kept.active():
        raise RuntimeError
    assert views._KEPT.get() is None


# --- cases found by mutation testing ---------------------------------------------------------------


def test_without_a_backbone_no_module_is_skipped() -> None:
    assert views.display_levels("XXXX.a") == ("XXXX", "XXXX.a")  # the default: no backbone
    assert views.display_name("XXXX.a") == "XXXX.a"
    graph = chain(list("AB"), container="XXXX.layer")
    del graph.graph[g.G_BACKBONE]
    assert [m[0] for m in modules(views.view(graph, 1))] == ["XXXX"]
    assert [m[0] for m in modules(views.view(graph, 2))] == ["XXXX.layer.0", "XXXX.layer.1"]


def test_a_graph_without_a_module_table_has_every_view() -> None:
    graph = chain(list("AAB"))
    del graph.graph[g.G_MODULES]
    shown = views.view(graph, 3)
    assert sorted(n for n in shown if n not in "xy") == ["stack.layer.0-1", "stack.layer.2"]
    assert g.total_params(shown) == 30
    assert views.view(graph, 1).nodes["stack"][g.MODULE_TYPE] == ""  # unknown: not the model's class


def test_ops_of_the_model_itself_stay_outside_the_backbone() -> None:
    graph = chain(list("A"), container="b.layer")
    graph.graph[g.G_BACKBONE] = "b"
    graph.add_node("root", **op("", "add", 5, module_type="Toy"))
    graph.add_edge("b.layer.0:A", "root")
    shown = views.collapse(graph, 1)
    assert list(shown) == ["x", "b.layer.0", "y", ":ops"]  # not merged into the backbone
    assert shown.nodes[":ops"][g.OPS] == ["add"]


def test_top_level_leaf_modules_are_single_nodes_in_the_anatomy() -> None:
    shown = views.view(bert_tiny(), 3)
    assert shown.nodes["classifier"][g.KIND] == g.MODULE_NODE
    assert shown.nodes["classifier"][g.PARAMS] == 258
    assert shown.nodes["dropout"][g.MODULE_TYPE] == "Dropout"


def test_separate_own_computations_of_one_module_are_numbered() -> None:
    graph = g.new_graph(**{g.G_MODULES: {"": {"type": "Toy"}, "m": {"type": "M"}, "m.c": {"type": "Linear"}}})
    graph.add_node("x", **g.io_attributes(g.INPUT, [2], "float32", 0))
    graph.add_node("z1", **op("m", "slice", 1, module_type="M"))
    graph.add_node("y1", **op("m", "mul", 2, module_type="M"))
    graph.add_node("child", **op("m.c", "linear", 3, params=5))
    graph.add_node("b2", **op("m", "add", 4, module_type="M"))
    graph.add_node("a2", **op("m", "mul", 5, module_type="M"))
    graph.add_edges_from([("x", "z1"), ("z1", "y1"), ("y1", "child"), ("child", "b2"), ("b2", "a2")])
    shown = views.anatomy(graph)
    assert list(shown) == ["x", "m:ops.0", "m.c", "m:ops.1"]
    assert shown.nodes["m:ops.0"][g.OPS] == ["slice", "mul"]  # in execution order, not by id
    assert shown.nodes["m:ops.1"][g.OPS] == ["add", "mul"]
    assert shown.nodes["m:ops.1"][g.ORDER] == 4
    collapsed = views.collapse(graph, 2)
    assert list(collapsed) == ["x", "m:ops", "m.c", "m:ops.1"]
    assert collapsed.nodes["m:ops"][g.OPS] == ["slice", "mul"]


def test_a_layout_op_that_cannot_hand_on_its_cost_does_not_stop_the_others() -> None:
    graph = _layout_graph({"activation_bytes": "4"}, neighbours=False)  # v stays: no op around it
    graph.add_node("x2", **g.io_attributes(g.INPUT, ["batch", 4], "float32", 7))
    graph.add_node("w", **op("m", "view", 8, module_type="M"))
    graph.add_node("k", **op("m.k", "relu", 9, activation_bytes="8"))
    graph.add_node("y2", **g.io_attributes(g.OUTPUT, ["batch", 4], "float32", 10))
    graph.add_edges_from([("x2", "w"), ("w", "k"), ("k", "y2")], shape=["batch", 4], dtype="float32")
    shown = views.bridge_layout_ops(graph)
    assert "v" in shown and "w" not in shown
    assert shown.has_edge("x2", "k")


def test_bridged_edges_carry_the_tensor_and_keep_existing_edges() -> None:
    graph = _layout_graph({"activation_bytes": "0"})
    graph.edges["v", "b"].update(shape=["batch", 8], args=[1])
    graph.add_edge("a", "b", shape=["batch", 2], args=[0])
    shown = views.bridge_layout_ops(graph)
    assert shown.edges["a", "b"] == {"shape": ["batch", 2], "args": [0]}  # the edge that was there stays
    assert shown.edges["a", "c"] == {"shape": ["batch", 4], "dtype": "float32"}


def test_a_free_layout_op_with_no_op_around_it_is_bridged() -> None:
    shown = views.bridge_layout_ops(_layout_graph({"activation_bytes": "0"}, neighbours=False))
    assert "v" not in shown and list(shown.edges) == [("x", "y")]


def test_cost_goes_to_the_earliest_reader_by_execution_order_not_by_name() -> None:
    graph = _layout_graph({"activation_bytes": "4"})
    # Names sort the other way round from execution order: "a_late" runs after "z_early".
    graph = nx.relabel_nodes(graph, {"b": "a_late", "c": "z_early"})
    graph.nodes["a_late"][g.ORDER], graph.nodes["z_early"][g.ORDER] = 4, 3
    shown = views.bridge_layout_ops(graph)
    assert shown.nodes["z_early"][g.ACTIVATION_BYTES] == "20"
    assert shown.nodes["a_late"][g.ACTIVATION_BYTES] == "16"


def test_without_readers_cost_goes_to_the_latest_input() -> None:
    graph = _layout_graph_without_readers({"activation_bytes": "4"})
    graph.add_node("z", **op("m.z", "linear", 0, activation_bytes="16"))  # an earlier input, named last
    graph.add_edge("z", "v")
    graph.nodes["a"][g.ORDER] = 1
    shown = views.bridge_layout_ops(graph)
    assert shown.nodes["a"][g.ACTIVATION_BYTES] == "20"
    assert shown.nodes["z"][g.ACTIVATION_BYTES] == "16"
    graph = nx.relabel_nodes(graph, {"a": "zz", "z": "aa"})
    shown = views.bridge_layout_ops(graph)
    assert shown.nodes["zz"][g.ACTIVATION_BYTES] == "20"


def test_fold_plan_prefers_the_longest_cover() -> None:
    assert views.fold_plan(list("AAABAAAB")) == [(0, 4, 2)]
    assert views.fold_plan(list("ABABAB")) == [(0, 2, 3)]


def test_a_period_of_two_is_named_with_its_step() -> None:
    shown = views.view(chain(list("ABAB")), 4)
    assert sorted(n for n in shown if n not in "xy") == ["stack.layer.0-2/2:A", "stack.layer.1-3/2:B"]


def test_folded_ops_without_parameter_names() -> None:
    graph = chain(list("AA"), params=0)
    for _, data in graph.nodes(data=True):
        data.pop(g.PARAM_NAMES, None)
    shown = views.fold_repeats(graph)
    assert shown.nodes["stack.layer.0-1:A"][g.PARAM_NAMES] == []
    assert shown.nodes["stack.layer.0-1:A"][g.PARAMS] == 0


def test_the_first_of_merged_edges_gives_the_folded_edge_its_facts() -> None:
    graph = chain(list("AAA"))
    graph = nx.relabel_nodes(graph, {"stack.layer.0:A": "c0", "stack.layer.1:A": "b1", "stack.layer.2:A": "a2"})
    graph.add_node("m", **g.io_attributes(g.INPUT, ["batch", 4], "bool", 0))
    for number, node in enumerate(["c0", "b1", "a2"]):
        graph.add_edge("m", node, shape=["batch", 4], dtype="bool", args=[number + 1])
    shown = views.fold_repeats(graph)
    assert sorted(shown) == ["c0", "m", "x", "y"]
    assert shown.nodes["c0"][g.REPEAT] == 3
    assert shown.edges["m", "c0"]["args"] == [1]  # the first layer's, in execution order


def test_merged_edges_take_the_facts_of_the_first_edge_in_execution_order() -> None:
    graph = g.new_graph()
    graph.add_node("s1", **op("a", "linear", 1))
    graph.add_node("s2", **op("a", "relu", 2))
    graph.add_node("t1", **op("b", "add", 3))
    graph.add_node("t2", **op("b", "mul", 4))
    graph.add_edge("s1", "t2", args=[1])
    graph.add_edge("s2", "t1", args=[2])
    shown = views.merge_nodes(graph, lambda node, data: data[g.MODULE])
    assert shown.edges["a", "b"]["args"] == [1]  # from s1, the earlier source
    graph = g.new_graph()
    graph.add_node("s", **op("a", "linear", 1))
    graph.add_node("b_first", **op("b", "add", 2))
    graph.add_node("a_second", **op("b", "mul", 3))
    graph.add_edge("s", "a_second", args=[2])
    graph.add_edge("s", "b_first", args=[1])
    shown = views.merge_nodes(graph, lambda node, data: data[g.MODULE])
    assert shown.edges["a", "b"]["args"] == [1]  # to the earlier target, whatever its name


def test_the_exit_node_is_chosen_by_execution_order() -> None:
    graph = g.new_graph()
    graph.add_node("z", **op("m", "linear", 0, shape=[1]))
    graph.add_node("a", **op("m", "relu", 2, shape=[2]))
    graph.add_node("out", **op("n", "add", 3))
    graph.add_edges_from([("z", "out"), ("a", "out")])
    assert views._exit_node(graph, ["z", "a"]) == "a"
    assert views._exit_node(graph, ["a", "z"]) == "a"


def test_repeat_is_recorded_only_for_folded_nodes() -> None:
    unfolded = views.view(bert_tiny(), 2, fold=False)
    assert not any(g.REPEAT in d for _, d in unfolded.nodes(data=True))
    pair = views.view(chain(list("AA")), 2)
    assert pair.nodes["stack.layer.0-1"][g.REPEAT] == 2


def test_a_top_level_list_folds() -> None:
    shown = views.view(chain(list("AAA"), container="layers"), 4)
    assert sorted(n for n in shown if n not in "xy") == ["layers.0-2:A"]


def test_modules_in_a_list_container_that_are_not_numbered_are_not_siblings() -> None:
    graph = chain(list("AA"))
    graph.add_node("norm", **op("stack.layer.norm", "layer_norm", 3, module_type="LayerNorm"))
    graph.add_edge("stack.layer.1:A", "norm")
    graph.nodes["y"][g.ORDER] = 4
    shown = views.view(graph, 4)
    assert sorted(n for n in shown if n not in "xy") == ["norm", "stack.layer.0-1:A"]


def test_sibling_content_covers_module_paths_and_where_inputs_come_from() -> None:
    changed = bert_tiny()
    changed.nodes["bert.encoder.layer.1.intermediate.intermediate_act_fn:gelu"][g.MODULE] = (
        "bert.encoder.layer.1.intermediate.act"
    )
    digests = views.sibling_content(changed)
    assert digests["bert.encoder.layer.1"] != digests["bert.encoder.layer.0"] == digests["bert.encoder.layer.2"]
    # Two masks, each read by two layers: the layers reading the same mask fold together.
    graph = chain(list("AAAA"))
    for mask, readers in (("m1", (0, 1)), ("m2", (2, 3))):
        graph.add_node(mask, **g.io_attributes(g.INPUT, ["batch", 4], "bool", 0))
        for index in readers:
            graph.add_edge(mask, f"stack.layer.{index}:A", shape=["batch", 4], dtype="bool")
    shown = views.fold_repeats(graph)
    assert sorted(n for n in shown if n.startswith("stack")) == ["stack.layer.0-1:A", "stack.layer.2-3:A"]
    # The tensor passed in from the layer before counts by its facts.
    graph = chain(list("AAA"))
    graph.edges["stack.layer.0:A", "stack.layer.1:A"][g.DTYPE] = "float16"
    content = views.sibling_content(graph)
    assert content["stack.layer.1"] != content["stack.layer.2"]


def test_the_default_view_is_level_two_folded() -> None:
    graph = bert_tiny()
    default = views.view(graph)
    assert list(default) == list(views.view(graph, 2, fold=True))
    assert "bert.encoder.layer.0-2" in default


def test_a_group_of_nodes_folded_twice_keeps_its_repeat() -> None:
    graph = views.view(chain(list("AA")), 4)
    (folded,) = (n for n in graph if n not in "xy")
    assert graph.nodes[folded][g.REPEAT] == 2
    merged = views.merge_nodes(graph, lambda node, data: "stack")
    assert merged.nodes["stack"][g.REPEAT] == 2


def test_list_containers_are_listed_outermost_first_then_by_name() -> None:
    graph = g.new_graph()
    paths = ["z.0.b.1", "a.3", "m.0.c.2", "b.1", "m.0.a.0.q.4", "y.2"]
    for index, path in enumerate(paths):
        graph.add_node(path, **op(path, "relu", index))
    assert views._list_containers(graph) == ["a", "b", "m", "y", "z", "m.0.a", "m.0.c", "z.0.b", "m.0.a.0.q"]


def test_siblings_that_pass_data_through_their_parents_ops_do_not_fold() -> None:
    """Folded, ``layer.0-2`` would feed the flips and they it: a cycle. Neither is folded."""
    graph = interleaved_chain()
    assert views.interleaved_lists(graph) == {"stack.layer"}
    assert views.fold_repeats(graph) is graph
    for depth in (1, 2, 3, 4):
        assert nx.is_directed_acyclic_graph(views.view(graph, depth)), depth
    shown = views.view(graph, 4)
    assert sorted(n for n in shown if n.startswith("stack.layer")) == [f"stack.layer.{i}:A" for i in range(3)]
    assert views.interleaved_lists(chain(list("AAA"))) == frozenset()  # back to back, they fold
    two = interleaved_chain(2)
    assert views.interleaved_lists(two) == {"stack.layer"}
    single = chain(["A"])
    assert views.interleaved_lists(single) == frozenset()  # one item has nothing to fold with


# --- a shared layer's calls folded into its first (ALBERT) ------------------------------------------


def _shared_layer(
    calls: int, ops: tuple[str, ...] = ("attention:linear", "mlp:gelu"), last_call_ops: tuple[str, ...] = ()
) -> nx.DiGraph:
    """``x → (attention linear → mlp gelu) × calls → y`` in a layer called ``calls`` times, each op costing
    its call's index + 1 (so folded sums tell the calls apart), a norm outside reading every call's
    output. Ops are numbered backwards (call 0's last), so their names do not sort in execution order;
    call 0 carries no ``call``, as in a trace; each edge's shape ends in its call's index."""
    graph = nx.DiGraph(**{g.G_SHARED: {"encoder.shared": calls}})
    graph.add_node("x", **{g.KIND: g.INPUT, g.ORDER: 0})
    previous, order = "x", 1
    outputs = []
    for call in range(calls):
        names = last_call_ops if last_call_ops and call == calls - 1 else ops
        for name in names:
            part, _, kind = name.partition(":")
            node = f"encoder.shared.{part}:{kind}_{calls - call}"
            graph.add_node(
                node,
                **{g.KIND: g.OPERATOR, g.OP: kind, g.MODULE: f"encoder.shared.{part}", g.ORDER: order},
                **({g.CALL: call} if call else {}),
                **{g.MATMUL_FLOPS: str(call + 1), g.PARAM_BYTES: 10 * (call + 1)},
            )
            graph.add_edge(previous, node, **{g.SHAPE: ["batch", "seq", call]})
            previous, order = node, order + 1
        outputs.append(previous)
    graph.add_node("norm:layer_norm", **{g.KIND: g.OPERATOR, g.OP: "layer_norm", g.MODULE: "norm", g.ORDER: order})
    for call, output in enumerate(outputs):
        graph.add_edge(output, "norm:layer_norm", **{g.SHAPE: ["batch", "seq", call]})
    graph.add_node("y", **{g.KIND: g.OUTPUT, g.ORDER: order + 1})
    graph.add_edge("norm:layer_norm", "y")
    return graph


def test_a_shared_layers_calls_fold_into_its_first_with_every_calls_cost() -> None:
    graph = _shared_layer(3)
    folded = views.fold_calls(graph)
    linear, gelu = "encoder.shared.attention:linear_3", "encoder.shared.mlp:gelu_3"
    assert list(folded) == ["x", linear, gelu, "norm:layer_norm", "y"]
    assert sorted(folded.edges) == sorted(
        [("x", linear), (linear, gelu), (gelu, "norm:layer_norm"), ("norm:layer_norm", "y")]
    )
    for node in (linear, gelu):
        assert folded.nodes[node][g.MATMUL_FLOPS] == "6"  # 1 + 2 + 3
        assert folded.nodes[node][g.PARAM_BYTES] == 60
        assert g.CALL not in folded.nodes[node]
    # An edge standing for several keeps the first call's, in execution order.
    assert folded.edges[gelu, "norm:layer_norm"] == {g.SHAPE: ["batch", "seq", 0]}
    assert folded.edges["x", linear] == {g.SHAPE: ["batch", "seq", 0]}
    assert folded.nodes["norm:layer_norm"] == graph.nodes["norm:layer_norm"]
    assert folded.graph == graph.graph
    assert graph.number_of_nodes() == 9  # the graph given is not changed


def test_calls_that_differ_or_a_graph_without_shared_layers_come_back_as_they_are() -> None:
    differing = _shared_layer(2, last_call_ops=("attention:linear", "attention:matmul", "mlp:gelu"))
    assert views.fold_calls(differing) is differing
    # A part of the layer only a later call runs has no first call to fold into.
    another_part = _shared_layer(2, last_call_ops=("attention:linear", "output:gelu"))
    assert views.fold_calls(another_part) is another_part
    unshared = _shared_layer(1)
    unshared.graph[g.G_SHARED] = {}
    assert views.fold_calls(unshared) is unshared
    # A fold that would make a cycle (an op outside reads call 0 and feeds call 1) is not made.
    cyclic = _shared_layer(2)
    cyclic.add_node("side:add", **{g.KIND: g.OPERATOR, g.OP: "add", g.MODULE: "side", g.ORDER: 3})
    cyclic.add_edge("encoder.shared.mlp:gelu_2", "side:add")
    cyclic.add_edge("side:add", "encoder.shared.attention:linear_1")
    assert views.fold_calls(cyclic) is cyclic


def test_a_fold_that_would_make_an_op_feed_one_that_ran_before_it_is_not_made() -> None:
    """An op outside the layer runs between two calls, reads call 0's first op and feeds call 1's
    second: folded, it would feed call 0's second op, which ran before it. The op graph stays
    acyclic, but every view takes execution order for a topological order, so the calls stay apart
    and each view of the graph is acyclic."""
    graph = _shared_layer(2)
    first, second = "encoder.shared.attention:linear_2", "encoder.shared.mlp:gelu_1"
    graph.add_node("side:relu", **{g.KIND: g.OPERATOR, g.OP: "relu", g.MODULE: "side", g.ORDER: 3.5})
    graph.add_edge(first, "side:relu")
    graph.add_edge("side:relu", second)
    for number, node in enumerate(sorted(graph, key=lambda n: graph.nodes[n][g.ORDER])):
        graph.nodes[node][g.ORDER] = number  # whole numbers, as a trace has them
    assert views.fold_calls(graph) is graph
    for level in range(5):
        assert nx.is_directed_acyclic_graph(views.view(graph, level))


def test_ops_that_share_a_place_in_execution_order_do_not_stop_a_fold() -> None:
    """Only an edge that runs backwards keeps the calls apart; one between ops recorded at the same
    place (an input and the op reading it, both at 1) runs no way back."""
    graph = _shared_layer(2)
    graph.nodes["x"][g.ORDER] = 1
    folded = views.fold_calls(graph)
    linear, gelu = "encoder.shared.attention:linear_2", "encoder.shared.mlp:gelu_2"
    assert sorted(folded) == sorted(["x", linear, gelu, "norm:layer_norm", "y"])
