"""Deployment planning: memory per part, the fit boundary, the bounds, and every assumption said.

The decoders are the planning tests' own tiny models (committed graphs: nothing is traced here but
the preset): grouped-query LLaMA, Qwen2 with a window on half its layers, Gemma-2's sliding and
global pattern, T5 (an encoder-decoder), DeepSeek-V3's latent cache; every expected number is
written from the config (layers × key/value heads × head size × tokens × item size), and the limits
are held to the memory walked op by op again at the boundary and one past it.
"""

from __future__ import annotations

import json
from typing import Any

import networkx as nx
import pytest

from bertgraph.graph import costbase, generation, memory
from bertgraph.graph import schema as g
from bertgraph.graph.cost import model_totals
from bertgraph.plan import deploy, gpus
from bertgraph.plan.deploy import Request
from bertgraph.plan.gpus import GIB
from tests.generation_runs import CONFIGS, WINDOW, graph_of
from tests.helpers import one_line_error

DECODERS = ("llama", "qwen2-sliding", "gemma2", "t5", "deepseek")


def _sizes(graph: nx.DiGraph, lengths: tuple[int, ...] = (12, 40), batch: int = 3) -> list[dict[str, int]]:
    return [costbase.sizes_for(graph, seq=n, batch=batch) for n in lengths]


def _kv_from_config(name: str, batch: int, tokens: int, item: int) -> int:
    """The cache written from the config alone: every block's heads × (key + value) head size × tokens kept."""
    config = CONFIGS[name]
    if name == "t5":  # a self- and a cross-attention cache per decoder block, decoder as long as the input
        return config["num_layers"] * 2 * batch * config["num_heads"] * 2 * config["d_kv"] * tokens * item
    if name == "deepseek":  # the latent and the shared rotary key part
        return (
            config["num_hidden_layers"] * batch * (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * tokens * item
        )
    head = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    total = 0
    for layer in range(config["num_hidden_layers"]):
        if "layer_types" in config:
            window = config["sliding_window"] if config["layer_types"][layer] == "sliding_attention" else None
        else:
            slides = config.get("use_sliding_window") and layer >= config["max_window_layers"]
            window = config["sliding_window"] if slides else None
        kept = min(tokens, window - 1) if window else tokens
        total += batch * config["num_key_value_heads"] * 2 * head * kept * item
    return total


@pytest.mark.parametrize("name", DECODERS)
def test_the_kv_cache_is_exact_in_its_dtype_and_fp8_is_half_of_bfloat16(name: str) -> None:
    graph = graph_of(name)
    sizes = _sizes(graph, (5, WINDOW + 9))
    found = {
        dtype: deploy.deployment(graph, sizes, Request(kv_dtype=dtype))[0]["kv_cache"]
        for dtype in ("float32", "bfloat16", "fp8")
    }
    assert found["fp8"]["dtype"] == "float8_e4m3fn"
    for index, s in enumerate(sizes):
        bf16 = found["bfloat16"]["bytes"][index]
        assert bf16 == _kv_from_config(name, s["batch"], s["seq"], 2)
        assert found["fp8"]["bytes"][index] * 2 == bf16 and found["float32"]["bytes"][index] == 2 * bf16


def test_the_cache_defaults_to_the_dtype_the_model_computes_in() -> None:
    graph = graph_of("llama")
    sizes = _sizes(graph)
    assert deploy.deployment(graph, sizes)[0]["kv_cache"]["dtype"] == "float32"  # the config names none: as traced
    # a quantizer's float, where the config names none: float16 for GPTQ's kernels, bfloat16 for FP8's
    for scheme, dtype in (("int4", "float16"), ("fp8", "bfloat16"), ("bfloat16", "bfloat16"), ("float16", "float16")):
        assert deploy.deployment(graph, sizes, Request(weights=scheme))[0]["kv_cache"]["dtype"] == dtype
    assert deploy.deployment(graph, sizes, Request(weights="fp8", dtype="float16"))[0]["kv_cache"]["dtype"] == "float16"


def _memory_at(graph: nx.DiGraph, sizes: dict[str, int], fixed: int, kv_dtype: str, compute: str) -> int:
    """The memory a size needs, evaluated the plain way: weights and overhead, the cache, the walked peak."""
    kv = costbase.evaluate(generation.kv_cache_elements(graph), sizes) * {"bfloat16": 2, "float32": 4}[kv_dtype]
    return fixed + kv + memory.peak_activation(graph, sizes, compute).bytes


@pytest.mark.parametrize("name", DECODERS)
def test_the_longest_context_and_largest_batch_are_exact_boundaries(name: str) -> None:
    """The plan fits at max_seq_len and not at one more token; at max_batch and not at one more sequence."""
    graph = graph_of(name)
    sizes = _sizes(graph, (30,), batch=2)
    weights = deploy.deployment(graph, sizes)[0]["weights"]["bytes"]
    overhead = 4096
    fixed = weights + overhead
    need = _memory_at(graph, sizes[0], fixed, "float32", "float32")
    seq = costbase.sequence_name(graph)
    for capacity in (need, need * 3 + 17, need * 11):
        gpu = gpus.GPU("test", capacity, 10**12, 10**14, "bfloat16", "the test")
        found = deploy.deployment(graph, sizes, Request(gpu=gpu, overhead_bytes=overhead))[0]
        longest, widest = found["max_seq_len"], found["max_batch"]
        at = lambda n: costbase.at_length(sizes[0], seq, n)  # noqa: E731
        assert _memory_at(graph, at(longest), fixed, "float32", "float32") <= capacity
        assert _memory_at(graph, at(longest + 1), fixed, "float32", "float32") > capacity
        assert longest >= 30 and widest >= 2  # the asked size fits, so both limits reach it
        batch = lambda b: {**sizes[0], "batch": b}  # noqa: E731
        assert _memory_at(graph, batch(widest), fixed, "float32", "float32") <= capacity
        assert _memory_at(graph, batch(widest + 1), fixed, "float32", "float32") > capacity
        assert found["fits"] == [found["total_bytes"][0] <= capacity] == [True]


@pytest.mark.parametrize("name", ("llama", "gemma2", "t5"))
def test_the_limit_solved_on_the_polynomials_is_the_one_evaluation_finds(name: str) -> None:
    """Solving on the envelope's polynomials and searching by walking the peak give the same boundary at every
    capacity, down to where nothing fits (None)."""
    graph = graph_of(name)
    base = _sizes(graph, (8,), batch=1)[0]
    fixed = 1000
    kv = generation.kv_cache_elements(graph) * 4
    plan = deploy._Memory(graph, fixed, kv, "float32")
    seq = costbase.sequence_name(graph)
    at = lambda n: costbase.at_length(base, seq, n)  # noqa: E731
    one = plan.total(at(1))
    for capacity in (one - 1, one, one + 1, 2 * one, 7 * one + 3, 50 * one):
        evaluated = deploy.largest(lambda n, c=capacity: plan.total(at(n)) <= c)
        assert plan.solve(at, capacity) == evaluated == plan.limit(at, capacity)
    assert plan.solve(at, one - 1) is None


def test_nothing_fits_when_the_weights_do_not() -> None:
    graph = graph_of("llama")
    sizes = _sizes(graph)
    gpu = gpus.custom_gpu(1 / 1024 / 1024, 100, 10)  # one KiB
    found = deploy.deployment(graph, sizes, Request(gpu=gpu, overhead_bytes=0))[0]
    assert found["fits"] == [False, False] and found["max_seq_len"] is None and found["max_batch"] is None


def test_the_decode_and_prefill_bounds_are_the_stated_arithmetic() -> None:
    graph = graph_of("llama")
    sizes = _sizes(graph, (12, 40), batch=3)
    gpu = gpus.gpu_named("H100")
    found, assumed, _ = deploy.deployment(graph, sizes, Request(weights="bfloat16", gpu=gpu))
    params = sum(int(row["numel"]) for row in g.parameter_rows(graph))
    assert found["weights"]["bytes"] == 2 * params
    matmul = model_totals(graph)[g.MATMUL_FLOPS]
    for index, s in enumerate(sizes):
        kv = _kv_from_config("llama", s["batch"], s["seq"], 2)
        assert found["decode_tokens_per_s_bound"][index] == s["batch"] * 3.35e12 / (2 * params + kv)
        flops = costbase.evaluate(matmul, s)
        assert found["prefill_tokens_per_s_bound"][index] == 989.4e12 * s["batch"] * s["seq"] / flops
    assert assumed["decode_reads_bytes"] == 2 * params


def test_a_mixture_of_experts_reads_the_experts_one_token_runs() -> None:
    graph = graph_of("deepseek")
    sizes = _sizes(graph, (12,), batch=1)
    found, assumed, _ = deploy.deployment(graph, sizes, Request(weights="bfloat16", gpu=gpus.gpu_named("h200")))
    from bertgraph.graph import moe

    active = moe.active_parameters(graph)
    assert active is not None
    assert assumed["decode_reads_bytes"] == found["weights"]["bytes"] * active["active"] // sum(
        int(r["numel"]) for r in g.parameter_rows(graph)
    )
    assert assumed["decode_reads_bytes"] < found["weights"]["bytes"]
    kv = found["kv_cache"]["bytes"][0]
    assert found["decode_tokens_per_s_bound"] == [4.8e12 / (assumed["decode_reads_bytes"] + kv)]


def test_an_encoder_has_no_cache_and_no_decode_bound() -> None:
    graph = graph_of("modernbert")
    found = deploy.deployment(graph, _sizes(graph), Request(gpu=gpus.gpu_named("L4")))[0]
    assert found["kv_cache"]["bytes"] == [0, 0] and found["decode_tokens_per_s_bound"] is None
    assert found["prefill_tokens_per_s_bound"] is not None and found["max_seq_len"] is not None


def test_the_gpu_table_names_its_sources_and_each_gpu_by_a_short_name() -> None:
    assert len({gpu.name for gpu in gpus.GPUS}) == len(gpus.GPUS) >= 9
    assert all("datasheet" in gpu.source or "whitepaper" in gpu.source for gpu in gpus.GPUS)
    assert {gpu.name: gpu.flops_dtype for gpu in gpus.GPUS}["T4 16GB"] == "float16"
    assert gpus.gpu_named("a100-40gb").memory_bytes == 40 * GIB
    assert gpus.gpu_named("rtx 4090").bandwidth_bytes_per_s == 1008 * 10**9
    for short, full in (("h100", "H100 SXM 80GB"), ("L40S", "L40S 48GB"), ("3090", "RTX 3090 24GB"), ("t4", "T4 16GB")):
        assert gpus.gpu_named(short).name == full
    with pytest.raises(gpus.PlanError, match="could be any of A100 SXM 40GB, A100 SXM 80GB"):
        gpus.gpu_named("a100")


# --- the command line -------------------------------------------------------------------------------


def _cost(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    from bertgraph.cli import main

    assert main(argv) == 0
    return capsys.readouterr().out


def test_cost_json_has_the_deployment_object_and_the_text_names_every_assumption(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    from tests.generation_runs import config_dir

    folder = str(config_dir("qwen2-sliding"))
    common = ["cost", folder, "--head", "causal-lm", "--seq-len", "12", "40", "--batch", "2", "--depth", "0"]
    gpu = ["--gpu-memory", "0.004", "--gpu-bandwidth", "500", "--gpu-flops", "50", "--gpu-overhead", "0.001"]
    report = json.loads(_cost([*common, *gpu, "--kv-dtype", "fp8", "--format", "json"], capsys))
    found = report["deployment"]
    assert list(found) == [
        "weights",
        "kv_cache",
        "peak_activation_bytes",
        "total_bytes",
        "gpu",
        "fits",
        "max_seq_len",
        "max_batch",
        "prefill_tokens_per_s_bound",
        "decode_tokens_per_s_bound",
    ]
    assert list(found["weights"]) == ["scheme", "bytes"] and list(found["kv_cache"]) == ["dtype", "bytes"]
    assert list(found["gpu"]) == ["name", "memory_bytes", "bandwidth_bytes_per_s", "flops_per_s"]
    assert found["gpu"]["memory_bytes"] == round(0.004 * GIB) and found["gpu"]["flops_per_s"] == 50 * 10**12
    overhead = round(0.001 * GIB)
    assert report["assumptions"]["deployment"]["overhead_bytes"] == overhead
    for index in range(2):
        parts = found["weights"]["bytes"] + found["kv_cache"]["bytes"][index] + found["peak_activation_bytes"][index]
        assert found["total_bytes"][index] == parts + overhead
        assert found["fits"][index] == (found["total_bytes"][index] <= found["gpu"]["memory_bytes"])
    text = _cost([*common, *gpu, "--kv-dtype", "fp8"], capsys)
    for said in (
        "KV cache (float8_e4m3fn)",
        "overhead: 0.001 GiB for the CUDA context and the caching allocator's reserve (set with --gpu-overhead)",
        "sliding windows keep w - 1 tokens",
        "weights from every parameter in float32 (as traced)",
        "numbers given on the command line",
        f"longest context that fits at batch 2: {found['max_seq_len']:,} tokens ({found['max_seq_len'] + 1:,} do not)",
        "bounds, not speeds",
        "decode bound",
    ):
        assert said in text, said
    markdown = _cost([*common, "--gpu", "t4", "--weights", "int4", "--format", "markdown"], capsys)
    assert "| fits T4 16GB (16.0 GiB) |" in markdown and "NVIDIA T4 Tensor Core GPU datasheet" in markdown
    assert "Weights from --weights int4: " in markdown


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--scheme", "awq"], "--scheme awq chooses the layout of --weights int4; add --weights int4"),
        (["--gpu", "h100", "--gpu-memory", "80"], "--gpu h100 has its numbers in the table: leave out --gpu-memory"),
        (["--gpu-memory", "80"], "another GPU needs both --gpu-memory (GiB) and --gpu-bandwidth (GB/s)"),
        (["--gpu", "v100"], "--gpu 'v100' is none of H100 SXM 80GB"),
        (["--gpu-memory", "-1", "--gpu-bandwidth", "1"], "must be a positive number, got -1"),
        (["--weights", "int4", "--scheme", "awq", "--group-size", "7"], "AWQ needs in_features"),
    ],
)
def test_deployment_options_that_cannot_be_planned_are_one_line(
    options: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.generation_runs import config_dir

    status = 1 if options[0] in ("--weights",) or "v100" in options else 2  # a usage mistake is status 2
    line = one_line_error(["cost", str(config_dir("llama")), "--head", "causal-lm", *options], capsys, status)
    assert said in line, line


@pytest.mark.slow
def test_mistral_7b_on_an_h100_with_its_sliding_window(traced: Any) -> None:
    """The preset: 7,241,732,096 parameters in bfloat16, a cache that stops growing at its 4,096-token window."""
    graph = traced("Mistral-7B", "causal-lm").graph
    sizes = [costbase.sizes_for(graph, seq=n, batch=1) for n in (4096, 32768)]
    found, assumed, notes = deploy.deployment(graph, sizes, Request(gpu=gpus.gpu_named("h100"), kv_dtype="fp8"))
    assert found["weights"] == {"scheme": "bfloat16", "bytes": 2 * 7_241_732_096}
    window = 32 * 8 * 128 * 2 * 4095  # layers × key/value heads × head size × (key + value) × the window's tokens
    assert found["kv_cache"]["bytes"] == [window, window]
    assert found["fits"] == [True, True] and found["max_seq_len"] > 32768
    assert any("past the model's 32,768 positions" in note for note in notes)
    assert found["decode_tokens_per_s_bound"][0] == 3.35e12 / (2 * 7_241_732_096 + window)
    assert assumed["gpu"]["source"] == "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM"


def test_the_memory_curve_crosses_the_gpu_where_the_longest_context_ends() -> None:
    graph = graph_of("qwen2-sliding")
    sizes = _sizes(graph, (20,), batch=2)[0]
    gpu = gpus.custom_gpu(0.004, 100, None)
    curve = deploy.memory_curve(graph, sizes, Request(gpu=gpu, overhead_bytes=1000))
    longest = curve["max_seq_len"]
    assert longest is not None and curve["lengths"][-1] >= 2 * longest
    totals = [sum(part[i] for part in curve["parts"].values()) for i in range(len(curve["lengths"]))]
    for length, total in zip(curve["lengths"], totals):
        assert (total <= gpu.memory_bytes) == (length <= longest), length
    assert list(curve["parts"]) == ["weights (float32)", "KV cache (float32)", "activations (float32)", "overhead"]


def test_report_draws_the_memory_figure_only_for_a_gpu_named_and_the_same_bytes_every_run(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from bertgraph.cli import main
    from tests.generation_runs import config_dir

    pytest.importorskip("matplotlib")
    folder = str(config_dir("llama"))
    plain = tmp_path / "plain.md"
    assert main(["report", folder, "--head", "causal-lm", "-o", str(plain)]) == 0
    assert not (tmp_path / "plain-memory.png").exists()
    assert "| deployment |" in plain.read_text() and "No GPU named" in plain.read_text()
    images = []
    for run in range(2):
        out = tmp_path / f"run{run}" / "llama.md"
        out.parent.mkdir()
        argv = ["report", folder, "--head", "causal-lm", "--gpu", "T4", "--kv-dtype", "fp8", "-o", str(out)]
        assert main(argv) == 0
        images.append((out.parent / "llama-memory.png").read_bytes())
        text = out.read_text()
        assert "![Memory by part against context length, with the GPU's memory](llama-memory.png)" in text
        assert "| fits T4 16GB (16.0 GiB) |" in text and "KV cache (float8\\_e4m3fn)" in text
    capsys.readouterr()
    assert images[0] == images[1] and images[0].startswith(b"\x89PNG")
