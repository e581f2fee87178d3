"""Tiny configs of every model_type bertgraph supports, deep enough to exercise layer growth."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import networkx as nx

_BERT_LIKE: dict[str, Any] = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "intermediate_size": 37,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
}
_ROBERTA_LIKE: dict[str, Any] = {**_BERT_LIKE, "max_position_embeddings": 66, "type_vocab_size": 1, "pad_token_id": 1}
_LLAMA_LIKE: dict[str, Any] = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 37,
    "max_position_embeddings": 64,
}
_T5_LIKE: dict[str, Any] = {
    "vocab_size": 99,
    "d_model": 32,
    "d_kv": 8,
    "d_ff": 37,
    "num_layers": 4,
    "num_heads": 4,
    "relative_attention_num_buckets": 8,
    "relative_attention_max_distance": 16,
    "decoder_start_token_id": 0,
}

TINY: dict[str, dict[str, Any]] = {
    "bert": {"model_type": "bert", **_BERT_LIKE},
    "roberta": {"model_type": "roberta", **_ROBERTA_LIKE},
    "xlm-roberta": {"model_type": "xlm-roberta", **_ROBERTA_LIKE},
    "camembert": {"model_type": "camembert", **_ROBERTA_LIKE},
    "distilbert": {
        "model_type": "distilbert",
        "vocab_size": 99,
        "dim": 32,
        "n_layers": 3,
        "n_heads": 4,
        "hidden_dim": 37,
        "max_position_embeddings": 64,
    },
    "albert": {"model_type": "albert", **_BERT_LIKE, "embedding_size": 16},
    "electra": {"model_type": "electra", **_BERT_LIKE, "embedding_size": 16},
    "deberta-v2": {
        "model_type": "deberta-v2",
        **_BERT_LIKE,
        "type_vocab_size": 0,
        "relative_attention": True,
        "max_relative_positions": -1,
        "position_buckets": 16,
        "norm_rel_ebd": "layer_norm",
        "share_att_key": True,
        "pos_att_type": "p2c|c2p",
        "position_biased_input": False,
    },
    # Ten layers: layer 0, then three periods of (sliding, sliding, global).
    "modernbert": {
        "model_type": "modernbert",
        **_BERT_LIKE,
        "num_hidden_layers": 10,
        "type_vocab_size": 0,
        "global_attn_every_n_layers": 3,
        "local_attention": 16,
        "pad_token_id": 0,
    },
    # transformers buckets MPNet's relative positions into 32 whatever the config says: fewer rows
    # trace on the meta device but index out of range in a real forward pass.
    "mpnet": {"model_type": "mpnet", **_ROBERTA_LIKE, "relative_attention_num_buckets": 32},
    "gpt2": {"model_type": "gpt2", "vocab_size": 99, "n_embd": 32, "n_layer": 3, "n_head": 4, "n_positions": 64},
    "llama": {"model_type": "llama", **_LLAMA_LIKE},
    "qwen2": {"model_type": "qwen2", **_LLAMA_LIKE},
    "qwen3": {"model_type": "qwen3", **_LLAMA_LIKE, "head_dim": 8},
    "t5": {"model_type": "t5", **_T5_LIKE},
    "mt5": {"model_type": "mt5", **_T5_LIKE, "feed_forward_proj": "gated-gelu"},
    "bart": {
        "model_type": "bart",
        "vocab_size": 99,
        "d_model": 32,
        "encoder_layers": 3,
        "decoder_layers": 3,
        "num_hidden_layers": 3,  # an alias of encoder_layers, as published configs have it
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 4,
        "encoder_ffn_dim": 37,
        "decoder_ffn_dim": 37,
        "max_position_embeddings": 64,
    },
}


def shallow(model_type: str, config: dict[str, Any], layers: int = 2) -> dict[str, Any]:
    """``config`` with at most ``layers`` layers in each stack.

    For tests of what one export holds rather than of layer growth: torch.export's time grows with
    every layer (a T5 of 4 + 4 layers exports in twice the time of one of 2 + 2), and two layers
    still differ where the family's do (T5's relative bias only in layer 0, ModernBERT's global
    layer 0 before a sliding one).
    """
    from bertgraph.model.families import family_of

    family = family_of(model_type)
    assert family is not None, model_type
    fields = [family.sizes[name] for name in ("layers", "decoder_layers") if name in family.sizes]
    fields.append("num_hidden_layers")  # BART's alias of encoder_layers
    return {**config, **{field: min(layers, config[field]) for field in fields if field in config}}


# Encoder-decoders of no preset, from transformers' config classes: a T5 of 4 + 3 layers and a BART of 3 + 3
# drew the decoder left of the encoder at depth 1 while every preset drew it right.
UNEVEN = {
    "t5-4+3": (
        "T5Config",
        {
            "vocab_size": 99,
            "d_model": 32,
            "d_kv": 8,
            "d_ff": 37,
            "num_layers": 4,
            "num_decoder_layers": 3,
            "num_heads": 4,
            "relative_attention_num_buckets": 8,
            "relative_attention_max_distance": 16,
            "decoder_start_token_id": 0,
        },
    ),
    "bart-3+3": (
        "BartConfig",
        {
            "vocab_size": 99,
            "d_model": 32,
            "encoder_layers": 3,
            "decoder_layers": 3,
            "encoder_attention_heads": 4,
            "decoder_attention_heads": 4,
            "encoder_ffn_dim": 37,
            "decoder_ffn_dim": 37,
            "max_position_embeddings": 64,
        },
    ),
}


def uneven(name: str, head: str, folder: Path) -> nx.DiGraph:
    """One of :data:`UNEVEN`, built by its config class and traced (through the run's cache)."""
    import transformers

    import bertgraph

    kind, values = UNEVEN[name]
    target = folder / name
    if not (target / "config.json").is_file():
        getattr(transformers, kind)(**values).save_pretrained(target)
    return bertgraph.trace(str(target), head).graph
