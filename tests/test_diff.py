"""Two models compared by role: config, architecture in words, parameters per part, cost, tensors, figure."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bertgraph.api import compare
from bertgraph.cli import main
from bertgraph.graph import stats
from bertgraph.graph.compare import Comparison
from bertgraph.model import resolve
from bertgraph.render import diff as tables
from bertgraph.render import diff_figure
from tests.family_configs import TINY, UNEVEN

TINY_BERT = TINY["bert"]
TINY_GPT2 = {"model_type": "gpt2", "vocab_size": 101, "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64}
TINY_LLAMA = {
    "model_type": "llama",
    "vocab_size": 101,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 48,
    "max_position_embeddings": 64,
}
# An encoder-decoder of 4 encoder and 3 decoder layers: the stacks are paired by kind, not by count.
TINY_T5 = {"model_type": "t5", **UNEVEN["t5-4+3"][1]}


def config_dir(tmp_path_factory: pytest.TempPathFactory, name: str, config: dict[str, Any]) -> Path:
    return config_dir_at(tmp_path_factory.mktemp(name), config)


def config_dir_at(folder: Path, config: dict[str, Any]) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Folders holding the tiny configs above."""
    found = {"bert": TINY_BERT, "gpt2": TINY_GPT2, "llama": TINY_LLAMA, "t5": TINY_T5}
    return {name: config_dir(tmp_path_factory, name, config) for name, config in found.items()}


def own_total(reference: str, head: str = "base") -> int:
    """The model's own parameter count: transformers' module built on the meta device."""
    from bertgraph.model.build import build_model

    spec = resolve(reference, head)
    return sum(p.numel() for p in build_model(spec).parameters())


def part_sums(comparison: Comparison) -> list[int]:
    return [sum(row["params"][side] or 0 for row in comparison.parts) for side in (0, 1)]


# --- presets: BERT and RoBERTa are one architecture -------------------------------------------------------


@pytest.fixture(scope="module")
def bert_roberta(once: Callable[..., Any]) -> Comparison:
    return once(("diff", "bert", "roberta"), lambda: compare("bert-base-uncased", "roberta-base"))


def test_bert_and_roberta_differ_in_embeddings_only(bert_roberta: Comparison, traced: Any) -> None:
    """No aspect differs; the config's differences are the embeddings' (vocabulary, positions, token
    types) and their conventions; only the embeddings hold other parameter counts."""
    data = bert_roberta.contract()
    assert data["architecture"] == []
    fields = {row["field"]: row["values"] for row in data["config"]}
    assert fields["vocab_size"] == [30522, 50265]
    assert fields["max_position_embeddings"] == [512, 514]
    assert fields["type_vocab_size"] == [2, 1]
    assert set(fields) == {
        "vocab_size",
        "max_position_embeddings",
        "type_vocab_size",
        "model_type",
        "layer_norm_eps",
        "pad_token_id",
        "bos_token_id",
        "eos_token_id",
    }
    differing = [row["part"] for row in data["parts"] if row["params"][0] != row["params"][1]]
    assert differing == ["embeddings"]
    # the fixed facts of bert-base-uncased, and each total the model's own
    assert data["totals"][0] == 109_482_240
    assert data["totals"][1] == stats.parameter_stats(traced("roberta-base").graph)["total"]
    parts = {row["part"]: row["params"][0] for row in data["parts"]}
    assert parts["embeddings"] == 23_837_184 and parts["pooler"] == 590_592
    assert part_sums(bert_roberta) == data["totals"]
    assert "tensors" not in data  # presets have no weights


def test_json_is_exactly_the_contract(bert_roberta: Comparison) -> None:
    data = json.loads(tables.tables_text(bert_roberta, "json"))
    assert list(data) == ["models", "totals", "config", "architecture", "parts", "cost"]
    cost = data["cost"]
    assert (cost["batch"], cost["seq"], cost["dtypes"]) == (1, 128, ["float32", "float32"])
    assert cost["flops_per_token"] == bert_roberta.cost["flops_per_token"] and cost["flops_per_token"][0] > 0
    assert cost["kv_cache_bytes_per_token"] == [None, None]  # encoders cache nothing
    assert all(isinstance(value, int) and value > 0 for value in cost["peak_activation_bytes"])
    assert data["models"] == ["bert-base-uncased", "roberta-base"]
    assert all(list(row) == ["field", "values"] and len(row["values"]) == 2 for row in data["config"])
    assert all(list(row) == ["part", "params"] and len(row["params"]) == 2 for row in data["parts"])


def test_figure_marks_only_the_embeddings(bert_roberta: Comparison) -> None:
    assert diff_figure.marks(bert_roberta) == ({"m0c0emb"}, {"m1c0emb"})


@pytest.mark.parametrize("name", ["BertConfig", "RobertaConfig", "GPT2Config", "LlamaConfig", "T5Config", "BartConfig"])
def test_common_defaults_are_every_config_class_default(name: str) -> None:
    """A field a config leaves out is read as its shared default: each class that has the field defaults to it."""
    import transformers

    from bertgraph.model.fields import COMMON_DEFAULTS

    made = getattr(transformers, name)()
    for key, value in COMMON_DEFAULTS.items():
        if key == "dtype":
            assert made.dtype is None  # unset: the model is built in float32
        elif hasattr(made, key):
            assert getattr(made, key) == value, key


def test_a_field_left_to_its_class_default_is_no_difference(tmp_path: Path) -> None:
    """Between two configs of one type a field one of them leaves out is not claimed to differ; between
    two types it is (the classes have other fields); a shared default counts as set."""
    from bertgraph.graph.compare import Side, config_rows

    sizes = {"layers": "num_hidden_layers"}
    bert = {"model_type": "bert", "num_hidden_layers": 2}
    saved = {**bert, "hidden_dropout_prob": 0.1, "is_decoder": False, "use_cache": False}
    rows = config_rows(Side("a", None, bert, sizes), Side("b", None, saved, sizes))  # type: ignore[arg-type]
    assert rows == [{"field": "use_cache", "values": [None, False]}]
    roberta = {**saved, "model_type": "roberta"}
    rows = config_rows(Side("a", None, bert, sizes), Side("b", None, roberta, sizes))  # type: ignore[arg-type]
    assert [row["field"] for row in rows] == ["model_type", "hidden_dropout_prob", "use_cache"]


# --- aligned by role across families ---------------------------------------------------------------------


def test_gpt2_and_llama_in_words_a_reader_knows(tiny: dict[str, Path]) -> None:
    comparison = compare(str(tiny["gpt2"]), str(tiny["llama"]))
    aspects = {row["aspect"]: row["values"] for row in comparison.architecture}
    # 4 query heads and 2 layers each: no difference there
    assert aspects == {
        "kv heads": ["4", "2"],
        "positions": ["absolute", "rotary"],
        "norm": ["LayerNorm", "RMSNorm"],
        "activation": ["GELU (tanh)", "SwiGLU"],
        "bias": ["attention, FFN, norms", "none"],
    }
    totals = [own_total(str(tiny["gpt2"])), own_total(str(tiny["llama"]))]
    assert comparison.totals == totals == part_sums(comparison)


def test_norms_of_queries_and_keys_are_no_sandwich(tmp_path: Path) -> None:
    """Qwen3 normalises queries and keys inside attention: a q/k norm, not a norm after the sublayer."""
    qwen3 = config_dir_at(tmp_path / "qwen3", {**TINY_LLAMA, "model_type": "qwen3", "head_dim": 8})
    llama = config_dir_at(tmp_path / "llama", TINY_LLAMA)
    comparison = compare(str(qwen3), str(llama))
    aspects = {row["aspect"]: row["values"] for row in comparison.architecture}
    assert aspects["q/k norm"] == ["RMSNorm", "none"]
    assert "norm placement" not in aspects and "norm" not in aspects
    # the schematic says the q/k norm inside attention: that step, and only it, is outlined on both sides
    steps = [[s.role for s in model.stacks[0].column.steps] for model in comparison.words]
    assert steps[0] == steps[1]
    attention = f"s{steps[0].index('attention')}"
    assert diff_figure.marks(comparison) == ({f"m0c0{attention}"}, {f"m1c0{attention}"})


def test_a_repeating_attention_pattern_in_words(tmp_path: Path) -> None:
    """ModernBERT's global layer every third, the others sliding: the pattern said as it repeats."""
    modern = config_dir_at(tmp_path / "modern", TINY["modernbert"])
    bert = config_dir_at(tmp_path / "bert", TINY_BERT)
    comparison = compare(str(bert), str(modern))
    aspects = {row["aspect"]: row["values"] for row in comparison.architecture}
    assert aspects["attention"] == ["bidirectional", "bidirectional, 2 × sliding-window(8), repeating"]
    assert aspects["activation"] == ["GELU", "GeGLU"]
    assert aspects["norm placement"] == [
        "post-norm, norm after the embeddings",
        "pre-norm, norm after the embeddings, final norm",
    ]
    assert comparison.totals == [own_total(str(bert)), own_total(str(modern))] == part_sums(comparison)


def test_bert_layer_i_with_gpt2_layer_i(tiny: dict[str, Path]) -> None:
    """BERT's encoder.layer.i lines up with GPT-2's h.i: its 3 layers against 2, the third one-sided;
    attention, feed-forward and norms inside each; the pooler BERT's alone, the final norm GPT-2's."""
    comparison = compare(str(tiny["bert"]), str(tiny["gpt2"]))
    parts = {row["part"]: row["params"] for row in comparison.parts}
    hidden = 32
    attention = 4 * (hidden * hidden + hidden)
    assert parts["layers 0–1 · attention"] == [2 * attention, 2 * attention]
    assert parts["layer 2 · attention"] == [attention, None]
    assert parts["layers 0–1 · norms"] == [2 * 4 * hidden, 2 * 4 * hidden]
    assert parts["pooler"] == [hidden * hidden + hidden, None]
    assert parts["final norm"] == [None, 2 * hidden]
    aspects = {row["aspect"]: row["values"] for row in comparison.architecture}
    assert aspects["structure"] == ["encoder-only", "decoder-only"]
    assert aspects["attention"] == ["bidirectional", "causal"]
    assert aspects["norm placement"] == ["post-norm, norm after the embeddings", "pre-norm, final norm"]
    assert aspects["layers"] == ["3", "2"]
    assert aspects["pooler"] == ["yes", "no"] and aspects["token types"] == ["yes", "no"]
    assert comparison.totals == [own_total(str(tiny["bert"])), own_total(str(tiny["gpt2"]))] == part_sums(comparison)


def test_an_encoder_decoder_pairs_stacks_by_kind(tiny: dict[str, Path]) -> None:
    """A T5 of 4 encoder and 3 decoder layers against BERT's 3: the encoders paired, the decoder alone."""
    comparison = compare(str(tiny["bert"]), str(tiny["t5"]))
    aspects = {row["aspect"]: row["values"] for row in comparison.architecture}
    assert aspects["structure"] == ["encoder-only", "encoder-decoder"]
    assert aspects["encoder layers"] == ["3", "4"]
    assert aspects["decoder layers"] == ["none", "3"]
    assert aspects["encoder norm"] == ["LayerNorm", "RMSNorm"]
    assert aspects["encoder positions"] == ["absolute", "relative-buckets"]
    parts = {row["part"]: row["params"] for row in comparison.parts}
    assert parts["encoder layer 3 · feed-forward"][0] is None
    assert parts["decoder layers 1–2 · cross-attention"][0] is None
    assert parts["decoder layers 1–2 · cross-attention"][1] == 2 * 4 * 32 * 32
    assert comparison.totals == [own_total(str(tiny["bert"])), own_total(str(tiny["t5"]))] == part_sums(comparison)


def test_a_heads_parameters_are_the_head_part(tiny: dict[str, Path]) -> None:
    comparison = compare(str(tiny["bert"]), str(tiny["bert"]), head_b="sequence-classification")
    assert comparison.models == [tiny["bert"].name, f"{tiny['bert'].name} (sequence-classification)"]
    differing = [row for row in comparison.parts if row["params"][0] != row["params"][1]]
    assert differing == [{"part": "head", "params": [None, 32 * 2 + 2]}]
    assert comparison.totals[1] == own_total(str(tiny["bert"]), "sequence-classification")


# --- cost -------------------------------------------------------------------------------------------------


def test_cost_per_token_is_the_cost_tables(tiny: dict[str, Path]) -> None:
    """FLOPs, KV bytes and the peak equal ``cost``'s at the same size, and the matrix products a real
    forward pass runs (FlopCounterMode) are the FLOPs' matmul share."""
    from bertgraph.api import trace
    from bertgraph.graph import costbase, costtable
    from bertgraph.model.build import build_model, example_inputs
    from tests.exported import flop_counter

    comparison = compare(str(tiny["bert"]), str(tiny["llama"]), seq_len=16, batch=3)
    for side, name in enumerate(("bert", "llama")):
        arch = trace(str(tiny[name]))
        report = costtable.cost_report(arch.graph, [costbase.sizes_for(arch.graph, seq=16, batch=3)])
        tokens = 3 * 16
        assert comparison.cost["flops_per_token"][side] * tokens == report["total"]["flops"]["values"][0]
        assert comparison.cost["peak_activation_bytes"][side] == report["memory"]["peak_activation_bytes"][0]
        kv = report["total"].get("kv_cache_bytes")
        expected = kv["values"][0] / tokens if kv else None
        assert comparison.cost["kv_cache_bytes_per_token"][side] == expected
        spec = resolve(str(tiny[name]), batch=3, seq_len=16)
        real = flop_counter(build_model(spec, weights=True), example_inputs(spec, device="cpu"))
        other = report["total"]["other_flops"]["values"][0]
        assert comparison.cost["flops_per_token"][side] * tokens - other == real
    assert json.loads(tables.tables_text(comparison, "json"))["cost"] == comparison.cost  # the JSON says the same
    assert comparison.cost["kv_cache_bytes_per_token"][0] is None  # an encoder caches nothing
    # LLaMA: 2 layers × 2 kv heads × (8 + 8) per token × 4 bytes
    assert comparison.cost["kv_cache_bytes_per_token"][1] == 2 * 2 * 16 * 4


# --- checkpoints ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny BERT saved with save_pretrained, a fine-tuned copy with three tensors changed, one with a
    resized vocabulary, one with a classification head (the same backbone), and the base sharded."""
    import torch
    import transformers

    torch.manual_seed(7)
    config = transformers.BertConfig(**{k: v for k, v in TINY_BERT.items() if k != "model_type"})
    base = transformers.BertModel(config).eval()
    folders = {name: tmp_path_factory.mktemp(name) for name in ("base", "tuned", "resized", "head", "sharded")}
    base.save_pretrained(folders["base"])
    base.save_pretrained(folders["sharded"], max_shard_size="20KB")
    head = transformers.BertForSequenceClassification(transformers.BertConfig(**config.to_dict(), num_labels=3))
    head.bert.load_state_dict(base.state_dict())
    head.save_pretrained(folders["head"])
    with torch.no_grad():
        base.encoder.layer[1].attention.self.query.weight[0, 0] += 1
        base.encoder.layer[2].output.dense.weight[-1, -1] -= 0.5
        base.pooler.dense.bias[3] += 1
    base.save_pretrained(folders["tuned"])
    base.resize_token_embeddings(120, mean_resizing=False)
    base.save_pretrained(folders["resized"])
    assert (folders["sharded"] / "model.safetensors.index.json").is_file()
    return folders


def test_a_fine_tuned_copy_changes_three_tensors(checkpoints: dict[str, Path]) -> None:
    comparison = compare(str(checkpoints["base"]), str(checkpoints["tuned"]))
    tensors = comparison.contract()["tensors"]
    assert [entry["tensor"] for entry in tensors["changed"]] == [
        "encoder.layer.1.attention.self.query.weight",
        "encoder.layer.2.output.dense.weight",
        "pooler.dense.bias",
    ]
    assert tensors["reshaped"] == tensors["added"] == tensors["removed"] == []
    from safetensors import safe_open

    with safe_open(str(checkpoints["base"] / "model.safetensors"), "np") as handle:
        count = len(list(handle.keys()))
    assert tensors["same"] == count - 3
    assert comparison.config == [] and comparison.architecture == []


def test_a_resized_vocabulary_is_a_reshaped_tensor(checkpoints: dict[str, Path]) -> None:
    comparison = compare(str(checkpoints["tuned"]), str(checkpoints["resized"]))
    tensors = comparison.tensors
    assert tensors is not None
    assert tensors["reshaped"] == [{"tensor": "embeddings.word_embeddings.weight", "shapes": [[99, 32], [120, 32]]}]
    assert tensors["changed"] == []
    assert comparison.config == [{"field": "vocab_size", "values": [99, 120]}]
    assert [row["part"] for row in comparison.parts if row["params"][0] != row["params"][1]] == ["embeddings"]


def test_an_added_head_is_added_tensors(checkpoints: dict[str, Path]) -> None:
    """The head model names its backbone's tensors bert.…: they line up with the base model's."""
    comparison = compare(str(checkpoints["base"]), str(checkpoints["head"]), head_b="sequence-classification")
    tensors = comparison.tensors
    assert tensors is not None
    assert tensors["added"] == [
        {"tensor": "classifier.bias", "shape": [3], "dtype": "F32"},
        {"tensor": "classifier.weight", "shape": [3, 32], "dtype": "F32"},
    ]
    assert tensors["changed"] == tensors["removed"] == tensors["reshaped"] == []
    assert tensors["same"] > 0


def test_sharded_and_whole_checkpoints_are_the_same(checkpoints: dict[str, Path]) -> None:
    from bertgraph.model.tensor_diff import compare_checkpoints

    whole, sharded = checkpoints["base"] / "model.safetensors", checkpoints["sharded"] / "model.safetensors.index.json"
    found = compare_checkpoints(whole, sharded)
    assert found["changed"] == found["reshaped"] == found["added"] == found["removed"] == []
    assert found["same"] > 10


def test_a_small_buffer_streams_to_the_same_answer(checkpoints: dict[str, Path]) -> None:
    """Hashed through a 7-byte buffer (chunks that straddle every tensor's end) or a large one, the same."""
    from bertgraph.model.tensor_diff import compare_checkpoints

    base, tuned = checkpoints["base"] / "model.safetensors", checkpoints["tuned"] / "model.safetensors"
    assert compare_checkpoints(base, tuned, buffer_bytes=7) == compare_checkpoints(base, tuned)


def _safetensors(path: Path, tensors: dict[str, bytes]) -> None:
    """A float32 safetensors file written by hand: one-dimensional tensors of the given bytes."""
    import struct

    header: dict[str, Any] = {}
    offset = 0
    for name, data in tensors.items():
        header[name] = {"dtype": "F32", "shape": [len(data) // 4], "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(tensors.values()))


def test_one_byte_at_a_chunks_edge_is_a_change(tmp_path: Path) -> None:
    from bertgraph.model.tensor_diff import compare_checkpoints

    data = bytes(range(256)) * 64  # 16 KiB
    changed = bytearray(data)
    changed[4095] ^= 1  # the last byte of the first 4 KiB chunk
    _safetensors(tmp_path / "a.safetensors", {"x": data, "y": data})
    _safetensors(tmp_path / "b.safetensors", {"x": bytes(changed), "y": data})
    found = compare_checkpoints(tmp_path / "a.safetensors", tmp_path / "b.safetensors", buffer_bytes=4096)
    assert [entry["tensor"] for entry in found["changed"]] == ["x"] and found["same"] == 1


def test_hashing_holds_one_buffer_however_large_the_tensor(tmp_path: Path) -> None:
    """An 8 MiB tensor hashed through a 64 KiB buffer allocates no more than that buffer and a little."""
    import tracemalloc

    from bertgraph.model.tensor_diff import digests, locate

    _safetensors(tmp_path / "big.safetensors", {"w": b"\x01" * (8 * 2**20)})
    tensors = locate(tmp_path / "big.safetensors")
    tracemalloc.start()
    try:
        found = digests(tensors, ["w"], buffer_bytes=64 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found["w"] == __import__("hashlib").sha256(b"\x01" * (8 * 2**20)).hexdigest()
    assert peak < 256 * 1024, peak


def test_tensors_only_when_both_sides_have_weights(checkpoints: dict[str, Path], tiny: dict[str, Path]) -> None:
    data = compare(str(checkpoints["base"]), str(tiny["bert"])).contract()
    assert "tensors" not in data and data["config"] == []


# --- the command line ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["diff", "bert-tiny", "gpt2", "--head", "base", "--head", "causal-lm"], "--head names the head of both, once"),
        (["diff", "bert-tiny", "--head-a", "masked-lm"], "--head-a and --head-b name the heads of two models"),
        (["diff", "bert-tiny", "gpt2", "--head", "base", "--head-b", "causal-lm"], "--head-b, not both"),
        (["diff", "bert-tiny", "bert-bsae-uncased"], "unknown model 'bert-bsae-uncased'"),
        (["diff", "bert-tiny", "gpt2", "t5-small"], "diff compares two models, not 3"),
        (["diff", "bert-tiny", "gpt2", "--format", "png"], "a png figure is binary: write it to a file"),
        (["diff", "bert-tiny", "gpt2", "--head", "causal-lm"], "bert-tiny is a bert model, which has no causal-lm"),
        (["diff", "bert-tiny", "--head", "base", "--head", "masked-lm", "-o", "x.svg"], "a diff figure draws two"),
        (["diff", "bert-tiny", "gpt2", "--seq-len", "600"], "--seq-len 600 is above max_position_embeddings 512"),
        (["diff", "m.onnx", "gpt2"], "m.onnx is an .onnx file: give its config"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("bertgraph: error: ") and message in captured.err, captured.err
    assert list(tmp_path.iterdir()) == []


def test_two_heads_of_one_model_as_before(capsys: pytest.CaptureFixture[str], traced: Any) -> None:
    """``diff MODEL --head X --head Y`` prints the head diff it always printed."""
    from bertgraph.render import text

    assert main(["diff", "bert-tiny", "--head", "base", "--head", "masked-lm"]) == 0
    expected = stats.diff(traced("bert-tiny").graph, traced("bert-tiny", "masked-lm").graph)
    assert capsys.readouterr().out == "\n".join(text.generate_diff(expected)) + "\n"


def test_every_format_from_the_command_line(tiny: dict[str, Path], tmp_path: Path, dot_binary: str) -> None:
    """Text by default; .md, .json, .svg, .dot, .mmd and .html by suffix; the same file twice over."""
    a, b = str(tiny["gpt2"]), str(tiny["llama"])
    result = subprocess.run(
        [sys.executable, "-m", "bertgraph", "diff", a, b], capture_output=True, text=True, check=True
    )
    assert result.stdout.startswith(f"{tiny['gpt2'].name} vs {tiny['llama'].name} · ")
    assert "architecture: what differs" in result.stdout and "SwiGLU" in result.stdout
    for suffix in (".md", ".json", ".svg", ".dot", ".mmd", ".html"):
        first, second = tmp_path / f"one{suffix}", tmp_path / f"two{suffix}"
        assert main(["diff", a, b, "-o", str(first)]) == 0
        assert main(["diff", a, b, "-o", str(second)]) == 0
        assert first.read_bytes() == second.read_bytes(), suffix
    assert json.loads((tmp_path / "one.json").read_text())["architecture"]
    assert (tmp_path / "one.md").read_text().startswith("## ")
    assert "```" not in (tmp_path / "one.mmd").read_text() and "flowchart TB" in (tmp_path / "one.mmd").read_text()


# --- the figure ---------------------------------------------------------------------------------------------


def _layout(source: str) -> dict[str, Any]:
    return json.loads(subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, check=True).stdout)


def test_figure_reads_at_8px_with_the_first_model_left(tiny: dict[str, Path], dot_binary: str) -> None:
    """Read back from Graphviz's layout: every text at least 8 px on an 800 px page, model A's columns
    left of B's, the outlined nodes the marks, and the legend naming the outline."""
    comparison = compare(str(tiny["gpt2"]), str(tiny["t5"]))
    source = diff_figure.dot_text(comparison)
    laid = _layout(source)
    width = float(laid["bb"].split(",")[2])
    sizes = [float(item.get("fontsize", 14)) for item in laid["objects"]] + [float(laid.get("fontsize", 14))]
    assert min(sizes) * 800 / width >= 8
    at = {item["name"]: float(item["pos"].split(",")[0]) for item in laid["objects"] if "pos" in item}
    assert max(x for name, x in at.items() if name.startswith("m0")) < min(
        x for name, x in at.items() if name.startswith("m1")
    )
    outlined = {item["name"] for item in laid["objects"] if item.get("color") == diff_figure.DIFFERS and "pos" in item}
    marked = set().union(*diff_figure.marks(comparison))
    assert outlined == {name for name in marked if not name.endswith("layer")}
    frames = {item["name"] for item in laid["objects"] if item.get("color") == diff_figure.DIFFERS and "bb" in item}
    assert frames == {f"cluster_{name}" for name in marked if name.endswith("layer")}
    assert "differs from the other model" in laid["label"]
    # GPT-2's one decoder is paired with T5's decoder: the encoder stands alone, every part of it marked
    assert {"m1c0emb", "m1c0layer", "m1c0fn"} <= marked
    assert {"m0c0s0", "m1c1s0"} & marked  # LayerNorm against RMSNorm, the first step of each


def test_figure_elements_carry_ids_and_the_diagrams_looks(tiny: dict[str, Path], dot_binary: str) -> None:
    """Read back from the SVG: every box, frame and arrow has an id of its own and one class of its kind;
    a box is filled as its role and attention kind are in the diagrams and the schematic."""
    import xml.etree.ElementTree as ET

    from bertgraph.render import style

    svg = diff_figure.figure(compare(str(tiny["gpt2"]), str(tiny["t5"])), "svg")
    ns = "{http://www.w3.org/2000/svg}"
    groups = [g for g in ET.fromstring(svg).iter(f"{ns}g") if str(g.get("class", "")).split()[:1] != ["graph"]]
    ids = [str(g.get("id", "")) for g in groups]
    assert len(ids) == len(set(ids)) and all(ids)
    prefixes = {"node": "role-", "cluster": "cluster-", "edge": "edge-"}
    kinds = style.theme("light")["kinds"]
    looks = {"role-feed-forward": "feed-forward", "role-normalisation": "normalisation", "role-embedding": "embedding"}
    looks |= {"kind-causal": "attention-causal", "kind-bidirectional": "attention-bidirectional"}
    looks |= {"kind-cross": "attention-cross"}
    filled = set()
    for group in groups:
        kind, *classes = str(group.get("class")).split()
        assert len([c for c in classes if c.startswith(prefixes[kind])]) == 1, (group.get("id"), classes)
        look = [looks[c] for c in classes if c in looks]
        if kind == "node" and look:
            fills = {p.get("fill") for p in group.iter() if p.tag in (f"{ns}path", f"{ns}polygon")}
            assert kinds[look[-1]].fill in fills, (group.get("id"), fills)
            filled.add(look[-1])
    assert filled == set(looks.values())


def test_figure_png_and_pdf(tiny: dict[str, Path], dot_binary: str) -> None:
    comparison = compare(str(tiny["bert"]), str(tiny["gpt2"]))
    assert bytes(diff_figure.figure(comparison, "png"))[:8] == b"\x89PNG\r\n\x1a\n"
    assert bytes(diff_figure.figure(comparison, "pdf")).startswith(b"%PDF")


def test_page_escapes_names_and_runs_nothing(tmp_path: Path, dot_binary: str) -> None:
    folder = tmp_path / '<b>"x" & y'
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_BERT))
    comparison = compare(str(folder), "bert-tiny")
    page = str(diff_figure.figure(comparison, "html"))
    assert "<script" not in page and "default-src 'none'" in page
    assert '<b>"x"' not in page and "&lt;b&gt;&quot;x&quot; &amp; y" in page
    assert page.count("<svg") == 1 and "<table>" in page


@pytest.mark.browser
def test_mermaid_figure_as_mermaid_js_lays_it_out(tiny: dict[str, Path]) -> None:
    """Rendered in Chromium: model A left of model B, every arrow downward, the marks outlined."""
    from tests.conftest import require
    from tests.mermaid_browser import browser_available, node_centres, render_mermaid

    reason = browser_available()
    require(reason is None, reason or "")
    comparison = compare(str(tiny["bert"]), str(tiny["gpt2"]))
    text = diff_figure.mermaid_text(comparison)
    (result,) = render_mermaid({"diff": text}).values()
    assert result.ok, result.error
    at = node_centres(result.svg)
    assert at["m0c0emb"][0] < at["m1c0emb"][0]
    edges = re.findall(r"^  (\w+) (?:-->|-\.->|==>) (\w+)$", text, re.MULTILINE)
    assert edges and [(a, b) for a, b in edges if at[a][1] >= at[b][1]] == []
    styled = set(re.findall(r"^  style (\w+) stroke:#d62728", text, re.MULTILINE))
    assert styled == set().union(*diff_figure.marks(comparison))


@pytest.mark.parametrize("name", ["<b onload=x>", 'a|b "q"', "user\u202etxt", "back\\slash %% x", "bell\x07"])
def test_a_hostile_folder_name_is_escaped_everywhere(name: str, tmp_path: Path, dot_binary: str) -> None:
    """A model's name reaches every format escaped for it: no markup, table cell or direction override."""
    from tests.helpers import BIDI_CONTROLS

    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_BERT))
    comparison = compare(str(folder), "bert-tiny")
    outputs = {
        "text": tables.tables_text(comparison, "text"),
        "markdown": tables.tables_text(comparison, "markdown"),
        "mermaid": diff_figure.mermaid_text(comparison).split("---", 2)[2],  # the title is a JSON string, drawn as text
        "svg": bytes(diff_figure.figure(comparison, "svg")).decode(),
        "html": str(diff_figure.figure(comparison, "html")),
    }
    for fmt, written in outputs.items():
        assert not set(BIDI_CONTROLS) & set(written) and "\x07" not in written, fmt
        assert fmt == "text" or "<b onload" not in written, fmt  # a terminal shows markup as text
    # every Markdown table keeps its columns: no row has more unescaped pipes than its header
    tables_found = re.findall(r"(?:^\|.*\n)+", outputs["markdown"], re.MULTILINE)
    assert tables_found and all(
        len({len(re.findall(r"(?<!\\)\|", line)) for line in table.splitlines()}) == 1 for table in tables_found
    )
    assert json.loads(tables.tables_text(comparison, "json"))["models"][0] == name  # JSON keeps every character


def test_an_output_that_is_an_input_is_refused(
    checkpoints: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config = checkpoints["tuned"] / "config.json"
    before = config.read_bytes()
    assert main(["diff", str(checkpoints["base"]), str(checkpoints["tuned"]), "-o", str(config)]) == 1
    assert config.read_bytes() == before and "error" in capsys.readouterr().err
