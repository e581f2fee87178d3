"""Published configurations of the common BERT checkpoints, so no network is needed.

Each preset is the ``config.json`` of the checkpoint on the Hugging Face hub, reduced
to the fields that change the architecture. Importing this module is free: it is
plain data.
"""

from __future__ import annotations

import difflib
from typing import Any

_COMMON: dict[str, Any] = {
    "model_type": "bert",
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "pad_token_id": 0,
}


def _config(vocab: int, hidden: int, layers: int, heads: int, **extra: Any) -> dict[str, Any]:
    return {
        **_COMMON,
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": 4 * hidden,
        **extra,
    }


_MULTILINGUAL_EXTRA: dict[str, Any] = {
    "directionality": "bidi",
    "pooler_fc_size": 768,
    "pooler_num_attention_heads": 12,
    "pooler_num_fc_layers": 3,
    "pooler_size_per_head": 128,
    "pooler_type": "first_token_transform",
}

PRESETS: dict[str, dict[str, Any]] = {
    "bert-base-uncased": _config(30522, 768, 12, 12),
    "bert-base-cased": _config(28996, 768, 12, 12),
    "bert-large-uncased": _config(30522, 1024, 24, 16),
    "bert-large-cased": _config(28996, 1024, 24, 16),
    "bert-base-multilingual-cased": _config(119547, 768, 12, 12, **_MULTILINGUAL_EXTRA),
    "bert-base-chinese": _config(21128, 768, 12, 12, **_MULTILINGUAL_EXTRA),
    # The compact models of Turc et al. (google/bert_uncased_L-*_H-*_A-*).
    "bert-tiny": _config(30522, 128, 2, 2),
    "bert-mini": _config(30522, 256, 4, 4),
    "bert-small": _config(30522, 512, 4, 8),
    "bert-medium": _config(30522, 512, 8, 8),
}

# Hub ids people type for the same checkpoints.
_FULL_SIZE = [name for name in PRESETS if name not in ("bert-tiny", "bert-mini", "bert-small", "bert-medium")]
ALIASES: dict[str, str] = {
    **{f"google-bert/{name}": name for name in _FULL_SIZE},
    "google/bert_uncased_L-2_H-128_A-2": "bert-tiny",
    "google/bert_uncased_L-4_H-256_A-4": "bert-mini",
    "google/bert_uncased_L-4_H-512_A-8": "bert-small",
    "google/bert_uncased_L-8_H-512_A-8": "bert-medium",
    **{f"prajjwal1/{name}": name for name in ("bert-tiny", "bert-mini", "bert-small", "bert-medium")},
}


def preset_config(name: str) -> dict[str, Any] | None:
    """The published config of a preset or one of its hub aliases, or None.

    >>> preset_config("bert-base-uncased")["hidden_size"]
    768
    >>> preset_config("google/bert_uncased_L-2_H-128_A-2")["num_hidden_layers"]
    2
    >>> preset_config("gpt2") is None
    True
    """
    key = ALIASES.get(name, name)
    config = PRESETS.get(key)
    return dict(config) if config is not None else None


def canonical_name(name: str) -> str:
    """The preset name behind an alias (``google-bert/bert-base-uncased`` → ``bert-base-uncased``)."""
    return ALIASES.get(name, name)


def closest_presets(name: str, count: int = 3) -> list[str]:
    """Preset names that look like ``name``, best first, for "did you mean" messages.

    >>> closest_presets("bert-bsae-uncased")[0]
    'bert-base-uncased'
    """
    lowered = name.lower().split("/")[-1]
    matches = difflib.get_close_matches(lowered, list(PRESETS), n=count, cutoff=0.4)
    return matches or ["bert-base-uncased", "bert-tiny"]
