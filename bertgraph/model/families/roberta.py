"""RoBERTa and its multilingual siblings XLM-RoBERTa and CamemBERT: BERT's code with other position ids."""

from __future__ import annotations

from typing import Any

from bertgraph.model.families.bert import BERT_ROLES, BERT_SIZES, ENCODER_HEADS, POOLED
from bertgraph.model.families.record import ENCODER, ENCODER_ONLY, Family, Head, Stack, Variant, frozen

# Published config.json of each preset: the fields that shape the model.
PRESETS: dict[str, dict[str, Any]] = {
    "roberta-base": {
        "model_type": "roberta",
        "vocab_size": 50265,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 514,
        "type_vocab_size": 1,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-05,
        "pad_token_id": 1,
        "bos_token_id": 0,
        "eos_token_id": 2,
    },
    "roberta-large": {
        "model_type": "roberta",
        "vocab_size": 50265,
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 514,
        "type_vocab_size": 1,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-05,
        "pad_token_id": 1,
        "bos_token_id": 0,
        "eos_token_id": 2,
    },
    "xlm-roberta-base": {
        "model_type": "xlm-roberta",
        "vocab_size": 250002,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 514,
        "type_vocab_size": 1,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-05,
        "pad_token_id": 1,
        "bos_token_id": 0,
        "eos_token_id": 2,
        "position_embedding_type": "absolute",
    },
    "camembert-base": {
        "model_type": "camembert",
        "vocab_size": 32005,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 514,
        "type_vocab_size": 1,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-05,
        "pad_token_id": 1,
        "bos_token_id": 5,
        "eos_token_id": 6,
    },
}

# Hub ids people type for the same checkpoints.
HUB_IDS: dict[str, str] = {
    "FacebookAI/roberta-base": "roberta-base",
    "FacebookAI/roberta-large": "roberta-large",
    "FacebookAI/xlm-roberta-base": "xlm-roberta-base",
    "almanach/camembert-base": "camembert-base",
}


def _defaults(vocab: int) -> dict[str, Any]:
    return {
        "num_hidden_layers": 12,
        "hidden_size": 768,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "vocab_size": vocab,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "hidden_act": "gelu",
    }


FAMILY = Family(
    name="roberta",
    structure=ENCODER_ONLY,
    variants=frozen(
        {
            "roberta": Variant("transformers.models.roberta.modeling_roberta", "Roberta", frozen(_defaults(50265))),
            "xlm-roberta": Variant(
                "transformers.models.xlm_roberta.modeling_xlm_roberta", "XLMRoberta", frozen(_defaults(30522))
            ),
            "camembert": Variant(
                "transformers.models.camembert.modeling_camembert", "Camembert", frozen(_defaults(30522))
            ),
        }
    ),
    prefix="roberta",
    heads=frozen({"base": Head("{}Model", POOLED), **ENCODER_HEADS}),
    sizes=frozen(BERT_SIZES),
    stacks=(Stack("encoder.layer", ENCODER),),
    roles=BERT_ROLES,
    token_types="type_vocab_size",
    activation="hidden_act",
    presets=frozen(PRESETS),
    hub_ids=frozen(HUB_IDS),
    uses="understanding text (BERT trained longer): classification, tagging, QA; XLM-R and CamemBERT: other languages",
    positions_after="pad_token_id",  # position ids count from padding_idx + 1
)
