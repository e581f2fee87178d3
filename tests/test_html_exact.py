"""The interactive page's data checked in-process on the committed bert-tiny graph (``render/html.py``).

No trace and no bertgraph process: the page's layouts run Graphviz's ``dot``, nothing else, so
these tests also serve the mutation run (docs/mutation.md). The numbers are BERT's arithmetic for
bert-tiny with 3 layers: hidden 128, intermediate 512, a 128 → 2 classifier, batch 1, sequence 128.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import json
import re
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from bertgraph.graph import schema as g
from bertgraph.graph.views import view
from bertgraph.render import embed
from bertgraph.render import html as page_html
from bertgraph.render.html import (
    COST_WORDS,
    DEPTH_NAMES,
    content_security_policy,
    cost_rows,
    example_words,
    generate_html,
    node_details,
    packed,
    script_json,
    write_html,
)
from tests.conftest import require
from tests.graph_fixtures import bert_tiny, chain

HIDDEN, INTERMEDIATE, LABELS = 128, 512, 2
LAYER = 4 * (HIDDEN * HIDDEN + HIDDEN) + 2 * 2 * HIDDEN + 2 * HIDDEN * INTERMEDIATE + INTERMEDIATE + HIDDEN
CLASSIFIER = HIDDEN * LABELS + LABELS


def _dot_available() -> None:
    from bertgraph.render import graphviz_run

    require(graphviz_run.FORMATS is not None, "Graphviz dot is not installed (apt-get install graphviz)")


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def _data_block(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="bertgraph-data">(.*?)</script>', page, re.DOTALL)
    assert found, "no data block"
    data = json.loads(found.group(1))
    assert isinstance(data, dict)
    return data


def _unpack(bundle: str) -> Any:
    raw = gzip.decompress(base64.b64decode(bundle))
    return json.loads(raw)


# --- text that sits inside the page -------------------------------------------------------------


def test_script_json_is_compact_sorted_and_escapes_what_ends_a_script() -> None:
    text = script_json({"b": "é <&> \u2028\u2029", "a": [1, 2]})
    assert text == '{"a":[1,2],"b":"é \\u003c\\u0026\\u003e \\u2028\\u2029"}'
    assert json.loads(text) == {"a": [1, 2], "b": "é <&> \u2028\u2029"}


def test_a_bundle_is_stable_gzip_of_compact_sorted_json() -> None:
    data = {"z": "ü", "a": {"y": 1, "b": [2, 3]}}
    bundle = packed(data)
    raw = base64.b64decode(bundle)
    assert raw[:3] == b"\x1f\x8b\x08" and raw[4:8] == b"\0\0\0\0"  # gzip, no timestamp
    assert raw[8] == 2  # the header's mark for the slowest, smallest compression (level 9)
    assert gzip.decompress(raw) == '{"a":{"b":[2,3],"y":1},"z":"ü"}'.encode()
    assert packed(dict(reversed(list(data.items())))) == bundle


def test_the_policy_allows_the_two_hashed_texts_and_nothing_else() -> None:
    policy = content_security_policy("run();", "p { }")
    assert policy == (
        f"default-src 'none'; script-src '{_sha256('run();')}'; style-src '{_sha256('p { }')}'; "
        "base-uri 'none'; form-action 'none'; require-trusted-types-for 'script'; trusted-types 'none'"
    )


# --- what the panel says -------------------------------------------------------------------------


def test_cost_figures_are_named_in_words_known_ones_first() -> None:
    assert [words for words, _, _ in cost_rows({key: 1 for key in reversed(COST_WORDS)})] == [
        words for words, _ in COST_WORDS.values()
    ]
    assert cost_rows({"zeta_bytes": 3, "activation_bytes": 2, "alpha_flops": 1, "count": 5}) == [
        ["activation bytes written", 2, "bytes"],
        ["alpha FLOPs", 1, "FLOPs"],
        ["count", 5, ""],
        ["zeta bytes", 3, "bytes"],
    ]
    assert cost_rows({"memory": {"peak_bytes": 8, "live": {"now_flops": 2}}}) == [
        ["memory · live · now FLOPs", 2, "FLOPs"],
        ["memory · peak bytes", 8, "bytes"],
    ]
    assert cost_rows({}) == []


def test_classifier_details_are_its_linear_layers_arithmetic() -> None:
    graph = bert_tiny()
    shown = view(graph, 2)
    details = node_details(graph, shown, "classifier", "classifier", "head", "task head")
    assert details == {
        "title": "classifier",
        "kind": "head",
        "kind_name": "task head",
        "role": "module",
        "module": "classifier",
        "path": "classifier",
        "type": "Linear",
        "sizes": g.module_info(graph, "classifier")["sizes"],
        "ops": ["linear"],
        "shape": "[batch, 2]",
        "dtype": "float32",
        "inputs": ["[batch, 128]"],
        "params": CLASSIFIER,
        "repeat": 1,
        "tensors": [["classifier.weight", [LABELS, HIDDEN], HIDDEN * LABELS], ["classifier.bias", [LABELS], LABELS]],
        "cost": [
            ["matrix-multiply FLOPs", 2 * HIDDEN * LABELS, "FLOPs"],
            ["other FLOPs (element-wise, norms, softmax)", LABELS, "FLOPs"],  # the bias added
            ["activation bytes written", 4 * LABELS, "bytes"],
            ["parameter bytes", 4 * CLASSIFIER, "bytes"],
        ],
    }
    assert details["sizes"]  # the module table's sizes are shown


def test_a_folded_layer_lists_one_instances_tensors() -> None:
    graph = bert_tiny()
    shown = view(graph, 2)
    details = node_details(graph, shown, "bert.encoder.layer.0-2", "layer × 3", "block")
    assert (details["repeat"], details["params"]) == (3, 3 * LAYER)
    assert sum(count for _, _, count in details["tensors"]) == LAYER
    assert all(name.startswith("bert.encoder.layer.0.") for name, _, _ in details["tensors"])
    assert (details["path"], details["type"]) == ("encoder.layer.0-2", "BertLayer")
    # The same node unfolded (repeat 1) lists its own tensors whatever their names.
    shown.nodes["bert.encoder.layer.0-2"][g.REPEAT] = 1
    unfolded = node_details(graph, shown, "bert.encoder.layer.0-2", "layer", "block")
    assert "repeat" in unfolded and unfolded["repeat"] == 1
    assert sum(count for _, _, count in unfolded["tensors"]) == 3 * LAYER
    # A fold of two is a fold too.
    shown.nodes["bert.encoder.layer.0-2"][g.REPEAT] = 2
    assert sum(
        count for _, _, count in node_details(graph, shown, "bert.encoder.layer.0-2", "l", "block")["tensors"]
    ) == (LAYER)
    assert sum(count for _, _, count in unfolded["tensors"]) == 3 * LAYER


def test_a_fold_whose_names_are_not_its_first_instances_lists_them_all() -> None:
    graph = bert_tiny()
    shown = view(graph, 2)
    names = [f"bert.encoder.layer.{i}.output.dense.bias" for i in (1, 2)]
    shown.nodes["bert.encoder.layer.0-2"][g.PARAM_NAMES] = names
    details = node_details(graph, shown, "bert.encoder.layer.0-2", "layer × 3", "block")
    assert [name for name, _, _ in details["tensors"]] == names
    shown.nodes["bert.encoder.layer.0-2"][g.PARAM_NAMES] = ["not.a.parameter", *names]
    assert len(node_details(graph, shown, "bert.encoder.layer.0-2", "t", "block")["tensors"]) == 2


def test_an_input_says_its_shape_and_dtype_and_nothing_empty() -> None:
    graph = bert_tiny()
    shown = view(graph, 2)
    details = node_details(graph, shown, "input_ids", "input_ids", "io")
    assert details == {
        "title": "input_ids",
        "kind": "io",
        "role": "input",
        "type": "BertForSequenceClassification",
        "shape": "[batch, seq]",
        "dtype": "int64",
        "params": 0,
        "repeat": 1,
    }


def test_a_node_with_nothing_but_its_kind_is_described_from_the_model() -> None:
    graph = bert_tiny()
    shown = view(graph, 2)
    shown.add_node("bare")
    shown.add_edge("input_ids", "bare")  # an edge that says no shape
    assert node_details(graph, shown, "bare", "bare", "other") == {
        "title": "bare",
        "kind": "other",
        "type": "BertForSequenceClassification",  # the root module's, as for the model's inputs
        "inputs": ["[]"],
        "shape": "[]",
        "params": 0,
        "repeat": 1,
    }
    # A module the table does not know has no type to show; a node's own class name wins over the table's.
    shown.add_node("stray", module="not.in.the.table")
    assert "type" not in node_details(graph, shown, "stray", "stray", "other")
    shown.nodes["classifier"][g.MODULE_TYPE] = "ScoreHead"
    assert node_details(graph, shown, "classifier", "classifier", "head")["type"] == "ScoreHead"
    # A graph that names no backbone shows full module paths.
    del graph.graph[g.G_BACKBONE]
    assert node_details(graph, shown, "bert.pooler.dense", "dense", "pooling")["path"] == "bert.pooler.dense"


def test_an_op_shows_its_target_and_shared_weights() -> None:
    graph = bert_tiny()
    shown = view(graph, 4)
    node = next(n for n, d in shown.nodes(data=True) if d.get(g.OP) == "linear")
    shown.nodes[node][g.SHARED_PARAMS] = ["tied.weight"]
    details = node_details(graph, shown, node, "linear", "feed-forward")
    assert details["op"] == "aten.linear.default"
    assert details["shared"] == ["tied.weight"]
    del shown.nodes[node][g.TARGET]
    assert node_details(graph, shown, node, "linear", "feed-forward")["op"] == "linear"


def test_any_other_number_on_a_node_is_a_figure_and_facts_are_not() -> None:
    graph = bert_tiny()
    shown = view(graph, 2)
    data = shown.nodes["classifier"]
    data.update(
        {g.WINDOW: 7, g.Q_HEADS: 2, g.KV_HEADS: 1, g.CALL: 1, g.ORDER: 9, "note": "text", "flag": True}
        | {"empty": {}, "mixed": {"a": 1, "b": "x"}, "nested": {"a": 1.5, "b": {"c": 2}}, "ratio": 0.5}
    )
    data[g.MATMUL_FLOPS] = "2*batch*seq"  # evaluated at the example: batch 1, seq 128
    data[g.OTHER_FLOPS] = "not a polynomial +"  # skipped, not an error
    rows = node_details(graph, shown, "classifier", "c", "head")["cost"]
    assert rows == [
        ["matrix-multiply FLOPs", 256, "FLOPs"],
        ["activation bytes written", 4 * LABELS, "bytes"],
        ["parameter bytes", 4 * CLASSIFIER, "bytes"],
        ["nested · a", 1.5, ""],
        ["nested · b · c", 2, ""],
        ["ratio", 0.5, ""],
    ]


def test_example_words_name_each_length() -> None:
    assert example_words(nx.DiGraph(example={"batch": 2, "seq": 16})) == "batch 2, sequence length 16"
    assert example_words(nx.DiGraph(example={"batch": 1, "sequence": 9})) == "batch 1, sequence length 9"
    assert example_words(nx.DiGraph(example={"batch": 1, "seq": 8, "tgt": 4})) == (
        "batch 1, sequence length 8, decoder length 4"
    )
    assert example_words(nx.DiGraph(example={"frames": 3})) == "frames 3"


# --- the page -------------------------------------------------------------------------------------


@pytest.fixture
def tiny_page() -> str:
    _dot_available()
    return generate_html(bert_tiny(), depth=3, theme="dark")


def test_the_page_carries_every_depth_and_opens_at_the_one_asked_for(tiny_page: str) -> None:
    data = _data_block(tiny_page)
    assert data["depth"] == 3
    assert [(level["depth"], level["name"]) for level in data["levels"]] == list(enumerate(DEPTH_NAMES))
    records = [_unpack(level["bundle"]) for level in data["levels"]]
    assert data["title"] == records[3]["title"] == "bert-tiny · BertForSequenceClassification · 4,584,450 parameters"
    for level, record in enumerate(records):
        assert record["sizes"] == "batch 1, sequence length 128"
        assert f"depth {level}" in record["subtitle"]
        assert record["drawing"][0] == "svg"
        assert record["nodes"]
    # Depth 2 draws the folded layers as one node whose details are one layer's tensors.
    folded = [node for node in records[2]["nodes"].values() if node.get("repeat") == 3]
    assert folded and folded[0]["params"] == 3 * LAYER
    assert (folded[0]["kind"], folded[0]["kind_name"]) == ("attention-bidirectional", "bidirectional attention")
    [head] = [node for node in records[2]["nodes"].values() if node.get("module") == "classifier"]
    assert (head["kind"], head["kind_name"], head["title"]) == ("head", "task head", "classifier")
    # Every record is one drawn node: the laid-out drawing has exactly as many node groups.
    for record in records:
        drawn = len(re.findall(r'"class": "node[ "]', json.dumps(record["drawing"])))
        assert drawn == len(record["nodes"])
    assert '<html lang="en" data-theme="dark">' in tiny_page
    assert f"<title>{html.escape(data['title'], quote=False)}</title>" in tiny_page


def test_the_pages_policy_hashes_the_script_and_style_it_carries(tiny_page: str) -> None:
    script = re.findall(r"<script>(.*?)</script>", tiny_page, re.DOTALL)
    style = re.findall(r"<style>(.*?)</style>", tiny_page, re.DOTALL)
    assert len(script) == len(style) == 1
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', tiny_page)
    assert policy and policy.group(1) == content_security_policy(script[0], style[0])
    assets = Path(page_html.__file__).parent / "assets"
    assert script[0] == "\n" + (assets / "viewer.js").read_text(encoding="utf-8")
    assert style[0] == (
        "\n"
        + (assets / "viewer.css").read_text(encoding="utf-8")
        + embed.dark_rules((':root[data-theme="dark"] #canvas',))
        + "\n@media (prefers-color-scheme: dark) {\n"
        + embed.dark_rules((':root[data-theme="auto"] #canvas',))
        + "\n}\n"
    )
    head = tiny_page[: tiny_page.index("<style>")]
    assert head == (
        '<!doctype html>\n<html lang="en" data-theme="dark">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{policy.group(1)}">\n'
        '<meta name="generator" content="bertgraph">\n'
        f"<title>{html.escape(_data_block(tiny_page)['title'], quote=False)}</title>\n"
    )
    body = tiny_page[tiny_page.index("</style>") :]
    assert body.startswith("</style>\n</head>\n<body>\n" + (assets / "viewer.html").read_text(encoding="utf-8"))
    assert body.endswith(f"<script>{script[0]}</script>\n</body>\n</html>\n")


def test_a_depth_past_the_last_opens_at_the_last_and_a_title_is_text() -> None:
    _dot_available()
    graph = bert_tiny("base")
    graph.graph[g.G_NAME] = 'a & "b" <c>'
    page = generate_html(graph, depth=9)
    data = _data_block(page)
    assert data["depth"] == len(DEPTH_NAMES) - 1
    assert _data_block(generate_html(graph))["depth"] == 2  # the default: the layers
    assert data["title"] == _unpack(data["levels"][-1]["bundle"])["title"]
    assert data["title"].startswith('a & "b" <c>')
    assert '<title>a &amp; "b" &lt;c&gt;' in page
    assert '<html lang="en" data-theme="auto">' in page


def test_an_unknown_theme_is_refused_before_any_layout() -> None:
    with pytest.raises(ValueError, match="^unknown theme 'sepia'; choose one of: auto, light, dark$"):
        generate_html(bert_tiny(), theme="sepia")


def test_a_comparison_page_tells_each_sides_nodes_apart() -> None:
    _dot_available()
    graph, base = bert_tiny(), bert_tiny("base")
    data = _data_block(generate_html(graph, depth=2, compare=base))
    nodes = _unpack(data["levels"][2]["bundle"])["nodes"].values()
    heads = [node for node in nodes if node.get("module") == "classifier"]
    assert len(heads) == 1 and heads[0]["params"] == CLASSIFIER  # only the side with the head has it
    # Each side's nodes are described from its own graph: the same input, two model classes.
    inputs = sorted(node["type"] for node in nodes if node.get("title") == "input_ids")
    assert inputs == ["BertForSequenceClassification", "BertModel"]
    pooled = sorted(node["path"] for node in nodes if str(node.get("module", "")).endswith("pooler.dense"))
    assert pooled == ["pooler.dense", "pooler.dense"]  # both shown below their backbone


def test_large_drawings_place_edge_labels_after_layout() -> None:
    # A chain of n ops draws n + 2 nodes (its input and output): 150 is not large, 151 is.
    small, shown = page_html._depth_records(chain(["linear"] * (page_html.LARGE_DRAWING - 2)), 4, False, None)
    large, records = page_html._depth_records(chain(["linear"] * (page_html.LARGE_DRAWING - 1)), 4, False, None)
    assert (len(shown["nodes"]), len(records["nodes"])) == (page_html.LARGE_DRAWING, page_html.LARGE_DRAWING + 1)
    assert "xlabel=" in large and "xlabel=" not in small


def test_the_written_page_is_the_generated_one(tmp_path: Path) -> None:
    _dot_available()
    target = write_html(bert_tiny("base"), tmp_path / "page.html", depth=1, edge_labels="none")
    assert target == tmp_path / "page.html"
    text = target.read_text(encoding="utf-8")
    assert text == generate_html(bert_tiny("base"), depth=1, edge_labels="none")
    # The option reaches every depth's drawing: without labels the edges say no shape.
    labelled = generate_html(bert_tiny("base"), depth=1)
    for bare, shapes in zip(_data_block(text)["levels"][1:], _data_block(labelled)["levels"][1:], strict=True):
        said = [json.dumps(_unpack(level["bundle"])["drawing"]).count("[batch, seq, 128]") for level in (bare, shapes)]
        assert said[0] < said[1], bare["depth"]
