"""Cold `render` of every family's base model next to bert-base's, in the same window.

A family's diagram should cost about what BERT's does: the trace grows a few layers per
stack to the full depth wherever layers repeat. Each model is rendered from its preset with
the base head (no task head), the graph cache emptied before every run, models in turn.
"""

from __future__ import annotations

from collections.abc import Callable

from harness import BERTGRAPH, Command, Context, Stored, Suite, Target, ratio

BERT = "bert-base-uncased"
# One published preset per model_type bertgraph supports.
PRESETS = (
    "roberta-base",
    "xlm-roberta-base",
    "camembert-base",
    "distilbert-base-uncased",
    "albert-base-v2",
    "electra-base-discriminator",
    "deberta-v3-base",
    "modernbert-base",
    "all-mpnet-base-v2",
    "gpt2",
    "TinyLlama-1.1B",
    "Qwen2.5-0.5B",
    "Qwen3-0.6B",
    "t5-small",
    "mt5-small",
    "bart-base",
)
LIMIT = 1.2


def _render(ctx: Context, model: str) -> Command:
    # Smoke mode checks the commands on two layers per stack; the figures come from full runs.
    small = ["--layers", "2"] if ctx.smoke else []
    out = str(ctx.work / f"{model}.svg")
    return Command([BERTGRAPH, "render", model, "--head", "base", *small, "-o", out], cache="cold")


def render_commands(presets: tuple[str, ...]) -> Callable[[Context], dict[str, Command]]:
    """A cold render of bert-base and of each preset (run in turn, so ratios compare one window)."""
    return lambda ctx: {model: _render(ctx, model) for model in (BERT, *presets)}


def render_targets(
    presets: tuple[str, ...], limit: float, what: str = ""
) -> Callable[[dict[str, Stored]], list[Target]]:
    """Each preset's cold render at most ``limit`` × bert-base's."""

    def targets(stored: dict[str, Stored]) -> list[Target]:
        bert = stored[BERT]
        rows = []
        for model in presets:
            time = ratio(stored[model].seconds, bert.seconds)
            rows.append(
                Target(
                    f"cold render of {model}{what}: ≤ {limit} × bert-base's",
                    f"{time:.2f} × ({stored[model].seconds:.2f} s vs {bert.seconds:.2f} s, "
                    f"{stored[model].peak_mb:.0f} MB)",
                    time <= limit,
                )
            )
        return rows

    return targets


NOTES = (
    "Each preset with the base head, the graph cache emptied before every run; all models run in turn "
    "(A B C … A B C …), so each ratio compares runs of the same window.",
)

SUITE = Suite(
    name="families",
    title="Cold render of every family's base model next to bert-base's",
    order=25,
    commands=render_commands(PRESETS),
    targets=render_targets(PRESETS, LIMIT),
    notes=NOTES,
)
