"""``edge_labels``: the shape on every edge (``shapes``), only where it changes (``changes``), or on none.

The drawings are laid out by the real ``dot -Tjson`` and the rules read off what Graphviz
placed: which edges carry a label, and how wide the drawing came out. ``shapes`` is held byte
for byte to reviewed files (``tests/fixtures/edge-labels``, last rewritten for the compact
layout and caption; when a change to the drawings is meant, rewrite them with
``dot.generate_dot(bert_tiny(head), depth)`` and ``mermaid.generate_mermaid(...).text``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest

from bertgraph.api import Architecture
from bertgraph.docs import request as docs_request
from bertgraph.docs.renderer import DiagramRenderer
from bertgraph.graph import schema as g
from bertgraph.graph.views import view
from bertgraph.model import ModelSpec
from bertgraph.render import diagram, dot, mermaid
from tests import drawn
from tests.conftest import require
from tests.graph_fixtures import FIXTURES, bert_tiny
from tests.helpers import one_line_error

pytestmark = pytest.mark.dot
MODES = ("shapes", "changes", "none")
DEPTH = 2
GOLDEN = FIXTURES / "edge-labels"
MERMAID_LABEL = re.compile(r'^\s*\S+ (?:-->|-\.->|==>)\|"([^|]*)"\| \S+$', re.MULTILINE)


@dataclass(frozen=True)
class Laid:
    """What Graphviz drew: each edge's label ("" for none) by (tail, head) DOT name, and the drawing's width."""

    labels: dict[tuple[str, str], str]
    label_objects: int  # edges Graphviz drew a label or an external label for
    width: float


def lay_out(source: str) -> Laid:
    require(shutil.which("dot") is not None, "Graphviz dot is not installed (apt-get install graphviz)")
    done = subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, check=True)
    data = json.loads(done.stdout)
    names = {item["_gvid"]: item["name"] for item in data.get("objects", [])}
    labels, drawn = {}, 0
    for edge in data.get("edges", []):
        if edge.get("style") == "invis":
            continue  # drawn by nobody: it only ranks a node (render/compact.py)
        text = str(edge.get("label") or edge.get("xlabel") or "").strip()
        drawn += any(key in edge for key in ("lp", "xlp", "_ldraw_", "_xldraw_"))  # a label placed and drawn
        labels[names[edge["tail"]], names[edge["head"]]] = text
    width = float(data["bb"].split(",")[2])
    return Laid(labels, drawn, width)


@pytest.fixture(params=["bert-tiny", "gpt2"], scope="module")
def graph(request: pytest.FixtureRequest, tiny_graph: Callable[[str, str], tuple[ModelSpec, nx.DiGraph]]) -> nx.DiGraph:
    """bert-tiny (the committed trace, 3 layers) and a tiny GPT-2 with its LM head."""
    return bert_tiny("base") if request.param == "bert-tiny" else tiny_graph("gpt2", "causal-lm")[1]


@pytest.fixture(scope="module")
def laid(graph: nx.DiGraph) -> dict[str, Laid]:
    return {mode: lay_out(dot.generate_dot(graph, DEPTH, edge_labels=mode)) for mode in MODES}


def _inputs(graph: nx.DiGraph) -> set[str]:
    return {node for node, data in view(graph, DEPTH).nodes(data=True) if data.get(g.KIND) == g.INPUT}


def _shape(label: str) -> str:
    """The shape a label shows ("" for none): a skip connection's label starts with its name."""
    return label.removeprefix("residual").strip()


def test_shapes_labels_every_edge(laid: dict[str, Laid]) -> None:
    shapes = laid["shapes"]
    assert shapes.labels and all(_shape(label) for label in shapes.labels.values())
    assert shapes.label_objects == len(shapes.labels)


def test_none_draws_no_edge_labels(laid: dict[str, Laid]) -> None:
    none, shapes = laid["none"], laid["shapes"]
    assert none.labels.keys() == shapes.labels.keys()
    residual = {edge for edge, label in shapes.labels.items() if label.startswith("residual ")}
    # A skip connection keeps its name (GPT-2's layers add at depth 2); nothing else is labelled.
    assert {edge: label for edge, label in none.labels.items() if label} == dict.fromkeys(residual, "residual")
    assert none.label_objects == len(residual)


def test_changes_labels_fewer_edges_each_a_new_shape(graph: nx.DiGraph, laid: dict[str, Laid]) -> None:
    shapes = {edge: _shape(label) for edge, label in laid["shapes"].labels.items()}
    changes = {edge: _shape(label) for edge, label in laid["changes"].labels.items()}
    kept = {edge: shape for edge, shape in changes.items() if shape}
    assert 0 < len(kept) < len(shapes)
    inputs = _inputs(graph)

    def entering(node: str) -> set[str]:
        return {shapes[edge] for edge in shapes if edge[1] == node}

    for (tail, head), shape in kept.items():
        assert shape == shapes[tail, head]  # the same text as before, where one is kept
        assert tail in inputs or shape not in entering(tail), (tail, head, shape, entering(tail))
    said: dict[tuple[str, str], list[str]] = {}
    for (tail, head), shape in shapes.items():
        if tail in inputs or shape not in entering(tail):
            said.setdefault((tail, shape), []).append(changes[tail, head])
    # every change is labelled, every input's edge too — once per node and shape
    assert all(texts.count(shape) == 1 for (_, shape), texts in said.items()), said
    residual_only = sum(label == "residual" for label in laid["changes"].labels.values())
    assert laid["changes"].label_objects == len(kept) + residual_only


def test_a_node_says_a_new_shape_once(tiny_graph: Callable[[str, str], tuple[ModelSpec, nx.DiGraph]]) -> None:
    # T5's first layer computes the relative position bias every layer adds: its edges into the
    # first attention and into the folded ones carry one shape, which the drawing says once.
    graph = tiny_graph("t5", "base")[1]
    source = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias"
    edges = [e for e in diagram.build_diagram(graph, 3).edges if e.source == source]
    assert len(edges) == 2 and len({e.shape for e in edges}) == 1
    assert [e.label for e in edges] == [edges[0].shape, ""]
    laid = lay_out(dot.generate_dot(graph, 3)).labels
    for tail in {tail for tail, _ in laid}:
        shown = [label for (t, _), label in laid.items() if t == tail and _shape(label)]
        assert len(shown) == len(set(shown)), (tail, shown)
    shapes = lay_out(dot.generate_dot(graph, 3, edge_labels="shapes")).labels
    assert [shapes[source, e.target] for e in edges] == [edges[0].shape] * 2  # every edge keeps it there


def test_fewer_labels_draw_no_wider(laid: dict[str, Laid]) -> None:
    assert laid["none"].width <= laid["shapes"].width
    assert laid["none"].width <= laid["changes"].width <= laid["shapes"].width


def test_changes_is_the_default(graph: nx.DiGraph) -> None:
    # Every node already shows its output shape; an edge repeats it only where it says something new.
    assert dot.generate_dot(graph, DEPTH, edge_labels="changes") == dot.generate_dot(graph, DEPTH)
    assert dot.generate_dot(graph, DEPTH, edge_labels="shapes") != dot.generate_dot(graph, DEPTH)
    changes = mermaid.generate_mermaid(graph, DEPTH, edge_labels="changes").text
    assert changes == mermaid.generate_mermaid(graph, DEPTH).text


@pytest.mark.parametrize(("head", "depth"), [("base", 2), ("sequence-classification", 3)])
def test_shapes_is_the_reviewed_drawing(head: str, depth: int) -> None:
    golden = GOLDEN / f"bert-tiny-3-{head}-depth{depth}"
    graph = bert_tiny(head)
    assert dot.generate_dot(graph, depth, edge_labels="shapes") == golden.with_suffix(".dot").read_text()
    assert mermaid.generate_mermaid(graph, depth, edge_labels="shapes").text == golden.with_suffix(".mmd").read_text()


def test_residual_edges_keep_their_name() -> None:
    graph = bert_tiny("sequence-classification")  # depth 3 draws the adds inside a layer
    shapes = lay_out(dot.generate_dot(graph, 3, edge_labels="shapes")).labels
    none = lay_out(dot.generate_dot(graph, 3, edge_labels="none")).labels
    residual = {edge for edge, label in shapes.items() if label.startswith("residual ")}
    assert residual
    assert {edge for edge, label in none.items() if label} == residual
    assert {none[edge] for edge in residual} == {"residual"}
    text = mermaid.generate_mermaid(graph, 3, edge_labels="none").text
    assert sorted(MERMAID_LABEL.findall(text)) == ["residual"] * len(residual)


def test_mermaid_none_has_no_edge_labels(graph: nx.DiGraph) -> None:
    counts = {
        mode: len(MERMAID_LABEL.findall(mermaid.generate_mermaid(graph, DEPTH, edge_labels=mode).text))
        for mode in MODES
    }
    none = MERMAID_LABEL.findall(mermaid.generate_mermaid(graph, DEPTH, edge_labels="none").text)
    assert set(none) <= {"residual"}  # a skip connection keeps its name, nothing else is labelled
    shapes = MERMAID_LABEL.findall(mermaid.generate_mermaid(graph, DEPTH, edge_labels="shapes").text)
    assert len(none) == sum(label.startswith("residual ") for label in shapes)
    assert 0 < counts["changes"] < counts["shapes"]


def test_comparison_and_unknown_value() -> None:
    first, second = bert_tiny("base"), bert_tiny("sequence-classification")
    text = dot.generate_dot(first, DEPTH, compare=second, edge_labels="none")
    assert not [line for line in text.splitlines() if " -> " in line and "label=" in line]
    with pytest.raises(ValueError, match="unknown edge labels 'shape'"):
        diagram.build_diagram(first, DEPTH, edge_labels="shape")


def test_api_passes_the_option(tmp_path: Path) -> None:
    graph = bert_tiny("base")
    arch = Architecture(graph)
    assert arch.to_dot(DEPTH, edge_labels="none") == dot.generate_dot(graph, DEPTH, edge_labels="none")
    assert (
        arch.to_mermaid(DEPTH, edge_labels="changes")
        == mermaid.generate_mermaid(graph, DEPTH, edge_labels="changes").text
    )
    texts = {mode: drawn.read_svg(arch.to_svg(DEPTH, edge_labels=mode).encode()).texts.split("\n") for mode in MODES}
    drawn_edges = len(diagram.build_diagram(graph, DEPTH).edges)
    assert len(texts["shapes"]) - len(texts["none"]) == drawn_edges  # one text per edge drawn
    path = arch.save(tmp_path / "x.dot", DEPTH, edge_labels="changes")
    assert path.read_text() == dot.generate_dot(graph, DEPTH, edge_labels="changes")


def test_every_face_knows_the_same_values() -> None:
    from bertgraph import cli
    from bertgraph.docs.sphinx import BertgraphDirective

    assert cli.EDGE_LABELS == diagram.EDGE_LABELS == docs_request.EDGE_LABELS == MODES
    assert "edge-labels" in BertgraphDirective.option_spec


# --- the command line ---------------------------------------------------------------------


def test_cli_refuses_an_unknown_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(["render", "bert-tiny", "--edge-labels", "few", "-o", str(tmp_path / "x.svg")], capsys, 2)
    assert "--edge-labels" in line and "'few'" in line
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("suffix", [".graphml", ".json"])
def test_cli_refuses_it_for_graph_files(suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(
        ["render", "bert-tiny", "--edge-labels", "none", "-o", str(tmp_path / f"x{suffix}")], capsys, 2
    )
    assert line.startswith("bertgraph: error: --edge-labels applies to diagrams")


def test_cli_draws_without_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bertgraph.cli import main

    target = tmp_path / "x.dot"
    assert main(["render", "bert-tiny", "--layers", "3", "--edge-labels", "none", "-o", str(target)]) == 0
    text = target.read_text()
    assert " -> " in text and not [line for line in text.splitlines() if " -> " in line and "label=" in line]


# --- the docs integrations ----------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    returncode: int
    log: str
    page: str

    def lines(self, marker: str) -> list[str]:
        return [line for line in self.log.splitlines() if marker in line]


def mkdocs_build(root: Path) -> Site:
    """``mkdocs build`` of the project in ``root`` (as tests/test_docs_mkdocs.py runs it)."""
    require(shutil.which("dot") is not None, "Graphviz dot is not installed (apt-get install graphviz)")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build"], cwd=root, capture_output=True, text=True, timeout=600, check=False
    )
    index = root / "site" / "index.html"
    return Site(done.returncode, done.stdout + done.stderr, index.read_text() if index.exists() else "")


def test_docs_option_is_checked_and_keys_the_drawing() -> None:
    plain = docs_request.parse({"model": "bert-tiny"})
    none = docs_request.parse({"model": "bert-tiny", "edge-labels": "none"})
    assert (plain.edge_labels, none.edge_labels) == ("changes", "none")
    assert docs_request.parse({"model": "bert-tiny", "edge_labels": "changes"}).edge_labels == "changes"
    assert docs_request.DiagramRequest.from_dict(none.as_dict()) == none
    assert "edge labels none" in none.describe() and "edge labels" not in plain.describe()
    renderer = DiagramRenderer(None)
    assert renderer.key(plain, "inline-svg") != renderer.key(none, "inline-svg")  # a changed option redraws
    with pytest.raises(docs_request.OptionError, match="edge-labels must be one of shapes, changes, none; got 'all'"):
        docs_request.parse({"model": "bert-tiny", "edge-labels": "all"})


def test_docs_mermaid_drawing_has_no_edge_labels() -> None:
    from bertgraph.docs.mkdocs import fence_options

    request = docs_request.parse(fence_options("model: bert-tiny\nlayers: 3\nformat: mermaid\nedge-labels: none"))
    text = DiagramRenderer(None).mermaid(request)
    assert "-->" in text and not MERMAID_LABEL.findall(text)


def _labelled_edges(source: str) -> list[str]:
    return [line for line in source.splitlines() if " -> " in line and "label=" in line]


def test_interactive_page_and_docs_svg_draw_without_labels() -> None:
    from bertgraph.docs.renderer import _svg_source
    from bertgraph.render import html

    graph = bert_tiny("base")
    assert _labelled_edges(html._depth_records(graph, DEPTH, True, None)[0])
    assert not _labelled_edges(html._depth_records(graph, DEPTH, True, None, "none")[0])
    request = docs_request.parse({"model": "bert-tiny", "layers": 3, "edge-labels": "none"})
    assert not _labelled_edges(_svg_source(graph, None, request))


@pytest.mark.slow
def test_mkdocs_fence_draws_without_labels_and_redraws_when_the_key_changes(tmp_path: Path) -> None:
    fence = "```bertgraph\nmodel: bert-tiny\nlayers: 3\ndepth: 2\n{}```\n"
    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text("site_name: edge labels\nplugins:\n  - bertgraph\n")
    page = tmp_path / "docs" / "index.md"
    page.write_text("\n".join([fence.format(""), fence.format("edge-labels: none\n")]))
    first = mkdocs_build(tmp_path)
    assert first.returncode == 0, first.log
    shapes, none = re.findall(r"<svg .*?</svg>", first.page, re.DOTALL)
    edges = len(diagram.build_diagram(bert_tiny("base"), DEPTH).edges)
    # the default labels only the edges where the shape changes; none of them: fewer texts, nothing else gone
    assert 0 < shapes.count("<text") - none.count("<text") < edges
    page.write_text(page.read_text().replace("edge-labels: none", "edge-labels: shapes"))
    again = mkdocs_build(tmp_path)
    drawn_now = again.lines("bertgraph: drew")
    assert len(drawn_now) == 1 and "edge labels shapes" in drawn_now[0], again.log
