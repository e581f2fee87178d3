"""Architecture facts read off the traced ops of every family: attention kind, heads, positions, shared layers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

import bertgraph
from bertgraph.api import Architecture
from bertgraph.graph import facts
from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.graph.validate import graph_problem
from tests.family_configs import TINY

pytestmark = pytest.mark.xdist_group("facts")  # its fixtures are built once, on one worker

BIDI, CAUSAL, CROSS = g.BIDIRECTIONAL, g.CAUSAL, g.CROSS

# What each architecture is known to be, for the tiny configs (3 layers; T5 4; ModernBERT 10
# with a global layer every third and a local window of 16, i.e. 8 on each side).
ATTENTION: dict[str, dict[str, dict[str, int]]] = {
    **{
        model_type: {"encoder.layer": {BIDI: 3}}
        for model_type in ("bert", "roberta", "xlm-roberta", "camembert", "electra", "deberta-v2", "mpnet")
    },
    "distilbert": {"transformer.layer": {BIDI: 3}},
    "albert": {"encoder.albert_layer_groups": {BIDI: 3}},
    "modernbert": {"layers": {BIDI: 4, "sliding-window(8)": 6}},
    "gpt2": {"h": {CAUSAL: 3}},
    **{model_type: {"layers": {CAUSAL: 3}} for model_type in ("llama", "qwen2", "qwen3")},
    **{
        model_type: {"encoder.block": {BIDI: 4}, "decoder.block": {CAUSAL: 4, CROSS: 4}} for model_type in ("t5", "mt5")
    },
    "bart": {"encoder.layers": {BIDI: 3}, "decoder.layers": {CAUSAL: 3, CROSS: 3}},
}
ABSOLUTE, BUCKETS, RELATIVE, ROTARY = g.ABSOLUTE, g.RELATIVE_BUCKETS, g.RELATIVE, g.ROTARY
POSITION: dict[str, list[str]] = {
    **{key: [ABSOLUTE] for key in ("bert", "roberta", "xlm-roberta", "camembert", "distilbert", "albert", "electra")},
    "gpt2": [ABSOLUTE],
    "bart": [ABSOLUTE],
    "t5": [BUCKETS],
    "mt5": [BUCKETS],
    "mpnet": [ABSOLUTE, BUCKETS],  # a position table in the embeddings and a bucketed bias on the scores
    "deberta-v2": [RELATIVE],
    **{key: [ROTARY] for key in ("llama", "qwen2", "qwen3", "modernbert")},
}
GROUPED_QUERY = {"llama", "qwen2", "qwen3"}  # the tiny configs: 4 query heads, 2 key/value heads

_GRAPHS: dict[str, nx.DiGraph] = {}


@pytest.fixture(scope="session")
def family_graph(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], nx.DiGraph]:
    """``family_graph(model_type)``: the base model of a tiny config with its facts, once per session
    (through the run's shared graph cache: the workers trace each type once between them)."""

    def get(model_type: str) -> nx.DiGraph:
        if model_type not in _GRAPHS:
            folder = tmp_path_factory.mktemp(f"facts-{model_type}")
            (folder / "config.json").write_text(json.dumps(TINY[model_type]))
            _GRAPHS[model_type] = bertgraph.trace(str(folder)).graph
        return _GRAPHS[model_type]

    return get


def attention_ops(graph: nx.DiGraph) -> list[dict[str, Any]]:
    return [data for _, data in graph.nodes(data=True) if g.ATTENTION in data]


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_attention_kinds_are_what_the_architecture_is(
    model_type: str, family_graph: Callable[[str], nx.DiGraph]
) -> None:
    graph = family_graph(model_type)
    assert graph.graph[g.G_ATTENTION] == ATTENTION[model_type]
    ops = attention_ops(graph)
    assert len(ops) == sum(sum(kinds.values()) for kinds in ATTENTION[model_type].values())
    modules = graph.graph[g.G_MODULES]
    for data in ops:
        # The example passes an attention mask: every block applies it, the decoder's its own.
        decoder_self = data[g.ATTENTION] == CAUSAL and "decoder_attention_mask" in graph
        assert data[g.PADDING_MASK] == ("decoder_attention_mask" if decoder_self else "attention_mask")
        assert (data[g.Q_HEADS], data[g.KV_HEADS]) == ((4, 2) if model_type in GROUPED_QUERY else (4, 4))
        entry = modules[data[g.MODULE]]
        assert g.attention_label(entry) == g.attention_label(data)  # the block's module carries it too


def test_modernbert_base_alternates_global_and_sliding_window_layers(traced: Callable[..., Architecture]) -> None:
    graph = traced("modernbert-base").graph
    assert graph.graph[g.G_ATTENTION] == {"layers": {BIDI: 8, "sliding-window(64)": 14}}
    kinds = [
        g.attention_label(graph.graph[g.G_MODULES][f"layers.{index}.attn"]) for index in range(22)
    ]  # one global layer, then two sliding ones
    assert kinds == [BIDI if index % 3 == 0 else "sliding-window(64)" for index in range(22)]


def test_causal_sliding_window_is_read_with_its_width(tmp_path: Path) -> None:
    config = {**TINY["qwen2"], "use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1}
    (tmp_path / "config.json").write_text(json.dumps(config))
    graph = bertgraph.trace(str(tmp_path), cache=False).graph
    assert graph.graph[g.G_ATTENTION] == {"layers": {CAUSAL: 1, "causal-sliding-window(4)": 2}}
    assert {data.get(g.WINDOW) for data in attention_ops(graph)} == {None, 4}


@pytest.mark.parametrize(("model_type", "kind"), [("bert", BIDI), ("gpt2", CAUSAL)])
def test_no_padding_mask_without_an_attention_mask_input(model_type: str, kind: str, tmp_path: Path) -> None:
    import torch

    from bertgraph.model import build_model, resolve
    from bertgraph.tracing import graph_from_program

    (tmp_path / "config.json").write_text(json.dumps(TINY[model_type]))
    spec = resolve(str(tmp_path), "base")
    model = build_model(spec)
    ids = torch.zeros((2, 7), dtype=torch.long, device="meta")
    program = torch.export.export(model, (), {"input_ids": ids}, strict=False)
    graph = facts.annotate(graph_from_program(program, model, spec))
    ops = attention_ops(graph)
    assert len(ops) == 3
    assert all(data[g.ATTENTION] == kind and g.PADDING_MASK not in data for data in ops)


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_position_kinds_are_read_off_the_ops(model_type: str, family_graph: Callable[[str], nx.DiGraph]) -> None:
    graph = family_graph(model_type)
    assert graph.graph[g.G_POSITION] == {stack: POSITION[model_type] for stack in graph.graph[g.G_STACKS]}


def test_shared_layer_is_found_with_its_calls(
    family_graph: Callable[[str], nx.DiGraph], traced: Callable[..., Architecture]
) -> None:
    layer = "encoder.albert_layer_groups.0"
    assert family_graph("albert").graph[g.G_SHARED] == {layer: 3}
    graph = traced("albert-base-v2").graph
    assert graph.graph[g.G_SHARED] == {layer: 12}
    assert graph.graph[g.G_MODULES][layer][g.M_CALLS] == 12
    assert graph.graph[g.G_ATTENTION] == {"encoder.albert_layer_groups": {BIDI: 12}}
    # Its parameters are counted once, at the first call.
    assert g.total_params(graph) == 11_683_584


@pytest.mark.parametrize("layers", [1, 2])
def test_a_layer_run_twice_is_shared_and_once_is_not(layers: int, tmp_path: Path) -> None:
    """The smallest cases: ALBERT with 2 layers runs its one layer twice (shared); with 1, once (not shared)."""
    (tmp_path / "config.json").write_text(json.dumps({**TINY["albert"], "num_hidden_layers": layers}))
    arch = bertgraph.trace(str(tmp_path), cache=False)
    layer = "encoder.albert_layer_groups.0"
    assert arch.graph.graph.get(g.G_SHARED, {}) == ({layer: 2} if layers == 2 else {})
    drawn = arch.to_dot(depth=2)
    assert ("× 2 · shared weights" in drawn) == (layers == 2)


@pytest.mark.parametrize("model_type", sorted(set(TINY) - {"albert"}))
def test_no_shared_layers_elsewhere(model_type: str, family_graph: Callable[[str], nx.DiGraph]) -> None:
    # DeBERTa runs its query and key projections twice per layer: weights shared inside a layer, no shared layer.
    graph = family_graph(model_type)
    assert g.G_SHARED not in graph.graph
    assert not any(g.M_CALLS in entry for entry in graph.graph[g.G_MODULES].values())


@pytest.mark.parametrize("model_type", ["modernbert", "t5", "gpt2"])
def test_edges_name_the_arguments_they_fill(model_type: str, family_graph: Callable[[str], nx.DiGraph]) -> None:
    graph = family_graph(model_type)
    for node, data in graph.nodes(data=True):
        if data[g.KIND] != g.OPERATOR:
            continue
        filled: list[int] = []
        for source in graph.predecessors(node):
            positions = graph.edges[source, node][g.ARGS]
            assert positions and all(0 <= p < len(data[g.INPUTS]) for p in positions), (source, node)
            filled += positions
        assert len(filled) == len(set(filled)), node  # one tensor per argument


def test_literal_arguments_carry_the_window_and_named_sizes(family_graph: Callable[[str], nx.DiGraph]) -> None:
    graph = family_graph("modernbert")
    literals = {
        (data[g.OP], json.dumps(data[g.LITERALS], sort_keys=True))
        for _, data in graph.nodes(data=True)
        if g.LITERALS in data
    }
    assert ("le", json.dumps({"1": 8})) in literals  # abs(q_idx - kv_idx) <= 8
    assert any(op == "arange" and '"seq"' in text for op, text in literals)  # arange(seq), named like shapes


@pytest.mark.parametrize("fmt", ["json", "graphml"])
def test_facts_survive_graph_files_and_the_cache_checks(
    fmt: str, family_graph: Callable[[str], nx.DiGraph], tmp_path: Path
) -> None:
    graph = family_graph("t5")
    path = tmp_path / f"t5.{fmt}"
    (graph_io.write_json if fmt == "json" else graph_io.write_graphml)(graph, path)
    back = graph_io.read_json(path) if fmt == "json" else graph_io.read_graphml(path)
    for key in (g.G_ATTENTION, g.G_POSITION, g.G_MODULES):
        assert back.graph[key] == graph.graph[key]
    for node, data in graph.nodes(data=True):
        for key in (g.ATTENTION, g.PADDING_MASK, g.Q_HEADS, g.KV_HEADS, g.LITERALS):
            assert back.nodes[node].get(key) == data.get(key)
    for source, target, data in graph.edges(data=True):
        assert back.edges[source, target].get(g.ARGS) == data.get(g.ARGS)
    assert graph_problem(graph) is None


def test_forged_facts_are_refused(family_graph: Callable[[str], nx.DiGraph]) -> None:
    graph = family_graph("bert").copy()
    node = next(n for n, data in graph.nodes(data=True) if g.ATTENTION in data)
    graph.nodes[node][g.ATTENTION] = "telepathic"
    assert graph_problem(graph) == f"node {node!r} has an unknown attention kind"


def test_summary_shows_the_facts(family_graph: Callable[[str], nx.DiGraph]) -> None:
    from bertgraph.graph import stats
    from bertgraph.render import markdown, text

    summary = stats.summary(family_graph("t5"))
    assert summary["architecture"]["stacks"][1] == {
        "path": "decoder.block",
        "kind": "decoder",
        "attention": {CAUSAL: 4, CROSS: 4},
        "padding_masks": ["attention_mask", "decoder_attention_mask"],
        "q_heads": [4],
        "kv_heads": [4],
        "position": [BUCKETS],
    }
    lines = list(text.generate_summary(summary))
    assert (
        "  encoder.block (encoder): 4 × bidirectional · padding mask from attention_mask · 4 heads · "
        "positions: relative-buckets" in lines
    )
    qwen = "\n".join(markdown.generate_summary(stats.summary(family_graph("qwen2"))))
    assert "4 heads, 2 key/value heads (grouped-query)" in qwen


def test_facts_need_no_config(family_graph: Callable[[str], nx.DiGraph]) -> None:
    """The passes read ops only: a graph stripped of its config, family and class names gives the same facts."""
    graph = family_graph("bart")
    bare = graph.copy()
    for key in (g.G_CONFIG, g.G_FAMILY, g.G_MODEL_TYPE, g.G_MODEL_CLASS, g.G_ATTENTION, g.G_POSITION):
        bare.graph.pop(key, None)
    bare.graph[g.G_MODULES] = {path: {g.M_TYPE: "Module"} for path in graph.graph[g.G_MODULES]}
    for _, data in bare.nodes(data=True):
        data[g.MODULE_TYPE] = ""
        for key in (g.ATTENTION, g.WINDOW, g.PADDING_MASK, g.Q_HEADS, g.KV_HEADS):
            data.pop(key, None)
    facts.annotate(bare)
    assert bare.graph[g.G_ATTENTION] == graph.graph[g.G_ATTENTION]
    assert bare.graph[g.G_POSITION] == graph.graph[g.G_POSITION]


SW64 = "sliding-window(64)"
# Each preset's published architecture: {stack: {attention: count}}, position kinds, (query heads, key/value heads).
PRESETS: dict[str, tuple[dict[str, dict[str, int]], list[str], tuple[int, int]]] = {
    "bert-base-uncased": ({"encoder.layer": {BIDI: 12}}, [ABSOLUTE], (12, 12)),
    "roberta-base": ({"encoder.layer": {BIDI: 12}}, [ABSOLUTE], (12, 12)),
    "distilbert-base-uncased": ({"transformer.layer": {BIDI: 6}}, [ABSOLUTE], (12, 12)),
    "albert-base-v2": ({"encoder.albert_layer_groups": {BIDI: 12}}, [ABSOLUTE], (12, 12)),
    "electra-small-discriminator": ({"encoder.layer": {BIDI: 12}}, [ABSOLUTE], (4, 4)),
    "deberta-v3-base": ({"encoder.layer": {BIDI: 12}}, [RELATIVE], (12, 12)),
    "modernbert-base": ({"layers": {BIDI: 8, SW64: 14}}, [ROTARY], (12, 12)),
    "all-mpnet-base-v2": ({"encoder.layer": {BIDI: 12}}, [ABSOLUTE, BUCKETS], (12, 12)),
    "gpt2": ({"h": {CAUSAL: 12}}, [ABSOLUTE], (12, 12)),
    "TinyLlama-1.1B": ({"layers": {CAUSAL: 22}}, [ROTARY], (32, 4)),
    "Qwen2.5-0.5B": ({"layers": {CAUSAL: 24}}, [ROTARY], (14, 2)),
    "Qwen3-0.6B": ({"layers": {CAUSAL: 28}}, [ROTARY], (16, 8)),
    "t5-small": ({"encoder.block": {BIDI: 6}, "decoder.block": {CAUSAL: 6, CROSS: 6}}, [BUCKETS], (8, 8)),
    "mt5-small": ({"encoder.block": {BIDI: 8}, "decoder.block": {CAUSAL: 8, CROSS: 8}}, [BUCKETS], (6, 6)),
    "bart-base": ({"encoder.layers": {BIDI: 6}, "decoder.layers": {CAUSAL: 6, CROSS: 6}}, [ABSOLUTE], (12, 12)),
}


@pytest.mark.slow
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presets_have_their_published_architecture(preset: str, traced: Callable[..., Architecture]) -> None:
    attention, position, heads = PRESETS[preset]
    graph = traced(preset).graph
    assert graph.graph[g.G_ATTENTION] == attention
    assert graph.graph[g.G_POSITION] == dict.fromkeys(attention, position)
    assert {(data[g.Q_HEADS], data[g.KV_HEADS]) for data in attention_ops(graph)} == {heads}


def test_annotating_a_copy_leaves_the_traced_graph_as_it_was(
    tiny_graph: Callable[[str, str], tuple[Any, nx.DiGraph]],
) -> None:
    """``graph.copy()`` shares the module table; the facts of a copy must not leak into the original."""
    _, traced = tiny_graph("bart", "base")
    before = "".join(graph_io.generate_json(traced))
    annotated = facts.annotate(traced.copy())
    assert annotated.graph[g.G_MODULES]["encoder.layers.0.self_attn"][g.ATTENTION] == "bidirectional"
    assert "".join(graph_io.generate_json(traced)) == before
