"""Cold `render` of published models without a record (the generic family) next to bert-base's.

A type without a record is resolved by building a small model of it on the meta device to read
its module tree, then traced like any family (a few layers grown to the full depth). Each preset
is rendered with its base head, the graph cache emptied before every run, models in turn.
"""

from __future__ import annotations

from harness import BERTGRAPH, Command, Context, Stored, Suite, Target, ratio

BERT = "bert-base-uncased"
# Presets of model types no hand-written record knows (model/families/generic_presets.py).
PRESETS = ("Mistral-7B", "Phi-3-mini", "OLMo-2-1B", "Mixtral-8x7B")
LIMIT = 1.3


def _render(ctx: Context, model: str) -> Command:
    small = ["--layers", "2"] if ctx.smoke else []
    out = str(ctx.work / f"{model}.svg")
    return Command([BERTGRAPH, "render", model, "--head", "base", *small, "-o", out], cache="cold")


def commands(ctx: Context) -> dict[str, Command]:
    return {model: _render(ctx, model) for model in (BERT, *PRESETS)}


def targets(stored: dict[str, Stored]) -> list[Target]:
    bert = stored[BERT]
    rows = []
    for model in PRESETS:
        time = ratio(stored[model].seconds, bert.seconds)
        rows.append(
            Target(
                f"cold render of {model} (no record): ≤ {LIMIT} × bert-base's",
                f"{time:.2f} × ({stored[model].seconds:.2f} s vs {bert.seconds:.2f} s, {stored[model].peak_mb:.0f} MB)",
                time <= LIMIT,
            )
        )
    return rows


SUITE = Suite(
    name="generic",
    title="Cold render of models without a record next to bert-base's",
    order=26,
    commands=commands,
    targets=targets,
    notes=(
        "Each preset with the base head, the graph cache emptied before every run; all models run in turn "
        "(A B C … A B C …), so each ratio compares runs of the same window.",
    ),
)
