"""The families schematic as DOT: per model a compact column (encoder left, decoder right),
the layer drawn once inside an "N ×" frame, facts in a caption, a few colours each meaning one role.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

import networkx as nx

from bertgraph.graph.schematic import Column, columns
from bertgraph.render.escape import dot_html as esc

COLOURS = {"norm": "#fff2cc", "attention": "#dae8fc", "cross-attention": "#f8cecc", "feed-forward": "#d5e8d4"}
ORDER = {"encoder-only": 0, "decoder-only": 1, "encoder-decoder": 2}
FONT = 11


def _box(ident: str, text: str, fill: str = "white") -> str:
    # " · " breaks a box's text into lines: narrow columns keep the figure's text large when scaled.
    label = "<br/>".join(esc(part) for part in text.split(" · "))
    return f'  "{ident}" [label=<{label}>, fillcolor="{fill}"];'


def _column(prefix: str, column: Column, position: str) -> Iterable[str]:
    """One stack: embeddings, the framed layer, final norm, output; returns lines, ids via naming."""
    yield f'  subgraph "cluster_{prefix}" {{ label=<{esc(column.kind)}>; style="rounded"; color="#999999";'
    yield _box(f"{prefix}in", "tokens")
    yield _box(f"{prefix}emb", "embeddings · " + position.replace(", ", " · "), "#e1d5e7")
    times = f"{column.layers} × (one shared layer)" if column.shared else f"{column.layers} ×"
    if len(column.pattern) > 1:
        times = f"{column.layers} × [{', '.join(column.pattern)}] repeating"
    yield f'  subgraph "cluster_{prefix}layer" {{ label=<{esc(times)}>; labeljust=r; style="dashed"; color="#555555";'
    for number, step in enumerate(column.steps):
        text = step.text
        if step.role == "attention" and len(column.pattern) == 1:
            text = f"{column.pattern[0]} self-attention"
        elif step.role == "attention" and column.pattern:
            text = "self-attention · " + " / ".join(column.pattern)
        yield _box(f"{prefix}s{number}", text, COLOURS.get(step.role, "white"))
    yield "  }"
    if column.final_norm:
        yield _box(f"{prefix}fn", "final norm", COLOURS["norm"])
    yield _box(f"{prefix}out", "hidden states" if column.kind == "encoder" else "next-token logits", "white")
    yield "  }"
    chain = [f"{prefix}in", f"{prefix}emb"] + [f"{prefix}s{n}" for n in range(len(column.steps))]
    chain += [f"{prefix}fn"] * column.final_norm + [f"{prefix}out"]
    for a, b in itertools.pairwise(chain):
        yield f'  "{a}" -> "{b}";'


def generate_lines(graphs: Sequence[nx.DiGraph]) -> Iterable[str]:
    """The DOT text of the schematic: encoder-only, decoder-only, encoder-decoder, in that order."""
    built = sorted((columns(graph) for graph in graphs), key=lambda kc: ORDER.get(kc[0]["structure"], 3))
    yield "digraph schematic {"
    yield f'  graph [rankdir=TB, nodesep=0.15, ranksep=0.18, fontname="Helvetica", fontsize={FONT}];'
    yield (
        f'  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize={FONT}, '
        'height=0.3, margin="0.08,0.03"];'
    )
    yield '  edge [arrowsize=0.6, color="#444444"];'
    for number, (kind, cols) in enumerate(built):
        position = ", ".join(kind["position"]) or "no position"
        caption = _caption(kind, cols)
        yield f'  subgraph "cluster_m{number}" {{ label=<{caption}>; labelloc=b; style="rounded"; color="#333333";'
        for side, column in enumerate(cols):
            yield from _column(f"m{number}c{side}", column, position)
        if len(cols) == 2:
            # encoder left of decoder: their inputs on one rank, joined by an invisible edge in that order
            yield f'  {{ rank=same; "m{number}c0in"; "m{number}c1in"; }}'
            yield f'  "m{number}c0in" -> "m{number}c1in" [style=invis];'
            cross = [n for n, s in enumerate(cols[1].steps) if s.role == "cross-attention"]
            last = f"m{number}c0fn" if cols[0].final_norm else f"m{number}c0s{len(cols[0].steps) - 1}"
            for n in cross:
                yield f'  "{last}" -> "m{number}c1s{n}" [color="#b85450"];'
        yield "  }"
    yield "}"


def _caption(kind: dict[str, Any], cols: list[Column]) -> str:
    from bertgraph.render import figures

    lines = [f"<b>{esc(kind['model'])}</b>", esc(kind["structure"]), f"{figures.count(kind['parameters'])} params"]
    for column in cols:
        lines.append(f"<i>{esc(column.kind)}</i>")
        lines.extend(esc(line) for line in column.caption)
    if kind.get("uses"):
        lines.extend(esc(line) for line in textwrap.wrap(f"used for: {kind['uses']}", 30))
    return "<br/>".join(lines)


def schematic_text(graphs: Sequence[nx.DiGraph], fmt: str) -> str | bytes:
    """The schematic as dot, svg, png or pdf."""
    from bertgraph.render import graphviz_run

    source = "\n".join(generate_lines(graphs)) + "\n"
    return source if fmt == "dot" else graphviz_run.render(source, fmt)
