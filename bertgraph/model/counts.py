"""A BERT's parameter total from its config alone, without torch.

The graph cache checks a cached graph against this number, so an entry that does not
describe the configured model is rebuilt rather than served. The test suite checks the
formula against ``sum(p.numel() for p in model.parameters())`` for every head.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bertgraph.model.spec import num_labels

# Heads with BertModel's pooler (the others build the backbone with add_pooling_layer=False).
_POOLED = frozenset({"base", "sequence-classification", "multiple-choice", "next-sentence", "pretraining"})


def bert_parameter_total(config: Mapping[str, Any], head: str) -> int | None:
    """Unique parameters (tied ones once) of a validated BERT config with ``head``, or None
    when the config asks for something the formula does not cover.

    >>> from bertgraph.model.presets import preset_config
    >>> bert_parameter_total(preset_config("bert-base-uncased"), "base")
    109482240
    >>> bert_parameter_total(preset_config("bert-base-uncased"), "sequence-classification")
    109483778
    """
    try:
        hidden = int(config["hidden_size"])
        inner = int(config["intermediate_size"])
        vocab = int(config["vocab_size"])
        layers = int(config["num_hidden_layers"])
        positions = int(config["max_position_embeddings"])
        types = int(config["type_vocab_size"])
    except (KeyError, TypeError, ValueError):
        return None
    labels = num_labels(dict(config))
    embeddings = (vocab + positions + types) * hidden + 2 * hidden
    # Q, K, V and output projections, the two feed-forward projections, two LayerNorms.
    layer = 4 * hidden * hidden + 4 * hidden + 2 * hidden * inner + inner + hidden + 4 * hidden
    if config.get("add_cross_attention"):
        layer += 4 * hidden * hidden + 4 * hidden + 2 * hidden
    total = embeddings + layers * layer
    if head in _POOLED:
        total += hidden * hidden + hidden
    predictions = hidden * hidden + hidden + 2 * hidden + vocab  # transform, LayerNorm, decoder bias
    if config.get("tie_word_embeddings", True) is False:
        predictions += vocab * hidden + vocab  # an own decoder weight, and its own bias
    extra = {
        "base": 0,
        "sequence-classification": hidden * labels + labels,
        "token-classification": hidden * labels + labels,
        "question-answering": hidden * labels + labels,
        "multiple-choice": hidden + 1,
        "next-sentence": 2 * hidden + 2,
        "masked-lm": predictions,
        "pretraining": predictions + 2 * hidden + 2,
    }
    return total + extra[head] if head in extra else None
