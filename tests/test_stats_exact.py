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
from tests.graph_fixtures import bert_tiny, chain, interleaved_chain, op

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


# --- what runs: modules_used and the ``runs`` flag -------------------------------------------------


def _reads_and_unread() -> nx.DiGraph:
    """A traced toy whose modules are used in every way the tree tells apart.

    The embeddings come in as an input, so the word table ``embed.word`` is only read by ``head``
    (tied to it: a shared read under another path); ``encoder`` runs an op that reads
    ``encoder.rel``'s table (read, not called, as DeBERTa's relative positions are);
    ``encoder.act`` runs an op without parameters; ``vocoder`` runs a flip of its own while
    ``vocoder.post`` holds parameters no op reads (used only in training, as VITS's post flows).
    """
    graph = g.new_graph(**{g.G_BACKBONE: "", g.G_MODEL_CLASS: "Toy", g.G_NAME: "toy", g.G_HEAD: "base"})
    graph.add_node("x", **g.io_attributes(g.INPUT, ["batch", 4], "float32", 0))
    graph.add_node(
        "encoder:matmul",
        **op("encoder", "matmul", 1, module_type="Encoder", params=6, param_names=["encoder.rel.weight"]),
    )
    graph.add_node("encoder.act:gelu", **op("encoder.act", "gelu", 2, module_type="GELU"))
    graph.add_node("vocoder:flip", **op("vocoder", "flip", 3, module_type="Vocoder"))
    graph.add_node("head:linear", **op("head", "linear", 4, shared_params=["embed.word.weight"]))
    graph.add_node("y", **g.io_attributes(g.OUTPUT, ["batch", 4], "float32", 5))
    nx.add_path(
        graph,
        ["x", "encoder:matmul", "encoder.act:gelu", "vocoder:flip", "head:linear", "y"],
        **{g.SHAPE: ["batch", 4], g.DTYPE: "float32"},
    )
    graph.graph[g.G_MODULES] = {
        "": {"type": "Toy"},
        "embed": {"type": "Embeddings"},
        "embed.word": {"type": "Embedding", "sizes": "3 → 4"},
        "encoder": {"type": "Encoder"},
        "encoder.rel": {"type": "Embedding", "sizes": "2 → 3"},
        "encoder.act": {"type": "GELU"},
        "vocoder": {"type": "Vocoder"},
        "vocoder.post": {"type": "Linear", "sizes": "5 → 1"},
        "head": {"type": "Linear", "sizes": "4 → 3"},
    }
    graph.graph[g.G_PARAMETERS] = [
        {"name": "embed.word.weight", "shape": [3, 4], "numel": 12, "trainable": True, "module": "embed.word"},
        {"name": "encoder.rel.weight", "shape": [2, 3], "numel": 6, "trainable": True, "module": "encoder.rel"},
        {"name": "vocoder.post.weight", "shape": [5], "numel": 5, "trainable": True, "module": "vocoder.post"},
    ]
    return graph


def test_modules_used_are_where_ops_run_and_whose_parameters_they_read() -> None:
    """An op's module counts with its ancestors, and so does the module of every parameter it
    reads or shares, by the parameter's full path (``embed.word``, not just ``embed``)."""
    assert stats.modules_used(_reads_and_unread()) == {
        "",
        "embed",
        "embed.word",
        "encoder",
        "encoder.rel",
        "encoder.act",
        "vocoder",
        "head",
    }
    assert stats.modules_used(chain(list("AB"))) == {"", "stack", "stack.layer", "stack.layer.0", "stack.layer.1"}


def test_a_module_whose_parameters_no_op_reads_does_not_run() -> None:
    """Only ``vocoder.post`` is flagged: its parent runs an op, the read table and the tied one
    run through their readers, and modules without parameters are never flagged."""
    rows = stats.summary_rows(_reads_and_unread())
    assert [(r["path"], r["name"], r["level"], r["params"], r["share"]) for r in rows] == [
        ("", "Toy", 0, 23, 1.0),
        ("embed", "embed", 1, 12, 12 / 23),
        ("embed.word", "word", 2, 12, 12 / 23),
        ("encoder", "encoder", 1, 6, 6 / 23),
        ("encoder.rel", "rel", 2, 6, 6 / 23),
        ("encoder.act", "act", 2, 0, 0.0),
        ("vocoder", "vocoder", 1, 5, 5 / 23),
        ("vocoder.post", "post", 2, 5, 5 / 23),
        ("head", "head", 1, 0, 0.0),
    ]
    assert rows[7] == {
        "path": "vocoder.post",
        "name": "post",
        "type": "Linear",
        "sizes": "5 → 1",
        "level": 2,
        "depth": 2,
        "params": 5,
        "share": 5 / 23,
        "shapes": [],
        "in_fold": False,
        "runs": False,
    }
    assert [r["path"] for r in rows if "runs" in r] == ["vocoder.post"]
    assert rows[6]["shapes"] == [["batch", 4]] and "runs" not in rows[6]


def test_a_graph_without_ops_says_nothing_of_what_runs() -> None:
    """A module tree without a trace: ``modules_used`` is None and no row is flagged, though
    every module there has parameters no op reads."""
    graph = chain(list("AB"))
    graph.remove_nodes_from(list(graph.nodes))
    assert stats.modules_used(graph) is None
    rows = stats.summary_rows(graph)
    assert rows == [
        {
            "path": "",
            "name": "Toy",
            "type": "Toy",
            "sizes": "",
            "level": 0,
            "depth": 0,
            "params": 20,
            "share": 1.0,
            "shapes": [],
            "in_fold": False,
        },
        {
            "path": "stack",
            "name": "stack",
            "type": "Stack",
            "sizes": "",
            "level": 1,
            "depth": 1,
            "params": 20,
            "share": 1.0,
            "shapes": [],
            "in_fold": False,
        },
        {
            "path": "stack.layer",
            "name": "layer",
            "type": "ModuleList",
            "sizes": "2",
            "level": 2,
            "depth": 2,
            "params": 20,
            "share": 1.0,
            "shapes": [],
            "in_fold": False,
        },
        {
            "path": "stack.layer.0",
            "name": "(0-1)",
            "type": "Block",
            "sizes": "",
            "level": 3,
            "depth": 2,
            "params": 20,
            "share": 1.0,
            "shapes": [],
            "in_fold": False,
            "each": 10,
            "repeat": 2,
        },
    ]
    only_inputs = chain(list("A"))
    only_inputs.remove_node("stack.layer.0:A")
    assert stats.modules_used(only_inputs) is None  # inputs and outputs run nothing
    assert stats.modules_used(g.new_graph()) is None


# --- order and folding of siblings -------------------------------------------------------------


def test_numbered_siblings_are_rows_in_index_order_whatever_order_the_table_lists_them() -> None:
    """A graph read back from JSON has its module table sorted as text (``10`` before ``2``)."""
    graph = chain([f"K{index}" for index in range(12)])  # every layer runs another op: nothing folds
    graph.graph[g.G_MODULES] = dict(sorted(graph.graph[g.G_MODULES].items()))
    assert list(graph.graph[g.G_MODULES])[3:6] == ["stack.layer.0", "stack.layer.1", "stack.layer.10"]
    rows = stats.summary_rows(graph)
    assert [(r["path"], r["name"]) for r in rows] == [
        ("", "Toy"),
        ("stack", "stack"),
        ("stack.layer", "layer"),
        *[(f"stack.layer.{index}", f"({index})") for index in range(12)],
    ]


def _sequential() -> nx.DiGraph:
    """A model whose own children are numbered (an ``nn.Sequential``): ``x → 0 → 1 → y``, the
    table listing ``1`` before ``0``."""
    graph = g.new_graph(**{g.G_BACKBONE: "", g.G_MODEL_CLASS: "Sequential", g.G_NAME: "seq", g.G_HEAD: "base"})
    graph.add_node("x", **g.io_attributes(g.INPUT, ["batch", 4], "float32", 0))
    graph.add_node("0:linear", **op("0", "linear", 1, params=20, param_names=["0.weight"]))
    graph.add_node("1:relu", **op("1", "relu", 2, module_type="ReLU"))
    graph.add_node("y", **g.io_attributes(g.OUTPUT, ["batch", 4], "float32", 3))
    for source, target in [("x", "0:linear"), ("0:linear", "1:relu"), ("1:relu", "y")]:
        graph.add_edge(source, target, **{g.SHAPE: ["batch", 4], g.DTYPE: "float32"})
    graph.graph[g.G_MODULES] = {"": {"type": "Sequential"}, "1": {"type": "ReLU"}, "0": {"type": "Linear"}}
    graph.graph[g.G_PARAMETERS] = [{"name": "0.weight", "shape": [4, 5], "numel": 20, "trainable": True, "module": "0"}]
    return graph


def test_a_models_own_numbered_children_are_rows_in_index_order() -> None:
    rows = stats.summary_rows(_sequential())
    assert [(r["path"], r["name"], r["type"], r["level"], r["params"]) for r in rows] == [
        ("", "Sequential", "Sequential", 0, 20),
        ("0", "0", "Linear", 1, 20),
        ("1", "1", "ReLU", 1, 0),
    ]


def _towers(image_shape: list[int | str]) -> nx.DiGraph:
    """A ModuleDict of two Linear towers of equal type, sizes and parameters; ``towers.image``'s
    output has ``image_shape``, ``towers.text``'s ``[batch, 4]``."""
    graph = g.new_graph(**{g.G_BACKBONE: "", g.G_MODEL_CLASS: "Toy", g.G_NAME: "toy", g.G_HEAD: "base"})
    parameters = []
    for order, (name, shape) in enumerate([("text", ["batch", 4]), ("image", image_shape)]):
        module = f"towers.{name}"
        graph.add_node(f"in_{name}", **g.io_attributes(g.INPUT, shape, "float32", order))
        graph.add_node(
            f"{module}:linear",
            **op(module, "linear", 2 + order, shape=shape, params=20, param_names=[f"{module}.weight"]),
        )
        graph.add_node(f"out_{name}", **g.io_attributes(g.OUTPUT, shape, "float32", 4 + order))
        graph.add_edge(f"in_{name}", f"{module}:linear", **{g.SHAPE: shape, g.DTYPE: "float32"})
        graph.add_edge(f"{module}:linear", f"out_{name}", **{g.SHAPE: shape, g.DTYPE: "float32"})
        parameters.append(
            {"name": f"{module}.weight", "shape": [4, 5], "numel": 20, "trainable": True, "module": module}
        )
    graph.graph[g.G_MODULES] = {
        "": {"type": "Toy"},
        "towers": {"type": "ModuleDict"},
        "towers.text": {"type": "Linear", "sizes": "4 → 4"},
        "towers.image": {"type": "Linear", "sizes": "4 → 4"},
    }
    graph.graph[g.G_PARAMETERS] = parameters
    return graph


def test_dictionary_members_fold_only_when_their_output_shapes_agree() -> None:
    """A ModuleDict's members have no numbered content digest: their output shapes are what tells
    two towers of one type and size apart."""
    rows = stats.summary_rows(_towers(["batch", "seq", 4]))
    assert [(r["path"], r["name"], r["params"], r.get("repeat"), r["shapes"]) for r in rows[2:]] == [
        ("towers.text", "(text)", 20, None, [["batch", 4]]),
        ("towers.image", "(image)", 20, None, [["batch", "seq", 4]]),
    ]
    rows = stats.summary_rows(_towers(["batch", 4]))
    assert [(r["path"], r["name"], r["params"], r.get("repeat"), r["shapes"]) for r in rows[2:]] == [
        ("towers.text", "(text-image)", 40, 2, [["batch", 4]]),
    ]


# --- output shapes -----------------------------------------------------------------------------


def test_an_input_handed_straight_to_an_output_leaves_no_module() -> None:
    """A mask the model returns untouched is not an output of the model's tree; ops of one
    execution order are listed by name."""
    graph = chain(list("A"))
    graph.add_node("mask", **g.io_attributes(g.INPUT, ["batch", "seq"], "int64", 0))
    graph.add_node("mask_out", **g.io_attributes(g.OUTPUT, ["batch", "seq"], "int64", 3))
    graph.add_edge("mask", "mask_out", **{g.SHAPE: ["batch", "seq"], g.DTYPE: "int64"})
    graph.add_node("stack.layer.0:B", **op("stack.layer.0", "B", 1, shape=[2]))  # same order as :A
    graph.add_node("b_out", **g.io_attributes(g.OUTPUT, [2], "float32", 4))
    graph.add_edge("x", "stack.layer.0:B", **{g.SHAPE: ["batch", 4], g.DTYPE: "float32"})
    graph.add_edge("stack.layer.0:B", "b_out", **{g.SHAPE: [2], g.DTYPE: "float32"})
    shapes = [["batch", 4], [2]]  # :A before :B, their order a tie
    assert stats.output_shapes(graph) == {
        "": shapes,
        "stack": shapes,
        "stack.layer": shapes,
        "stack.layer.0": shapes,
    }


# --- the summary object ------------------------------------------------------------------------


def _mixture() -> nx.DiGraph:
    """One block of 4 fused routed experts, 2 per token: an embedding (80), a router (32) and
    experts gate_up [4, 16, 8] (512) and down [4, 8, 8] (256): 880 in all, 768 routed, so a token
    runs 880 − 768 + 768·2/4 = 496. Its roles were inferred from the module tree."""
    graph = g.new_graph(
        **{
            g.G_BACKBONE: "",
            g.G_MODEL_CLASS: "ToyMoE",
            g.G_NAME: "toy-moe",
            g.G_HEAD: "base",
            g.G_CONFIG: {"hidden": 8, "experts": 4, "experts_per_token": 2},
            g.G_EXAMPLE: {"batch": 1, "seq": 8},
            g.G_ROLES_FROM: "module tree",
        }
    )
    graph.graph[g.G_MODULES] = {
        "": {"type": "ToyMoE"},
        "embed": {"type": "Embedding"},
        "mlp": {"type": "SparseMoe"},
        "mlp.gate": {"type": "Linear"},
        "mlp.experts": {"type": "ToyExperts"},
    }
    graph.graph[g.G_PARAMETERS] = [
        {"name": name, "module": module, "shape": shape, "numel": numel, "trainable": True}
        for name, module, shape, numel in [
            ("embed.weight", "embed", [10, 8], 80),
            ("mlp.gate.weight", "mlp.gate", [4, 8], 32),
            ("mlp.experts.gate_up_proj", "mlp.experts", [4, 16, 8], 512),
            ("mlp.experts.down_proj", "mlp.experts", [4, 8, 8], 256),
        ]
    ]
    return graph


def test_a_mixture_of_experts_states_its_active_parameters_and_experts() -> None:
    graph = _mixture()
    # what the table and the summary both state of the model
    stated = {
        "model": "toy-moe",
        "head": "base",
        "model_class": "ToyMoE",
        "total": 880,
        "trainable": 880,
        "active": 496,
        "experts": 4,
        "experts_per_token": 2,
    }
    table = stats.parameter_stats(graph)
    assert {k: v for k, v in table.items() if k != "parameters"} == {**stated, "groups": {"embed": 80, "mlp": 800}}
    result = stats.summary(graph)
    assert {k: v for k, v in result.items() if k not in ("rows", "architecture")} == {
        **stated,
        "roles_inferred": True,
        "example": {"batch": 1, "seq": 8},
    }
    assert list(result)[5:9] == ["active", "experts", "experts_per_token", "roles_inferred"]
    assert [(r["path"], r["params"]) for r in result["rows"]] == [
        ("", 880),
        ("embed", 80),
        ("mlp", 800),
        ("mlp.gate", 32),
        ("mlp.experts", 768),
    ]


def test_a_dense_model_with_recorded_roles_has_no_expert_or_inferred_keys() -> None:
    graph = chain(list("AB"))
    graph.graph[g.G_EXAMPLE] = {"batch": 2, "seq": 16}
    result = stats.summary(graph)
    assert list(result) == ["model", "head", "model_class", "total", "trainable", "example", "rows", "architecture"]
    assert (result["total"], result["trainable"], result["example"]) == (20, 20, {"batch": 2, "seq": 16})
    assert result["example"] is not graph.graph[g.G_EXAMPLE]  # a copy: the caller may change it
    assert list(stats.parameter_stats(graph)) == [
        "model",
        "head",
        "model_class",
        "total",
        "trainable",
        "groups",
        "parameters",
    ]
    graph.graph[g.G_CONFIG] = {"experts": 4, "experts_per_token": 2}  # a config, but no expert parameters
    assert "active" not in stats.summary(graph)
