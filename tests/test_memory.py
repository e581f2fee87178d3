"""Peak activation memory against a measured CPU forward pass; training arithmetic.

What is compared: the estimate frees every tensor after its last use. The measured run is
the model's exported program (``torch.export``, real random weights, on the CPU) executed
by the code torch.fx generates for it, which frees each value after its last use too;
a TorchDispatchMode (:mod:`tests.live_storage`) tracks every tensor storage the ops
create, leaving out parameters, buffers and inputs. HF's own ``forward`` keeps some
tensors alive longer through Python locals, so it peaks higher; that gap is the
interpreter's, not the model's, and is reported, not asserted away.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import networkx as nx
import pytest
import torch

from bertgraph.api import Architecture
from bertgraph.graph import costtable, memory
from bertgraph.graph.poly import Poly
from bertgraph.model import ModelSpec, build_model, example_inputs, resolve
from tests.live_storage import peak_bytes

TOLERANCE = 0.05


@functools.lru_cache(maxsize=1)
def _real_model(model_name: str) -> torch.nn.Module:
    """Seeded random weights on the CPU, built once for the sizes measured (the weights do not change the peak)."""
    return build_model(resolve(model_name), weights=True)


def measured(model_name: str, batch: int, seq: int) -> tuple[int, int]:
    """Peak live bytes of a real CPU forward pass: the exported program's, and HF's own module's."""
    spec = resolve(model_name, batch=batch, seq_len=seq)
    model = _real_model(model_name)
    inputs = example_inputs(spec, device="cpu", shape=(batch, seq))
    program = torch.export.export(model, (), inputs, strict=False)
    exported, _ = peak_bytes(program.module(), inputs)
    module, _ = peak_bytes(model, inputs)
    return exported, module


@pytest.mark.parametrize(("batch", "seq"), [(1, 13), (2, 64)])
def test_peak_of_a_small_model_matches_a_cpu_run(traced: Callable[..., Architecture], batch: int, seq: int) -> None:
    estimate = memory.peak_activation(traced("bert-tiny").graph, {"batch": batch, "seq": seq}).bytes
    exported, module = measured("bert-tiny", batch, seq)
    assert abs(estimate - exported) <= TOLERANCE * exported, (estimate, exported)
    assert module >= exported


@pytest.mark.slow
@pytest.mark.parametrize(("batch", "seq"), [(1, 128), (2, 64), (1, 512)])
def test_peak_of_bert_base_matches_a_cpu_run(
    traced: Callable[..., Architecture], batch: int, seq: int, capsys: pytest.CaptureFixture[str]
) -> None:
    peak = memory.peak_activation(traced("bert-base-uncased").graph, {"batch": batch, "seq": seq})
    exported, module = measured("bert-base-uncased", batch, seq)
    with capsys.disabled():
        print(
            f"\nbert-base b={batch} s={seq}: estimate {peak.bytes:,} at {peak.node}; "
            f"exported program {exported:,}; HF module {module:,}"
        )
    assert abs(peak.bytes - exported) <= TOLERANCE * exported
    assert peak.bytes == exported  # in fact to the byte, as the README says
    assert module >= exported


@pytest.mark.parametrize("model_type", ["gpt2", "t5", "modernbert"])
@pytest.mark.parametrize(("batch", "seq", "tgt"), [(1, 13, 7), (2, 40, 23), (1, 64, 64)])
def test_peak_of_other_families_matches_a_cpu_run(
    model_type: str, batch: int, seq: int, tgt: int, tiny_graph: Callable[[str, str], tuple[ModelSpec, nx.DiGraph]]
) -> None:
    """A decoder-only, an encoder-decoder with its own decoder length, and ModernBERT's sliding-window masks.

    At the longer sizes ModernBERT peaks inside attention, where the CPU kernel holds the
    float copy of its boolean mask and the log-sum-exp of every row (``memory.transient``).
    """
    spec, graph = tiny_graph(model_type, "base")
    sizes = {name: value for name, value in {"batch": batch, "seq": seq, "tgt": tgt}.items() if name in spec.dim_names}
    estimate = memory.peak_activation(graph, sizes).bytes
    model = build_model(spec, weights=True)
    inputs = example_inputs(spec, device="cpu", shape=tuple(sizes[name] for name in spec.dim_names))
    exported, _ = peak_bytes(torch.export.export(model, (), inputs, strict=False).module(), inputs)
    assert abs(estimate - exported) <= TOLERANCE * exported, (estimate, exported)


def test_attention_holds_a_float_mask_and_row_statistics_while_it_runs(
    tiny_graph: Callable[[str, str], tuple[ModelSpec, nx.DiGraph]],
) -> None:
    _, graph = tiny_graph("modernbert", "base")
    node = "layers.1.attn:scaled_dot_product_attention"
    floats, rows = memory.transient(graph, node)
    assert str(floats) == "batch*seq**2"  # the [batch, 1, seq, seq] boolean mask, as float
    assert str(rows) == "4*batch*seq"  # [batch, heads, seq]
    assert memory.transient(graph, "layers.1.mlp.Wi:linear") == (Poly(), Poly())


def test_peak_is_computed_per_size_and_dtype(traced: Callable[..., Architecture]) -> None:
    graph = traced("bert-base-uncased").graph
    short = memory.peak_activation(graph, {"batch": 1, "seq": 128})
    assert short.node.endswith("intermediate_act_fn:gelu")
    assert memory.peak_activation(graph, {"batch": 1, "seq": 512}).bytes > 4 * short.bytes - 1
    half = memory.peak_activation(graph, {"batch": 1, "seq": 128}, dtype="float16")
    assert half.bytes < short.bytes  # float tensors at two bytes, masks and ids unchanged


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_peak_at_a_dtype_equals_the_peak_of_the_model_built_in_it(
    half: str, traced: Callable[..., Architecture]
) -> None:
    """Counting floats at ``dtype`` is what building the model in it gives: ids and masks keep their widths."""
    single = traced("bert-tiny").graph
    built = traced("bert-tiny", dtype=half).graph
    for sizes in ({"batch": 1, "seq": 128}, {"batch": 2, "seq": 16}):
        assert memory.peak_activation(single, sizes, dtype=half) == memory.peak_activation(built, sizes)


def test_inputs_and_parameters_are_counted_apart(traced: Callable[..., Architecture]) -> None:
    graph = traced("bert-base-uncased").graph
    assert memory.input_bytes(graph, {"batch": 1, "seq": 128}) == 3 * 128 * 8  # three int64 [1, 128]
    assert memory.parameter_bytes(graph) == 109_482_240 * 4
    assert memory.parameter_bytes(graph, "bfloat16") == 109_482_240 * 2


def test_training_memory_arithmetic(traced: Callable[..., Architecture]) -> None:
    graph = traced("bert-base-uncased").graph
    single = memory.training_memory(graph, "float32")
    assert [row["bytes_per_parameter"] for row in single["rows"]] == [4, 4, 4, 4]
    assert single["total"] == 16 * 109_482_240
    mixed = memory.training_memory(graph, "bfloat16")
    assert [row["bytes_per_parameter"] for row in mixed["rows"]] == [2, 2, 4, 4, 4]
    assert mixed["total"] == 16 * 109_482_240  # half-precision copies plus float32 master weights and moments
    with pytest.raises(ValueError, match="float8"):
        memory.training_memory(graph, "float8")


@pytest.mark.parametrize(("batch", "seq"), [(1, 64), (3, 31)])
def test_peak_with_eager_attention_counts_the_score_matrices(
    traced: Callable[..., Architecture], batch: int, seq: int
) -> None:
    """``--attention eager`` writes [batch, heads, seq, seq] scores; the estimate follows a real eager run."""
    import transformers

    from bertgraph.model.presets import preset_config

    graph = traced("bert-tiny", attention="eager").graph
    assert costtable.attention_implementation(graph) == "eager"
    assert costtable.attention_implementation(traced("bert-tiny").graph) == "sdpa"
    config = transformers.BertConfig(**preset_config("bert-tiny"), attn_implementation="eager")
    estimate = memory.peak_activation(graph, {"batch": batch, "seq": seq}).bytes
    assert estimate > memory.peak_activation(traced("bert-tiny").graph, {"batch": batch, "seq": seq}).bytes
    torch.manual_seed(0)
    real = transformers.BertModel(config).eval()
    inputs = _ids_and_mask(batch, seq, "cpu")
    exported, _ = peak_bytes(torch.export.export(real, (), inputs, strict=False).module(), inputs)
    assert abs(estimate - exported) <= TOLERANCE * exported, (estimate, exported)
    scores = batch * 2 * seq * seq * 4  # one layer's attention probabilities, float32
    assert estimate > scores


def test_attention_option_is_in_the_cache_key_and_refused_where_it_cannot_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from bertgraph import cache, cli
    from bertgraph.errors import ConfigError

    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    assert cache.key(resolve("bert-tiny", attention="eager")) != cache.key(resolve("bert-tiny"))
    for attention in (None, "eager", None):  # served from the cache the second time, each as asked
        chosen = ["--attention", attention] if attention else []
        argv = ["cost", "bert-tiny", "--format", "json", "--depth", "0", *chosen]
        assert cli.main(argv) == 0
        assert json.loads(capsys.readouterr().out)["assumptions"]["attention"] == (attention or "sdpa")
    with pytest.raises(ConfigError, match="eager attention only; leave out --attention or use --attention eager"):
        resolve("deberta-v3-base", attention="sdpa")
    with pytest.raises(ConfigError, match="unknown attention 'flash'"):
        resolve("bert-tiny", attention="flash")
    onnx_file = tmp_path / "m.onnx"
    onnx_file.write_bytes(b"")
    assert cli.main(["summary", str(onnx_file), "--attention", "eager"]) == 2
    assert "--attention" in capsys.readouterr().err


def _ids_and_mask(batch: int, seq: int, device: str) -> dict[str, torch.Tensor]:
    ids = torch.randint(0, 1000, (batch, seq), device=device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def test_views_allocate_nothing_and_keep_their_storage_alive(traced: Callable[..., Architecture]) -> None:
    from bertgraph.graph import schema as g

    graph = traced("bert-tiny").graph
    found, unknown = memory.allocations(graph)
    owners = {allocation.node: allocation for allocation in found}
    assert unknown == []
    assert not any(graph.nodes[node].get(g.ALIAS) for node in owners)  # views and eval dropout write nothing
    position = {node: index for index, node in enumerate(g.ops_in_order(graph))}
    layer = "encoder.layer.0"
    # The dense output is read through its dropout (an alias) by the residual add: it lives until then.
    dense = owners[f"{layer}.output.dense:linear"]
    assert f"{layer}.output.dropout:dropout" not in owners
    assert dense.end == position[f"{layer}.output:add"]
    # Attention's output is read through reshape and transpose (views) by the contiguous copy.
    attention = owners[f"{layer}.attention.self:scaled_dot_product_attention"]
    assert attention.end == position[f"{layer}.attention.self:contiguous"]
    # A model output lives to the end.
    assert owners["pooler.activation:tanh"].end == len(position)
