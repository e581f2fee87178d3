"""The families figure and table: models of different structures side by side, from their traces.

The figure puts each model's diagram (depth 2 by default) in a box of its own: encoder stack,
decoder stack, the edges that carry the encoder's output into the decoder's cross-attention,
attention kinds coloured. The table has one row per model; every cell but the last comes
from the graph (:func:`bertgraph.graph.kinds.architecture_kind`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph import stats
from bertgraph.graph.kinds import architecture_kind, structure_words
from bertgraph.render import figures
from bertgraph.render.diagram import Diagram, build_diagram
from bertgraph.render.escape import markdown_text as md
from bertgraph.render.style import KIND_NAMES

DEFAULT_MODELS = ("bert-base-uncased", "gpt2", "t5-small")


def kinds_of(graphs: Sequence[nx.DiGraph]) -> list[dict[str, Any]]:
    """The architecture kind of each graph, in order."""
    return [architecture_kind(graph, stats.parameter_stats(graph)["total"]) for graph in graphs]


def layer_depth(graph: nx.DiGraph, depth: int) -> int:
    """The depth to draw ``graph`` at so that its layers sit where BERT's do at ``depth``.

    BERT's layers are level 2 (``encoder`` → ``layer.3``); a model whose layer list sits at
    the top (GPT-2's ``h.3``, LLaMA's ``layers.3``) has them at level 1, so it is drawn one
    level shallower, and the figure shows every model's layers as boxes at depth 2.
    """
    from bertgraph.graph.roles import stack_kinds
    from bertgraph.graph.views import display_levels

    backbone = graph.graph.get(g.G_BACKBONE, "")
    levels = [len(display_levels(f"{stack}.0", backbone)) for stack in stack_kinds(graph)]
    return max(0, depth + min(levels, default=2) - 2)


def build_families(graphs: Sequence[nx.DiGraph], depth: int = 2) -> Diagram:
    """One diagram with every model side by side, each in a box titled by its structure."""
    kinds = kinds_of(graphs)
    combined = Diagram(
        title="encoder-only, decoder-only and encoder-decoder, side by side"
        if {k["structure"] for k in kinds} >= {"encoder-only", "decoder-only", "encoder-decoder"}
        else "architectures side by side",
        subtitle=" · ".join(f"{k['model']}: {structure_words(k)}" for k in kinds)
        + f" · depth {depth} · repeats folded · drawn from the traced models",
    )
    for number, (graph, kind) in enumerate(zip(graphs, kinds)):
        prefix = f"m{number}:"
        diagram = build_diagram(graph, layer_depth(graph, depth), prefix=prefix)
        combined.add_variant(
            prefix, f"{kind['model']} · {structure_words(kind)} · {figures.count(kind['parameters'])} params", diagram
        )
        for name, label in diagram.kind_names.items():
            combined.kind_names.setdefault(name, label)
        if combined.kind_names.get("block") != diagram.kind_names.get("block"):
            combined.kind_names["block"] = "layer"
    inputs = [n.id for n in combined.nodes if n.shape == "io" and n.id.endswith(":input_ids")]
    if len(inputs) > 1:
        combined.same_rank.append(tuple(inputs))
    present = {node.kind for node in combined.nodes if node.heat is None}
    combined.kinds = [kind for kind in KIND_NAMES if kind in present]
    return combined


def attention_text(stack: dict[str, Any]) -> str:
    """A stack's attention kinds as a reader says them (``bidirectional × 8, sliding-window(64) × 14``).

    >>> attention_text({"attention": ["causal"], "attention_counts": {"causal": 22}, "grouped_query": (32, 4)})
    'causal, grouped-query (32 query / 4 key-value heads)'
    """
    counts = stack.get("attention_counts", {})
    several = len(stack["attention"]) > 1 and len(counts) == len(stack["attention"])
    shown = ", ".join(f"{label} × {counts[label]}" if several else label for label in stack["attention"])
    if stack.get("grouped_query"):
        q, kv = stack["grouped_query"]
        shown += f", grouped-query ({q} query / {kv} key-value heads)"
    return shown


def _stacks_cell(kind: dict[str, Any], field: str) -> str:
    parts = []
    for stack in kind["stacks"]:
        if field == "layers":
            parts.append(f"{stack['kind']} {stack['layers']}")
        else:
            parts.append(f"{stack['kind']}: {attention_text(stack) or '—'}")
    return "; ".join(parts) or "—"


def table_rows(kinds: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The table's cells as plain text, one row per model (the header is :data:`TABLE_HEADER`)."""
    rows = []
    for kind in kinds:
        rows.append(
            [
                kind["model"],
                kind["structure"] or "—",
                _stacks_cell(kind, "attention"),
                _stacks_cell(kind, "layers"),
                figures.count(kind["hidden"]) if kind["hidden"] else "—",
                figures.count(kind["parameters"]),
                ", ".join(kind["position"]) or "—",
                kind["uses"] or "—",
            ]
        )
    return rows


TABLE_HEADER = (
    "model",
    "structure",
    "attention per stack",
    "layers",
    "hidden size",
    "parameters",
    "position",
    "typically used for",
)


def generate_table(kinds: Sequence[dict[str, Any]]) -> Iterable[str]:
    """The families table in Markdown, with a line saying where its cells come from."""
    yield "| " + " | ".join(TABLE_HEADER) + " |"
    yield "|" + "|".join("---:" if name in ("hidden size", "parameters") else "---" for name in TABLE_HEADER) + "|"
    for row in table_rows(kinds):
        yield "| " + " | ".join(md(cell) for cell in row) + " |"
    yield ""
    yield (
        "Every cell but the last is read off the traced graphs: the stacks and the layers each runs, "
        "the width of the hidden states, the parameters counted once, and the attention and position "
        "kinds found in the operators (— where the graph records none). The last column is the family's."
    )


def generate_page(graphs: Sequence[nx.DiGraph], mermaid_text: str | None) -> str:
    """A Markdown page: the figure as Mermaid (when given), the table and the attention masks."""
    from bertgraph.render import masks

    kinds = kinds_of(graphs)
    lines = ["# " + md(" · ".join(k["model"] for k in kinds)), ""]
    if mermaid_text is not None:
        lines += ["```mermaid", mermaid_text.rstrip("\n"), "```", ""]
    lines += list(generate_table(kinds))
    lines += ["", *masks.section_for(graphs)]
    return "\n".join(lines) + "\n"


def _mermaid(graphs: Sequence[nx.DiGraph], depth: int, theme: str, warn: Any) -> str:
    """The figure as Mermaid, at the shallowest step down from ``depth`` that fits GitHub's limits."""
    from bertgraph.errors import RenderError
    from bertgraph.render import mermaid

    for level in range(depth, -1, -1):
        diagram = build_families(graphs, level)
        text = "\n".join(mermaid.generate_lines(diagram, theme)) + "\n"
        if len(diagram.edges) <= mermaid.MAX_EDGES and len(text) <= mermaid.MAX_TEXT:
            if level != depth and warn:
                warn(
                    f"the Mermaid figure at depth {depth} would exceed Mermaid's limits "
                    f"({mermaid.MAX_EDGES} edges, {mermaid.MAX_TEXT:,} characters); wrote depth {level} instead"
                )
            return text
    raise RenderError("no depth of these models fits Mermaid's limits side by side; write SVG instead")


def families_text(
    graphs: Sequence[nx.DiGraph], fmt: str, depth: int = 2, theme: str = "light", warn: Any = None
) -> str | bytes:
    """The figure in ``fmt`` (svg, png, pdf, dot, mermaid, tex, drawio), or ``markdown``: a page with the
    figure and the table."""
    from bertgraph.render import PNG_DPI, dot, graphviz_run

    if fmt == "markdown":
        return generate_page(graphs, _mermaid(graphs, depth, theme, warn))
    if fmt == "mermaid":
        return _mermaid(graphs, depth, theme, warn)
    diagram = build_families(graphs, depth)
    source = "\n".join(dot.generate_lines(diagram, theme, PNG_DPI if fmt == "png" else None)) + "\n"
    if fmt == "dot":
        return source
    graphviz_run.check_size(len(diagram.edges))
    if fmt in ("tex", "drawio"):
        from bertgraph.render.editable import editable_text

        return editable_text(source, fmt, diagram.title)
    return graphviz_run.render(source, fmt)


def write_families(
    graphs: Sequence[nx.DiGraph],
    path: Any,
    fmt: str,
    depth: int = 2,
    theme: str = "light",
    table: Any = None,
    warn: Any = None,
    view: str = "diagrams",
) -> list[Any]:
    """Write the figure (or the Markdown page) to ``path`` and, when given, the table to ``table``.

    ``view="schematic"`` draws the families schematic (:mod:`bertgraph.render.schematic`) in every
    format, the Markdown page with it as Mermaid; ``view="diagrams"`` stitches the models' diagrams.
    """
    from bertgraph.files import write_atomic
    from bertgraph.render import schematic

    if view == "schematic" and fmt in ("svg", "png", "pdf", "dot", "tex", "drawio"):
        text = schematic.schematic_text(graphs, fmt, theme)
    elif view == "schematic" and fmt in ("mermaid", "markdown"):
        text = schematic.mermaid_text(graphs, theme)
        text = generate_page(graphs, text) if fmt == "markdown" else text
    else:
        text = families_text(graphs, fmt, depth, theme, warn)
    written = [write_atomic(path, text)]
    if table is not None:
        text = "\n".join(generate_table(kinds_of(graphs))) + "\n"
        written.append(write_atomic(table, text))
    return written
