"""What Graphviz laid out for a diagram (``dot -Tjson``), and the structural rules read off it.

The rules are checked on the layout, not on the DOT text: an edge drawn upward is found by the
coordinates Graphviz gave its ends, whatever attribute (``constraint=false``, a rank hint)
caused it. The benchmark that counts broken drawings (``benchmarks/drawings.py``) uses the same
functions as the tests.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field

import networkx as nx

from bertgraph.graph import stats
from bertgraph.render import dot
from bertgraph.render.diagram import Diagram


@dataclass(frozen=True)
class Box:
    """A rectangle in Graphviz points, y growing upward (Graphviz's own convention)."""

    left: float
    bottom: float
    right: float
    top: float


@dataclass(frozen=True)
class Layout:
    """Node centres and cluster boxes by the diagram's ids; edges as (source, target, style) with their labels."""

    centres: dict[str, tuple[float, float]]
    clusters: dict[str, Box]
    edges: list[tuple[str, str, str]]
    labels: dict[tuple[str, str], str] = field(default_factory=dict)  # the text Graphviz set on each edge


def lay_out(diagram: Diagram, theme: str = "light") -> Layout:
    """Run the real ``dot -Tjson`` on the diagram's DOT source and read the positions back."""
    ids: dict[str, str] = {}
    source = "\n".join(dot.generate_lines(diagram, theme, ids=ids))
    done = subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, check=True)
    data = json.loads(done.stdout)
    by_dot = {dot_name: name for name, dot_name in ids.items()}
    objects = data.get("objects", [])
    centres: dict[str, tuple[float, float]] = {}
    clusters: dict[str, Box] = {}
    names: dict[int, str] = {}
    for item in objects:
        name = item.get("name", "")
        if "pos" in item:
            x, y = (float(v) for v in item["pos"].split(","))
            key = by_dot.get(name, name)
            centres[key] = (x, y)
            names[item["_gvid"]] = key
        elif "bb" in item and name.startswith("cluster_"):
            left, bottom, right, top = (float(v) for v in item["bb"].split(","))
            cluster = by_dot.get(name[len("cluster_") :], name)
            clusters[cluster.removeprefix("cluster ")] = Box(left, bottom, right, top)
    style = {(e.source, e.target): e.style for e in diagram.edges}
    edges, labels = [], {}
    for edge in data.get("edges", []):
        tail, head = names[edge["tail"]], names[edge["head"]]
        if (tail, head) in style:  # not the invisible edges that only order nodes
            edges.append((tail, head, style[tail, head]))
            labels[tail, head] = str(edge.get("label") or edge.get("xlabel") or "").strip()
    return Layout(centres, clusters, edges, labels)


def cycles(diagram: Diagram) -> list[list[str]]:
    """The diagram's cycles as strongly connected pieces of more than one node (and self-loops)."""
    drawn = nx.DiGraph((e.source, e.target) for e in diagram.edges)
    found = [sorted(piece) for piece in nx.strongly_connected_components(drawn) if len(piece) > 1]
    found += [[a] for a, b in drawn.edges if a == b]
    return sorted(found)


def upward_edges(layout: Layout) -> list[tuple[str, str, str]]:
    """Edges whose head is not strictly below its tail in the laid-out drawing."""
    return [(a, b, s) for a, b, s in layout.edges if layout.centres[a][1] <= layout.centres[b][1]]


_RANGE = re.compile(r"\.(\d+)-(\d+)(?:/(\d+))?(?=$|[.:])")


def summary_folds(graph: nx.DiGraph, depth: int) -> set[str]:
    """The folded sibling ranges ``summary`` shows down to display ``depth``: ``encoder.block.1-5``.

    Only of modules the trace runs: one that never runs (``not run`` in ``summary``) is not drawn.
    """
    folds = set()
    for row in stats.summary_rows(graph, depth=depth):
        if row.get("repeat", 1) > 1 and not row["in_fold"] and row.get("runs", True):
            container, first = row["path"].rsplit(".", 1)
            period = int(row.get("period", 1))
            last = int(first) + (int(row["repeat"]) - 1) * period
            folds.add(f"{container}.{first}-{last}" + (f"/{period}" if period > 1 else ""))
    return folds


def drawn_folds(diagram: Diagram) -> set[str]:
    """The folded ranges a diagram draws, read off its node and cluster ids."""
    folds = set()
    for name in [n.id for n in diagram.nodes] + [c.id for c in diagram.clusters]:
        for match in _RANGE.finditer(name):
            folds.add(name[: match.end()])
    return folds


def fold_mismatches(graph: nx.DiGraph, diagram: Diagram, depth: int) -> set[str]:
    """Folds only one of ``summary`` and the diagram makes (both empty: they agree)."""
    return summary_folds(graph, depth) ^ drawn_folds(diagram)
