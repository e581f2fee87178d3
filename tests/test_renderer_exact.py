"""The docs renderer in-process: keys, the drawings folder, what is drawn once, every output.

``tests/test_docs_renderer.py`` checks that drawings through kept views equal fresh ones; these
tests hold each method of :class:`~bertgraph.docs.renderer.DiagramRenderer` to what it must give
(each drawing to the one drawn with the options asked for), on bert-tiny cut to one layer (two
where folding shows), so they also serve the mutation run (docs/mutation.md).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from pathlib import Path

import networkx as nx
import pytest

from bertgraph import cache
from bertgraph.docs import renderer
from bertgraph.docs.request import DiagramRequest
from bertgraph.errors import BertgraphError

ONE = (("layers", 1),)
TWO = (("layers", 2),)


def tiny(**options: object) -> DiagramRequest:
    return DiagramRequest("bert-tiny", sizes=ONE, **options)  # type: ignore[arg-type]


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty graph cache and an empty memo: every model is traced again."""
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path / "graphs"))
    monkeypatch.setattr(renderer, "_GRAPHS", {})
    return tmp_path / "graphs"


# --- keys ---------------------------------------------------------------------------------------


def test_a_key_hashes_the_request_the_output_the_graphs_and_the_code() -> None:
    request = tiny(depth=1)
    draw = renderer.DiagramRenderer(None)
    key = draw.key(request, "png")
    assert re.fullmatch(r"[0-9a-f]{24}", key)
    material = {
        "code": renderer._code_digest(),
        "graphs": [cache.key(request.spec())],
        "output": "png",
        "request": request.as_dict(),
    }
    text = json.dumps(material, sort_keys=True)
    assert key == hashlib.sha256(text.encode()).hexdigest()[:24]
    assert key == renderer.DiagramRenderer(Path("elsewhere")).key(request, "png")  # the folder is no part of it
    others = {
        draw.key(request, "inline-svg"),
        draw.key(tiny(depth=2), "png"),
        draw.key(tiny(depth=1, compare="masked-lm"), "png"),
    }
    assert key not in others and len(others) == 3


def test_the_code_digest_reads_the_drawing_code_once() -> None:
    digest = renderer._code_digest()
    assert re.fullmatch(r"[0-9a-f]{16}", digest)
    assert [digest] == renderer._CODE
    root = Path(renderer.__file__).resolve().parent.parent
    expected = hashlib.sha256(renderer.__version__.encode())
    for folder in ("render", "render/assets", "docs"):
        for file in sorted((root / folder).glob("*.*")):
            expected.update(file.name.encode())
            expected.update(file.read_bytes())
    assert digest == expected.hexdigest()[:16]


# --- graphs -------------------------------------------------------------------------------------


def test_a_model_is_traced_once_then_read_from_the_memo_and_the_cache(fresh: Path) -> None:
    traced: list[str] = []
    spec = tiny(head="masked-lm").spec()
    graph = renderer.graph_of(spec, traced.append)
    assert traced == ["bert-tiny (masked-lm)"]
    assert renderer.graph_of(spec, traced.append) is graph  # the memo
    assert {cache.key(spec): graph} == renderer._GRAPHS
    assert cache.load(spec) is not None  # stored for the next process
    renderer._GRAPHS.clear()
    again = renderer.graph_of(spec, traced.append)  # the cache: no trace
    assert traced == ["bert-tiny (masked-lm)"]
    assert again is not graph and sorted(again.nodes) == sorted(graph.nodes)
    renderer.graph_of(tiny(head="masked-lm", depth=3).spec())  # no callback: traced nothing, said nothing
    assert traced == ["bert-tiny (masked-lm)"]


def test_without_the_cache_a_model_is_traced_and_stored_nowhere(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BERTGRAPH_NO_CACHE", "1")
    traced: list[str] = []
    spec = tiny().spec()
    graph = renderer.graph_of(spec, traced.append)
    assert traced == ["bert-tiny (base)"]
    assert {repr(spec): graph} == renderer._GRAPHS
    assert renderer.graph_of(spec, traced.append) is graph
    assert traced == ["bert-tiny (base)"]
    assert not fresh.exists()
    monkeypatch.delenv("BERTGRAPH_NO_CACHE")
    assert cache.load(spec) is None


def test_a_graph_stored_by_another_process_is_read_not_traced(fresh: Path) -> None:
    spec = tiny(head="masked-lm").spec()
    renderer.graph_of(spec)
    renderer._GRAPHS.clear()
    traced: list[str] = []
    graph = renderer.graph_of(spec, traced.append)
    assert traced == []
    assert renderer._GRAPHS[cache.key(spec)] is graph


def test_what_a_trace_leaves_is_frozen_and_the_exit_freezes_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    import atexit
    import gc

    from bertgraph.tracing import collector

    registered: list[object] = []
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(collector, "_EXIT_REGISTERED", [])
    before = gc.get_freeze_count()
    keep: list[list[int]] = [[] for _ in range(100)]
    try:
        renderer._set_aside_what_lives_on()
        assert gc.get_freeze_count() >= before + 100
        renderer._set_aside_what_lives_on()
        assert registered == [gc.freeze]  # once
        assert collector._SET_ASIDE == [True]  # the next trace knows it without counting
    finally:
        collector.hand_back()
    assert len(keep) == 100


# --- the drawings folder -------------------------------------------------------------------------


def test_a_drawing_is_made_once_kept_in_the_folder_and_read_back(tmp_path: Path) -> None:
    folder = tmp_path / "drawings" / "inner"
    made: list[str] = []
    request = tiny(depth=1, theme="light")
    draw = renderer.DiagramRenderer(folder, on_render=made.append)
    first = draw.html(request)
    assert made == ["bert-tiny · base · depth 1 · svg · layers 1 as inline-svg"]
    key = draw.key(request, "inline-svg")
    assert sorted(path.name for path in folder.iterdir()) == [f"{key}.html"]
    assert (folder / f"{key}.html").read_text(encoding="utf-8") == first
    assert draw.html(request) == first
    later = renderer.DiagramRenderer(folder, on_render=made.append)  # the next build
    (folder / f"{key}.html").write_text("kept", encoding="utf-8")
    assert later.html(request) == "kept"  # read from the folder, not drawn
    assert made == ["bert-tiny · base · depth 1 · svg · layers 1 as inline-svg"]


def test_without_a_folder_every_drawing_is_made_again(tmp_path: Path) -> None:
    made: list[str] = []
    draw = renderer.DiagramRenderer(None, on_render=made.append)
    request = tiny(format="table")
    assert draw.text(request) == draw.text(request)
    assert made == ["bert-tiny · base · depth 2 · table · layers 1 as text"] * 2
    assert draw._kept(draw.key(request, "text"), ".txt") is None
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_cannot_be_written_only_costs_time(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder", encoding="utf-8")
    made: list[str] = []
    draw = renderer.DiagramRenderer(blocked / "drawings", on_render=made.append)
    request = tiny(format="summary")
    text = draw.text(request)
    assert text == draw.text(request)
    assert len(made) == 2  # nothing kept, drawn again
    draw._keep("k", ".txt", b"x")  # raises nothing
    assert blocked.read_text(encoding="utf-8") == "not a folder"


# --- each output -------------------------------------------------------------------------------


def _ids(fragment: str) -> list[str]:
    return re.findall(r' id="([^"]+)"', fragment)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_an_inline_svg_has_its_theme_its_label_and_ids_of_its_own(theme: str) -> None:
    request = tiny(depth=1, theme=theme)
    draw = renderer.DiagramRenderer(None)
    fragment = draw.html(request)
    key = draw.key(request, "inline-svg")
    assert fragment.startswith(f'<div class="bertgraph bertgraph-{theme}"><svg role="img" ')
    assert fragment.endswith("</svg></div>")
    assert 'aria-label="bert-tiny · BertModel, depth 1"' in fragment
    ids = _ids(fragment)
    assert ids and all(name.startswith(f"bg{key[:8]}-") for name in ids)
    assert "<?xml" not in fragment and "<style" not in fragment
    background = "#0d1117" if theme == "dark" else "#ffffff"
    assert background in fragment.lower()


def test_the_auto_theme_carries_its_own_style_and_the_light_drawing() -> None:
    draw = renderer.DiagramRenderer(None)
    auto = draw.html(tiny(depth=1))
    light = draw.html(tiny(depth=1, theme="light"))
    assert auto.startswith('<div class="bertgraph bertgraph-auto"><style')
    assert ".bertgraph-auto" in auto.split("</style>")[0]
    drawing = auto.split("</style>", 1)[1]
    assert re.sub(r'id="bg\w{8}-|#bg\w{8}-', "", drawing) == re.sub(
        r'id="bg\w{8}-|#bg\w{8}-', "", light.removeprefix('<div class="bertgraph bertgraph-light">')
    )


def test_a_compared_head_is_drawn_beside_the_base() -> None:
    draw = renderer.DiagramRenderer(None)
    alone = draw.html(tiny(depth=1, theme="light"))
    compared = draw.html(tiny(depth=1, theme="light", compare="masked-lm"))
    assert compared != alone
    assert "cls" in compared and "cls" not in alone  # the masked-LM head's modules


# Two layers, so that folding shows at depth 2; a compared head, a theme and edge labels that are not the defaults.
ASKED = DiagramRequest("bert-tiny", sizes=TWO, depth=2, theme="dark", compare="masked-lm", edge_labels="shapes")


def _asked_graphs(request: DiagramRequest) -> tuple[nx.DiGraph, nx.DiGraph]:
    return renderer.graph_of(request.spec()), renderer.graph_of(request.spec("masked-lm"))


@pytest.mark.parametrize("unfold", [False, True])
def test_an_inline_svg_is_the_layout_of_the_diagram_its_options_ask_for(unfold: bool) -> None:
    from bertgraph.render import dot, embed, graphviz_run
    from bertgraph.render.ids import legend_classes

    request = replace(ASKED, unfold=unfold)
    graph, compare = _asked_graphs(request)
    source = dot.generate_dot(graph, 2, not unfold, "dark", compare, edge_labels="shapes")
    assert renderer._svg_source(graph, compare, request) == source
    draw = renderer.DiagramRenderer(None)
    prefix = f"bg{draw.key(request, 'inline-svg')[:8]}-"
    svg = legend_classes(graphviz_run.render(source, "svg").decode("utf-8"))  # the swatches classed as their roles
    expected = embed.inline_svg(svg, prefix, "bert-tiny · BertModel, depth 2")
    assert draw.html(request) == f'<div class="bertgraph bertgraph-dark">{expected}</div>'


def test_an_interactive_page_is_the_page_its_options_ask_for() -> None:
    from bertgraph.render import embed
    from bertgraph.render.html import generate_html

    request = replace(ASKED, format="html")
    graph, compare = _asked_graphs(request)
    page = generate_html(graph, 2, True, "dark", compare, "shapes")
    assert renderer.DiagramRenderer(None).html(request) == embed.iframe(page, "bert-tiny · BertModel")


def test_a_png_is_the_drawing_its_options_ask_for() -> None:
    from bertgraph.render import PNG_DPI, dot, graphviz_run

    graph, compare = _asked_graphs(ASKED)
    source = dot.generate_dot(graph, 2, True, "dark", compare, dpi=PNG_DPI, edge_labels="shapes")
    assert renderer.DiagramRenderer(None).png(ASKED)[1] == graphviz_run.render(source, "png")


def test_mermaid_text_is_the_flowchart_its_options_ask_for() -> None:
    from bertgraph.render import mermaid

    graph, compare = _asked_graphs(ASKED)
    for unfold in (False, True):
        expected = mermaid.generate_mermaid(graph, 2, not unfold, "dark", compare, edge_labels="shapes").text
        assert renderer.DiagramRenderer(None).mermaid(replace(ASKED, unfold=unfold)) == expected


def test_a_diagram_graphviz_would_take_minutes_over_is_refused_before_any_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bertgraph.errors import RenderError
    from bertgraph.render import graphviz_run

    layouts: list[str] = []
    monkeypatch.setattr(graphviz_run, "render", lambda source, fmt: layouts.append(fmt))
    monkeypatch.setattr(graphviz_run, "MAX_EDGES", 60)  # one layer has 61 edges at depth 4, as the page says
    draw = renderer.DiagramRenderer(None)
    for request in (tiny(depth=4), tiny(depth=4, format="html")):
        with pytest.raises(RenderError, match="the diagram has 61 edges, and Graphviz takes minutes"):
            draw.html(request)
    with pytest.raises(RenderError, match="the diagram has 61 edges"):
        draw.png(tiny(depth=4))
    draw.html_all([tiny(depth=4, theme="light")])  # left for its own call to report
    assert layouts == []


def test_the_model_is_named_as_bertgraph_names_it_not_as_the_author_wrote_it() -> None:
    alias = DiagramRequest("prajjwal1/bert-tiny", sizes=ONE, depth=1, theme="light")
    draw = renderer.DiagramRenderer(None)
    assert 'aria-label="bert-tiny · BertModel, depth 1"' in draw.html(alias)
    assert draw.html(replace(alias, format="html")).startswith(
        '<iframe class="bertgraph-page" title="bert-tiny · BertModel" '
    )


def test_an_interactive_page_is_an_iframe_titled_with_the_model() -> None:
    made: list[str] = []
    draw = renderer.DiagramRenderer(None, on_render=made.append)
    page = draw.html(tiny(format="html", depth=1))
    assert page.startswith('<iframe class="bertgraph-page" title="bert-tiny · BertModel" ')
    assert "\n" not in page
    assert made == ["bert-tiny · base · depth 1 · html · layers 1 as page"]


def test_a_png_has_a_stable_name_and_its_theme() -> None:
    draw = renderer.DiagramRenderer(None)
    request = tiny(depth=1, theme="dark")
    name, data = draw.png(request)
    assert name == f"bertgraph-{draw.key(request, 'png')}.png"
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    _, light = draw.png(tiny(depth=1, theme="light"))
    _, auto = draw.png(tiny(depth=1))
    assert auto == light != data  # print has no dark mode: auto is light
    _, deeper = draw.png(tiny(depth=2, theme="light"))
    two = DiagramRequest("bert-tiny", sizes=TWO, depth=2, theme="light")
    assert draw.png(replace(two, unfold=True))[1] != draw.png(two)[1]
    _, compared = draw.png(tiny(depth=1, theme="light", compare="masked-lm"))
    _, bare = draw.png(tiny(depth=1, theme="light", edge_labels="none"))
    assert len({light, deeper, compared, bare}) == 4


def _width(png: bytes) -> int:
    import struct

    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    return int(struct.unpack(">I", png[16:20])[0])


def test_a_png_is_drawn_at_print_resolution() -> None:
    from bertgraph.render import PNG_DPI, dot, graphviz_run

    request = tiny(depth=0, theme="light")
    _, data = renderer.DiagramRenderer(None).png(request)
    screen = graphviz_run.render(dot.generate_dot(renderer.graph_of(request.spec()), 0, True, "light", None), "png")
    assert _width(data) == pytest.approx(_width(screen) * PNG_DPI / 96, rel=0.05)
    figure = DiagramRequest("bert-tiny bert-tiny", figure="schematic", sizes=ONE)
    _, drawn = renderer.DiagramRenderer(None).png(figure)
    graphs = [renderer.graph_of(spec) for spec in figure.specs()]
    plain = graphviz_run.render(renderer.figure_source(graphs, figure), "png")
    assert _width(drawn) == pytest.approx(_width(plain) * PNG_DPI / 96, rel=0.05)


def test_the_tables_as_text() -> None:
    draw = renderer.DiagramRenderer(None)
    table = draw.text(tiny(format="table"))
    summary = draw.text(tiny(format="summary", depth=1))
    deeper = draw.text(tiny(format="summary", depth=3))
    two = DiagramRequest("bert-tiny", sizes=TWO, format="summary", depth=3)
    folded = draw.text(two)
    unfolded = draw.text(replace(two, unfold=True))
    # bert-tiny with one layer: embeddings 30522·128 + 512·128 + 2·128 + 2·128, one layer
    # 4·(128·128 + 128) + 2·128 + (128·512 + 512) + (512·128 + 128) + 2·128, pooler 128·128 + 128
    total = 30522 * 128 + 512 * 128 + 2 * 128 + 2 * 128
    total += 4 * (128 * 128 + 128) + 2 * 128 + (128 * 512 + 512) + (512 * 128 + 128) + 2 * 128
    total += 128 * 128 + 128
    for text in (table, summary):
        assert text.endswith("\n") and not text.endswith("\n\n")
        assert f"{total:,}" in text
    assert table != summary
    assert "word_embeddings" in table
    assert len(deeper.splitlines()) > len(summary.splitlines())
    assert "(1): BertLayer" in unfolded and "(0-1): 2 × BertLayer" in folded
    assert "attention: BertAttention" not in summary  # depth 1 stops at the embeddings, encoder and pooler


def test_the_table_is_every_parameter_and_the_summary_the_module_tree() -> None:
    from bertgraph.graph import stats
    from bertgraph.render import text

    two = DiagramRequest("bert-tiny", sizes=TWO, depth=3)
    graph = renderer.graph_of(two.spec())
    draw = renderer.DiagramRenderer(None)
    table = "\n".join(text.generate_params(stats.parameter_stats(graph))) + "\n"
    assert draw.text(replace(two, format="table")) == table
    for unfold in (False, True):
        summary = text.generate_summary(stats.summary(graph, depth=3, fold=not unfold))
        assert draw.text(replace(two, format="summary", unfold=unfold)) == "\n".join(summary) + "\n"


def test_a_table_traces_its_model_alone(fresh: Path) -> None:
    """A compared head is drawn by diagrams only (parse refuses it with a table): never traced for text."""
    traced: list[str] = []
    draw = renderer.DiagramRenderer(None, on_trace=traced.append)
    assert "word_embeddings" in draw.text(tiny(format="table", compare="masked-lm"))
    assert traced == ["bert-tiny (base)"]


def test_mermaid_text_and_its_notes() -> None:
    notes: list[str] = []
    draw = renderer.DiagramRenderer(None)
    light = draw.mermaid(tiny(depth=1, theme="light"), notes.append)
    dark = draw.mermaid(tiny(depth=1, theme="dark"), notes.append)
    auto = draw.mermaid(tiny(depth=1), None)
    assert light.startswith('---\ntitle: "bert-tiny · BertModel · 4,187,648 parameters"\n')
    assert '["1 layers · hidden' in light  # the caption's facts open the legend
    assert "flowchart" in light
    assert dark != light == auto
    assert draw.mermaid(tiny(depth=1, theme="light", compare="masked-lm")) != light
    assert draw.mermaid(tiny(depth=1, theme="light", edge_labels="none")) != light
    two = DiagramRequest("bert-tiny", sizes=TWO, depth=4, theme="light")
    assert draw.mermaid(replace(two, unfold=True)) != draw.mermaid(two)
    assert all(isinstance(note, str) for note in notes)


def test_a_mermaid_drawing_passes_its_notes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from bertgraph.render import mermaid

    # One layer has 61 edges at depth 4, 32 at depth 3, 12 at depth 2, and the links that put the legend under
    # the drawing (9, 9, 7): with a limit of 19, depth 2 is written.
    monkeypatch.setattr(mermaid, "MAX_EDGES", 19)
    graph = renderer.graph_of(tiny().spec())
    expected = mermaid.generate_mermaid(graph, 4, False, "light", None)
    assert expected.depth == 2 and len(expected.notes) == 1
    assert expected.notes[0].startswith("the Mermaid diagram at depth 4 unfolded would exceed Mermaid's limits")
    notes: list[str] = []
    drawn = renderer.DiagramRenderer(None).mermaid(tiny(depth=4, unfold=True, theme="light"), notes.append)
    assert notes == expected.notes
    assert drawn == expected.text
    renderer.DiagramRenderer(None).mermaid(tiny(depth=4, unfold=True, theme="light"))  # no one to tell: no error


# --- figures of several models ----------------------------------------------------------------------


def test_a_schematic_names_each_model_and_has_its_own_ids() -> None:
    request = DiagramRequest("bert-tiny, gpt2", figure="schematic", sizes=ONE, theme="light")
    made: list[str] = []
    draw = renderer.DiagramRenderer(None, on_render=made.append)
    fragment = draw.html(request)
    key = draw.key(request, "inline-svg")
    assert fragment.startswith(
        '<div class="bertgraph bertgraph-light"><svg role="img" aria-label="schematic of bert-tiny, gpt2"'
    )
    assert all(name.startswith(f"bg{key[:8]}-") for name in _ids(fragment))
    assert made == ["schematic of bert-tiny, gpt2 · svg as inline-svg"]
    graphs = [renderer.graph_of(spec) for spec in request.specs()]
    assert renderer.figure_source(graphs, request).startswith("digraph")
    assert "dpi=" in renderer.figure_source(graphs, request, 150)


def test_a_masks_figure_takes_its_length() -> None:
    graphs = [renderer.graph_of(spec) for spec in DiagramRequest("bert-tiny gpt2", figure="masks", sizes=ONE).specs()]
    short = renderer.figure_source(graphs, DiagramRequest("bert-tiny gpt2", figure="masks", seq_len=3))
    default = renderer.figure_source(graphs, DiagramRequest("bert-tiny gpt2", figure="masks"))
    from bertgraph.graph.masks import Example

    eight = renderer.figure_source(graphs, DiagramRequest("bert-tiny gpt2", figure="masks", seq_len=Example.seq_len))
    assert default == eight != short
    assert "gpt2" in short and "bert-tiny" in short
    drawn = renderer.DiagramRenderer(None).html(
        DiagramRequest("bert-tiny gpt2", figure="masks", sizes=ONE, seq_len=3, theme="dark")
    )
    assert drawn.startswith(
        '<div class="bertgraph bertgraph-dark"><svg role="img" aria-label="masks of bert-tiny, gpt2"'
    )


def test_a_figure_is_the_schematic_or_the_masks_it_names() -> None:
    from bertgraph.graph.masks import Example
    from bertgraph.render import masks, schematic

    schematic_request = DiagramRequest("bert-tiny, gpt2", figure="schematic", sizes=ONE)
    graphs = [renderer.graph_of(spec) for spec in schematic_request.specs()]
    for dpi in (None, 150):
        expected = "\n".join(schematic.generate_lines(graphs, dpi)) + "\n"
        assert renderer.figure_source(graphs, schematic_request, dpi) == expected
    masks_request = replace(schematic_request, figure="masks", seq_len=3)
    found = masks.masks_of(zip(["bert-tiny", "gpt2"], graphs), Example(3))
    for dpi in (None, 150):
        assert renderer.figure_source(graphs, masks_request, dpi) == masks.dot_source(found, dpi)


def test_a_masks_png_is_drawn_at_print_resolution() -> None:
    from bertgraph.render import PNG_DPI, graphviz_run

    figure = DiagramRequest("bert-tiny", figure="masks", sizes=ONE, seq_len=3)
    graphs = [renderer.graph_of(spec) for spec in figure.specs()]
    _, drawn = renderer.DiagramRenderer(None).png(figure)
    assert drawn == graphviz_run.render(renderer.figure_source(graphs, figure, PNG_DPI), "png")
    plain = graphviz_run.render(renderer.figure_source(graphs, figure), "png")
    assert _width(drawn) == pytest.approx(_width(plain) * PNG_DPI / 96, rel=0.05)


# --- a page drawn together ---------------------------------------------------------------------------


def test_a_page_is_drawn_ahead_in_its_order_and_served(tmp_path: Path) -> None:
    folder = tmp_path / "drawings"
    kept = tiny(depth=0, theme="light")
    renderer.DiagramRenderer(folder).html(kept)  # an earlier build kept this one
    made: list[str] = []
    draw = renderer.DiagramRenderer(folder, on_render=made.append)
    requests = [
        tiny(depth=1, theme="dark"),
        DiagramRequest("bert-tiny", figure="schematic", sizes=ONE, theme="light"),
        kept,
        tiny(depth=1, format="html"),
        tiny(depth=1, theme="dark"),
    ]
    draw.html_all(requests)
    assert made == [
        "bert-tiny · base · depth 1 · svg · layers 1 as inline-svg",
        "schematic of bert-tiny · svg as inline-svg",
        "bert-tiny · base · depth 1 · html · layers 1 as page",
    ]
    for request in requests:
        key = draw.key(request, renderer._html_output(request))
        assert (folder / f"{key}.html").read_text(encoding="utf-8") == draw.html(request)
    assert len(made) == 3  # served from what was drawn ahead
    alone = renderer.DiagramRenderer(None)
    assert [draw.html(request) for request in requests] == [alone.html(request) for request in requests]
    (folder / f"{draw.key(requests[0], 'inline-svg')}.html").write_text("changed", encoding="utf-8")
    assert draw.html(requests[0]) != "changed"  # what this renderer drew ahead comes first


def test_a_layout_that_fails_ahead_is_left_for_its_own_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    draw = renderer.DiagramRenderer(tmp_path / "drawings", on_render=made.append)
    page = tiny(depth=1, format="html")
    renderer.graph_of(page.spec())
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no dot
    draw.html_all([tiny(depth=1, theme="light"), page])  # both lay out with dot: raises nothing, keeps nothing
    assert made == []
    assert not (tmp_path / "drawings").exists()
    with pytest.raises(BertgraphError, match="Graphviz's dot program is not installed"):
        draw.html(tiny(depth=1, theme="light"))
    monkeypatch.undo()
    assert draw.html(page).startswith("<iframe")  # drawn at its turn
    assert made == ["bert-tiny · base · depth 1 · html · layers 1 as page"]


def test_a_drawing_that_fails_ahead_stops_none_of_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bertgraph.errors import RenderError
    from bertgraph.render import graphviz_run

    # The page lays out every depth: refused before its layouts start, at depth 3 (32 edges over 12).
    refused = tiny(depth=1, format="html")
    broken = tiny(depth=0, theme="light")  # its layout fails
    fine = tiny(depth=1, theme="light")
    graph = renderer.graph_of(fine.spec())
    broken_source = renderer._svg_source(graph, None, broken)
    layout = graphviz_run.render

    def render(source: str, fmt: str) -> bytes:
        if source == broken_source:
            raise RenderError("Graphviz failed: syntax error in line 1")
        return layout(source, fmt)

    monkeypatch.setattr(graphviz_run, "render", render)
    monkeypatch.setattr(graphviz_run, "MAX_EDGES", 12)
    made: list[str] = []
    draw = renderer.DiagramRenderer(tmp_path, on_render=made.append)
    draw.html_all([refused, broken, fine])  # started in this order, finished in it
    assert made == ["bert-tiny · base · depth 1 · svg · layers 1 as inline-svg"]
    assert [path.name for path in tmp_path.iterdir()] == [f"{draw.key(fine, 'inline-svg')}.html"]
    with pytest.raises(RenderError, match="the diagram has 32 edges"):
        draw.html(refused)
    with pytest.raises(RenderError, match="syntax error"):
        draw.html(broken)


def test_a_model_that_no_longer_resolves_stops_no_drawing_ahead(tmp_path: Path) -> None:
    # A local model parsed when its page was read, gone when the page is drawn: drawing ahead skips it
    # (html() reports it, where the builder can say which directive it was) and draws the rest.
    from bertgraph.errors import ModelReferenceError

    gone = DiagramRequest(str(tmp_path / "deleted-model"), depth=1)
    fine = tiny(depth=1, theme="dark")
    made: list[str] = []
    draw = renderer.DiagramRenderer(tmp_path / "drawings", on_render=made.append)
    draw.html_all([gone, fine, gone])
    assert made == ["bert-tiny · base · depth 1 · svg · layers 1 as inline-svg"]
    with pytest.raises(ModelReferenceError, match="deleted-model"):
        draw.html(gone)


@pytest.mark.parametrize("traced_first", ["base", "masked-lm"])
def test_a_page_drawn_ahead_starts_with_the_drawings_whose_graphs_are_at_hand(
    traced_first: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Their layouts run while the rest are traced; each drawing is still kept and logged in page order.
    # (Both ways round, so no other order, such as the keys', gives the same by chance.)
    at_hand = tiny(depth=1, head=traced_first)
    needs_trace = tiny(depth=1, head="masked-lm" if traced_first == "base" else "base")
    renderer.graph_of(at_hand.spec())
    renderer._GRAPHS.pop(renderer._memo_key(needs_trace.spec()), None)
    made: list[str] = []
    draw = renderer.DiagramRenderer(tmp_path, on_render=made.append)
    started: list[DiagramRequest] = []
    start = draw._start_html

    def record(request: DiagramRequest, pool: object) -> object:
        started.append(request)
        return start(request, pool)  # type: ignore[arg-type]

    monkeypatch.setattr(draw, "_start_html", record)
    draw.html_all([needs_trace, at_hand])
    assert started == [at_hand, needs_trace]
    assert [line.split(" · ")[1] for line in made] == [needs_trace.head, at_hand.head]


def test_a_diagram_asked_for_twice_or_drawn_ahead_already_is_laid_out_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from bertgraph.render import graphviz_run

    layouts: list[str] = []
    layout = graphviz_run.render

    def render(source: str, fmt: str) -> bytes:
        layouts.append(fmt)
        return layout(source, fmt)

    monkeypatch.setattr(graphviz_run, "render", render)
    made: list[str] = []
    draw = renderer.DiagramRenderer(None, on_render=made.append)
    once, other = tiny(depth=1, theme="light"), tiny(depth=0, theme="light")
    draw.html_all([once, other, once])
    assert layouts == ["svg", "svg"]
    assert made == [f"{request.describe()} as inline-svg" for request in (once, other)]
    draw.html_all([other, once])  # the next page of the same build
    assert layouts == ["svg", "svg"] and len(made) == 2
    assert draw.html(once) == renderer.DiagramRenderer(None).html(once)


def test_requests_that_need_no_trace_start_first(fresh: Path) -> None:
    draw = renderer.DiagramRenderer(None)
    traced_one = tiny(depth=1)
    renderer.graph_of(traced_one.spec())
    assert draw._traces_needed(traced_one) == 0
    assert draw._traces_needed(tiny(compare="masked-lm")) == 1
    assert draw._traces_needed(tiny(head="masked-lm", compare="multiple-choice")) == 2
    assert draw._traces_needed(DiagramRequest("bert-tiny gpt2", figure="masks", sizes=ONE)) == 1
    order: list[str] = []
    draw = renderer.DiagramRenderer(None, on_trace=order.append)
    draw.html_all([tiny(head="masked-lm", theme="light"), tiny(depth=0, theme="light")])
    assert order == ["bert-tiny (masked-lm)"]


def test_the_title_falls_back_to_the_request() -> None:
    graph = nx.DiGraph()
    assert renderer._title(graph, tiny()) == "bert-tiny · "
    assert renderer._label(graph, tiny(depth=3)) == "bert-tiny · , depth 3"
    assert renderer._html_output(tiny(format="html")) == "page"
    assert renderer._html_output(tiny(format="svg")) == "inline-svg"
    assert renderer._html_output(tiny(format="mermaid")) == "inline-svg"


@pytest.mark.parametrize(
    "request_",
    [
        tiny(depth=1, theme="light"),
        tiny(depth=2, theme="dark", compare="masked-lm", edge_labels="none"),
        DiagramRequest("bert-tiny", sizes=TWO, depth=3, unfold=True),
    ],
)
def test_a_drawing_made_on_its_own_equals_the_renderers(request_: DiagramRequest) -> None:
    """``_inline_svg`` (the reference of ``test_docs_renderer.py``) draws what ``html`` serves."""
    draw = renderer.DiagramRenderer(None)
    graph = renderer.graph_of(request_.spec())
    compare = renderer.graph_of(request_.spec(request_.compare)) if request_.compare else None
    key = draw.key(request_, "inline-svg")
    assert renderer._inline_svg(graph, compare, request_, key) == draw.html(request_)


def test_each_output_is_kept_under_its_own_key_and_suffix(tmp_path: Path) -> None:
    draw = renderer.DiagramRenderer(tmp_path)
    png = tiny(depth=1, theme="light")
    table = tiny(format="table")
    diagram = tiny(depth=1, format="mermaid")
    draw.png(png)
    draw.text(table)
    draw.mermaid(diagram)
    expected = [
        f"{draw.key(png, 'png')}.png",
        f"{draw.key(table, 'text')}.txt",
        f"{draw.key(diagram, 'mermaid')}.mmd",
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(expected)


def test_every_trace_a_drawing_needs_is_reported(fresh: Path) -> None:
    traced: list[str] = []
    draw = renderer.DiagramRenderer(None, on_trace=traced.append)
    draw.html(tiny(depth=1, theme="light", head="masked-lm", compare="multiple-choice"))
    assert traced == ["bert-tiny (masked-lm)", "bert-tiny (multiple-choice)"]
    draw.png(DiagramRequest("bert-tiny gpt2", figure="schematic", sizes=ONE))
    draw.html(DiagramRequest("bert-tiny", figure="masks", sizes=(("layers", 1), ("hidden", 64)), theme="light"))
    assert traced[2:] == ["bert-tiny (base)", "gpt2 (base)", "bert-tiny (base)"]


def test_with_the_cache_off_a_stored_graph_is_not_read(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tiny(head="masked-lm").spec()
    renderer.graph_of(spec)  # stored in the cache
    renderer._GRAPHS.clear()
    monkeypatch.setenv("BERTGRAPH_NO_CACHE", "1")
    traced: list[str] = []
    renderer.graph_of(spec, traced.append)
    assert traced == ["bert-tiny (masked-lm)"]
