"""The facts of a graph as plain data for tables: per stack, what attends how, with which positions."""

from __future__ import annotations

from typing import Any

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.facts.attention import attention_operators
from bertgraph.graph.facts.walk import stack_key


def architecture(graph: nx.DiGraph) -> dict[str, Any]:
    """``{"structure", "stacks": [{path, kind, attention, padding_masks, q_heads, kv_heads, position}],
    "shared": {module: calls}}`` from what the facts pass stored; no stacks when it found nothing."""
    kinds = graph.graph.get(g.G_ATTENTION, {})
    positions = graph.graph.get(g.G_POSITION, {})
    stack_kinds = graph.graph.get(g.G_STACKS, {})
    masks: dict[str, set[str]] = {}
    heads: dict[str, set[tuple[int, int]]] = {}
    for node in attention_operators(graph):
        data = graph.nodes[node]
        stack = stack_key(graph, str(data.get(g.MODULE, "")))
        if isinstance(data.get(g.PADDING_MASK), str):
            masks.setdefault(stack, set()).update(data[g.PADDING_MASK].split(", "))
        if isinstance(data.get(g.Q_HEADS), int) and isinstance(data.get(g.KV_HEADS), int):
            heads.setdefault(stack, set()).add((data[g.Q_HEADS], data[g.KV_HEADS]))
    stacks = []
    for path in list(stack_kinds) + [p for p in kinds if p not in stack_kinds]:
        if path not in kinds and not positions.get(path):
            continue
        found = sorted(heads.get(path, set()))
        stacks.append(
            {
                "path": path,
                "kind": stack_kinds.get(path, ""),
                "attention": dict(kinds.get(path, {})),
                "padding_masks": sorted(masks.get(path, set())),
                "q_heads": sorted({q for q, _ in found}),
                "kv_heads": sorted({kv for _, kv in found}),
                "position": list(positions.get(path, [])),
            }
        )
    return {
        "structure": graph.graph.get(g.G_STRUCTURE, ""),
        "stacks": stacks,
        "shared": dict(graph.graph.get(g.G_SHARED, {})),
    }


def stack_line(stack: dict[str, Any]) -> str:
    """One stack in words: ``encoder.layer (encoder): 12 × bidirectional · padding mask from
    attention_mask · 12 heads · positions: absolute``."""
    attention = ", ".join(f"{count} × {label}" for label, count in stack["attention"].items())
    parts = [f"{stack['path'] or 'model'}" + (f" ({stack['kind']})" if stack["kind"] else "") + f": {attention or '—'}"]
    if stack["padding_masks"]:
        parts.append("padding mask from " + ", ".join(stack["padding_masks"]))
    q, kv = stack["q_heads"], stack["kv_heads"]
    if q:
        heads = "/".join(map(str, q)) + " heads"
        if kv != q:
            heads += ", " + "/".join(map(str, kv)) + " key/value heads (grouped-query)"
        parts.append(heads)
    parts.append("positions: " + (", ".join(stack["position"]) or "none found"))
    return " · ".join(parts)


def shared_lines(shared: dict[str, int]) -> list[str]:
    """``encoder.….albert_layers.0 runs 12 times (one set of weights)`` per shared module."""
    return [f"{path} runs {calls} times (one set of weights)" for path, calls in shared.items()]
