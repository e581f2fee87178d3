"""Hostile module names through every escaper: the output still parses and shows the name."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable

import networkx as nx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from bertgraph.api import Architecture
from bertgraph.graph import io as graph_io
from bertgraph.render import graphviz_run, report, text
from bertgraph.render.escape import markdown_text, visible, xml_text
from bertgraph.render.html import generate_html
from tests.conftest import require
from tests.helpers import BIDI_CONTROLS, HOSTILE_NAMES, fuzz_examples, rename_modules, squash
from tests.mermaid_browser import browser_available, render_mermaid, svg_text

# PyTorch forbids "." in module names (it separates path components) and an empty name.
names = st.one_of(
    st.sampled_from(HOSTILE_NAMES),
    st.text(st.characters(blacklist_characters=".", blacklist_categories=("Cs",)), min_size=1, max_size=24),
    st.lists(
        st.sampled_from(
            [
                *['"', "<", ">", "&", "#", ";", "|", "{", "}", "[", "]", "`", "\\", "\n", ":", "end", "style"],
                *["é", "模", "%%", "%%{", "}%%", "%", "\x00", "\x1b", "\x7f", "\x85", "\u2028", "\ufeff", "\ufffe"],
                *BIDI_CONTROLS,
            ]
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
@settings(max_examples=fuzz_examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head_name=names, part_name=names)
@example(head_name="\\\\", part_name="a\\b\\nc")
@example(head_name="]", part_name='say "hi"')
@example(head_name="user\u202etxt-exe", part_name="%%{init: {}}%%")
def test_dot_shows_hostile_names(traced: Callable[..., Architecture], head_name: str, part_name: str) -> None:
    require(graphviz_run_available(), "Graphviz dot is not installed")
    arch = hostile_arch(traced, head_name, part_name)
    for depth in (2, 3):
        source = arch.to_dot(depth)
        _no_hidden(source)
        svg = graphviz_run.render(source, "svg")
        _no_hidden(svg.decode("utf-8"))
        root = ET.fromstring(svg)
        text = squash("".join("".join(t.itertext()) for t in root.iter(SVG_TEXT)))
        assert expected(head_name) in text
        assert expected(part_name) in text


def graphviz_run_available() -> bool:
    import shutil

    return shutil.which("dot") is not None


@pytest.mark.browser
# One Chromium launch renders the fixed hostile names and 24 generated pairs (each rendering
# is half a second or so; the fixed names in every example would render the same diagrams again).
# Each diagram carries two pairs, in four modules a reader sees at depths 2 and 3, so 47 pairs
# take 24 renderings.
@settings(max_examples=fuzz_examples(1), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(st.tuples(names, names), min_size=24, max_size=24))
def test_mermaid_shows_hostile_names(traced: Callable[..., Architecture], batch: list[tuple[str, str]]) -> None:
    reason = browser_available()
    require(reason is None, reason or "")
    pairs = [*batch, *zip(HOSTILE_NAMES, reversed(HOSTILE_NAMES))]
    graph = traced("bert-tiny", "sequence-classification").graph
    shown: dict[str, list[str]] = {}
    diagrams = {}
    for index in range(0, len(pairs), 2):
        names_here = [name for pair in pairs[index : index + 2] for name in pair]
        mapping = dict(zip(("classifier", "embeddings", "pooler", "LayerNorm"), names_here))
        arch = Architecture(rename_modules(graph, mapping, title=f"model {names_here[0]}"))
        key = f"d{index}"
        diagrams[key], shown[key] = arch.to_mermaid(2 + index // 2 % 2), names_here
        _no_hidden(diagrams[key])
    results = render_mermaid(diagrams)
    for key, names_here in shown.items():
        result = results[key]
        assert result.ok, (names_here, result.error)
        _no_hidden(result.svg)
        text = squash(svg_text(result.svg))
        for name in names_here:
            assert expected(name) in text, name


@settings(max_examples=fuzz_examples(200), deadline=None)
@given(name=names)
def test_markdown_cells_show_hostile_names(name: str) -> None:
    html = MarkdownIt("commonmark").enable("table").render(f"| a | b |\n|---|---|\n| {markdown_text(name)} | x |\n")
    assert "<table>" in html
    cells = ET.fromstring(f"<root>{html.replace('<br>', '<br/>')}</root>").iter("td")
    first = next(cells)
    shown = "".join(first.itertext())
    assert squash(shown) == expected(name)


def _no_hidden(text: str) -> None:
    """No bidi control, C0/C1 control (except tab and newline) or lone surrogate passes through raw."""
    assert not any(char in BIDI_CONTROLS for char in text), "raw bidi control"
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]", text), "raw control character"


def hostile_ids(graph: nx.DiGraph, mapping: dict[str, str]) -> nx.DiGraph:
    """Node ids carry module names too (``classifier:linear``), as ONNX node names do."""

    def rename(node: str) -> str:
        path, _, op = node.partition(":")
        return ".".join(mapping.get(part, part) for part in path.split(".")) + (f":{op}" if op else "")

    return nx.relabel_nodes(graph, {node: rename(node) for node in graph.nodes})


@settings(max_examples=fuzz_examples(50), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head_name=names, part_name=names)
@example(head_name="bell\x07\x00", part_name="\x1b[2J")
def test_graphml_and_json_of_hostile_names_are_read_back(
    traced: Callable[..., Architecture], head_name: str, part_name: str
) -> None:
    mapping = {"classifier": head_name, "embeddings": part_name}
    arch = hostile_arch(traced, head_name, part_name)
    graph = hostile_ids(arch.graph, mapping)
    graphml = graph_io.graph_file_text(graph, "graphml")
    ET.fromstring(graphml.encode("utf-8"))  # a plain XML parser accepts it
    plain = nx.read_graphml(io.BytesIO(graphml.encode("utf-8")))  # and so does networkx alone
    assert plain.number_of_nodes() == graph.number_of_nodes()
    shown = {data["module"] for _, data in plain.nodes(data=True)}
    assert xml_text(head_name) in shown and any(xml_text(part_name) in module.split(".") for module in shown)
    data = json.loads("".join(graph_io.generate_json(graph)).encode("utf-8"))
    back = nx.node_link_graph(data, edges="edges")
    assert {d["module"] for _, d in back.nodes(data=True)} == {d["module"] for _, d in graph.nodes(data=True)}


@settings(max_examples=fuzz_examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head_name=names, part_name=names)
@example(head_name="a|b`c", part_name="user\u202etxt-exe")
def test_report_and_tables_show_hostile_names(
    traced: Callable[..., Architecture], head_name: str, part_name: str
) -> None:
    arch = hostile_arch(traced, head_name, part_name)
    base = traced("bert-tiny").graph
    markdown = report.generate_report(arch.graph, base=base, svg_name=f"{head_name}.svg")
    _no_hidden(markdown)
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    _no_hidden(html)
    cells = squash("".join("".join(td.itertext()) for td in _html_tree(html).iter("td")))
    assert expected(head_name) in cells and expected(part_name) in cells
    for lines in (
        text.generate_summary(arch.summary()),
        text.generate_params(arch.params()),
        text.generate_diff(Architecture(base).diff(arch)),
    ):
        for line in lines:
            _no_hidden(line)
            assert "\n" not in line


def _html_tree(html: str) -> ET.Element:
    """markdown-it's HTML as an element tree (void elements closed; entities decoded)."""
    from html.parser import HTMLParser

    root = ET.Element("root")
    stack = [root]

    class Builder(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            element = ET.SubElement(stack[-1], tag)
            if tag not in ("br", "img", "hr"):
                stack.append(element)

        def handle_endtag(self, tag: str) -> None:
            if tag not in ("br", "img", "hr") and len(stack) > 1:
                stack.pop()

        def handle_data(self, data: str) -> None:
            element = stack[-1]
            if len(element):
                element[-1].tail = (element[-1].tail or "") + data
            else:
                element.text = (element.text or "") + data

    builder = Builder(convert_charrefs=True)
    builder.feed(html)
    return root


@pytest.mark.dot
@settings(max_examples=fuzz_examples(4), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head_name=names, part_name=names)
@example(head_name="user\u202etxt-exe", part_name="\u2066a\u2069\x1b[2J")
def test_html_page_carries_no_hidden_characters(
    traced: Callable[..., Architecture], head_name: str, part_name: str
) -> None:
    from tests.test_html_page import page_data

    require(graphviz_run_available(), "Graphviz dot is not installed")
    arch = hostile_arch(traced, head_name, part_name)
    page = generate_html(arch.graph, depth=2)
    _no_hidden(page)
    data = page_data(page)
    for level in data["levels"]:
        _no_hidden(json.dumps(level["unpacked"], ensure_ascii=False))
    shown = squash(" ".join(_strings([level["unpacked"]["nodes"] for level in data["levels"]])))
    assert expected(head_name) in shown and expected(part_name) in shown


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []
