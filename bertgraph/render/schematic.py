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
from bertgraph.render.escape import dot_html as esc
from bertgraph.render.escape import mermaid_front_matter
from bertgraph.render.escape import mermaid_text as mm
from bertgraph.render.ids import ElementIds, class_text, look_classes
from bertgraph.render.style import ATTENTION_COLOURS

EMBEDDING = "#e1d5e7"
COLOURS = {"norm": "#fff2cc", "attention": "#dae8fc", "cross-attention": "#f8cecc", "feed-forward": "#d5e8d4"}
ORDER = {"encoder-only": 0, "decoder-only": 1, "encoder-decoder": 2}
FONT = 11


def _box(ident: str, text: str, fill: str = "white", marks: str = "") -> str:
    # " · " breaks a box's text into lines: narrow columns keep the figure's text large when scaled.
    label = "<br/>".join(esc(part) for part in text.split(" · "))
    return f'  "{ident}" [label=<{label}>, fillcolor="{fill}"{marks}];'


# The classes of a step's box (render/ids.py): the diagrams' roles, so one style sheet restyles both.
STEP_CLASSES = {
    "norm": ["role-normalisation"],
    "attention": ["role-attention"],
    "cross-attention": ["role-attention", "kind-cross"],
    "feed-forward": ["role-feed-forward"],
    "residual": ["role-residual"],
}


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


def _attention_classes(column: Column) -> list[str]:
    """Self-attention's classes: its kind when every layer has the same one."""
    if len(column.pattern) != 1:
        return ["role-attention"]
    kind = column.pattern[0].split("(", 1)[0]
    return look_classes(ATTENTION_COLOURS.get(kind, "attention"))


def _column(prefix: str, column: Column, position: str, marks: Marks, model: str) -> Iterable[str]:
    """One stack: tokens, embeddings, the framed layer with its residuals, final norm, output."""
    base = f"{model}.{column.kind}"
    yield (
        f'  subgraph "cluster_{prefix}" {{ label=<{esc(column.kind)}>; style="rounded"; color="#999999";'
        + marks.frame(base, ["cluster-stack"])
    )
    yield _box(f"{prefix}in", "tokens", marks=marks(f"{prefix}in", f"{base}.tokens", ["role-io"]))
    embeddings = "embeddings · " + position.replace(", ", " · ") + " · LayerNorm" * column.embedding_norm
    yield _box(f"{prefix}emb", embeddings, EMBEDDING, marks(f"{prefix}emb", f"{base}.embeddings", ["role-embedding"]))
    yield (
        f'  subgraph "cluster_{prefix}layer" {{ label=<{esc(_times(column))}>; labeljust=r; style="dashed";'
        ' color="#555555";' + marks.frame(f"{base}.layer", ["cluster-layer"])
    )
    for number, step in enumerate(column.steps):
        classes = _attention_classes(column) if step.role == "attention" else STEP_CLASSES.get(step.role, [])
        mark = marks(f"{prefix}s{number}", f"{base}.layer.{number}-{step.role}", classes)
        if step.role == "residual":
            yield (
                f'  "{prefix}s{number}" [label="+", shape=circle, width=0.22, height=0.22, fixedsize=true,'
                f' fillcolor="white"{mark}];'
            )
            continue
        yield _box(f"{prefix}s{number}", _step_text(column, step), COLOURS.get(step.role, "white"), mark)
    yield "  }"
    if column.final_norm:
        mark = marks(f"{prefix}fn", f"{base}.norm", ["role-normalisation"])
        yield _box(f"{prefix}fn", "final norm", COLOURS["norm"], mark)
    output = "encoder output" if column.kind == "encoder" else "next-token logits"
    yield _box(f"{prefix}out", output, "white", marks(f"{prefix}out", f"{base}.output", ["role-io"]))
    yield "  }"
    chain = [f"{prefix}in", f"{prefix}emb"] + [f"{prefix}s{n}" for n in range(len(column.steps))]
    chain += [f"{prefix}fn"] * column.final_norm + [f"{prefix}out"]
    for a, b in itertools.pairwise(chain):
        yield f'  "{a}" -> "{b}" [{marks.edge(a, b, ["edge-data"])}];'
    for source, residual in column.skips:
        start = f"{prefix}emb" if source < 0 else f"{prefix}s{source}"
        # the residual path: drawn beside the chain, it must not pull the boxes apart
        edge = marks.edge(start, f"{prefix}s{residual}", ["edge-residual"])
        yield f'  "{start}" -> "{prefix}s{residual}" [style=dashed, color="#888888", weight=0, {edge}];'


def _times(column: Column) -> str:
    """The layer frame's label: "12 ×", "12 × (one shared layer)", "22 × [a, 2 × b] repeating"."""
    if column.shared:
        return f"{column.layers} × (one shared layer)"
    if len(column.pattern) > 1 and not column.runs:
        return f"{column.layers} × [{', '.join(_counted(column.pattern))}] repeating"
    return f"{column.layers} ×"


def _step_text(column: Column, step: Step) -> str:
    """A step's box text, " · " between its lines; self-attention says its kind or pattern."""
    if step.role != "attention" or not column.pattern:
        return step.text
    if len(column.pattern) == 1:
        return f"{column.pattern[0]} self-attention"
    if column.runs:
        return "self-attention · " + " · ".join(_run_text(run) for run in column.runs)
    return "self-attention · " + " · ".join(_counted(column.pattern))


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


def generate_lines(graphs: Sequence[nx.DiGraph], dpi: int | None = None) -> Iterable[str]:
    """The DOT text of the schematic: encoder-only, decoder-only, encoder-decoder, in that order
    (``dpi``: the resolution a PNG is drawn at)."""
    built = sorted((columns(graph) for graph in graphs), key=lambda kc: ORDER.get(kc[0]["structure"], 3))
    yield "digraph schematic {"
    if dpi:
        yield f"  graph [dpi={dpi}];"
    yield f'  graph [rankdir=TB, newrank=true, nodesep=0.15, ranksep=0.18, fontname="Helvetica", fontsize={FONT}];'
    yield (
        f'  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize={FONT}, '
        'height=0.3, margin="0.08,0.03"];'
    )
    yield '  edge [arrowsize=0.6, color="#444444"];'
    marks = Marks()
    for number, (kind, cols) in enumerate(built):
        position = ", ".join(kind["position"]) or "no position"
        model = str(kind["model"])
        frame = marks.frame(model, ["cluster-model"])
        yield f'  subgraph "cluster_m{number}" {{ style="rounded"; color="#333333";{frame}'
        # the caption heads the model's columns; all captions share the top rank, so a tall caption
        # never stretches another model's column (dot gives every rank one height across the figure)
        caption = marks(f"m{number}cap", f"{model}.caption", ["role-caption"])
        yield f'  "m{number}cap" [shape=plaintext, style="", label=<{_caption(kind, cols)}>, ordering=out{caption}];'
        for side, column in enumerate(cols):
            yield from _column(f"m{number}c{side}", column, position, marks, model)
        for side in range(len(cols)):
            # out-edges in declaration order, left to right (ordering=out): the encoder left of the decoder
            # a decoder fed by an encoder starts as low as its cross-attention needs (weight 0: no pull up)
            weight = ", weight=0" if side == 1 else ""
            yield f'  "m{number}cap" -> "m{number}c{side}in" [style=invis{weight}];'
        if len(cols) == 2:
            cross = [n for n, s in enumerate(cols[1].steps) if s.role == "cross-attention"]
            for n in cross:  # keys and values of every decoder layer's cross-attention: the encoder's output
                edge = marks.edge(f"m{number}c0out", f"m{number}c1s{n}", ["edge-cross"])
                yield f'  "m{number}c0out" -> "m{number}c1s{n}" [color="#b85450", {edge}];'
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


def column_lines(prefix: str, column: Column, position: str, marks: Marks, model: str) -> Iterable[str]:
    """One stack's DOT lines, node ids starting with ``prefix``, element ids from ``model`` (one ``Marks``
    per drawing keeps them unique): for figures made of these columns (the diff)."""
    return _column(prefix, column, position, marks, model)


def caption_label(kind: dict[str, Any], cols: list[Column]) -> str:
    """A model's caption as a Graphviz label, for figures made of these columns."""
    return _caption(kind, cols)


def schematic_text(graphs: Sequence[nx.DiGraph], fmt: str) -> str | bytes:
    """The schematic as dot, svg, png, pdf, tex or drawio."""
    from bertgraph.render import PNG_DPI, graphviz_run

    source = "\n".join(generate_lines(graphs, PNG_DPI if fmt == "png" else None)) + "\n"
    if fmt in ("tex", "drawio"):
        from bertgraph.render.editable import editable_text

        return editable_text(source, fmt, "families schematic")
    return source if fmt == "dot" else graphviz_run.render(source, fmt)


# --- Mermaid ----------------------------------------------------------------------------

MERMAID_ROLES = {"norm": "norm", "attention": "attention", "cross-attention": "cross", "feed-forward": "ffn"}


def _mermaid_column(prefix: str, column: Column, position: str, indent: str) -> Iterable[str]:
    """One stack's nodes inside its subgraph, the steps inside the layer's "N ×" subgraph."""
    yield f'{indent}subgraph {prefix}["{mm(column.kind)}"]'
    yield f"{indent}  direction TB"
    yield f'{indent}  {prefix}in["tokens"]'
    embeddings = "embeddings\n" + position.replace(", ", "\n") + "\nLayerNorm" * column.embedding_norm
    yield f'{indent}  {prefix}emb["{mm(embeddings)}"]:::embedding'
    yield f'{indent}  subgraph {prefix}layer["{mm(_times(column))}"]'
    yield f"{indent}    direction TB"
    for number, step in enumerate(column.steps):
        if step.role == "residual":
            yield f'{indent}    {prefix}s{number}(("+"))'
        else:
            text = _step_text(column, step).replace(" · ", "\n")
            yield f'{indent}    {prefix}s{number}["{mm(text)}"]:::{MERMAID_ROLES[step.role]}'
    yield f"{indent}  end"
    if column.final_norm:
        yield f'{indent}  {prefix}fn["final norm"]:::norm'
    output = "encoder output" if column.kind == "encoder" else "next-token logits"
    yield f'{indent}  {prefix}out["{output}"]'
    yield f"{indent}end"


def _mermaid_edges(prefix: str, column: Column) -> Iterable[str]:
    chain = [f"{prefix}in", f"{prefix}emb"] + [f"{prefix}s{n}" for n in range(len(column.steps))]
    chain += [f"{prefix}fn"] * column.final_norm + [f"{prefix}out"]
    for a, b in itertools.pairwise(chain):
        yield f"  {a} --> {b}"
    for source, residual in column.skips:
        yield f"  {prefix + 'emb' if source < 0 else f'{prefix}s{source}'} -.-> {prefix}s{residual}"


def mermaid_lines(graphs: Sequence[nx.DiGraph], title: str | None = None, in_order: bool = False) -> Iterable[str]:
    """The schematic as a Mermaid flowchart: the same columns, order, colours and captions as the DOT.

    ``title``: the figure's own (default: the models named); ``in_order``: the models left to right
    as given, not by structure (a comparison keeps its first model left).
    """
    built = [columns(graph) for graph in graphs]
    if not in_order:
        built.sort(key=lambda kc: ORDER.get(kc[0]["structure"], 3))
    title = title or "families schematic: " + ", ".join(kind["model"] for kind, _ in built)
    yield "---"
    yield f"title: {mermaid_front_matter(title)}"
    yield "---"
    yield "flowchart TB"
    edges: list[str] = []
    blocks: list[list[str]] = []
    for number, (kind, cols) in enumerate(built):
        position = ", ".join(kind["position"]) or "no position"
        block = [f'  subgraph m{number}["{mm(kind["model"])}"]', "    direction TB"]
        caption = _caption_lines(kind, cols)[1:]
        block.append(f'    m{number}cap["{mm(chr(10).join(caption))}"]:::caption')
        for side, column in enumerate(cols):
            block += _mermaid_column(f"m{number}c{side}", column, position, "    ")
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
    # mermaid.js places side-by-side subgraphs right to left in the order they are declared
    for block in reversed(blocks):
        yield from block
    yield from edges
    yield "  classDef caption fill:none,stroke:none"
    yield f"  classDef embedding fill:{EMBEDDING}"
    for role, name in MERMAID_ROLES.items():
        yield f"  classDef {name} fill:{COLOURS[role]}"


def mermaid_text(graphs: Sequence[nx.DiGraph]) -> str:
    """The schematic as Mermaid text, refused past the limits GitHub renders within."""
    from bertgraph.errors import RenderError
    from bertgraph.render import mermaid

    lines = list(mermaid_lines(graphs))
    text = "\n".join(lines) + "\n"
    edges = sum(1 for line in lines if any(arrow in line for arrow in (" --> ", " -.-> ", " ==> ", " ~~~ ")))
    if edges > mermaid.MAX_EDGES or len(text) > mermaid.MAX_TEXT:
        raise RenderError(
            f"the schematic of {len(graphs)} models exceeds Mermaid's limits ({mermaid.MAX_EDGES} edges, "
            f"{mermaid.MAX_TEXT:,} characters); name fewer models or write SVG"
        )
    return text
