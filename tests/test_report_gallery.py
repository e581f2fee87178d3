"""The Markdown report, the notebook API, and the committed example gallery."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import networkx as nx
import pytest
from markdown_it import MarkdownIt

from bertgraph.api import Architecture
from bertgraph.cli import main
from bertgraph.gallery import build_gallery
from bertgraph.render.diagram import build_diagram
from tests import drawn
from tests.conftest import require

ROOT = Path(__file__).resolve().parent.parent


def test_report_sections(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "bert.md"
    (tmp_path / "bert.svg").write_text("<svg/>")  # a diagram beside the report gets linked
    assert main(["report", "bert-base-uncased", "--head", "sequence-classification", "-o", str(target)]) == 0
    text = target.read_text()
    for heading in (
        "# bert-base-uncased · BertForSequenceClassification",
        "## Architecture",
        "## Parameters",
        "## Module tree",
        "## Cost",
        "## What the sequence-classification head adds",
        "## Every parameter",
    ):
        assert heading in text, heading
    assert "![bert-base-uncased with the sequence-classification head](bert.svg)" in text
    assert "```mermaid\n---\ntitle:" in text
    assert "| embeddings | 23,837,184 | 21.77% |" in text
    assert "| encoder | 85,054,464 | 77.69% |" in text
    assert "| pooler | 590,592 | 0.54% |" in text
    assert "| added | classifier | Linear | 768 → 2 | +1,538 |" in text
    assert "<details><summary>201 parameter tensors with their shapes</summary>" in text
    assert "| matmul FLOPs | 22,348,434,432 | batch·(36,864·seq² + 169,869,312·seq + 1,182,720) |" in text
    assert "![FLOPs against sequence length, linear layers and attention](bert-flops.png)" in text
    assert (tmp_path / "bert-flops.png").read_bytes().startswith(b"\x89PNG")
    html = MarkdownIt("commonmark").enable("table").render(text)
    # parameters, module tree, cost (figures, memory, deployment, modules), head diff, every one
    assert html.count("<table>") == 8


def test_report_without_svg_and_for_base(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "base.md"
    assert main(["report", "bert-tiny", "-o", str(target)]) == 0
    text = target.read_text()
    assert "![" + "bert-tiny with" not in text and "head adds" not in text
    assert "](base-flops.png)" in text
    assert main(["report", "bert-tiny", "-o", str(tmp_path / "report.txt")]) == 2
    assert "report writes Markdown" in capsys.readouterr().err


def test_notebook_representations(traced: Callable[..., Architecture], tmp_path: Path, dot_binary: str) -> None:
    arch = traced("bert-tiny", "sequence-classification")
    view = arch.view(2)
    labels = ("layer.0-1", "BertLayer × 2", "198K params each · 397K in all", "classifier", "Linear 128 → 2")
    svg = arch._repr_svg_()
    assert svg.lstrip().startswith("<?xml")
    shown = drawn.read_svg(svg.encode())
    drawing = build_diagram(arch.graph, 2)
    assert sorted(shown.nodes) == drawn.expected_nodes(view, drawing)
    assert len(shown.edges) == len(drawing.edges)
    for label in labels:
        assert label in shown.texts, label
    markdown = arch._repr_markdown_()
    assert arch._repr_html_().startswith('<iframe class="bertgraph-page"') and "srcdoc=" in arch._repr_html_()
    assert markdown == f"```mermaid\n{arch.to_mermaid()}```\n"
    assert len(drawn.mermaid_nodes(markdown)) == len(drawing.nodes)
    assert len(drawn.mermaid_edges(markdown)) == len(drawing.edges)
    one = arch.to_mermaid(1)
    assert one.startswith("---\ntitle:") and len(drawn.mermaid_nodes(one)) == len(build_diagram(arch.graph, 1).nodes)
    assert arch.to_dot().startswith("digraph bertgraph {") and arch.to_dot() == arch.to_dot(2)

    saved = {name: arch.save(tmp_path / name) for name in ("a.svg", "a.png", "a.pdf", "a.dot", "a.mmd", "a.md")}
    assert drawn.read_svg(saved["a.svg"].read_bytes()) == shown
    assert saved["a.dot"].read_text() == arch.to_dot()
    assert saved["a.mmd"].read_text() == arch.to_mermaid()
    assert saved["a.md"].read_text() == markdown
    width, height = drawn.png_size(saved["a.png"].read_bytes())
    assert abs(width - 2 * shown.width) <= 2 and abs(height - 2 * shown.height) <= 2
    page = drawn.pdf_page(saved["a.pdf"].read_bytes())
    assert shown.width <= page[0] <= shown.width + 80 and shown.height <= page[1] <= shown.height + 80
    for name in ("a.graphml", "a.json"):
        written = read_graph(arch.save(tmp_path / name))
        assert list(written.nodes) == list(view.nodes) and list(written.edges) == list(view.edges), name
        assert written.nodes["bert.encoder.layer.0-1"]["repeat"] == 2
        assert sum(int(d["params"]) for _, d in written.nodes(data=True)) == 4_386_178
    assert repr(arch) == "<Architecture bert-tiny BertForSequenceClassification (4,386,178 parameters)>"


def read_graph(path: Path) -> nx.DiGraph:
    """A written graph file, read back with plain networkx."""
    if path.suffix == ".graphml":
        return nx.read_graphml(path)
    return nx.node_link_graph(json.loads(path.read_text()), directed=True, edges="edges")


def committed_outputs() -> dict[str, bytes]:
    """outputs/ as committed (HEAD), so a run that regenerated the working tree still catches staleness."""
    listing = subprocess.run(
        ["git", "ls-tree", "--name-only", "HEAD", "outputs/"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    require(listing.returncode == 0, "not a git checkout; cannot see the committed outputs/")
    files = {}
    for path in listing.stdout.split():
        shown = subprocess.run(["git", "show", f"HEAD:{path}"], cwd=ROOT, capture_output=True, check=True)
        files[Path(path).name] = shown.stdout
    return files


@pytest.mark.dot
@pytest.mark.slow
def test_committed_gallery_is_up_to_date(tmp_path: Path, dot_binary: str) -> None:
    committed = committed_outputs()
    # through the run's shared graph cache, which other tests fill: a warm command writes what a cold
    # one does (tests/test_cache_rules.py), and every entry there was traced by this very code
    written = build_gallery(tmp_path / "outputs", use_cache=True)
    assert sorted(p.name for p in written) == sorted(committed)
    stale = [p.name for p in written if not _same_output(p.name, p.read_bytes(), committed[p.name])]
    assert stale == [], f"outputs/ is stale ({stale}); regenerate with: bertgraph gallery -o outputs, and commit"


# matplotlib's antialiasing of a line depends on the processor's floating-point paths: the same
# plot drawn on another machine differs in a few edge pixels. Byte identity on one machine is
# tested with the plot itself; here a plot counts as fresh when its pixels agree but for such noise.
PLOT_NOISE_PIXELS = 200


def _same_output(name: str, written: bytes, committed: bytes) -> bool:
    if written == committed:
        return True
    if not name.endswith("-flops.png"):
        return False
    from io import BytesIO

    from PIL import Image, ImageChops

    new, old = (Image.open(BytesIO(data)).convert("RGB") for data in (written, committed))
    if new.size != old.size:
        return False
    levels = ImageChops.difference(new, old).convert("L").histogram()
    return sum(levels[25:]) <= PLOT_NOISE_PIXELS  # pixels that differ visibly


def test_gallery_refuses_a_file_as_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["gallery", "-o", str(target)]) == 1
    assert "it is a regular file; give a folder" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "nothing", ignore_errors=True)
