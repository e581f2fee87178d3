"""The attention masks figure: one grid per distinct mask, query rows × key columns, per model.

Drawn as Graphviz HTML-like tables (one node per model, chained top to bottom by invisible edges)
so SVG, PNG and PDF come from the one Graphviz runner; the Markdown page links the SVG and
tabulates the masks; JSON gives allowed[q][k].
"""

from __future__ import annotations

import itertools
import json
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bertgraph.graph.masks import Example, Mask, example_for
from bertgraph.render import style
from bertgraph.render.escape import dot_html, markdown_text, markdown_url

FORMATS = ("svg", "png", "pdf", "dot", "json", "markdown")
# The cells' looks are the style table's (render/style.py); a padding query's row is a paler padding.
ALLOWED, MASKED, PADDING = (style.look(f"mask-{cell}").fill for cell in ("allowed", "masked", "padding"))
PADDING_QUERY = "#fde6c8"
LEGEND = (
    (ALLOWED, "allowed"),
    (MASKED, "masked"),
    (PADDING, "masked: a padding key"),
    (PADDING_QUERY, "a padding query (its row is not used)"),
)
CELL = 14  # points per grid cell, where every token has one
INDEXED = 12  # the most tokens a grid numbers one by one; longer ones are drawn to scale
GRID = 180  # points a grid drawn to scale spans at most (its longer side): about what 11 numbered cells take
GRID_BLOCKS = 240  # the most squares a side of it has (a point each, then): longer masks in squares of tokens
TEXT_BLOCKS = 24  # the most cells a text grid has per side
TITLE_CHARACTERS = 34  # a title's lines, so that grids stay side by side within a page
PER_ROW = 3  # grids side by side (an encoder-decoder's three)
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


def title_lines(mask: Mask) -> list[str]:
    """The title as the figure sets it: stack and kind, then the layers wrapped to a grid's width."""
    head = "cross-attention" if mask.stack == mask.kind else f"{mask.stack}: {mask.kind}"
    return [head, *textwrap.wrap(layers_text(mask.layers), TITLE_CHARACTERS)]


def cell_colour(mask: Mask, q: int, k: int) -> str:
    """A padding query's row alike in every grid (nothing reads its output, whatever the model lets it
    attend); else allowed, masked because the key is padding, or otherwise masked."""
    if mask.query_padding[q]:
        return PADDING_QUERY
    if mask.allowed[q][k]:
        return ALLOWED
    return PADDING if mask.key_padding[k] else MASKED


def blocks(mask: Mask, most: int) -> tuple[int, list[list[str]]]:
    """The mask in squares of b × b tokens, at most ``most`` a side: (b, each square's colour), the
    colour most of its tokens have (b = 1: every token's own; ties go to the earlier of allowed,
    padding key, masked, padding query)."""
    import numpy as np

    queries, keys = len(mask.allowed), len(mask.key_padding)
    size = max(1, -(-max(queries, keys) // most))
    order = (ALLOWED, PADDING, MASKED, PADDING_QUERY)
    allowed = np.frombuffer(b"".join(bytes(row) for row in mask.allowed), dtype=np.uint8).reshape(queries, keys)
    key_padding = np.array(mask.key_padding, dtype=bool)[None, :]
    codes = np.where(allowed == 1, np.uint8(0), np.where(key_padding, np.uint8(1), np.uint8(2))).astype(np.uint8)
    codes[np.array(mask.query_padding, dtype=bool)] = 3
    rows, columns = -(-queries // size), -(-keys // size)
    filled = np.full((rows * size, columns * size), len(order), dtype=np.uint8)  # past the end: no token
    filled[:queries, :keys] = codes
    squares = filled.reshape(rows, size, columns, size)
    counts = np.stack([(squares == code).sum(axis=(1, 3)) for code in range(len(order))])
    return size, [[order[code] for code in line] for line in counts.argmax(axis=0).tolist()]


@dataclass(frozen=True)
class Grid:
    """A grid as an HTML-like table of a fixed size in points."""

    table: str
    width: int
    height: int


def _cells(mask: Mask) -> tuple[str, str, Grid]:
    """One mask's three cells, each in a row of its own across the model's grids (so titles, notes and
    grids line up, and no grid is stretched to its neighbour's height): the title in the attention
    kind's colours, how to read a grid drawn to scale, and the grid."""

    palette = style.theme("light")["kinds"][style.attention_kind("attention", [mask.kind])]
    lines = "".join(f'{dot_html(line)}<BR ALIGN="LEFT"/>' for line in title_lines(mask))
    head = (
        f'<TD ALIGN="LEFT" VALIGN="TOP" BALIGN="LEFT" BGCOLOR="{palette.fill}" COLOR="{palette.border}" BORDER="1" '
        f'CELLPADDING="3"><FONT COLOR="{palette.text}"><B>{lines}</B></FONT></TD>'
    )
    if max(len(mask.allowed), len(mask.key_padding)) <= INDEXED:
        return head, "<TD></TD>", _indexed_grid(mask)
    size, grid = _scaled_grid(mask)
    notes = "".join(f'{dot_html(line)}<BR ALIGN="LEFT"/>' for line in _axes(mask, size))
    note = f'<TD ALIGN="LEFT" VALIGN="TOP" BALIGN="LEFT"><FONT POINT-SIZE="9">{notes}</FONT></TD>'
    return head, note, grid


def _top(grid: Grid, height: int) -> str:
    """A grid's cell, the grid at its top: Graphviz centres a table in a taller cell whatever VALIGN
    says, so the grid and an empty cell below it fill a table as tall as the row's tallest grid."""
    filler = f'<TR><TD WIDTH="{grid.width}" HEIGHT="{height - grid.height}" FIXEDSIZE="TRUE"></TD></TR>'
    return (
        f'<TD ALIGN="LEFT" VALIGN="TOP"><TABLE BORDER="0" CELLSPACING="0" CELLPADDING="0" FIXEDSIZE="TRUE" '
        f'WIDTH="{grid.width}" HEIGHT="{height}"><TR><TD>{grid.table}</TD></TR>'
        f"{filler if height > grid.height else ''}</TABLE></TD>"
    )


def _indexed_grid(mask: Mask) -> Grid:
    """A short mask as a table: key indices, then a query index and a cell per key."""
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
    table = (
        f'<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="1" FIXEDSIZE="TRUE" WIDTH="{width}" HEIGHT="{height}">'
        f"{''.join(rows)}</TABLE>"
    )
    return Grid(table, width, height)


def _scaled_grid(mask: Mask) -> tuple[int, Grid]:
    """A long mask to scale, and the tokens a square of it stands for: squares of tokens, each row of
    squares as runs of one colour (a row of its own table, so every run is exactly as wide as its
    tokens), equal rows merged."""
    size, grid = blocks(mask, GRID_BLOCKS)
    unit = max(1, GRID // max(len(grid), len(grid[0])))
    merged: list[tuple[list[str], int]] = []
    for line in grid:
        if merged and merged[-1][0] == line:
            merged[-1] = (line, merged[-1][1] + 1)
        else:
            merged.append((line, 1))
    rows = []
    for line, count in merged:
        runs = [(colour, len(list(group))) for colour, group in itertools.groupby(line)]
        height = unit * count
        cells = "".join(
            f'<TD WIDTH="{unit * n}" HEIGHT="{height}" FIXEDSIZE="TRUE" BGCOLOR="{colour}"></TD>' for colour, n in runs
        )
        rows.append(
            f'<TR><TD><TABLE BORDER="0" CELLSPACING="0" CELLPADDING="0" FIXEDSIZE="TRUE" '
            f'WIDTH="{unit * len(line)}" HEIGHT="{height}"><TR>{cells}</TR></TABLE></TD></TR>'
        )
    table = "".join(rows)
    width, height = unit * len(grid[0]), unit * len(grid)
    table = (
        f'<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="0" FIXEDSIZE="TRUE" WIDTH="{width}" HEIGHT="{height}">'
        f"{table}</TABLE>"
    )
    return size, Grid(table, width, height)


def _axes(mask: Mask, size: int) -> list[str]:
    """How to read a grid drawn to scale: ``queries ↓ 0–191, keys → 0–191``, where padding starts, and the
    tokens a square stands for."""
    lines = [f"queries ↓ 0–{len(mask.query_padding) - 1}, keys → 0–{len(mask.key_padding) - 1}"]
    starts = [padding.index(True) if True in padding else None for padding in (mask.query_padding, mask.key_padding)]
    if starts[0] is not None and starts[0] == starts[1]:
        lines.append(f"padding from {starts[0]}")
    elif any(start is not None for start in starts):
        found = [f"{start} ({side})" for start, side in zip(starts, ("queries", "keys")) if start is not None]
        lines.append("padding from " + ", ".join(found))
    if size > 1:
        lines.append(f"a square is {size} × {size} tokens")
    return lines


def _index(position: int, padding: bool) -> str:
    text = f"{position}p" if padding else str(position)
    colour = "#b7791f" if padding else "#4a5568"
    return f'<TD {_FIXED}><FONT POINT-SIZE="8" COLOR="{colour}">{text}</FONT></TD>'


def _legend(models: Sequence[ModelMasks]) -> str:
    """Two rows: the cells' colours and the attention kinds' (the diagrams'), then how to read a grid."""

    kinds = style.theme("light")["kinds"]
    present = {style.attention_kind("attention", [mask.kind]) for entry in models for mask in entry.masks}
    swatches = [(colour, colour, text) for colour, text in LEGEND] + [
        (kinds[kind].fill, kinds[kind].border, style.KIND_NAMES[kind]) for kind in style.KIND_NAMES if kind in present
    ]
    cells = [
        f'<TD {_SQUARE} BGCOLOR="{fill}" COLOR="{border}" BORDER="1"></TD><TD ALIGN="LEFT">{dot_html(text)}</TD>'
        for fill, border, text in swatches
    ]
    rows = ["".join(cells[i : i + 4]) for i in range(0, len(cells), 4)]
    note = "rows: queries, columns: keys; p: a padding token; layers count from 0"
    rows.append(f'<TD ALIGN="LEFT" COLSPAN="8">{dot_html(note)}</TD>')
    return '<TABLE BORDER="0" CELLSPACING="4">' + "".join(f"<TR>{row}</TR>" for row in rows) + "</TABLE>"


def dot_source(models: Sequence[ModelMasks], dpi: int | None = None) -> str:
    """The figure as DOT: a legend, then the grids of each model, at most three side by side (each model
    with a stable id from its name)."""
    from bertgraph.render.ids import ElementIds

    ids = ElementIds()
    lines = [
        "digraph masks {",
        f'  graph [rankdir=TB, bgcolor="white", nodesep=0.3, ranksep=0.25{f", dpi={dpi}" if dpi else ""}];',
        '  node [shape=plaintext, fontname="Helvetica", fontsize=11, margin=0];',
        "  edge [style=invis];",
        f'  legend [id="{ids("masks.legend")}", class="role-legend", label=<{_legend(models)}>];',
    ]
    previous = "legend"
    for number, entry in enumerate(models):
        cells = [_cells(mask) for mask in entry.masks]
        body = []
        for first in range(0, len(cells), PER_ROW):
            chunk = cells[first : first + PER_ROW]
            body += ["<TR>" + "".join(head for head, _, _ in chunk) + "</TR>"]
            body += ["<TR>" + "".join(note for _, note, _ in chunk) + "</TR>"]
            tallest = max(grid.height for _, _, grid in chunk)
            body.append("<TR>" + "".join(_top(grid, tallest) for _, _, grid in chunk) + "</TR>")
        name = f'<FONT POINT-SIZE="14"><B>{dot_html(entry.model)}</B></FONT>'
        header = f'<TR><TD ALIGN="LEFT" COLSPAN="{min(PER_ROW, max(1, len(entry.masks)))}">{name}</TD></TR>'
        rows = "".join(body) or "<TR><TD>no attention</TD></TR>"
        label = f'<TABLE BORDER="0" CELLSPACING="6">{header}{rows}</TABLE>'
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


TEXT_CELLS = {ALLOWED: "■", MASKED: "·", PADDING: "░", PADDING_QUERY: " "}


def text_grid(mask: Mask) -> list[str]:
    """One mask as monospaced lines (■ allowed, · masked, ░ masked: padding key; a padding query's row
    blank), keys across, queries down; a long one in squares of tokens, each row named by its first
    token, the keys' range above them."""
    size, grid = blocks(mask, TEXT_BLOCKS)

    def index(position: int, padding: Sequence[bool]) -> str:
        return f"{position}p" if padding[position] else str(position)

    width = max(len(f"{n}p") for n in range(0, max(len(mask.allowed), len(mask.key_padding)), size))
    if size == 1:
        columns = " ".join(index(k, mask.key_padding).rjust(width) for k in range(len(mask.key_padding)))
    else:  # one character a square: the keys' range, not each square's first key
        width = max(width, 3)
        columns = f"keys 0–{len(mask.key_padding) - 1} →"
    lines = ["q\\k".ljust(width + 1) + columns]
    for number, line in enumerate(grid):
        cells = " ".join(TEXT_CELLS[colour].rjust(width if size == 1 else 1) for colour in line)
        lines.append((index(number * size, mask.query_padding).ljust(width + 1) + cells).rstrip())
    return lines


def markdown_section(models: Sequence[ModelMasks], example: str, heading: str = "##") -> list[str]:
    """The masks as a page section that needs no image: per mask its title and a text grid."""
    lines = [
        f"{heading} Attention masks",
        "",
        f"Each grid is a mask the model computes, evaluated from its trace on {markdown_text(example)}: "
        "a query row may attend the key columns marked ■ (· masked, ░ masked because the key is padding; "
        "a padding query's row is left blank, since nothing reads it; `p` marks a padding position).",
        "",
    ]
    for entry in models:
        for mask in entry.masks:
            size, _ = blocks(mask, TEXT_BLOCKS)
            each = f" · a cell is {size} × {size} tokens" if size > 1 else ""
            lines += [f"**{markdown_text(entry.model)}** · {markdown_text(title(mask))}{each}", "", "```text"]
            lines += [*text_grid(mask), "```", ""]
    return lines


def section_for(graphs: Sequence[Any], heading: str = "##") -> list[str]:
    """The masks section of a page about traced ``graphs`` (the default example); ONNX files record
    no masks, so they get none."""
    from bertgraph.graph import schema as g

    traced = [graph for graph in graphs if graph.graph.get(g.G_SOURCE) != "onnx"]
    if not traced:
        return []
    example = example_for(traced)
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
