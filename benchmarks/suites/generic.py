"""Cold `render` of published models without a record (the generic family) next to bert-base's.

A type without a record is resolved by building a small model of it on the meta device to read
its module tree, then traced like any family (a few layers grown to the full depth). Each preset
is rendered with its base head, the graph cache emptied before every run, models in turn.
"""

from __future__ import annotations

from harness import Suite

from suites.families import NOTES, render_commands, render_targets

# Presets of model types no hand-written record knows (model/families/generic_presets.py).
PRESETS = ("Mistral-7B", "Phi-3-mini", "OLMo-2-1B", "Mixtral-8x7B")
LIMIT = 1.3

SUITE = Suite(
    name="generic",
    title="Cold render of models without a record next to bert-base's",
    order=26,
    commands=render_commands(PRESETS),
    targets=render_targets(PRESETS, LIMIT, " (no record)"),
    notes=NOTES,
)
