"""An SVG diagram of bert-base with a classification head: bertgraph next to torchview.

torchview's best configuration is the meta device (no weights, like bertgraph); the
targets are set against it. torchview with real weights, as its README shows it, is the
second line.
"""

from __future__ import annotations

from harness import BERT_BASE, Command, Context, Stored, Suite, Target, ratio

COLD, WARM = "bertgraph render (cold)", "bertgraph render (warm cache)"
META, REAL = "torchview (meta device)", "torchview (real weights)"


def commands(ctx: Context) -> dict[str, Command]:
    size = ctx.size(BERT_BASE)
    return {
        COLD: ctx.bertgraph("render", size, out="bert.svg", cache="cold"),
        WARM: ctx.bertgraph("render", size, out="bert.svg", cache="warm"),
        META: ctx.peer("torchview-meta", size),
        REAL: ctx.peer("torchview-real", size),
    }


def targets(stored: dict[str, Stored]) -> list[Target]:
    cold, warm, meta = stored[COLD], stored[WARM], stored[META]
    time, memory = ratio(cold.seconds, meta.seconds), ratio(cold.peak_mb, meta.peak_mb)
    return [
        Target(
            "render bert-base SVG, cold: ≤ 0.85 × torchview-on-meta wall time",
            f"{time:.2f} × ({cold.seconds:.2f} s vs {meta.seconds:.2f} s)",
            time <= 0.85,
        ),
        Target(
            "render bert-base SVG, cold: ≤ 1.0 × torchview-on-meta peak memory",
            f"{memory:.2f} × ({cold.peak_mb:.0f} MB vs {meta.peak_mb:.0f} MB)",
            memory <= 1.0,
        ),
        Target(
            "render bert-base SVG, warm cache: ≤ 0.2 × torchview-on-meta wall time",
            f"{ratio(warm.seconds, meta.seconds):.2f} × ({warm.seconds:.2f} s)",
            warm.seconds <= 0.2 * meta.seconds,
        ),
    ]


SUITE = Suite(
    name="svg",
    title="SVG of bert-base with the sequence-classification head",
    order=20,
    commands=commands,
    targets=targets,
    notes=(
        "Cold: the graph cache is emptied before every run. torchview on the meta device builds the model "
        "without weights, as bertgraph does; with real weights it also allocates and initialises them.",
    ),
)
