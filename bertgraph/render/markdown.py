"""Markdown tables (GitHub-flavoured) for parameters, the module tree and head diffs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bertgraph.graph.facts.summary import shared_lines, stack_line
from bertgraph.render import figures, text
from bertgraph.render.deployment import deployment_sentences, deployment_table
from bertgraph.render.escape import markdown_code as code
from bertgraph.render.escape import markdown_text as md
from bertgraph.render.text import module_label


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], right: Sequence[bool]) -> Iterable[str]:
    """A pipe table; cells must already be escaped."""
    yield "| " + " | ".join(headers) + " |"
    yield "|" + "|".join("---:" if r else "---" for r in right) + "|"
    for row in rows:
        yield "| " + " | ".join(row) + " |"


def generate_param_groups(stats: dict[str, Any]) -> Iterable[str]:
    total = stats["total"]
    rows = [[md(name), figures.count(n), figures.percent(n, total)] for name, n in stats["groups"].items()]
    rows.append(["**total**", f"**{figures.count(total)}**", "**100.00%**"])
    rows.append(["trainable", figures.count(stats["trainable"]), figures.percent(stats["trainable"], total)])
    yield from table(["Group", "Parameters", "Share"], rows, [False, True, True])


def generate_param_rows(stats: dict[str, Any]) -> Iterable[str]:
    yield from table(
        ["Parameter", "Shape", "Count", "Trainable"],
        (
            [
                md(p["name"]),
                code(figures.shape(p["shape"])),
                figures.count(p["numel"]),
                "yes" if p["trainable"] else "no",
            ]
            for p in stats["parameters"]
        ),
        [False, False, True, False],
    )


def stored_paragraphs(data: dict[str, Any]) -> Iterable[str]:
    """The checkpoint and remote-code lines as sentences, each a paragraph."""
    for line in text.stored_lines(data):
        yield md(line[0].upper() + line[1:]) + "."
        yield ""


def generate_params(stats: dict[str, Any]) -> Iterable[str]:
    yield f"## Parameters of {md(stats['model'])} · {md(stats['model_class'])}"
    yield ""
    if stats.get("not_traced"):
        yield md(text.not_traced_line(stats)) + "."
        yield ""
    yield from stored_paragraphs(stats)
    yield from generate_param_groups(stats)
    yield ""
    yield f"{len(stats['parameters'])} parameter tensors:"
    yield ""
    yield from generate_param_rows(stats)


def _shape_cell(row: dict[str, Any]) -> str:
    if row.get("runs") is False:
        return text.NOT_RUN
    return code(figures.shapes(row["shapes"])) if row["shapes"] else "—"


def generate_summary_table(summary: dict[str, Any]) -> Iterable[str]:
    rows = []
    for row in summary["rows"]:
        indent = "&nbsp;&nbsp;" * row["level"]
        params = figures.count(row["params"])
        if row.get("repeat", 1) > 1:
            params += f" ({row['repeat']} × {figures.count(row['each'])})"
        rows.append(
            [
                indent + md(module_label(row)),
                md(row["sizes"]),
                _shape_cell(row),
                params,
                figures.percent(row["share"], 1) + (" each" if row["in_fold"] else ""),
            ]
        )
    yield from table(
        ["Module", "Sizes", "Output shape", "Parameters", "Share"], rows, [False, False, False, True, True]
    )


_FOLDED = "Rows inside a folded group count one instance."


def generate_summary(summary: dict[str, Any]) -> Iterable[str]:
    yield f"## {md(summary['model'])} · {md(summary['model_class'])}"
    yield ""
    example = ", ".join(f"{k}={v}" for k, v in summary["example"].items())
    if summary.get("not_traced"):
        yield md(text.not_traced_line(summary)) + f". {_FOLDED}"
    else:
        yield f"Example input {md(example)}; shapes name these dimensions. {_FOLDED}"
    yield ""
    yield from stored_paragraphs(summary)
    if summary.get("roles_inferred"):
        yield "Roles inferred from the module tree (bertgraph has no record of this model type)."
        yield ""
    if "active" in summary:
        yield md(text.active_line(summary)) + "."
        yield ""
    yield from generate_architecture(summary.get("architecture", {}))
    if summary.get("kv_cache"):
        yield md(text.kv_cache_line(summary["kv_cache"])) + "."
        yield ""
    yield from generate_summary_table(summary)


def generate_architecture(facts: dict[str, Any]) -> Iterable[str]:
    """A list of what the ops show: attention and positions per stack, shared layers."""
    if not facts.get("stacks"):
        return
    yield f"Architecture: {md(facts.get('structure') or 'read off the ops')}"
    yield ""
    for stack in facts["stacks"]:
        yield f"- {md(stack_line(stack))}"
    for line in shared_lines(facts.get("shared", {})):
        yield f"- {md(line)}"
    yield ""


def generate_diff_table(diff: dict[str, Any]) -> Iterable[str]:
    rows = [
        ["added", md(m["module"]), md(m["type"]), md(m["sizes"]), f"+{figures.count(m['params'])}"]
        for m in diff["added"]
    ]
    rows += [
        ["removed", md(m["module"]), md(m["type"]), md(m["sizes"]), f"-{figures.count(m['params'])}"]
        for m in diff["removed"]
    ]
    for m in diff["changed"]:
        rows.append(
            [
                "changed",
                md(m["module"]),
                md(m["b"]["type"]),
                md(f"{m['a']['sizes']} → {m['b']['sizes']}"),
                f"{m['b']['params'] - m['a']['params']:+,}",
            ]
        )
    if not rows:
        yield "No module differs."
        return
    yield from table(["Change", "Module", "Type", "Sizes", "Parameters"], rows, [False, False, False, False, True])


def generate_diff(diff: dict[str, Any]) -> Iterable[str]:
    a, b = diff["a"], diff["b"]
    yield f"## {md(a['head'])} → {md(b['head'])} ({md(a['model'])})"
    yield ""
    yield from generate_diff_table(diff)
    yield ""
    yield (
        f"{md(a['model_class'])}: {figures.count(a['total'])} parameters → {md(b['model_class'])}: "
        f"{figures.count(b['total'])} parameters (**{diff['delta']:+,}**)."
    )


def generate_cost(report: dict[str, Any]) -> Iterable[str]:
    """The cost tables as Markdown: totals with formulas, memory, the module tree."""
    yield f"## Cost of {md(report['model'])} · {md(report['model_class'])}"
    yield ""
    yield from generate_cost_body(report)


def generate_cost_body(report: dict[str, Any]) -> Iterable[str]:
    yield md(text.COST_NOTE[0].upper() + text.COST_NOTE[1:]) + "."
    yield ""
    headers, rows = text.cost_totals(report)
    yield from table(
        [md(h) for h in headers],
        (
            [md(r[0].strip()) if not r[0].startswith(" ") else "&nbsp;&nbsp;" + md(r[0].strip()), *r[1:-1], md(r[-1])]
            for r in rows
        ),
        [False] + [True] * (len(headers) - 2) + [False],
    )
    yield ""
    headers, rows = text.cost_memory(report)
    yield from table(
        [md(h) for h in headers], ([md(c) for c in r] for r in rows), [False] + [True] * (len(headers) - 1)
    )
    yield ""
    sentences = (text.peak_sentence(report), text.training_sentence(report), *text.planning_sentences(report))
    for line in (*sentences, text.unsupported_sentence(report)):
        yield md(line[0].upper() + line[1:]) + "."
    yield ""
    planned = deployment_table(report)
    if planned is not None:
        yield from table(
            [md(h) for h in planned[0]],
            ([md(c) for c in r] for r in planned[1]),
            [False] + [True] * (len(planned[0]) - 1),
        )
        yield ""
        for line in deployment_sentences(report):
            yield md(line[0].upper() + line[1:]) + "."
        yield ""
    headers, rows, right = text.cost_tree(report)
    body = []
    for row, cells in zip(report["rows"], rows):
        indent = "&nbsp;&nbsp;" * row["level"]
        body.append([indent + md(module_label(row)), *(md(c) for c in cells[1:])])
    yield from table([md(h) for h in headers], body, right)
    yield ""
    yield "Rows inside a folded group count one instance; share is of all FLOPs."
