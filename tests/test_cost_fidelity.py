"""Matmul FLOPs equal torch's FlopCounterMode on a forward pass, exactly, at every size.

The reference is :class:`torch.utils.flop_counter.FlopCounterMode` run on the model itself.
On the meta device it counts what a CPU run counts (scaled dot-product attention takes
the math path there, two ``bmm``); on the CPU its fused attention kernel needs the custom
mapping in :func:`tests.exported.flop_counter`. One test runs bert-base for real on the CPU,
with both attention implementations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st

from bertgraph.api import Architecture
from bertgraph.graph import cost, costbase
from bertgraph.graph import schema as g
from bertgraph.graph.poly import Poly
from bertgraph.model import HEADS, build_model, resolve
from bertgraph.model.presets import preset_config
from tests.exported import exported_graph, flop_counter

SIZES = [(1, 128), (1, 512), (3, 128), (3, 512)]
CHOICES = 4


def matmul_at(arch: Architecture, batch: int, seq: int) -> int:
    totals = cost.model_totals(arch.graph)
    return costbase.evaluate(totals[g.MATMUL_FLOPS], {"batch": batch, "seq": seq, "choices": CHOICES})


def token_ids(head: str, batch: int, seq: int, device: str) -> dict[str, Any]:
    shape = (batch, CHOICES, seq) if head == "multiple-choice" else (batch, seq)
    return {"input_ids": torch.randint(0, 1000, shape, device=device)}


def test_bert_base_numbers_of_the_issue(traced: Callable[..., Architecture]) -> None:
    totals = cost.model_totals(traced("bert-base-uncased").graph)
    assert totals[g.MATMUL_FLOPS].readable() == "batch·(36,864·seq² + 169,869,312·seq + 1,179,648)"
    assert totals[g.MATMUL_FLOPS].evaluate({"batch": 1, "seq": 128}) == 22_348_431_360
    assert totals[g.MATMUL_FLOPS].evaluate({"batch": 1, "seq": 512}) == 96_637_943_808
    assert cost.unsupported(traced("bert-base-uncased").graph) == {}


def test_where_attention_overtakes_the_linear_layers(traced: Callable[..., Architecture]) -> None:
    totals = cost.model_totals(traced("bert-base-uncased").graph)
    linear, attention = totals[cost.LINEAR_FLOPS], totals[cost.ATTENTION_FLOPS]
    at = cost.crossover(linear, attention, {"batch": 1}, "seq")
    assert at == 4609  # 36,864·s² ≥ 169,869,312·s + 1,179,648 from s = 4,609 on
    assert attention.evaluate({"batch": 1, "seq": at}) >= linear.evaluate({"batch": 1, "seq": at})
    assert attention.evaluate({"batch": 1, "seq": at - 1}) < linear.evaluate({"batch": 1, "seq": at - 1})
    assert cost.crossover(linear, Poly(), {"batch": 1}, "seq") is None


@pytest.mark.slow
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_bert_base_equals_a_real_cpu_forward_pass(traced: Callable[..., Architecture], attention: str) -> None:
    torch.manual_seed(0)
    config = transformers.BertConfig(**preset_config("bert-base-uncased"), attn_implementation=attention)
    model = transformers.BertModel(config).eval()
    for batch, seq in [(1, 128), (3, 512)] if attention == "eager" else [(1, 128)]:
        counted = flop_counter(model, token_ids("base", batch, seq, "cpu"))
        assert counted == matmul_at(traced("bert-base-uncased"), batch, seq)


@pytest.mark.slow
@pytest.mark.parametrize("head", list(HEADS))
def test_every_head_at_seq_128_and_512_batch_1_and_3(traced: Callable[..., Architecture], head: str) -> None:
    model = build_model(resolve("bert-base-uncased", head))  # the meta device
    arch = traced("bert-base-uncased", head)
    assert cost.unsupported(arch.graph) == {}
    for batch, seq in SIZES:
        assert flop_counter(model, token_ids(head, batch, seq, "meta")) == matmul_at(arch, batch, seq), (batch, seq)


@pytest.mark.parametrize("head", ["base", "multiple-choice", "masked-lm"])
@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 5), seq=st.integers(1, 96))
def test_the_formula_at_any_size_is_the_count_at_that_size(
    traced: Callable[..., Architecture], head: str, batch: int, seq: int
) -> None:
    arch = traced("bert-tiny", head)
    model = _meta_model("bert-tiny", head)
    assert flop_counter(model, token_ids(head, batch, seq, "meta")) == matmul_at(arch, batch, seq)


_MODELS: dict[tuple[str, str], Any] = {}


def _meta_model(name: str, head: str) -> Any:
    if (name, head) not in _MODELS:
        _MODELS[name, head] = build_model(resolve(name, head))
    return _MODELS[name, head]


def test_attention_implementations_cost_the_same(traced: Callable[..., Architecture]) -> None:
    """The per-element rule gives eager attention (matmul, scale, mask, softmax) and fused attention one cost."""
    config = {**preset_config("bert-tiny"), "num_hidden_layers": 1}
    graphs = {}
    for attention in ("eager", "sdpa"):
        with torch.device("meta"):
            model = transformers.BertModel(transformers.BertConfig(**config, attn_implementation=attention)).eval()
        graphs[attention] = cost.model_totals(exported_graph(model, _with_mask, f"bert-{attention}"))
    for key in (g.MATMUL_FLOPS, g.OTHER_FLOPS):
        assert graphs["eager"][key] == graphs["sdpa"][key], key
    assert graphs["sdpa"][g.OTHER_FLOPS] != Poly()


def _with_mask(batch: int, seq: int, device: str) -> dict[str, Any]:
    ids = torch.randint(0, 1000, (batch, seq), device=device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


# --- single ops, against FlopCounterMode on the CPU ---------------------------------------------------


class _Op(torch.nn.Module):
    def __init__(self, function: Callable[..., Any], *shapes: tuple[int, ...]) -> None:
        super().__init__()
        self.function = function
        self.weights = torch.nn.ParameterList(torch.nn.Parameter(torch.randn(*shape)) for shape in shapes)

    def forward(self, input_ids: torch.Tensor) -> Any:
        return self.function(input_ids, *self.weights)


def _floats(width: int, *extra: int) -> Callable[[int, int, str], dict[str, Any]]:
    def make(batch: int, seq: int, device: str) -> dict[str, Any]:
        return {"input_ids": torch.randn(batch, seq, *extra, width, device=device)}

    return make


OPS: dict[str, tuple[Callable[..., Any], tuple[tuple[int, ...], ...], Callable[[int, int, str], dict[str, Any]]]] = {
    "linear": (lambda x, w, b: torch.nn.functional.linear(x, w, b), ((5, 16), (5,)), _floats(16)),
    "linear without bias": (lambda x, w: torch.nn.functional.linear(x, w), ((5, 16),), _floats(16)),
    "matmul 3-D @ 2-D": (torch.matmul, ((16, 6),), _floats(16)),
    "matmul broadcast 4-D": (lambda x, w: torch.matmul(x, w), ((1, 16, 6),), _floats(16, 2)),
    "matmul 2-D @ 3-D": (lambda x, w: torch.matmul(w, x.transpose(1, 2)), ((6, 16),), _floats(16)),
    "bmm": (lambda x, w: torch.bmm(x, w.expand(x.shape[0], 16, 3)), ((1, 16, 3),), _floats(16)),
    "mm": (lambda x, w: torch.mm(x.flatten(0, 1), w), ((16, 3),), _floats(16)),
    "addmm": (lambda x, w, b: torch.addmm(b, x.flatten(0, 1), w), ((16, 3), (3,)), _floats(16)),
    "baddbmm": (lambda x, w: torch.baddbmm(x[..., :3], x, w.expand(x.shape[0], 16, 3)), ((1, 16, 3),), _floats(16)),
    "attention": (
        lambda x: torch.nn.functional.scaled_dot_product_attention(x, x, x),
        (),
        _floats(8, 2),
    ),
    # Grouped-query attention without repeat_kv: four query heads share one key/value head.
    "attention with grouped keys": (
        lambda x: torch.nn.functional.scaled_dot_product_attention(
            x.unsqueeze(1).expand(-1, 4, -1, -1), x.unsqueeze(1), x.unsqueeze(1), enable_gqa=True
        ),
        (),
        _floats(8),
    ),
    "conv1d": (
        lambda x, w, b: torch.nn.functional.conv1d(x.transpose(1, 2), w, b, padding=1),
        ((4, 16, 3), (4,)),
        _floats(16),
    ),
}


@pytest.mark.parametrize("name", list(OPS))
def test_single_ops_equal_flop_counter(name: str) -> None:
    function, shapes, inputs = OPS[name]
    torch.manual_seed(0)
    real = _Op(function, *shapes).eval()
    with torch.device("meta"):
        meta = _Op(function, *shapes).eval()
    graph = exported_graph(meta, inputs, name)
    assert cost.unsupported(graph) == {}
    matmul = cost.model_totals(graph)[g.MATMUL_FLOPS]
    for batch, seq in [(1, 5), (2, 11), (4, 3)]:
        assert matmul.evaluate({"batch": batch, "seq": seq}) == flop_counter(real, inputs(batch, seq, "cpu"))


def test_matrix_vector_products_count_where_flop_counter_counts_nothing() -> None:
    """A deliberate difference: FlopCounterMode has no formula for mv and dot."""
    function = torch.matmul
    real = _Op(function, (16,)).eval()
    with torch.device("meta"):
        meta = _Op(function, (16,)).eval()
    graph = exported_graph(meta, _floats(16), "mv")
    matmul = cost.model_totals(graph)[g.MATMUL_FLOPS]
    assert str(matmul) == "32*batch*seq"
    assert flop_counter(real, _floats(16)(2, 7, "cpu")) == 0


def test_an_op_without_a_formula_is_listed_never_counted_as_zero() -> None:
    with torch.device("meta"):
        model = _Op(lambda x, w: torch.einsum("bsk,kn->bsn", x, w), (16, 4)).eval()
    graph = exported_graph(model, _floats(16), "einsum")
    assert cost.unsupported(graph) == {"aten.einsum.default": 1}
    node = next(d for _, d in graph.nodes(data=True) if d.get(g.OP) == "einsum")
    assert g.MATMUL_FLOPS not in node and node[g.COST_UNSUPPORTED] == ["aten.einsum.default"]
    assert "activation_bytes" in node  # its output size is still known


# --- other families, exported here (bertgraph.trace draws BERT) -----------------------------------------


def _ids(batch: int, seq: int, device: str) -> dict[str, Any]:
    return {"input_ids": torch.randint(0, 90, (batch, seq), device=device)}


def _no_cache(batch: int, seq: int, device: str) -> dict[str, Any]:
    return {**_ids(batch, seq, device), "use_cache": False}


def _decoder(batch: int, seq: int, device: str) -> dict[str, Any]:
    ids = _ids(batch, seq, device)["input_ids"]
    return {"input_ids": ids, "decoder_input_ids": ids, "use_cache": False}


_SMALL = {"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}
_DECODER = {"vocab_size": 99, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}
_SPECIAL = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1, "sep_token_id": 2}
FAMILIES: dict[str, tuple[str, str, dict[str, Any], Callable[[int, int, str], dict[str, Any]]]] = {
    "RoBERTa": ("RobertaModel", "RobertaConfig", {**_SMALL, "intermediate_size": 37}, _ids),
    "DistilBERT": (
        "DistilBertModel",
        "DistilBertConfig",
        {"vocab_size": 99, "dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 37},
        _ids,
    ),
    "ALBERT": ("AlbertModel", "AlbertConfig", {**_SMALL, "embedding_size": 16, "intermediate_size": 37}, _ids),
    "ELECTRA": ("ElectraModel", "ElectraConfig", {**_SMALL, "embedding_size": 16, "intermediate_size": 37}, _ids),
    "DeBERTa-v2": (
        "DebertaV2Model",
        "DebertaV2Config",
        {
            **_SMALL,
            "intermediate_size": 37,
            "relative_attention": True,
            "pos_att_type": ["p2c", "c2p"],
            "max_relative_positions": 16,
            "position_buckets": 8,
        },
        _ids,
    ),
    "ModernBERT": (
        "ModernBertModel",
        "ModernBertConfig",
        {
            **_SMALL,
            "num_hidden_layers": 3,
            "intermediate_size": 37,
            "global_attn_every_n_layers": 2,
            "local_attention": 4,
            **_SPECIAL,
        },
        _ids,
    ),
    "MPNet": ("MPNetModel", "MPNetConfig", {**_SMALL, "intermediate_size": 37}, _ids),
    "GPT-2": (
        "GPT2LMHeadModel",
        "GPT2Config",
        {"vocab_size": 99, "n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 64},
        _no_cache,
    ),
    "LLaMA": ("LlamaModel", "LlamaConfig", {**_DECODER, "num_attention_heads": 4, "num_key_value_heads": 2}, _no_cache),
    "Qwen2": ("Qwen2Model", "Qwen2Config", {**_DECODER, "num_attention_heads": 4, "num_key_value_heads": 2}, _no_cache),
    "Qwen3": (
        "Qwen3Model",
        "Qwen3Config",
        {**_DECODER, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8},
        _no_cache,
    ),
    "T5": (
        "T5Model",
        "T5Config",
        {"vocab_size": 99, "d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4},
        _decoder,
    ),
    "mT5": (
        "MT5Model",
        "MT5Config",
        {"vocab_size": 99, "d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4},
        _decoder,
    ),
    "BART": (
        "BartModel",
        "BartConfig",
        {
            "vocab_size": 99,
            "d_model": 32,
            "encoder_layers": 2,
            "decoder_layers": 2,
            "encoder_attention_heads": 2,
            "decoder_attention_heads": 2,
            "encoder_ffn_dim": 37,
            "decoder_ffn_dim": 37,
            "max_position_embeddings": 64,
        },
        _decoder,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
# Eager attention: transformers' default (sdpa) of every family and head is held to FlopCounterMode
# through bertgraph's own trace in test_cost_families.py; here the score matrices are separate ops.
@pytest.mark.parametrize("attention", ["eager"])
def test_other_families_equal_flop_counter(family: str, attention: str) -> None:
    model_class, config_class, fields, inputs = FAMILIES[family]
    config = getattr(transformers, config_class)(**fields)
    config._attn_implementation = attention
    cls = getattr(transformers, model_class)
    try:
        with torch.device("meta"):
            meta = cls(config).eval()
    except ValueError:
        pytest.skip(f"{model_class} has no {attention} attention in transformers {transformers.__version__}")
    graph = exported_graph(meta, inputs, family)
    assert cost.unsupported(graph) == {}, "every op these families export has a formula"
    torch.manual_seed(0)
    real = cls(config).eval()
    matmul = cost.model_totals(graph)[g.MATMUL_FLOPS]
    for batch, seq in [(1, 5), (2, 11), (3, 16)]:
        assert matmul.evaluate({"batch": batch, "seq": seq}) == flop_counter(real, inputs(batch, seq, "cpu"))
