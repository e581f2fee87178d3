"""The Markdown report, the notebook API, and the committed example gallery."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from bertgraph.api import Architecture
from bertgraph.cli import main
from bertgraph.gallery import build_gallery
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
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert html.count("<table>") == 4


def test_report_without_svg_and_for_base(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "base.md"
    assert main(["report", "bert-tiny", "-o", str(target)]) == 0
    text = target.read_text()
    assert "![" not in text and "head adds" not in text
    assert main(["report", "bert-tiny", "-o", str(tmp_path / "report.txt")]) == 2
    assert "report writes Markdown" in capsys.readouterr().err


def test_notebook_representations(traced: Callable[..., Architecture], tmp_path: Path, dot_binary: str) -> None:
    arch = traced("bert-tiny", "sequence-classification")
    svg = arch._repr_svg_()
    assert svg.lstrip().startswith("<?xml") and "BertLayer × 2" in svg
    assert arch._repr_markdown_().startswith("```mermaid\n")
    assert arch.to_dot().startswith("digraph bertgraph {")
    assert arch.to_mermaid(1).startswith("---\ntitle:")
    for name in ("a.svg", "a.png", "a.pdf", "a.dot", "a.mmd", "a.md", "a.graphml", "a.json"):
        assert arch.save(tmp_path / name).stat().st_size > 0
    assert "BertForSequenceClassification" in repr(arch) and "4,386,178" in repr(arch)


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
    written = build_gallery(tmp_path / "outputs", use_cache=False)
    assert sorted(p.name for p in written) == sorted(committed)
    stale = [p.name for p in written if p.read_bytes() != committed[p.name]]
    assert stale == [], f"outputs/ is stale ({stale}); regenerate with: bertgraph gallery -o outputs, and commit"


def test_gallery_refuses_a_file_as_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["gallery", "-o", str(target)]) == 1
    assert "is a file; give a folder" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "nothing", ignore_errors=True)
