"""No edge through a frame's title: dot's layout kept, each title moved along its band to a clear
stretch, or an edge taken round its end — read back from what Graphviz drew (``-Tjson``)."""

from __future__ import annotations

import itertools
import json
import subprocess

import pytest

from bertgraph.render import dot, graphviz_run, untangle
from bertgraph.render.diagram import build_diagram
from tests.graph_fixtures import bert_tiny
from tests.layout import lay_out, title_crossings

pytestmark = pytest.mark.dot


def crossings_dot_alone(source: str) -> list[tuple[str, str]]:
    """The edges through a title in dot's own drawing, before any is moved."""
    done = subprocess.run(["dot", "-Tdot"], input=source.encode(), capture_output=True, check=True)
    laid = untangle.framed(done.stdout.decode())
    drawn = subprocess.run(["neato", "-n2", "-Tjson"], input=laid.encode(), capture_output=True, check=True)
    return untangle.crossing_edges(json.loads(drawn.stdout))


@pytest.mark.parametrize(("head", "depth"), [("sequence-classification", 3), ("base", 3)])
def test_edges_that_ran_through_a_title_no_longer_do(head: str, depth: int, dot_binary: str) -> None:
    diagram = build_diagram(bert_tiny(head), depth)
    source = "\n".join(dot.generate_lines(diagram))
    assert crossings_dot_alone(source)  # dot runs edges through the frames' titles here
    assert title_crossings(lay_out(diagram)) == []
    # dot's layout stays: every node where dot put it (the drawing as a whole may move on the page)
    laid = json.loads(subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, check=True).stdout)
    where = {item["name"]: item["pos"] for item in laid["objects"] if "pos" in item}
    drawn = json.loads(graphviz_run.render(source, "json"))
    moves = {
        tuple(
            round(float(a) - float(b), 1)
            for a, b in zip(item["pos"].split(","), where[item["name"]].split(","), strict=True)
        )
        for item in drawn["objects"]
        if item.get("name") in where
    }
    assert len(moves) == 1, moves


def test_the_drawing_is_the_same_every_time(dot_binary: str) -> None:
    source = "\n".join(dot.generate_lines(build_diagram(bert_tiny("sequence-classification"), 3)))
    assert graphviz_run.render(source, "svg") == graphviz_run.render(source, "svg")


def test_a_route_goes_round_a_title_it_ran_through() -> None:
    title = untangle.Box(0, 4, 8, 6)
    route = untangle.reroute([(5, 10), (5, 7), (5, 3), (5, 0)], [title], [title])
    points = untangle.bezier([list(p) for p in route])
    assert not any(title.holds(x, y) for x, y in points)
    assert points[0] == (5, 10) and points[-1] == (5.0, 0.0)  # from the same node to the same node
    assert all(a[1] >= b[1] - 1e-9 for a, b in itertools.pairwise(points))  # never back up the page
