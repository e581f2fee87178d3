"""The families schematic as DOT: per model a compact column (encoder left, decoder right),
the layer drawn once inside an "N ×" frame, facts in a caption, a few colours each meaning one role.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

import networkx as nx

from bertgraph.graph.kinds import structure_words
from bertgraph.graph.schematic import Column, Step, columns
from bertgraph.render import style
from bertgraph.render.escape import dot_html as esc
from bertgraph.render.escape import mermaid_front_matter
from bertgraph.render.escape import mermaid_text as mm
from bertgraph.render.ids import ElementIds, class_text, look_classes

ORDER = {"encoder-only": 0, "decoder-only": 1, "encoder-decoder": 2}
FONT = 11
# Legend entries per row (swatch and name each): two per model keeps one model's legend as narrow as its column.
LEGEND_PER_MODEL = 2
LEGEND_MOST = 4


def step_kind(column: Column, step: Step) -> str:
    """The diagrams' colour kind of a step (render/style.py): one role, one look in every figure.

    Self-attention takes its kind's colour when every layer's is the same colour (ModernBERT's mix of
    bidirectional and sliding-window layers takes attention's own), cross-attention the cross colour."""
    if step.role == "attention":
        kinds = {style.attention_kind("attention", [label]) for label in column.pattern}
        return kinds.pop() if len(kinds) == 1 else "attention"
    return {"norm": "normalisation", "cross-attention": "attention-cross", "feed-forward": "feed-forward"}.get(
        step.role, "other"
    )


def embeddings_text(column: Column) -> str:
    """The embeddings box: the positions added there (absolute ones only) and a norm after them."""
    return " · ".join(
        ["embeddings", *(f"{kind} positions" for kind in column.positions)] + ["LayerNorm"] * column.embedding_norm
    )


def _box(ident: str, text: str, kind: str, colours: dict[str, Any], marks: str = "") -> str:
    # " · " breaks a box's text into lines: narrow columns keep the figure's text large when scaled.
    palette = colours["kinds"][kind]
    label = "<br/>".join(esc(part) for part in text.split(" · "))
    dashed = ', style="rounded,filled,dashed"' if kind == "io" else ""
    return (
        f'  "{ident}" [label=<{label}>, fillcolor="{palette.fill}", color="{palette.border}", '
        f'fontcolor="{palette.text}"{dashed}{marks}];'
    )


class Marks:
    """Stable ids (from the model's name, the stack and the step) and classes for the schematic's DOT."""

    def __init__(self) -> None:
        self.ids = ElementIds()
        self.names: dict[str, str] = {}  # DOT name → the name its id is made from

    def __call__(self, ident: str, name: str, classes: list[str]) -> str:
        self.names[ident] = name
        return f', id="{self.ids(name)}", class="{class_text(classes)}"'

    def frame(self, name: str, classes: list[str]) -> str:
        return f' id="{self.ids(name)}"; class="{class_text(classes)}";'

    def edge(self, source: str, target: str, classes: list[str]) -> str:
        return f'id="{self.ids.edge(self.names[source], self.names[target])}", class="{class_text(classes)}"'


def _column(prefix: str, column: Column, colours: dict[str, Any], marks: Marks, model: str) -> Iterable[str]:
    """One stack: tokens, embeddings, the framed layer with its residuals, final norm, output; every
    element with its id (from ``model``, the stack and the step) and the classes of its look."""
    base = f"{model}.{column.kind}"
    yield (
        f'  subgraph "cluster_{prefix}" {{ label=<{esc(column.kind)}>; style="rounded"; '
        f'color="{colours["muted"]}"; fontcolor="{colours["text"]}";' + marks.frame(base, ["cluster-stack"])
    )
    yield _box(f"{prefix}in", "tokens", "io", colours, marks(f"{prefix}in", f"{base}.tokens", look_classes("io")))
    mark = marks(f"{prefix}emb", f"{base}.embeddings", look_classes("embedding"))
    yield _box(f"{prefix}emb", embeddings_text(column), "embedding", colours, mark)
    yield (
        f'  subgraph "cluster_{prefix}layer" {{ label=<{esc(_times(column))}>; labeljust=r; style="dashed";'
        f' color="{colours["muted"]}"; fontcolor="{colours["text"]}";' + marks.frame(f"{base}.layer", ["cluster-layer"])
    )
    for number, step in enumerate(column.steps):
        kind = step_kind(column, step)
        classes = ["role-residual"] if step.role == "residual" else look_classes(kind)
        mark = marks(f"{prefix}s{number}", f"{base}.layer.{number}-{step.role}", classes)
        if step.role == "residual":
            yield (
                f'  "{prefix}s{number}" [label="+", shape=circle, width=0.22, height=0.22, fixedsize=true,'
                f' fillcolor="{colours["background"]}", color="{colours["edge"]}", fontcolor="{colours["text"]}"'
                f"{mark}];"
            )
            continue
        yield _box(f"{prefix}s{number}", step_text(column, step), kind, colours, mark)
    yield "  }"
    if column.final_norm:
        mark = marks(f"{prefix}fn", f"{base}.norm", look_classes("normalisation"))
        yield _box(f"{prefix}fn", "final norm", "normalisation", colours, mark)
    mark = marks(f"{prefix}out", f"{base}.output", look_classes("io"))
    yield _box(f"{prefix}out", _output(column), "io", colours, mark)
    yield "  }"
    chain = [f"{prefix}in", f"{prefix}emb"] + [f"{prefix}s{n}" for n in range(len(column.steps))]
    chain += [f"{prefix}fn"] * column.final_norm + [f"{prefix}out"]
    for a, b in itertools.pairwise(chain):
        yield f'  "{a}" -> "{b}" [{marks.edge(a, b, ["edge-data"])}];'
    for source, residual in column.skips:
        start = f"{prefix}emb" if source < 0 else f"{prefix}s{source}"
        # the residual path: drawn beside the chain, it must not pull the boxes apart
        edge = marks.edge(start, f"{prefix}s{residual}", ["edge-residual"])
        yield f'  "{start}" -> "{prefix}s{residual}" [style=dashed, weight=0, {edge}];'


def _output(column: Column) -> str:
    return "encoder output" if column.kind == "encoder" else "next-token logits"


def figure_kinds(built: Sequence[tuple[dict[str, Any], list[Column]]]) -> list[str]:
    """The colour kinds the figure uses, in the legend's order (render/style.py's)."""
    present = {"io", "embedding"}
    for _, cols in built:
        for column in cols:
            present |= {step_kind(column, step) for step in column.steps if step.role != "residual"}
            present |= {"normalisation"} if column.final_norm else set()
    return [kind for kind in style.KIND_NAMES if kind in present]


def _cross(built: Sequence[tuple[dict[str, Any], list[Column]]]) -> bool:
    return any(step.role == "cross-attention" for _, cols in built for column in cols for step in column.steps)


def legend_entries(built: Sequence[tuple[dict[str, Any], list[Column]]]) -> list[tuple[str, str]]:
    """(colour kind, name) per legend entry; ``cross`` for the cross-attention arrow, ``residual`` for skips."""
    entries = [(kind, style.KIND_NAMES[kind]) for kind in figure_kinds(built)]
    if _cross(built):
        entries.append(("cross", "encoder output into cross-attention"))
    entries.append(("residual", "residual (dashed: the added input)"))
    return entries


def _legend(built: Sequence[tuple[dict[str, Any], list[Column]]], colours: dict[str, Any]) -> str:
    """The legend as an HTML-like table: a swatch per colour the figure uses, then its edges."""
    cells = []
    for kind, name in legend_entries(built):
        if kind in ("cross", "residual"):  # an edge: its line drawn in text, in the edge's colour
            colour = colours["kinds"]["attention-cross"].border if kind == "cross" else colours["edge"]
            line = "<b>━━▶</b>" if kind == "cross" else "- - ▶"
            swatch = f'<td><font color="{colour}">{line}</font></td>'
        else:
            palette = colours["kinds"][kind]
            swatch = f'<td bgcolor="{palette.fill}" color="{palette.border}" border="1" width="14"> </td>'
        cells.append(f'{swatch}<td align="left"><font color="{colours["text"]}">{esc(name)}</font></td>')
    per_row = min(LEGEND_MOST, LEGEND_PER_MODEL * len(built))
    rows = ["".join(cells[i : i + per_row]) for i in range(0, len(cells), per_row)]
    return (
        '<table border="0" cellspacing="3" cellpadding="1">' + "".join(f"<tr>{row}</tr>" for row in rows) + "</table>"
    )


def _times(column: Column) -> str:
    """The layer frame's label: "12 ×", "12 × (one shared layer)", "22 × [a, 2 × b] repeating"."""
    if column.shared:
        return f"{column.layers} × (one shared layer)"
    if len(column.pattern) > 1 and not column.runs:
        return f"{column.layers} × [{', '.join(_counted(column.pattern))}] repeating"
    return f"{column.layers} ×"


def step_text(column: Column, step: Step) -> str:
    """A step's box text, " · " between its lines; self-attention says its kind or pattern, then
    what acts inside the step (q/k norms, rotary or relative positions)."""
    lines = [step.text]
    if step.role == "attention" and len(column.pattern) == 1:
        lines = [f"{column.pattern[0]} self-attention"]
    elif step.role == "attention" and column.runs:
        lines += [_run_text(run) for run in column.runs]
    elif step.role == "attention" and column.pattern:
        lines += _counted(column.pattern)
    return " · ".join([*lines, *step.details])


def _counted(cycle: list[str]) -> list[str]:
    """A cycle with its neighbours of one label counted: [bidirectional, 2 × sliding-window(64)]."""
    counted: list[list[Any]] = []
    for label in cycle:
        if counted and counted[-1][0] == label:
            counted[-1][1] += 1
        else:
            counted.append([label, 1])
    return [label if n == 1 else f"{n} × {label}" for label, n in counted]


def _run_text(run: tuple[int, int, str]) -> str:
    first, last, label = run
    return f"layer {first}: {label}" if first == last else f"layers {first}–{last}: {label}"


def built_columns(graphs: Sequence[nx.DiGraph]) -> list[tuple[dict[str, Any], list[Column]]]:
    """Each model's kind and columns: encoder-only, decoder-only, encoder-decoder, in that order."""
    return sorted((columns(graph) for graph in graphs), key=lambda kc: ORDER.get(kc[0]["structure"], 3))


def graph_lines(label: str, colours: dict[str, Any], dpi: int | None = None) -> Iterable[str]:
    """The DOT's settings for a figure made of these columns: its ``label`` (a legend) on top, the
    theme's background, boxes and edges (``dpi``: the resolution a PNG is drawn at)."""
    if dpi:
        yield f"  graph [dpi={dpi}];"
    yield (
        f'  graph [rankdir=TB, newrank=true, nodesep=0.15, ranksep=0.18, fontname="Helvetica", fontsize={FONT}, '
        f'bgcolor="{colours["background"]}", fontcolor="{colours["text"]}", labelloc=t, label=<{label}>];'
    )
    yield (
        f'  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize={FONT}, '
        'height=0.3, margin="0.08,0.03"];'
    )
    yield f'  edge [arrowsize=0.6, color="{colours["edge"]}"];'


def model_frame(number: int, model: str, colours: dict[str, Any], marks: Marks) -> str:
    """The opening of model ``number``'s frame (``cluster_m0``), its id from the model's name."""
    frame = marks.frame(model, ["cluster-model"])
    return f'  subgraph "cluster_m{number}" {{ label=""; style="rounded"; color="{colours["edge"]}";{frame}'


def caption_node(
    prefix: str, model: str, kind: dict[str, Any], cols: list[Column], colours: dict[str, Any], marks: Marks
) -> str:
    """The caption heading a model's columns (``{prefix}cap``), its id from ``model``."""
    mark = marks(f"{prefix}cap", f"{model}.caption", ["role-caption"])
    return (
        f'  "{prefix}cap" [shape=plaintext, style="", fontcolor="{colours["text"]}", '
        f"label=<{_caption(kind, cols)}>, ordering=out{mark}];"
    )


def cross_edges(prefix: str, cols: list[Column], colours: dict[str, Any], marks: Marks) -> Iterable[str]:
    """Keys and values of every decoder layer's cross-attention: the encoder's output, a bold arrow in
    cross-attention's colour."""
    if len(cols) != 2:
        return
    cross = colours["kinds"]["attention-cross"].border
    for n, step in enumerate(cols[1].steps):
        if step.role == "cross-attention":
            edge = marks.edge(f"{prefix}c0out", f"{prefix}c1s{n}", ["edge-cross"])
            yield f'  "{prefix}c0out" -> "{prefix}c1s{n}" [style=bold, color="{cross}", {edge}];'


def generate_lines(graphs: Sequence[nx.DiGraph], dpi: int | None = None, theme: str = "light") -> Iterable[str]:
    """The DOT text of the schematic: encoder-only, decoder-only, encoder-decoder, in that order
    (``dpi``: the resolution a PNG is drawn at), with a legend of the diagrams' colours on top."""
    colours = style.theme(theme)
    built = built_columns(graphs)
    yield "digraph schematic {"
    yield from graph_lines(_legend(built, colours), colours, dpi)
    marks = Marks()
    for number, (kind, cols) in enumerate(built):
        model = str(kind["model"])
        yield model_frame(number, model, colours, marks)
        # the caption heads the model's columns; all captions share the top rank, so a tall caption
        # never stretches another model's column (dot gives every rank one height across the figure)
        yield caption_node(f"m{number}", model, kind, cols, colours, marks)
        for side, column in enumerate(cols):
            yield from _column(f"m{number}c{side}", column, colours, marks, model)
        for side in range(len(cols)):
            # out-edges in declaration order, left to right (ordering=out): the encoder left of the decoder
            # a decoder fed by an encoder starts as low as its cross-attention needs (weight 0: no pull up)
            weight = ", weight=0" if side == 1 else ""
            yield f'  "m{number}cap" -> "m{number}c{side}in" [style=invis{weight}];'
        yield from cross_edges(f"m{number}", cols, colours, marks)
        yield "  }"
    yield "  { rank=same; " + " ".join(f'"m{n}cap";' for n in range(len(built))) + " }"
    yield "}"


def _caption_lines(kind: dict[str, Any], cols: list[Column]) -> list[str]:
    """The model's facts, one per line: name, structure, parameters, positions, each stack's, uses."""
    from bertgraph.render import figures

    lines = [kind["model"], structure_words(kind), f"{figures.count(kind['parameters'])} params"]
    if kind["position"]:
        lines.append("positions: " + ", ".join(kind["position"]))
    if len(cols) == 2 and cols[0].caption == cols[1].caption:  # T5: one set of facts for both stacks
        lines += ["encoder and decoder, each", *cols[0].caption]
    else:
        for column in cols:
            lines += [column.kind, *column.caption]
    if kind.get("uses"):
        lines += textwrap.wrap(f"used for: {kind['uses']}", 30)
    return lines


def _caption(kind: dict[str, Any], cols: list[Column]) -> str:
    """The caption as a Graphviz label: the name bold, the stack headings in italics."""
    headings = {"encoder and decoder, each", *(column.kind for column in cols)}
    lines = _caption_lines(kind, cols)
    marked = [f"<b>{esc(lines[0])}</b>"] + [
        f"<i>{esc(line)}</i>" if line in headings else esc(line) for line in lines[1:]
    ]
    return "<br/>".join(marked)


def column_lines(
    prefix: str, column: Column, marks: Marks, model: str, colours: dict[str, Any] | None = None
) -> Iterable[str]:
    """One stack's DOT lines, node ids starting with ``prefix``, element ids from ``model`` (one ``Marks``
    per drawing keeps them unique), in the look of ``colours`` (default: the light theme's): for
    figures made of these columns (the diff)."""
    return _column(prefix, column, colours or style.theme("light"), marks, model)


def caption_label(kind: dict[str, Any], cols: list[Column]) -> str:
    """A model's caption as a Graphviz label, for figures made of these columns."""
    return _caption(kind, cols)


def schematic_text(graphs: Sequence[nx.DiGraph], fmt: str, theme: str = "light") -> str | bytes:
    """The schematic as dot, svg, png, pdf, tex or drawio; the SVG's legend swatches classed like the
    boxes they explain."""
    from bertgraph.render import PNG_DPI, graphviz_run
    from bertgraph.render.ids import legend_classes

    source = "\n".join(generate_lines(graphs, PNG_DPI if fmt == "png" else None, theme)) + "\n"
    if fmt in ("tex", "drawio"):
        from bertgraph.render.editable import editable_text

        return editable_text(source, fmt, "families schematic")
    if fmt == "svg":
        return legend_classes(graphviz_run.render(source, fmt).decode("utf-8")).encode("utf-8")
    return source if fmt == "dot" else graphviz_run.render(source, fmt)


# --- Mermaid ----------------------------------------------------------------------------


def _mermaid_class(kind: str) -> str:
    return "k_" + kind.replace("-", "_")


def _mermaid_column(prefix: str, column: Column, indent: str) -> Iterable[str]:
    """One stack's nodes inside its subgraph, the steps inside the layer's "N ×" subgraph."""
    yield f'{indent}subgraph {prefix}["{mm(column.kind)}"]'
    yield f"{indent}  direction TB"
    yield f'{indent}  {prefix}in["tokens"]:::k_io'
    yield f'{indent}  {prefix}emb["{mm(embeddings_text(column).replace(" · ", chr(10)))}"]:::k_embedding'
    yield f'{indent}  subgraph {prefix}layer["{mm(_times(column))}"]'
    yield f"{indent}    direction TB"
    for number, step in enumerate(column.steps):
        if step.role == "residual":
            yield f'{indent}    {prefix}s{number}(("+")):::residual'
        else:
            text = step_text(column, step).replace(" · ", "\n")
            yield f'{indent}    {prefix}s{number}["{mm(text)}"]:::{_mermaid_class(step_kind(column, step))}'
    yield f"{indent}  end"
    if column.final_norm:
        yield f'{indent}  {prefix}fn["final norm"]:::k_normalisation'
    yield f'{indent}  {prefix}out["{_output(column)}"]:::k_io'
    yield f"{indent}end"


def _mermaid_edges(prefix: str, column: Column) -> Iterable[str]:
    chain = [f"{prefix}in", f"{prefix}emb"] + [f"{prefix}s{n}" for n in range(len(column.steps))]
    chain += [f"{prefix}fn"] * column.final_norm + [f"{prefix}out"]
    for a, b in itertools.pairwise(chain):
        yield f"  {a} --> {b}"
    for source, residual in column.skips:
        yield f"  {prefix + 'emb' if source < 0 else f'{prefix}s{source}'} -.-> {prefix}s{residual}"


def _mermaid_legend(built: Sequence[tuple[dict[str, Any], list[Column]]]) -> tuple[list[str], list[str]]:
    """The legend as a subgraph of one node per entry, each in the look it names, and the invisible
    links that stack them (unlinked, mermaid.js lays them out in one wide row)."""
    names = []
    lines = ['  subgraph legend["legend"]', "    direction TB"]
    for kind, name in legend_entries(built):
        if kind == "cross":
            names.append("legend_cross")
            lines.append(f'    legend_cross["{mm("thick teal arrow: " + name)}"]:::k_attention_cross')
        elif kind == "residual":
            names.append("legend_residual")
            lines.append(f'    legend_residual["{mm("dotted arrow: residual, from the added input")}"]:::caption')
        else:
            names.append(f"legend_{_mermaid_class(kind)}")
            lines.append(f'    legend_{_mermaid_class(kind)}["{mm(name)}"]:::{_mermaid_class(kind)}')
    lines.append("  end")
    return lines, [f"  {a} ~~~ {b}" for a, b in itertools.pairwise(names)]


def mermaid_lines(
    graphs: Sequence[nx.DiGraph], theme: str = "light", title: str | None = None, in_order: bool = False
) -> Iterable[str]:
    """The schematic as a Mermaid flowchart: the same columns, order, colours, legend and captions as the DOT.

    ``title``: the figure's own (default: the models named); ``in_order``: the models left to right
    as given, not by structure (a comparison keeps its first model left).
    """
    colours = style.theme(theme)
    built = [columns(graph) for graph in graphs] if in_order else built_columns(graphs)
    title = title or "families schematic: " + ", ".join(kind["model"] for kind, _ in built)
    yield "---"
    yield f"title: {mermaid_front_matter(title)}"
    yield "---"
    if theme == "dark":
        yield '%%{init: {"theme": "dark"}}%%'
    yield "flowchart TB"
    legend, edges = _mermaid_legend(built)
    blocks: list[list[str]] = []
    for number, (kind, cols) in enumerate(built):
        block = [f'  subgraph m{number}["{mm(kind["model"])}"]', "    direction TB"]
        caption = _caption_lines(kind, cols)[1:]
        block.append(f'    m{number}cap["{mm(chr(10).join(caption))}"]:::caption')
        for side, column in enumerate(cols):
            block += _mermaid_column(f"m{number}c{side}", column, "    ")
            edges.append(f"  m{number}cap ~~~ m{number}c{side}in")
            edges.extend(_mermaid_edges(f"m{number}c{side}", column))
        block.append("  end")
        blocks.append(block)
        if len(cols) == 2:
            edges += [
                f"  m{number}c0out ==> m{number}c1s{n}"
                for n, s in enumerate(cols[1].steps)
                if s.role == "cross-attention"
            ]
    # mermaid.js places side-by-side subgraphs right to left in the order they are declared: the legend right
    yield from legend
    for block in reversed(blocks):
        yield from block
    yield from edges
    cross = [n for n, edge in enumerate(edges) if " ==> " in edge]  # links are numbered in the order written
    if cross:
        border = colours["kinds"]["attention-cross"].border
        yield f"  linkStyle {','.join(map(str, cross))} stroke:{border},color:{border}"
    # frames as the DOT draws them: models and stacks outlined, the layer's "N ×" frame dashed, no fill
    frames = ["legend"] + [f"m{n}" for n in range(len(built))]
    frames += [f"m{n}c{side}" for n, (_, cols) in enumerate(built) for side in range(len(cols))]
    plain = f"fill:{colours['background']},color:{colours['text']},stroke:{colours['edge']}"
    yield from (f"  style {frame} {plain}" for frame in frames)
    for n, (_, cols) in enumerate(built):
        yield from (f"  style m{n}c{side}layer {plain},stroke-dasharray:5 4" for side in range(len(cols)))
    yield "  classDef caption fill:none,stroke:none"
    yield f"  classDef residual fill:{colours['background']},stroke:{colours['edge']},color:{colours['text']}"
    for role in figure_kinds(built):  # a cross arrow's legend node is cross-attention's: in the figure too
        palette = colours["kinds"][role]
        look = f"fill:{palette.fill},stroke:{palette.border},color:{palette.text}"
        yield f"  classDef {_mermaid_class(role)} {look}" + (",stroke-dasharray:4 3" if role == "io" else "")


def mermaid_text(graphs: Sequence[nx.DiGraph], theme: str = "light") -> str:
    """The schematic as Mermaid text, refused past the limits GitHub renders within."""
    from bertgraph.errors import RenderError
    from bertgraph.render import mermaid

    lines = list(mermaid_lines(graphs, theme))
    text = "\n".join(lines) + "\n"
    edges = sum(1 for line in lines if any(arrow in line for arrow in (" --> ", " -.-> ", " ==> ", " ~~~ ")))
    if edges > mermaid.MAX_EDGES or len(text) > mermaid.MAX_TEXT:
        raise RenderError(
            f"the schematic of {len(graphs)} models exceeds Mermaid's limits ({mermaid.MAX_EDGES} edges, "
            f"{mermaid.MAX_TEXT:,} characters); name fewer models or write SVG"
        )
    return text
