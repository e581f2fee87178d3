"""The planning figures as the command line gives them: JSON totals, text lines, the summary's KV cache line."""

from __future__ import annotations

import json
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
    assert "generating 3 tokens after batch=1, seq=64" in out


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
