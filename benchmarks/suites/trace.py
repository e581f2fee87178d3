"""Tracing: bertgraph's graph next to a bare ``torch.export`` of the same model, same span.

Both are whole processes (imports included), and each also prints the seconds of one
span measured inside it: from after the imports (torch, torch.export, transformers' BERT
classes, and bertgraph's tracing module) to the finished graph or ExportedProgram. The
span includes building the model on the meta device on both sides; bertgraph's also
includes building the few-layer model it exports (once; twice only when a size of the
single export could be read two ways), growing the layers and the graph.
"""

from __future__ import annotations

from harness import BERT_BASE, Command, Context, Stored, Suite, Target, ratio

OURS, BARE = "bertgraph trace + graph", "bare torch.export"


def commands(ctx: Context) -> dict[str, Command]:
    size = ctx.size(BERT_BASE)
    return {OURS: ctx.peer("trace-span", size), BARE: ctx.peer("export-span", size)}


def targets(stored: dict[str, Stored]) -> list[Target]:
    ours, bare = stored[OURS], stored[BARE]
    rows = [
        Target(
            "trace + graph ≤ 1.25 × bare torch.export, whole process",
            f"{ratio(ours.seconds, bare.seconds):.2f} × ({ours.seconds:.2f} s vs {bare.seconds:.2f} s)",
            ours.seconds <= 1.25 * bare.seconds,
        )
    ]
    if ours.span is not None and bare.span is not None:
        rows.append(
            Target(
                "trace + graph ≤ 1.25 × bare torch.export, same span in process",
                f"{ratio(ours.span, bare.span):.2f} × ({ours.span:.2f} s vs {bare.span:.2f} s)",
                ours.span <= 1.25 * bare.span,
            )
        )
    return rows


SUITE = Suite(
    name="trace",
    title="Trace + graph vs bare torch.export (bert-base, sequence-classification head)",
    order=40,
    commands=commands,
    targets=targets,
    notes=(
        "Span: from after the imports to the finished graph (bertgraph) or ExportedProgram (torch.export); "
        "both include building the model on the meta device.",
    ),
)
