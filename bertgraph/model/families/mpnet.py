"""MPNet: a BERT-shaped encoder with a relative-position bias shared by all layers (eager only)."""

from __future__ import annotations

from typing import Any

from bertgraph.model.families.bert import BERT_ROLES, ENCODER_HEADS, POOLED
from bertgraph.model.families.record import ENCODER, ENCODER_ONLY, POSITION, Family, Head, Stack, Variant, frozen

# Published config.json of each preset: the fields that shape the model.
PRESETS: dict[str, dict[str, Any]] = {
    "all-mpnet-base-v2": {
        "model_type": "mpnet",
        "vocab_size": 30527,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 514,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-05,
        "relative_attention_num_buckets": 32,
        "pad_token_id": 1,
        "bos_token_id": 0,
        "eos_token_id": 2,
    },
}

# Hub ids people type for the same checkpoints.
HUB_IDS: dict[str, str] = {
    "sentence-transformers/all-mpnet-base-v2": "all-mpnet-base-v2",
}

FAMILY = Family(
    name="mpnet",
    structure=ENCODER_ONLY,
    variants=frozen(
        {
            "mpnet": Variant(
                "transformers.models.mpnet.modeling_mpnet",
                "MPNet",
                frozen(
                    {
                        "num_hidden_layers": 12,
                        "hidden_size": 768,
                        "num_attention_heads": 12,
                        "intermediate_size": 3072,
                        "vocab_size": 30527,
                        "max_position_embeddings": 512,
                        "hidden_act": "gelu",
                    }
                ),
            )
        }
    ),
    prefix="mpnet",
    heads=frozen({"base": Head("{}Model", POOLED), **ENCODER_HEADS}),
    sizes=frozen(
        {
            "layers": "num_hidden_layers",
            "hidden": "hidden_size",
            "heads": "num_attention_heads",
            "intermediate": "intermediate_size",
            "vocab": "vocab_size",
            "max_position": "max_position_embeddings",
        }
    ),
    stacks=(Stack("encoder.layer", ENCODER),),
    roles=((r"encoder\.relative_attention_bias", POSITION), *BERT_ROLES),
    titles=((r"encoder\.relative_attention_bias", "relative position bias"),),
    activation="hidden_act",
    attention="eager",
    presets=frozen(PRESETS),
    hub_ids=frozen(HUB_IDS),
    uses="sentence embeddings and semantic search (all-mpnet-base-v2), classification",
    positions_after="pad_token_id",  # position ids count from padding_idx + 1
)
