"""Graph files: node-link JSON and GraphML, both readable by plain networkx.

``networkx.node_link_graph(data, edges="edges")`` reads the JSON back; GraphML has no
lists or mappings, so those attributes are JSON text there and :func:`read_graphml`
decodes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import networkx as nx

from bertgraph.files import write_atomic
from bertgraph.graph.schema import JSON_ATTRS, ordered_copy
from bertgraph.render.escape import json_text, xml_text

# --- node-link JSON --------------------------------------------------------------------


def to_node_link(graph: nx.DiGraph) -> dict[str, Any]:
    """Plain data for ``json.dumps``, nodes and edges in execution order.

    ``networkx.node_link_graph(data, edges="edges")`` reads it back.
    """
    return nx.node_link_data(ordered_copy(graph), edges="edges")


def from_node_link(data: dict[str, Any]) -> nx.DiGraph:
    graph = nx.node_link_graph(data, directed=True, multigraph=False, edges="edges")
    return graph


def generate_json(graph: nx.DiGraph) -> Iterable[str]:
    """Node-link JSON text, keys sorted so that the same graph gives the same bytes."""
    yield json_text(json.dumps(to_node_link(graph), sort_keys=True, indent=1, ensure_ascii=False))
    yield "\n"


def write_json(graph: nx.DiGraph, path: str | Path) -> None:
    write_atomic(path, "".join(generate_json(graph)))


def read_json(path: str | Path) -> nx.DiGraph:
    return from_node_link(json.loads(Path(path).read_text(encoding="utf-8")))


# --- GraphML -----------------------------------------------------------------------------


def _encode(attrs: dict[str, Any]) -> dict[str, Any]:
    encoded = {}
    for key, value in attrs.items():
        if value is None:
            continue
        if isinstance(value, (list, dict, tuple)):
            encoded[key] = xml_text(json.dumps(value, sort_keys=True, ensure_ascii=False))
        elif isinstance(value, str):
            encoded[key] = xml_text(value)
        else:
            encoded[key] = value
    return encoded


def _decode(attrs: dict[str, Any]) -> None:
    for key in JSON_ATTRS & attrs.keys():
        if isinstance(attrs[key], str):
            attrs[key] = json.loads(attrs[key])


def graphml_ready(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy in execution order whose list and mapping attributes are JSON text, as GraphML needs.

    Characters XML 1.0 cannot hold (control characters in an ONNX node name) become
    U+FFFD in ids and values (:func:`~bertgraph.render.escape.xml_text`), so the file
    stays XML that any reader parses; everything else is kept exactly.
    """
    ordered = ordered_copy(graph)
    ready = nx.DiGraph()
    ready.graph.update(_encode(ordered.graph))
    ids = _xml_ids(ordered)
    for node, data in ordered.nodes(data=True):
        ready.add_node(ids[node], **_encode(data))
    for source, target, data in ordered.edges(data=True):
        ready.add_edge(ids[source], ids[target], **_encode(data))
    return ready


def _xml_ids(graph: nx.DiGraph) -> dict[Any, str]:
    """Node ids as XML text, kept distinct when two differ only in what XML cannot hold."""
    ids: dict[Any, str] = {}
    taken: set[str] = set()
    for node in graph.nodes:
        base = candidate = xml_text(str(node))
        number = 2
        while candidate in taken:
            candidate, number = f"{base}~{number}", number + 1
        taken.add(candidate)
        ids[node] = candidate
    return ids


def generate_graphml(graph: nx.DiGraph) -> Iterable[str]:
    yield from nx.generate_graphml(graphml_ready(graph))


def write_graphml(graph: nx.DiGraph, path: str | Path) -> None:
    write_atomic(path, graph_file_text(graph, "graphml"))


def read_graphml(path: str | Path) -> nx.DiGraph:
    """Read a GraphML file written by :func:`write_graphml`, lists and mappings restored."""
    graph = nx.read_graphml(str(path))
    for key in ("node_default", "edge_default"):  # added by networkx's reader, not ours
        if graph.graph.get(key) == {}:
            del graph.graph[key]
    _decode(graph.graph)
    for _, data in graph.nodes(data=True):
        _decode(data)
    for _, _, data in graph.edges(data=True):
        _decode(data)
    return graph


def graph_file_text(graph: nx.DiGraph, fmt: str) -> str:
    """The whole text of a graph file, ``fmt`` ``json`` (node-link) or ``graphml``."""
    if fmt == "json":
        return "".join(generate_json(graph))
    return "\n".join(generate_graphml(graph)) + "\n"
