"""What kind of architecture a traced graph is: the families table's row, the report's section.

Every figure comes from the graph: its stacks and how many layers each runs, the width of
the hidden states they pass on, the parameters, the attention and position kinds the facts
pass read off the ops. Only what a family is typically used for comes from its record.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import networkx as nx

from bertgraph.graph import roles
from bertgraph.graph import schema as g
from bertgraph.graph.views import display_name


def _layers(graph: nx.DiGraph, stack: str, shared: dict[str, int]) -> int:
    """Layers a stack runs: its numbered children, a shared one counted once per call."""
    prefix = stack + "."
    children = {
        path[len(prefix) :].split(".", 1)[0]
        for path in graph.graph.get(g.G_MODULES, {})
        if path.startswith(prefix) and path[len(prefix) :].split(".", 1)[0].isdigit()
    }
    runs = 0
    for child in children:
        path = f"{stack}.{child}"
        calls = [n for module, n in shared.items() if module == path or module.startswith(path + ".")]
        runs += max(calls, default=1)
    return runs


def _hidden(graph: nx.DiGraph, stack: str) -> int | None:
    """The width of what the stack's last op passes on (``[batch, seq, 768]`` → 768)."""
    last = None
    for _, data in graph.nodes(data=True):
        module = data.get(g.MODULE, "")
        later = last is None or data.get(g.ORDER, 0) > last.get(g.ORDER, 0)
        if data.get(g.KIND) == g.OPERATOR and module.startswith(stack + ".") and later:
            last = data
    shape = (last or {}).get(g.SHAPE) or []
    return shape[-1] if shape and isinstance(shape[-1], int) else None


def _attention(graph: nx.DiGraph, stack: str) -> dict[str, int | None]:
    """Attention kinds in a stack with how many blocks have each, as the facts pass counted them
    (``{"causal": 12}``), or as its blocks say (counts unknown: None)."""
    recorded = graph.graph.get(g.G_ATTENTION)
    counts: dict[str, int | None]
    if isinstance(recorded, dict) and isinstance(recorded.get(stack), dict):
        counts = {str(label): int(n) for label, n in recorded[stack].items()}
    else:
        counts = dict.fromkeys(roles.attention_labels(graph, stack))
    return {label: counts[label] for label in sorted(counts, key=roles.kind_order)}


def _grouped_query(graph: nx.DiGraph, stack: str) -> tuple[int, int] | None:
    """(query heads, key/value heads) when the stack's attention shares key/value heads (grouped-query)."""
    for path, info in graph.graph.get(g.G_MODULES, {}).items():
        if not path.startswith(stack + "."):
            continue
        q, kv = info.get(g.Q_HEADS), info.get(g.KV_HEADS)
        if isinstance(q, int) and isinstance(kv, int) and kv < q:
            return q, kv
    return None


def _positions(graph: nx.DiGraph) -> list[str]:
    recorded = graph.graph.get(g.G_POSITION)
    if not isinstance(recorded, dict):
        return []
    kinds = {kind for values in recorded.values() if isinstance(values, list) for kind in values}
    return sorted(kinds, key=lambda k: g.POSITION_KINDS.index(k) if k in g.POSITION_KINDS else len(g.POSITION_KINDS))


# Ops that centre the values (LayerNorm subtracts the mean) and ops that only scale them (RMSNorm).
_CENTRING = frozenset(
    {"layer_norm", "native_layer_norm", "LayerNormalization", "sub", "var", "var_mean", "group_norm", "batch_norm"}
)
_SCALING = frozenset({"rms_norm", "SimplifiedLayerNormalization", "rsqrt", "sqrt", "pow", "mean", "norm"})


def norm_kind(ops: Iterable[str]) -> str:
    """``LayerNorm`` when a norm's ops centre the values, ``RMSNorm`` when they only scale them, else ``""``.

    Read off the ops, never the class: T5's ``T5LayerNorm`` scales by the root mean square only.

    >>> norm_kind(["layer_norm"]), norm_kind(["to", "pow", "mean", "add", "rsqrt", "mul"]), norm_kind(["add"])
    ('LayerNorm', 'RMSNorm', '')
    """
    found = set(ops)
    if found & _CENTRING:
        return "LayerNorm"
    return "RMSNorm" if found & _SCALING else ""


def norm_kinds(graph: nx.DiGraph, path: str = "") -> list[str]:
    """The kinds of the norm modules at or below ``path`` (every norm of the model for ``""``), in order."""
    ops: dict[str, set[str]] = {}
    for _, data in graph.nodes(data=True):
        module = str(data.get(g.MODULE, ""))
        within = not path or module == path or module.startswith(path + ".")
        if data.get(g.KIND) == g.OPERATOR and within and roles.role_of(graph, module) == roles.NORM:
            ops.setdefault(module, set()).add(str(data.get(g.OP, "")))
    found = {norm_kind(names) for names in ops.values()} - {""}
    return sorted(found)


# What each position kind says in a drawing: where positions act is part of the words.
POSITION_WORDS = {
    g.ABSOLUTE: "absolute positions",
    g.RELATIVE_BUCKETS: "bucketed relative positions",
    g.RELATIVE: "relative positions",
    g.ROTARY: "rotary positions",
}
# The kinds that act inside every attention layer (on queries and keys, or as a bias on the scores);
# absolute positions act once, at the embeddings.
IN_ATTENTION = (g.RELATIVE_BUCKETS, g.RELATIVE, g.ROTARY)


def attention_words(label: str) -> str:
    """An attention kind as a direction and a reach: a window is bidirectional or causal too.

    >>> attention_words("sliding-window(64)"), attention_words("causal-sliding-window(16)"), attention_words("causal")
    ('bidirectional sliding-window(64)', 'causal sliding-window(16)', 'causal')
    """
    kind, bracket, window = label.partition("(")
    said = {g.SLIDING_WINDOW: "bidirectional sliding-window", g.CAUSAL_SLIDING_WINDOW: "causal sliding-window"}
    return said.get(kind, kind) + bracket + window


def window_directions(labels: Iterable[str]) -> str:
    """The legend's name of the sliding-window colour: which directions the drawing's windows have."""
    kinds = {label.partition("(")[0] for label in labels}
    directions = [
        word
        for kind, word in ((g.SLIDING_WINDOW, "bidirectional"), (g.CAUSAL_SLIDING_WINDOW, "causal"))
        if kind in kinds
    ]
    if len(directions) == 1:
        return f"{directions[0]} sliding-window attention"
    return "sliding-window attention (bidirectional or causal)"


def stack_positions(graph: nx.DiGraph, path: str) -> list[str]:
    """The position kinds of the stacks at, inside or around module ``path`` (the facts pass's record)."""
    recorded = graph.graph.get(g.G_POSITION)
    if not isinstance(recorded, dict):
        return []
    found = {
        kind
        for stack, values in recorded.items()
        if isinstance(values, list)
        and (not path or not stack or stack == path or stack.startswith(path + ".") or path.startswith(stack + "."))
        for kind in values
    }
    return [kind for kind in g.POSITION_KINDS if kind in found]


def structure_words(kind: dict[str, Any]) -> str:
    """A kind's structure in words; a structure nothing told (``""``) is claimed as none: "backbone"."""
    return str(kind["structure"]) or "backbone"


def architecture_kind(graph: nx.DiGraph, total: int) -> dict[str, Any]:
    """The families-table row of ``graph`` (``total``: its parameters).

    Returns ``{"model", "model_class", "family", "structure", "stacks": [{"name", "kind",
    "layers", "attention": [labels], "attention_counts": {label: blocks}, "grouped_query":
    (query heads, key/value heads) or None, "hidden"}], "hidden", "parameters", "position":
    [kinds], "uses"}``.
    ``attention`` and ``position`` are empty where the graph records no such facts.
    """
    from bertgraph.model.families import BY_NAME

    shared = roles.shared_modules(graph)
    backbone = graph.graph.get(g.G_BACKBONE, "")
    stacks = []
    for path, kind in sorted(roles.stack_kinds(graph).items(), key=lambda item: (item[1] != roles.ENCODER, item[0])):
        attention = _attention(graph, path)
        stacks.append(
            {
                "name": display_name(path, backbone),
                "kind": kind,
                "layers": _layers(graph, path, shared),
                "attention": list(attention),
                "attention_counts": {label: n for label, n in attention.items() if n is not None},
                "grouped_query": _grouped_query(graph, path),
                "hidden": _hidden(graph, path),
            }
        )
    widths = {s["hidden"] for s in stacks if s["hidden"] is not None}
    family = BY_NAME.get(str(graph.graph.get(g.G_FAMILY, "")))
    return {
        "model": str(graph.graph.get(g.G_NAME, "")),
        "model_class": str(graph.graph.get(g.G_MODEL_CLASS, "")),
        "family": str(graph.graph.get(g.G_FAMILY, "")),
        "structure": roles.structure(graph),
        "stacks": stacks,
        "hidden": widths.pop() if len(widths) == 1 else None,
        "parameters": total,
        "position": _positions(graph),
        "uses": family.uses if family else "",
    }
