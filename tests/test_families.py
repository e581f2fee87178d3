"""Every family bertgraph supports, with real transformers classes: records, resolving, tracing, weights."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from bertgraph.errors import CheckpointError, ConfigError
from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.graph import views
from bertgraph.model import MODEL_TYPES, ModelSpec, build_model, family_of, resolve
from bertgraph.model.families import FAMILIES, ROLES
from bertgraph.model.presets import PRESETS
from bertgraph.tracing import trace
from tests.family_configs import TINY
from tests.matrix import tiny_head_cases

HEAD_CASES = tiny_head_cases()

# The parameter totals the model cards give, for the class they count (checked against the graph).
PUBLISHED: dict[str, tuple[str, int]] = {
    "bert-base-uncased": ("base", 109_482_240),
    "all-MiniLM-L6-v2": ("base", 22_713_216),
    "roberta-base": ("base", 124_645_632),
    "roberta-large": ("base", 355_359_744),
    "xlm-roberta-base": ("base", 278_043_648),
    "camembert-base": ("base", 110_621_952),
    "distilbert-base-uncased": ("base", 66_362_880),
    "albert-base-v2": ("base", 11_683_584),
    "electra-small-discriminator": ("base", 13_483_008),
    "electra-base-discriminator": ("base", 108_891_648),
    "deberta-v3-base": ("base", 183_831_552),
    "modernbert-base": ("base", 149_014_272),
    "all-mpnet-base-v2": ("base", 109_486_464),
    "gpt2": ("base", 124_439_808),
    "TinyLlama-1.1B": ("causal-lm", 1_100_048_384),
    "Qwen2.5-0.5B": ("causal-lm", 494_032_768),
    "Qwen3-0.6B": ("causal-lm", 596_049_920),
    "t5-small": ("seq2seq-lm", 60_506_624),
    # The hub checkpoint has 300,176,768 with its own LM head; transformers 5.24 always ties
    # T5/mT5 embeddings (T5Config drops tie_word_embeddings=False), so the model built from
    # this config shares the LM head with the embeddings and has 172,119,424.
    "mt5-small": ("seq2seq-lm", 172_119_424),
    "bart-base": ("base", 139_420_416),
}


def unique_numel(module: Any) -> int:
    return sum(p.numel() for p in module.parameters())


# --- the records --------------------------------------------------------------------------


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_record_matches_transformers(model_type: str) -> None:
    """Classes, base-model prefix, config defaults and attention implementation are transformers' own."""
    from transformers import AutoConfig

    family = family_of(model_type)
    assert family is not None
    variant = family.variants[model_type]
    module = importlib.import_module(variant.module)
    defaults = AutoConfig.for_model(model_type)
    for name, value in variant.defaults.items():
        assert value is None or not hasattr(defaults, name) or getattr(defaults, name) == value, name
    for head in family.heads:
        model_class = getattr(module, family.class_name(model_type, head))
        assert model_class.base_model_prefix in (family.prefix, family.heads[head].backbone)
    spec = resolve_tiny(model_type, "base")
    assert build_model(spec).config._attn_implementation == family.attention
    # What bertgraph fills in for a config.json that names nothing but its type is what transformers builds.
    filled = resolve_tiny(model_type, "base", config={"model_type": model_type}).config
    for name in variant.defaults:
        if getattr(defaults, name, None) is not None:
            assert filled[name] == getattr(defaults, name), name


def resolve_tiny(
    model_type: str, head: str, tmp: Path | None = None, config: dict[str, Any] | None = None
) -> ModelSpec:
    import tempfile

    folder = Path(tmp or tempfile.mkdtemp())
    (folder / "config.json").write_text(json.dumps(config or TINY[model_type]))
    return resolve(str(folder), head)


def test_every_model_type_has_one_family_and_every_preset_a_family() -> None:
    types = [t for family in FAMILIES for t in family.variants]
    assert len(types) == len(set(types)) == len(MODEL_TYPES) == len(TINY)
    for name, config in PRESETS.items():
        assert family_of(config["model_type"]) is not None, name


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_roles_cover_every_module(model_type: str) -> None:
    """Each role rule matches something, and the stacks' layers, embeddings and norms are found."""
    import re

    spec = resolve_tiny(model_type, "base")
    model = build_model(spec)
    paths = [path for path, _ in model.named_modules()]
    roles = spec.family.roles_of(paths, "")
    assert set(roles.values()) <= set(ROLES)
    for pattern, role in spec.family.roles:
        # Rules shared by the BERT-shaped families name modules some of them lack.
        assert any(re.fullmatch(pattern, path) for path in paths) or role in ("head", "position", "pooler"), pattern
    for stack in spec.family.stacks:
        layers = [path for path in paths if re.fullmatch(rf"{re.escape(stack.path)}\.\d+", path)]
        assert layers and all(roles[path] == "layer" for path in layers)
    assert {"embeddings", "stack", "layer", "self-attention", "feed-forward", "norm"} <= set(roles.values())


# --- resolving ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"n_layer": 2, "n_embd": 32}, r"config has no model_type, so bertgraph cannot tell .*add one of: bert, "),
        # gptj is a transformers type, drawn through the generic record (tests/test_generic.py).
        (
            {"model_type": "gptx"},
            r"model_type 'gptx' is not supported; bertgraph draws: bert, roberta, .*, bart, and the other text ",
        ),
        ({"model_type": ["bert"]}, r"model_type \['bert'\] is not supported"),
    ],
)
def test_missing_or_unknown_model_type_is_never_guessed(tmp_path: Path, content: dict[str, Any], message: str) -> None:
    (tmp_path / "config.json").write_text(json.dumps(content))
    with pytest.raises(ConfigError, match=message) as caught:
        resolve(str(tmp_path))
    assert "\n" not in str(caught.value)


def test_a_head_the_family_lacks_lists_the_ones_it_has() -> None:
    with pytest.raises(ConfigError, match="gpt2 is a gpt2 model, which has no masked-lm head; choose one of: base, "):
        resolve("gpt2", "masked-lm")
    with pytest.raises(ConfigError, match="--kv-heads does not apply to bert models"):
        resolve("bert-tiny", overrides={"kv_heads": 2})


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_overrides_set_the_family_fields(model_type: str, tmp_path: Path) -> None:
    import re

    spec = resolve_tiny(model_type, "base", tmp_path)
    family = spec.family
    changed = resolve(str(tmp_path), overrides={"layers": 5, "hidden": 48, "heads": 4, "intermediate": 40, "vocab": 77})
    for size, value in (("layers", 5), ("hidden", 48), ("heads", 4), ("intermediate", 40), ("vocab", 77)):
        assert family.size(changed.config, size) == value, size
    assert changed.summary()["layers"] == 5
    model = build_model(changed)
    for stack in family.stacks:
        if stack.shared:
            continue  # one layer, called once per layer
        items = {path for path, _ in model.named_modules() if re.fullmatch(rf"{re.escape(stack.path)}\.\d+", path)}
        assert len(items) == 5, stack.path
    assert model.get_input_embeddings().weight.shape[0] == 77


def test_size_aliases_must_agree_and_yield_to_overrides(tmp_path: Path) -> None:
    spec = resolve("bart-base", overrides={"layers": 2})
    assert "num_hidden_layers" not in spec.config and spec.config["encoder_layers"] == 2
    (tmp_path / "config.json").write_text(json.dumps({**TINY["bart"], "num_hidden_layers": 5}))
    with pytest.raises(ConfigError, match="num_hidden_layers 5 and encoder_layers 3 name the same size"):
        resolve(str(tmp_path))


def test_decoder_length_is_its_own_dimension() -> None:
    spec = resolve("t5-small", "seq2seq-lm", seq_len=32)
    assert spec.dim_names == ("batch", "seq", "tgt") and spec.example_shape == (1, 32, 32)
    assert spec.input_dims["decoder_input_ids"] == ("batch", "tgt")
    assert resolve("t5-small", "sequence-classification").input_names == ("input_ids", "attention_mask")


def test_padding_token_is_set_for_last_token_classifiers() -> None:
    spec = resolve("gpt2", "sequence-classification")
    assert spec.config["pad_token_id"] == 50256 == spec.summary()["pad_token_id"]
    assert "pad_token_id" not in resolve("gpt2").summary()


@pytest.mark.parametrize("preset", sorted(PUBLISHED))
def test_preset_totals_are_the_published_ones(preset: str) -> None:
    from bertgraph.graph import stats
    from bertgraph.tracing import skeleton

    head, total = PUBLISHED[preset]
    found = stats.parameter_stats(skeleton(resolve(preset, head)))
    assert found["total"] == total
    # Every parameter sits in exactly one group: a top-level layer list is one group, not 1 + L rows.
    assert sum(found["groups"].values()) == total


def test_every_non_bert_preset_has_a_published_total() -> None:
    assert {name for name, config in PRESETS.items() if config["model_type"] != "bert"} <= set(PUBLISHED)


# --- tracing ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "head"), HEAD_CASES, ids=[f"{t}-{h}" for t, h in HEAD_CASES])
def test_every_head_traces_with_exact_totals(
    model_type: str, head: str, tiny_graph: Callable[[str, str], tuple[ModelSpec, nx.DiGraph]]
) -> None:
    spec, graph = tiny_graph(model_type, head)
    expected = unique_numel(build_model(spec))
    assert graph.graph[g.G_MODEL_CLASS] == spec.model_class
    assert "unread_parameters" not in graph.graph
    for level in range(5):
        assert g.total_params(views.view(graph, level)) == expected, f"level {level}"
        assert g.total_params(views.view(graph, level, fold=False)) == expected, f"level {level} unfolded"
    inputs = [n for n, d in graph.nodes(data=True) if d[g.KIND] == g.INPUT]
    assert inputs == list(spec.input_names)
    assert all(graph.nodes[n][g.SHAPE] == list(spec.input_dims[n]) for n in inputs)
    outputs = [n for n, d in graph.nodes(data=True) if d[g.KIND] == g.OUTPUT]
    assert outputs == list(spec.family.heads[head].outputs)
    modules = graph.graph[g.G_MODULES]
    assert all(info[g.M_ROLE] in ROLES for info in modules.values())
    backbone = graph.graph[g.G_BACKBONE]
    assert backbone == "" or modules[backbone][g.M_ROLE] == "model"
    assert graph.graph[g.G_FAMILY] == spec.family.name and graph.graph[g.G_STRUCTURE] == spec.family.structure
    assert all(modules[path][g.M_ROLE] == "stack" for path in graph.graph[g.G_STACKS])


# The model types whose stacks grow in a way of their own, and the plain ones' representatives.
GROWTH_CASES = [(t, "base") for t in TINY] + [("t5", "seq2seq-lm"), ("bart", "sequence-classification")]


@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "head"), GROWTH_CASES, ids=[f"{t}-{h}" for t, h in GROWTH_CASES])
def test_grown_layers_equal_a_full_trace(
    model_type: str, head: str, tiny_graph: Callable[[str, str], tuple[ModelSpec, nx.DiGraph]]
) -> None:
    """Growth really happens (no fallback) and gives the full trace byte for byte."""
    from dataclasses import replace

    from bertgraph.tracing.export import shrunk_config, stack_plans, trace_module
    from bertgraph.tracing.grow import grow_stacks

    spec, grown = tiny_graph(model_type, head)
    model = build_model(spec)
    stacks = stack_plans(spec, model)
    assert stacks and all(plan.traced < plan.layers for _, plan in stacks)
    small = replace(spec, config=shrunk_config(spec, stacks))
    direct = grow_stacks(trace_module(build_model(small), small), [plan for _, plan in stacks])
    full = trace(spec, grow=False)
    text = "".join(graph_io.generate_json(full))
    assert "".join(graph_io.generate_json(grown)) == text
    direct.graph.update(full.graph)
    assert "".join(graph_io.generate_json(direct)) == text


def test_shared_layer_calls_are_told_apart(tiny_graph: Callable[[str, str], tuple[ModelSpec, nx.DiGraph]]) -> None:
    """ALBERT's one layer runs once per layer: one module path, calls 1 … L-1 marked, parameters once."""
    spec, graph = tiny_graph("albert", "base")
    layer = "encoder.albert_layer_groups.0.albert_layers.0"
    queries = [d for _, d in graph.nodes(data=True) if d.get(g.MODULE) == f"{layer}.attention.query"]
    assert [d.get(g.CALL, 0) for d in queries] == list(range(spec.config["num_hidden_layers"]))
    assert [d[g.PARAMS] for d in queries][1:] == [0] * (len(queries) - 1) and queries[0][g.PARAMS] > 0


def test_t5_blocks_read_the_position_bias_of_block_zero(
    tiny_graph: Callable[[str, str], tuple[ModelSpec, nx.DiGraph]],
) -> None:
    _, graph = tiny_graph("t5", "base")
    last = f"encoder.block.{TINY['t5']['num_layers'] - 1}."
    readers = {
        source
        for source, target in graph.edges
        if graph.nodes[target].get(g.MODULE, "").startswith(last) and graph.nodes[source].get(g.MODULE, "")
    }
    assert any(graph.nodes[s][g.MODULE].startswith("encoder.block.0.") for s in readers)


def test_decoders_are_traced_without_a_cache_and_with_named_decoder_length(
    tiny_graph: Callable[[str, str], tuple[ModelSpec, nx.DiGraph]],
) -> None:
    _, graph = tiny_graph("bart", "seq2seq-lm")
    assert graph.nodes["logits"][g.SHAPE] == ["batch", "tgt", TINY["bart"]["vocab_size"]]
    assert graph.nodes["encoder_last_hidden_state"][g.SHAPE] == ["batch", "seq", TINY["bart"]["d_model"]]
    _, gpt2 = tiny_graph("gpt2", "causal-lm")
    assert [n for n, d in gpt2.nodes(data=True) if d[g.KIND] == g.OUTPUT] == ["logits"]


# --- weights ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_tiny_checkpoints_load_with_their_weights(model_type: str, tmp_path: Path) -> None:
    import torch

    family = family_of(model_type)
    assert family is not None
    head = next(h for h in family.heads if h != "base")
    spec = resolve_tiny(model_type, head, tmp_path)
    torch.manual_seed(7)
    saved = build_model(spec, weights=True)
    saved.save_pretrained(tmp_path, safe_serialization=True)
    loaded_spec = resolve(str(tmp_path), head)
    assert loaded_spec.weights == tmp_path / "model.safetensors"
    loaded = build_model(loaded_spec, weights=True)
    expected, found = saved.state_dict(), loaded.state_dict()
    assert expected.keys() == found.keys()
    assert all(torch.equal(expected[name], found[name]) for name in expected)
    assert unique_numel(loaded) == g.total_params(trace(loaded_spec))


def test_checkpoint_shapes_are_checked_for_other_families(tmp_path: Path) -> None:
    import torch

    spec = resolve_tiny("gpt2", "causal-lm", tmp_path)
    torch.manual_seed(0)
    build_model(spec, weights=True).save_pretrained(tmp_path, safe_serialization=True)
    config = json.loads((tmp_path / "config.json").read_text())
    config["n_embd"] = 64
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"tensor 'transformer\.h\.0\.attn\.c_attn\.bias' has shape \[96\] but"):
        build_model(resolve(str(tmp_path), "causal-lm"))


@pytest.mark.parametrize("model_type", ["roberta", "electra", "gpt2", "t5"])
def test_cached_graphs_of_every_family_are_served(
    model_type: str, tiny_graph: Callable[[str, str], tuple[ModelSpec, nx.DiGraph]]
) -> None:
    """A sound entry of another family is served warm, not rebuilt on every run as a BERT that miscounts."""
    from bertgraph import cache

    spec, graph = tiny_graph(model_type, "base")
    cache.store(spec, graph)
    served = cache.load(spec)
    assert served is not None
    assert "".join(graph_io.generate_json(served)) == "".join(graph_io.generate_json(graph))
