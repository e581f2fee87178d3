"""The interactive HTML page: self-contained, escaped, deterministic, and working in a real Chromium."""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bertgraph.api import Architecture
from bertgraph.cli import main
from bertgraph.graph.views import view
from bertgraph.render import dot, embed, graphviz_run, style
from bertgraph.render.escape import visible
from bertgraph.render.html import generate_html, node_details, script_json
from tests.cdp import Browser, file_url
from tests.conftest import require
from tests.helpers import HOSTILE_NAMES, rename_modules
from tests.mermaid_browser import chromium_path

TINY = ("bert-tiny", "sequence-classification")


def page_data(page: str) -> dict[str, Any]:
    """The page's data block, and every depth's bundle unpacked as the viewer unpacks it."""
    match = re.search(r'<script type="application/json" id="bertgraph-data">(.*?)</script>', page, re.DOTALL)
    assert match, "no data block"
    data = json.loads(match.group(1))
    for level in data["levels"]:
        level["unpacked"] = json.loads(gzip.decompress(base64.b64decode(level["bundle"])))
    return dict(data)


@pytest.fixture(scope="module")
def tiny_page(traced: Callable[..., Architecture], tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(chromium_path() is not None and graphviz_run.FORMATS is not None, "Chromium is not installed")
    path = tmp_path_factory.mktemp("page") / "tiny.html"
    path.write_text(generate_html(traced(*TINY).graph, depth=2), encoding="utf-8")
    return path


# --- the file ---------------------------------------------------------------------------


@pytest.mark.dot
def test_page_is_deterministic_and_self_contained(tiny_page: Path, traced: Callable[..., Architecture]) -> None:
    page = tiny_page.read_text(encoding="utf-8")
    assert generate_html(traced(*TINY).graph, depth=2) == page
    assert "default-src 'none'" in page  # the browser refuses any fetch
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    data = page_data(page)
    assert [level["depth"] for level in data["levels"]] == [0, 1, 2, 3, 4]
    assert data["depth"] == 2
    for level in data["levels"]:
        svg = level["unpacked"]["svg"]
        assert svg.startswith("<svg") and "<?xml" not in svg
        titles = {html.unescape(title) for title in re.findall(r"<title>([^<]*)</title>", svg)}
        assert set(level["unpacked"]["nodes"]) <= titles  # every record belongs to a drawn node


@pytest.mark.dot
def test_cli_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "tiny.html"
    assert main(["render", "bert-tiny", "--depth", "3", "-o", str(target)]) == 0
    assert page_data(target.read_text(encoding="utf-8"))["depth"] == 3
    assert 'data-theme="auto"' in target.read_text(encoding="utf-8")
    assert main(["render", "bert-tiny", "--theme", "auto", "-o", str(tmp_path / "tiny.svg")]) == 2
    assert "--theme auto needs an .html page" in capsys.readouterr().err
    assert not (tmp_path / "tiny.svg").exists()


def test_details_carry_parameters_and_any_cost_figure(traced: Callable[..., Architecture]) -> None:
    arch = traced(*TINY)
    shown = view(arch.graph, 2)
    rows = {row["name"]: row for row in arch.params()["parameters"]}
    details = node_details(arch.graph, shown, "classifier", "classifier", "head")
    assert details["params"] == sum(count for _, _, count in details["tensors"]) == 258
    for name, shape, count in details["tensors"]:
        assert rows[name]["shape"] == shape and rows[name]["numel"] == count
    layer = next(n for n in shown if n.endswith("layer.0-1"))
    folded = node_details(arch.graph, shown, layer, "layer.0-1", "block")
    assert folded["repeat"] == 2
    assert sum(count for _, _, count in folded["tensors"]) * 2 == folded["params"]  # one instance listed
    # The cost pass's polynomials are shown at the example size (Linear 128 → 2 at batch 1).
    cost = node_details(arch.graph, shown, "classifier", "classifier", "head")["cost"]
    assert cost == {"activation_bytes": 8, "matmul_flops": 512, "other_flops": 2, "param_bytes": 1032}
    # Other figures a pass adds are shown generically; text and flags are not figures.
    shown.nodes["classifier"].update(flops=4718592, memory={"activations": 1024}, note="text", flag=True)
    cost = node_details(arch.graph, shown, "classifier", "classifier", "head")["cost"]
    assert cost["flops"] == 4718592 and cost["memory"] == {"activations": 1024} and "note" not in cost


@pytest.mark.dot
def test_dark_css_turns_the_light_drawing_into_the_dark_one(traced: Callable[..., Architecture]) -> None:
    graph = traced(*TINY).graph
    paint = re.compile(r'<(\w+)[^>]*?(?:fill="([^"]*)")?[^>]*?(?:stroke="([^"]*)")?[^>]*>')

    def paints(theme: str) -> list[tuple[str, str | None, str | None]]:
        svg = graphviz_run.render(dot.generate_dot(graph, depth=3, theme=theme), "svg").decode()
        found = []
        for element in re.finditer(r"<(polygon|path|ellipse|text)\b([^>]*)>", svg):
            attrs = dict(re.findall(r'(fill|stroke)="([^"]*)"', element.group(2)))
            found.append((element.group(1), attrs.get("fill"), attrs.get("stroke")))
        return found

    mapping = style.recolouring()
    light, dark = paints("light"), paints("dark")
    assert len(light) == len(dark) > 50 and paint
    for (tag, fill, stroke), (_, dark_fill, dark_stroke) in zip(light, dark, strict=True):
        if fill not in (None, "none", "transparent"):
            assert mapping[("text" if tag == "text" else "fill", fill)] == dark_fill
        if stroke not in (None, "none", "transparent"):
            assert mapping[("stroke", stroke)] == dark_stroke


def test_script_json_cannot_close_its_element() -> None:
    for name in [*HOSTILE_NAMES, "</script><script>alert(1)</script>", "<!--", "\u2028"]:
        text = script_json({"name": name})
        assert "<" not in text and ">" not in text and "\u2028" not in text
        assert json.loads(text) == {"name": name}


@pytest.mark.dot
def test_hostile_names_are_text_everywhere(traced: Callable[..., Architecture]) -> None:
    graph = traced(*TINY).graph
    for name in HOSTILE_NAMES:
        page = generate_html(rename_modules(graph, {"classifier": name}, title=f"</title>{name}"), depth=2)
        assert page.count("</script>") == 2 and page.count("<script") == 2, name
        assert "<title></title>" not in page
        nodes = page_data(page)["levels"][2]["unpacked"]["nodes"]
        # The page shows each name with hidden characters (controls, bidi overrides) as U+FFFD.
        assert any(record.get("path") == visible(name) for record in nodes.values()), name


def test_iframe_escapes_its_page() -> None:
    frame = embed.iframe('<p title="x">a & b</p>\n<script>x("</iframe>")</script>', 'say "hi"')
    assert frame.count("<iframe") == 1 and frame.count("</iframe>") == 1 and "\n" not in frame
    srcdoc = re.search(r'srcdoc="([^"]*)"', frame)
    assert srcdoc and html.unescape(srcdoc.group(1)) == '<p title="x">a & b</p>\n<script>x("</iframe>")</script>'


@pytest.mark.slow
@pytest.mark.dot
def test_bert_base_page_stays_small(traced: Callable[..., Architecture]) -> None:
    page = generate_html(traced("bert-base-uncased", "sequence-classification").graph)
    assert len(page.encode("utf-8")) < 1_500_000


# --- in the browser -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(tiny_page: Path) -> Iterator[Browser]:
    with Browser() as opened:
        opened.open(file_url(tiny_page))
        opened.wait_for("document.documentElement && document.documentElement.dataset.ready")
        yield opened


def state(browser: Browser) -> dict[str, Any]:
    return dict(
        browser.evaluate(
            """({
        depth: [...document.querySelectorAll('#depths button')]
            .findIndex(b => b.getAttribute('aria-pressed') === 'true'),
        nodes: document.querySelectorAll('#canvas g.node').length,
        svg: document.querySelector('#canvas svg').outerHTML.length,
        matches: [...document.querySelectorAll('#canvas g.node.match title')].map(t => t.textContent),
        transform: document.getElementById('canvas').style.transform,
        panel: document.getElementById('panel').hidden ? null : document.getElementById('panel').innerText,
        hash: location.hash,
        focused: document.activeElement && (document.activeElement.getAttribute('class') || document.activeElement.id),
    })"""
        )
    )


def centre_of(browser: Browser, selector: str) -> tuple[float, float]:
    box = browser.evaluate(
        f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
        " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
    )
    return float(box[0]), float(box[1])


def find_node(browser: Browser, title: str) -> str:
    """Mark the drawn node whose DOT id is ``title`` and return a selector for it."""
    browser.evaluate(
        "(() => { for (const e of document.querySelectorAll('#canvas g.node')) e.removeAttribute('data-test');"
        " const t = [...document.querySelectorAll('#canvas g.node > title')]"
        f".find(t => t.textContent === {json.dumps(title)});"
        " t.parentNode.setAttribute('data-test', 'target'); })()"
    )
    return '#canvas g.node[data-test="target"]'


@pytest.mark.browser
@pytest.mark.dot
def test_depths_search_details_and_fragment(
    browser: Browser, tiny_page: Path, traced: Callable[..., Architecture]
) -> None:
    first = state(browser)
    assert first["depth"] == 2 and first["nodes"] > 5
    browser.click(*centre_of(browser, '#depths button[data-depth="3"]'))
    browser.wait_for(
        "document.querySelector('#depths button[data-depth=\"3\"]').getAttribute('aria-pressed') === 'true'"
    )
    deeper = state(browser)
    assert deeper["nodes"] > first["nodes"] and deeper["svg"] != first["svg"]

    # Search highlights every box whose module or type says "intermediate", and centres one.
    browser.click(*centre_of(browser, "#search"))
    browser.type_text("intermediate")
    found = browser.wait_for("document.querySelectorAll('#canvas g.node.match').length")
    searched = state(browser)
    assert found == len(searched["matches"]) >= 2
    assert all("intermediate" in title for title in searched["matches"])
    stage_box = browser.evaluate(
        "(() => { const r = document.getElementById('stage').getBoundingClientRect();"
        " return [r.left, r.top, r.right, r.bottom]; })()"
    )
    x, y = centre_of(browser, "#canvas g.node.match")
    assert stage_box[0] <= x <= stage_box[2] and stage_box[1] <= y <= stage_box[3]
    assert "q=intermediate" in searched["hash"] and "depth=3" in searched["hash"]

    # Clicking a box opens its details: every parameter tensor with shape and count, as `params` has them.
    arch = traced(*TINY)
    rows = {row["name"]: row for row in arch.params()["parameters"]}
    target = find_node(browser, "bert.encoder.layer.0-1.intermediate.dense")
    browser.click(*centre_of(browser, target))
    panel = browser.wait_for("!document.getElementById('panel').hidden && document.getElementById('panel').innerText")
    assert "Linear 128 → 512" in panel
    tensors = browser.evaluate(
        "[...document.querySelectorAll('#panel table.tensors tr')].slice(1)"
        ".map(r => [...r.cells].map(c => c.innerText))"
    )
    listed = {name: (shape, count) for name, shape, count in tensors}
    assert set(listed) == {
        "bert.encoder.layer.0.intermediate.dense.weight",
        "bert.encoder.layer.0.intermediate.dense.bias",
    }
    for name, (shape, count) in listed.items():
        assert shape == "[" + ", ".join(map(str, rows[name]["shape"])) + "]"
        assert count == f"{rows[name]['numel']:,}"
    assert f"{2 * sum(rows[n]['numel'] for n in listed):,} in all" in panel  # two folded layers

    # The fragment keeps depth, selection and search: a fresh load shows the same.
    kept = state(browser)["hash"]
    assert "node=bert.encoder.layer.0-1.intermediate.dense" in kept
    browser.open("about:blank")
    browser.wait_for("location.href === 'about:blank'")
    browser.open(file_url(tiny_page, kept.lstrip("#")))
    browser.wait_for("document.documentElement && document.documentElement.dataset.ready")
    restored = state(browser)
    assert restored["depth"] == 3 and restored["matches"] == searched["matches"]
    assert restored["panel"] and "Linear 128 → 512" in restored["panel"]
    assert browser.evaluate("document.getElementById('search').value") == "intermediate"
    assert_clean(browser, tiny_page)


@pytest.mark.browser
@pytest.mark.dot
def test_pan_zoom_keyboard_theme(browser: Browser, tiny_page: Path) -> None:
    before = state(browser)["transform"]
    stage = centre_of(browser, "#stage")
    browser.drag(stage, (stage[0] + 120, stage[1] + 80))
    moved = state(browser)["transform"]
    assert moved != before

    def numbers(transform: str) -> list[float]:
        return [float(v) for v in re.findall(r"-?[\d.]+", transform)]

    (x0, y0, _), (x1, y1, _) = numbers(before), numbers(moved)
    assert (round(x1 - x0), round(y1 - y0)) == (120, 80)
    browser.wheel(*stage, delta_y=-300)
    zoomed = numbers(state(browser)["transform"])
    assert zoomed[2] > numbers(moved)[2]

    # Keyboard: from the last toolbar button, Tab reaches the drawing, then a box; Enter opens it.
    browser.evaluate("document.getElementById('panel-close').click(); document.getElementById('theme').focus()")
    browser.key("Tab", 9)
    assert state(browser)["focused"] == "stage"
    browser.key("Tab", 9)
    assert state(browser)["focused"] == "node"
    browser.key("Enter", 13)
    assert state(browser)["panel"]

    theme = browser.evaluate("document.documentElement.dataset.theme")
    background = "getComputedStyle(document.querySelector('#canvas svg polygon')).fill"
    light = browser.evaluate(background)
    browser.click(*centre_of(browser, "#theme"))
    browser.click(*centre_of(browser, "#theme"))
    assert browser.evaluate("document.documentElement.dataset.theme") == "dark" != theme
    assert browser.evaluate(background) != light
    assert_clean(browser, tiny_page)


def assert_clean(browser: Browser, page: Path) -> None:
    """No console error, exception or CSP report so far, and no request but the page itself."""
    assert browser.problems() == []
    assert [url for url in browser.requests() if url.split("#")[0] != file_url(page)] == []


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.dot
def test_bert_large_unfolded_is_interactive_within_two_seconds(
    traced: Callable[..., Architecture], tmp_path: Path
) -> None:
    require(chromium_path() is not None, "Chromium is not installed")
    page = tmp_path / "large.html"
    page.write_text(generate_html(traced("bert-large-uncased").graph, depth=4, fold=False), encoding="utf-8")
    with Browser() as browser:
        browser.open(file_url(page))
        ready = browser.wait_for(
            "document.documentElement && document.documentElement.dataset.ready && bertgraphReadyAt"
        )
        assert browser.evaluate("document.querySelectorAll('#canvas g.node').length") > 600  # 24 layers, every op
        print(f"bert-large depth 4 unfolded: {page.stat().st_size:,} bytes, interactive after {ready:.0f} ms")
        assert ready < 2000
        assert_clean(browser, page)
