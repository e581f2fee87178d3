"""Published configurations of common checkpoints, so no network is needed.

Every family keeps its own presets (:mod:`bertgraph.model.families`); this module is the
one view over all of them. Each preset is the ``config.json`` of the checkpoint on the
Hugging Face hub, reduced to the fields that change the architecture. Importing this
module is free: it is plain data.
"""

from __future__ import annotations

import difflib
from typing import Any

from bertgraph.model.families import all_hub_ids, all_presets, generic_presets

PRESETS: dict[str, dict[str, Any]] = all_presets()
# Presets of model types without a record (their family is read off transformers when resolved).
GENERIC_PRESETS: dict[str, dict[str, Any]] = dict(generic_presets.PRESETS)

# Hub ids people type for the same checkpoints.
ALIASES: dict[str, str] = {**all_hub_ids(), **generic_presets.HUB_IDS}

# Names are matched without regard to case (``tinyllama-1.1b`` is ``TinyLlama-1.1B``).
_FOLDED: dict[str, str] = {name.lower(): name for name in (*PRESETS, *GENERIC_PRESETS, *ALIASES)}


def canonical_name(name: str) -> str:
    """The preset name behind an alias (``google-bert/bert-base-uncased`` → ``bert-base-uncased``)."""
    name = _FOLDED.get(name.lower(), name)
    return ALIASES.get(name, name)


def preset_config(name: str) -> dict[str, Any] | None:
    """The published config of a preset or one of its hub aliases, or None.

    >>> preset_config("bert-base-uncased")["hidden_size"]
    768
    >>> preset_config("google/bert_uncased_L-2_H-128_A-2")["num_hidden_layers"]
    2
    >>> preset_config("openai-community/gpt2")["n_layer"], preset_config("tinyllama-1.1b")["model_type"]
    (12, 'llama')
    >>> preset_config("gpt-j") is None
    True
    """
    name = canonical_name(name)
    config = PRESETS.get(name) or GENERIC_PRESETS.get(name)
    return dict(config) if config is not None else None


def closest_presets(name: str, count: int = 3) -> list[str]:
    """Preset names that look like ``name``, best first, for "did you mean" messages.

    >>> closest_presets("bert-bsae-uncased")[0]
    'bert-base-uncased'
    """
    lowered = name.lower().split("/")[-1]
    folded = {preset.lower(): preset for preset in (*PRESETS, *GENERIC_PRESETS)}
    matches = difflib.get_close_matches(lowered, list(folded), n=count, cutoff=0.4)
    return [folded[match] for match in matches] or ["bert-base-uncased", "bert-tiny"]
