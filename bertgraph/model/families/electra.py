"""ELECTRA: a BERT-shaped discriminator, embeddings projected up when they are smaller."""

from __future__ import annotations

from typing import Any

from bertgraph.model.families.bert import BERT_ROLES, BERT_SIZES, ENCODER_HEADS, LAST_HIDDEN, LOGITS
from bertgraph.model.families.record import EMBEDDINGS, ENCODER, ENCODER_ONLY, Family, Head, Stack, Variant, frozen

# Published config.json of each preset: the fields that shape the model.
PRESETS: dict[str, dict[str, Any]] = {
    "electra-small-discriminator": {
        "model_type": "electra",
        "vocab_size": 30522,
        "embedding_size": 128,
        "hidden_size": 256,
        "num_hidden_layers": 12,
        "num_attention_heads": 4,
        "intermediate_size": 1024,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
    },
    "electra-base-discriminator": {
        "model_type": "electra",
        "vocab_size": 30522,
        "embedding_size": 768,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
    },
}

# Hub ids people type for the same checkpoints.
HUB_IDS: dict[str, str] = {
    "google/electra-small-discriminator": "electra-small-discriminator",
    "google/electra-base-discriminator": "electra-base-discriminator",
}

FAMILY = Family(
    name="electra",
    structure=ENCODER_ONLY,
    variants=frozen(
        {
            "electra": Variant(
                "transformers.models.electra.modeling_electra",
                "Electra",
                frozen(
                    {
                        "num_hidden_layers": 12,
                        "hidden_size": 256,
                        "num_attention_heads": 4,
                        "intermediate_size": 1024,
                        "vocab_size": 30522,
                        "max_position_embeddings": 512,
                        "type_vocab_size": 2,
                        "embedding_size": 128,
                        "hidden_act": "gelu",
                    }
                ),
            )
        }
    ),
    prefix="electra",
    heads=frozen(
        {
            "base": Head("{}Model", LAST_HIDDEN),
            **ENCODER_HEADS,
            "pretraining": Head("{}ForPreTraining", LOGITS),
        }
    ),
    sizes=frozen({**BERT_SIZES, "embedding": "embedding_size"}),
    stacks=(Stack("encoder.layer", ENCODER),),
    roles=((r"embeddings_project", EMBEDDINGS), *BERT_ROLES),
    token_types="type_vocab_size",
    activation="hidden_act",
    presets=frozen(PRESETS),
    hub_ids=frozen(HUB_IDS),
    uses="an encoder pre-trained to spot replaced tokens: classification, tagging, QA",
)
