"""The restyling hook: a style sheet over an SVG, the interactive page and a docs page, applied by Chromium.

``render --css`` puts the sheet into the SVG and into the page's style sheet; the docs' ``css``
option scopes it to its own drawing. Chromium's computed styles say what a reader sees: the
boxes and the legend swatch of the restyled role change, the others do not, a second drawing on
the same page does not. A sheet that would fetch something, or end the element it sits in, is
refused with one line before anything is written; so is ``--css`` where no sheet can reach.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from bertgraph import cli
from bertgraph.docs import request as docs_request
from bertgraph.docs.renderer import _svg_fragment
from bertgraph.render import graphviz_run, render_image
from bertgraph.render.restyle import StyleSheetError, check_style_sheet, restyled_svg
from tests.cdp import Browser, file_url
from tests.conftest import require
from tests.graph_fixtures import bert_tiny
from tests.helpers import one_line_error
from tests.mermaid_browser import chromium_path

pytestmark = [pytest.mark.dot, pytest.mark.browser, pytest.mark.xdist_group("restyle")]
SHEET = """
/* layers and the pooler in red; residual-free data arrows black */
.role-block path, .legend.kind-bidirectional { fill: #ff0000; }
.role-pooling path, .role-pooling ellipse { fill: #00ff00; }
.edge-data path { stroke: #000000; }
"""
FILL = "getComputedStyle(document.querySelector({0})).fill"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require(chromium_path() is not None, "Chromium is not installed (apt-get install chromium)")
    require(shutil.which("dot") is not None, "Graphviz dot is not installed (apt-get install graphviz)")
    folder = tmp_path_factory.mktemp("restyle")
    sheet = folder / "print.css"
    sheet.write_text(SHEET, encoding="utf-8")
    for suffix in ("svg", "html"):
        argv = ["render", "bert-tiny", "--layers", "3", "--head", "sequence-classification", "--css", str(sheet)]
        assert cli.main([*argv, "-o", str(folder / f"bert.{suffix}")]) == 0
    # a docs page with two drawings of the same model: only the first has the sheet
    svg = render_image(bert_tiny("sequence-classification"), "svg", depth=2)
    styled = docs_request.parse({"model": "bert-tiny", "head": "sequence-classification", "css": str(sheet)})
    plain = docs_request.parse({"model": "bert-tiny", "head": "sequence-classification", "theme": "light"})
    body = _svg_fragment(svg, "styled", styled, "a" * 24) + _svg_fragment(svg, "plain", plain, "b" * 24)
    (folder / "docs.html").write_text(f"<!doctype html><html><body>{body}</body></html>", encoding="utf-8")
    return {"folder": folder, "sheet": sheet, **{s: folder / f"bert.{s}" for s in ("svg", "html")}}


@pytest.fixture(scope="module")
def browser(files: dict[str, Path]) -> Any:
    with Browser(width=900, height=900) as opened:
        yield opened


def _open(browser: Any, path: Path, ready: str) -> None:
    browser.open(file_url(path))
    browser.wait_for(ready)


def test_the_svg_carries_the_sheet_and_the_browser_applies_it(files: dict[str, Path], browser: Any) -> None:
    svg = files["svg"].read_text(encoding="utf-8")
    assert svg.count("<![CDATA[") == 1 and ".role-pooling path" in svg
    _open(browser, files["svg"], "document.querySelector('#bert-pooler-dense') !== null")
    assert browser.evaluate(FILL.format("'#bert-pooler-dense path'")) == "rgb(0, 255, 0)"
    assert browser.evaluate(FILL.format("'#bert-encoder-layer-0-2 path'")) == "rgb(255, 0, 0)"
    assert browser.evaluate(FILL.format("'polygon.legend.kind-bidirectional'")) == "rgb(255, 0, 0)"
    assert browser.evaluate(FILL.format("'#classifier path'")) == "rgb(225, 141, 129)"  # the head keeps its colour
    stroke = "getComputedStyle(document.querySelector('.edge-data path')).stroke"
    assert browser.evaluate(stroke) == "rgb(0, 0, 0)"
    assert browser.problems() == []


def test_the_page_applies_the_sheet_to_its_drawings(files: dict[str, Path], browser: Any) -> None:
    _open(browser, files["html"], "document.querySelector('#canvas #bert-pooler-dense') !== null")
    assert browser.evaluate(FILL.format("'#canvas #bert-pooler-dense path'")) == "rgb(0, 255, 0)"
    assert browser.evaluate(FILL.format("'#canvas #classifier path'")) == "rgb(225, 141, 129)"
    assert browser.problems() == []  # the policy's hash covers the sheet: nothing refused


def test_a_docs_sheet_restyles_its_own_drawing_only(files: dict[str, Path], browser: Any) -> None:
    _open(browser, files["folder"] / "docs.html", "document.querySelectorAll('svg').length === 2")
    styled = "'.bertgraph-auto [id$=\"-bert-pooler-dense\"] path'"
    plain = "'.bertgraph-light [id$=\"-bert-pooler-dense\"] path'"
    assert browser.evaluate(FILL.format(styled)) == "rgb(0, 255, 0)"
    assert browser.evaluate(FILL.format(plain)) == "rgb(157, 205, 187)"  # the pooler's own colour


@pytest.mark.parametrize(
    ("sheet", "refused"),
    [
        ("a { fill: red; }\n@import 'x.css';", "line 2: @import fetches a file"),
        ("a { background: url(https://example.org/x.png); }", "url(…) fetches a file"),
        ("a { fill: red; } </style><script>alert(1)</script>", "'<' cannot stand"),
        ("a { content: '\\3c'; }", "backslash"),
        ("a { fill: red; } ]]>", "']]>' cannot stand"),
        ('a { b: image-set("x.png" 1x); }', "image-set(…) fetches a file"),
    ],
)
def test_a_sheet_that_fetches_or_escapes_is_refused(sheet: str, refused: str) -> None:
    with pytest.raises(StyleSheetError, match=re.escape(refused)):
        check_style_sheet(sheet, "mine.css")


def test_the_sheet_goes_first_in_the_svg() -> None:
    svg = graphviz_run.render("digraph { a }", "svg").decode()
    restyled = restyled_svg(svg, ".node path { fill: red; }")
    assert re.search(r"<svg[^>]*>\n<style type=\"text/css\"><!\[CDATA\[\n\.node path", restyled)
    assert restyled.replace(restyled[restyled.index("\n<style") : restyled.index("</style>") + 8], "") == svg


def test_css_where_no_sheet_reaches_or_a_bad_sheet_is_one_line_and_writes_nothing(
    files: dict[str, Path], tmp_path: Path, capsys: Any
) -> None:
    sheet = files["sheet"]
    for suffix in ("png", "tex", "drawio", "dot"):
        output = tmp_path / f"x.{suffix}"
        message = one_line_error(["render", "bert-tiny", "--css", str(sheet), "-o", str(output)], capsys, status=2)
        assert "--css restyles an SVG or the .html page" in message and not output.exists()
    bad = tmp_path / "bad.css"
    bad.write_text(".x { background: url(x.png) }", encoding="utf-8")
    output = tmp_path / "x.svg"
    message = one_line_error(["render", "bert-tiny", "--css", str(bad), "-o", str(output)], capsys)
    assert "bad.css line 1: url(…) fetches a file" in message and not output.exists()
    sheet_as_output = tmp_path / "print.svg"
    shutil.copy(sheet, sheet_as_output)
    message = one_line_error(["render", "bert-tiny", "--css", str(sheet_as_output), "-o", str(sheet_as_output)], capsys)
    assert "which this command reads" in message and sheet_as_output.read_text(encoding="utf-8") == SHEET


def test_docs_option_reads_the_sheet_and_refuses_other_formats(files: dict[str, Path]) -> None:
    request = docs_request.parse({"model": "bert-tiny", "css": str(files["sheet"])})
    assert request.css == SHEET and docs_request.DiagramRequest.from_dict(request.as_dict()) == request
    with pytest.raises(docs_request.OptionError, match="css restyles the svg and html formats, not mermaid"):
        docs_request.parse({"model": "bert-tiny", "css": str(files["sheet"]), "format": "mermaid"})
    with pytest.raises(StyleSheetError, match="cannot read the style sheet"):
        docs_request.parse({"model": "bert-tiny", "css": str(files["folder"] / "missing.css")})
