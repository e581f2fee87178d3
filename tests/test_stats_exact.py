"""Tables computed in-process from a committed bert-tiny graph and hand-built chains, checked exactly.

The numbers are BERT's arithmetic for hidden 128, intermediate 512, vocabulary 30522,
512 positions and 3 layers; these tests also serve the mutation run (docs/mutation.md).
"""

from __future__ import annotations

import json

import networkx as nx
import pytest

from bertgraph.graph import schema as g
from bertgraph.graph import stats
from tests.graph_fixtures import bert_tiny, chain, interleaved_chain

EMBEDDINGS = 30522 * 128 + 512 * 128 + 2 * 128 + 2 * 128  # word, position, token type tables, LayerNorm
LAYER = 4 * (128 * 128 + 128) + 2 * 256 + 128 * 512 + 512 + 512 * 128 + 128
POOLER = 128 * 128 + 128
CLASSIFIER = 128 * 2 + 2
BASE = EMBEDDINGS + 3 * LAYER + POOLER
TOTAL = BASE + CLASSIFIER


def test_the_fixture_totals_are_berts_arithmetic() -> None:
    assert (EMBEDDINGS, LAYER, TOTAL) == (3_972_864, 198_272, 4_584_450)


def test_module_params_count_everything_below_a_path() -> None:
    totals = stats.module_params(bert_tiny())
    assert totals[""] == TOTAL and totals["bert"] == BASE
    assert totals["bert.embeddings"] == EMBEDDINGS
    assert totals["bert.encoder"] == totals["bert.encoder.layer"] == 3 * LAYER
    assert totals["bert.encoder.layer.1"] == LAYER
    assert totals["bert.encoder.layer.1.attention.self.query"] == 128 * 128 + 128
    assert totals["classifier"] == CLASSIFIER
    assert "dropout" not in totals  # no parameters, no entry
    assert stats._ancestors("a.b.c") == ["", "a", "a.b", "a.b.c"]
    assert stats._ancestors("") == [""]


def test_parameter_stats_of_bert_tiny() -> None:
    table = stats.parameter_stats(bert_tiny())
    assert {k: table[k] for k in ("model", "head", "model_class", "total", "trainable")} == {
        "model": "bert-tiny",
        "head": "sequence-classification",
        "model_class": "BertForSequenceClassification",
        "total": TOTAL,
        "trainable": TOTAL,
    }
    assert table["groups"] == {
        "embeddings": EMBEDDINGS,
        "encoder": 3 * LAYER,
        "pooler": POOLER,
        "classifier": CLASSIFIER,
        "dropout": 0,
    }
    assert list(table["groups"]) == ["embeddings", "encoder", "pooler", "classifier", "dropout"]
    assert len(table["parameters"]) == 5 + 3 * 16 + 2 + 2
    assert table["parameters"][0] == {
        "name": "bert.embeddings.word_embeddings.weight",
        "shape": [30522, 128],
        "numel": 30522 * 128,
        "trainable": True,
    }
    json.dumps(table)  # plain data


def test_parameter_stats_count_frozen_rows_and_the_models_own() -> None:
    graph = chain(list("AB"))
    rows = graph.graph[g.G_PARAMETERS]
    rows[0]["trainable"] = False
    rows.append({"name": "scale", "shape": [3], "numel": 3, "module": ""})  # no "trainable": trainable
    table = stats.parameter_stats(graph)
    assert (table["total"], table["trainable"]) == (23, 13)
    assert table["groups"] == {"stack": 20, "(model)": 3}
    assert [p["trainable"] for p in table["parameters"]] == [False, True, True]
    assert table["parameters"][2] == {"name": "scale", "shape": [3], "numel": 3, "trainable": True}
    assert "(model)" not in stats.parameter_stats(chain(list("AB")))["groups"]
    empty = g.new_graph()
    assert stats.parameter_stats(empty) == {
        "model": "",
        "head": "",
        "model_class": "",
        "total": 0,
        "trainable": 0,
        "groups": {},
        "parameters": [],
    }


def test_a_graph_without_a_module_table_derives_one() -> None:
    graph = chain(list("AB"))
    del graph.graph[g.G_MODULES]
    assert stats.module_table(graph) == {
        "": {"type": "Toy"},
        "stack": {"type": ""},
        "stack.layer": {"type": ""},
        "stack.layer.0": {"type": "Block"},
        "stack.layer.1": {"type": "Block"},
    }
    graph.nodes["stack.layer.1:B"][g.ORDER] = -1  # the first op seen in execution order names the path
    graph.nodes["stack.layer.1:B"][g.MODULE] = "stack.layer"
    assert stats.module_table(graph)["stack.layer"] == {"type": "Block"}
    assert stats.module_table(chain(list("A")))["stack.layer"] == {"type": "ModuleList", "sizes": "1"}


def test_output_shapes_are_what_leaves_each_module() -> None:
    shapes = stats.output_shapes(bert_tiny())
    assert shapes[""] == [["batch", 2]]
    assert shapes["bert"] == [["batch", 128]]
    assert shapes["bert.embeddings"] == [["batch", "seq", 128]]
    assert shapes["bert.embeddings.position_embeddings"] == [[1, "seq", 128]]
    assert shapes["bert.encoder.layer.0"] == [["batch", "seq", 128]]
    assert shapes["classifier"] == [["batch", 2]]
    assert len(shapes) == 66
    assert all(path != "" or value == [["batch", 2]] for path, value in shapes.items())


def test_output_shapes_list_each_shape_once_in_order() -> None:
    graph = chain(list("AB"))
    graph.nodes["stack.layer.0:A"][g.SHAPE] = [7]
    graph.add_node("z", **g.io_attributes(g.OUTPUT, [7], "float32", 9))
    graph.add_edge("stack.layer.0:A", "z")
    graph.add_node("w", **g.io_attributes(g.OUTPUT, [7], "float32", 10))
    graph.add_edge("stack.layer.1:B", "w")
    shapes = stats.output_shapes(graph)
    assert shapes["stack.layer.0"] == [[7]]
    assert shapes["stack"] == [[7], ["batch", 4]]
    assert shapes[""] == [[7], ["batch", 4]]
    assert "x" not in shapes and all(path.startswith("stack") or path == "" for path in shapes)


def test_summary_rows_of_bert_tiny() -> None:
    rows = stats.summary_rows(bert_tiny())
    by_path = {row["path"]: row for row in rows}
    root = rows[0]
    assert root == {
        "path": "",
        "name": "BertForSequenceClassification",
        "type": "BertForSequenceClassification",
        "sizes": "",
        "level": 0,
        "depth": 0,
        "params": TOTAL,
        "share": 1.0,
        "shapes": [["batch", 2]],
        "in_fold": False,
    }
    layers = by_path["bert.encoder.layer.0"]
    assert layers["name"] == "(0-2)" and layers["level"] == 4 and layers["depth"] == 2
    assert (layers["params"], layers["each"], layers["repeat"]) == (3 * LAYER, LAYER, 3)
    assert layers["share"] == pytest.approx(3 * LAYER / TOTAL)
    assert "bert.encoder.layer.1" not in by_path
    query = by_path["bert.encoder.layer.0.attention.self.query"]
    assert query["in_fold"] is True and query["params"] == 128 * 128 + 128
    assert query["share"] == pytest.approx((128 * 128 + 128) / TOTAL)  # one instance
    assert query["name"] == "query" and query["sizes"] == "128 → 128"
    assert by_path["bert.encoder.layer"]["name"] == "layer" and by_path["bert.encoder.layer"]["in_fold"] is False
    assert by_path["bert"]["share"] == pytest.approx(BASE / TOTAL)
    assert by_path["classifier"]["level"] == 1 and by_path["classifier"]["depth"] == 1
    assert by_path["bert.embeddings"]["depth"] == 1 and by_path["bert"]["depth"] == 0
    attention = by_path["bert.encoder.layer.0.attention.self"]
    assert attention["attention"] == "bidirectional"
    assert "attention" not in by_path["bert.encoder.layer.0.attention.output"]
    assert all("calls" not in row and "period" not in row for row in rows)
    assert [row["path"] for row in rows][:3] == ["", "bert", "bert.embeddings"]


def test_summary_rows_unfolded_and_by_depth() -> None:
    rows = stats.summary_rows(bert_tiny(), fold=False)
    names = [row["name"] for row in rows if row["path"].startswith("bert.encoder.layer.") and row["level"] == 4]
    assert names == ["(0)", "(1)", "(2)"]
    assert all("repeat" not in row and row["in_fold"] is False for row in rows)
    per_layer = sum(1 for row in rows if row["path"].startswith("bert.encoder.layer.1"))
    assert len(rows) == len(stats.summary_rows(bert_tiny())) + 2 * per_layer
    shallow = stats.summary_rows(bert_tiny(), depth=1)
    assert [row["path"] for row in shallow] == [
        "",
        "bert",
        "bert.embeddings",
        "bert.encoder",
        "bert.pooler",
        "classifier",
        "dropout",
    ]
    assert [row["path"] for row in stats.summary_rows(bert_tiny(), depth=0)] == ["", "bert"]


def test_periodic_siblings_are_named_by_their_indices() -> None:
    rows = stats.summary_rows(chain(list("ASSGSSG")))
    layers = [
        (r["name"], r["params"], r.get("each"), r.get("repeat"), r.get("period")) for r in rows if r["level"] == 3
    ]
    assert layers == [
        ("(0)", 10, None, None, None),
        ("(1, 4)", 20, 10, 2, 3),
        ("(2, 5)", 20, 10, 2, 3),
        ("(3, 6)", 20, 10, 2, 3),
    ]
    rows = stats.summary_rows(chain(list("ABABABAB")))
    assert [r["name"] for r in rows if r["level"] == 3] == ["(0, 2, …, 6)", "(1, 3, …, 7)"]
    assert [r["share"] for r in rows if r["level"] == 3] == [0.5, 0.5]
    rows = stats.summary_rows(chain(list("ABABAB")))
    assert [r["name"] for r in rows if r["level"] == 3] == ["(0, 2, 4)", "(1, 3, 5)"]
    rows = stats.summary_rows(chain(list("AAB")))
    assert [r["name"] for r in rows if r["level"] == 3] == ["(0-1)", "(2)"]


def test_siblings_that_run_other_ops_do_not_fold_in_the_tree() -> None:
    graph = bert_tiny()
    graph.nodes["bert.encoder.layer.1.intermediate.intermediate_act_fn:gelu"][g.OP] = "relu"
    names = [r["name"] for r in stats.summary_rows(graph) if r["path"].count(".") == 3 and ".layer." in r["path"]]
    assert names == ["(0)", "(1)", "(2)"]


def test_siblings_with_other_sizes_do_not_fold_in_the_tree() -> None:
    for key, value in [("sizes", "1 → 2"), ("type", "Other")]:
        graph = chain(list("AAA"))
        graph.graph[g.G_MODULES]["stack.layer.1"][key] = value
        assert [r["name"] for r in stats.summary_rows(graph) if r["level"] == 3] == ["(0)", "(1)", "(2)"], key
    graph = chain(list("AAA"))
    graph.graph[g.G_PARAMETERS][1]["numel"] = 11
    assert [r["name"] for r in stats.summary_rows(graph) if r["level"] == 3] == ["(0)", "(1)", "(2)"]
    graph = chain(list("AAA"))
    graph.nodes["stack.layer.2:A"][g.SHAPE] = [3]
    assert [r["name"] for r in stats.summary_rows(graph) if r["level"] == 3] == ["(0-1)", "(2)"]
    graph = chain(list("AAA"))
    graph.graph[g.G_MODULES]["stack.layer.2.inner"] = {"type": "Extra"}
    assert [r["name"] for r in stats.summary_rows(graph) if r["level"] == 3] == ["(0-1)", "(2)"]
    graph = chain(list("AAA"))
    graph.graph[g.G_MODULES]["stack.layer"]["type"] = "Sequential"  # not a list container: no folding
    assert [r["name"] for r in stats.summary_rows(graph) if r["level"] == 3] == ["0", "1", "2"]


def test_a_shared_module_shows_its_calls_and_a_model_without_parameters_has_no_share() -> None:
    graph = chain(list("AB"))
    graph.graph[g.G_SHARED] = {"stack.layer.0": 12}
    rows = {r["path"]: r for r in stats.summary_rows(graph)}
    assert rows["stack.layer.0"]["calls"] == 12 and "calls" not in rows["stack.layer.1"]
    graph = chain(list("AA"), params=0)
    rows = stats.summary_rows(graph)
    assert {r["share"] for r in rows} == {0.0}
    assert rows[-1]["repeat"] == 2 and rows[-1]["share"] == 0.0


def test_summary_object() -> None:
    result = stats.summary(bert_tiny(), depth=1)
    assert (result["model"], result["head"], result["model_class"]) == (
        "bert-tiny",
        "sequence-classification",
        "BertForSequenceClassification",
    )
    assert (result["total"], result["trainable"]) == (TOTAL, TOTAL)
    assert result["example"] == {"batch": 1, "seq": 128}
    assert len(result["rows"]) == 7
    assert len(stats.summary(bert_tiny(), fold=False)["rows"]) > len(stats.summary(bert_tiny())["rows"])
    assert result["architecture"]
    json.dumps(result)


def test_the_diff_of_two_heads() -> None:
    result = stats.diff(bert_tiny("base"), bert_tiny())
    assert result["added"] == [
        {"module": "classifier", "type": "Linear", "sizes": "128 → 2", "params": CLASSIFIER},
        {"module": "dropout", "type": "Dropout", "sizes": "p=0.1", "params": 0},
    ]
    assert result["removed"] == [] and result["changed"] == []
    assert result["delta"] == CLASSIFIER
    assert result["a"] == {
        "model": "bert-tiny",
        "head": "base",
        "model_class": "BertModel",
        "total": BASE,
        "outputs": [
            {"name": "last_hidden_state", "shape": ["batch", "seq", 128]},
            {"name": "pooler_output", "shape": ["batch", 128]},
        ],
    }
    assert result["b"]["outputs"] == [{"name": "logits", "shape": ["batch", 2]}]
    back = stats.diff(bert_tiny(), bert_tiny("base"))
    assert [entry["module"] for entry in back["removed"]] == ["classifier", "dropout"]
    assert back["delta"] == -CLASSIFIER and back["added"] == []


def test_the_diff_lists_changed_modules_by_their_own_parameters() -> None:
    a, b = bert_tiny(), bert_tiny()
    b.graph[g.G_MODULES]["classifier"] = {"type": "Linear", "sizes": "128 → 3"}
    b.graph[g.G_PARAMETERS] = [
        dict(row, numel=row["numel"] // 2 * 3) if row["module"] == "classifier" else row
        for row in b.graph[g.G_PARAMETERS]
    ]
    b.graph[g.G_MODULES]["bert.pooler.extra"] = {"type": "Extra", "sizes": ""}
    b.graph[g.G_MODULES]["bert.pooler.extra.inner"] = {"type": "Inner", "sizes": ""}
    result = stats.diff(a, b)
    assert result["changed"] == [
        {
            "module": "classifier",
            "a": {"type": "Linear", "sizes": "128 → 2", "params": CLASSIFIER},
            "b": {"type": "Linear", "sizes": "128 → 3", "params": CLASSIFIER // 2 * 3},
        }
    ]
    assert result["added"] == [{"module": "pooler.extra", "type": "Extra", "sizes": "", "params": 0}]
    assert result["delta"] == CLASSIFIER // 2 * 3 - CLASSIFIER
    assert stats.diff(a, a)["changed"] == [] and stats.diff(a, a)["delta"] == 0


def test_the_diff_orders_added_modules_as_the_model_does() -> None:
    a = chain(list("A"))
    b = chain(list("ABC"))
    result = stats.diff(a, b)
    assert [entry["module"] for entry in result["added"]] == ["stack.layer.1", "stack.layer.2"]
    assert stats.diff(b, a)["removed"] == [
        {"module": "stack.layer.1", "type": "Block", "sizes": "", "params": 10},
        {"module": "stack.layer.2", "type": "Block", "sizes": "", "params": 10},
    ]


def test_a_graph_that_records_little_still_has_a_summary_and_a_diff() -> None:
    graph = chain(list("AB"))
    for key in (g.G_NAME, g.G_HEAD, g.G_MODEL_CLASS, g.G_BACKBONE):
        del graph.graph[key]
    result = stats.summary(graph)
    assert (result["model"], result["head"], result["model_class"], result["example"]) == ("", "", "", {})
    other = chain(list("ABC"))
    del other.graph[g.G_BACKBONE]
    other.graph[g.G_MODULES]["stack.layer.2"] = {}  # no type, no sizes recorded
    changes = stats.diff(graph, other)
    assert changes["added"] == [{"module": "stack.layer.2", "type": "", "sizes": "", "params": 10}]
    assert (changes["a"]["model"], changes["a"]["head"], changes["a"]["model_class"]) == ("", "", "")


def _xxxx() -> nx.DiGraph:
    """A chain under a top module named XXXX, no backbone recorded, 3 parameters of the model's own."""
    graph = chain(list("AB"), container="XXXX.layer")
    del graph.graph[g.G_BACKBONE]
    graph.graph[g.G_PARAMETERS].append({"name": "scale", "shape": [3], "numel": 3, "trainable": True, "module": ""})
    return graph


def test_without_a_backbone_every_module_is_shown() -> None:
    graph = _xxxx()
    assert stats.parameter_stats(graph)["groups"] == {"XXXX": 20, "(model)": 3}
    rows = {row["path"]: row for row in stats.summary_rows(graph)}
    assert rows[""]["share"] == 1.0 and rows["XXXX"]["depth"] == 1
    assert rows["XXXX"]["share"] == 20 / 23
    other = _xxxx()
    other.graph[g.G_MODULES]["XXXX.extra"] = {"type": "Extra"}
    assert stats.diff(graph, other)["added"][0]["module"] == "XXXX.extra"


def test_parameters_of_the_backbone_itself_are_the_models_own() -> None:
    graph = chain(list("AB"))
    graph.graph[g.G_BACKBONE] = "stack"
    graph.graph[g.G_PARAMETERS].append({"name": "stack.scale", "shape": [3], "numel": 3, "module": "stack"})
    assert stats.parameter_stats(graph)["groups"] == {"layer": 20, "(model)": 3}  # the list is one group


def test_a_derived_module_table_without_a_class_name() -> None:
    graph = chain(list("A"))
    del graph.graph[g.G_MODULES], graph.graph[g.G_MODEL_CLASS]
    assert stats.module_table(graph)[""] == {"type": ""}
    rows = stats.summary_rows(graph)
    assert rows[0]["name"] == "" and rows[0]["type"] == ""


def test_output_shapes_follow_execution_order_not_names() -> None:
    graph = chain(list("AB"))
    graph = nx.relabel_nodes(graph, {"stack.layer.0:A": "z", "stack.layer.1:B": "a"})
    graph.nodes["z"][g.SHAPE] = [7]
    graph.add_node("w", **g.io_attributes(g.OUTPUT, [7], "float32", 9))
    graph.add_edge("z", "w")
    assert stats.output_shapes(graph)["stack"] == [[7], ["batch", 4]]


def test_rows_of_modules_the_table_knows_little_of() -> None:
    graph = chain(list("AB"))
    del graph.graph[g.G_MODULES][""]
    graph.graph[g.G_MODULES]["stack.extra"] = {}  # no type, no ops, no parameters
    rows = {row["path"]: row for row in stats.summary_rows(graph)}
    assert rows[""]["type"] == "" and rows[""]["params"] == 20
    assert (rows["stack.extra"]["type"], rows["stack.extra"]["sizes"]) == ("", "")
    assert (rows["stack.extra"]["params"], rows["stack.extra"]["shapes"]) == (0, [])


def test_siblings_one_without_parameter_rows_fold_by_their_count() -> None:
    graph = chain(list("AA"), params=0)
    graph.graph[g.G_PARAMETERS] = graph.graph[g.G_PARAMETERS][:1]  # layer 1's empty parameter is not listed
    assert [r["name"] for r in stats.summary_rows(graph) if r["level"] == 3] == ["(0-1)"]


def test_a_child_with_other_sizes_keeps_its_layer_apart() -> None:
    graph = bert_tiny()
    graph.graph[g.G_MODULES]["bert.encoder.layer.1.intermediate.dense"]["sizes"] = "128 → 999"
    names = [r["name"] for r in stats.summary_rows(graph) if r["path"].count(".") == 3 and ".layer." in r["path"]]
    assert names == ["(0)", "(1)", "(2)"]


def test_rows_inside_a_fold_of_two() -> None:
    graph = chain(list("ABAB"))
    for index in range(4):
        graph.graph[g.G_MODULES][f"stack.layer.{index}.inner"] = {"type": "Inner"}
    rows = [r for r in stats.summary_rows(graph) if r["path"].startswith("stack.layer.")]
    assert [(r["path"], r["name"], r.get("period"), r["in_fold"]) for r in rows] == [
        ("stack.layer.0", "(0, 2)", 2, False),
        ("stack.layer.0.inner", "inner", None, True),
        ("stack.layer.1", "(1, 3)", 2, False),
        ("stack.layer.1.inner", "inner", None, True),
    ]
    periodic = [r["path"] for r in stats.summary_rows(chain(list("ASSGSSG"))) if r["level"] == 3]
    assert periodic == ["stack.layer.0", "stack.layer.1", "stack.layer.2", "stack.layer.3"]


def test_a_module_run_twice_shows_two_calls() -> None:
    graph = chain(list("AB"))
    graph.graph[g.G_SHARED] = {"stack.layer.0": 2}
    assert {r["path"]: r.get("calls") for r in stats.summary_rows(graph)}["stack.layer.0"] == 2


def test_modules_without_parameters_have_none_in_the_tree_and_the_diff() -> None:
    rows = {row["path"]: row for row in stats.summary_rows(bert_tiny())}
    assert rows["dropout"]["params"] == 0 and rows["bert.pooler.activation"]["params"] == 0
    a, b = bert_tiny(), bert_tiny()
    b.graph[g.G_MODULES]["bert.pooler.activation"] = {"type": "GELU", "sizes": ""}
    assert stats.diff(a, b)["changed"] == [
        {
            "module": "pooler.activation",
            "a": {"type": "Tanh", "sizes": "", "params": 0},
            "b": {"type": "GELU", "sizes": "", "params": 0},
        }
    ]


def test_the_diff_lists_outputs_and_new_modules_in_the_models_order() -> None:
    a = chain(list("A"))
    a.add_node("a_late", **g.io_attributes(g.OUTPUT, [1], "float32", 9))
    a.add_edge("stack.layer.0:A", "a_late")
    b = chain(list("A"))
    b.graph[g.G_MODULES]["z_head"] = {"type": "Z"}
    b.graph[g.G_MODULES]["a_head"] = {"type": "A"}
    result = stats.diff(a, b)
    assert [entry["module"] for entry in result["added"]] == ["z_head", "a_head"]
    assert [output["name"] for output in result["a"]["outputs"]] == ["y", "a_late"]
    assert result["b"]["total"] == 10


def test_a_top_level_list_is_one_group() -> None:
    assert stats.parameter_stats(chain(list("AB"), container="layers"))["groups"] == {"layers": 20}


def test_outputs_are_listed_in_execution_order() -> None:
    graph = chain(list("A"))
    graph.add_node("a_first", **g.io_attributes(g.OUTPUT, [1], "float32", 1))  # inserted last, runs first
    graph.nodes["stack.layer.0:A"][g.ORDER] = 0
    graph.add_edge("stack.layer.0:A", "a_first")
    assert [output["name"] for output in stats.diff(graph, graph)["a"]["outputs"]] == ["a_first", "y"]


def test_siblings_that_pass_data_through_their_parents_ops_are_rows_of_their_own() -> None:
    """As the drawing leaves them unfolded, so does the summary."""
    rows = [r for r in stats.summary_rows(interleaved_chain()) if r["path"].startswith("stack.layer.")]
    assert [r["path"] for r in rows] == ["stack.layer.0", "stack.layer.1", "stack.layer.2"]
    folded = [r for r in stats.summary_rows(chain(list("AAA"))) if r["path"].startswith("stack.layer.")]
    assert [r["path"] for r in folded] == ["stack.layer.0"]
