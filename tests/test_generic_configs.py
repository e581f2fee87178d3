"""Configs of types without a record, written as people write them, count what transformers builds.

A config.json names a few fields (or only the depth), sometimes under another name the type's
config class takes (``num_layers`` for ``num_hidden_layers``); transformers' config class fills the
rest and derives what follows from what is given. bertgraph's total — the module tree ``params``
reads, no trace — must be transformers' own count of the same dict, built independently
(:mod:`tests.transformers_counts`); sizes are checked as the model class checks them; a config
transformers runs traces, with the same total.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import bertgraph
from bertgraph.errors import ConfigError
from bertgraph.graph import stats
from bertgraph.model.build import build_model
from bertgraph.model.spec import resolve, zero_divisors
from bertgraph.tracing import skeleton
from tests.helpers import one_line_error
from tests.transformers_counts import transformers_model, transformers_total

# Depth only: every other field at the config class's default. The types whose totals were off
# (EXAONE, InternLM3, IQuestCoder, Sarvam-MLA: the base class's config class read for defaults) or
# that were refused for a hidden size the heads do not divide, although the head size is stated.
MINIMAL = (
    "exaone",
    "internlm3",
    "iquestcoder",
    "sarvam_mla",
    "glm4_moe",
    "glm4_moe_lite",
    "glm4v_moe_text",
    "seed_oss",
    "sarvam_moe",
    "beam",
    "kolibri1",
    "laguna",
    "reformer",
    "umt5",
    # Fields the class derives or leaves to the code: Falcon's key/value heads and feed-forward,
    # DeepSeek-V2's experts per token (null), Mamba-2's infinite time-step bound, Switch's sparse step.
    "falcon",
    "deepseek_v2",
    "mamba2",
    "switch_transformers",
    "mistral",
    "gpt_neox",
)
# A few sizes given, the rest left out; and other names the config class takes for its fields.
WRITTEN: dict[str, dict[str, Any]] = {
    "falcon": {
        "model_type": "falcon",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "vocab_size": 1000,
    },
    "qwen3_moe aliased experts": {
        "model_type": "qwen3_moe",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
        "num_experts": 4,
        "num_experts_per_tok": 2,
    },
    "umt5 of 3 + 2 layers": {
        "model_type": "umt5",
        "num_layers": 3,
        "num_decoder_layers": 2,
        "d_model": 96,
        "num_heads": 6,
        "d_kv": 8,
        "vocab_size": 500,
    },
    # UMT5's decoder depth is derived from num_layers before the alias is read: it keeps its default.
    "umt5 aliased": {"model_type": "umt5", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4},
    "exaone aliased": {
        "model_type": "exaone",
        "num_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "activation_function": "gelu",
    },
    "sarvam_mla aliased experts": {
        "model_type": "sarvam_mla",
        "num_hidden_layers": 2,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    },
    "gpt_bigcode aliased": {
        "model_type": "gpt_bigcode",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
    },
}
# Multi-head latent attention as transformers runs it: 2 layers, one dense, 4 routed experts and a shared one.
LATENT = {
    "model_type": "deepseek_v3",
    "num_hidden_layers": 2,
    "hidden_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "q_lora_rank": 64,
    "kv_lora_rank": 32,
    "qk_rope_head_dim": 16,
    "qk_nope_head_dim": 16,
    "v_head_dim": 32,
    "n_routed_experts": 4,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "n_group": 1,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    "vocab_size": 1000,
}
JAMBA = {
    "model_type": "jamba",
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 100,
}


def folder_with(config: dict[str, Any], folder: Path) -> str:
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def counted(config: dict[str, Any], folder: Path, **options: Any) -> int:
    """The total ``params`` reports for a config.json (the module tree on meta, no trace)."""
    return int(stats.parameter_stats(skeleton(resolve(folder_with(config, folder), **options)))["total"])


@pytest.mark.parametrize("model_type", MINIMAL)
def test_a_config_naming_only_the_depth_counts_what_transformers_builds(model_type: str, tmp_path: Path) -> None:
    config = {"model_type": model_type, "num_hidden_layers": 2}
    assert counted(config, tmp_path) == transformers_total(config)


@pytest.mark.parametrize("case", sorted(WRITTEN))
def test_a_partial_or_aliased_config_counts_what_transformers_builds(case: str, tmp_path: Path) -> None:
    assert counted(WRITTEN[case], tmp_path) == transformers_total(WRITTEN[case])


def test_the_experts_a_config_names_are_the_experts_counted(tmp_path: Path) -> None:
    """Qwen3-MoE's ``num_experts`` is its config class's ``num_local_experts``: 4, not the default 128."""
    spec = resolve(folder_with(WRITTEN["qwen3_moe aliased experts"], tmp_path))
    found = stats.parameter_stats(skeleton(spec))
    assert (found["experts"], found["experts_per_token"]) == (4, 2)
    assert spec.summary()["kv_heads"] == 2


def test_a_model_whose_class_serves_several_types_gets_its_own_types_config(tmp_path: Path) -> None:
    """EXAONE's base model is LlamaModel; as AutoModel does, it is given an ExaoneConfig, not a LlamaConfig."""
    config = {"model_type": "exaone", "num_hidden_layers": 2}
    model = build_model(resolve(folder_with(config, tmp_path)))
    assert type(model).__name__ == "LlamaModel"
    assert type(model.config) is type(transformers_model(config).config)
    assert model.config.model_type == "exaone"


def test_falcon_derives_its_key_value_heads_and_feed_forward_from_the_sizes_given(tmp_path: Path) -> None:
    spec = resolve(folder_with(WRITTEN["falcon"], tmp_path))
    assert (spec.config["num_kv_heads"], spec.config["ffn_hidden_size"]) == (4, 4 * 64)


def test_an_override_wins_over_an_alias_the_config_holds(tmp_path: Path) -> None:
    """``--layers 3`` on a config that names its depth by an alias: the alias, read after the field, would undo it."""
    spec = resolve(folder_with(WRITTEN["umt5 aliased"], tmp_path), overrides={"layers": 3})
    assert "num_hidden_layers" not in spec.config and spec.config["num_layers"] == 3
    assert counted(WRITTEN["umt5 aliased"], tmp_path, overrides={"layers": 3}) == transformers_total(
        {**{k: v for k, v in WRITTEN["umt5 aliased"].items() if k != "num_hidden_layers"}, "num_layers": 3}
    )


def test_a_model_class_that_checks_the_head_size_refuses_in_one_line(tmp_path: Path) -> None:
    """No hidden-size rule of bertgraph's for a type read off transformers: its model class has its own
    (BertGeneration's attention refuses 100 in 3 heads; GLM-4-MoE's heads are stated, and built above)."""
    config = {"model_type": "bert-generation", "num_hidden_layers": 2, "hidden_size": 100, "num_attention_heads": 3}
    with pytest.raises(ValueError, match="not a multiple of the number of attention heads"):
        transformers_model(config)
    with pytest.raises(
        ConfigError, match=r"transformers cannot build BertGenerationEncoder .*not a multiple"
    ) as caught:
        build_model(resolve(folder_with(config, tmp_path)))
    assert "\n" not in str(caught.value)


def test_a_latent_attention_config_transformers_runs_traces_with_its_total(tmp_path: Path) -> None:
    """DeepSeek-V3's latent attention with fewer key/value heads than heads: transformers' forward runs it
    (unpadded), bertgraph traces it with transformers' total, and the model bertgraph builds also runs a
    padded batch (transformers' own repeats the keys by heads // key/value heads there, and fails)."""
    import torch

    ids = torch.tensor([[5, 6, 7]])
    torch.manual_seed(0)
    assert transformers_model(LATENT, "cpu").eval()(input_ids=ids).last_hidden_state.shape == (1, 3, 128)
    folder = folder_with(LATENT, tmp_path)
    graph = bertgraph.trace(folder, cache=False).graph
    assert stats.parameter_stats(graph)["total"] == transformers_total(LATENT)
    model = build_model(resolve(folder), weights=True)
    padded = model(input_ids=ids, attention_mask=torch.tensor([[1, 1, 0]]))
    assert padded.last_hidden_state.shape == (1, 3, 128)


def test_more_experts_per_token_than_experts_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = {
        "model_type": "mixtral",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
        "num_local_experts": 4,
        "num_experts_per_tok": 10,
    }
    line = one_line_error(["summary", folder_with(config, tmp_path)], capsys)
    assert "num_experts_per_tok 10 is more than num_local_experts 4; use 4 or less" in line
    config["num_experts_per_tok"] = 4  # every expert for every token is a mixture still
    assert resolve(folder_with(config, tmp_path)).config["num_experts_per_tok"] == 4


@pytest.mark.parametrize(
    ("field", "value"), [("attn_layer_period", 0), ("expert_layer_period", 0), ("attn_layer_period", -1)]
)
def test_a_layer_period_below_one_is_one_line_naming_it(
    field: str, value: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = one_line_error(["params", folder_with({**JAMBA, field: value}, tmp_path)], capsys)
    assert f"field '{field}' must be a positive integer, got {value}" in line


def test_a_zero_step_transformers_divides_by_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Qwen3-MoE's ``decoder_sparse_step`` of 0: no rule by name (Switch's derived 0 is allowed), so the
    line transformers failed at tells which field it divided by."""
    config = {**WRITTEN["qwen3_moe aliased experts"], "decoder_sparse_step": 0}
    line = one_line_error(["params", folder_with(config, tmp_path)], capsys)
    assert line.endswith(
        "integer modulo by zero (decoder_sparse_step is 0, which the model divides by: make it positive)"
    )


def test_a_division_by_zero_in_transformers_names_the_field_it_read() -> None:
    """What no name's ending gives away is found on the line transformers failed at."""
    from transformers import JambaConfig

    fields = {**{k: v for k, v in JAMBA.items() if k != "model_type"}, "attn_layer_period": 0}
    with pytest.raises(ZeroDivisionError) as caught:
        JambaConfig(**fields)
    assert zero_divisors({**fields, "pad_token_id": 0}, caught.value) == (
        " (attn_layer_period is 0, which the model divides by: make it positive)"
    )
    assert zero_divisors(fields, ValueError("integer modulo by zero")) == ""
