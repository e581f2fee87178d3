"""ModernBERT: rotary positions, gated feed-forward, a global-attention layer every third layer."""

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
from bertgraph.model.fields import Field

# Published config.json of each preset: the fields that shape the model.
PRESETS: dict[str, dict[str, Any]] = {
    "modernbert-base": {
        "model_type": "modernbert",
        "vocab_size": 50368,
        "hidden_size": 768,
        "num_hidden_layers": 22,
        "num_attention_heads": 12,
        "intermediate_size": 1152,
        "hidden_activation": "gelu",
        "max_position_embeddings": 8192,
        "norm_eps": 1e-05,
        "norm_bias": False,
        "layer_norm_eps": 1e-05,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "mlp_dropout": 0.0,
        "embedding_dropout": 0.0,
        "decoder_bias": True,
        "classifier_pooling": "mean",
        "classifier_activation": "gelu",
        "classifier_bias": False,
        "classifier_dropout": 0.0,
        "global_attn_every_n_layers": 3,
        "local_attention": 128,
        "global_rope_theta": 160000.0,
        "local_rope_theta": 10000.0,
        "initializer_range": 0.02,
        "initializer_cutoff_factor": 2.0,
        "pad_token_id": 50283,
        "bos_token_id": 50281,
        "eos_token_id": 50282,
        "cls_token_id": 50281,
        "sep_token_id": 50282,
        "position_embedding_type": "absolute",
        "sparse_prediction": False,
        "sparse_pred_ignore_index": -100,
    },
}

# Hub ids people type for the same checkpoints.
HUB_IDS: dict[str, str] = {
    "answerdotai/ModernBERT-base": "modernbert-base",
}

FAMILY = Family(
    name="modernbert",
    structure=ENCODER_ONLY,
    variants=frozen(
        {
            "modernbert": Variant(
                "transformers.models.modernbert.modeling_modernbert",
                "ModernBert",
                frozen(
                    {
                        "num_hidden_layers": 22,
                        "hidden_size": 768,
                        "num_attention_heads": 12,
                        "intermediate_size": 1152,
                        "vocab_size": 50368,
                        "max_position_embeddings": 8192,
                        "hidden_activation": "gelu",
                        "global_attn_every_n_layers": 3,
                    }
                ),
            )
        }
    ),
    prefix="model",
    heads=frozen({"base": Head("{}Model", LAST_HIDDEN), **ENCODER_HEADS}),
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
    # Layer 0 has no attention norm; then every third layer attends globally, the others
    # within a sliding window.
    stacks=(Stack("layers", ENCODER, special=1, period="global_attn_every_n_layers", types="layer_types"),),
    roles=(
        (r"embeddings", EMBEDDINGS),
        (r"layers", STACK),
        (r"layers\.\d+", LAYER),
        (r"layers\.\d+\.attn", SELF_ATTENTION),
        (r"layers\.\d+\.mlp", FEED_FORWARD),
        (r"rotary_emb", POSITION),
        (r"(.*\.)?(norm|\w+_norm)", NORM),
    ),
    activation="hidden_activation",
    presets=frozen(PRESETS),
    hub_ids=frozen(HUB_IDS),
    uses="a long-context encoder (8,192 tokens): retrieval, classification, code",
    # Local layers attend local_attention // 2 tokens each side: fewer than 2 is no window.
    fields=frozen({"local_attention": Field("count", minimum=2)}),
)
