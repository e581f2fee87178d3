"""Real generating models built from tiny configs on the CPU, and their traced graphs, for the planning tests.

Five kinds of decoder: grouped-query (LLaMA, 2 key/value heads for 4 query heads), a sliding
window on only some layers (Qwen2: layers 2–3 of 4 slide with a window of 16), sliding and global
layers in a pattern of the config's (Gemma-2, which runs eager attention only: its scores are
soft-capped, ``tanh(s / c) · c``, before the softmax; heads of 12 beside a hidden size of 32),
multi-head latent attention (DeepSeek-V3: a latent of 32 and a shared rotary key part of 16 per
token cached, decompressed into 4 heads of key 32 and value 32; a dense layer, then 4 routed experts
and a shared one), and an encoder-decoder (T5, a self-attention and a cross-attention cache per
decoder block); GPT-2 for a plain one.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import networkx as nx

import bertgraph
from bertgraph.graph import io as graph_io
from tests.family_configs import TINY

WINDOW = 16
CONFIGS: dict[str, dict[str, Any]] = {
    "llama": TINY["llama"],
    "gpt2": TINY["gpt2"],
    "qwen2-sliding": {
        **TINY["qwen2"],
        "num_hidden_layers": 4,
        "use_sliding_window": True,
        "sliding_window": WINDOW,
        "max_window_layers": 2,
    },
    "gemma2": {
        "model_type": "gemma2",
        "vocab_size": 99,
        "hidden_size": 32,
        "intermediate_size": 37,
        "num_hidden_layers": 5,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 12,
        "query_pre_attn_scalar": 12,
        "sliding_window": 8,
        "layer_types": [
            "full_attention",
            "sliding_attention",
            "sliding_attention",
            "full_attention",
            "sliding_attention",
        ],
        "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0,
        "max_position_embeddings": 64,
    },
    "deepseek": {
        "model_type": "deepseek_v3",
        "vocab_size": 99,
        "hidden_size": 128,
        "intermediate_size": 96,
        "moe_intermediate_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "q_lora_rank": 64,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 16,
        "qk_nope_head_dim": 16,
        "v_head_dim": 32,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "n_shared_experts": 1,
        "first_k_dense_replace": 1,
        "n_group": 1,
        "topk_group": 1,
        "max_position_embeddings": 64,
    },
    "t5": TINY["t5"],
}
# Models whose only attention is eager: their default trace is the eager one.
EAGER_ONLY = ("gemma2",)
# Mixtures of experts run their experts one by one, whose products FlopCounterMode sees (not the grouped kernel's).
MIXTURES = ("deepseek",)
ENCODERS: dict[str, dict[str, Any]] = {"modernbert": TINY["modernbert"]}  # a two-sided window
ENCODER_DECODERS = ("t5",)
# Prompt lengths: shorter than the window, and long enough for it to cut.
PROMPTS = [(1, 5), (2, 24)]
DECODER_TOKENS = 7  # an encoder-decoder's decoder tokens in its prompt

_GRAPHS: dict[tuple[str, str | None], nx.DiGraph] = {}
FIXTURES = Path(__file__).parent / "fixtures" / "planning"
# Every graph the planning tests read: each model with its default attention, the decoders eager too.
FIXTURE_GRAPHS: tuple[tuple[str, str | None], ...] = (
    *((name, None) for name in (*CONFIGS, *ENCODERS)),
    *((name, "eager") for name in CONFIGS if name not in EAGER_ONLY),
)
_FOLDER = Path(tempfile.mkdtemp(prefix="bertgraph-generation-"))


def head_of(name: str) -> str:
    return "seq2seq-lm" if name in ENCODER_DECODERS else "base" if name in ENCODERS else "causal-lm"


def config_dir(name: str) -> Path:
    folder = _FOLDER / name
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**CONFIGS, **ENCODERS}[name]))
    return folder


def fixture_path(name: str, attention: str | None = None) -> Path:
    """The committed graph file of ``name`` (``tests/test_graph_fixtures.py`` holds it to a fresh trace)."""
    return FIXTURES / f"{name}{'-' + attention if attention else ''}.json"


def trace_fresh(name: str, attention: str | None = None) -> nx.DiGraph:
    """A fresh trace of ``name`` (facts and costs on); ``attention`` as ``--attention``."""
    return bertgraph.trace(str(config_dir(name)), head_of(name), cache=False, attention=attention).graph


def graph_of(name: str, attention: str | None = None) -> nx.DiGraph:
    """The graph of ``name``, read from its committed file: the planning tests then trace nothing, so they
    run in-process against the graph code alone (and mutation testing can use them)."""
    if name in EAGER_ONLY and attention == "eager":
        attention = None
    if (name, attention) not in _GRAPHS:
        committed = (name, attention) in FIXTURE_GRAPHS
        _GRAPHS[name, attention] = (
            graph_io.read_json(fixture_path(name, attention)) if committed else trace_fresh(name, attention)
        )
    return _GRAPHS[name, attention]


def write_fixtures(folder: Path = FIXTURES) -> None:
    """Rewrite every committed planning graph: ``python -m tests.generation_runs [FOLDER]``."""
    folder.mkdir(exist_ok=True)
    for name, attention in FIXTURE_GRAPHS:
        graph_io.write_json(trace_fresh(name, attention), folder / fixture_path(name, attention).name)


# The committed graphs are written with string hash seed 0 and held to fresh traces made with seed 1
# (tests/test_graph_fixtures.py): the two order a set of layer types apart, so equal files mean the
# traces do not depend on the hashing. ``WRITE_SEED`` unless the caller names another.
WRITE_SEED = "0"

if __name__ == "__main__":
    import os
    import sys

    if "PYTHONHASHSEED" not in os.environ:  # the seed is read at start-up: run again with it set
        os.execve(
            sys.executable,
            [sys.executable, "-m", "tests.generation_runs", *sys.argv[1:]],
            {**os.environ, "PYTHONHASHSEED": WRITE_SEED},
        )
    write_fixtures(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES)


def real_model(name: str, attention: str = "eager", dtype: Any = None) -> Any:
    """The model itself, random weights (seeded), in eval mode (eager attention where it has no other)."""
    import torch
    import transformers

    attention = "eager" if name in EAGER_ONLY else attention

    config = {**CONFIGS, **ENCODERS}[name]
    fields = {key: value for key, value in config.items() if key != "model_type"}
    if name in MIXTURES:
        fields["experts_implementation"] = "eager"
    built = transformers.AutoConfig.for_model(config["model_type"], **fields, attn_implementation=attention)
    kind = transformers.AutoModelForSeq2SeqLM if name in ENCODER_DECODERS else transformers.AutoModelForCausalLM
    kind = transformers.AutoModel if name in ENCODERS else kind
    torch.manual_seed(0)
    model = kind.from_config(built).eval()
    return model.to(dtype) if dtype is not None else model


def sizes_of(name: str, batch: int, seq: int) -> dict[str, int]:
    sizes = {"batch": batch, "seq": seq}
    return {**sizes, "tgt": DECODER_TOKENS} if name in ENCODER_DECODERS else sizes


def prompt(name: str, model: Any, batch: int, seq: int) -> tuple[Any, dict[str, Any]]:
    """Run a prompt of ``seq`` tokens with the cache on: the cache, and the inputs of the next step (one token)."""
    import torch

    vocab = CONFIGS[name]["vocab_size"]
    generator = torch.Generator().manual_seed(seq)
    ids = torch.randint(0, vocab, (batch, seq), generator=generator)
    following = torch.randint(0, vocab, (batch, 1), generator=generator)
    with torch.no_grad():
        if name in ENCODER_DECODERS:
            decoder = torch.randint(0, vocab, (batch, DECODER_TOKENS), generator=generator)
            out = model(input_ids=ids, decoder_input_ids=decoder, use_cache=True)
            step = {"encoder_outputs": (out.encoder_last_hidden_state,), "decoder_input_ids": following}
        else:
            out = model(input_ids=ids, use_cache=True)
            step = {"input_ids": following}
    return out.past_key_values, step


def cache_tensors(cache: Any) -> list[Any]:
    """Every key and value tensor a transformers cache holds (both caches of an EncoderDecoderCache)."""
    both = hasattr(cache, "cross_attention_cache")
    caches = [cache.self_attention_cache, cache.cross_attention_cache] if both else [cache]
    return [tensor for part in caches for layer in part.layers for tensor in (layer.keys, layer.values)]
