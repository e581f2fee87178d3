"""Graphviz output checked with the real dot binary: every head, depth and comparison."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from bertgraph.api import Architecture
from bertgraph.model import HEADS
from bertgraph.render import dot, graphviz_run
from bertgraph.render.diagram import build_diagram
from tests import drawn
from tests.helpers import DEPTH_TWO_LABELS
from tests.helpers import shuffled as shuffle

pytestmark = pytest.mark.dot
SVG = "{http://www.w3.org/2000/svg}"


def svg_texts(svg: bytes) -> str:
    root = ET.fromstring(svg)  # well-formed XML or an exception
    return "\n".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))


def tooltips(svg: bytes) -> str:
    root = ET.fromstring(svg)
    return "\n".join(a.get("{http://www.w3.org/1999/xlink}title", "") for a in root.iter(f"{SVG}a"))


@pytest.mark.parametrize("head", list(HEADS))
def test_every_head_and_depth_lays_out(traced: Callable[..., Architecture], head: str, dot_binary: str) -> None:
    arch = traced("bert-tiny", head)
    for depth, fold in [(0, True), (1, True), (2, True), (2, False), (3, True), (4, True), (4, False)]:
        source = arch.to_dot(depth, fold=fold)
        svg = graphviz_run.render(source, "svg")
        text = svg_texts(svg)
        shown, view = drawn.read_svg(svg), arch.view(depth, fold=fold)
        drawing = build_diagram(arch.graph, depth, fold)
        assert sorted(shown.nodes) == drawn.expected_nodes(view, drawing), (depth, fold)
        assert len(shown.edges) == len(drawing.edges), (depth, fold)
        assert arch.model_class in text
        assert "input_ids" in text
        if depth >= 2 and fold:
            assert "BertLayer × 2" in text
        if depth == 2 and not fold:
            assert "layer.1" in text and "BertLayer × 2" not in text


def test_depth_two_labels_and_tooltips(traced: Callable[..., Architecture], dot_binary: str) -> None:
    arch = traced("bert-base-uncased", "sequence-classification")
    svg = graphviz_run.render(arch.to_dot(2), "svg")
    text = svg_texts(svg)
    for label in (
        *DEPTH_TWO_LABELS,
        "1,538 params",
        "task head · sequence-classification",
        "encoder-only backbone",
        "sum of embeddings",  # the compact layout: the three tables are lines of their sum
        "word_embeddings 30522 × 768 · 23.4M params",
        "with attention mask [batch, 1, seq, seq]",  # and the mask a line of the layers it feeds
        "12 layers · hidden 768 · 12 heads · FFN 3072 · bidirectional attention",  # the caption, its first line
        "[batch, 2]",
        "bidirectional attention",  # the layers' colour and legend entry: their attention kind, read off the ops
    ):
        assert label in text, label
    assert "85,054,464 in all" in tooltips(svg)  # exact count in the tooltip


def test_depth_one_and_three_content(traced: Callable[..., Architecture], dot_binary: str) -> None:
    arch = traced("bert-base-uncased", "sequence-classification")
    one = svg_texts(graphviz_run.render(arch.to_dot(1), "svg"))
    for label in ("embeddings", "encoder", "pooler", "dropout", "classifier", "85.1M params"):
        assert label in one
    three = svg_texts(graphviz_run.render(arch.to_dot(3, edge_labels="shapes"), "svg"))
    for label in (
        "query",
        "key",
        "value",
        "scaled dot-product attention",
        "add (residual)",
        "GELUActivation",
        "intermediate_act_fn",
        "Linear 768 → 3072",
        "Linear 3072 → 768",
        "residual [batch, seq, 768]",
        "layer.0-11 · 7.09M params each",  # a frame's title in two lines: name and size, then class
        "BertLayer × 12",
    ):
        assert label in three, label


def test_every_pair_of_heads_side_by_side(traced: Callable[..., Architecture], dot_binary: str) -> None:
    archs = {head: traced("bert-tiny", head) for head in HEADS}
    for first, second in itertools.combinations(HEADS, 2):
        svg = graphviz_run.render(archs[first].to_dot(2, compare=archs[second]), "svg")
        text = svg_texts(svg)
        assert f"{first} vs {second}" in text
        assert "only in this variant" in text


def test_comparison_highlights_only_the_head(traced: Callable[..., Architecture]) -> None:
    base, head = traced("bert-base-uncased"), traced("bert-base-uncased", "sequence-classification")
    source = base.to_dot(2, compare=head)
    highlighted = [line for line in source.splitlines() if 'penwidth="2.5"' in line]
    assert len(highlighted) == 2
    assert all(line.lstrip().startswith(('"b:dropout"', '"b:classifier"')) for line in highlighted)


def test_images_are_deterministic(traced: Callable[..., Architecture], dot_binary: str) -> None:
    source = traced("bert-tiny", "sequence-classification").to_dot(2)
    for fmt, magic in (("svg", b"<?xml"), ("png", b"\x89PNG"), ("pdf", b"%PDF")):
        first, second = graphviz_run.render(source, fmt), graphviz_run.render(source, fmt)
        assert first.startswith(magic)
        assert first == second, fmt


def test_dark_theme(traced: Callable[..., Architecture], dot_binary: str) -> None:
    svg = graphviz_run.render(traced("bert-tiny", "sequence-classification").to_dot(2, theme="dark"), "svg")
    assert b'fill="#0d1117"' in svg


def test_deep_models_stay_small(traced: Callable[..., Architecture], dot_binary: str) -> None:
    shallow, deep = traced("bert-tiny", "base"), traced("bert-tiny", "base", layers=48)
    for depth in (2, 3):
        a = svg_texts(graphviz_run.render(shallow.to_dot(depth), "svg"))
        b = svg_texts(graphviz_run.render(deep.to_dot(depth), "svg"))
        assert len(b.splitlines()) == len(a.splitlines())
        assert "BertLayer × 48" in b


def test_dot_text_ignores_insertion_order(traced: Callable[..., Architecture]) -> None:
    graph = traced("bert-tiny", "question-answering").graph
    shuffled = shuffle(graph, 3)
    for depth in range(5):
        assert dot.generate_dot(graph, depth) == dot.generate_dot(shuffled, depth)


def test_cli_writes_every_format(
    traced: Callable[..., Architecture], tmp_path: Path, capsys: pytest.CaptureFixture[str], dot_binary: str
) -> None:
    from bertgraph.cli import main

    for name in ("b.svg", "b.png", "b.pdf", "b.dot", "b.mmd", "b.md"):
        assert main(["render", "bert-tiny", "--head", "token-classification", "-o", str(tmp_path / name)]) == 0
    arch = traced("bert-tiny", "token-classification")
    view = arch.view(2)
    labels = ("layer.0-1", "BertLayer × 2", "198K params each · 397K in all", "classifier", "Linear 128 → 2")
    # DOT: the diagram of the view, as the API makes it; dot lays it out as the SVG shows it (the same
    # nodes, edges and words; the SVG may have moved a title or an edge off another's way).
    source = (tmp_path / "b.dot").read_text()
    assert source == arch.to_dot(2)
    laid_out = drawn.read_svg(
        subprocess.run([dot_binary, "-Tsvg", str(tmp_path / "b.dot")], capture_output=True, check=True).stdout
    )
    svg = drawn.read_svg((tmp_path / "b.svg").read_bytes())
    assert (sorted(svg.nodes), sorted(svg.edges), sorted(svg.texts.split("\n"))) == (
        sorted(laid_out.nodes),
        sorted(laid_out.edges),
        sorted(laid_out.texts.split("\n")),
    )
    drawing = build_diagram(arch.graph, 2)
    assert sorted(svg.nodes) == drawn.expected_nodes(view, drawing)
    # 14 edges of the view; the compact layout draws the mask and the three tables as lines
    assert view.number_of_edges() == 14 and len(svg.edges) == len(drawing.edges) < 14
    for label in labels:
        assert label in svg.texts, label
    # PNG at 144 dpi and PDF: pictures of the same page.
    width, height = drawn.png_size((tmp_path / "b.png").read_bytes())
    assert abs(width - 2 * svg.width) <= 2 and abs(height - 2 * svg.height) <= 2
    page = drawn.pdf_page((tmp_path / "b.pdf").read_bytes())
    assert svg.width <= page[0] <= svg.width + 80 and svg.height <= page[1] <= svg.height + 80
    # Mermaid, bare and fenced in Markdown: every view node and edge.
    mermaid = (tmp_path / "b.mmd").read_text()
    assert mermaid == arch.to_mermaid(2)
    assert (tmp_path / "b.md").read_text() == f"```mermaid\n{mermaid}```\n"
    assert len(drawn.mermaid_nodes(mermaid)) == len(drawing.nodes)
    assert len(drawn.mermaid_edges(mermaid)) == len(drawing.edges)
    for label in labels:
        assert label in mermaid, label


def test_missing_dot_names_the_package_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "bert.svg"
    sibling = tmp_path / "bert.dot"
    sibling.write_text("the user's own DOT file")
    env = {**os.environ, "PATH": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "bertgraph", "render", "bert-tiny", "-o", str(target)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert "install the graphviz package" in result.stderr and "apt-get install graphviz" in result.stderr
    assert "or write DOT (-o bert.dot) or Mermaid (.mmd, .md), which need no Graphviz" in result.stderr
    # Only the file the user named may be written, and it could not be: nothing changed.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bert.dot"]
    assert sibling.read_text() == "the user's own DOT file"


def test_write_functions(traced: Callable[..., Architecture], tmp_path: Path) -> None:
    from bertgraph.render import mermaid

    graph = traced("bert-tiny", "next-sentence").graph
    dot.write_dot(graph, tmp_path / "a.dot", depth=1)
    mermaid.write_mermaid(graph, tmp_path / "a.md", depth=1)
    assert (tmp_path / "a.dot").read_text() == dot.generate_dot(graph, depth=1)
    assert (tmp_path / "a.md").read_text() == mermaid.fenced(mermaid.generate_mermaid(graph, depth=1).text)


def test_a_long_module_title_takes_two_lines(tiny_graph: Callable[..., tuple[object, object]]) -> None:
    # mT5's gated feed-forward box is titled "DenseReluDense · MT5DenseGatedActDense · … params":
    # the class goes on a line of its own, so the title is not what sets the box's width.
    diagram = build_diagram(tiny_graph("mt5", "base")[1], 3)
    long = [c for c in diagram.clusters if c.role == "module" and len(c.title) > dot.TITLE_CHARACTERS]
    short = [c for c in diagram.clusters if c.role == "module" and len(c.title) <= dot.TITLE_CHARACTERS]
    assert any("MT5DenseGatedActDense" in c.title for c in long)
    source = "\n".join(dot.generate_lines(diagram))
    for cluster in long:
        name, kind, *rest = cluster.title.split(" · ")
        assert f'label=<{" · ".join([name, *rest])}<br align="left"/>{kind}<br align="left"/>>' in source, cluster.title
    for cluster in short:
        assert f"label=<{cluster.title}>" in source, cluster.title
