"""The Sphinx extension in-process: real Sphinx builds of tiny projects written for each test.

``tests/test_docs_sphinx.py`` runs sphinx-build as processes (the installed code); these tests build
in this process and hold each piece of :mod:`bertgraph.docs.sphinx` to what it must give, so they
also serve the mutation run (docs/mutation.md). Every drawing is bert-tiny cut to one layer
(``:layers: 1``), traced once into a graph cache this file keeps from one run to the next, and compared
with what :class:`~bertgraph.docs.renderer.DiagramRenderer` draws for the same request; what the
directive puts in the doctree is read from builds with Sphinx's ``dummy`` builder, which draws nothing.
"""

from __future__ import annotations

import html
import io
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import docutils_namespace, patch_docutils

from bertgraph.docs import renderer as renderer_module
from bertgraph.docs import sphinx as extension
from bertgraph.docs.renderer import DiagramRenderer
from bertgraph.docs.request import EDGE_LABELS, FIGURES, FORMATS, SIZE_OPTIONS, THEMES, DiagramRequest
from bertgraph.version import __version__
from tests.conftest import TINY_CONFIG, require

ONE = (("layers", 1),)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
pytestmark = [
    pytest.mark.dot,
    pytest.mark.xdist_group("sphinx_exact"),
    pytest.mark.filterwarnings("error::sphinx.deprecation.RemovedInSphinx11Warning"),  # nothing Sphinx 11 drops
]


@pytest.fixture(scope="module", autouse=True)
def graphs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A graph cache kept from one run of this file to the next (the mutation run starts one per mutant),
    so bert-tiny is traced once, not once a run; the cache checks every entry it serves."""
    require(shutil.which("dot") is not None, "Graphviz dot is not installed")
    previous = os.environ.get("BERTGRAPH_CACHE_DIR")
    os.environ["BERTGRAPH_CACHE_DIR"] = str(tmp_path_factory.getbasetemp().parent / "sphinx-exact-graphs")
    yield
    if previous is None:
        os.environ.pop("BERTGRAPH_CACHE_DIR", None)
    else:
        os.environ["BERTGRAPH_CACHE_DIR"] = previous


def tiny(**options: Any) -> DiagramRequest:
    return DiagramRequest("bert-tiny", sizes=ONE, **options)


@dataclass
class Built:
    app: Sphinx
    source: Path
    out: Path
    status: str
    warning: str

    @property
    def warnings(self) -> list[str]:
        """The warning stream, one entry per message (a docutils error spans several lines)."""
        return [entry for entry in re.split(r"\n(?=/|WARNING: )", self.warning.strip()) if entry]

    def said(self, marker: str = "bertgraph: ") -> list[str]:
        return [line for line in self.status.splitlines() if line.startswith(marker)]

    def read(self, name: str) -> str:
        return (self.out / name).read_text(encoding="utf-8")

    def doctree(self, docname: str) -> nodes.document:
        return self.app.env.get_doctree(docname)


def build(
    folder: Path,
    pages: dict[str, str],
    *,
    builder: str = "html",
    mermaid: bool = False,
    conf: str = "",
    doctrees: Path | None = None,
) -> Built:
    """Write ``pages`` (and conf.py) into ``folder / "src"`` and build them with a real Sphinx, here."""
    source = folder / "src"
    for name, text in pages.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text, encoding="utf-8")
    extensions = ["bertgraph.sphinx", *(["sphinxcontrib.mermaid"] if mermaid else [])]
    (source / "conf.py").write_text(f'project = "demo"\nextensions = {extensions!r}\n{conf}', encoding="utf-8")
    status, warning = io.StringIO(), io.StringIO()
    out = folder / builder
    with patch_docutils(source), docutils_namespace():  # as sphinx-build does: each build's own registry
        app = Sphinx(
            source,
            source,
            out,
            doctrees or folder / "doctrees",
            builder,
            status=status,
            warning=warning,
            freshenv=True,
        )
        app.build()
    return Built(app, source, out, ANSI.sub("", status.getvalue()), ANSI.sub("", warning.getvalue()))


def diagrams(doctree: nodes.Node) -> list[extension.bertgraph_diagram]:
    return list(doctree.findall(extension.bertgraph_diagram))


def directive(model: str, *options: str) -> str:
    return "\n".join([f".. bertgraph:: {model}", *(f"   {option}" for option in options)]) + "\n\n"


def page(*blocks: str, title: str = "Page") -> str:
    return f"{title}\n{'=' * len(title)}\n\n" + "".join(blocks)


# --- setup ----------------------------------------------------------------------------------------


def test_setup_registers_the_directive_the_node_its_visitors_and_the_config_value(tmp_path: Path) -> None:
    built = build(tmp_path, {"index.rst": page("Text.\n")}, builder="dummy")
    app = built.app
    registered = app.extensions["bertgraph.sphinx"]
    assert registered.version == __version__
    assert registered.parallel_read_safe is True and registered.parallel_write_safe is True
    assert registered.metadata == {"env_version": 3}
    assert app.registry.get_envversion(app)["bertgraph.sphinx"] == extension.ENV_VERSION == 3
    handlers = app.registry.translation_handlers
    assert {name for name, table in handlers.items() if "bertgraph_diagram" in table} == {
        "html",
        "latex",
        "text",
        "man",
        "texinfo",
    }
    assert handlers["html"]["bertgraph_diagram"] == (extension.html_visit, None)
    assert handlers["latex"]["bertgraph_diagram"] == (extension.latex_visit, None)
    assert handlers["text"]["bertgraph_diagram"] == (extension.placeholder_visit, None)
    assert handlers["man"]["bertgraph_diagram"] == (extension.placeholder_visit, None)
    assert handlers["texinfo"]["bertgraph_diagram"] == (extension.placeholder_visit, None)
    option = app.config._options["bertgraph_theme"]
    assert (option.default, option.rebuild, option.valid_types) == ("auto", "env", frozenset({str}))
    assert app.config.bertgraph_theme == "auto"
    listeners = [listener.handler for listener in app.events.listeners["doctree-resolved"]]
    assert listeners.count(extension.resolve_diagrams) == 1
    assert built.warnings == []


def test_a_theme_of_another_type_is_reported_by_sphinx(tmp_path: Path) -> None:
    built = build(tmp_path, {"index.rst": page("Text.\n")}, builder="dummy", conf="bertgraph_theme = 3\n")
    assert built.warnings == ["WARNING: The config value `bertgraph_theme' has type `int'; expected `str'."]


# --- the options ------------------------------------------------------------------------------------


def test_the_directive_takes_one_argument_with_spaces_and_no_content() -> None:
    directive_class = extension.BertgraphDirective
    assert directive_class.required_arguments == 1
    assert directive_class.optional_arguments == 0
    assert directive_class.final_argument_whitespace is True
    assert directive_class.has_content is False
    assert set(directive_class.option_spec) == {
        "figure",
        "head",
        "depth",
        "format",
        "compare",
        "theme",
        "edge-labels",
        "caption",
        "unfold",
        *SIZE_OPTIONS,
        "seq-len",
        "batch",
        "css",
        "alt",
        "align",
        "name",
        "class",
    }


def test_each_options_converter() -> None:
    spec = extension.BertgraphDirective.option_spec
    assert spec["depth"]("0") == 0 and spec["depth"]("4") == 4
    with pytest.raises(ValueError, match="negative value; must be positive or zero"):
        spec["depth"]("-1")
    for name in ("seq-len", "batch", *SIZE_OPTIONS):
        assert spec[name]("3") == 3, name
        with pytest.raises(ValueError, match="negative or zero value; must be positive"):
            spec[name]("0")
    assert spec["unfold"]("") is None and spec["unfold"](None) is None
    with pytest.raises(ValueError, match='no argument is allowed; "yes" supplied'):
        spec["unfold"]("yes")
    assert spec["class"]("Wide tall") == ["wide", "tall"]
    for name in ("head", "compare"):
        assert spec[name]("masked-lm") == "masked-lm"
        with pytest.raises(ValueError, match="argument required but none supplied"):
            spec[name](None)
    for name in ("caption", "alt", "name"):
        assert spec[name]("Some *words*") == "Some *words*"
    for name, values in (
        ("figure", FIGURES),
        ("format", FORMATS),
        ("theme", THEMES),
        ("edge-labels", EDGE_LABELS),
        ("align", ("left", "center", "right")),
    ):
        for value in values:
            assert spec[name](value) == value
            assert spec[name](value.upper()) == value  # docutils' choice is case-blind
        shown = ", ".join(f'"{value}"' for value in values[:-1]) + f', or "{values[-1]}"'
        with pytest.raises(ValueError, match=re.escape(f'"nope" unknown; choose from {shown}')):
            spec[name]("nope")


# --- the directive: what it puts in the doctree ----------------------------------------------------------


def _write_model(folder: Path, *files: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    config = {"model_type": "bert", **TINY_CONFIG}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for name in files:
        (folder / name).write_bytes(b"")


EVERY_OPTION = (
    ":head: sequence-classification",
    ":depth: 0",
    ":format: mermaid",
    ":compare: token-classification",
    ":theme: light",
    ":edge-labels: none",
    ":unfold:",
    ":layers: 1",
    ":hidden: 64",
    ":heads: 2",
    ":intermediate: 100",
    ":vocab: 50",
    ":num-labels: 3",
    ":seq-len: 16",
    ":batch: 2",
    ":alt: my own words",
    ":class: wide tall",
)


@pytest.fixture
def directives_built(tmp_path: Path) -> Built:
    """A page of directives (built for each test that reads it: the mutation run counts a test as reaching
    the code its fixtures ran only when the fixture is its own)."""
    folder = tmp_path
    _write_model(folder / "src" / "sub" / "model")
    _write_model(folder / "src" / "sub" / "my model")
    blocks = page(
        directive("bert-tiny", ":layers: 1"),
        directive("bert-tiny", *EVERY_OPTION),
        directive("model", ":head: sequence-classification", ":depth: 3"),
        directive("model/config.json", ":depth: 1"),
        directive("model, my model, bert-tiny", ":figure: schematic", ":layers: 1"),  # with commas, spaces in a name
        directive("bert-tiny   gpt2", ":figure: masks", ":seq-len: 6"),
        directive(
            "bert-tiny", ":layers: 1", ":caption: bert-tiny with *one* layer", ":align: center", ":name: fig-one"
        ),
        directive("bert-tiny", ":layers: 1", ":caption: *A* caption starting with markup", ":name: fig-plain"),
        directive("bert-tiny", ":layers: 1", ":name: solo"),
        directive("bert-tiny", ":layers: 1", ":caption: broken `markup"),
        directive("my model", ":depth: 1"),  # one model: its name may have spaces
    )
    return build(
        folder,
        {"index.rst": page(".. toctree::\n\n   sub/page\n"), "sub/page.rst": blocks},
        builder="dummy",
        conf='bertgraph_theme = "dark"\nkeep_warnings = True\n',  # the caption's markup error stays in the doctree
    )


def test_the_request_holds_every_option_and_the_site_theme(directives_built: Built) -> None:
    found = diagrams(directives_built.doctree("sub/page"))
    assert len(found) == 11
    plain, every = found[:2]
    assert plain["request"] == tiny(theme="dark").as_dict()  # bertgraph_theme is the default theme
    assert plain["alt"] == "bert-tiny · base · depth 2"
    assert plain["classes"] == []
    assert (
        every["request"]
        == DiagramRequest(
            "bert-tiny",
            head="sequence-classification",
            depth=0,
            format="mermaid",
            compare="token-classification",
            theme="light",
            edge_labels="none",
            unfold=True,
            sizes=(
                ("layers", 1),
                ("hidden", 64),
                ("heads", 2),
                ("intermediate", 100),
                ("vocab", 50),
                ("num-labels", 3),
            ),
            seq_len=16,
            batch=2,
        ).as_dict()
    )
    assert every["alt"] == "my own words"
    assert every["classes"] == ["wide", "tall"]
    assert set(every.attributes) == {"ids", "classes", "names", "dupnames", "request", "alt"}
    page_file = directives_built.source / "sub" / "page.rst"
    for node in found:
        assert (node.source, node.line) == (str(page_file), node.line)
    assert [node.line for node in found] == [4, 7, 26, 30, 33, 37, 41, 47, 52, 56, 60]
    assert directives_built.warnings[-1:] != []  # the broken caption's markup, reported by docutils


def test_a_local_model_is_found_beside_the_document(directives_built: Built) -> None:
    found = diagrams(directives_built.doctree("sub/page"))
    folder = directives_built.source / "sub" / "model"
    local, config_file, schematic, masks = found[2:6]
    spaced = found[10]
    assert spaced["request"] == DiagramRequest(str(folder.parent / "my model"), depth=1, theme="dark").as_dict()
    assert spaced["alt"] == "my model · base · depth 1"
    assert (
        local["request"] == DiagramRequest(str(folder), head="sequence-classification", depth=3, theme="dark").as_dict()
    )
    assert local["alt"] == "model · sequence-classification · depth 3"  # as written
    assert config_file["request"] == DiagramRequest(str(folder / "config.json"), depth=1, theme="dark").as_dict()
    assert config_file["alt"] == "model/config.json · base · depth 1"
    assert (
        schematic["request"]
        == DiagramRequest(
            f"{folder}, {folder.parent / 'my model'}, bert-tiny", figure="schematic", sizes=ONE, theme="dark"
        ).as_dict()
    )
    assert schematic["alt"] == "schematic of model, my model, bert-tiny"  # the names as written, not the paths
    assert masks["request"] == DiagramRequest("bert-tiny, gpt2", figure="masks", seq_len=6, theme="dark").as_dict()
    assert masks["alt"] == "masks of bert-tiny, gpt2"
    assert directives_built.app.env.dependencies["sub/page"] == {
        folder / "config.json",
        folder.parent / "my model" / "config.json",
    }


def test_a_caption_makes_a_figure_and_a_name_a_target(directives_built: Built) -> None:
    doctree = directives_built.doctree("sub/page")
    page_file = str(directives_built.source / "sub" / "page.rst")
    figures = list(doctree.findall(nodes.figure))
    assert len(figures) == 3
    aligned, plain, broken = figures
    assert [type(child) for child in aligned.children] == [extension.bertgraph_diagram, nodes.caption]
    assert aligned["align"] == "center" and "align" not in plain.attributes
    assert aligned["ids"] == ["fig-one"] and aligned["names"] == ["fig-one"]
    assert aligned[0]["ids"] == [] and aligned[0]["names"] == []
    caption = aligned[1]
    assert caption.rawsource == "bert-tiny with *one* layer"
    assert caption.astext() == "bert-tiny with one layer"
    assert [type(child) for child in caption.children] == [nodes.Text, nodes.emphasis, nodes.Text]
    assert (caption.source, caption.line) == (page_file, 41)
    assert plain["ids"] == ["fig-plain"] and plain[1].astext() == "A caption starting with markup"
    assert [type(child) for child in plain[1].children] == [nodes.emphasis, nodes.Text]
    assert [type(child) for child in broken[1].children][-1] is nodes.system_message  # kept where it was found
    solo = diagrams(doctree)[8]
    assert solo.parent is doctree[0] and solo["ids"] == ["solo"] and solo["names"] == ["solo"]
    labels = directives_built.app.env.domains.standard_domain.anonlabels
    assert labels["solo"] == ("sub/page", "solo") and labels["fig-one"] == ("sub/page", "fig-one")
    assert directives_built.app.env.domains.standard_domain.labels["fig-one"] == (
        "sub/page",
        "fig-one",
        "bert-tiny with one layer",
    )


def test_each_model_file_a_drawing_reads_is_a_dependency(tmp_path: Path) -> None:
    """An edit of the config or the weights rereads the page (the drawing's key changes with them); the files are
    noted even when the checkpoint is refused, so that mending it rereads the page too."""
    source = tmp_path / "src"
    folder, file = source / "guide" / "folder", source / "guide" / "file"
    _write_model(folder, "model.safetensors", "model-00001-of-00002.safetensors", "pytorch_model.bin")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    _write_model(file, "model.safetensors")
    _write_model(source / "guide" / "bare")
    pages = {
        "index.rst": page(".. toctree::\n\n   guide/page\n"),
        "guide/page.rst": page(directive("folder"), directive("file/config.json"), directive("/guide/bare")),
    }
    built = build(tmp_path, pages, builder="dummy")
    assert built.app.env.dependencies["guide/page"] == {
        folder / "config.json",
        folder / "model.safetensors",
        folder / "model.safetensors.index.json",
        folder / "model-00001-of-00002.safetensors",  # the shard that is there
        folder / "pytorch_model.bin",
        file / "config.json",
        file / "model.safetensors",  # beside the config named
        source / "guide" / "bare" / "config.json",
    }
    assert "index" not in built.app.env.dependencies
    (bare,) = diagrams(built.doctree("guide/page"))  # the checkpoints given are empty files: refused
    assert bare["request"]["model"] == str(source / "guide" / "bare")  # a path from the source folder
    assert len(built.warnings) == 2 and all(": WARNING: bertgraph: " in line for line in built.warnings)


def test_bad_options_are_one_warning_each_at_their_line_and_no_node(tmp_path: Path) -> None:
    blocks = page(
        directive("bert-tiny", ":depth: 9"),
        directive("bert-huge-uncased"),
        directive("bert-tiny", ":figure: masks", ":head: masked-lm"),
        directive("bert-tiny", ":align: middle"),
        directive("bert-tiny", ":seq-len: 0"),
    )
    built = build(tmp_path, {"index.rst": blocks}, builder="dummy")
    index = built.source / "index.rst"
    bertgraph_warnings = [line for line in built.warnings if ": bertgraph:" in line]
    assert bertgraph_warnings == [
        f"{index}:4: WARNING: bertgraph: depth must be 0 to 4, got 9 [bertgraph]",
        f"{index}:7: WARNING: bertgraph: unknown model 'bert-huge-uncased'; closest presets: bert-large-uncased,"
        " bert-base-uncased, bert-large-cased (or give a local directory with config.json, or a hub id such as"
        " org/name) [bertgraph]",
        f"{index}:9: WARNING: bertgraph: figure masks draws each model's base graph; drop the head option [bertgraph]",
    ]
    docutils_errors = [line for line in built.warnings if ": bertgraph:" not in line]
    assert len(docutils_errors) == 2
    assert docutils_errors[0].startswith(f'{index}:13: ERROR: Error in "bertgraph" directive:\ninvalid option value')
    assert '"middle" unknown; choose from "left", "center", or "right".' in docutils_errors[0]
    assert docutils_errors[1].startswith(f'{index}:16: ERROR: Error in "bertgraph" directive:\ninvalid option value')
    assert diagrams(built.doctree("index")) == []
    quiet = build(
        tmp_path / "quiet", {"index.rst": blocks}, builder="dummy", conf='suppress_warnings = ["bertgraph"]\n'
    )
    assert [line for line in quiet.warnings if ": bertgraph: " in line] == []
    assert len(quiet.warnings) == 2  # docutils' own errors are not bertgraph's to silence


# --- HTML ---------------------------------------------------------------------------------------------


def _pre(page_html: str, classes: str) -> str:
    found = re.search(rf'<div class="{classes}"><div class="highlight"><pre><span></span>(.*?)</pre>', page_html, re.S)
    assert found, classes
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))


def test_html_inlines_each_drawing_and_hands_mermaid_on(tmp_path: Path) -> None:
    blocks = page(
        directive("bert-tiny", ":layers: 1", ":depth: 1", ":class: wide tall"),
        directive("bert-tiny", ":layers: 1", ":depth: 0", ":theme: dark"),
        directive(
            "bert-tiny",
            ":layers: 1",
            ":depth: 0",
            ":caption: bert-tiny, *one* layer",
            ":align: right",
            ":name: fig-one",
        ),
        directive("bert-tiny", ":layers: 1", ":depth: 1", ":unfold:", ":name: solo"),
        directive("bert-tiny", ":layers: 1", ":format: table"),
        directive("bert-tiny", ":layers: 1", ":format: summary", ":depth: 1"),
        directive("bert-tiny", ":layers: 1", ":format: mermaid", ":depth: 1"),
        directive("bert-tiny", ":layers: 9", ":format: mermaid", ":depth: 4", ":unfold:"),
        directive("bert-tiny", ":layers: 1", ":format: html", ":depth: 1"),
        "See :ref:`fig-one` and :ref:`the solo one <solo>`.\n",
    )
    built = build(tmp_path, {"index.rst": blocks}, mermaid=True, conf='bertgraph_theme = "light"\n')
    assert built.warnings == []
    index = built.read("index.html")
    draw = DiagramRenderer(None)
    wide, dark, captioned, solo, page_ = (
        tiny(depth=1, theme="light"),
        tiny(depth=0, theme="dark"),
        tiny(depth=0, theme="light"),
        tiny(depth=1, theme="light", unfold=True),
        tiny(depth=1, theme="light", format="html"),
    )
    assert f'<div class="bertgraph-figure wide tall">{draw.html(wide)}</div>\n' in index
    assert f'<div class="bertgraph-figure">{draw.html(dark)}</div>\n' in index
    assert (
        f'<figure class="align-right" id="fig-one">\n<div class="bertgraph-figure">{draw.html(captioned)}</div>\n'
        '<figcaption>\n<p><span class="caption-text">bert-tiny, <em>one</em> layer</span>'
    ) in index
    assert f'<div class="bertgraph-figure" id="solo">{draw.html(solo)}</div>\n' in index
    assert f'<div class="bertgraph-figure">{draw.html(page_)}</div>\n' in index
    assert (
        '<a class="reference internal" href="#fig-one"><span class="std std-ref">bert-tiny, one layer</span></a>'
        in index
    )
    assert '<a class="reference internal" href="#solo"><span class="std std-ref">the solo one</span></a>' in index
    assert index.count('<div class="bertgraph-figure') == 5
    table, summary = tiny(format="table", theme="light"), tiny(format="summary", depth=1, theme="light")
    assert _pre(index, "bertgraph-table highlight-text notranslate") == draw.text(table)
    assert index.count('<div class="bertgraph-table highlight-text notranslate">') == 2
    assert draw.text(summary) in html.unescape(re.sub(r"<[^>]+>", "", index))
    assert draw.text(table) != draw.text(summary)
    mermaids = [html.unescape(code) for code in re.findall(r'<pre  class="mermaid">\s*(.*?)\s*</pre>', index, re.S)]
    big = DiagramRequest("bert-tiny", sizes=(("layers", 9),), format="mermaid", depth=4, unfold=True, theme="light")
    assert mermaids == [
        draw.mermaid(tiny(format="mermaid", depth=1, theme="light")).strip(),
        draw.mermaid(big).strip(),
    ]
    assert "mermaid.esm.min.mjs" in index
    # The page's drawings were drawn ahead together, in its order; tables and Mermaid before them.
    drawn = DiagramRenderer(None)
    ahead = [wide, dark, captioned, solo, page_]
    assert set(extension.renderer(built.app)._made) == {drawn.key(r, renderer_module._html_output(r)) for r in ahead}
    note = (
        "bertgraph: the Mermaid diagram at depth 4 unfolded would exceed Mermaid's limits (500 edges, 50,000 "
        "characters), which GitHub cannot raise; wrote depth 4 with repeats folded instead"
    )
    assert [line for line in built.said() if not line.startswith("bertgraph: traced")] == [
        "bertgraph: drew bert-tiny · base · depth 2 · table · layers 1 as text",
        "bertgraph: drew bert-tiny · base · depth 1 · summary · layers 1 as text",
        "bertgraph: drew bert-tiny · base · depth 1 · mermaid · layers 1 as mermaid",
        note,
        "bertgraph: drew bert-tiny · base · depth 4 · mermaid · unfolded · layers 9 as mermaid",
        "bertgraph: drew bert-tiny · base · depth 1 · svg · layers 1 as inline-svg",
        "bertgraph: drew bert-tiny · base · depth 0 · svg · layers 1 as inline-svg",
        "bertgraph: drew bert-tiny · base · depth 0 · svg · layers 1 as inline-svg",
        "bertgraph: drew bert-tiny · base · depth 1 · svg · unfolded · layers 1 as inline-svg",
        "bertgraph: drew bert-tiny · base · depth 1 · html · layers 1 as page",
    ]


def test_mermaid_without_its_extension_is_drawn_as_svg_with_a_warning(tmp_path: Path) -> None:
    blocks = page("Before.\n\n", directive("bert-tiny", ":layers: 1", ":format: mermaid", ":theme: light"))
    built = build(tmp_path, {"index.rst": blocks})
    index_file = built.source / "index.rst"
    assert built.warnings == [
        f"{index_file}:6: WARNING: bertgraph: format mermaid needs 'sphinxcontrib.mermaid' in extensions;"
        " drawing SVG instead [bertgraph]"
    ]
    request = tiny(format="mermaid", theme="light")
    assert f'<div class="bertgraph-figure">{DiagramRenderer(None).html(request)}</div>\n' in built.read("index.html")
    key = DiagramRenderer(None).key(request, "inline-svg")
    assert set(extension.renderer(built.app)._made) == {key}


def test_the_renderer_of_a_build_keeps_its_drawings_beside_the_doctrees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path / "graphs"))
    monkeypatch.setattr(renderer_module, "_GRAPHS", {})
    pages = {"index.rst": page(directive("bert-tiny", ":layers: 1", ":format: table", ":depth: 1"))}
    first = build(tmp_path / "one", pages, builder="text", doctrees=tmp_path / "doctrees")
    assert first.said() == [
        "bertgraph: traced bert-tiny (base)",
        "bertgraph: drew bert-tiny · base · depth 1 · table · layers 1 as text",
    ]
    drawings = extension.renderer(first.app)
    assert drawings.folder == tmp_path / "doctrees" / "bertgraph"
    key = drawings.key(tiny(format="table", depth=1), "text")
    assert sorted(path.name for path in drawings.folder.iterdir()) == [f"{key}.txt"]
    again = build(tmp_path / "two", pages, builder="text", doctrees=tmp_path / "doctrees")
    assert extension.renderer(again.app) is drawings  # one renderer per drawings folder
    assert again.said() == []  # kept from the first build
    elsewhere = build(tmp_path / "three", pages, builder="text")
    assert extension.renderer(elsewhere.app) is not drawings
    assert extension.renderer(elsewhere.app).folder == tmp_path / "three" / "doctrees" / "bertgraph"
    assert elsewhere.said() == ["bertgraph: drew bert-tiny · base · depth 1 · table · layers 1 as text"]
    assert first.read("index.txt") == again.read("index.txt") == elsewhere.read("index.txt")


# --- drawings that fail --------------------------------------------------------------------------


def test_a_drawing_that_fails_warns_at_its_line_and_the_build_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    DiagramRenderer(None).text(tiny(format="table"))  # traced before dot goes away (tracing needs none)
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot
    blocks = page(
        "Before.\n\n",
        directive("bert-tiny", ":layers: 1", ":depth: 1"),
        directive("bert-tiny", ":layers: 1", ":caption: In a figure"),
        directive("bert-tiny", ":layers: 1", ":format: table"),
        "After.\n",
    )
    missing = "bertgraph: Graphviz's dot program is not installed"
    for builder in ("html", "latex"):
        built = build(tmp_path / builder, {"index.rst": blocks}, builder=builder)
        index_file = built.source / "index.rst"
        assert [line.split(" (")[0].split(";")[0] for line in built.warnings] == [
            f"{index_file}:6: WARNING: {missing}",
            f"{index_file}:10: WARNING: {missing}",
        ], built.warnings
        assert all(line.endswith(" [bertgraph]") for line in built.warnings)
        if builder == "html":
            written = built.read("index.html")
            assert "<p>Before.</p>" in written and "<p>After.</p>" in written
            assert "bertgraph-figure" not in written and "bertgraph-table" in written
        else:
            tex = next(built.out.glob("*.tex")).read_text(encoding="utf-8")
            assert "sphinxincludegraphics" not in tex and "After." in tex
            assert list(built.out.glob("bertgraph-*.png")) == []


def test_a_model_that_breaks_after_reading_warns_and_its_node_goes(tmp_path: Path) -> None:
    """The config read by the directive is broken before the pages are written: every drawing fails."""
    _write_model(tmp_path / "src" / "model")
    conf = (
        "from pathlib import Path\n"
        "def setup(app):\n"
        "    def broken(app, env):\n"
        "        (Path(app.srcdir) / 'model' / 'config.json').write_text('{', encoding='utf-8')\n"
        "    app.connect('env-updated', broken)\n"
    )
    blocks = page(
        directive("model", ":format: table"),
        directive("model", ":format: mermaid"),
        directive("model", ":depth: 1"),
        "After.\n",
    )
    built = build(tmp_path, {"index.rst": blocks}, mermaid=True, conf=conf)
    index_file = built.source / "index.rst"
    broken = (
        f"bertgraph: {built.source / 'model' / 'config.json'} is not valid JSON (line 1, column 2: Expecting property"
        " name enclosed in double quotes) [bertgraph]"
    )
    assert built.warnings == [
        f"{index_file}:4: WARNING: {broken}",
        f"{index_file}:7: WARNING: {broken}",
        f"{index_file}:10: WARNING: {broken}",
    ]
    written = built.read("index.html")
    assert "<p>After.</p>" in written
    for gone in ("bertgraph-figure", "bertgraph-table", 'class="mermaid"'):
        assert gone not in written


# --- other builders ----------------------------------------------------------------------------------


def test_latex_writes_a_png_beside_the_tex_and_includes_it(tmp_path: Path) -> None:
    draw = DiagramRenderer(None)
    dark, mermaid_one = tiny(theme="dark", depth=1), tiny(format="mermaid", depth=0)
    blocked = tiny(depth=0, theme="light")
    blocked_name, _ = draw.png(blocked)
    (tmp_path / "latex" / blocked_name).mkdir(parents=True)  # the PNG cannot be written there
    blocks = page(
        directive("bert-tiny", ":layers: 1", ":depth: 1"),
        directive("bert-tiny", ":layers: 1", ":depth: 0", ":format: mermaid", ":theme: light"),
        directive("bert-tiny", ":layers: 1", ":depth: 0", ":theme: light"),
        directive("bert-tiny", ":layers: 1", ":format: table"),
    )
    built = build(tmp_path, {"index.rst": blocks}, builder="latex", mermaid=True, conf='bertgraph_theme = "dark"\n')
    index_file = built.source / "index.rst"
    where = tmp_path / "latex" / blocked_name
    assert built.warnings == [
        f"{index_file}:14: WARNING: bertgraph: {where} is a directory; give a file name such as {where / 'bert.svg'}"
        " [bertgraph]"
    ]
    tex = next(built.out.glob("*.tex")).read_text(encoding="utf-8")
    names = []
    for request in (dark, replace_theme(mermaid_one, "light")):
        name, data = draw.png(request)
        assert (built.out / name).read_bytes() == data
        assert f"\n\\sphinxincludegraphics[]{{{name}}}\n" in tex
        names.append(name)
    assert re.findall(r"\\sphinxincludegraphics\[\]\{([^}]*)\}", tex) == names
    assert "4,187,648" in tex  # the table, as a literal block
    assert extension.renderer(built.app)._made == {}  # nothing drawn ahead for print


def replace_theme(request: DiagramRequest, theme: str) -> DiagramRequest:
    from dataclasses import replace

    return replace(request, theme=theme)


def test_text_builders_get_placeholders_and_tables(tmp_path: Path) -> None:
    blocks = page(
        directive("bert-tiny", ":layers: 1"),
        directive("bert-tiny", ":layers: 1", ":alt: the tiny model", ":format: mermaid"),
        directive("bert-tiny, gpt2", ":figure: schematic", ":layers: 1"),
        directive("bert-tiny", ":layers: 1", ":format: table", ":depth: 1"),
    )
    built = build(tmp_path, {"index.rst": blocks}, builder="text")
    assert built.warnings == []  # Mermaid is no matter for text
    text = built.read("index.txt")
    table = DiagramRenderer(None).text(tiny(format="table", depth=1))
    expected = (
        "Page\n****\n\n[diagram: bert-tiny · base · depth 2]\n\n[diagram: the tiny model]\n\n"
        "[diagram: schematic of bert-tiny, gpt2]\n\n"
        + "".join(f"   {line}\n" if line else "\n" for line in table.splitlines())
    )
    assert text == expected
    for builder, suffix in (("man", "1"), ("texinfo", "texi")):
        written = build(tmp_path / builder, {"index.rst": blocks}, builder=builder)
        assert written.warnings == []
        output = next(written.out.glob(f"*.{suffix}")).read_text(encoding="utf-8")
        if builder == "man":  # each a paragraph of its own, escaped as roff wants
            assert (
                ".sp\n[diagram: bert\\-tiny · base · depth 2]\n.sp\n[diagram: the tiny model]\n.sp\n"
                "[diagram: schematic of bert\\-tiny, gpt2]\n.INDENT 0.0\n"
            ) in output
        else:
            assert (
                "@anchor{0}\n[diagram: bert-tiny · base · depth 2]\n\n[diagram: the tiny model]\n\n"
                "[diagram: schematic of bert-tiny, gpt2]\n\n@example\n"
            ) in output
        assert "word_embeddings" in output
