"""The facts a families schematic draws, read off a traced graph: one column per stack.

Each column has the layer drawn once: its steps (norms, attention, cross-attention, FFN) in
the order the first layer's ops run, the attention pattern over its layers, and the caption
facts. Only what a family is used for comes from its record (through ``architecture_kind``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from bertgraph.graph import roles, stats
from bertgraph.graph import schema as g
from bertgraph.graph.kinds import architecture_kind

ACTIVATIONS = {"gelu": "GELU", "relu": "ReLU", "silu": "SiLU", "tanh": "GELU (tanh)", "sigmoid": "gated"}


@dataclass(frozen=True)
class Step:
    """One box of the layer: ``role`` is norm, attention, cross-attention or feed-forward."""

    role: str
    text: str


@dataclass
class Column:
    """One stack as the schematic draws it."""

    kind: str  # encoder or decoder
    layers: int
    steps: list[Step] = field(default_factory=list)
    pattern: list[str] = field(default_factory=list)  # attention label per layer, one cycle of it
    shared: bool = False  # one layer's weights run every time (ALBERT)
    final_norm: bool = False
    caption: list[str] = field(default_factory=list)


def _layer_ops(graph: nx.DiGraph, layer: str) -> list[dict[str, Any]]:
    ops = [d for _, d in graph.nodes(data=True) if d.get(g.KIND) == g.OPERATOR]
    mine = [d for d in ops if str(d.get(g.MODULE, "")).startswith(layer + ".") and not d.get(g.CALL)]
    return sorted(mine, key=lambda d: d.get(g.ORDER, 0))


def _role(graph: nx.DiGraph, module: str) -> str:
    role = roles.role_of(graph, module)
    return "attention" if role == "self-attention" else role


def _module_of_role(graph: nx.DiGraph, module: str, layer: str) -> tuple[str, str]:
    """The outermost module under ``layer`` containing ``module`` whose role is a step's."""
    parts = module[len(layer) + 1 :].split(".")
    for end in range(len(parts), 0, -1):
        path = layer + "." + ".".join(parts[:end])
        if _role(graph, path) == "norm":  # a norm inside an attention block is a step of its own
            return path, "norm"
    for end in range(1, len(parts) + 1):
        path = layer + "." + ".".join(parts[:end])
        role = _role(graph, path)
        if role in ("norm", "attention", "cross-attention", "feed-forward"):
            return path, role
    return module, ""


def _ffn_text(graph: nx.DiGraph, ops: list[dict[str, Any]], hidden: int | None) -> str:
    names = [str(d.get(g.TARGET, "")).split(".")[-2 if "." in str(d.get(g.TARGET, "")) else -1] for d in ops]
    acts = [ACTIVATIONS[n] for n in ACTIVATIONS if any(n in name for name in names)]
    widths = [d[g.SHAPE][-1] for d in ops if d.get(g.SHAPE) and isinstance(d[g.SHAPE][-1], int)]
    width = max(widths, default=None)
    act = acts[0] if acts else "?"
    if "SiLU" in acts and sum("mul" in n for n in names) >= 1 and act == "SiLU":
        act = "SwiGLU"
    return f"FFN {act} · {hidden}→{width}→{hidden}" if width and hidden else f"FFN {act}"


def _steps(graph: nx.DiGraph, layer: str, hidden: int | None) -> list[Step]:
    """The layer's boxes in execution order, each module once, residual adds between them ignored."""
    by_module: dict[str, list[dict[str, Any]]] = {}
    order: list[tuple[str, str]] = []
    for op in _layer_ops(graph, layer):
        path, role = _module_of_role(graph, str(op.get(g.MODULE, "")), layer)
        if not role:
            continue
        if path not in by_module:
            order.append((path, role))
            by_module[path] = []
        by_module[path].append(op)
    steps = []
    for path, role in order:
        if role == "feed-forward":
            steps.append(Step(role, _ffn_text(graph, by_module[path], hidden)))
        elif role == "norm":
            steps.append(Step(role, "RMSNorm" if "rms" in _type(graph, path).lower() else "LayerNorm"))
        elif role == "attention":
            steps.append(Step(role, "self-attention"))
        else:
            steps.append(Step(role, "cross-attention"))
    return _merge(steps)


def _merge(steps: list[Step]) -> list[Step]:
    """Two modules of one role in a row (T5's attention and its own dropout wrapper) are one box."""
    merged: list[Step] = []
    for step in steps:
        if merged and merged[-1].role == step.role and step.role != "norm":
            continue
        merged.append(step)
    return merged


def _type(graph: nx.DiGraph, path: str) -> str:
    return str(graph.graph.get(g.G_MODULES, {}).get(path, {}).get("type", ""))


def _pattern(graph: nx.DiGraph, stack: str, layers: int) -> list[str]:
    """The self-attention label of each layer, cut to its shortest repeating cycle."""
    modules = graph.graph.get(g.G_MODULES, {})
    labels = []
    for number in range(layers):
        found = [
            g.attention_label(info)
            for path, info in sorted(modules.items())
            if path.startswith(f"{stack}.{number}.") and g.attention_label(info) not in ("", g.CROSS)
        ]
        if found:
            labels.append(found[0])
    for size in range(1, len(labels) + 1):
        # a cycle may stop part-way (ModernBERT: 22 layers of [global, window, window])
        if labels == (labels[:size] * (len(labels) // size + 1))[: len(labels)]:
            return labels[:size]
    return labels


def _final_norm(graph: nx.DiGraph, stack: str) -> bool:
    """A norm in the stack's part of the model, after its layers (GPT-2's ln_f, T5's final_layer_norm)."""
    kinds = roles.stack_kinds(graph)
    last = max(_op_orders(graph, stack), default=-1)
    for path in graph.graph.get(g.G_MODULES, {}):
        if path.startswith(stack + ".") or roles.role_of(graph, path) != "norm":
            continue
        if roles.stack_side(graph, path) == kinds[stack]:
            return True
        # one stack: a norm outside it that runs after its last layer is its final norm (GPT-2's ln_f)
        if len(kinds) == 1 and not roles.stack_side(graph, path) and min(_op_orders(graph, path), default=-1) > last:
            return True
    return False


def _op_orders(graph: nx.DiGraph, path: str) -> list[int]:
    """Execution positions of the ops of module ``path`` and its children."""
    return [
        int(data.get(g.ORDER, 0))
        for _, data in graph.nodes(data=True)
        if data.get(g.KIND) == g.OPERATOR
        and (str(data.get(g.MODULE, "")) == path or str(data.get(g.MODULE, "")).startswith(path + "."))
    ]


def columns(graph: nx.DiGraph) -> tuple[dict[str, Any], list[Column]]:
    """The architecture kind (the table's row) and the schematic's columns, encoder first."""
    kind = architecture_kind(graph, stats.parameter_stats(graph)["total"])
    shared = roles.shared_modules(graph)
    out = []
    paths = sorted(roles.stack_kinds(graph).items(), key=lambda item: (item[1] != roles.ENCODER, item[0]))
    for (path, side), stack in zip(paths, kind["stacks"]):
        hidden = stack["hidden"]
        column = Column(side, stack["layers"], _steps(graph, f"{path}.0", hidden))
        column.pattern = _pattern(graph, path, stack["layers"]) if not shared else []
        column.shared = any(m == path or m.startswith(path + ".") for m in shared)
        column.final_norm = _final_norm(graph, path)
        column.caption = _caption(graph, stack, kind)
        out.append(column)
    return kind, out


def _caption(graph: nx.DiGraph, stack: dict[str, Any], kind: dict[str, Any]) -> list[str]:
    from bertgraph.render import figures

    config = graph.graph.get(g.G_CONFIG, {})
    heads = stack["grouped_query"] or _heads(graph, stack)
    lines = [f"{stack['layers']} layers", f"hidden {stack['hidden']}"]
    if heads:
        lines.append(f"heads {heads[0]} q / {heads[1]} kv")
    if config.get("vocab"):
        lines.append(f"vocabulary {figures.count(config['vocab'])}")
    return lines


def _heads(graph: nx.DiGraph, stack: dict[str, Any]) -> tuple[int, int] | None:
    for info in graph.graph.get(g.G_MODULES, {}).values():
        q, kv = info.get(g.Q_HEADS), info.get(g.KV_HEADS)
        if isinstance(q, int):
            return q, kv if isinstance(kv, int) else q
    return None
