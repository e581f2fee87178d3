"""Hostile module names through every escaper: the output still parses and shows the name."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from bertgraph.api import Architecture
from bertgraph.render import graphviz_run
from bertgraph.render.escape import markdown_text, visible
from tests.conftest import require
from tests.helpers import HOSTILE_NAMES, rename_modules, squash
from tests.mermaid_browser import browser_available, render_mermaid, svg_text

# PyTorch forbids "." in module names (it separates path components) and an empty name.
names = st.one_of(
    st.sampled_from(HOSTILE_NAMES),
    st.text(st.characters(blacklist_characters=".", blacklist_categories=("Cs",)), min_size=1, max_size=24),
    st.lists(
        st.sampled_from(
            ['"', "<", ">", "&", "#", ";", "|", "{", "}", "[", "]", "`", "\\", "\n", ":", "end", "style", "é", "模"]
        ),
        min_size=1,
        max_size=12,
    ).map("".join),
).filter(lambda name: name.strip() != "")

SVG_TEXT = "{http://www.w3.org/2000/svg}text"


def expected(name: str) -> str:
    return squash(visible(name))


def hostile_arch(traced: Callable[..., Architecture], head_name: str, part_name: str) -> Architecture:
    graph = traced("bert-tiny", "sequence-classification").graph
    return Architecture(
        rename_modules(graph, {"classifier": head_name, "embeddings": part_name}, title=f"model {head_name}")
    )


@pytest.mark.dot
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head_name=names, part_name=names)
@example(head_name="\\\\", part_name="a\\b\\nc")
@example(head_name="]", part_name='say "hi"')
def test_dot_shows_hostile_names(traced: Callable[..., Architecture], head_name: str, part_name: str) -> None:
    require(graphviz_run_available(), "Graphviz dot is not installed")
    arch = hostile_arch(traced, head_name, part_name)
    for depth in (2, 3):
        svg = graphviz_run.render(arch.to_dot(depth), "svg")
        root = ET.fromstring(svg)
        text = squash("".join("".join(t.itertext()) for t in root.iter(SVG_TEXT)))
        assert expected(head_name) in text
        assert expected(part_name) in text


def graphviz_run_available() -> bool:
    import shutil

    return shutil.which("dot") is not None


@pytest.mark.browser
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(st.tuples(names, names), min_size=8, max_size=8))
def test_mermaid_shows_hostile_names(traced: Callable[..., Architecture], batch: list[tuple[str, str]]) -> None:
    reason = browser_available()
    require(reason is None, reason or "")
    batch = [*batch, *zip(HOSTILE_NAMES, reversed(HOSTILE_NAMES))]
    diagrams = {}
    for index, (head_name, part_name) in enumerate(batch):
        arch = hostile_arch(traced, head_name, part_name)
        diagrams[f"d{index}"] = arch.to_mermaid(2 + index % 2)
    results = render_mermaid(diagrams)
    for index, (head_name, part_name) in enumerate(batch):
        result = results[f"d{index}"]
        assert result.ok, (head_name, part_name, result.error)
        text = squash(svg_text(result.svg))
        assert expected(head_name) in text, head_name
        assert expected(part_name) in text, part_name


@settings(max_examples=200, deadline=None)
@given(name=names)
def test_markdown_cells_show_hostile_names(name: str) -> None:
    html = MarkdownIt("commonmark").enable("table").render(f"| a | b |\n|---|---|\n| {markdown_text(name)} | x |\n")
    assert "<table>" in html
    cells = ET.fromstring(f"<root>{html.replace('<br>', '<br/>')}</root>").iter("td")
    first = next(cells)
    shown = "".join(first.itertext())
    assert squash(shown) == expected(name)
