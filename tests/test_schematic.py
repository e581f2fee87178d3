"""The families schematic: readable when scaled, drawn downward, facts read off the traces."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import networkx as nx
import pytest

from bertgraph.graph.schematic import columns
from bertgraph.render import schematic

THREE = ("bert-base-uncased", "gpt2", "t5-small")


def _graphs(traced: Any, models: tuple[str, ...]) -> list[nx.DiGraph]:
    return [traced(model).graph for model in models]


def smallest_px(svg: str, page_px: float) -> float:
    """The smallest text on a page ``page_px`` wide: font size × page width / drawing width."""
    width = float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+)', svg).group(1))  # type: ignore[union-attr]
    sizes = [float(s) for s in re.findall(r'font-size="([\d.]+)"', svg)]
    return min(sizes) * page_px / width


def laid_out(source: str) -> tuple[dict[str, float], list[tuple[str, str]]]:
    """Node heights (y, upward) and visible edges from the real ``dot -Tjson``."""
    data = json.loads(subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, check=True).stdout)
    names, ys = {}, {}
    for item in data.get("objects", []):
        if "pos" in item:
            names[item["_gvid"]] = item["name"]
            ys[item["name"]] = float(item["pos"].split(",")[1])
    edges = [(names[e["tail"]], names[e["head"]]) for e in data.get("edges", []) if e.get("style") != "invis"]
    return ys, edges


def test_three_models_read_at_9px_on_800px(traced: Any, dot_binary: str) -> None:
    svg = schematic.schematic_text(_graphs(traced, THREE), "svg")
    assert smallest_px(svg.decode() if isinstance(svg, bytes) else svg, 800) >= 9


@pytest.mark.parametrize(
    "models", [THREE, ("albert-base-v2", "answerdotai/ModernBERT-base", "bart-base", "TinyLlama-1.1B")]
)
def test_no_cycle_and_no_upward_edge(traced: Any, dot_binary: str, models: tuple[str, ...]) -> None:
    source = str(schematic.schematic_text(_graphs(traced, models), "dot"))
    ys, edges = laid_out(source)
    assert nx.is_directed_acyclic_graph(nx.DiGraph(edges))
    assert [(a, b) for a, b in edges if ys[a] <= ys[b]] == []
    # cross-attention reads the encoder's output, not a step inside it (the encoder-decoder is drawn last)
    last = f"m{len(models) - 1}"
    crossing = [(a, b) for a, b in edges if a.startswith(f"{last}c0") and b.startswith(f"{last}c1")]
    assert crossing and {a for a, _ in crossing} == {f"{last}c0out"}


def test_encoder_column_left_of_decoder(traced: Any, dot_binary: str) -> None:
    source = str(schematic.schematic_text(_graphs(traced, ("t5-small",)), "dot"))
    data = json.loads(subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, check=True).stdout)
    x = {o["name"]: float(o["pos"].split(",")[0]) for o in data["objects"] if "pos" in o}
    assert x["m0c0emb"] < x["m0c1emb"]


@pytest.mark.parametrize(
    ("model", "order"),
    [
        ("bert-base-uncased", [["attention", "residual", "norm", "feed-forward", "residual", "norm"]]),  # post-norm
        ("gpt2", [["norm", "attention", "residual", "norm", "feed-forward", "residual"]]),  # pre-norm
        (
            "t5-small",
            [
                ["norm", "attention", "residual", "norm", "feed-forward", "residual"],
                [
                    "norm",
                    "attention",
                    "residual",
                    "norm",
                    "cross-attention",
                    "residual",
                    "norm",
                    "feed-forward",
                    "residual",
                ],
            ],
        ),
    ],
)
def test_layer_order_read_off_the_ops(traced: Any, model: str, order: list[list[str]]) -> None:
    _, cols = columns(traced(model).graph)
    assert [[step.role for step in column.steps] for column in cols] == order


@pytest.mark.parametrize(
    ("model", "skips"),
    [
        # post-norm: the layer's input around attention, the attention's norm around the FFN
        ("bert-base-uncased", [[(-1, 1), (2, 4)]]),
        # pre-norm: each residual starts before the sublayer's norm (T5's starts at the layer's input,
        # read through the no-op cast its norm begins with)
        ("gpt2", [[(-1, 2), (2, 5)]]),
        ("t5-small", [[(-1, 2), (2, 5)], [(-1, 2), (2, 5), (5, 8)]]),
    ],
)
def test_residuals_start_where_the_added_tensor_was_made(
    traced: Any, model: str, skips: list[list[tuple[int, int]]]
) -> None:
    _, cols = columns(traced(model).graph)
    assert [column.skips for column in cols] == skips


@pytest.mark.parametrize(
    "model",
    ["bert-base-uncased", "gpt2", "t5-small", "albert-base-v2", "modernbert-base", "TinyLlama-1.1B", "bart-base"],
)
def test_ffn_width_is_the_configured_intermediate_size(traced: Any, model: str) -> None:
    """Gated FFNs included: ModernBERT's fused input projection is twice its width, LLaMA's has two."""
    graph = traced(model).graph
    _, cols = columns(graph)
    expected = graph.graph["config"]["intermediate"]
    hidden = graph.graph["config"]["hidden"]
    for column in cols:
        (ffn,) = [step.text for step in column.steps if step.role == "feed-forward"]
        assert ffn.endswith(f"{hidden}→{expected}→{hidden}"), ffn


@pytest.mark.parametrize(
    ("model", "activation", "norm"),
    [
        ("bert-base-uncased", "GELU", "LayerNorm"),
        ("albert-base-v2", "GELU (tanh)", "LayerNorm"),  # its activation is a module of the layer, not of an FFN
        ("modernbert-base", "GeGLU", "LayerNorm"),
        ("TinyLlama-1.1B", "SwiGLU", "RMSNorm"),
        ("t5-small", "ReLU", "RMSNorm"),  # T5LayerNorm does not centre: an RMS norm
    ],
)
def test_activation_and_norm_kind_read_off_the_ops(traced: Any, model: str, activation: str, norm: str) -> None:
    _, cols = columns(traced(model).graph)
    steps = cols[0].steps
    assert [s.text.split(" · ")[0] for s in steps if s.role == "feed-forward"] == [f"FFN {activation}"]
    assert {s.text for s in steps if s.role == "norm"} == {norm}


@pytest.mark.parametrize(
    ("model", "outer"),
    [
        ("bert-base-uncased", [(True, False)]),  # embeddings' LayerNorm, no final norm
        ("gpt2", [(False, True)]),  # ln_f
        ("bart-base", [(True, False), (True, False)]),  # layernorm_embedding runs before the layers
        ("t5-small", [(False, True), (False, True)]),
    ],
)
def test_norms_outside_the_layers_before_or_after_them(traced: Any, model: str, outer: list[tuple[bool, bool]]) -> None:
    _, cols = columns(traced(model).graph)
    assert [(c.embedding_norm, c.final_norm) for c in cols] == outer


def test_a_shared_layer_keeps_its_attention_kind(traced: Any) -> None:
    _, (albert,) = columns(traced("albert-base-v2").graph)
    assert albert.pattern == ["bidirectional"]
    source = str(schematic.schematic_text([traced("albert-base-v2").graph], "dot"))
    assert "bidirectional self-attention" in source and "12 × (one shared layer)" in source


def test_layers_that_slide_past_max_window_layers_are_runs(tmp_path: Any) -> None:
    """Qwen2 with sliding layers from ``max_window_layers`` on: no repeating cycle, runs of layers."""
    import bertgraph
    from tests.test_sliding_window_layers import WINDOW, sliding_config

    config = sliding_config("qwen2", layers=5, window_layers=2)
    (tmp_path / "config.json").write_text(json.dumps(config))
    graph = bertgraph.trace(str(tmp_path), cache=False).graph
    _, (column,) = columns(graph)
    sliding = f"causal-sliding-window({WINDOW})"
    assert column.runs == [(1, 2, "causal"), (3, 5, sliding)]
    source = str(schematic.schematic_text([graph], "dot"))
    assert "layers 1–2: causal" in source and f"layers 3–5: {sliding}" in source and "repeating" not in source


def test_column_facts_match_the_config(traced: Any) -> None:
    kind, cols = columns(traced("t5-small").graph)
    assert [c.kind for c in cols] == ["encoder", "decoder"]
    assert [c.layers for c in cols] == [6, 6]
    assert [c.pattern for c in cols] == [["bidirectional"], ["causal"]]
    assert "FFN ReLU · 512→2048→512" in [s.text for s in cols[0].steps]
    assert kind["position"] == ["relative-buckets"]


FIVE = ("bert-base-uncased", "gpt2", "t5-small", "answerdotai/ModernBERT-base", "albert-base-v2")


def test_five_models_read_at_8px_on_1200px(traced: Any, dot_binary: str) -> None:
    svg = schematic.schematic_text(_graphs(traced, FIVE), "svg")
    assert smallest_px(svg.decode() if isinstance(svg, bytes) else svg, 1200) >= 8


def test_patterns_and_shared_layers(traced: Any) -> None:
    _, (modern,) = columns(traced("answerdotai/ModernBERT-base").graph)
    assert modern.layers == 22 and len(modern.pattern) == 3  # [global, window, window] repeating
    assert modern.pattern[0] == "bidirectional" and modern.pattern[1] == modern.pattern[2] != "bidirectional"
    _, (albert,) = columns(traced("albert-base-v2").graph)
    assert albert.shared and albert.layers == 12


@pytest.mark.browser
def test_mermaid_schematic_as_mermaid_js_lays_it_out(traced: Any) -> None:
    """Rendered in Chromium: the models left to right in tutorial order, the encoder left of its decoder,
    every arrow and residual path downward, the cross-attention arrow leaving the encoder's output."""
    from tests.conftest import require
    from tests.mermaid_browser import browser_available, node_centres, render_mermaid

    reason = browser_available()
    require(reason is None, reason or "")
    text = schematic.mermaid_text(_graphs(traced, ("t5-small", "gpt2", "bert-base-uncased")))
    (result,) = render_mermaid({"schematic": text}).values()
    assert result.ok, result.error
    at = node_centres(result.svg)
    x = [at[node][0] for node in ("m0c0emb", "m1c0emb", "m2c0emb", "m2c1emb")]  # bert, gpt2, t5 encoder, decoder
    assert x == sorted(x)
    edges = re.findall(r"^  (\w+) (?:-->|-\.->|==>) (\w+)$", text, re.MULTILINE)
    assert len(edges) > 40 and [(a, b) for a, b in edges if at[a][1] >= at[b][1]] == []
    assert {a for a, b in edges if a.startswith("m2c0") and b.startswith("m2c1")} == {"m2c0out"}
