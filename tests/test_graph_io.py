"""GraphML and node-link JSON that plain networkx reads back, and byte-identical output."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import networkx as nx
import pytest

from bertgraph.api import Architecture
from bertgraph.cli import main
from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g


def same_graph(a: nx.DiGraph, b: nx.DiGraph) -> None:
    assert list(a.nodes) == list(b.nodes)
    assert dict(a.nodes(data=True)) == dict(b.nodes(data=True))
    assert sorted(a.edges(data=True)) == sorted(b.edges(data=True))
    assert a.graph == b.graph


def test_graphml_round_trip(traced: Callable[..., Architecture], tmp_path: Path) -> None:
    graph = traced("bert-tiny", "masked-lm").graph
    path = tmp_path / "bert.graphml"
    graph_io.write_graphml(graph, path)
    same_graph(graph, graph_io.read_graphml(path))
    plain = nx.read_graphml(path)  # networkx alone, no bertgraph
    assert plain.number_of_nodes() == graph.number_of_nodes()
    assert sum(d["params"] for _, d in plain.nodes(data=True)) == g.total_params(graph)
    assert json.loads(plain.nodes["bert.embeddings.word_embeddings:embedding"]["shape"]) == ["batch", "seq", 128]


def test_json_round_trip(traced: Callable[..., Architecture], tmp_path: Path) -> None:
    graph = traced("bert-tiny", "question-answering").graph
    path = tmp_path / "bert.json"
    graph_io.write_json(graph, path)
    same_graph(graph, graph_io.read_json(path))
    plain = nx.node_link_graph(json.loads(path.read_text()), edges="edges")
    assert plain.number_of_edges() == graph.number_of_edges()
    assert plain.nodes["start_logits"]["shape"] == ["batch", "seq"]


def test_views_round_trip(traced: Callable[..., Architecture], tmp_path: Path) -> None:
    shown = traced("bert-tiny", "sequence-classification").view(2)
    graph_io.write_graphml(shown, tmp_path / "v.graphml")
    same_graph(shown, graph_io.read_graphml(tmp_path / "v.graphml"))


@pytest.mark.parametrize(
    "argv",
    [
        ["params", "bert-tiny", "--format", "json"],
        ["summary", "bert-tiny", "--head", "pretraining", "--format", "json"],
        ["diff", "bert-tiny", "--head", "masked-lm", "--head", "token-classification", "--format", "json"],
    ],
)
def test_json_output_is_deterministic(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    outputs = []
    for no_cache in (["--no-cache"], []):
        assert main([*argv, *no_cache]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    json.loads(outputs[0])


def test_graph_command_is_byte_identical(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["graph", "bert-tiny", "--head", "masked-lm", "--no-cache", "-o", str(first)]) == 0
    assert main(["graph", "bert-tiny", "--head", "masked-lm", "-o", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()
    assert main(["graph", "bert-tiny", "--depth", "2", "-o", str(tmp_path / "v.graphml")]) == 0
    view = graph_io.read_graphml(tmp_path / "v.graphml")
    assert any(d.get("repeat") == 2 for _, d in view.nodes(data=True))
