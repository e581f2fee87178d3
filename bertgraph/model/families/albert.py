"""ALBERT: factorised embeddings and one layer whose weights every layer shares."""

from __future__ import annotations

from typing import Any

from bertgraph.model.families.bert import ENCODER_HEADS, POOLED
from bertgraph.model.families.record import (
    EMBEDDINGS,
    ENCODER,
    ENCODER_ONLY,
    FEED_FORWARD,
    LAYER,
    NORM,
    POOLER,
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
    "albert-base-v2": {
        "model_type": "albert",
        "vocab_size": 30000,
        "embedding_size": 128,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_hidden_groups": 1,
        "inner_group_num": 1,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "hidden_act": "gelu_new",
        "hidden_dropout_prob": 0,
        "attention_probs_dropout_prob": 0,
        "classifier_dropout_prob": 0.1,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
        "bos_token_id": 2,
        "eos_token_id": 3,
        "down_scale_factor": 1,
        "gap_size": 0,
        "net_structure_type": 0,
        "num_memory_blocks": 0,
    },
}

# Hub ids people type for the same checkpoints.
HUB_IDS: dict[str, str] = {
    "albert/albert-base-v2": "albert-base-v2",
}

FAMILY = Family(
    name="albert",
    structure=ENCODER_ONLY,
    variants=frozen(
        {
            "albert": Variant(
                "transformers.models.albert.modeling_albert",
                "Albert",
                frozen(
                    {
                        "num_hidden_layers": 12,
                        "hidden_size": 4096,
                        "num_attention_heads": 64,
                        "intermediate_size": 16384,
                        "vocab_size": 30000,
                        "max_position_embeddings": 512,
                        "type_vocab_size": 2,
                        "embedding_size": 128,
                        "hidden_act": "gelu_new",
                    }
                ),
            )
        }
    ),
    prefix="albert",
    heads=frozen(
        {
            "base": Head("{}Model", POOLED),
            **ENCODER_HEADS,
            "pretraining": Head("{}ForPreTraining", ("prediction_logits", "sop_logits")),
        }
    ),
    sizes=frozen(
        {
            "layers": "num_hidden_layers",
            "hidden": "hidden_size",
            "heads": "num_attention_heads",
            "intermediate": "intermediate_size",
            "vocab": "vocab_size",
            "max_position": "max_position_embeddings",
            "type_vocab": "type_vocab_size",
            "embedding": "embedding_size",
        }
    ),
    # One layer group holding one layer, called once per layer.
    stacks=(Stack("encoder.albert_layer_groups", ENCODER, shared=True),),
    roles=(
        (r"embeddings", EMBEDDINGS),
        (r"embeddings\.position_embeddings", POSITION),
        (r"encoder", STACK),
        (r"encoder\.embedding_hidden_mapping_in", EMBEDDINGS),
        (r"encoder\.albert_layer_groups", STACK),
        (r"encoder\.albert_layer_groups\.\d+(\.albert_layers(\.\d+)?)?", LAYER),
        (r"encoder\.albert_layer_groups\.\d+\.albert_layers\.\d+\.attention", SELF_ATTENTION),
        (r"encoder\.albert_layer_groups\.\d+\.albert_layers\.\d+\.(ffn|ffn_output|activation)", FEED_FORWARD),
        (r"pooler(_activation)?", POOLER),
        (r"(.*\.)?(LayerNorm|full_layer_layer_norm)", NORM),
    ),
    token_types="type_vocab_size",
    activation="hidden_act",
    presets=frozen(PRESETS),
    hub_ids=frozen(HUB_IDS),
    uses="a BERT with one shared layer and factorised embeddings: the same tasks with few parameters",
)
