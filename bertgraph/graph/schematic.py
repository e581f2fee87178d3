"""The facts a families schematic draws, read off a traced graph: one column per stack.

Each column has the layer drawn once: its steps (norms, attention, cross-attention, FFN) in
the order the first layer's ops run, the attention pattern over its layers, and the caption
facts. What acts inside attention is said there: a norm on the query or key path (Qwen3's and
OLMo-2's q/k norms) and the positions that act on queries, keys or scores (rotary, relative);
only absolute positions are the embeddings'. Only what a family is used for comes from its
record (through ``architecture_kind``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx

from bertgraph.graph import roles, stats
from bertgraph.graph import schema as g
from bertgraph.graph.facts.attention import ATTENTION_OPS, eager_products
from bertgraph.graph.facts.walk import argument, op
from bertgraph.graph.kinds import architecture_kind

ACTIVATIONS = {"gelu": "GELU", "relu": "ReLU", "silu": "SiLU", "tanh": "GELU (tanh)", "sigmoid": "sigmoid"}
GATED = {"GELU": "GeGLU", "GELU (tanh)": "GeGLU", "SiLU": "SwiGLU", "ReLU": "ReGLU"}


# Where a position kind acts, in words; absolute positions are added to the embeddings instead.
POSITION_WORDS = {
    g.ROTARY: "rotary positions on q/k",
    g.RELATIVE_BUCKETS: "relative-position bias on scores",
    g.RELATIVE: "relative positions on scores",
}


@dataclass(frozen=True)
class Step:
    """One box of the layer: ``role`` is norm, attention, cross-attention, feed-forward or residual;
    ``details`` what else acts inside it, a line each ("q/k RMSNorm", "rotary positions on q/k")."""

    role: str
    text: str
    details: tuple[str, ...] = ()


@dataclass
class Column:
    """One stack as the schematic draws it."""

    kind: str  # encoder or decoder
    layers: int
    steps: list[Step] = field(default_factory=list)
    # residual connections: (the step whose output is added, or -1 for the layer's input; the residual step)
    skips: list[tuple[int, int]] = field(default_factory=list)
    pattern: list[str] = field(default_factory=list)  # attention label per layer, one cycle of it
    # where no shorter cycle repeats (Qwen2's first layers full, the rest sliding): (first, last, label), from 1
    runs: list[tuple[int, int, str]] = field(default_factory=list)
    shared: bool = False  # one layer's weights run every time (ALBERT)
    positions: list[str] = field(default_factory=list)  # position kinds added to the embeddings (absolute)
    embedding_norm: bool = False  # the embeddings' sum normalised before the layers
    final_norm: bool = False
    caption: list[str] = field(default_factory=list)


@dataclass
class _Group:
    """The ops of one step's modules, in the order they run."""

    role: str
    nodes: list[str]
    details: list[str] = field(default_factory=list)


SUBLAYERS = ("attention", "cross-attention", "feed-forward")
# ops that contract the hidden dimension: where a feed-forward's width is read (the input of its last one)
CONTRACTIONS = {"aten.linear.default": 0, "aten.addmm.default": 1, "aten.mm.default": 0, "aten.matmul.default": 0}


def _layer_nodes(graph: nx.DiGraph, layer: str) -> list[str]:
    """The op nodes of ``layer``'s first call, in execution order."""
    found = []
    for node in g.ops_in_order(graph):
        data = graph.nodes[node]
        module = str(data.get(g.MODULE, ""))
        if (
            data.get(g.KIND) == g.OPERATOR
            and not data.get(g.CALL)
            and (module == layer or module.startswith(layer + "."))
        ):
            found.append(node)
    return found


def _role(graph: nx.DiGraph, module: str) -> str:
    role = roles.role_of(graph, module)
    return "attention" if role == "self-attention" else role


def _module_of_role(graph: nx.DiGraph, module: str, layer: str) -> tuple[str, str]:
    """The outermost module under ``layer`` containing ``module`` whose role is a step's."""
    if module == layer:
        return module, ""
    parts = module[len(layer) + 1 :].split(".")
    for end in range(len(parts), 0, -1):
        path = layer + "." + ".".join(parts[:end])
        if _role(graph, path) == "norm":  # a norm inside an attention block is a step of its own
            return path, "norm"
    for end in range(1, len(parts) + 1):
        path = layer + "." + ".".join(parts[:end])
        role = _role(graph, path)
        if role in ("norm", *SUBLAYERS):
            return path, role
    return module, ""


def _groups(graph: nx.DiGraph, nodes: list[str], layer: str) -> list[_Group]:
    """The layer's steps as groups of ops: each module once, neighbours of one role (T5's attention
    and its dropout wrapper, ALBERT's ffn, activation and ffn_output) one group, norms never merged."""
    groups: list[_Group] = []
    of_path: dict[str, _Group] = {}
    for node in nodes:
        path, role = _module_of_role(graph, str(graph.nodes[node].get(g.MODULE, "")), layer)
        if not role:
            continue
        if path not in of_path:
            if not (groups and groups[-1].role == role and role != "norm"):
                groups.append(_Group(role, []))
            of_path[path] = groups[-1]
        of_path[path].nodes.append(node)
    return groups


def _order(graph: nx.DiGraph, node: str) -> int:
    return int(graph.nodes[node].get(g.ORDER, 0))


def _qkv(graph: nx.DiGraph, group: _Group) -> tuple[int, list[str | None]] | None:
    """Where an attention group's attention op runs, and the nodes that give it queries, keys and values."""
    for node in group.nodes:
        if op(graph, node) == "scaled_dot_product_attention":
            return _order(graph, node), [argument(graph, node, n) for n in range(3)]
        if op(graph, node) in ATTENTION_OPS:  # eager: softmax(queries × keysᵀ) × values
            scores, values = eager_products(graph, node)
            if scores is not None and values is not None:
                keys = [argument(graph, scores, 0), argument(graph, scores, 1), argument(graph, values, 1)]
                return _order(graph, node), keys
    return None


def _attention_norms_inside(graph: nx.DiGraph, groups: list[_Group], nodes: list[str]) -> list[_Group]:
    """Norms that run inside an attention block on its query, key or value path (between the block's
    first op and its attention op: Qwen3's q_norm and k_norm) become that block's details, "q/k RMSNorm";
    a norm before the block (its input's, T5's cross-attention's on the queries only) stays a step."""
    inside = graph.subgraph(nodes)
    folded: set[int] = set()
    for group in groups:
        found = _qkv(graph, group) if group.role in ("attention", "cross-attention") else None
        if found is None:
            continue
        at, arguments = found
        feeders = [nx.ancestors(inside, a) | {a} if a in inside else set() for a in arguments]
        letters: dict[str, set[str]] = {}
        for number, norm in enumerate(groups):
            start, output = _order(graph, norm.nodes[0]), norm.nodes[-1]
            if norm.role != "norm" or not _order(graph, group.nodes[0]) < start < at:
                continue
            reached = [letter for letter, feeding in zip("qkv", feeders) if output in feeding]
            if reached:
                folded.add(number)
                group.nodes = sorted(group.nodes + norm.nodes, key=lambda n: _order(graph, n))
                kind = _norm_text(graph, norm.nodes)
                letters.setdefault(kind, set()).update(reached)
        group.details += [f"{'/'.join(x for x in 'qkv' if x in found)} {kind}" for kind, found in letters.items()]
    return [group for number, group in enumerate(groups) if number not in folded]


def norms_inside(step: Step) -> list[str]:
    """The kinds of the norms a step's details say act inside it ("q/k RMSNorm" → "RMSNorm"); its
    position details are none."""
    return [detail.split(" ", 1)[1] for detail in step.details if detail not in POSITION_WORDS.values()]


def _residuals(graph: nx.DiGraph, nodes: list[str], groups: list[_Group], hidden: int | None) -> list[tuple[str, str]]:
    """(add, its earlier input) for every residual add: an add of two hidden-wide tensors whose
    earlier input was made before a sublayer started and whose later input after it."""
    starts = [_order(graph, group.nodes[0]) for group in groups if group.role in SUBLAYERS]
    found = []
    for node in nodes:
        data = graph.nodes[node]
        shape = data.get(g.SHAPE) or []
        if data.get(g.TARGET) != "aten.add.Tensor" or len(shape) != 3 or shape[-1] != hidden:
            continue
        inputs = sorted(
            (p for p in graph.predecessors(node) if graph.nodes[p].get(g.SHAPE) == shape),
            key=lambda p: _order(graph, p),
        )
        if len(inputs) == 2 and any(_order(graph, inputs[0]) < start <= _order(graph, inputs[1]) for start in starts):
            found.append((node, _unaliased(graph, inputs[0])))
    return found


def _unaliased(graph: nx.DiGraph, node: str) -> str:
    """The op that made ``node``'s storage: T5's norm starts with a ``to`` that returns its input."""
    while graph.nodes[node].get(g.ALIAS):
        sources = [p for p in graph.predecessors(node) if graph.edges[p, node].get(g.ALIAS)]
        if not sources:
            break
        node = sources[0]
    return node


def _steps(graph: nx.DiGraph, layer: str, hidden: int | None) -> tuple[list[Step], list[tuple[int, int]]]:
    """The layer's boxes in execution order, residual adds included, and where each residual starts."""
    nodes = _layer_nodes(graph, layer)
    groups = _attention_norms_inside(graph, _groups(graph, nodes, layer), nodes)
    residuals = _residuals(graph, nodes, groups, hidden)
    events: list[tuple[int, Step]] = [
        (_order(graph, group.nodes[0]), _group_step(graph, group, nodes, hidden)) for group in groups
    ]
    events += [(_order(graph, add), Step("residual", "+")) for add, _ in residuals]
    events.sort(key=lambda event: event[0])
    starts = [order for order, _ in events]
    skips = []
    for add, earlier in residuals:
        source = max((n for n, start in enumerate(starts) if start <= _order(graph, earlier)), default=-1)
        skips.append((source, starts.index(_order(graph, add))))
    return [step for _, step in events], skips


def _group_step(graph: nx.DiGraph, group: _Group, nodes: list[str], hidden: int | None) -> Step:
    if group.role == "feed-forward":
        # ops between the FFN's first and last that belong to no step (ALBERT's activation) are its own
        first, last = _order(graph, group.nodes[0]), _order(graph, group.nodes[-1])
        return Step(group.role, _ffn_text(graph, [n for n in nodes if first <= _order(graph, n) <= last], hidden))
    if group.role == "norm":
        return Step(group.role, _norm_text(graph, group.nodes))
    return Step(
        group.role, "self-attention" if group.role == "attention" else "cross-attention", details=tuple(group.details)
    )


def _norm_text(graph: nx.DiGraph, nodes: list[str]) -> str:
    """LayerNorm when the ops centre the values (layer_norm, or a mean subtracted), else RMSNorm (T5, LLaMA)."""
    targets = [str(graph.nodes[n].get(g.TARGET, "")) for n in nodes]
    if any("layer_norm" in t or "aten.sub" in t or "var" in t for t in targets):
        return "LayerNorm"
    return "RMSNorm"


def _ffn_text(graph: nx.DiGraph, nodes: list[str], hidden: int | None) -> str:
    """ "FFN GELU · 768→3072→768": the activation read off the ops (gated when two projections are
    multiplied: a fused one chunked, as ModernBERT's, or gate and up, as LLaMA's) and the width the
    last projection contracts."""
    targets = [str(graph.nodes[n].get(g.TARGET, "")) for n in nodes]
    names = [t.split(".")[-2] if "." in t else t for t in targets]
    acts = [ACTIVATIONS[n] for n in ACTIVATIONS if any(n in name for name in names)]
    act = acts[0] if acts else "?"
    contractions = [n for n, t in zip(nodes, targets) if t in CONTRACTIONS]
    gated = len(contractions) >= 3 or any(name in ("chunk", "split", "split_with_sizes") for name in names)
    if gated:
        act = GATED.get(act, f"gated {act}")
    width = None
    if contractions:
        data = graph.nodes[contractions[-1]]
        inputs = data.get(g.INPUTS) or []
        position = CONTRACTIONS[str(data.get(g.TARGET))]
        if len(inputs) > position and inputs[position] and isinstance(inputs[position][-1], int):
            width = inputs[position][-1]
    return f"FFN {act} · {hidden}→{width}→{hidden}" if width and hidden else f"FFN {act}"


def _type(graph: nx.DiGraph, path: str) -> str:
    return str(graph.graph.get(g.G_MODULES, {}).get(path, {}).get("type", ""))


def _layer_labels(graph: nx.DiGraph, stack: str, layers: int) -> list[str]:
    """The self-attention label of each layer that has one."""
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
    return labels


def _cycle(labels: list[str]) -> list[str]:
    """The labels cut to their shortest repeating cycle."""
    for size in range(1, len(labels) + 1):
        # a cycle may stop part-way (ModernBERT: 22 layers of [global, window, window])
        if labels == (labels[:size] * (len(labels) // size + 1))[: len(labels)]:
            return labels[:size]
    return labels


def _runs(labels: list[str]) -> list[tuple[int, int, str]]:
    """Consecutive layers of one label: [(1, 2, "causal"), (3, 4, "causal-sliding-window(16)")]."""
    runs: list[tuple[int, int, str]] = []
    for number, label in enumerate(labels, start=1):
        if runs and runs[-1][2] == label:
            runs[-1] = (runs[-1][0], number, label)
        else:
            runs.append((number, number, label))
    return runs


def _outer_norms(graph: nx.DiGraph, stack: str, orders: dict[str, list[int]]) -> tuple[bool, bool]:
    """Whether a norm outside the layers runs before them (BERT's embedding LayerNorm, BART's
    layernorm_embedding) and after them (GPT-2's ln_f, T5's final_layer_norm): a norm in the stack's
    part of the model or, with one stack, anywhere outside it."""
    kinds = roles.stack_kinds(graph)
    inside = _orders_under(orders, stack)
    first, last = min(inside, default=-1), max(inside, default=-1)
    before = after = False
    for path in graph.graph.get(g.G_MODULES, {}):
        if path.startswith(stack + ".") or roles.role_of(graph, path) != "norm":
            continue
        side = roles.stack_side(graph, path)
        if side == kinds[stack] or (len(kinds) == 1 and not side):
            runs = _orders_under(orders, path)
            before = before or (bool(runs) and max(runs) < first)
            after = after or (bool(runs) and min(runs) > last)
    return before, after


def _op_orders(graph: nx.DiGraph) -> dict[str, list[int]]:
    """Execution positions of each module's own ops, read in one pass over the graph."""
    orders: dict[str, list[int]] = {}
    for _, data in graph.nodes(data=True):
        if data.get(g.KIND) == g.OPERATOR:
            orders.setdefault(str(data.get(g.MODULE, "")), []).append(int(data.get(g.ORDER, 0)))
    return orders


def _orders_under(orders: dict[str, list[int]], path: str) -> list[int]:
    """Execution positions of the ops of module ``path`` and its children."""
    return [n for module, found in orders.items() if module == path or module.startswith(path + ".") for n in found]


def columns(graph: nx.DiGraph) -> tuple[dict[str, Any], list[Column]]:
    """The architecture kind (the table's row) and the schematic's columns, encoder first."""
    kind = architecture_kind(graph, stats.parameter_stats(graph)["total"])
    shared = roles.shared_modules(graph)
    orders = _op_orders(graph)
    out = []
    paths = sorted(roles.stack_kinds(graph).items(), key=lambda item: (item[1] != roles.ENCODER, item[0]))
    for (path, side), stack in zip(paths, kind["stacks"]):
        hidden = stack["hidden"]
        # the first layer, or the second where it runs more steps (ModernBERT's first layer has no attention norm)
        drawn = [_steps(graph, f"{path}.{n}", hidden) for n in range(min(2, stack["layers"]))]
        steps, skips = max(drawn, key=lambda found: len(found[0]))
        known = graph.graph.get(g.G_POSITION, {})
        positions = known.get(path, kind["position"]) if isinstance(known, dict) else kind["position"]
        acting = tuple(POSITION_WORDS[p] for p in positions if p in POSITION_WORDS)
        # rotary and relative positions act in every layer's self-attention, not at the embeddings
        steps = [replace(s, details=s.details + acting) if s.role == "attention" else s for s in steps]
        column = Column(side, stack["layers"], steps, skips)
        column.positions = [p for p in positions if p not in POSITION_WORDS]
        labels = _layer_labels(graph, path, stack["layers"])
        column.pattern = _cycle(labels)
        if len(column.pattern) > 1 and len(column.pattern) == len(labels):
            column.runs = _runs(labels)
        column.shared = any(m == path or m.startswith(path + ".") for m in shared)
        column.embedding_norm, column.final_norm = _outer_norms(graph, path, orders)
        column.caption = _caption(graph, stack, column)
        out.append(column)
    return kind, out


def _caption(graph: nx.DiGraph, stack: dict[str, Any], column: Column) -> list[str]:
    from bertgraph.render import figures

    config = graph.graph.get(g.G_CONFIG, {})
    heads = stack["grouped_query"] or _heads(graph, stack)
    lines = [f"{stack['layers']} layers", f"hidden {stack['hidden']}"]
    if heads:
        lines.append(f"heads {heads[0]} q / {heads[1]} kv")
    widths = [step.text.rsplit("→", 2)[1] for step in column.steps if step.role == "feed-forward" and "→" in step.text]
    if widths:
        lines.append(f"FFN width {figures.count(int(widths[0]))}")
    if config.get("vocab"):
        lines.append(f"vocabulary {figures.count(config['vocab'])}")
    return lines


def _heads(graph: nx.DiGraph, stack: dict[str, Any]) -> tuple[int, int] | None:
    for info in graph.graph.get(g.G_MODULES, {}).values():
        q, kv = info.get(g.Q_HEADS), info.get(g.KV_HEADS)
        if isinstance(q, int):
            return q, kv if isinstance(kv, int) else q
    return None
