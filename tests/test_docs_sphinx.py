"""The Sphinx extension, with real sphinx-build runs of tests/docs_projects/sphinx (copied into a temporary folder)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bertgraph.api import Architecture
from tests.conftest import TINY_CONFIG as TINY_BERT_CONFIG
from tests.conftest import require

PROJECT = Path(__file__).parent / "docs_projects" / "sphinx"
TINY = ("bert-tiny", "sequence-classification")
pytestmark = [
    pytest.mark.dot,
    pytest.mark.slow,
    pytest.mark.xdist_group("docs_sphinx"),
]  # its fixtures are built once, on one worker


@dataclass
class Build:
    source: Path
    out: Path
    returncode: int
    log: str
    pages: dict[str, str]

    def page(self, name: str) -> str:
        """A page as this build wrote it (later builds into the same folder do not change it)."""
        return self.pages[name]

    def lines(self, marker: str) -> list[str]:
        return [line for line in self.log.splitlines() if marker in line]


def sphinx_build(
    source: Path,
    out: Path,
    *options: str,
    builder: str = "html",
    cache: Path | None = None,
    env: dict[str, str] | None = None,
) -> Build:
    """Run the real sphinx-build (``python -m sphinx``) as its own process (``env`` added to this one's)."""
    require(shutil.which("dot") is not None, "Graphviz dot is not installed")
    env = {**os.environ, **(env or {})}
    if cache is not None:
        env["BERTGRAPH_CACHE_DIR"] = str(cache)
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", builder, *options, str(source), str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    pages = {path.stem: path.read_text(encoding="utf-8") for path in out.glob("*.html")}
    return Build(source, out, done.returncode, done.stdout + done.stderr, pages)


def project_copy(folder: Path) -> Path:
    source = folder / "src"
    shutil.copytree(PROJECT, source)
    return source


@pytest.fixture(scope="session")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Build]:
    """A first build, an unchanged rebuild, and a rebuild after one option of one directive changed."""
    folder = tmp_path_factory.mktemp("sphinx")
    source = project_copy(folder)
    first = sphinx_build(source, folder / "html")
    again = sphinx_build(source, folder / "html")
    text = (source / "index.rst").read_text(encoding="utf-8")
    changed = text.replace("   :depth: 3\n   :theme: dark", "   :depth: 4\n   :theme: dark")
    assert changed != text
    (source / "index.rst").write_text(changed, encoding="utf-8")
    edited = sphinx_build(source, folder / "html")
    return {"first": first, "again": again, "edited": edited}


def test_html_inlines_svg_with_the_model_numbers(builds: dict[str, Build], traced: Callable[..., Architecture]) -> None:
    first = builds["first"]
    assert first.returncode == 0, first.log
    page = first.page("index")
    params = traced(*TINY).params()
    classifier = sum(row["numel"] for row in params["parameters"] if row["name"].startswith("classifier."))
    svgs = re.findall(r"<svg .*?</svg>", page, re.DOTALL)
    assert len(svgs) == 2  # depth 2 (auto theme) and depth 3 (dark); the others are Mermaid and a page
    assert f"{params['total']:,} parameters" in svgs[0]
    assert f"{classifier:,} params" in svgs[0] and "Linear 128 → 2" in svgs[0]
    assert 'fill="#0d1117"' in svgs[1]  # drawn dark
    assert '[data-theme="dark"] .bertgraph-auto' in page and "prefers-color-scheme: dark" in page
    assert re.search(r'<figcaption>\s*<p><span class="caption-text">bert-tiny with a <strong>classification', page)
    assert all(re.search(r'\sid="bg[0-9a-f]{8}-', svg) for svg in svgs)  # ids of their own on a shared page
    # the first directive's style sheet (print.css beside the page), scoped to its drawing alone
    scope = re.search(r'<div class="bertgraph bertgraph-auto (bertgraph-css-[0-9a-f]{8})">', page)
    assert scope is not None and page.count(scope.group(1)) == 2
    sheet = (PROJECT / "print.css").read_text(encoding="utf-8").strip()
    assert f"<style>.{scope.group(1)} {{\n{sheet}\n}}</style>" in page


def test_mermaid_goes_to_sphinxcontrib_mermaid_and_html_to_an_iframe(builds: dict[str, Build]) -> None:
    page = builds["first"].page("index")
    mermaid = re.search(r'<pre  class="mermaid">(.*?)</pre>', page, re.DOTALL)
    assert mermaid, "no Mermaid block"
    code = html.unescape(mermaid.group(1)).strip()
    assert code.startswith("---\ntitle:") and "flowchart TB" in code
    assert "mermaid.esm.min.mjs" in page  # sphinxcontrib-mermaid added its loader for this page
    frame = re.search(r'<iframe class="bertgraph-page"[^>]*srcdoc="([^"]*)"', page)
    assert frame and 'id="bertgraph-data"' in html.unescape(frame.group(1))


def test_tables_are_literal_blocks(builds: dict[str, Build], traced: Callable[..., Architecture]) -> None:
    page = html.unescape(re.sub(r"<[^>]+>", "", builds["first"].page("tables")))
    params = traced(*TINY).params()
    assert re.search(rf"total +{params['total']:,} +100.00%", page)
    for row in params["parameters"]:
        assert row["name"] in page
    assert "base vs sequence-classification" in html.unescape(builds["first"].page("tables"))


def test_the_schematic_and_the_masks_of_several_models(
    builds: dict[str, Build], traced: Callable[..., Architecture]
) -> None:
    """Both figures drawn from the models' traces: the folder beside the page found, the masks evaluated."""
    from bertgraph.graph.masks import Example, model_masks
    from bertgraph.render import masks

    page = builds["first"].page("figures")
    schematic, grids = re.findall(r"<svg .*?</svg>", page, re.DOTALL)
    gpt2 = traced(str(builds["first"].source / "tiny-gpt2")).graph
    for needle in (
        "bert-tiny",
        "encoder-only",
        "bidirectional self-attention",
        "decoder-only",
        "causal self-attention",
    ):
        assert needle in html.unescape(schematic), needle
    assert f"{traced('bert-tiny').params()['total']:,} params" in schematic
    (causal,) = model_masks(gpt2, Example(6))
    assert masks.title_lines(causal) == ["decoder: causal", "layers 0–2"]
    assert all(f">{line}<" in html.unescape(grids) for line in masks.title_lines(causal))
    # every allowed pair of a real query is drawn (a padding query's row is drawn alike in every grid)
    allowed = sum(sum(row) for row, pad in zip(causal.allowed, causal.query_padding) if not pad)
    assert grids.count(f'fill="{masks.ALLOWED}"') >= allowed


def test_broken_directives_warn_with_file_and_line(builds: dict[str, Build]) -> None:
    first = builds["first"]
    assert first.returncode == 0
    index = first.source / "index.rst"
    warnings = first.lines("WARNING")
    assert any(f"{index}:26: WARNING: bertgraph: unknown model 'bert-huge-uncased'" in line for line in warnings), (
        warnings
    )
    assert any(f"{index}:31: WARNING: bertgraph: depth must be 0 to 4, got 9" in line for line in warnings), warnings
    assert len(warnings) == 2, warnings


def test_rebuilds_draw_only_what_changed(builds: dict[str, Build]) -> None:
    assert len(builds["first"].lines("bertgraph: drew")) == 9
    assert builds["again"].lines("bertgraph: drew") == []
    drawn = builds["edited"].lines("bertgraph: drew")
    assert len(drawn) == 1 and "depth 4 · svg" in drawn[0], drawn
    assert builds["edited"].returncode == 0


def test_latex_includes_a_png(tmp_path: Path) -> None:
    source = project_copy(tmp_path)
    build = sphinx_build(source, tmp_path / "latex", builder="latex")
    assert build.returncode == 0, build.log
    assert len(build.lines("WARNING")) == 2, build.log  # the two broken directives, nothing else
    tex = next((tmp_path / "latex").glob("*.tex")).read_text(encoding="utf-8")
    images = re.findall(r"\\sphinxincludegraphics\[\]\{(bertgraph-[0-9a-f]+\.png)\}", tex)
    assert len(images) == 7  # svg ×2, mermaid, html, the comparison, the schematic and the masks, all as pictures
    for name in images:
        assert (tmp_path / "latex" / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "4,386,178" in tex  # the parameter table, as a literal block


def test_parallel_build_traces_each_model_once(tmp_path: Path, builds: dict[str, Build]) -> None:
    source = project_copy(tmp_path)
    build = sphinx_build(source, tmp_path / "html", "-j", "2", cache=tmp_path / "fresh-cache")
    assert build.returncode == 0, build.log
    traced_models = build.lines("bertgraph: traced")
    assert sorted(line.split("traced ")[1] for line in traced_models) == [
        "bert-tiny (base)",
        "bert-tiny (sequence-classification)",
        "tiny-gpt2 (base)",
    ]
    # The same drawings as a serial build.
    assert re.findall(r"<svg .*?</svg>", build.page("index"), re.DOTALL) == re.findall(
        r"<svg .*?</svg>", builds["first"].page("index"), re.DOTALL
    )


def test_sphinx_start_up_does_not_import_torch(tmp_path: Path) -> None:
    source = project_copy(tmp_path)
    probe = (
        "import sys\n"
        "from sphinx.application import Sphinx\n"
        f"Sphinx({str(source)!r}, {str(source)!r}, {str(tmp_path / 'out')!r}, {str(tmp_path / 'doctrees')!r},"
        " 'html', status=None, warning=None)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_builds_side_by_side_trace_each_model_once(tmp_path: Path) -> None:
    """Two builders sharing one graph cache (HTML and LaTeX at once) trace each model once between them:
    the second waits on the cache's build lock and reads what the first traced. (With ``-j``, every
    drawing is made in the main process before the writers fork, so this is where the lock matters.)"""
    require(shutil.which("dot") is not None, "Graphviz dot is not installed")
    source = project_copy(tmp_path)
    env = dict(os.environ, BERTGRAPH_CACHE_DIR=str(tmp_path / "fresh-cache"))
    builds = [
        subprocess.Popen(
            [sys.executable, "-m", "sphinx", "-b", builder, str(source), str(tmp_path / builder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for builder in ("html", "latex")
    ]
    logs = [build.communicate(timeout=600)[0] for build in builds]
    assert [build.returncode for build in builds] == [0, 0], logs
    traced_models = [
        line.split("traced ")[1] for log in logs for line in log.splitlines() if "bertgraph: traced" in line
    ]
    assert sorted(traced_models) == ["bert-tiny (base)", "bert-tiny (sequence-classification)", "tiny-gpt2 (base)"], (
        logs
    )


def _local_model_project(folder: Path) -> Path:
    """A one-page project drawing a model from a config folder beside the page."""
    source = folder / "src"
    (source / "model").mkdir(parents=True)
    (source / "conf.py").write_text('project = "local"\nextensions = ["bertgraph.sphinx"]\n', encoding="utf-8")
    (source / "index.rst").write_text(
        "Local model\n===========\n\nA model of our own.\n\n.. bertgraph:: model\n   :depth: 2\n", encoding="utf-8"
    )
    return source


def _write_config(source: Path, layers: int) -> None:
    config = {"model_type": "bert", **TINY_BERT_CONFIG, "num_hidden_layers": layers}
    (source / "model" / "config.json").write_text(json.dumps(config), encoding="utf-8")


def test_a_config_edit_redraws_its_page_and_a_drawing_failure_warns_with_its_line(tmp_path: Path) -> None:
    source = _local_model_project(tmp_path)
    _write_config(source, layers=2)
    first = sphinx_build(source, tmp_path / "html")
    assert first.returncode == 0 and not first.lines("WARNING"), first.log
    assert "BertLayer × 2" in first.page("index")
    _write_config(source, layers=3)  # the config changes, the page does not
    edited = sphinx_build(source, tmp_path / "html")
    assert len(edited.lines("bertgraph: drew")) == 1, edited.log
    assert edited.page("index") != first.page("index")
    assert "BertLayer × 3" in edited.page("index")
    # Without Graphviz on the PATH the drawing fails at write time: one warning at the directive's line.
    (source / "index.rst").write_text((source / "index.rst").read_text() + "   :theme: dark\n", encoding="utf-8")
    without_dot = sphinx_build(source, tmp_path / "html", env={"PATH": str(Path(sys.executable).parent)})
    warnings = without_dot.lines("WARNING")
    assert len(warnings) == 1 and f"{source / 'index.rst'}:6: WARNING: bertgraph:" in warnings[0], without_dot.log
