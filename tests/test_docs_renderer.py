"""A docs build's drawings share their views: each computed once per process, outputs unchanged."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from bertgraph.docs import renderer
from bertgraph.docs.request import DiagramRequest
from bertgraph.errors import RenderError
from bertgraph.graph import io as graph_io
from bertgraph.graph import views


def _json(graph: nx.DiGraph) -> str:
    return "".join(graph_io.generate_json(graph))


def test_kept_views_are_computed_once_and_handed_out_as_copies() -> None:
    graph = renderer.graph_of(DiagramRequest("bert-tiny", head="sequence-classification").spec())
    kept = views.KeptViews()
    kept.add(graph)
    computed: list[int] = []

    def compute() -> nx.DiGraph:
        computed.append(1)
        return views.view(graph, 2)  # outside active(): computed afresh

    assert kept.get(graph, ("view", 2, True), compute) is kept.get(graph, ("view", 2, True), compute)
    assert len(computed) == 1
    other = nx.DiGraph(graph)  # equal, but not the graph that was added: never kept
    kept.get(other, ("view", 2, True), compute)
    kept.get(other, ("view", 2, True), compute)
    assert len(computed) == 3
    with kept.active():
        first = views.view(graph, 2)
        first.remove_nodes_from(list(first.nodes))  # a caller changing its copy
        second = views.view(graph, 2)
        assert views.sibling_content(graph) == views.sibling_content(graph)
    assert _json(second) == _json(views.view(graph, 2)) != _json(first)


REQUESTS = [DiagramRequest("bert-tiny", head="sequence-classification", depth=depth) for depth in range(5)] + [
    DiagramRequest("bert-tiny", head="sequence-classification", depth=2, theme="dark"),
    DiagramRequest("bert-tiny", head="sequence-classification", depth=1, compare="base"),
    DiagramRequest("bert-tiny", head="sequence-classification", depth=2, format="html"),
]


def test_drawings_through_kept_views_equal_fresh_ones() -> None:
    requests = REQUESTS
    draw = renderer.DiagramRenderer(None)  # no drawings folder: every request is drawn
    for request in requests:
        drawn = draw.html(request)
        graph = renderer.graph_of(request.spec())
        compare = renderer.graph_of(request.spec(request.compare)) if request.compare else None
        if request.format == "html":
            from bertgraph.render import embed
            from bertgraph.render.html import generate_html

            page = generate_html(graph, request.depth, True, request.theme, compare)
            fresh = embed.iframe(page, renderer._title(graph, request))
        else:
            fresh = renderer._inline_svg(graph, compare, request, draw.key(request, "inline-svg"))
        assert drawn == fresh, request
    kept = renderer._VIEWS.get(graph, ("view", 2, True), lambda: None)
    assert kept is not None  # the drawings above went through the kept views


@pytest.mark.slow
def test_what_a_trace_leaves_alive_is_set_aside_for_later_collections_and_the_exit(tmp_path: Path) -> None:
    """After a trace, torch's objects are frozen: the next trace, the builder and the exit skip them."""
    probe = (
        "import atexit, gc\n"
        # Registered first, so it runs after every handler registered later (atexit is last in, first out).
        "atexit.register(lambda: print('at exit', gc.get_freeze_count() > after))\n"
        "from bertgraph.docs import renderer\n"
        "from bertgraph.docs.request import DiagramRequest\n"
        "renderer.graph_of(DiagramRequest('bert-tiny', head='base').spec())\n"
        "after = gc.get_freeze_count()\n"
        "print('after the trace', after > 100_000, gc.isenabled())\n"
        "runs = []\n"
        "gc.callbacks.append(lambda phase, info: runs.append(phase) if phase == 'start' else None)\n"
        "renderer.graph_of(DiagramRequest('bert-tiny', head='masked-lm').spec())\n"
        "print('next trace collects', runs.count('start'))\n"
        "keep = [[] for _ in range(1000)]\n"  # made after the last trace: frozen at exit too
    )
    env = dict(os.environ, BERTGRAPH_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300, check=True
    )
    lines = done.stdout.strip().splitlines()
    assert lines == ["after the trace True True", "next trace collects 1", "at exit True"], done.stdout + done.stderr


def test_a_page_drawn_together_equals_its_drawings_made_one_by_one() -> None:
    """html_all lays the page out side by side; each piece is then served, byte for byte the one html() draws."""
    requests = [*REQUESTS, DiagramRequest("bert-tiny", head="base", depth=2), REQUESTS[0]]  # a new trace; a repeat
    drawn: list[str] = []
    together = renderer.DiagramRenderer(None, on_render=drawn.append)
    together.html_all(requests)
    assert len(drawn) == len(set(requests))  # each drawing once, the repeat too
    assert [line.split(" as ")[0] for line in drawn] == [r.describe() for r in dict.fromkeys(requests)]  # page order
    alone = renderer.DiagramRenderer(None)
    for request in requests:
        assert together.html(request) == alone.html(request), request
    assert len(drawn) == len(set(requests))  # served, not drawn again


def test_a_layout_that_fails_is_left_for_its_directive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Graphviz nothing is drawn ahead and nothing raised; the directive's own drawing gets the error."""
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no dot
    drawn: list[str] = []
    draw = renderer.DiagramRenderer(tmp_path / "drawings", on_render=drawn.append)
    draw.html_all(REQUESTS)
    assert drawn == []
    assert not (tmp_path / "drawings").exists()
    with pytest.raises(RenderError, match="Graphviz's dot program is not installed"):
        draw.html(REQUESTS[0])


def test_docs_store_in_the_cache_what_the_command_line_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A docs build fills the same cache entries the command line reads: costed, with the facts read."""
    from bertgraph import api, cache
    from bertgraph.graph import schema as g

    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(renderer, "_GRAPHS", {})  # this process's memo: the entry must be written here
    spec = DiagramRequest("bert-tiny", head="multiple-choice").spec()
    renderer.graph_of(spec)
    stored = cache.load(spec)
    assert stored is not None
    expected = api.annotated_trace(spec)
    assert "".join(graph_io.generate_json(stored)) == "".join(graph_io.generate_json(expected))
    assert stored.graph[g.G_ATTENTION]
    assert all(g.PARAM_BYTES in data for _, data in stored.nodes(data=True) if data[g.KIND] == g.OPERATOR)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"format": "mermaid"}, "figure schematic is drawn as svg; drop format 'mermaid'"),
        ({"head": "sequence-classification"}, "figure schematic draws each model's base graph; drop the head option"),
        ({"depth": 3}, "drop the depth option"),
        ({"model": "bert-tiny, bert-huge-uncased"}, "unknown model 'bert-huge-uncased'"),
    ],
)
def test_a_figure_of_several_models_refuses_what_it_cannot_draw(options: dict[str, object], message: str) -> None:
    from bertgraph.docs.request import parse
    from bertgraph.errors import BertgraphError

    with pytest.raises(BertgraphError, match=re.escape(message)):
        parse({"model": "bert-tiny gpt2", "figure": "schematic", **options})


def test_a_figure_takes_a_sites_default_format_for_diagrams_as_svg() -> None:
    from bertgraph.docs.request import parse

    request = parse({"model": "bert-tiny,gpt2", "figure": "masks", "seq-len": 5}, {"format": "mermaid"})
    assert (request.format, request.names(), request.seq_len) == ("svg", ["bert-tiny", "gpt2"], 5)
    assert request.describe() == "masks of bert-tiny, gpt2 · svg"
