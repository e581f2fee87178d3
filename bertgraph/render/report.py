"""The Markdown report: one page with the diagram, the tables and the head diff."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph import stats as tables
from bertgraph.render import figures, markdown, masks, mermaid
from bertgraph.render.escape import markdown_code, markdown_url
from bertgraph.render.escape import markdown_text as md
from bertgraph.version import __version__

if TYPE_CHECKING:
    from bertgraph.plan.deploy import Request


def _weights_sentence(graph: nx.DiGraph) -> str:
    weights = graph.graph.get(g.G_WEIGHTS, "meta")
    if graph.graph.get(g.G_SOURCE) == "onnx":
        return "read from an ONNX file"
    if weights == "meta":
        return "built from its config on the meta device (no weights needed)"
    return f"traced with {md(str(weights))} weights"


def generate_cost_lines(
    graph: nx.DiGraph,
    depth: int = 2,
    plot_name: str | None = None,
    plot_note: str | None = None,
    deployment: Request | None = None,
    memory_plot_name: str | None = None,
) -> Iterable[str]:
    """The report's cost section: figures with their formulas at the example size, memory, the deployment
    (``deployment``: ``cost``'s options; its figure is ``memory_plot_name`` beside the report), the plot."""
    from bertgraph.graph import costbase, costtable
    from bertgraph.plan import deploy
    from bertgraph.render.plot import max_positions, plot_lengths

    sizes = costbase.sizes_for(graph)
    report = deploy.add_deployment(costtable.cost_report(graph, [sizes], depth=depth), graph, [sizes], deployment)
    total = report["total"]
    yield "## Cost"
    yield ""
    matmul = figures.count(total["matmul_flops"]["values"][0])
    yield (
        f"At {md(costbase.size_label(sizes))}, one forward pass takes **{matmul}** "
        f"matmul FLOPs — {markdown.code(total['matmul_flops']['readable'])} in general — and "
        f"{figures.count(total['other_flops']['values'][0])} other FLOPs; its activations peak at "
        f"{figures.size(report['memory']['peak_activation_bytes'][0])}. Every figure is a polynomial in the named "
        "dimensions, exact at any size (`bertgraph cost --seq-len 128 512` evaluates several)."
    )
    yield ""
    yield from markdown.generate_cost_body(report)
    yield ""
    _, crossing = plot_lengths(graph)
    name = costbase.sequence_name(graph)
    if crossing:
        limit = max_positions(graph)
        beyond = f", beyond the model's {limit:,} positions" if limit and crossing > limit else ""
        yield (
            f"Attention's matrix products grow with {name}², the linear layers' with {name}: "
            f"attention overtakes at {name} = {crossing:,}{beyond}."
        )
        yield ""
    if memory_plot_name:
        yield f"![Memory by part against context length, with the GPU's memory]({markdown_url(memory_plot_name)})"
        yield ""
    if plot_name:
        yield f"![FLOPs against sequence length, linear layers and attention]({markdown_url(plot_name)})"
        yield ""
    elif plot_note:
        yield f"*{md(plot_note[0].upper() + plot_note[1:])}.*"
        yield ""


def generate_kind_lines(graph: nx.DiGraph, total: int) -> Iterable[str]:
    """The report's "Architecture kind" section: the model's row of the families table, in words."""
    from bertgraph.graph.kinds import architecture_kind, structure_words
    from bertgraph.render.families import attention_text

    kind = architecture_kind(graph, total)
    stacks = kind["stacks"]
    yield "### Architecture kind"
    yield ""
    if not stacks:
        yield f"**{md(structure_words(kind))}**; the graph records no layer stacks."
        yield ""
        return
    parts = []
    for stack in stacks:
        attention = f", attention {md(attention_text(stack))}" if stack["attention"] else ""
        parts.append(f"{md(stack['kind'])} stack `{md(stack['name'])}`: {stack['layers']} layers{attention}")
    hidden = f"; hidden size {figures.count(kind['hidden'])}" if kind["hidden"] else ""
    position = f"; positions: {md(', '.join(kind['position']))}" if kind["position"] else ""
    yield f"**{md(structure_words(kind))}** — " + "; ".join(parts) + hidden + position + "."
    if kind["uses"]:
        yield f"Typically used for {md(kind['uses'])}."
    yield ""
    yield "Read off the traced graph, as the rows of `bertgraph families` are."
    yield ""


def generate_report_lines(
    graph: nx.DiGraph,
    base: nx.DiGraph | None = None,
    depth: int = 2,
    svg_name: str | None = None,
    warn: Callable[[str], None] | None = None,
    plot_name: str | None = None,
    plot_note: str | None = None,
    deployment: Request | None = None,
    memory_plot_name: str | None = None,
) -> Iterable[str]:
    """Report lines: architecture (Mermaid, SVG link), parameters, module tree, cost, head diff, every parameter.

    ``plot_name`` is the FLOPs plot beside the report; without it ``plot_note`` says why it is missing.
    """
    stats = tables.parameter_stats(graph)
    summary = tables.summary(graph)
    name, head, model_class = (str(graph.graph.get(key, "")) for key in (g.G_NAME, g.G_HEAD, g.G_MODEL_CLASS))
    example = ", ".join(f"{k}={v}" for k, v in graph.graph.get(g.G_EXAMPLE, {}).items())
    yield f"# {md(name)} · {md(model_class)}"
    yield ""
    yield (
        f"Generated by bertgraph {__version__}. The model was {_weights_sentence(graph)}; "
        f"head: **{md(head)}**; example input {md(example)} (shapes name these dimensions)."
    )
    yield ""
    yield "## Architecture"
    yield ""
    if svg_name:
        yield f"![{md(name)} with the {md(head)} head]({markdown_url(svg_name)})"
        yield ""
        yield f"The diagram above is [{md(svg_name)}]({markdown_url(svg_name)}); the same architecture as Mermaid:"
        yield ""
    diagram = mermaid.generate_mermaid(graph, depth=depth)
    for note in diagram.notes:
        if warn:
            warn(note)
    yield "```mermaid"
    yield diagram.text.rstrip("\n")
    yield "```"
    yield ""
    yield from generate_kind_lines(graph, stats["total"])
    yield from masks.section_for([graph])
    yield "## Parameters"
    yield ""
    yield from markdown.generate_param_groups(stats)
    yield ""
    yield (
        f"**{figures.count(stats['total'])}** parameters in {len(stats['parameters'])} tensors, "
        f"{figures.count(stats['trainable'])} of them trainable."
    )
    yield ""
    yield from markdown.stored_paragraphs(stats)
    yield "## Module tree"
    yield ""
    yield (
        "Repeated identical layers are folded into one row (`(0-11)`); rows inside a folded group count one instance."
    )
    yield ""
    yield from markdown.generate_summary_table(summary)
    yield ""
    yield from generate_cost_lines(graph, depth, plot_name, plot_note, deployment, memory_plot_name)
    if base is not None:
        difference = tables.diff(base, graph)
        yield f"## What the {md(head)} head adds"
        yield ""
        yield from markdown.generate_diff_table(difference)
        yield ""
        outputs = ", ".join(
            f"{markdown_code(o['name'])} {markdown_code(figures.shape(o['shape']))}" for o in difference["b"]["outputs"]
        )
        base_class = str(base.graph.get(g.G_MODEL_CLASS, ""))
        yield (
            f"{md(base_class)} ({figures.count(difference['a']['total'])} parameters) becomes "
            f"{md(model_class)} ({figures.count(difference['b']['total'])} parameters, "
            f"{difference['delta']:+,}); outputs: {outputs}."
        )
        yield ""
    yield "## Every parameter"
    yield ""
    yield f"<details><summary>{len(stats['parameters'])} parameter tensors with their shapes</summary>"
    yield ""
    yield from markdown.generate_param_rows(stats)
    yield ""
    yield "</details>"


def generate_report(
    graph: nx.DiGraph,
    base: nx.DiGraph | None = None,
    depth: int = 2,
    svg_name: str | None = None,
    warn: Callable[[str], None] | None = None,
    plot_name: str | None = None,
    plot_note: str | None = None,
    deployment: Request | None = None,
    memory_plot_name: str | None = None,
) -> str:
    """The report of ``graph`` as Markdown text; ``base`` (the bare backbone) adds the head diff."""
    lines = generate_report_lines(
        graph, base, depth, svg_name, warn, plot_name, plot_note, deployment, memory_plot_name
    )
    return "\n".join(lines) + "\n"


def plot_path(report: Path) -> Path:
    """Where the FLOPs plot of a report goes: ``report.md`` → ``report-flops.png`` beside it."""
    return report.with_name(f"{report.stem}-flops.png")


def memory_plot_path(report: Path) -> Path:
    """Where the deployment's memory figure goes: ``report.md`` → ``report-memory.png`` beside it."""
    return report.with_name(f"{report.stem}-memory.png")
