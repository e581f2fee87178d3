"""LLaMA and Qwen2/Qwen3: decoder-only, rotary positions, RMSNorm, grouped-query attention."""

from __future__ import annotations

from typing import Any

from bertgraph.model.families.bert import LAST_HIDDEN, LOGITS, SPANS
from bertgraph.model.families.record import (
    DECODER,
    DECODER_ONLY,
    EMBEDDINGS,
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
    "TinyLlama-1.1B": {
        "model_type": "llama",
        "vocab_size": 32000,
        "hidden_size": 2048,
        "num_hidden_layers": 22,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "intermediate_size": 5632,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "tie_word_embeddings": False,
        "pretraining_tp": 1,
        "initializer_range": 0.02,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "bfloat16",
    },
    "Qwen2.5-0.5B": {
        "model_type": "qwen2",
        "vocab_size": 151936,
        "hidden_size": 896,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "intermediate_size": 4864,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": True,
        "use_sliding_window": False,
        "sliding_window": 32768,
        "max_window_layers": 24,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "bos_token_id": 151643,
        "eos_token_id": 151643,
        "torch_dtype": "bfloat16",
        "use_mrope": False,
    },
    "Qwen3-0.6B": {
        "model_type": "qwen3",
        "vocab_size": 151936,
        "hidden_size": 1024,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 3072,
        "hidden_act": "silu",
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000,
        "rope_scaling": None,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": 28,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "torch_dtype": "bfloat16",
    },
}

# Hub ids people type for the same checkpoints.
HUB_IDS: dict[str, str] = {
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0": "TinyLlama-1.1B",
    "Qwen/Qwen2.5-0.5B": "Qwen2.5-0.5B",
    "Qwen/Qwen3-0.6B": "Qwen3-0.6B",
}


def _defaults(**extra: Any) -> dict[str, Any]:
    return {
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": None,
        "vocab_size": 32000,
        "max_position_embeddings": 2048,
        "hidden_act": "silu",
        **extra,
    }


FAMILY = Family(
    name="llama",
    structure=DECODER_ONLY,
    variants=frozen(
        {
            "llama": Variant(
                "transformers.models.llama.modeling_llama", "Llama", frozen(_defaults(intermediate_size=11008))
            ),
            "qwen2": Variant(
                "transformers.models.qwen2.modeling_qwen2",
                "Qwen2",
                frozen(_defaults(intermediate_size=22016, vocab_size=151936, max_position_embeddings=32768)),
            ),
            "qwen3": Variant(
                "transformers.models.qwen3.modeling_qwen3",
                "Qwen3",
                frozen(
                    _defaults(intermediate_size=22016, vocab_size=151936, max_position_embeddings=32768, head_dim=128)
                ),
            ),
        }
    ),
    prefix="model",
    heads=frozen(
        {
            "base": Head("{}Model", LAST_HIDDEN),
            "causal-lm": Head("{}ForCausalLM", LOGITS),
            "sequence-classification": Head("{}ForSequenceClassification", LOGITS, pad_token=True),
            "token-classification": Head("{}ForTokenClassification", LOGITS),
            # The question-answering head keeps its base model under another name.
            "question-answering": Head("{}ForQuestionAnswering", SPANS, backbone="transformer"),
        }
    ),
    sizes=frozen(
        {
            "layers": "num_hidden_layers",
            "hidden": "hidden_size",
            "heads": "num_attention_heads",
            "kv_heads": "num_key_value_heads",
            "intermediate": "intermediate_size",
            "vocab": "vocab_size",
            "max_position": "max_position_embeddings",
        }
    ),
    fallbacks=frozen({"kv_heads": ("heads", 1)}),
    stacks=(Stack("layers", DECODER, types="layer_types"),),
    roles=(
        (r"embed_tokens", EMBEDDINGS),
        (r"rotary_emb", POSITION),
        (r"layers", STACK),
        (r"layers\.\d+", LAYER),
        (r"layers\.\d+\.self_attn", SELF_ATTENTION),
        (r"layers\.\d+\.mlp", FEED_FORWARD),
        (r"(.*\.)?(norm|\w+_layernorm|[qk]_norm)", NORM),
    ),
    activation="hidden_act",
    head_dim="head_dim",
    presets=frozen(PRESETS),
    hub_ids=frozen(HUB_IDS),
    uses="generating text: chat, instruction following, code (LLaMA, Qwen)",
    fields=frozen(
        {
            "head_dim": Field("count", nullable=True, multiple_of=2, why="rotary positions turn pairs of dimensions"),
            "mlp_bias": Field("boolean"),
            "attention_bias": Field("boolean"),
            "use_sliding_window": Field("boolean"),
            # Qwen2/3 read the window only when it is switched on; then it must be a size.
            "sliding_window": Field("count", nullable=True, when="use_sliding_window"),
            "max_window_layers": Field("count", minimum=0, when="use_sliding_window"),
        }
    ),
)
