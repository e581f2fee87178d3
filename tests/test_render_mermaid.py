"""Mermaid output rendered by the real mermaid.js in headless Chromium, within GitHub's limits."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from bertgraph.api import Architecture
from bertgraph.model import HEADS
from bertgraph.render import mermaid
from bertgraph.render.diagram import build_diagram
from tests import drawn
from tests.colour import contrast
from tests.conftest import require
from tests.family_configs import UNEVEN, uneven
from tests.graph_fixtures import bert_tiny
from tests.helpers import DEPTH_TWO_LABELS
from tests.helpers import shuffled as shuffle
from tests.mermaid_browser import browser_available, node_centres, render_mermaid, svg_text, svg_width


def needs_browser() -> None:
    reason = browser_available()
    require(reason is None, reason or "")


def assert_all_drawn(source: str, svg: str, name: str) -> None:
    """mermaid.js drew every node and edge the source defines."""
    assert sorted(drawn.mermaid_svg_nodes(svg)) == sorted(drawn.mermaid_nodes(source)), name
    assert drawn.mermaid_svg_edges(svg) == len(drawn.mermaid_links(source)) > 0, name


@pytest.mark.browser
def test_every_head_at_depths_one_to_three_renders(traced: Callable[..., Architecture]) -> None:
    needs_browser()
    diagrams: dict[str, str] = {}
    for head in HEADS:
        arch = traced("bert-base-uncased", head)
        for depth in (1, 2, 3):
            diagrams[f"{head}-{depth}"] = arch.to_mermaid(depth)
    base = traced("bert-base-uncased")
    diagrams["compare"] = base.to_mermaid(2, compare=traced("bert-base-uncased", "sequence-classification"))
    diagrams["dark"] = traced("bert-base-uncased", "masked-lm").to_mermaid(2, theme="dark")
    diagrams["operators"] = traced("bert-base-uncased", "sequence-classification").to_mermaid(4)
    results = render_mermaid(diagrams)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert failures == {}
    for name, source in diagrams.items():
        assert_all_drawn(source, results[name].svg, name)
    assert len(drawn.mermaid_nodes(diagrams["sequence-classification-2"])) == (
        len(build_diagram(traced("bert-base-uncased", "sequence-classification").graph, 2).nodes)
    )
    text = svg_text(results["sequence-classification-2"].svg)
    for label in (
        *DEPTH_TWO_LABELS,
        "task head · sequence-classification · 1,538 params",
    ):
        assert label in text, label
    deep = svg_text(results["sequence-classification-3"].svg)
    # the default labels a skip connection by its name; its shape is the add's own
    for label in ("query", "scaled dot-product attention", "add (residual)", "residual"):
        assert label in deep, label
    assert "only in this variant" in svg_text(results["compare"].svg)


@pytest.mark.browser
def test_comparisons_of_every_pair_render(traced: Callable[..., Architecture]) -> None:
    needs_browser()
    archs = {head: traced("bert-tiny", head) for head in HEADS}
    every = {f"{a} vs {b}": archs[a].to_mermaid(2, compare=archs[b]) for a, b in itertools.combinations(HEADS, 2)}
    for name, source in every.items():
        assert "only in this variant" in source, name
    # every head drawn on each side once in the browser (a ring of pairs), not every pair
    heads = list(HEADS)
    ring = zip(heads, heads[1:] + heads[:1])
    diagrams = {f"{a} vs {b}": archs[a].to_mermaid(2, compare=archs[b]) for a, b in ring}
    results = render_mermaid(diagrams)
    assert {name: r.error for name, r in results.items() if not r.ok} == {}
    for name, source in diagrams.items():
        assert_all_drawn(source, results[name].svg, name)
        assert "only in this variant" in svg_text(results[name].svg), name


def test_too_large_diagrams_fold_and_step_back(traced: Callable[..., Architecture]) -> None:
    deep = traced("bert-tiny", "sequence-classification", layers=48)
    result = mermaid.generate_mermaid(deep.graph, depth=4, fold=False)
    assert (result.depth, result.folded) == (4, True)
    assert "would exceed Mermaid's limits" in result.notes[0]
    edges = sum(line.count("-->") + line.count("-.->") for line in result.text.splitlines())
    assert edges <= mermaid.MAX_EDGES and len(result.text) <= mermaid.MAX_TEXT
    assert mermaid.generate_mermaid(deep.graph, depth=2).notes == []


def test_cli_reports_the_fallback_on_stderr(
    traced: Callable[..., Architecture], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bertgraph.cli import main

    target = tmp_path / "deep.mmd"
    assert main(["render", "bert-tiny", "--layers", "48", "--depth", "4", "--unfold", "-o", str(target)]) == 0
    assert "would exceed Mermaid's limits" in capsys.readouterr().err
    expected = mermaid.generate_mermaid(traced("bert-tiny", "base", layers=48).graph, depth=4, fold=False)
    assert target.read_text() == expected.text
    assert expected.folded and 0 < len(drawn.mermaid_edges(expected.text)) <= mermaid.MAX_EDGES


def test_mermaid_text_ignores_insertion_order(traced: Callable[..., Architecture]) -> None:
    graph = traced("bert-tiny", "pretraining").graph
    shuffled = shuffle(graph, 5)
    for depth in range(5):
        assert mermaid.generate_mermaid(graph, depth).text == mermaid.generate_mermaid(shuffled, depth).text


MERMAID_LOOK = re.compile(r"^\s*(?:classDef|style) (\S+) (\S+)$", re.MULTILINE)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_mermaid_text_is_readable_on_its_fill(theme: str) -> None:
    # A node's lines and a frame's title take the colour style.py gives their fill, at 4.5:1 at least (WCAG AA).
    graph, other = bert_tiny("sequence-classification"), bert_tiny("base")
    texts = [mermaid.generate_mermaid(graph, depth, theme=theme).text for depth in (1, 2, 3)]
    texts += [
        mermaid.generate_mermaid(graph, 2, theme=theme, annotate="flops").text,
        mermaid.generate_mermaid(graph, 2, theme=theme, compare=other).text,
    ]
    looks = [
        dict(part.split(":", 1) for part in look.split(",")) for text in texts for _, look in MERMAID_LOOK.findall(text)
    ]
    assert len(looks) > 20
    faint = [(look["fill"], look["color"]) for look in looks if contrast(look["color"], look["fill"]) < 4.5]
    assert faint == []


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("uneven")


@pytest.mark.browser
@pytest.mark.parametrize("name", sorted(UNEVEN))
def test_mermaid_draws_the_encoder_left_as_mermaid_js_lays_it_out(name: str, configs: Path) -> None:
    # A T5 of 4 + 3 layers and a BART of 3 + 3, and BART's classifier: mermaid.js put the decoder left of
    # the encoder. Read off where mermaid.js placed each node of either stack. (Held at depths 1-2; at
    # depth 3, and for the classifier at depth 1, mermaid.js still chooses its own order.)
    needs_browser()
    graphs = {"base": uneven(name, "base", configs)}
    if name.startswith("bart"):
        graphs["sequence-classification"] = uneven(name, "sequence-classification", configs)
    texts, sides = {}, {}
    for head, graph in graphs.items():
        for depth in (1, 2) if head == "base" else (2,):
            diagram = build_diagram(graph, depth)
            ids: dict[str, str] = {}
            texts[head, depth] = "\n".join(mermaid.generate_lines(diagram, ids=ids)) + "\n"
            sides[head, depth] = {ids[node]: side for node, side in diagram.sides.items() if node in ids}
    results = render_mermaid({f"{head}-{depth}": text for (head, depth), text in texts.items()})
    for (head, depth), found in sides.items():
        result = results[f"{head}-{depth}"]
        assert result.ok, result.error
        centres = node_centres(result.svg)
        encoder = [centres[n][0] for n, side in found.items() if side == "encoder"]
        decoder = [centres[n][0] for n, side in found.items() if side == "decoder"]
        assert encoder and decoder and max(encoder) < min(decoder), (head, depth, encoder, decoder)


COLUMN_PX = 800.0
MERMAID_TARGET_PX = 8.0
# mermaid's style sheet, and a font size in one of its rules; the tooltip's is for no text drawn.
STYLE_SHEET = re.compile(r"<style[^>]*>(.*?)</style>", re.DOTALL)
FONT_SIZE = re.compile(r"font-size:\s*([\d.]+)px")


def mermaid_smallest_px(svg: str) -> float:
    """The smallest font mermaid.js draws text in, in px when the drawing is shown 800 px wide."""
    rules = [rule for sheet in STYLE_SHEET.findall(svg) for rule in sheet.split("}")]
    sizes = [float(size) for rule in rules if "Tooltip" not in rule.split("{")[0] for size in FONT_SIZE.findall(rule)]
    return min(sizes) * min(1.0, COLUMN_PX / svg_width(svg))


@pytest.mark.browser
@pytest.mark.slow
def test_mermaid_at_depth_two_reads_at_eight_px_in_a_docs_column(
    traced: Callable[..., Architecture], configs: Path
) -> None:
    # About 7 px before: the caption's facts made one title line as wide as T5's whole drawing, and the
    # legend stood beside the drawing. Laid out by mermaid.js in Chromium, read off the SVG it drew.
    needs_browser()
    names = ("bert-base-uncased", "gpt2", "t5-small", "bart-base", "modernbert-base", "deberta-v3-base")
    graphs = {name: traced(name).graph for name in names}
    graphs["bart-base classifier"] = traced("bart-base", "sequence-classification").graph
    graphs["t5-4+3"] = uneven("t5-4+3", "base", configs)
    results = render_mermaid({name: mermaid.generate_mermaid(graph, 2).text for name, graph in graphs.items()})
    sizes = {name: round(mermaid_smallest_px(result.svg), 2) for name, result in results.items() if result.ok}
    assert len(sizes) == len(graphs) and min(sizes.values()) >= MERMAID_TARGET_PX, sizes
