"""BERT (``model_type`` bert): the encoder-only model bertgraph began with."""

from __future__ import annotations

from typing import Any

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

_COMPACT = ("bert-tiny", "bert-mini", "bert-small", "bert-medium")

# Published config.json of each preset: the fields that shape the model.
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
    # sentence-transformers/all-MiniLM-L6-v2
    "all-MiniLM-L6-v2": {
        **_COMMON,
        "vocab_size": 30522,
        "hidden_size": 384,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
    },
}

# Hub ids people type for the same checkpoints.
HUB_IDS: dict[str, str] = {
    **{f"google-bert/{name}": name for name in PRESETS if name.startswith("bert-") and name not in _COMPACT},
    "google/bert_uncased_L-2_H-128_A-2": "bert-tiny",
    "google/bert_uncased_L-4_H-256_A-4": "bert-mini",
    "google/bert_uncased_L-4_H-512_A-8": "bert-small",
    "google/bert_uncased_L-8_H-512_A-8": "bert-medium",
    **{f"prajjwal1/{name}": name for name in _COMPACT},
    "sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2",
}

# Module roles of the BERT-style encoder (also RoBERTa's, ELECTRA's, DeBERTa's, MPNet's).
BERT_ROLES: tuple[tuple[str, str], ...] = (
    (r"embeddings", EMBEDDINGS),
    (r"embeddings\.position_embeddings", POSITION),
    (r"encoder", STACK),
    (r"encoder\.layer", STACK),
    (r"encoder\.layer\.\d+", LAYER),
    (r"encoder\.layer\.\d+\.attention", SELF_ATTENTION),
    (r"encoder\.layer\.\d+\.(intermediate|output)", FEED_FORWARD),
    (r"pooler", POOLER),
    (r"(.*\.)?LayerNorm", NORM),
)

# Output names of the encoder heads, shared by the encoder families.
LAST_HIDDEN = ("last_hidden_state",)
POOLED = ("last_hidden_state", "pooler_output")
LOGITS = ("logits",)
SPANS = ("start_logits", "end_logits")
ENCODER_HEADS = {
    "sequence-classification": Head("{}ForSequenceClassification", LOGITS),
    "token-classification": Head("{}ForTokenClassification", LOGITS),
    "question-answering": Head("{}ForQuestionAnswering", SPANS),
    "masked-lm": Head("{}ForMaskedLM", LOGITS),
    "multiple-choice": Head("{}ForMultipleChoice", LOGITS),
}
BERT_SIZES = {
    "layers": "num_hidden_layers",
    "hidden": "hidden_size",
    "heads": "num_attention_heads",
    "intermediate": "intermediate_size",
    "vocab": "vocab_size",
    "max_position": "max_position_embeddings",
    "type_vocab": "type_vocab_size",
}

FAMILY = Family(
    name="bert",
    structure=ENCODER_ONLY,
    variants=frozen(
        {
            "bert": Variant(
                "transformers.models.bert.modeling_bert",
                "Bert",
                frozen(
                    {
                        "num_hidden_layers": 12,
                        "hidden_size": 768,
                        "num_attention_heads": 12,
                        "intermediate_size": 3072,
                        "vocab_size": 30522,
                        "max_position_embeddings": 512,
                        "type_vocab_size": 2,
                        "hidden_act": "gelu",
                    }
                ),
            )
        }
    ),
    prefix="bert",
    heads=frozen(
        {
            "base": Head("{}Model", POOLED),
            **ENCODER_HEADS,
            "next-sentence": Head("{}ForNextSentencePrediction", LOGITS),
            "pretraining": Head("{}ForPreTraining", ("prediction_logits", "seq_relationship_logits")),
        }
    ),
    sizes=frozen(BERT_SIZES),
    stacks=(Stack("encoder.layer", ENCODER),),
    roles=BERT_ROLES,
    token_types="type_vocab_size",
    activation="hidden_act",
    presets=frozen(PRESETS),
    hub_ids=frozen(HUB_IDS),
    uses="understanding text: classification, token tagging, extractive QA, embeddings",
)
