"""The planning figures as the command line gives them: JSON totals, text lines, the summary's KV cache line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bertgraph.cli import main
from bertgraph.graph import costbase, generation
from bertgraph.graph.poly import Poly
from tests.generation_runs import config_dir, graph_of


def test_cost_json_has_the_planning_totals(tmp_path: Path) -> None:
    target = tmp_path / "cost.json"
    model = str(config_dir("qwen2-sliding"))
    args = ["cost", model, "--head", "causal-lm", "--seq-len", "8", "40", "--batch", "2", "--dtype", "bfloat16"]
    assert main([*args, "--generate", "5", "--format", "json", "-o", str(target)]) == 0
    data = json.loads(target.read_text())
    graph = graph_of("qwen2-sliding")
    expected = {
        "kv_cache_bytes": generation.kv_cache_bytes(graph, "bfloat16"),
        "decode_flops_per_token": generation.decode_step_flops(graph),
    }
    for key, poly in expected.items():
        entry = data["total"][key]
        assert Poly.parse(entry["formula"]) == poly
        assert entry["readable"] == poly.readable()
        assert entry["values"] == [costbase.evaluate(poly, s) for s in data["sizes"]]
    assert "min(seq, 15)" in data["total"]["kv_cache_bytes"]["formula"]
    assert data["assumptions"]["attention"] == "sdpa" and data["assumptions"]["dtype"] == "bfloat16"
    assert [entry["tokens"] for entry in data["generate"]] == [5, 5]
    at_end = [costbase.evaluate(expected["kv_cache_bytes"], {**s, "seq": s["seq"] + 5}) for s in data["sizes"]]
    assert [entry["kv_cache_bytes"] for entry in data["generate"]] == at_end


def test_cost_text_labels_the_masked_count_and_the_dtype(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", str(config_dir("gpt2")), "--head", "causal-lm", "--depth", "0", "--generate", "3"]) == 0
    out = capsys.readouterr().out
    assert "  attention, allowed pairs" in out and "not what FlopCounterMode counts" in out
    assert "KV cache (bytes, float32)" in out and "decode step matmul FLOPs" in out
    assert "memory counts sdpa attention, as traced" in out
    assert "generating 3 tokens after batch=1, seq=61" in out  # the default example leaves them room


def test_an_encoder_refuses_generate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "bert-tiny", "--generate", "4"]) != 0
    err = capsys.readouterr().err
    assert "does not generate" in err and len(err.strip().splitlines()) == 1


def test_summary_gives_a_decoders_kv_cache(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(config_dir("llama")), "--head", "causal-lm"]) == 0
    out = capsys.readouterr().out
    entry = generation.kv_cache_summary(graph_of("llama"))
    assert entry is not None and entry["bytes"] == costbase.evaluate(
        generation.kv_cache_bytes(graph_of("llama"), "bfloat16"), {"batch": 1, "seq": 4096}
    )
    assert f"KV cache at 4,096 tokens in bfloat16: {entry['bytes'] // 1024} KiB" in out
    assert main(["summary", "bert-tiny"]) == 0
    assert "KV cache" not in capsys.readouterr().out


def test_generating_a_hundred_million_tokens_is_planned_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cost --generate 100000000`` on a sliding-window decoder with the positions for it: the decode
    steps' sum in closed form, each step's count from the graph (linear in the cached length once the
    window of 16 is full), within a time limit that a step-by-step sum (minutes) cannot meet."""
    from tests.generation_runs import CONFIGS, WINDOW

    folder = tmp_path / "long"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**CONFIGS["qwen2-sliding"], "max_position_embeddings": 10**9}))
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    args = ["cost", str(folder), "--head", "causal-lm", "--seq-len", "8", "--format", "json"]
    assert main(args) == 0  # traces here and fills the cache: the run below reads the graph from it
    capsys.readouterr()
    tokens = 10**8
    run = subprocess.run(
        [sys.executable, "-m", "bertgraph", *args, "--generate", str(tokens)],
        capture_output=True,
        text=True,
        env={**os.environ, "BERTGRAPH_CACHE_DIR": str(tmp_path / "cache")},
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    planned = json.loads(run.stdout)["generate"][0]
    step = Poly.parse(json.loads(run.stdout)["total"]["decode_flops_per_token"]["formula"])

    def at(cached: int) -> int:
        return costbase.evaluate(step, {"batch": 1, "seq": cached})

    cap = WINDOW - 1
    slope = at(cap + 1) - at(cap)
    assert slope > 0 and at(cap + 7) - at(cap + 6) == slope  # linear once the window is full
    last = 8 + tokens - 1  # cached lengths 8 … last; from the cap on, an arithmetic series
    series = (2 * at(cap) + slope * (last - cap)) * (last - cap + 1) // 2
    expected = sum(at(cached) for cached in range(8, cap)) + series
    assert planned["tokens"] == tokens and planned["decode_flops"] == expected


def test_a_model_that_runs_eager_attention_only_plans_generation(capsys: pytest.CaptureFixture[str]) -> None:
    """Gemma-2 (soft-capped scores, eager attention only; sliding and global layers as its config lists them):
    ``cost --generate`` plans from the eager trace, as the graph gives it."""
    args = ["cost", str(config_dir("gemma2")), "--head", "causal-lm", "--seq-len", "5", "--generate", "4"]
    assert main([*args, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    graph = graph_of("gemma2")
    assert data["assumptions"]["attention"] == "eager"
    prefill = Poly.parse(data["total"]["matmul_flops"]["formula"])
    assert data["generate"] == [generation.generate(graph, {"batch": 1, "seq": 5}, 4, prefill, "float32")]
    assert "min(seq, 7)" in data["total"]["kv_cache_bytes"]["formula"]


def test_a_latent_cache_is_said_to_be_one_with_every_heads_keys_and_values_beside_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """DeepSeek-V3 (MLA): positions are rotary, the KV cache is the latent transformers caches, and the keys
    and values per head are the stated second figure, in the summary and the cost table."""
    from bertgraph.render import figures

    model = str(config_dir("deepseek"))
    assert main(["summary", model, "--head", "causal-lm"]) == 0
    out = capsys.readouterr().out
    graph = graph_of("deepseek")
    entry = generation.kv_cache_summary(graph)
    decompressed = generation.decompressed_kv_cache_bytes(graph, "bfloat16")
    assert entry is not None and decompressed is not None
    assert entry["decompressed_bytes"] == costbase.evaluate(decompressed, {"batch": 1, "seq": 4096})
    assert entry["decompressed_bytes"] * 48 == entry["bytes"] * 256  # per token and layer: 4 × (32 + 32) vs 32 + 16
    assert "positions: rotary" in out and "positions: relative" not in out
    assert f"KV cache at 4,096 tokens in bfloat16: {entry['bytes'] // 1024} KiB" in out
    assert "MLA's latent and shared rotary key, as transformers caches them" in out
    assert f"every head's keys and values would take {figures.size(entry['decompressed_bytes'])}" in out
    assert main(["cost", model, "--head", "causal-lm", "--seq-len", "8", "--format", "json"]) == 0
    total = json.loads(capsys.readouterr().out)["total"]
    assert Poly.parse(total["kv_cache_bytes_decompressed"]["formula"]) == generation.decompressed_kv_cache_bytes(
        graph, "float32"
    )
    assert main(["cost", model, "--head", "causal-lm", "--seq-len", "8", "--depth", "0"]) == 0
    out = capsys.readouterr().out
    assert "  keys and values per head" in out and "multi-head latent attention (MLA)" in out
    assert main(["cost", str(config_dir("llama")), "--head", "causal-lm", "--depth", "0"]) == 0
    assert "per head" not in capsys.readouterr().out
