"""Grow a graph traced with two encoder layers to a model's full depth.

Every layer of a BERT encoder is built from the same config, so its ops, shapes and
wiring are the same; only the layer index in module paths and parameter names differs.
Tracing two layers shows both the first layer's wiring (from the embeddings) and the
wiring between consecutive layers (layer 1 reads layer 0). Copying layer 1 with indices
2 … L-1, and moving what read the last traced layer to the new last layer, gives the
graph a full trace gives — node for node, attribute for attribute — at the cost of two
layers. :func:`grow_layers` checks the result against the full model's parameters, and
tracing falls back to a full trace when anything does not match.
"""

from __future__ import annotations

import re
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g

TRACED_LAYERS = 2


class GrowError(Exception):
    """The two-layer graph cannot be grown into the full model (a full trace is needed)."""


def layer_container(graph: nx.DiGraph) -> str:
    """The module path of the encoder's layer list (``bert.encoder.layer``)."""
    for path, info in graph.graph.get(g.G_MODULES, {}).items():
        if info.get("type") == "ModuleList" and path.split(".")[-2:] == ["encoder", "layer"]:
            return path
    raise GrowError("no encoder layer list in the traced graph")


def _renamer(container: str, old: int, new: int) -> Any:
    pattern = re.compile(rf"^{re.escape(container)}\.{old}(?=[.:]|$)")

    def rename(text: str) -> str:
        return pattern.sub(f"{container}.{new}", text)

    return rename


def _layer_of(container: str) -> Any:
    pattern = re.compile(rf"^{re.escape(container)}\.(\d+)(?:[.:]|$)")

    def layer(module: str) -> int | None:
        match = pattern.match(module)
        return int(match.group(1)) if match else None

    return layer


def grow_layers(traced: nx.DiGraph, layers: int) -> nx.DiGraph:
    """``traced`` (two encoder layers) grown to ``layers`` layers, in canonical form."""
    if layers <= TRACED_LAYERS:
        return traced
    container = layer_container(traced)
    layer_of = _layer_of(container)
    order = g.ops_in_order(traced)
    index = {node: layer_of(traced.nodes[node].get(g.MODULE, "")) for node in order}
    template = [n for n in order if index[n] == 1]
    first_post = max(order.index(n) for n in template) + 1
    if not template or any(index[n] != 1 for n in order[order.index(template[0]) : first_post]):
        raise GrowError("the traced layers are not contiguous in execution order")
    before, after = order[: order.index(template[0])], order[first_post:]
    if any(index[n] is not None for n in after):
        raise GrowError("layer ops run after the last layer")

    grown = nx.DiGraph()
    grown.graph.update(traced.graph)
    sequence = list(before) + list(template)
    for node in sequence:
        grown.add_node(node, **traced.nodes[node])
    for source, target, data in traced.edges(data=True):
        if source in grown and target in grown:
            grown.add_edge(source, target, **data)

    for layer in range(2, layers):
        rename = _renamer(container, 1, layer)
        from_previous = _renamer(container, 0, layer - 1)
        copies = {}
        for node in template:
            data = dict(traced.nodes[node])
            data[g.MODULE] = rename(data[g.MODULE])
            data[g.PARAM_NAMES] = [rename(name) for name in data.get(g.PARAM_NAMES, [])]
            if g.SHARED_PARAMS in data:
                data[g.SHARED_PARAMS] = [rename(name) for name in data[g.SHARED_PARAMS]]
            copies[node] = rename(node)
            grown.add_node(copies[node], **data)
            sequence.append(copies[node])
        for node in template:
            for source in traced.predecessors(node):
                edge = traced.edges[source, node]
                if index[source] == 1:
                    grown.add_edge(copies[source], copies[node], **edge)
                elif index[source] == 0:
                    grown.add_edge(from_previous(source), copies[node], **edge)
                else:
                    grown.add_edge(source, copies[node], **edge)

    last = _renamer(container, 1, layers - 1)
    for node in after:
        grown.add_node(node, **traced.nodes[node])
        sequence.append(node)
    for source, target, data in traced.edges(data=True):
        if target in after:
            grown.add_edge(last(source) if index.get(source) == 1 else source, target, **data)
    for position, node in enumerate(sequence):
        grown.nodes[node][g.ORDER] = position
    return g.ordered_copy(grown)


def check_parameters(graph: nx.DiGraph, numel: dict[str, int]) -> None:
    """Every parameter of the full model is read, counted once, with its own size."""
    counted: list[str] = []
    for node, data in graph.nodes(data=True):
        names = data.get(g.PARAM_NAMES, [])
        unknown = [name for name in names + data.get(g.SHARED_PARAMS, []) if name not in numel]
        if unknown:
            raise GrowError(f"{node} reads parameters the model does not have: {unknown[:3]}")
        if sum(numel[name] for name in names) != int(data.get(g.PARAMS, 0)):
            raise GrowError(f"{node} counts {data.get(g.PARAMS)} parameters, its names say otherwise")
        counted += names
    if sorted(counted) != sorted(numel):
        raise GrowError("the grown graph does not read every parameter exactly once")
