"""Graph files: UTF-8 whatever the locale, stable bytes, readable by other tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import networkx as nx

from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from tests.graph_fixtures import chain

ROUND_TRIP = """
import sys
from bertgraph.graph import io
graph = io.read_json(sys.argv[1])
io.write_json(graph, sys.argv[2])
io.write_graphml(graph, sys.argv[3])
print(len(io.read_json(sys.argv[2])), len(io.read_graphml(sys.argv[3])))
"""


def _unicode_graph() -> nx.DiGraph:
    graph = g.new_graph(name="模型 ünïcödé ✓")
    graph.add_node("x", **g.io_attributes(g.INPUT, ["batch", "seq"], "int64", 0))
    graph.add_node("層.0:linear", kind=g.OPERATOR, op="linear", module="層.0", shape=["batch", 8], params=72, order=1)
    graph.add_edge("x", "層.0:linear", shape=["batch", "seq"], dtype="int64")
    return graph


def test_files_are_utf8_under_an_ascii_locale(tmp_path: Path) -> None:
    source = tmp_path / "in.json"
    graph_io.write_json(_unicode_graph(), source)
    assert "模型" in source.read_bytes().decode("utf-8")
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    probe = [sys.executable, "-c", "import locale; print(locale.getpreferredencoding(False))"]
    assert subprocess.run(probe, env=env, capture_output=True, text=True, check=True).stdout.strip() != "UTF-8"
    outputs = [str(tmp_path / "out.json"), str(tmp_path / "out.graphml")]
    done = subprocess.run(
        [sys.executable, "-c", ROUND_TRIP, str(source), *outputs], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "2"]
    assert "層.0:linear" in Path(outputs[0]).read_bytes().decode("utf-8")
    assert graph_io.read_json(outputs[0]).graph[g.G_NAME] == "模型 ünïcödé ✓"
    graphml = graph_io.read_graphml(outputs[1])  # networkx writes GraphML as ASCII, with character references
    assert graphml.graph[g.G_NAME] == "模型 ünïcödé ✓" and "層.0:linear" in graphml


def test_graphml_lists_and_mappings_are_readable_and_stable(tmp_path: Path) -> None:
    a, b = _unicode_graph(), _unicode_graph()
    a.graph[g.G_CONFIG] = {"layers": 2, "hidden": 8, "name": "層"}
    b.graph[g.G_CONFIG] = {"name": "層", "hidden": 8, "layers": 2}  # the same mapping, built in another order
    assert graph_io.graph_file_text(a, "graphml") == graph_io.graph_file_text(b, "graphml")
    graph_io.write_graphml(a, tmp_path / "a.graphml")
    plain = nx.read_graphml(tmp_path / "a.graphml")  # what another tool sees: JSON text, unicode as written
    assert plain.graph[g.G_CONFIG] == '{"hidden": 8, "layers": 2, "name": "層"}'


def test_graphml_skips_missing_values_only(tmp_path: Path) -> None:
    graph = _unicode_graph()
    graph.nodes["x"].clear()
    graph.nodes["x"].update({"absent": None, g.KIND: g.INPUT, g.SHAPE: ["batch"], g.ORDER: 0})
    graph_io.write_graphml(graph, tmp_path / "x.graphml")
    back = graph_io.read_graphml(tmp_path / "x.graphml")
    assert back.nodes["x"] == {g.KIND: g.INPUT, g.SHAPE: ["batch"], g.ORDER: 0}


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


def test_json_text_is_indented_sorted_and_keeps_characters() -> None:
    graph = g.new_graph(name="modèle")
    graph.add_node("x", **g.io_attributes(g.INPUT, [1], "int64", 0))
    text = graph_io.graph_file_text(graph, "json")
    assert text.startswith('{\n "directed": true,\n "edges": [],\n "graph": {\n  "name": "modèle"\n },\n')


def test_graphml_read_back_has_only_the_graphs_own_attributes(tmp_path: Path) -> None:
    graph = chain(list("AB"))
    path = tmp_path / "toy.graphml"
    graph_io.write_graphml(graph, path)
    assert graph_io.read_graphml(path).graph == graph.graph


def test_node_link_data_without_graph_kind_is_read_as_a_directed_graph() -> None:
    data = graph_io.to_node_link(chain(list("A")))
    del data["directed"], data["multigraph"]
    graph = graph_io.from_node_link(data)
    assert graph.is_directed() and not graph.is_multigraph()
    assert list(graph.successors("x")) == ["stack.layer.0:A"]
