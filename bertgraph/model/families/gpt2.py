"""GPT-2: the decoder-only model with learned positions and Conv1D projections."""

from __future__ import annotations

from typing import Any

from bertgraph.model.families.bert import LAST_HIDDEN, LOGITS, SPANS
from bertgraph.model.families.record import (
    DECODER,
    DECODER_ONLY,
    EMBEDDINGS,
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
    "gpt2": {
        "model_type": "gpt2",
        "vocab_size": 50257,
        "n_embd": 768,
        "n_layer": 12,
        "n_head": 12,
        "n_positions": 1024,
        "n_ctx": 1024,
        "n_inner": None,
        "activation_function": "gelu_new",
        "resid_pdrop": 0.1,
        "embd_pdrop": 0.1,
        "attn_pdrop": 0.1,
        "layer_norm_epsilon": 1e-05,
        "initializer_range": 0.02,
        "bos_token_id": 50256,
        "eos_token_id": 50256,
        "summary_type": "cls_index",
        "summary_use_proj": True,
        "summary_activation": None,
        "summary_proj_to_labels": True,
        "summary_first_dropout": 0.1,
    },
}

# Hub ids people type for the same checkpoints.
HUB_IDS: dict[str, str] = {
    "openai-community/gpt2": "gpt2",
}

FAMILY = Family(
    name="gpt2",
    structure=DECODER_ONLY,
    variants=frozen(
        {
            "gpt2": Variant(
                "transformers.models.gpt2.modeling_gpt2",
                "GPT2",
                frozen(
                    {
                        "n_layer": 12,
                        "n_embd": 768,
                        "n_head": 12,
                        "n_inner": None,
                        "vocab_size": 50257,
                        "n_positions": 1024,
                        "activation_function": "gelu_new",
                    }
                ),
            )
        }
    ),
    prefix="transformer",
    heads=frozen(
        {
            "base": Head("{}Model", LAST_HIDDEN),
            "causal-lm": Head("{}LMHeadModel", LOGITS),
            "sequence-classification": Head("{}ForSequenceClassification", LOGITS, pad_token=True),
            "token-classification": Head("{}ForTokenClassification", LOGITS),
            "question-answering": Head("{}ForQuestionAnswering", SPANS),
        }
    ),
    sizes=frozen(
        {
            "layers": "n_layer",
            "hidden": "n_embd",
            "heads": "n_head",
            "intermediate": "n_inner",
            "vocab": "vocab_size",
            "max_position": "n_positions",
        }
    ),
    aliases=frozen(
        {
            "num_hidden_layers": "n_layer",
            "hidden_size": "n_embd",
            "num_attention_heads": "n_head",
            "max_position_embeddings": "n_positions",
        }
    ),
    fallbacks=frozen({"intermediate": ("hidden", 4)}),
    stacks=(Stack("h", DECODER),),
    roles=(
        (r"wte", EMBEDDINGS),
        (r"wpe", POSITION),
        (r"h", STACK),
        (r"h\.\d+", LAYER),
        (r"h\.\d+\.attn", SELF_ATTENTION),
        (r"h\.\d+\.mlp", FEED_FORWARD),
        (r"(.*\.)?ln_\w+", NORM),
        (r"lm_head", HEAD),
    ),
    activation="activation_function",
    presets=frozen(PRESETS),
    hub_ids=frozen(HUB_IDS),
    uses="generating text, left to right: completion, language modelling",
)
