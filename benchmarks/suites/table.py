"""The module table of bert-base with a classification head: ``bertgraph summary`` next to torchinfo.

torchinfo's ``summary`` runs the model (on the meta device, its cheapest way) to record
output shapes, as ``bertgraph summary`` traces it; that pair is the like-for-like one.
``bertgraph params`` needs no trace at all, so it is shown for reference, not compared.
"""

from __future__ import annotations

from harness import BERT_BASE, Command, Context, Stored, Suite, Target, ratio

COLD, WARM, PARAMS = "bertgraph summary (cold)", "bertgraph summary (warm cache)", "bertgraph params (no trace)"
TORCHINFO = "torchinfo summary (meta device)"


def commands(ctx: Context) -> dict[str, Command]:
    size = ctx.size(BERT_BASE)
    return {
        COLD: ctx.bertgraph("summary", size, cache="cold"),
        WARM: ctx.bertgraph("summary", size, cache="warm"),
        TORCHINFO: ctx.peer("torchinfo-meta", size),
        PARAMS: ctx.bertgraph("params", size, cache="cold"),
    }


def targets(stored: dict[str, Stored]) -> list[Target]:
    ours, theirs = stored[COLD], stored[TORCHINFO]
    time = ratio(ours.seconds, theirs.seconds)
    return [
        Target(
            "summary bert-base, cold: ≤ 0.85 × torchinfo-on-meta wall time",
            f"{time:.2f} × ({ours.seconds:.2f} s vs {theirs.seconds:.2f} s)",
            time <= 0.85,
        )
    ]


SUITE = Suite(
    name="table",
    title="Module table of bert-base with the sequence-classification head",
    order=30,
    commands=commands,
    targets=targets,
    notes=("`bertgraph params` counts parameters without tracing; torchinfo has no such mode, so it is not compared.",),
)
