"""Two models side by side as families-schematic columns, what differs outlined: DOT, SVG, PNG,
PDF, Mermaid and a page.

Each model is drawn as the families schematic draws it (:mod:`bertgraph.render.schematic`'s
columns: tokens, embeddings, the layer once in an "N ×" frame, final norm, output) under its
caption, the first model left. A step whose partner in the other model says something else (or
that has none), embeddings that differ, a final norm only one has and a frame whose layer count,
sharing or attention pattern differs are outlined in red; a legend names the colours, each role in
the diagrams' look (:mod:`bertgraph.render.style`) as in the schematic.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from typing import Any

from bertgraph.graph import aspects
from bertgraph.graph.compare import Comparison
from bertgraph.render import schematic, style
from bertgraph.render.escape import dot_html as esc

DIFFERS = "#d62728"
MARK_WIDTH = 3
FONT = schematic.FONT


# Aspects no column shows (the captions give structure, positions, layers and heads): said under the legend.
UNDRAWN = ("bias", "tied embeddings", "pooler", "token types")


def marks(comparison: Comparison) -> tuple[set[str], set[str]]:
    """The node ids of each model's drawing to outline (``m0c0s3``, ``m1c0emb``; ``m0c0layer`` the frame)."""
    left, right = comparison.words
    embeddings = next((row["params"] for row in comparison.parts if row["part"] == "embeddings"), [None, None])
    found: tuple[set[str], set[str]] = (set(), set())
    kinds = ([s.kind for s in left.stacks], [s.kind for s in right.stacks])
    for i, j in aspects.pair_stacks(*kinds):
        x = left.stacks[i] if i is not None else None
        y = right.stacks[j] if j is not None else None
        mark_a, mark_b = aspects.step_marks(x, y, embeddings_differ=embeddings[0] != embeddings[1])
        found[0].update(f"m0c{i}{name}" for name in mark_a)
        found[1].update(f"m1c{j}{name}" for name in mark_b)
    return found


def _legend(comparison: Comparison, colours: dict[str, Any]) -> str:
    """The title and a row of swatches — the looks both drawings use, as the schematic's legend names
    them, and the outline —, one HTML-like table: the graph's label, above the drawing."""
    built = [(model.kind, [stack.column for stack in model.stacks]) for model in comparison.words]
    kinds = colours["kinds"]
    cells = [
        f'<td bgcolor="{kinds[kind].fill}" border="1" color="{kinds[kind].border}">  </td>'
        f'<td align="left">{esc(style.KIND_NAMES[kind])}</td>'
        for kind in schematic.figure_kinds(built)
    ]
    outline = f'<td border="{MARK_WIDTH}" color="{DIFFERS}">  </td>'
    cells.append(f'{outline}<td align="left">{esc("differs from the other model")}</td>')
    title = esc(f"{comparison.models[0]} vs {comparison.models[1]}")
    rows = [f'<tr><td colspan="{2 * len(cells)}"><b>{title}</b></td></tr>', f"<tr>{''.join(cells)}</tr>"]
    unseen = [
        f"{row['aspect']}: {' / '.join(row['values'])}" for row in comparison.architecture if row["aspect"] in UNDRAWN
    ]
    if unseen:
        lines = "<br/>".join(esc(line) for line in textwrap.wrap("also differs: " + " · ".join(unseen), 70))
        rows.append(f'<tr><td colspan="{2 * len(cells)}">{lines}</td></tr>')
    return f'<table border="0" cellspacing="4" cellpadding="2">{"".join(rows)}</table>'


def dot_lines(comparison: Comparison, dpi: int | None = None) -> Iterable[str]:
    """The figure's DOT text (``dpi``: the resolution a PNG is drawn at)."""
    colours = style.theme("light")
    yield "digraph diff {"
    yield from schematic.graph_lines(_legend(comparison, colours), colours, dpi)
    outlined = set().union(*marks(comparison))
    ids = schematic.Marks()  # one per drawing: the element ids stay unique across both models
    for number, model in enumerate(comparison.words):
        yield from _model(number, model, outlined, ids, colours)
    yield '  { rank=same; "m0cap"; "m1cap"; }'
    yield '  "m0cap" -> "m1cap" [style=invis];'  # the first model left
    for node in sorted(name for name in outlined if not name.endswith("layer")):
        yield f'  "{node}" [color="{DIFFERS}", penwidth={MARK_WIDTH}];'
    yield "}"


def _model(
    number: int, model: aspects.ModelWords, outlined: set[str], ids: schematic.Marks, colours: dict[str, Any]
) -> Iterable[str]:
    """One model's cluster: its caption over its columns, cross-attention from the encoder's output."""
    prefix = f"m{number}"
    cols = [stack.column for stack in model.stacks]
    named = f"{prefix}.{model.kind.get('model', '')}"  # ids from the model's name, apart per side
    yield schematic.model_frame(number, named, colours, ids)
    yield schematic.caption_node(prefix, named, model.kind, cols, colours, ids)
    for side, column in enumerate(cols):
        column_prefix = f"{prefix}c{side}"
        for line in schematic.column_lines(column_prefix, column, ids, named, colours):
            yield line
            if (
                line.lstrip().startswith(f'subgraph "cluster_{column_prefix}layer"')
                and column_prefix + "layer" in outlined
            ):
                yield f'  color="{DIFFERS}"; penwidth={MARK_WIDTH};'  # later than the frame's own colour: it wins
        # the encoder left of the decoder (ordering=out); a decoder starts as low as its cross-attention needs
        yield f'  "{prefix}cap" -> "{column_prefix}in" [style=invis{", weight=0" * side}];'
    yield from schematic.cross_edges(prefix, cols, colours, ids)
    yield "  }"


def dot_text(comparison: Comparison, dpi: int | None = None) -> str:
    return "\n".join(dot_lines(comparison, dpi)) + "\n"


# --- Mermaid -------------------------------------------------------------------------------------


def mermaid_lines(comparison: Comparison) -> Iterable[str]:
    """The same figure as a Mermaid flowchart: the schematic's columns, the first model left, the
    red outlines."""
    title = f"{comparison.models[0]} vs {comparison.models[1]} · outlined in red: differs from the other model"
    yield from schematic.mermaid_lines(comparison.graphs, title=title, in_order=True)
    for node in sorted(set().union(*marks(comparison))):
        yield f"  style {node} stroke:{DIFFERS},stroke-width:{MARK_WIDTH}px"


def mermaid_text(comparison: Comparison) -> str:
    return "\n".join(mermaid_lines(comparison)) + "\n"


# --- the page ------------------------------------------------------------------------------------


def figure(comparison: Comparison, fmt: str) -> str | bytes:
    """The figure in ``fmt``: ``svg``, ``png``, ``pdf``, ``dot``, ``mermaid``, ``html`` (a page), or the
    editable ``tex`` and ``drawio`` drawn from Graphviz's layout of the same DOT."""
    from bertgraph.render import PNG_DPI, graphviz_run

    if fmt == "dot":
        return dot_text(comparison)
    if fmt in ("tex", "drawio"):
        from bertgraph.render.editable import editable_text

        return editable_text(dot_text(comparison), fmt, "model comparison")
    if fmt == "mermaid":
        return mermaid_text(comparison)
    if fmt == "html":
        from bertgraph.render.diff_page import page

        svg = graphviz_run.render(dot_text(comparison), "svg").decode("utf-8")
        return page(comparison, svg)
    return graphviz_run.render(dot_text(comparison, PNG_DPI if fmt == "png" else None), fmt)
