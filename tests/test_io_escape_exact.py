"""Graph files and escapers in-process, checked exactly (for the mutation run too)."""

from __future__ import annotations

import json
from pathlib import Path

from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.render import escape
from tests.graph_fixtures import chain


def test_ids_that_xml_cannot_tell_apart_are_numbered() -> None:
    graph = g.new_graph()
    for order, name in enumerate(["a\x00", "a\x01", "a\x02", "b"]):
        graph.add_node(name, **{g.ORDER: order})
    assert list(graph_io._xml_ids(graph).values()) == ["a\ufffd", "a\ufffd~2", "a\ufffd~3", "b"]


def test_graphml_keeps_edge_attributes(tmp_path: Path) -> None:
    graph = chain(list("AB"))
    graph.edges["x", "stack.layer.0:A"]["args"] = [0, 1]
    ready = graph_io.graphml_ready(graph)
    assert ready.edges["x", "stack.layer.0:A"] == {"shape": '["batch", 4]', "dtype": "float32", "args": "[0, 1]"}
    path = tmp_path / "toy.graphml"
    graph_io.write_graphml(graph, path)
    text = path.read_text(encoding="utf-8")
    assert text == graph_io.graph_file_text(graph, "graphml")
    assert text.startswith("<graphml ") and text.endswith("</graphml>\n")
    assert text == "\n".join(graph_io.generate_graphml(graph)) + "\n"
    assert graph_io.read_graphml(path).edges["x", "stack.layer.0:A"]["args"] == [0, 1]


def test_the_json_file_text_is_node_link() -> None:
    graph = chain(list("AB"))
    text = graph_io.graph_file_text(graph, "json")
    assert text == "".join(graph_io.generate_json(graph))
    assert json.loads(text) == json.loads(json.dumps(graph_io.to_node_link(graph)))
    assert not text.startswith("<graphml")


def test_dot_ids_of_names_with_nothing_safe_and_of_many_clashes() -> None:
    assert escape.dot_id("&;", {}) == "_"
    seen: dict[str, str] = {}
    assert [escape.dot_id(name, seen) for name in ["a&b", "a<b", "a>b", "a b"]] == ["a_b", "a_b_2", "a_b_3", "a_b_4"]


def test_mermaid_ids_strip_underscores_and_number_clashes() -> None:
    assert escape.mermaid_id("__x__") == "n_x"
    assert escape.mermaid_id(" x ") == "n_x"
    taken: set[str] = set()
    assert [escape.mermaid_id(name, taken) for name in ["a.b", "a-b", "a b", "a:b"]] == [
        "n_a_b",
        "n_a_b_2",
        "n_a_b_3",
        "n_a_b_4",
    ]
    assert taken == {"n_a_b", "n_a_b_2", "n_a_b_3", "n_a_b_4"}


def test_mermaid_front_matter_keeps_letters_and_joins_lines() -> None:
    assert escape.mermaid_front_matter("modèle\nbase") == '"modèle base"'


def test_markdown_code_spans() -> None:
    assert escape.markdown_code("XY") == "`XY`"
    assert escape.markdown_code("a|b") == "a\\|b"
    assert escape.markdown_code("  ") == "  "
