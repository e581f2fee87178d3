"""What kind of model a graph is, read off its ops: attention, positions, shared layers.

Each fact is a pure function of the operator graph (:mod:`.attention`, :mod:`.position`,
:mod:`.sharing`); :func:`annotate` runs them all once, right after tracing, so the graph
cache stores the result and renderers read plain attributes (names in
:mod:`bertgraph.graph.schema`). Nothing here reads the config or a class name.
"""

from __future__ import annotations

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.facts.attention import annotate_attention
from bertgraph.graph.facts.position import annotate_position
from bertgraph.graph.facts.sharing import annotate_sharing

__all__ = ["annotate", "annotate_attention", "annotate_position", "annotate_sharing"]


def annotate(graph: nx.DiGraph) -> nx.DiGraph:
    """Add every architecture fact to ``graph`` (in place) and return it.

    The module table is replaced by a copy first: ``graph.copy()`` shares it, and a fact
    written on an annotated copy must not appear on the graph it was copied from.
    """
    if g.G_MODULES in graph.graph:
        graph.graph[g.G_MODULES] = {path: dict(info) for path, info in graph.graph[g.G_MODULES].items()}
    annotate_attention(graph)
    annotate_position(graph)
    annotate_sharing(graph)
    return graph
