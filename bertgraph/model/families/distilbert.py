"""DistilBERT: six BERT layers distilled, no token types, no pooler."""

from __future__ import annotations

from typing import Any

from bertgraph.model.families.bert import ENCODER_HEADS, LAST_HIDDEN
from bertgraph.model.families.record import (
    EMBEDDINGS,
    ENCODER,
    ENCODER_ONLY,
    FEED_FORWARD,
    LAYER,
    NORM,
    POSITION,
    SELF_ATTENTION,
    STACK,
    Family,
    Head,
    Stack,
    Variant,
    frozen,
)

# Published config.json of each preset: the fields that shape the model.
PRESETS: dict[str, dict[str, Any]] = {
    "distilbert-base-uncased": {
        "model_type": "distilbert",
        "vocab_size": 30522,
        "dim": 768,
        "n_layers": 6,
        "n_heads": 12,
        "hidden_dim": 3072,
        "activation": "gelu",
        "dropout": 0.1,
        "attention_dropout": 0.1,
        "max_position_embeddings": 512,
        "sinusoidal_pos_embds": False,
        "initializer_range": 0.02,
        "pad_token_id": 0,
        "qa_dropout": 0.1,
        "seq_classif_dropout": 0.2,
        "tie_weights_": True,
    },
}

# Hub ids people type for the same checkpoints.
HUB_IDS: dict[str, str] = {
    "distilbert/distilbert-base-uncased": "distilbert-base-uncased",
}

FAMILY = Family(
    name="distilbert",
    structure=ENCODER_ONLY,
    variants=frozen(
        {
            "distilbert": Variant(
                "transformers.models.distilbert.modeling_distilbert",
                "DistilBert",
                frozen(
                    {
                        "n_layers": 6,
                        "dim": 768,
                        "n_heads": 12,
                        "hidden_dim": 3072,
                        "vocab_size": 30522,
                        "max_position_embeddings": 512,
                        "activation": "gelu",
                    }
                ),
            )
        }
    ),
    prefix="distilbert",
    heads=frozen({"base": Head("{}Model", LAST_HIDDEN), **ENCODER_HEADS}),
    sizes=frozen(
        {
            "layers": "n_layers",
            "hidden": "dim",
            "heads": "n_heads",
            "intermediate": "hidden_dim",
            "vocab": "vocab_size",
            "max_position": "max_position_embeddings",
        }
    ),
    aliases=frozen({"num_hidden_layers": "n_layers", "hidden_size": "dim", "num_attention_heads": "n_heads"}),
    stacks=(Stack("transformer.layer", ENCODER),),
    roles=(
        (r"embeddings", EMBEDDINGS),
        (r"embeddings\.position_embeddings", POSITION),
        (r"transformer", STACK),
        (r"transformer\.layer", STACK),
        (r"transformer\.layer\.\d+", LAYER),
        (r"transformer\.layer\.\d+\.attention", SELF_ATTENTION),
        (r"transformer\.layer\.\d+\.ffn", FEED_FORWARD),
        (r"(.*\.)?(LayerNorm|\w*layer_norm)", NORM),
    ),
    activation="activation",
    presets=frozen(PRESETS),
    hub_ids=frozen(HUB_IDS),
    uses="a smaller, faster BERT distilled from it: the same tasks on less compute",
)
