"""DeBERTa-v2 and DeBERTa-v3 configs: disentangled attention over relative positions (eager only)."""

from __future__ import annotations

from typing import Any

from bertgraph.model.families.bert import BERT_ROLES, BERT_SIZES, ENCODER_HEADS, LAST_HIDDEN
from bertgraph.model.families.record import ENCODER, ENCODER_ONLY, POSITION, Family, Head, Stack, Variant, frozen

# Published config.json of each preset: the fields that shape the model.
PRESETS: dict[str, dict[str, Any]] = {
    "deberta-v3-base": {
        "model_type": "deberta-v2",
        "vocab_size": 128100,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 512,
        "type_vocab_size": 0,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-07,
        "relative_attention": True,
        "max_relative_positions": -1,
        "position_buckets": 256,
        "norm_rel_ebd": "layer_norm",
        "share_att_key": True,
        "pos_att_type": "p2c|c2p",
        "position_biased_input": False,
        "pad_token_id": 0,
    },
}

# Hub ids people type for the same checkpoints.
HUB_IDS: dict[str, str] = {
    "microsoft/deberta-v3-base": "deberta-v3-base",
}

FAMILY = Family(
    name="deberta",
    structure=ENCODER_ONLY,
    variants=frozen(
        {
            "deberta-v2": Variant(
                "transformers.models.deberta_v2.modeling_deberta_v2",
                "DebertaV2",
                frozen(
                    {
                        "num_hidden_layers": 24,
                        "hidden_size": 1536,
                        "num_attention_heads": 24,
                        "intermediate_size": 6144,
                        "vocab_size": 128100,
                        "max_position_embeddings": 512,
                        "type_vocab_size": 0,
                        "hidden_act": "gelu",
                    }
                ),
            )
        }
    ),
    prefix="deberta",
    heads=frozen({"base": Head("{}Model", LAST_HIDDEN), **ENCODER_HEADS}),
    sizes=frozen(BERT_SIZES),
    stacks=(Stack("encoder.layer", ENCODER),),
    # The encoder-level LayerNorm normalises the relative-position table (its op reads the table's
    # weight too): drawn as the position table it gives, not as a normalisation.
    roles=((r"encoder\.rel_embeddings", POSITION), (r"encoder\.LayerNorm", POSITION), *BERT_ROLES),
    titles=((r"encoder\.LayerNorm", "relative-position embeddings"),),
    token_types="type_vocab_size",
    activation="hidden_act",
    attention="eager",
    presets=frozen(PRESETS),
    hub_ids=frozen(HUB_IDS),
    uses="understanding text with disentangled relative attention: classification, QA, NLI",
)
