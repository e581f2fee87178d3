"""Qwen2/Qwen3 layers that slide only past ``max_window_layers``: read off the ops, as a real forward attends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import bertgraph
from bertgraph.graph import facts
from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.model import resolve
from bertgraph.tracing import trace
from tests.family_configs import TINY

WINDOW = 16


def sliding_config(model_type: str, layers: int = 4, window_layers: int = 2) -> dict[str, Any]:
    return {
        **TINY[model_type],
        "num_hidden_layers": layers,
        "use_sliding_window": True,
        "sliding_window": WINDOW,
        "max_window_layers": window_layers,
    }


def allowed_by_the_facts(facts: dict[str, Any], seq: int) -> list[list[bool]]:
    """The (query, key) pairs an attention kind lets through."""
    window = facts.get(g.WINDOW)
    kind = facts[g.ATTENTION]
    assert kind in (g.CAUSAL, g.CAUSAL_SLIDING_WINDOW)
    return [[k <= q and (window is None or k > q - window) for k in range(seq)] for q in range(seq)]


def allowed_in_a_real_forward(model_type: str, config: dict[str, Any], seq: int) -> list[list[list[bool]]]:
    """Per layer, the pairs an eager forward gives a probability above zero (every head, batch 0)."""
    import torch
    import transformers

    fields = {key: value for key, value in config.items() if key != "model_type"}
    built = transformers.AutoConfig.for_model(model_type, **fields, attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(built).eval()
    ids = torch.randint(0, config["vocab_size"], (1, seq))
    with torch.no_grad():
        attentions = model(input_ids=ids, output_attentions=True).attentions
    return [(layer[0] > 0).all(dim=0).tolist() for layer in attentions]


@pytest.mark.parametrize("model_type", ["qwen2", "qwen3"])
def test_only_layers_past_max_window_layers_slide(model_type: str, tmp_path: Path) -> None:
    config = sliding_config(model_type)
    (tmp_path / "config.json").write_text(json.dumps(config))
    graph = bertgraph.trace(str(tmp_path), cache=False).graph
    assert graph.graph[g.G_ATTENTION] == {"layers": {g.CAUSAL: 2, f"causal-sliding-window({WINDOW})": 2}}
    modules = graph.graph[g.G_MODULES]
    facts = [modules[f"layers.{index}.self_attn"] for index in range(4)]
    assert [g.attention_label(entry) for entry in facts] == [g.CAUSAL] * 2 + [f"causal-sliding-window({WINDOW})"] * 2
    seq = WINDOW + 9  # long enough for the window to cut
    real = allowed_in_a_real_forward(model_type, config, seq)
    assert real[0] != real[3]  # the example does tell the kinds apart
    assert [allowed_by_the_facts(entry, seq) for entry in facts] == real


def test_summary_counts_the_sliding_layers(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(sliding_config("qwen2")))
    from bertgraph.render.text import generate_summary

    text = "".join(generate_summary(bertgraph.trace(str(tmp_path), cache=False).summary()))
    assert f"2 × causal, 2 × causal-sliding-window({WINDOW})" in text


@pytest.mark.parametrize("window_layers", [0, 2])
def test_sliding_stacks_grow_as_a_full_trace_reads(window_layers: int, tmp_path: Path) -> None:
    """All layers sliding grows from two traced layers; a full-then-sliding stack is traced whole."""
    (tmp_path / "config.json").write_text(json.dumps(sliding_config("qwen2", layers=5, window_layers=window_layers)))
    spec = resolve(str(tmp_path), "causal-lm")
    grown, full = trace(spec), trace(spec, grow=False)
    assert "".join(graph_io.generate_json(grown)) == "".join(graph_io.generate_json(full))
    sliding = 5 - window_layers
    expected = {f"causal-sliding-window({WINDOW})": sliding, **({g.CAUSAL: window_layers} if window_layers else {})}
    assert facts.annotate(full).graph[g.G_ATTENTION] == {"model.layers": expected}
