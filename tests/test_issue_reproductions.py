"""The reproductions of a hostile-but-realistic user's session, each as a test of the command line.

Every case here once ended in data loss, a hang, a wrong answer or "internal error". The tests
use only the command line (``main`` or a subprocess) and files on disk, so they say nothing
about how the fix is built; the generated-input tests (``test_fuzz_inputs.py``) cover each
class of input more widely.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from bertgraph.api import Architecture
from bertgraph.cli import main
from tests.conftest import require
from tests.helpers import one_line_error, rename_modules, run_with_small_disk

BIDI = "\u202e"


def bertgraph(*argv: str, timeout: float = 120, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bertgraph", *argv], capture_output=True, text=True, timeout=timeout, **kwargs
    )


def model_dir(tmp_path: Path, config: str | bytes) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_bytes(config.encode() if isinstance(config, str) else config)
    return folder


TINY = (
    '{"model_type": "bert", "num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2, '
    '"intermediate_size": 512'
)


# --- 1. -o at something that is not a regular file ---------------------------------------------


@pytest.mark.parametrize("command", [["render", "bert-tiny"], ["params", "bert-tiny"]])
def test_output_at_a_device_is_not_replaced(tmp_path: Path, command: list[str], capsys: Any) -> None:
    device = tmp_path / ("null.svg" if command[0] == "render" else "null.txt")  # a name its format may have
    if os.geteuid() == 0:
        os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))  # the reproduction: mknod d/null.svg c 1 3
    else:
        device.symlink_to("/dev/null")
    one_line_error([*command, "-o", str(device)], capsys)
    assert not device.resolve().is_file() and device.resolve().is_char_device()


def test_output_through_proc_self_fd_1_to_a_terminal_or_pipe_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "out.txt"
    link.symlink_to("/proc/self/fd/1")
    result = bertgraph("params", "bert-tiny", "-o", str(link))
    assert result.returncode == 1 and "only replaces regular files" in result.stderr
    assert link.is_symlink()


# --- 3. the graph cache ----------------------------------------------------------------------


def _entry(folder: Path) -> Path:
    entries = [p for p in folder.iterdir() if p.suffix == ".json"]
    assert len(entries) == 1, entries
    return entries[0]


def _rewrite_graph(entry: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Change the node-link graph inside an entry, keeping the entry well-formed (digest included)."""
    text = entry.read_text()
    if "\n" in text.strip():  # a header line, then the graph
        header_line, body = text.split("\n", 1)
        graph = json.loads(body)
        change(graph)
        new_body = json.dumps(graph)
        header = json.loads(header_line)
        header["digest"] = hashlib.sha256(new_body.encode()).hexdigest()
        entry.write_text(json.dumps(header) + "\n" + new_body)
    else:
        data = json.loads(text)
        change(data["graph"])
        entry.write_text(json.dumps(data))


def test_cache_entry_of_the_wrong_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path))
    assert main(["summary", "bert-tiny", "--format", "json"]) == 0
    expected = capsys.readouterr().out
    _entry(tmp_path).write_text("[]")
    assert main(["summary", "bert-tiny", "--format", "json"]) == 0
    assert capsys.readouterr().out == expected


def test_empty_cached_graph_is_not_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path))
    assert main(["summary", "bert-tiny"]) == 0
    capsys.readouterr()

    def empty(graph: dict[str, Any]) -> None:
        graph["nodes"], graph["edges"], graph["graph"]["parameters"] = [], [], []

    _rewrite_graph(_entry(tmp_path), empty)
    assert main(["params", "bert-tiny", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 4_385_920


def test_failed_cache_write_leaks_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(cache))
    assert main(["summary", "bert-tiny"]) == 0
    entry = _entry(cache)
    entry.unlink()
    entry.mkdir()  # the entry path is a folder: every write fails
    assert main(["summary", "bert-tiny"]) == 0
    assert [p.name for p in cache.iterdir()] == [entry.name]


# --- 4. sizes --------------------------------------------------------------------------------


def test_a_billion_layers_is_refused_at_once(tmp_path: Path) -> None:
    folder = model_dir(tmp_path, TINY.replace('"num_hidden_layers": 2', '"num_hidden_layers": 1000000000') + "}")
    result = bertgraph("params", str(folder), timeout=60)  # it used to run until memory ran out
    assert result.returncode == 1 and "above the limit" in result.stderr


@pytest.mark.parametrize(
    "argv",
    [["--vocab", "99999999999999999999"], ["--hidden", "10000000000", "--heads", "1"]],
)
def test_sizes_that_overflow_are_refused(argv: list[str], capsys: Any) -> None:
    assert "above the limit" in one_line_error(["summary", "bert-tiny", *argv], capsys)


def test_vocabulary_of_1e40_is_refused(tmp_path: Path, capsys: Any) -> None:
    folder = model_dir(tmp_path, TINY + ', "vocab_size": 1' + "0" * 40 + "}")
    assert "vocab_size of 41 digits is above the limit" in one_line_error(["params", str(folder)], capsys)


# --- 5. the Graphviz-missing fallback --------------------------------------------------------


def test_missing_graphviz_does_not_overwrite_a_sibling_dot(tmp_path: Path) -> None:
    sibling = tmp_path / "bert.dot"
    sibling.write_text("mine")
    result = bertgraph("render", "bert-tiny", "-o", str(tmp_path / "bert.svg"), env={**os.environ, "PATH": ""})
    assert result.returncode == 1 and "Graphviz" in result.stderr
    assert sibling.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["bert.dot"]


# --- 6. escaping -----------------------------------------------------------------------------


def _hostile(traced: Callable[..., Architecture], name: str) -> Architecture:
    graph = traced("bert-tiny", "sequence-classification").graph
    return Architecture(rename_modules(graph, {"classifier": name}))


def test_graphml_with_control_characters_is_xml(traced: Callable[..., Architecture]) -> None:
    from bertgraph.graph import io as graph_io

    text = graph_io.graph_file_text(_hostile(traced, "bell\x07nul\x00").graph, "graphml")
    ET.fromstring(text.encode())
    assert nx.read_graphml(io.BytesIO(text.encode())).number_of_nodes() > 0


@pytest.mark.browser
def test_mermaid_directive_in_a_name_does_not_break_mermaid(traced: Callable[..., Architecture]) -> None:
    from tests.mermaid_browser import browser_available, render_mermaid, svg_text

    reason = browser_available()
    require(reason is None, reason or "")
    result = render_mermaid({"d": _hostile(traced, "%%{init: {'theme': 'dark'}}%%").to_mermaid(2)})["d"]
    assert result.ok, result.error
    assert "%%{init" in svg_text(result.svg)


@pytest.mark.dot
def test_bidi_override_does_not_reach_svg_or_markdown_raw(traced: Callable[..., Architecture]) -> None:
    from bertgraph.render import graphviz_run, report

    arch = _hostile(traced, f"user{BIDI}txt-exe")
    assert BIDI not in graphviz_run.render(arch.to_dot(2), "svg").decode("utf-8")
    assert BIDI not in report.generate_report(arch.graph)


# --- 7. "internal error" for bad input ----------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        b'{"hidden_size": "\xff"}',
        ("[" * 100_000 + "]" * 100_000).encode(),
        (TINY + ', "hidden_dropout_prob": 2.0}').encode(),
        (TINY + ', "hidden_dropout_prob": Infinity}').encode(),
    ],
    ids=["invalid-utf8", "deeply-nested", "dropout-2", "dropout-infinity"],
)
def test_bad_config_is_not_an_internal_error(tmp_path: Path, config: bytes, capsys: Any) -> None:
    one_line_error(["params", str(model_dir(tmp_path, config))], capsys)


def _checkpoint(tmp_path: Path, header: Any, data: bytes = b"") -> Path:
    folder = model_dir(tmp_path, TINY + "}")
    raw = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return folder


@pytest.mark.parametrize(
    ("header", "data"),
    [
        ([1, 2, 3], b""),
        ({"bert.pooler.dense.bias": {"dtype": "F32", "data_offsets": [0, 512]}}, bytes(512)),
        ({"bert.pooler.dense.bias": {"dtype": "F32", "shape": [128], "data_offsets": [0, 512]}}, bytes(100)),
    ],
    ids=["header-a-list", "no-shape", "truncated"],
)
def test_bad_safetensors_is_not_an_internal_error(tmp_path: Path, header: Any, data: bytes, capsys: Any) -> None:
    folder = _checkpoint(tmp_path, header, data)
    one_line_error(["summary", str(folder)], capsys)
    out = tmp_path / "m.onnx"
    one_line_error(["onnx", str(folder), "--no-verify", "-o", str(out)], capsys)
    assert not out.exists()


def test_index_that_is_not_json_is_not_an_internal_error(tmp_path: Path, capsys: Any) -> None:
    folder = model_dir(tmp_path, TINY + "}")
    (folder / "model.safetensors.index.json").write_text("{not json")
    one_line_error(["params", str(folder)], capsys)


def test_output_in_proc_is_not_an_internal_error(capsys: Any) -> None:
    one_line_error(["render", "bert-tiny", "-o", "/proc/x.svg"], capsys)


def test_full_disk_is_not_an_internal_error(tmp_path: Path) -> None:
    folder = tmp_path / "small"
    folder.mkdir()
    result = run_with_small_disk(folder, "8k", ["render", "bert-tiny", "--format", "dot", "-o", str(folder / "x.dot")])
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "internal error" not in result.stderr and result.listing == []


def test_standard_output_to_dev_full_is_not_an_internal_error() -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "bertgraph", "params", "bert-tiny"], stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("bertgraph: error: ")


def test_unknown_user_as_model_is_not_an_internal_error(capsys: Any) -> None:
    one_line_error(["params", "~nouser-bertgraph/x"], capsys)


# --- 9. smaller ------------------------------------------------------------------------------


def test_depth_99_is_not_drawn_as_4_under_the_title_depth_99(tmp_path: Path, capsys: Any) -> None:
    target = tmp_path / "x.dot"
    status = main(["render", "bert-tiny", "--depth", "99", "-o", str(target)])
    captured = capsys.readouterr()
    assert status == 2 and "--depth" in captured.err and not target.exists()


def _onnx_file(path: Path) -> Path:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "dense.weight"], ["y"], name="/dense/MatMul")],
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(np.ones((4, 3), np.float32), "dense.weight")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


@pytest.mark.parametrize(
    "options", [["--head", "masked-lm"], ["--compare", "masked-lm"], ["--layers", "4"]], ids=lambda o: o[0]
)
def test_options_are_not_silently_ignored_for_onnx_input(tmp_path: Path, options: list[str], capsys: Any) -> None:
    model = _onnx_file(tmp_path / "m.onnx")
    target = tmp_path / "x.mmd"
    status = main(["render", str(model), *options, "-o", str(target)])
    captured = capsys.readouterr()
    assert status == 2 and "does not apply to an .onnx file" in captured.err and not target.exists()


def test_layer_norm_eps_nan_is_refused(tmp_path: Path, capsys: Any) -> None:
    one_line_error(["params", str(model_dir(tmp_path, TINY + ', "layer_norm_eps": NaN}'))], capsys)


def test_symlink_loop_and_fifo_are_not_reported_as_missing(tmp_path: Path, capsys: Any) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert "symbolic link loop" in one_line_error(["params", str(loop)], capsys)
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    assert "FIFO" in one_line_error(["params", str(fifo)], capsys)


def test_a_pickle_of_more_than_tensors_says_what_it_is_not_torchs_advice(tmp_path: Path, capsys: Any) -> None:
    """torch's message tells the user to load it unsafely; bertgraph says what the file is and what to do."""
    import fractions

    import torch
    import transformers

    config = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=100
    )
    config.save_pretrained(tmp_path / "ck")
    weights = transformers.BertModel(config).state_dict()
    weights["extra"] = fractions.Fraction(1, 3)  # an object whose unpickling runs its class's code
    torch.save(weights, tmp_path / "ck" / "pytorch_model.bin")
    target = tmp_path / "m.onnx"
    assert main(["onnx", str(tmp_path / "ck"), "--allow-pickle", "--no-verify", "-o", str(target)]) == 1
    err = capsys.readouterr().err
    line = err.splitlines()[-1]  # after the export's progress lines
    assert line.startswith("bertgraph: error: cannot load weights from") and "Traceback" not in err
    assert "the pickle holds objects other than tensors (it names fractions.Fraction)" in line
    assert "save the weights as model.safetensors" in line
    assert "weights_only" not in err and "trust the source" not in err and "\\x1b" not in err
    assert not target.exists()


# --- positions past the end: RoBERTa-like models count positions from pad_token_id + 1 ----------------


@pytest.mark.parametrize("model_type", ["bert", "roberta", "xlm-roberta", "camembert", "mpnet"])
def test_usable_positions_are_what_the_model_takes(model_type: str, tmp_path: Path) -> None:
    """The family record's usable length, checked against transformers running the model (CPU, tiny)."""
    import torch

    from bertgraph.model import resolve
    from bertgraph.model.build import build_model
    from tests.family_configs import TINY as FAMILIES

    folder = tmp_path / model_type
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**FAMILIES[model_type], "max_position_embeddings": 20}))
    spec = resolve(str(folder))
    offset = {"bert": 0}.get(model_type, 2)
    assert spec.max_positions == 20 - offset == spec.family.usable_positions(spec.config)
    model = build_model(spec, weights=True)
    ones = torch.ones((1, spec.max_positions), dtype=torch.long) * 5
    model(input_ids=ones, attention_mask=torch.ones_like(ones))  # the last usable position runs
    longer = torch.ones((1, spec.max_positions + 1), dtype=torch.long) * 5
    with pytest.raises((IndexError, RuntimeError), match="out of (range|bounds)|expanded size"):
        model(input_ids=longer, attention_mask=torch.ones_like(longer))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["cost", "roberta-base", "--seq-len", "514"], "--seq-len 514 is above the 512 positions roberta-base can use"),
        (["cost", "roberta-base", "--seq-len", "128", "513"], "(max_position_embeddings 514, counted from"),
        (["summary", "xlm-roberta-base", "--seq-len", "513"], "use --seq-len 512 or less"),
        (["params", "all-mpnet-base-v2", "--seq-len", "513"], "the 512 positions all-mpnet-base-v2"),
    ],
)
def test_a_length_past_the_usable_positions_is_refused(argv: list[str], message: str, capsys: Any) -> None:
    assert message in one_line_error(argv, capsys)


def test_cost_at_the_last_usable_position(capsys: Any) -> None:
    assert main(["cost", "roberta-base", "--seq-len", "512", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["sizes"][0]["seq"] == 512


def test_a_roberta_with_few_positions_traces(tmp_path: Path, capsys: Any) -> None:
    """The example length is clamped to the usable length (18 of 20), not to max_position_embeddings."""
    from tests.family_configs import TINY as FAMILIES

    (tmp_path / "config.json").write_text(json.dumps({**FAMILIES["roberta"], "max_position_embeddings": 20}))
    assert main(["summary", str(tmp_path), "--no-cache", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"]


@pytest.mark.slow
def test_a_roberta_checkpoint_with_few_positions_exports_and_verifies(tmp_path: Path, capsys: Any) -> None:
    """max_position_embeddings 80: torch.export was asked for 80 tokens of the 78 usable, TorchScript then failed."""
    from tests.family_configs import TINY as FAMILIES

    (tmp_path / "config.json").write_text(json.dumps({**FAMILIES["roberta"], "max_position_embeddings": 80}))
    target = tmp_path / "m.onnx"
    assert main(["onnx", str(tmp_path), "-o", str(target)]) == 0, capsys.readouterr().err
    assert "max |onnxruntime − PyTorch|" in capsys.readouterr().err and target.is_file()


def _scoped_onnx(path: Path) -> Path:
    """An ONNX file as the TorchScript exporter writes it: module paths in node names, no module types."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, weights, previous = [], [], "x"
    for scope in (
        "bert/encoder/layer.0/attention/self/query",
        "bert/encoder/layer.1/attention/self/query",
        "bert/pooler/dense",
    ):
        weight = f"onnx::MatMul_{len(weights)}"
        weights.append(numpy_helper.from_array(np.ones((4, 4), np.float32), weight))
        nodes.append(helper.make_node("MatMul", [previous, weight], [f"{scope}/out"], name=f"/{scope}/MatMul"))
        previous = f"{scope}/out"
    graph = helper.make_graph(
        nodes,
        "main_graph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch_size", 4])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, ["batch_size", 4])],
        weights,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="pytorch"), path)
    return path


@pytest.mark.dot
@pytest.mark.parametrize("depth", [0, 1, 2, 3, 4])
def test_an_onnx_file_without_module_types_draws_at_every_depth(tmp_path: Path, depth: int) -> None:
    """depths 0–3 gave an empty <font></font> that Graphviz refuses: an empty module type never reaches a label."""
    model = _scoped_onnx(tmp_path / "ts.onnx")
    target = tmp_path / "ts.dot"
    assert main(["render", str(model), "--depth", str(depth), "-o", str(target)]) == 0
    text = target.read_text()
    assert not re.search(r"<font[^>]*></font>|\(\)| ·  · | · <", text), text
    laid = subprocess.run(["dot", "-Tjson"], input=text, capture_output=True, text=True, check=False)
    assert laid.returncode == 0, laid.stderr
    drawn = json.loads(laid.stdout)
    assert any(obj.get("label", "").startswith("<") for obj in drawn.get("objects", []))


@pytest.mark.parametrize(("dtype", "name"), [("bool", "BOOL"), ("int8", "I8"), ("uint8", "U8"), ("int32", "I32")])
def test_a_weight_stored_as_bool_or_int_is_refused_not_cast(tmp_path: Path, dtype: str, name: str, capsys: Any) -> None:
    """Cast silently into a float32 ONNX file, it gave a 'verified' export computing something else."""
    import torch
    import transformers
    from safetensors.torch import save_file

    config = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=100
    )
    config.save_pretrained(tmp_path / "ck")
    weights = {key: value.contiguous() for key, value in transformers.BertModel(config).state_dict().items()}
    query = "encoder.layer.0.attention.self.query.weight"
    weights[query] = (weights[query] > 0) if dtype == "bool" else weights[query].to(getattr(torch, dtype))
    save_file(weights, tmp_path / "ck" / "model.safetensors")
    target = tmp_path / "m.onnx"
    line = one_line_error(["onnx", str(tmp_path / "ck"), "-o", str(target)], capsys)
    assert f"tensor '{query}' is {name}, where the model has a floating-point weight" in line
    assert "save the checkpoint in float32, float16 or bfloat16" in line and not target.exists()
    weights[query] = weights[query].to(torch.float16)  # a narrower float is a float: exported
    save_file(weights, tmp_path / "ck" / "model.safetensors")
    assert main(["summary", str(tmp_path / "ck"), "--no-cache"]) == 0


@pytest.mark.parametrize(
    ("options", "batch"), [([], 1), (["--batch", "3"], 3), (["--batch", "3", "--seq-len", "9"], 3)]
)
def test_report_of_an_onnx_file_sizes_its_named_dimensions(
    tmp_path: Path, options: list[str], batch: int, capsys: Any
) -> None:
    """Another exporter's batch is ``batch_size``: sized by --batch (1 without it), never 'no size here'."""
    model = _scoped_onnx(tmp_path / "ts.onnx")
    target = tmp_path / "r.md"
    assert main(["report", str(model), *options, "-o", str(target)]) == 0, capsys.readouterr().err
    assert f"batch\\_size={batch}" in target.read_text()  # Markdown-escaped
    assert main(["cost", str(model), *options, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["sizes"][0]["batch_size"] == batch


def test_cost_of_an_onnx_file_sizes_its_named_sequence_at_every_length(tmp_path: Path, capsys: Any) -> None:
    """Several --seq-len sized another exporter's ``sequence_length`` from the first value only."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="/encoder/dense/MatMul")
    dims = ["batch_size", "sequence_length", 4]
    graph = helper.make_graph(
        [node],
        "main_graph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
        [weight],
    )
    model = tmp_path / "named.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="pytorch"), model)
    assert main(["cost", str(model), "--seq-len", "8", "32", "--batch", "2", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sizes"] == [{"batch_size": 2, "sequence_length": n} for n in (8, 32)]
    assert report["total"]["matmul_flops"]["values"] == [2 * 2 * n * 4 * 4 for n in (8, 32)]
