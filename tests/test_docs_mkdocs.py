"""The MkDocs plugin, with real ``mkdocs build`` runs of tests/docs_projects/mkdocs (copied into a temporary folder)."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

from bertgraph.api import Architecture
from bertgraph.docs.mkdocs import find_fences
from tests.conftest import require

pytestmark = pytest.mark.xdist_group("docs_mkdocs")  # its fixtures are built once, on one worker

PROJECT = Path(__file__).parent / "docs_projects" / "mkdocs"
TINY = ("bert-tiny", "sequence-classification")


@dataclass
class Build:
    root: Path
    returncode: int
    log: str
    page: str

    def lines(self, marker: str) -> list[str]:
        return [line for line in self.log.splitlines() if marker in line]


def mkdocs_build(root: Path, *options: str) -> Build:
    require(shutil.which("dot") is not None, "Graphviz dot is not installed")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", *options],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    index = root / "site" / "index.html"
    page = index.read_text(encoding="utf-8") if index.exists() else ""
    return Build(root, done.returncode, done.stdout + done.stderr, page)


@pytest.fixture(scope="session")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Build]:
    """A first build, an unchanged rebuild, and a rebuild after one option of one fence changed."""
    root = tmp_path_factory.mktemp("mkdocs") / "site-src"
    shutil.copytree(PROJECT, root)
    first = mkdocs_build(root)
    again = mkdocs_build(root)
    page = root / "docs" / "index.md"
    text = page.read_text(encoding="utf-8")
    changed = text.replace("depth: 3\ntheme: dark", "depth: 4\ntheme: dark")
    assert changed != text
    page.write_text(changed, encoding="utf-8")
    edited = mkdocs_build(root)
    return {"first": first, "again": again, "edited": edited}


@pytest.mark.dot
@pytest.mark.slow
def test_fences_become_svg_mermaid_tables_and_a_page(
    builds: dict[str, Build], traced: Callable[..., Architecture]
) -> None:
    first = builds["first"]
    assert first.returncode == 0, first.log
    params = traced(*TINY).params()
    svgs = re.findall(r"<svg .*?</svg>", first.page, re.DOTALL)
    assert len(svgs) == 4  # two diagrams, the schematic and the masks of two models
    schematic, grids = (html.unescape(svg) for svg in svgs[2:])
    assert "bert-tiny" in schematic and "causal self-attention" in schematic  # tiny-gpt2 read beside the page
    for line in ("decoder: causal", "layers 0–2", "encoder: bidirectional", "layers 0, 1"):
        assert f">{line}<" in grids, line
    assert f"{params['total']:,} parameters" in svgs[0] and "Linear 128 → 2" in svgs[0]
    assert 'fill="#0d1117"' in svgs[1]
    assert '[data-md-color-scheme="slate"] .bertgraph-auto' in first.page
    # the first fence's style sheet (print.css beside the page), scoped to its drawing alone
    scope = re.search(r'<div class="bertgraph bertgraph-auto (bertgraph-css-[0-9a-f]{8})">', first.page)
    assert scope is not None and first.page.count(scope.group(1)) == 2
    sheet = (PROJECT / "docs" / "print.css").read_text(encoding="utf-8").strip()
    assert f"<style>.{scope.group(1)} {{\n{sheet}\n}}</style>" in first.page
    mermaid = re.search(r'<code class="language-mermaid">(.*?)</code>', first.page, re.DOTALL)
    assert mermaid and html.unescape(mermaid.group(1)).startswith("---\ntitle:")
    text = html.unescape(re.sub(r"<[^>]+>", "", first.page))
    assert re.search(rf"total +{params['total']:,} +100.00%", text)
    assert "```bertgraph\nmodel: bert-tiny\n```" in text  # a fence inside another fence is an example, kept
    frame = re.search(r'<iframe class="bertgraph-page"[^>]*srcdoc="([^"]*)"', first.page)
    assert frame and 'id="bertgraph-data"' in html.unescape(frame.group(1))


@pytest.mark.dot
@pytest.mark.slow
def test_broken_fence_warns_with_page_and_line(builds: dict[str, Build]) -> None:
    first = builds["first"]
    warnings = first.lines("WARNING")
    assert len(warnings) == 1, first.log
    assert "docs/index.md:27: bertgraph: unknown model 'bert-huge-uncased'" in warnings[0]
    assert first.returncode == 0
    strict = mkdocs_build(first.root, "--strict")
    assert strict.returncode != 0  # --strict turns the warning into a failed build


@pytest.mark.dot
@pytest.mark.slow
def test_rebuilds_draw_only_what_changed(builds: dict[str, Build]) -> None:
    assert len(builds["first"].lines("bertgraph: drew")) == 7
    assert builds["again"].lines("bertgraph: drew") == []
    drawn = builds["edited"].lines("bertgraph: drew")
    assert len(drawn) == 1 and "depth 4 · svg" in drawn[0], drawn


def test_plugin_is_registered_and_loads_without_torch() -> None:
    points = {point.name: point.value for point in metadata.entry_points(group="mkdocs.plugins")}
    assert points.get("bertgraph") == "bertgraph.docs.mkdocs:BertgraphPlugin"
    probe = (
        "import sys\n"
        "from mkdocs.plugins import get_plugins\n"
        "get_plugins()['bertgraph'].load()()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_fences_inside_other_fences_and_unclosed_fences() -> None:
    page = "~~~~\n```bertgraph\nmodel: a\n```\n~~~~\n```bertgraph\nmodel: b\n"
    assert [(fence.first, fence.last, fence.body) for fence in find_fences(page)] == [(5, 8, "model: b\n")]


def test_a_fence_reads_its_model_from_the_pages_folder_and_refuses_an_option_given_twice(tmp_path: Path) -> None:
    """As Sphinx does: ``model: ../models/tiny`` in docs/guide/page.md is docs/models/tiny, whatever the
    working directory; a duplicate key is a warning at its own line, not the last value silently."""
    import json

    from tests.family_configs import TINY as FAMILIES

    root = tmp_path / "site-src"
    (root / "docs" / "guide").mkdir(parents=True)
    (root / "docs" / "models" / "tiny").mkdir(parents=True)
    (root / "docs" / "models" / "tiny" / "config.json").write_text(json.dumps(FAMILIES["bert"]))
    decoy = root / "models" / "tiny"  # the same path read from mkdocs.yml's folder: another model
    decoy.mkdir(parents=True)
    (decoy / "config.json").write_text(json.dumps({**FAMILIES["bert"], "num_hidden_layers": 5}))
    (root / "mkdocs.yml").write_text("site_name: t\nplugins:\n  - bertgraph\n")
    (root / "docs" / "index.md").write_text("# Home\n")
    fence = "```bertgraph\nmodel: {}\nformat: summary\n```\n"
    page = "# Guide\n\n" + fence.format("../models/tiny") + "\n" + fence.format("../models/tiny\ndepth: 1\ndepth: 2")
    page += "\n" + fence.format("models/tiny")  # exists only from the working directory
    (root / "docs" / "guide" / "page.md").write_text(page)
    done = mkdocs_build(root)
    assert done.returncode == 0, done.log
    text = html.unescape((root / "site" / "guide" / "page" / "index.html").read_text(encoding="utf-8"))
    layers = re.findall(r"layer: ModuleList +(\d+) ", text)
    assert layers == [str(FAMILIES["bert"]["num_hidden_layers"])], layers  # the page's model, not the decoy (5)
    warnings = sorted(line.split("WARNING", 1)[1].strip(" -") for line in done.lines("WARNING"))
    assert warnings == [
        "docs/guide/page.md:11: bertgraph: option 'depth' is given twice (lines 2 and 3 of the fence); keep one",
        f"docs/guide/page.md:15: bertgraph: no such file or directory: {root / 'docs/guide/models/tiny'}",
    ], done.log
