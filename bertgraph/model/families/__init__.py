"""One record per model family: what differs between BERT, RoBERTa, GPT-2, T5, ….

Each module holds a frozen :class:`~bertgraph.model.families.record.Family` (``FAMILY``)
and its presets; this package looks them up by ``model_type``. Plain data: importing it
costs nothing, and nothing here imports torch or transformers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bertgraph.model.families import (
    albert,
    bart,
    bert,
    deberta,
    distilbert,
    electra,
    gpt2,
    llama,
    modernbert,
    mpnet,
    roberta,
    t5,
)
from bertgraph.model.families.record import HEAD_NAMES, ROLES, STRUCTURES, Family, Head, Stack, Variant

FAMILIES: tuple[Family, ...] = tuple(
    module.FAMILY
    for module in (bert, roberta, distilbert, albert, electra, deberta, modernbert, mpnet, gpt2, llama, t5, bart)
)
BY_TYPE: Mapping[str, Family] = {model_type: family for family in FAMILIES for model_type in family.variants}
MODEL_TYPES: tuple[str, ...] = tuple(BY_TYPE)
BY_NAME: Mapping[str, Family] = {family.name: family for family in FAMILIES}


def family_of(model_type: str) -> Family | None:
    """The family of a ``model_type`` (``xlm-roberta`` → roberta), or None when unknown.

    >>> family_of("qwen2").name, family_of("mt5").structure, family_of("gpt-j") is None
    ('llama', 'encoder-decoder', True)
    """
    return BY_TYPE.get(model_type)


def all_presets() -> dict[str, dict[str, Any]]:
    """Every family's presets, preset name → published config."""
    return {name: dict(config) for family in FAMILIES for name, config in family.presets.items()}


def all_hub_ids() -> dict[str, str]:
    """Every family's hub ids, hub id → preset name."""
    return {hub: name for family in FAMILIES for hub, name in family.hub_ids.items()}


__all__ = [
    "BY_NAME",
    "BY_TYPE",
    "FAMILIES",
    "HEAD_NAMES",
    "MODEL_TYPES",
    "ROLES",
    "STRUCTURES",
    "Family",
    "Head",
    "Stack",
    "Variant",
    "all_hub_ids",
    "all_presets",
    "family_of",
]
