"""The attention masks figure: one grid per distinct mask, query rows × key columns, per model.

Drawn as Graphviz HTML-like tables (one node per model, chained top to bottom by invisible edges)
so SVG, PNG and PDF come from the one Graphviz runner; the Markdown page links the SVG and
tabulates the masks; JSON gives allowed[q][k].
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bertgraph.graph.masks import Example, Mask
from bertgraph.render.escape import dot_html, markdown_text, markdown_url

FORMATS = ("svg", "png", "pdf", "dot", "json", "markdown")
ALLOWED, MASKED, PADDING = "#2b6cb0", "#cbd5e0", "#f6ad55"
LEGEND = ((ALLOWED, "allowed"), (MASKED, "masked"), (PADDING, "masked: padding"))
CELL = 14  # points per grid cell
_FIXED = f'WIDTH="{CELL + 2}" HEIGHT="{CELL}" FIXEDSIZE="TRUE"'  # an index cell
_SQUARE = f'WIDTH="{CELL}" HEIGHT="{CELL}" FIXEDSIZE="TRUE"'  # a mask or legend cell


@dataclass(frozen=True)
class ModelMasks:
    """A model's name and its distinct masks."""

    model: str
    masks: tuple[Mask, ...]


def masks_of(named_graphs: Iterable[tuple[str, Any]], example: Example) -> list[ModelMasks]:
    """The distinct masks of each ``(name, traced graph)`` on ``example``, in the order given."""
    from bertgraph.graph.masks import model_masks

    return [ModelMasks(name, tuple(model_masks(graph, example))) for name, graph in named_graphs]


def layers_text(layers: Sequence[int]) -> str:
    """``layers 0–11``; ``layers 1, 2, 4, 5`` (a run of three or more as its ends)."""
    runs: list[list[int]] = []
    for layer in layers:
        if runs and runs[-1][-1] + 1 == layer:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    parts = [f"{run[0]}–{run[-1]}" if len(run) >= 3 else ", ".join(map(str, run)) for run in runs]
    return ("layer " if len(layers) == 1 else "layers ") + ", ".join(parts)


def title(mask: Mask) -> str:
    """``decoder · layers 1, 2, 4, 5: sliding-window(2)``."""
    return f"{mask.stack} · {layers_text(mask.layers)}: {mask.kind}"


def cell_colour(mask: Mask, q: int, k: int) -> str:
    """Allowed; masked because the key (or the query) is padding; otherwise masked."""
    if mask.allowed[q][k]:
        return ALLOWED
    return PADDING if mask.key_padding[k] or mask.query_padding[q] else MASKED


def _grid(mask: Mask) -> str:
    """One mask as a table: a title row, key indices, then a query index and a cell per key."""
    keys = len(mask.key_padding)
    head = "".join(_index(k, mask.key_padding[k]) for k in range(keys))
    rows = [f'<TR><TD {_FIXED}><FONT POINT-SIZE="8">q\\k</FONT></TD>{head}</TR>']
    for q in range(len(mask.allowed)):
        cells = "".join(
            f'<TD {_SQUARE} BORDER="1" COLOR="white" BGCOLOR="{cell_colour(mask, q, k)}"></TD>' for k in range(keys)
        )
        rows.append(f"<TR>{_index(q, mask.query_padding[q])}{cells}</TR>")
    # Fixed in size: a long title would otherwise spread the grid's columns apart.
    width, height = (keys + 1) * (CELL + 4) + 2, (len(mask.allowed) + 1) * (CELL + 4) + 2
    grid = (
        f'<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="1" FIXEDSIZE="TRUE" WIDTH="{width}" HEIGHT="{height}">'
        f"{''.join(rows)}</TABLE>"
    )
    return (
        f'<TABLE BORDER="0" CELLSPACING="2"><TR><TD ALIGN="LEFT"><B>{dot_html(title(mask))}</B></TD></TR>'
        f'<TR><TD ALIGN="LEFT">{grid}</TD></TR></TABLE>'
    )


def _index(position: int, padding: bool) -> str:
    text = f"{position}p" if padding else str(position)
    colour = "#b7791f" if padding else "#4a5568"
    return f'<TD {_FIXED}><FONT POINT-SIZE="8" COLOR="{colour}">{text}</FONT></TD>'


def _legend() -> str:
    cells = "".join(
        f'<TD {_SQUARE} BGCOLOR="{colour}"></TD><TD ALIGN="LEFT">{dot_html(text)}</TD>' for colour, text in LEGEND
    )
    note = "rows: queries, columns: keys; p: a padding token; layers count from 0"
    return f'<TABLE BORDER="0" CELLSPACING="4"><TR>{cells}<TD ALIGN="LEFT">{dot_html(note)}</TD></TR></TABLE>'


def dot_source(models: Sequence[ModelMasks], dpi: int | None = None) -> str:
    """The figure as DOT: a legend, then one row of grids per model (each with a stable id from its name)."""
    from bertgraph.render.ids import ElementIds

    ids = ElementIds()
    lines = [
        "digraph masks {",
        f'  graph [rankdir=TB, bgcolor="white", nodesep=0.3, ranksep=0.25{f", dpi={dpi}" if dpi else ""}];',
        '  node [shape=plaintext, fontname="Helvetica", fontsize=11, margin=0];',
        "  edge [style=invis];",
        f'  legend [id="{ids("masks.legend")}", class="role-legend", label=<{_legend()}>];',
    ]
    previous = "legend"
    for number, entry in enumerate(models):
        grids = "".join(f'<TD VALIGN="TOP">{_grid(mask)}</TD>' for mask in entry.masks)
        name = f'<FONT POINT-SIZE="14"><B>{dot_html(entry.model)}</B></FONT>'
        header = f'<TR><TD ALIGN="LEFT" COLSPAN="{max(1, len(entry.masks))}">{name}</TD></TR>'
        label = f'<TABLE BORDER="0" CELLSPACING="8">{header}<TR>{grids or "<TD>no attention</TD>"}</TR></TABLE>'
        lines.append(f'  model{number} [id="{ids(entry.model + ".masks")}", class="role-masks", label=<{label}>];')
        lines.append(f"  {previous} -> model{number};")
        previous = f"model{number}"
    lines.append("}")
    return "\n".join(lines) + "\n"


def json_text(models: Sequence[ModelMasks]) -> str:
    """``{"models": [{"model", "masks": [...]}]}``, one line per mask, so a grid stays readable."""
    entries = []
    for entry in models:
        masks = ",\n".join(f"    {json.dumps(mask.as_json())}" for mask in entry.masks)
        entries.append(f'  {{"model": {json.dumps(entry.model)}, "masks": [\n{masks}\n  ]}}')
    return '{"models": [\n' + ",\n".join(entries) + "\n]}\n"


def markdown_page(models: Sequence[ModelMasks], svg_name: str, example: str) -> str:
    """The page: the SVG, then a table of every mask with its allowed pairs."""
    lines = [
        "# Attention masks",
        "",
        f"Each grid is a mask the model computes, evaluated from its trace on {markdown_text(example)}.",
        "",
        f"![attention masks]({markdown_url(svg_name)})",
        "",
        "| model | stack | layers | kind | query × key | allowed pairs |",
        "| --- | --- | --- | --- | --- | ---: |",
    ]
    for entry in models:
        for mask in entry.masks:
            size = f"{len(mask.allowed)} × {len(mask.key_padding)}"
            pairs = sum(sum(row) for row in mask.allowed)
            layers = ", ".join(str(layer) for layer in mask.layers)
            cells = [entry.model, mask.stack, layers, mask.kind, size, str(pairs)]
            lines.append("| " + " | ".join(markdown_text(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


TEXT_CELLS = {ALLOWED: "■", MASKED: "·", PADDING: "░"}


def text_grid(mask: Mask) -> list[str]:
    """One mask as monospaced lines (■ allowed, · masked, ░ masked: padding), keys across, queries down."""
    keys = len(mask.key_padding)

    def index(position: int, padding: bool) -> str:
        return f"{position}p" if padding else str(position)

    width = max(len(index(n, True)) for n in range(max(keys, len(mask.allowed))))
    lines = ["q\\k".ljust(width + 1) + " ".join(index(k, mask.key_padding[k]).rjust(width) for k in range(keys))]
    for q in range(len(mask.allowed)):
        cells = " ".join(TEXT_CELLS[cell_colour(mask, q, k)].rjust(width) for k in range(keys))
        lines.append(index(q, mask.query_padding[q]).ljust(width + 1) + cells)
    return lines


def markdown_section(models: Sequence[ModelMasks], example: str, heading: str = "##") -> list[str]:
    """The masks as a page section that needs no image: per mask its title and a text grid."""
    lines = [
        f"{heading} Attention masks",
        "",
        f"Each grid is a mask the model computes, evaluated from its trace on {markdown_text(example)}: "
        "a query row may attend the key columns marked ■ (· masked, ░ masked because it is padding; "
        "`p` marks a padding position).",
        "",
    ]
    for entry in models:
        for mask in entry.masks:
            lines += [f"**{markdown_text(entry.model)}** · {markdown_text(title(mask))}", "", "```text"]
            lines += [*text_grid(mask), "```", ""]
    return lines


def section_for(graphs: Sequence[Any], heading: str = "##") -> list[str]:
    """The masks section of a page about traced ``graphs`` (the default example); ONNX files record
    no masks, so they get none."""
    from bertgraph.graph import schema as g

    traced = [graph for graph in graphs if graph.graph.get(g.G_SOURCE) != "onnx"]
    if not traced:
        return []
    example = Example()
    found = masks_of(((str(graph.graph.get(g.G_NAME, "")), graph) for graph in traced), example)
    return markdown_section(found, example_words(found, example), heading)


def example_words(models: Sequence[ModelMasks], example: Example) -> str:
    """``8 tokens, the last 2 padding`` (and the decoder's when a cross mask is drawn)."""
    words = f"{example.seq_len} tokens, the last {example.pad} padding"
    if any(mask.stack == "cross" for entry in models for mask in entry.masks):
        words += f"; {example.target_len} decoder tokens, the last {example.pad} padding"
    return words


def figure(models: Sequence[ModelMasks], fmt: str) -> str | bytes:
    """The figure in svg, png, pdf or dot."""
    from bertgraph.render import PNG_DPI, graphviz_run

    source = dot_source(models, PNG_DPI if fmt == "png" else None)
    return source if fmt == "dot" else graphviz_run.render(source, fmt)
