"""T5 and mT5: encoder-decoder with a relative-position bias computed in each stack's first block."""

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
    HEAD,
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
    "t5-small": {
        "model_type": "t5",
        "vocab_size": 32128,
        "d_model": 512,
        "d_kv": 64,
        "d_ff": 2048,
        "num_layers": 6,
        "num_heads": 8,
        "relative_attention_num_buckets": 32,
        "dropout_rate": 0.1,
        "layer_norm_epsilon": 1e-06,
        "initializer_factor": 1.0,
        "feed_forward_proj": "relu",
        "is_encoder_decoder": True,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "decoder_start_token_id": 0,
        "n_positions": 512,
    },
    "mt5-small": {
        "model_type": "mt5",
        "vocab_size": 250112,
        "d_model": 512,
        "d_kv": 64,
        "d_ff": 1024,
        "num_layers": 8,
        "num_decoder_layers": 8,
        "num_heads": 6,
        "relative_attention_num_buckets": 32,
        "dropout_rate": 0.1,
        "layer_norm_epsilon": 1e-06,
        "initializer_factor": 1.0,
        "feed_forward_proj": "gated-gelu",
        "is_encoder_decoder": True,
        "tie_word_embeddings": False,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "decoder_start_token_id": 0,
        "tokenizer_class": "T5Tokenizer",
    },
}

# Hub ids people type for the same checkpoints.
HUB_IDS: dict[str, str] = {
    "google-t5/t5-small": "t5-small",
    "google/mt5-small": "mt5-small",
}

_SEQ2SEQ = ("encoder_last_hidden_state",)


def _defaults(**sizes: Any) -> dict[str, Any]:
    return {"num_decoder_layers": None, "d_kv": 64, "vocab_size": 32128, **sizes}


FAMILY = Family(
    name="t5",
    structure=ENCODER_DECODER,
    variants=frozen(
        {
            "t5": Variant(
                "transformers.models.t5.modeling_t5",
                "T5",
                frozen(_defaults(num_layers=6, d_model=512, num_heads=8, d_ff=2048, feed_forward_proj="relu")),
            ),
            "mt5": Variant(
                "transformers.models.mt5.modeling_mt5",
                "MT5",
                frozen(
                    _defaults(
                        num_layers=8,
                        d_model=512,
                        num_heads=6,
                        d_ff=1024,
                        vocab_size=250112,
                        feed_forward_proj="gated-gelu",
                    )
                ),
            ),
        }
    ),
    prefix="transformer",
    heads=frozen(
        {
            "base": Head("{}Model", ("last_hidden_state", *_SEQ2SEQ), decoder_inputs=True),
            # The LM and QA heads sit beside the stacks, with no base model of their own.
            "seq2seq-lm": Head("{}ForConditionalGeneration", (*LOGITS, *_SEQ2SEQ), decoder_inputs=True, backbone=""),
            "question-answering": Head("{}ForQuestionAnswering", (*SPANS, *_SEQ2SEQ), decoder_inputs=True, backbone=""),
            # Classification feeds the decoder the shifted input and reads it at the <eos> tokens.
            "sequence-classification": Head("{}ForSequenceClassification", (*LOGITS, *_SEQ2SEQ)),
            "token-classification": Head("{}ForTokenClassification", LOGITS),
        }
    ),
    sizes=frozen(
        {
            "layers": "num_layers",
            "decoder_layers": "num_decoder_layers",
            "hidden": "d_model",
            "heads": "num_heads",
            "intermediate": "d_ff",
            "vocab": "vocab_size",
        }
    ),
    aliases=frozen({"num_hidden_layers": "num_layers", "hidden_size": "d_model", "num_attention_heads": "num_heads"}),
    fallbacks=frozen({"decoder_layers": ("layers", 1)}),
    stacks=(Stack("encoder.block", ENCODER, special=1), Stack("decoder.block", DECODER, "decoder_layers", special=1)),
    roles=(
        (r"shared|(encoder|decoder)\.embed_tokens", EMBEDDINGS),
        (r"encoder|decoder", STACK),
        (r"(encoder|decoder)\.block", STACK),
        (r"(encoder|decoder)\.block\.\d+", LAYER),
        (r"(encoder|decoder)\.block\.\d+\.layer", LAYER),
        (r"(encoder|decoder)\.block\.\d+\.layer\.0\.SelfAttention\.relative_attention_bias", POSITION),
        (r"(encoder|decoder)\.block\.\d+\.layer\.0", SELF_ATTENTION),
        (r"encoder\.block\.\d+\.layer\.1", FEED_FORWARD),
        (r"decoder\.block\.\d+\.layer\.1", CROSS_ATTENTION),
        (r"decoder\.block\.\d+\.layer\.2", FEED_FORWARD),
        (r"(.*\.)?(layer_norm|final_layer_norm)", NORM),
        (r"lm_head|qa_outputs", HEAD),
    ),
    titles=(
        (r"(encoder|decoder)\.block\.\d+\.layer\.0\.SelfAttention\.relative_attention_bias", "relative position bias"),
    ),
    head_dim="d_kv",
    presets=frozen(PRESETS),
    hub_ids=frozen(HUB_IDS),
    uses="text to text: translation, summarisation, question answering (mT5: many languages)",
)
