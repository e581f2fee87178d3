"""The caption under a diagram's title: the facts a reader looks for first, read off the graph.

Layers, hidden size, heads (query / key-value when grouped), feed-forward width, attention
kinds, position kinds, norm kinds and parameters — per stack for an encoder-decoder. Textbook figures put these in a
caption instead of on every box; the counts come from the traced ops and the facts pass
(:mod:`bertgraph.graph.kinds`), never from the config the model was built from.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from bertgraph.graph import kinds, roles
from bertgraph.graph import schema as g
from bertgraph.render import figures


def _first_layer_ops(graph: nx.DiGraph, stack: str) -> list[dict[str, Any]]:
    """The ops the stack's first layer runs (``encoder.layer.0.…``)."""
    prefix = f"{stack}.0."
    return [
        d
        for _, d in graph.nodes(data=True)
        if d.get(g.KIND) == g.OPERATOR and str(d.get(g.MODULE, "")).startswith(prefix)
    ]


def ffn_width(graph: nx.DiGraph, stack: str, hidden: int | None) -> int | None:
    """The first layer's feed-forward width (3072 in BERT-base): the narrowest of its ops' outputs wider than
    the hidden size — a gated FFN's joint projection (ModernBERT's Wi, 2 × 1152) is split before the gate."""
    widths = {
        d[g.SHAPE][-1]
        for d in _first_layer_ops(graph, stack)
        if roles.role_of(graph, str(d.get(g.MODULE, ""))) == roles.FEED_FORWARD
        and d.get(g.SHAPE)
        and isinstance(d[g.SHAPE][-1], int)
    }
    wider = {w for w in widths if hidden is None or w > hidden}
    return min(wider) if wider else max(widths, default=None)


def heads(graph: nx.DiGraph, stack: str) -> tuple[int, int] | None:
    """(query heads, key/value heads) of the stack's self-attention, as the attention facts recorded them."""
    for path, info in sorted(graph.graph.get(g.G_MODULES, {}).items()):
        if not path.startswith(stack + "."):
            continue
        q, kv = info.get(g.Q_HEADS), info.get(g.KV_HEADS)
        if isinstance(q, int):
            return q, kv if isinstance(kv, int) else q
    return None


def _attention_text(counts: dict[str, int], labels: list[str], layers: int) -> str:
    """``causal + cross attention``; with counts when kinds take turns (``8 bidirectional, 14 bidirectional
    sliding-window(64)``): a window is a reach, and has a direction too."""
    if not labels:
        return ""
    said = {label: kinds.attention_words(label) for label in labels}
    if all(counts.get(label, layers) == layers for label in labels):
        return f"{' + '.join(said[label] for label in labels)} attention"
    return "attention " + ", ".join(
        f"{counts[label]} {said[label]}" if label in counts else said[label] for label in labels
    )


def stack_line(graph: nx.DiGraph, path: str, stack: dict[str, Any]) -> str:
    """One stack's facts: ``12 layers · hidden 768 · 12 heads · FFN 3072 · bidirectional attention``."""
    parts = [f"{stack['layers']} layers"]
    if stack["hidden"]:
        parts.append(f"hidden {stack['hidden']}")
    counted = heads(graph, path)
    if counted:
        q, kv = counted
        parts.append(f"{q} heads" if q == kv else f"{q} query / {kv} key-value heads")
    width = ffn_width(graph, path, stack["hidden"])
    if width:
        parts.append(f"FFN {width}")
    attention = _attention_text(stack["attention_counts"], stack["attention"], stack["layers"])
    if attention:
        parts.append(attention)
    parts += [kinds.POSITION_WORDS[kind] for kind in kinds.stack_positions(graph, path)]
    owner = path.rsplit(".", 1)[0] if "." in path and path.rsplit(".", 1)[0] != graph.graph.get(g.G_BACKBONE) else ""
    parts += kinds.norm_kinds(graph, owner or path)
    return " · ".join(parts)


def caption_lines(graph: nx.DiGraph, total: int) -> list[str]:
    """The caption's lines: a line per stack (named when there are two), then the parameters."""
    kind = kinds.architecture_kind(graph, total)
    # The same order as architecture_kind's stacks: encoder first, then by path.
    paths = [
        p for p, _ in sorted(roles.stack_kinds(graph).items(), key=lambda item: (item[1] != roles.ENCODER, item[0]))
    ]
    lines = []
    for path, stack in zip(paths, kind["stacks"]):
        line = stack_line(graph, path, stack)
        lines.append(f"{stack['kind']}: {line}" if len(paths) > 1 else line)
    lines.append(f"{figures.short(total)} parameters")
    if len(lines) == 2:
        lines = [" · ".join(lines)]  # one stack: one line
    return [part for line in lines for part in wrapped(line)]


# Characters in a caption line: wider, it set the drawing's width (ModernBERT's: 812 points at 11).
CAPTION_CHARACTERS = 84


def wrapped(line: str, width: int = CAPTION_CHARACTERS) -> list[str]:
    """``line`` broken between its facts (at " · ") into lines of at most ``width`` characters, where it can be.

    >>> wrapped("a · b · c", 5)
    ['a · b', 'c']
    """
    found: list[str] = []
    for fact in line.split(" · "):
        if found and len(found[-1]) + 3 + len(fact) <= width:
            found[-1] += f" · {fact}"
        else:
            found.append(fact)
    return found
