"""The MkDocs plugin driven in-process with MkDocs' own config, file and page objects.

``tests/test_docs_mkdocs.py`` runs real ``mkdocs build``\\ s; these tests call the plugin's event
and helpers directly (no process), so they also serve the mutation run (docs/mutation.md).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from mkdocs.config import load_config
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File
from mkdocs.structure.pages import Page

from bertgraph.docs.mkdocs import (
    BertgraphPlugin,
    FenceError,
    _code_fence,
    _front_matter_lines,
    _page_path,
    fence_options,
    find_fences,
    page_relative,
)
from tests.conftest import TINY_CONFIG

FENCE = "```bertgraph\nmodel: bert-tiny\nformat: table\nlayers: 1\n```"


def _fences(markdown: str) -> list[tuple[int, int, str]]:
    return [(fence.first, fence.last, fence.body) for fence in find_fences(markdown)]


# --- finding fences --------------------------------------------------------------------------------


def test_fences_are_found_by_their_info_word_with_their_lines() -> None:
    page = "\n".join(
        [
            "# title",  # 0
            "```bertgraph",  # 1
            "model: a",  # 2
            "```",  # 3
            "   ~~~~ bertgraph  ",  # 4: up to three spaces, tildes, space around the word
            "model: b",  # 5
            "~~~~~",  # 6: a longer closing run closes it
            "```python",  # 7: another language's fence is skipped whole
            "```bertgraph",  # 8
            "```",  # 9
            "    ```bertgraph",  # 10: four spaces make indented code, not a fence
            "```bertgraph2",  # 11: another word
            "```",  # 12
        ]
    )
    assert _fences(page) == [(1, 3, "model: a"), (4, 6, "model: b")]


def test_a_fence_closes_only_with_its_own_character_at_its_length() -> None:
    page = "````bertgraph\nmodel: a\n```\n~~~~\n````  \nafter"
    assert _fences(page) == [(0, 4, "model: a\n```\n~~~~")]
    # An unclosed fence runs to the end of the page.
    assert _fences("x\n```bertgraph\nmodel: a\ndepth: 2") == [(1, 4, "model: a\ndepth: 2")]
    assert _fences("```bertgraph\n```") == [(0, 1, "")]
    assert _fences("") == []


def test_fences_between_prose_and_other_code_blocks() -> None:
    page = "intro\nmore\n```\ncode\n```\n```bertgraph\nmodel: a\n```\nprose\n\n```bertgraph\nmodel: b\n```"
    assert _fences(page) == [(5, 7, "model: a"), (10, 12, "model: b")]
    # A fence right after another's closing line opens there, not at that closing line.
    assert _fences("```a\n```\n```bertgraph\nmodel: c\n```") == [(2, 4, "model: c")]


def test_a_fence_nested_in_a_longer_one_is_text() -> None:
    page = "````md\n```bertgraph\nmodel: a\n```\n````\n```bertgraph\nmodel: b\n```"
    assert _fences(page) == [(5, 7, "model: b")]


def test_text_goes_in_a_fence_longer_than_any_backtick_run_inside_it() -> None:
    assert _code_fence("a\n\n", "text") == "```text\na\n```"
    assert _code_fence("x ```` y", "mermaid") == "`````mermaid\nx ```` y\n`````"
    assert _code_fence("a `b` ``c``", "text") == "```text\na `b` ``c``\n```"
    assert _code_fence("row  \t\n", "text") == "```text\nrow  \t\n```"  # only line ends are trimmed


# --- a fence's options ------------------------------------------------------------------------------


def test_options_are_yaml_one_a_line() -> None:
    assert fence_options("model: bert-tiny\ndepth: 3\nunfold: true") == {
        "model": "bert-tiny",
        "depth": 3,
        "unfold": True,
    }
    assert fence_options("  \n") == {}
    assert fence_options("") == {}


@pytest.mark.parametrize(
    ("body", "message", "line"),
    [
        ("model: a\ndepth: 2\ndepth: 3", "option 'depth' is given twice (lines 2 and 3 of the fence); keep one", 3),
        ("model: a\n\nhead: x\nmodel: b", "option 'model' is given twice (lines 1 and 4 of the fence); keep one", 4),
        ("model: [a", "the fence is not YAML (while parsing a flow sequence", 0),
        ("? [a, b]\n: c", "the fence holds 'option: value' lines (unhashable type: 'list')", 0),
        ("just words", "the fence holds 'option: value' lines, starting with 'model: bert-base-uncased'", 0),
        ("- model: a", "the fence holds 'option: value' lines, starting with", 0),
    ],
)
def test_a_fence_that_is_not_options_says_which_line(body: str, message: str, line: int) -> None:
    with pytest.raises(FenceError) as caught:
        fence_options(body)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert caught.value.line == line


def test_a_local_model_is_read_from_the_pages_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pages = tmp_path / "docs"
    (pages / "models" / "tiny").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert page_relative("models/tiny", pages) == str(pages / "models" / "tiny")
    assert page_relative("bert-base-uncased", pages) == "bert-base-uncased"  # a preset stays as written
    assert page_relative(str(tmp_path / "elsewhere"), pages) == str(tmp_path / "elsewhere")
    # A path that exists only from the working directory is named from the page's folder,
    # so the error says where bertgraph looked.
    (tmp_path / "cwd-only").mkdir()
    assert page_relative("cwd-only", pages) == str(pages / "cwd-only")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert page_relative("~/cwd-only", pages) == "~/cwd-only"  # absolute once expanded: left as written


# --- the page's own facts -------------------------------------------------------------------------


@pytest.fixture
def site(tmp_path: Path) -> tuple[MkDocsConfig, Path]:
    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text("site_name: test\n", encoding="utf-8")
    return load_config(str(tmp_path / "mkdocs.yml")), tmp_path


def _page(root: Path, config: MkDocsConfig, name: str, text: str) -> Page:
    source = root / "docs" / name
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(text, encoding="utf-8")
    return Page(None, File(name, str(root / "docs"), str(root / "site"), True), config)


def test_a_page_is_named_from_the_sites_folder_and_its_front_matter_counted(
    site: tuple[MkDocsConfig, Path],
) -> None:
    config, root = site
    page = _page(root, config, "guide/index.md", "---\ntitle: x\nother: y\n---\nbody\n")
    assert _page_path(page, config) == str(Path("docs") / "guide" / "index.md")
    assert _front_matter_lines(page, "body\n") == 4
    assert _front_matter_lines(page, "something else") == 0
    crlf = _page(root, config, "crlf.md", "---\r\na: 1\r\n---\r\nbody\r\nmore")
    assert _front_matter_lines(crlf, "body\nmore") == 3  # MkDocs hands the page over with \n line ends
    bom = root / "docs" / "bom.md"
    bom.write_bytes("\ufeff---\na: 1\n---\nbody".encode())
    assert (
        _front_matter_lines(Page(None, File("bom.md", str(root / "docs"), str(root / "site"), True), config), "body")
        == 3
    )
    missing = Page(None, File("gone.md", str(root / "docs"), str(root / "site"), True), config)
    assert _front_matter_lines(missing, "body") == 0
    virtual = File("made.md", None, str(root / "site"), True)  # a page with no source file of its own
    assert _page_path(Page(None, virtual, config), config) == "made.md"
    assert _front_matter_lines(Page(None, virtual, config), "body") == 0


# --- the event ------------------------------------------------------------------------------------


def test_the_plugins_settings_default_to_auto_svg_and_a_cache_beside_the_site() -> None:
    plugin = BertgraphPlugin()
    assert plugin.load_config({}) == ([], [])
    assert (plugin.config.theme, plugin.config.format, plugin.config.cache_dir) == ("auto", "svg", ".cache/bertgraph")
    errors, _ = plugin.load_config({"format": "png"})
    assert errors and errors[0][0] == "format"


def test_a_page_without_fences_is_returned_as_it_is(site: tuple[MkDocsConfig, Path]) -> None:
    config, root = site
    plugin = BertgraphPlugin()
    plugin.load_config({})
    text = "# nothing\n```python\nx = 1\n```"
    assert plugin.on_page_markdown(text, page=_page(root, config, "a.md", text), config=config, files=None) is text
    assert plugin._renderer is None  # nothing drawn, nothing started


def test_a_fence_becomes_its_table_and_a_broken_one_a_warning_at_its_line(
    site: tuple[MkDocsConfig, Path], caplog: pytest.LogCaptureFixture
) -> None:
    config, root = site
    broken = "```bertgraph\nmodel: bert-tiny\ndepth: 9\n```"
    markdown = f"intro\n\n{FENCE}\n\nmiddle\n{broken}\nend"
    page = _page(root, config, "index.md", f"---\ntitle: t\n---\n{markdown}")
    plugin = BertgraphPlugin()
    plugin.load_config({"theme": "dark"})
    with caplog.at_level(logging.INFO, logger="mkdocs.plugins.bertgraph"):
        out = plugin.on_page_markdown(markdown, page=page, config=config, files=None)
    lines = out.split("\n")
    assert lines[:3] == ["intro", "", ""]
    assert lines[3].startswith("```text") and lines[4] == "bert-tiny · BertModel (head: base)"
    assert "embeddings.word_embeddings.weight" in out and "encoder.layer.1." not in out  # one layer, as asked
    assert out.endswith("\nmiddle\n\n\n\nend")  # the broken fence leaves blank lines only
    # The broken fence opens on line 13 of the file: 3 lines of front matter, then line 10 of the markdown.
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert warnings == [f"{Path('docs') / 'index.md'}:13: bertgraph: depth must be 0 to 4, got 9"]
    assert plugin._renderer is not None and plugin._renderer is plugin._drawer(config)  # one renderer a build
    assert (root / ".cache" / "bertgraph").is_dir()


def test_a_fence_whose_options_repeat_warns_at_the_repeated_line(
    site: tuple[MkDocsConfig, Path], caplog: pytest.LogCaptureFixture
) -> None:
    config, root = site
    markdown = "a\n```bertgraph\nmodel: bert-tiny\nmodel: bert-mini\n```"
    plugin = BertgraphPlugin()
    plugin.load_config({})
    with caplog.at_level(logging.WARNING, logger="mkdocs.plugins.bertgraph"):
        out = plugin.on_page_markdown(markdown, page=_page(root, config, "p.md", markdown), config=config, files=None)
    assert out == "a\n\n\n"
    assert [record.getMessage() for record in caplog.records] == [
        f"{Path('docs') / 'p.md'}:4: bertgraph: option 'model' is given twice (lines 1 and 2 of the fence); keep one"
    ]


def _model(folder: Path, **sizes: int) -> Path:
    folder.mkdir(parents=True)
    config = {**TINY_CONFIG, "model_type": "bert", **sizes}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def test_each_format_and_a_model_beside_the_page(
    site: tuple[MkDocsConfig, Path], caplog: pytest.LogCaptureFixture
) -> None:
    config, root = site
    # A config no other test draws (vocabulary 97), so this test's trace is its own.
    _model(root / "docs" / "guide" / "tiny", vocab_size=97)
    markdown = "\n".join(
        [
            "```bertgraph",
            "model: bert-tiny",
            "depth: 9",
            "```",
            "```bertgraph",
            "model: bert-tiny",
            "layers: 8",
            "format: mermaid",
            "depth: 4",
            "unfold: true",
            "```",
            "```bertgraph",
            "model: tiny",
            "depth: 1",
            "```",
            "```bertgraph",
            "model: tiny",
            "format: summary",
            "```",
            "```bertgraph",
            "model: tiny",
            "format: table",
            "```",
        ]
    )
    plugin = BertgraphPlugin()
    plugin.load_config({"format": "svg"})
    page = _page(root, config, "guide/page.md", markdown)
    with caplog.at_level(logging.INFO, logger="mkdocs.plugins.bertgraph"):
        out = plugin.on_page_markdown(markdown, page=page, config=config, files=None)
    mermaid_end = out.index("```\n", out.index("```mermaid"))
    assert out.startswith("\n\n\n\n```mermaid\n") and "flowchart" in out[:mermaid_end]  # the broken fence: blank
    summary_start = out.index("```text\n")
    drawn = out[mermaid_end + 4 : summary_start].strip("\n")
    local = str(root / "docs" / "guide" / "tiny")
    request = plugin._request("model: tiny\ndepth: 1", root / "docs" / "guide")
    assert request.model == local
    # The inline SVG as the renderer draws it, without the blank lines that would end Markdown's HTML block.
    assert drawn == "\n".join(line for line in plugin._drawer(config).html(request).split("\n") if line.strip())
    assert drawn.startswith("<div") and "<svg" in drawn
    assert out[summary_start:].startswith("```text\ntiny · BertModel")
    assert out.rstrip("\n").endswith("```") and out.count("```text\n") == 2
    said = [record.getMessage() for record in caplog.records if record.levelno == logging.INFO]
    assert "bertgraph: traced tiny (base)" in said  # the model beside the page, traced once for two fences
    summary = plugin._request("model: tiny\nformat: summary", root / "docs" / "guide")
    table = plugin._request("model: tiny\nformat: table", root / "docs" / "guide")
    # The SVG is drawn ahead with the page's other pictures (past the broken fence before it), then the
    # text and Mermaid at their turn, from the last fence up.
    assert [message for message in said if message.startswith("bertgraph: drew ")] == [
        f"bertgraph: drew {request.describe()} as inline-svg",
        f"bertgraph: drew {table.describe()} as text",
        f"bertgraph: drew {summary.describe()} as text",
        "bertgraph: drew bert-tiny · base · depth 4 · mermaid · unfolded · layers 8 as mermaid",
    ]
    assert (
        "bertgraph: the Mermaid diagram at depth 4 unfolded would exceed Mermaid's limits (500 edges, 50,000 "
        "characters), which GitHub cannot raise; wrote depth 4 with repeats folded instead"
    ) in said
    warned = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert warned == [f"{Path('docs') / 'guide' / 'page.md'}:1: bertgraph: depth must be 0 to 4, got 9"]


def test_a_page_with_no_source_file_is_drawn_too(site: tuple[MkDocsConfig, Path]) -> None:
    config, root = site
    plugin = BertgraphPlugin()
    plugin.load_config({})
    virtual = Page(None, File("made.md", None, str(root / "site"), True), config)
    out = plugin.on_page_markdown(f"x\n{FENCE}", page=virtual, config=config, files=None)
    assert out.startswith("x\n\n```text\nbert-tiny · BertModel (head: base)")


def test_a_figure_names_each_model_from_the_pages_folder(site: tuple[MkDocsConfig, Path]) -> None:
    _, root = site
    folder = root / "docs"
    first, second, spaced = _model(folder / "a"), _model(folder / "b"), _model(folder / "two words")
    plugin = BertgraphPlugin()
    plugin.load_config({"format": "mermaid"})
    with pytest.raises(FenceError):
        plugin._request("model: [", folder)
    for written in ("a, b", "a,b", "a b"):
        request = plugin._request(f"model: {written}\nfigure: schematic", folder)
        assert (request.names(), request.format) == ([str(first), str(second)], "svg")
    masks = plugin._request("model: a,bert-tiny\nfigure: masks", folder)
    assert masks.names() == [str(first), "bert-tiny"]
    # One model's diagram takes its reference whole, spaces and all.
    single = plugin._request("model: two words", folder)
    assert (single.model, single.format, single.theme) == (str(spaced), "mermaid", "auto")
    assert plugin._request("model: two words\nfigure: diagram", folder).model == str(spaced)
    assert plugin._request("model: bert-tiny", None).model == "bert-tiny"


def test_a_config_from_no_file_is_rooted_in_the_working_directory(
    site: tuple[MkDocsConfig, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, root = site
    page = _page(root, config, "x.md", "body")
    monkeypatch.chdir(root)
    config.config_file_path = None  # given as data, as `mkdocs build -f -` or a script does
    assert _page_path(page, config) == str(Path("docs") / "x.md")
    plugin = BertgraphPlugin()
    plugin.load_config({"cache_dir": "drawings"})
    plugin.on_page_markdown(f"{FENCE}", page=page, config=config, files=None)
    assert (root / "drawings").is_dir()
