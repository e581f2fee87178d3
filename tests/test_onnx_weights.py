"""ONNX export from a model without weights: same file as exporting the real model, less memory.

The graph is exported from a fake-tensor model and the weights applied per tensor, then
streamed to the file; these tests hold that to the file an export of the real model gives
(byte for byte), check the writer against ``onnx_ir.save``, the dtypes (float16 verified
at its own tolerance, bfloat16 stored as float32), the memory estimate and the one-line
errors for damaged checkpoints and missing packages.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest
import torch
import transformers
from onnx import numpy_helper
from torch.onnx._internal.exporter._core import TorchTensor

from bertgraph import cli
from bertgraph.errors import CheckpointError, OnnxError
from bertgraph.model import HEADS, build_model, resolve
from bertgraph.onnx import export, memory
from bertgraph.onnx.export import ExportableModel, describe_weights, export_onnx_spec, output_names
from bertgraph.onnx.optimise import name_parameters, optimise
from bertgraph.onnx.save import write_onnx
from bertgraph.onnx.verify import TOLERANCES
from tests.conftest import TINY_CONFIG

pytestmark = pytest.mark.onnx
SEQ = 16


def _checkpoint(folder: Path, head: str, dtype: torch.dtype = torch.float32, seed: int = 7) -> Path:
    torch.manual_seed(seed)
    model = getattr(transformers, HEADS[head])(transformers.BertConfig(**TINY_CONFIG)).eval()
    model.to(dtype).save_pretrained(folder, safe_serialization=True)
    return folder


def _export_real_model(spec: Any, path: Path) -> None:
    """How bertgraph exported before: torch.onnx.export of the model with its weights, then ir.save."""
    model = build_model(spec, weights=True, seed=0)
    if model.dtype == torch.bfloat16:
        model = model.float()
    wrapper = ExportableModel(model, output_names(spec))
    onnx_model, used = export._export(wrapper, spec, None, "dynamo", lambda message: None)
    assert onnx_model is not None
    optimise(onnx_model)
    name_parameters(onnx_model, model)
    export._label(onnx_model, spec, model, describe_weights(spec, model), used)
    ir.save(onnx_model, path)


@pytest.mark.parametrize(
    ("source", "head"),
    [("checkpoint", "masked-lm"), ("checkpoint", "pretraining"), ("random", "multiple-choice"), ("float16", "base")],
)
def test_file_is_byte_identical_to_an_export_of_the_real_model(source: str, head: str, tmp_path: Path) -> None:
    """Same graph, same initializers (names, shapes, values), same bytes — tied weights included."""
    if source != "random":
        dtype = torch.float16 if source == "float16" else torch.float32
        spec = resolve(str(_checkpoint(tmp_path / "ckpt", head, dtype)), head, seq_len=SEQ)
    else:
        spec = resolve("bert-tiny", head, seq_len=SEQ)
    ours, theirs = tmp_path / "ours.onnx", tmp_path / "theirs.onnx"
    export_onnx_spec(spec, ours, verify=False)
    _export_real_model(spec, theirs)
    assert ours.read_bytes() == theirs.read_bytes()
    if head == "masked-lm":  # deterministic with tied weights too (test_onnx.py re-exports a base model)
        again = tmp_path / "again.onnx"
        export_onnx_spec(spec, again, verify=False)
        assert again.read_bytes() == ours.read_bytes()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_checkpoints_are_verified(dtype: str, tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path / dtype, "base", getattr(torch, dtype))
    spec = resolve(str(folder), "base", seq_len=SEQ)
    path = tmp_path / "half.onnx"
    result = export_onnx_spec(spec, path)
    stored = "float16" if dtype == "float16" else "float32"  # onnxruntime has no bfloat16 CPU kernels
    assert result.verified and result.dtype == stored and result.checkpoint_dtype == dtype
    assert result.tolerance == TOLERANCES[stored]
    assert 0 < result.max_abs_diff <= result.tolerance
    text = "\n".join(result.report_lines())
    assert f"the {stored} tolerance" in text and f"≤ {TOLERANCES[stored]:.0e}" in text
    if dtype == "bfloat16":
        assert "bfloat16 stored as float32" in text

    model = onnx.load(str(path))
    elem = onnx.TensorProto.FLOAT16 if stored == "float16" else onnx.TensorProto.FLOAT
    weights = {t.name: t for t in model.graph.initializer}
    assert weights["embeddings.word_embeddings.weight"].data_type == elem
    reference = transformers.BertModel.from_pretrained(folder).eval()
    for name, parameter in reference.named_parameters():  # the checkpoint's values, exactly (widened)
        stored_values = numpy_helper.to_array(weights[name]).astype(np.float32)
        assert np.array_equal(stored_values, parameter.detach().float().numpy()), name


def test_float16_difference_exceeds_the_float32_tolerance(tmp_path: Path) -> None:
    """Why float16 needs its own tolerance: the fixed 1e-4 rejects a correct float16 file."""
    folder = _checkpoint(tmp_path / "fp16", "base", torch.float16)
    spec = resolve(str(folder), "base", seq_len=SEQ)
    with pytest.raises(OnnxError, match=r"disagree on \w+ at .* > 0\.0001"):
        export_onnx_spec(spec, tmp_path / "m.onnx", tolerance=TOLERANCES["float32"])


def _tensors() -> list[Any]:
    rng = np.random.default_rng(0)
    return [
        TorchTensor(torch.from_numpy(rng.standard_normal((5, 3)).astype(np.float32)), "torch.f32"),
        TorchTensor(torch.randn(4, 2).to(torch.bfloat16), "torch.bf16"),
        TorchTensor(torch.randn(3).half(), "torch.f16"),
        ir.Tensor(np.arange(6, dtype=np.int64).reshape(2, 3), name="numpy.i64"),
        ir.Tensor(np.array(2.5, dtype=np.float32), name="scalar"),
        ir.Tensor(np.zeros((0, 4), dtype=np.float32), name="empty"),
        TorchTensor(torch.randn(40, 40), "large"),
    ]


def test_streamed_file_is_what_onnx_ir_writes(tmp_path: Path) -> None:
    graph = ir.Graph(inputs=[], outputs=[], nodes=[], name="g", opset_imports={"": 18})
    for tensor in _tensors():
        value = ir.Value(name=tensor.name, shape=tensor.shape, type=ir.TensorType(tensor.dtype), const_value=tensor)
        graph.register_initializer(value)
        graph.outputs.append(value)
    model = ir.Model(graph, ir_version=10, producer_name="bertgraph", metadata_props={"k": "v"})
    ir.save(model, tmp_path / "reference.onnx")
    write_onnx(model, tmp_path / "streamed.onnx", view=tmp_path / "view.onnx")
    assert (tmp_path / "streamed.onnx").read_bytes() == (tmp_path / "reference.onnx").read_bytes()
    # The view: the large tensors point into the file itself; their values are the file's.
    view = onnx.load(str(tmp_path / "view.onnx"), load_external_data=False)
    external = [t.name for t in view.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert external == ["large"]
    onnx.checker.check_model(str(tmp_path / "view.onnx"), full_check=True)
    loaded = onnx.load(str(tmp_path / "view.onnx"))
    reference = onnx.load(str(tmp_path / "reference.onnx"))
    for ours, theirs in zip(loaded.graph.initializer, reference.graph.initializer):
        assert np.array_equal(numpy_helper.to_array(ours), numpy_helper.to_array(theirs))


# --- memory -------------------------------------------------------------------------------------


def test_memory_estimate_refuses_what_the_machine_cannot_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "m.onnx"
    code = cli.main(["onnx", "bert-base-uncased", "--hidden", "10000000", "--heads", "1", "-o", str(target)])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1 and line.startswith("bertgraph: error: exporting ") and "available" in line, line
    assert re.search(r"needs about [\d.]+ [TP]B of memory", line)  # said before anything is allocated
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_available_memory_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   12000000 kB\n")
    assert memory.available(meminfo) == 12_000_000 * 1024
    meminfo.write_text("MemTotal: 1 kB\n")
    assert memory.available(meminfo) is None
    assert memory.estimate(439_000_000, verify=True) > memory.estimate(439_000_000, verify=False) > 439_000_000


# --- damaged checkpoints and missing packages: one line ---------------------------------------------


def _damage(folder: Path, how: str) -> None:
    path = folder / "model.safetensors"
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
        return
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    name = sorted(k for k in header if k != "__metadata__")[0]
    start, end = header[name]["data_offsets"]
    header[name]["data_offsets"] = [start + 8, end + 8] if how == "bad-offset" else [start, end + 10**9]
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length :])


@pytest.mark.parametrize("how", ["truncated", "bad-offset", "past-the-end"])
def test_damaged_checkpoint_is_one_line(how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _checkpoint(tmp_path / "ckpt", "base")
    _damage(folder, how)
    target = tmp_path / "m.onnx"
    target.write_bytes(b"good")
    code = cli.main(["onnx", str(folder), "--seq-len", str(SEQ), "-o", str(target)])
    err = capsys.readouterr().err
    assert code == 1 and "internal error" not in err and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("bertgraph: error: ") and "model.safetensors" in line, line
    assert target.read_bytes() == b"good" and sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "m.onnx"]
    with pytest.raises(CheckpointError):
        export_onnx_spec(resolve(str(folder), seq_len=SEQ), target)


@pytest.mark.parametrize(("module", "package"), [("onnx_ir", "onnx-ir"), ("onnxruntime", "onnxruntime")])
def test_missing_package_is_named_in_one_line(module: str, package: str, tmp_path: Path) -> None:
    """An environment without the package (an import that fails): one line naming what to install."""
    script = (
        f"import sys; sys.modules[{module!r}] = None; sys.argv = ['bertgraph', 'onnx', 'bert-tiny', "
        f"'-o', {str(tmp_path / 'm.onnx')!r}]; from bertgraph.cli import run; run()"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bertgraph: error: ONNX export needs the Python package"), lines
    assert f"pip install {package}" in lines[0]
    assert list(tmp_path.iterdir()) == []
