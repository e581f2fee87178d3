"""BART: a BERT-like encoder and a GPT-like decoder with cross-attention, learned positions."""

from __future__ import annotations

from typing import Any

from bertgraph.model.families.bert import LOGITS, SPANS
from bertgraph.model.families.record import (
    CROSS_ATTENTION,
    DECODER,
    EMBEDDINGS,
    ENCODER,
    ENCODER_DECODER,
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
    "bart-base": {
        "model_type": "bart",
        "vocab_size": 50265,
        "d_model": 768,
        "encoder_layers": 6,
        "decoder_layers": 6,
        "encoder_attention_heads": 12,
        "decoder_attention_heads": 12,
        "encoder_ffn_dim": 3072,
        "decoder_ffn_dim": 3072,
        "activation_function": "gelu",
        "max_position_embeddings": 1024,
        "dropout": 0.1,
        "attention_dropout": 0.1,
        "activation_dropout": 0.1,
        "classif_dropout": 0.1,
        "classifier_dropout": 0.0,
        "encoder_layerdrop": 0.0,
        "decoder_layerdrop": 0.0,
        "init_std": 0.02,
        "scale_embedding": False,
        "normalize_before": False,
        "add_final_layer_norm": False,
        "normalize_embedding": True,
        "add_bias_logits": False,
        "is_encoder_decoder": True,
        "num_hidden_layers": 6,
        "pad_token_id": 1,
        "bos_token_id": 0,
        "eos_token_id": 2,
        "decoder_start_token_id": 2,
        "forced_bos_token_id": 0,
        "forced_eos_token_id": 2,
        "num_labels": 3,
    },
}

# Hub ids people type for the same checkpoints.
HUB_IDS: dict[str, str] = {
    "facebook/bart-base": "bart-base",
}

_SEQ2SEQ = ("encoder_last_hidden_state",)

FAMILY = Family(
    name="bart",
    structure=ENCODER_DECODER,
    variants=frozen(
        {
            "bart": Variant(
                "transformers.models.bart.modeling_bart",
                "Bart",
                frozen(
                    {
                        "encoder_layers": 12,
                        "decoder_layers": 12,
                        "d_model": 1024,
                        "encoder_attention_heads": 16,
                        "decoder_attention_heads": 16,
                        "encoder_ffn_dim": 4096,
                        "decoder_ffn_dim": 4096,
                        "vocab_size": 50265,
                        "max_position_embeddings": 1024,
                        "activation_function": "gelu",
                    }
                ),
            )
        }
    ),
    prefix="model",
    heads=frozen(
        {
            "base": Head("{}Model", ("last_hidden_state", *_SEQ2SEQ), decoder_inputs=True),
            "seq2seq-lm": Head("{}ForConditionalGeneration", (*LOGITS, *_SEQ2SEQ), decoder_inputs=True),
            "question-answering": Head("{}ForQuestionAnswering", (*SPANS, *_SEQ2SEQ), decoder_inputs=True),
            # Classification feeds the decoder the shifted input and reads it at the <eos> tokens.
            "sequence-classification": Head("{}ForSequenceClassification", (*LOGITS, *_SEQ2SEQ)),
        }
    ),
    sizes=frozen(
        {
            "layers": "encoder_layers",
            "decoder_layers": "decoder_layers",
            "hidden": "d_model",
            "heads": "encoder_attention_heads",
            "decoder_heads": "decoder_attention_heads",
            "intermediate": "encoder_ffn_dim",
            "decoder_intermediate": "decoder_ffn_dim",
            "vocab": "vocab_size",
            "max_position": "max_position_embeddings",
        }
    ),
    aliases=frozen(
        {
            "hidden_size": "d_model",
            "num_attention_heads": "encoder_attention_heads",
            "num_hidden_layers": "encoder_layers",
        }
    ),
    stacks=(Stack("encoder.layers", ENCODER), Stack("decoder.layers", DECODER, "decoder_layers")),
    roles=(
        (r"shared|(encoder|decoder)\.embed_tokens", EMBEDDINGS),
        (r"(encoder|decoder)\.embed_positions", POSITION),
        (r"encoder|decoder", STACK),
        (r"(encoder|decoder)\.layers", STACK),
        (r"(encoder|decoder)\.layers\.\d+", LAYER),
        (r"(encoder|decoder)\.layers\.\d+\.self_attn", SELF_ATTENTION),
        (r"decoder\.layers\.\d+\.encoder_attn", CROSS_ATTENTION),
        (r"(encoder|decoder)\.layers\.\d+\.(fc1|fc2|activation_fn)", FEED_FORWARD),
        (r"(.*\.)?(\w*layer_norm|layernorm_embedding)", NORM),
    ),
    activation="activation_function",
    presets=frozen(PRESETS),
    hub_ids=frozen(HUB_IDS),
    uses="text to text with a denoising encoder: summarisation, translation, generation",
)
