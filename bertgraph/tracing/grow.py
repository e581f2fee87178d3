"""Grow a graph traced with a few layers per stack to a model's full depth.

The layers of a stack are built from one config, so layers of the same kind run the
same ops on the same shapes; only the layer index in module paths and parameter names
differs. So tracing exports each stack with as few layers as show every kind of layer
and every way layers are wired (:func:`traced_layers`), and :func:`grow_stacks` adds the
missing layers as copies: layer ``k`` copies the last traced layer of its kind, what
that template read from the layer before it is read from layer ``k - 1``, what it read
from a special leading layer (T5's block 0, which computes the position bias every
block reads) is read from that layer itself, and what read the last traced layer reads
the real last layer. A stack whose one layer module is called once per layer (ALBERT)
grows by calls: every copy keeps the module path, the call index (``call``) tells them
apart. The grown graph is canonicalised, so node ids and order are exactly a full
trace's; :func:`check_parameters` checks it against the full model, and tracing falls
back to a full trace when anything does not match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g

TRACED_LAYERS = 2  # the fewest a uniform stack needs: the first layer and one fed by another


class GrowError(Exception):
    """The traced graph cannot be grown into the full model (a full trace is needed)."""


@dataclass(frozen=True)
class StackPlan:
    """How one stack is traced and grown.

    Attributes:
        container: full module path of the layer list (``bert.encoder.layer``).
        layers: its layer count in the full model.
        traced: its layer count in the traced model.
        special: leading layers unlike the rest (kept as traced, read by absolute index).
        period: layers after the special ones repeat with this period.
        shared: one layer module called once per layer; layers are calls.
        kinds: each layer's kind in the full model (``layer_types``), when the config has them.
    """

    container: str
    layers: int
    traced: int
    special: int = 0
    period: int = 1
    shared: bool = False
    kinds: tuple[str, ...] | None = None


def traced_layers(layers: int, special: int = 0, period: int = 1) -> int:
    """How many layers to trace so that the full stack can be grown from them.

    The special layers, then one layer of each kind that follows a layer of the
    repeating part (so its wiring to the layer before is the general one), and as many
    more as make the last traced layer the same kind as the last real one.

    >>> traced_layers(12), traced_layers(2), traced_layers(6, special=1), traced_layers(22, 1, 3)
    (2, 2, 3, 7)
    """
    least = special + period + 1
    if layers <= least:
        return layers
    count = least
    while (count - 1 - special) % period != (layers - 1 - special) % period:
        count += 1
    return min(count, layers)


def layer_pattern(kinds: Sequence[Hashable], special: int = 0, period: int = 1) -> tuple[int, int] | None:
    """The leading special layers and the period after which ``kinds`` (one per layer) repeat.

    The given ``special`` and ``period`` (a family record's) when the kinds keep them; else the
    pair with the fewest :func:`traced_layers` (a hybrid stack's linear-attention layers with a full
    one every sixth, after two dense feed-forward layers); None when no pair traces fewer layers
    than the stack has (then every layer is traced).

    >>> layer_pattern("aab" * 4), layer_pattern("dd" + "llf" * 5, 0, 1), layer_pattern("abcd")
    ((0, 3), (2, 3), None)
    """
    layers = len(kinds)

    def keeps(first: int, step: int) -> bool:
        return all(kinds[index] == kinds[index - step] for index in range(first + step, layers))

    if keeps(special, period):
        return special, period
    best: tuple[int, int, int] | None = None
    for step in range(1, layers // 2 + 1):
        for first in range(special, layers - 2 * step):
            count = traced_layers(layers, first, step)
            if best is not None and count >= best[0]:
                break  # more leading layers only trace more
            if keeps(first, step):
                best = (count, first, step)
                break
    return (best[1], best[2]) if best is not None and best[0] < layers else None


def grow_stacks(traced: nx.DiGraph, plans: list[StackPlan]) -> nx.DiGraph:
    """``traced`` with every stack grown to its full depth, in canonical form."""
    graph = traced
    for plan in plans:
        if plan.layers > plan.traced:
            graph = _grow_stack(graph, plan)
    return g.canonicalize(graph)


def _position(plan: StackPlan) -> Callable[[dict[str, Any]], int | None]:
    """Node attributes → the layer (or, for a shared layer, the call) the node belongs to."""
    pattern = re.compile(rf"^{re.escape(plan.container)}\.(\d+)(?:\.|$)")

    def position(data: dict[str, Any]) -> int | None:
        match = pattern.match(data.get(g.MODULE, ""))
        if match is None or data.get(g.KIND) != g.OPERATOR:
            return None
        if plan.shared:
            if match.group(1) != "0":
                raise GrowError(f"{plan.container} has more than one shared layer")
            return int(data.get(g.CALL, 0))
        return int(match.group(1))

    return position


def _template(plan: StackPlan, layer: int) -> int:
    """The traced layer that layer ``layer`` copies: the last traced one of its kind."""
    template = plan.traced - 1
    while (template - plan.special) % plan.period != (layer - plan.special) % plan.period:
        template -= 1
    if template <= plan.special:
        raise GrowError(f"too few traced layers in {plan.container} to grow layer {layer}")
    return template


def _grow_stack(traced: nx.DiGraph, plan: StackPlan) -> nx.DiGraph:
    position = _position(plan)
    order = g.ops_in_order(traced)
    layer_of = {node: position(traced.nodes[node]) for node in order}
    inside = [index for index, node in enumerate(order) if layer_of[node] is not None]
    if not inside:
        raise GrowError(f"no ops in {plan.container}")
    first, last = inside[0], inside[-1]
    members: dict[int, list[str]] = {}
    for node in order[first : last + 1]:
        layer = layer_of[node]
        if layer is None or (layer in members and layer != list(members)[-1]):
            raise GrowError(f"the layers of {plan.container} are not contiguous in execution order")
        members.setdefault(layer, []).append(node)
    if list(members) != list(range(plan.traced)):
        raise GrowError(f"{plan.container} was traced with layers {list(members)}, not 0-{plan.traced - 1}")
    before, after = order[:first], order[last + 1 :]
    index_in_layer = {node: index for nodes in members.values() for index, node in enumerate(nodes)}

    grown = nx.DiGraph()
    grown.graph.update(traced.graph)
    sequence = before + order[first : last + 1]
    for node in sequence:
        grown.add_node(node, **traced.nodes[node])
    for source, target, data in traced.edges(data=True):
        if source in grown and target in grown:
            grown.add_edge(source, target, **data)
    node_at: dict[tuple[int, int], str] = {
        (layer, index): node for layer, nodes in members.items() for index, node in enumerate(nodes)
    }

    def source_in(layer: int, template: int, source: str) -> str:
        """Where layer ``layer`` reads what its template read from ``source``."""
        from_layer = layer_of.get(source)
        if from_layer is None:
            if source not in grown:
                raise GrowError(f"{source} is read by {plan.container} but runs after it")
            return source
        if from_layer < plan.special:
            return source  # a special layer's result, read by every later layer
        wanted = (layer - (template - from_layer), index_in_layer[source])
        if wanted not in node_at:
            raise GrowError(f"layers of one kind in {plan.container} differ")
        return node_at[wanted]

    for layer in range(plan.traced, plan.layers):
        template = _template(plan, layer)
        rename = _renamer(plan.container, template, layer)
        for index, node in enumerate(members[template]):
            data = dict(traced.nodes[node])
            if plan.shared:
                data[g.CALL] = layer
            else:
                data[g.MODULE] = rename(data[g.MODULE])
                data[g.PARAM_NAMES] = [rename(name) for name in data.get(g.PARAM_NAMES, [])]
                if g.SHARED_PARAMS in data:
                    data[g.SHARED_PARAMS] = [rename(name) for name in data[g.SHARED_PARAMS]]
            copy = f"{node}#{layer}"
            grown.add_node(copy, **data)
            node_at[layer, index] = copy
            sequence.append(copy)
        for node in members[template]:
            target = node_at[layer, index_in_layer[node]]
            for source in traced.predecessors(node):
                grown.add_edge(source_in(layer, template, source), target, **traced.edges[source, node])

    shift = plan.layers - plan.traced
    for node in after:
        grown.add_node(node, **traced.nodes[node])
        sequence.append(node)
    after_set = set(after)
    for source, target, data in traced.edges(data=True):
        if target not in after_set:
            continue
        from_layer = layer_of.get(source)
        if from_layer is not None and from_layer >= plan.special:
            source = node_at[from_layer + shift, index_in_layer[source]]
        grown.add_edge(source, target, **data)
    for number, node in enumerate(sequence):
        grown.nodes[node][g.ORDER] = number
    return grown


def _renamer(container: str, old: int, new: int) -> Callable[[str], str]:
    pattern = re.compile(rf"^{re.escape(container)}\.{old}(?=[.:]|$)")

    def rename(text: str) -> str:
        return pattern.sub(f"{container}.{new}", text)

    return rename


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
