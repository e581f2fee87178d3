"""ONNX export, verification and ONNX → graph, with real torch, transformers, onnx and onnxruntime.

Every head is exported twice, once from the ``bert-tiny`` preset (seeded random weights)
and once from a tiny random checkpoint saved with ``save_pretrained``; each export is
shared by the tests below through a module-scoped fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import transformers

import bertgraph
from bertgraph import cli
from bertgraph.api import read_onnx
from bertgraph.errors import BertgraphError, CheckpointError, OnnxError
from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.graph import stats
from bertgraph.model import HEADS, ModelSpec, build_model, resolve
from bertgraph.onnx.export import (
    ExportableModel,
    OnnxExportResult,
    describe_weights,
    export_onnx_spec,
    for_export,
    output_names,
)
from bertgraph.onnx.read import graph_from_onnx, read_onnx_graph
from bertgraph.onnx.verify import dim_names, open_session, parity_sizes, random_inputs, reference_outputs
from bertgraph.onnx.weights import load_weights
from bertgraph.tracing import skeleton
from tests.conftest import TINY_CONFIG
from tests.matrix import each_once

pytestmark = pytest.mark.onnx

SOURCES = ("tiny", "bert-tiny")
TINY_SEQ = 16
TOLERANCE = 1e-4


@dataclass
class Export:
    """One exported file and what made it."""

    source: str
    spec: ModelSpec
    path: Path
    result: OnnxExportResult
    checkpoint: Path | None


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory, once: Any) -> dict[str, Path]:
    """A tiny random checkpoint per head, each saved from that head's class (safetensors)."""
    return once("onnx-checkpoints", lambda: _save_checkpoints(tmp_path_factory))


def _save_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folders = {}
    for index, (head, class_name) in enumerate(HEADS.items()):
        folder = tmp_path_factory.mktemp(f"tiny-{head}")
        torch.manual_seed(1000 + index)  # not the exporter's seed 0: real weights must show
        settings: dict[str, Any] = dict(TINY_CONFIG)
        model = getattr(transformers, class_name)(transformers.BertConfig(**settings)).eval()
        model.save_pretrained(folder, safe_serialization=True)
        folders[head] = folder
    return folders


def _export_cases() -> list[Any]:
    """Every head once, from the preset and the checkpoint in turn (every pair with ``BERTGRAPH_FULL_MATRIX=1``);
    each export is made on one worker, once (its tests share an ``xdist_group``)."""
    return [
        pytest.param((source, head), id=f"{source}-{head}", marks=pytest.mark.xdist_group(f"onnx-{source}-{head}"))
        for head, source in each_once(list(HEADS), SOURCES)
    ]


@pytest.fixture(scope="module", params=_export_cases())
def exported(
    request: pytest.FixtureRequest, checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, once: Any
) -> Export:
    source, head = request.param
    return once(("onnx-export", source, head), lambda: _export(source, head, checkpoints, tmp_path_factory))


def _export(source: str, head: str, checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Export:
    folder = tmp_path_factory.mktemp(f"onnx-{source}-{head}")
    if source == "bert-tiny":
        path = folder / "model.onnx"
        result = bertgraph.export_onnx("bert-tiny", path, head=head)  # the public API
        return Export(source, resolve("bert-tiny", head), path, result, None)
    spec = resolve(str(checkpoints[head]), head, seq_len=TINY_SEQ)
    path = folder / "tiny.onnx"
    return Export(source, spec, path, export_onnx_spec(spec, path), checkpoints[head])


def _session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _eager(model: torch.nn.Module, feeds: dict[str, np.ndarray], names: tuple[str, ...]) -> list[np.ndarray]:
    with torch.no_grad():
        output = model(**{k: torch.from_numpy(v) for k, v in feeds.items()}, return_dict=True)
    return [output[name].numpy() for name in names]


def _max_diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


# --- every head, both sources -----------------------------------------------------------------


def test_export_is_verified_at_two_other_sizes(exported: Export) -> None:
    result = exported.result
    example = tuple(max(2, s) for s in exported.spec.example_shape)
    assert result.checked and result.verified
    assert len(result.parity) == 2
    shapes = [check.shape for check in result.parity]
    assert example not in shapes and shapes[0] != shapes[1]
    assert any(check.padded_rows for check in result.parity)
    for check in result.parity:
        assert set(check.max_abs_diff) == set(output_names(exported.spec))
        assert all(0 <= diff <= TOLERANCE for diff in check.max_abs_diff.values())
    assert result.exporter.startswith("torch.export (dynamo)")
    assert result.file_size == exported.path.stat().st_size and result.data_path is None
    text = "\n".join(result.report_lines())
    assert "full_check passed" in text and "padded" in text and f"opset {result.opset}" in text


def test_file_declares_named_dynamic_inputs_and_head_outputs(exported: Export) -> None:
    model = onnx.load(str(exported.path))
    spec = exported.spec
    inputs = {v.name: v for v in model.graph.input}
    assert list(inputs) == ["input_ids", "attention_mask", "token_type_ids"]
    for value in inputs.values():
        assert value.type.tensor_type.elem_type == onnx.TensorProto.INT64
        assert [d.dim_param for d in value.type.tensor_type.shape.dim] == list(dim_names(spec))
    assert [v.name for v in model.graph.output] == list(output_names(spec))
    for value in model.graph.output:
        assert value.type.tensor_type.shape.dim[0].dim_param == "batch"
    assert model.producer_name == "bertgraph"


def test_metadata_describes_the_model_for_netron(exported: Export) -> None:
    model = onnx.load(str(exported.path), load_external_data=False)
    meta = {p.key: p.value for p in model.metadata_props}
    spec = exported.spec
    totals = stats.parameter_stats(skeleton(spec))
    assert meta["model"] == spec.name and meta["head"] == spec.head and meta["model_class"] == spec.model_class
    assert json.loads(meta["config"]) == spec.summary()
    assert int(meta["parameters"]) == totals["total"] == exported.result.parameters
    assert json.loads(meta["parameter_groups"]) == totals["groups"]
    expected = "checkpoint model.safetensors" if exported.checkpoint else "random (seed 0)"
    assert meta["weights"] == expected
    assert meta["bertgraph_version"] == bertgraph.__version__
    for node in model.graph.node:
        props = {p.key: p.value for p in node.metadata_props}
        assert "pkg.torch.onnx.stack_trace" not in props  # machine paths stay out of the file
        assert "ExportableModel" not in props.get("pkg.torch.onnx.class_hierarchy", "")
    names = [node.name for node in model.graph.node]
    assert any("encoder.layer.1.attention.self/" in name for name in names)  # names say their module
    assert len(set(names)) == len(names)


def test_runs_at_new_sizes_with_the_real_weights(exported: Export) -> None:
    """Dynamic axes at a size unlike the example and the verification sizes; outputs are the model's."""
    spec = exported.spec
    shape = (5, 2, 7) if spec.head == "multiple-choice" else (5, 7)
    feeds = random_inputs(spec, shape, padded_rows=2, seed=42)
    names = output_names(spec)
    actual = _session(exported.path).run(list(names), feeds)
    if exported.checkpoint is not None:
        reference = getattr(transformers, spec.model_class).from_pretrained(exported.checkpoint).eval()
    else:
        reference = build_model(spec, weights=True, seed=0)
    assert _max_diff(actual, _eager(reference, feeds, names)) <= TOLERANCE
    if exported.checkpoint is not None:
        random = build_model(replace(spec, weights=None), weights=True, seed=0)
        assert _max_diff(actual, _eager(random, feeds, names)) > 1e-3  # the checkpoint's weights, not seed 0


def test_onnx_graph_matches_pytorch_parameters(exported: Export) -> None:
    spec = exported.spec
    arch = read_onnx(exported.path)
    facts = skeleton(spec)
    ours, theirs = arch.params(), stats.parameter_stats(facts)
    assert ours["total"] == theirs["total"] == sum(p.numel() for p in build_model(spec).parameters())
    assert ours["groups"] == {name: count for name, count in theirs["groups"].items() if count}
    assert [(r["name"], r["shape"]) for r in ours["parameters"]] == [
        (r["name"], r["shape"]) for r in theirs["parameters"]
    ]
    assert g.total_params(arch.graph) == ours["total"]
    info = arch.graph.graph
    assert info[g.G_SOURCE] == "onnx" and info[g.G_HEAD] == spec.head and info[g.G_MODEL_CLASS] == spec.model_class
    assert info[g.G_BACKBONE] == facts.graph[g.G_BACKBONE]
    assert info[g.G_TIED] == facts.graph[g.G_TIED]
    assert info[g.G_CONFIG] == spec.summary()
    for path, entry in info[g.G_MODULES].items():  # what ONNX knows agrees with the module itself
        assert facts.graph[g.G_MODULES][path]["type"] == entry["type"]
        assert facts.graph[g.G_MODULES][path].get("sizes", "") == entry.get("sizes", ""), path
    inputs = [d for _, d in arch.graph.nodes(data=True) if d[g.KIND] == g.INPUT]
    assert all(d[g.SHAPE] == list(dim_names(spec)) and d[g.DTYPE] == "int64" for d in inputs)


# --- the graph of an ONNX file --------------------------------------------------------------


@pytest.fixture(scope="module")
def base_export(tmp_path_factory: pytest.TempPathFactory, checkpoints: dict[str, Path], once: Any) -> Export:
    def build() -> Export:
        spec = resolve(str(checkpoints["base"]), "base", seq_len=TINY_SEQ)
        path = tmp_path_factory.mktemp("base") / "base.onnx"
        return Export("tiny", spec, path, export_onnx_spec(spec, path), checkpoints["base"])

    return once("onnx-base-export", build)


def test_graph_nodes_carry_modules_shapes_and_parameters(base_export: Export) -> None:
    graph = read_onnx_graph(base_export.path)
    ops = {n: d for n, d in graph.nodes(data=True) if d[g.KIND] == g.OPERATOR}
    query = [d for d in ops.values() if d[g.MODULE] == "encoder.layer.0.attention.self.query"]
    assert query and {d[g.MODULE_TYPE] for d in query} == {"Linear"}
    assert sum(d[g.PARAMS] for d in query) == 32 * 32 + 32
    assert {"MatMul", "Add"} <= {d[g.OP] for d in query}
    assert any(d[g.SHAPE] == ["batch", "sequence", 32] and d[g.DTYPE] == "float32" for d in query)
    gather = next(d for d in ops.values() if d[g.PARAM_NAMES] == ["embeddings.word_embeddings.weight"])
    assert gather[g.OP] == "Gather" and gather[g.PARAMS] == 99 * 32
    outputs = {n: d for n, d in graph.nodes(data=True) if d[g.KIND] == g.OUTPUT}
    assert outputs["last_hidden_state"][g.SHAPE] == ["batch", "sequence", 32]
    assert outputs["pooler_output"][g.SHAPE] == ["batch", 32]
    for source, target, data in graph.edges(data=True):
        assert set(data) == {g.SHAPE, g.DTYPE}, (source, target)
    assert json.loads(json.dumps(graph_io.to_node_link(graph)))  # JSON-safe throughout


def test_cli_params_and_summary_read_onnx(base_export: Export, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["params", str(base_export.path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"] == base_export.result.parameters
    assert data["groups"] == {"embeddings": 5344, "encoder": 13578, "pooler": 1056}
    assert cli.main(["summary", str(base_export.path)]) == 0
    text = capsys.readouterr().out
    assert "BertModel" in text and "encoder" in text and f"{base_export.result.parameters:,}" in text


def test_plain_onnx_model_is_read(tmp_path: Path) -> None:
    """A model made with onnx.helper: parameters are float tensors, not shape constants or scalars."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    initializers = [
        numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "dense.weight"),
        numpy_helper.from_array(np.zeros(3, np.float32), "dense.bias"),
        numpy_helper.from_array(np.array([-1, 3], np.int64), "shape"),
        numpy_helper.from_array(np.array(0.5, np.float32), "scale"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "dense.weight"], ["h"], name="/dense/MatMul"),
        helper.make_node("Add", ["h", "dense.bias"], ["h2"], name="/dense/Add"),
        helper.make_node("Mul", ["h2", "scale"], ["h3"], name="Mul_0"),
        helper.make_node("Reshape", ["h3", "shape"], ["y"], name="Reshape_1"),
    ]
    graph = helper.make_graph(
        nodes,
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path / "plain.onnx"
    onnx.save(model, path)

    arch = read_onnx(path)
    params = arch.params()
    assert params["total"] == 15 and [r["name"] for r in params["parameters"]] == ["dense.weight", "dense.bias"]
    graph_ = arch.graph
    assert graph_.nodes["/dense/MatMul"][g.MODULE] == "dense"
    assert graph_.nodes["/dense/MatMul"][g.SHAPE] == ["N", 3]
    assert graph_.nodes["/dense/MatMul"][g.DTYPE] == "float32"
    assert graph_.nodes["Reshape_1"][g.PARAMS] == 0 and graph_.nodes["Mul_0"][g.PARAMS] == 0
    assert graph_.nodes["x"][g.KIND] == g.INPUT and graph_.nodes["y"][g.KIND] == g.OUTPUT
    assert graph_.graph[g.G_SOURCE] == "onnx" and graph_.graph[g.G_BACKBONE] == ""
    assert graph_.graph[g.G_HEAD] == "" and graph_.graph[g.G_NAME] == "plain"
    assert "dense" in graph_.graph[g.G_MODULES]
    assert graph_from_onnx(model, name="plain").graph[g.G_PARAMETERS] == graph_.graph[g.G_PARAMETERS]


def test_file_from_plain_torch_onnx_export_is_read(base_export: Export, tmp_path: Path) -> None:
    """Another producer's dynamo export: modules and classes from node metadata, no bertgraph metadata."""
    model = transformers.BertForSequenceClassification.from_pretrained(base_export.checkpoint).eval()
    inputs = {name: torch.zeros((2, 8), dtype=torch.long) for name in ("input_ids", "attention_mask")}
    path = tmp_path / "plain-torch.onnx"
    torch.onnx.export(model, (), str(path), kwargs=inputs, dynamo=True, verbose=False)
    graph = read_onnx_graph(path)
    info = graph.graph
    assert info[g.G_MODEL_CLASS] == "BertForSequenceClassification" and info[g.G_HEAD] == ""
    assert info[g.G_BACKBONE] == "bert" and info[g.G_WEIGHTS] == "onnx" and info[g.G_CONFIG] == {}
    assert info[g.G_MODULES]["bert.encoder.layer.1.attention.self.query"]["type"] == "Linear"
    assert info[g.G_MODULES]["bert.encoder.layer"]["type"] == "ModuleList"
    names = {row["name"] for row in info[g.G_PARAMETERS]}
    assert "bert.embeddings.word_embeddings.weight" in names and "bert.embeddings.position_ids" not in names
    assert all(row["numel"] > 1 for row in info[g.G_PARAMETERS])  # scalars are constants, not parameters
    modules = {d[g.MODULE] for _, d in graph.nodes(data=True)}
    assert "bert.encoder.layer.0.intermediate.dense" in modules


# --- determinism, external data, the legacy exporter ---------------------------------------------


def test_reexport_in_another_process_is_byte_identical(base_export: Export, tmp_path: Path) -> None:
    """Another process (another hash seed), through the command line; a second export in the same
    process is checked by ``test_one_export_runs_without_the_collector_…``."""
    other = tmp_path / "other.onnx"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    command = [sys.executable, "-m", "bertgraph", "onnx", str(base_export.checkpoint), "--seq-len", str(TINY_SEQ)]
    done = subprocess.run([*command, "-o", str(other), "--no-verify"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert other.read_bytes() == base_export.path.read_bytes()


def test_large_weights_go_to_external_data(base_export: Export, tmp_path: Path) -> None:
    path = tmp_path / "split.onnx"
    result = export_onnx_spec(base_export.spec, path, external_data_threshold=0)
    data = tmp_path / "split.onnx.data"
    assert result.data_path == data and data.stat().st_size > 0 and result.verified
    assert result.file_size == path.stat().st_size + data.stat().st_size
    assert sorted(p.name for p in tmp_path.iterdir()) == ["split.onnx", "split.onnx.data"]
    assert read_onnx(path).params()["total"] == result.parameters
    feeds = random_inputs(base_export.spec, (2, 9), 1, seed=3)
    assert np.allclose(_session(path).run(None, feeds)[0], _session(base_export.path).run(None, feeds)[0])


def test_torchscript_exporter_is_verified_too(base_export: Export, tmp_path: Path) -> None:
    result = export_onnx_spec(base_export.spec, tmp_path / "legacy.onnx", exporter="torchscript")
    assert result.exporter.startswith("TorchScript") and result.verified
    assert result.outputs == {"last_hidden_state": ["batch", "sequence", 32], "pooler_output": ["batch", 32]}


def test_cost_of_a_torchscript_export_equals_the_traced_models(
    base_export: Export, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ONNX's own shape inference loses batch and sequence at the TorchScript file's first computed reshape;
    onnxruntime's symbolic inference carries them on, so every matrix product is sized and counted."""
    path = tmp_path / "legacy.onnx"
    export_onnx_spec(base_export.spec, path, exporter="torchscript")
    figures = []
    for model in (str(base_export.checkpoint), str(path)):
        assert cli.main(["cost", model, "--seq-len", "16", "64", "--batch", "3", "--format", "json"]) == 0
        total = json.loads(capsys.readouterr().out)["total"]
        figures.append([total[key]["values"] for key in ("matmul_flops", "attention_matmul_flops")])
    assert figures[0] == figures[1] and figures[0][0][0] > 0


def test_parity_sizes_avoid_the_example() -> None:
    spec = resolve("bert-tiny", "multiple-choice", seq_len=19, batch=3)
    sizes = parity_sizes(spec)
    example = tuple(max(2, s) for s in spec.example_shape)
    assert all(len(shape) == 3 and shape != example for shape, _ in sizes)
    assert sizes[0][0] != sizes[1][0] and sizes[1][1] > 0
    feeds = random_inputs(spec, sizes[1][0], sizes[1][1], seed=0)
    assert feeds["attention_mask"][0].all() and not feeds["attention_mask"][1].all()


def test_verification_computes_on_one_thread_and_restores_pytorchs_setting(base_export: Export) -> None:
    """Verification's inputs are tiny: PyTorch and onnxruntime run them on one thread each."""
    spec = base_export.spec
    model = for_export(load_weights(spec), spec)
    seen: list[int] = []
    model.get_submodule("encoder").register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        references = reference_outputs(ExportableModel(model, output_names(spec)), spec)
        assert torch.get_num_threads() == 2  # the caller's setting is back
    finally:
        torch.set_num_threads(before)
    assert seen == [1] * len(references) == [1, 1]
    options = open_session(base_export.path).get_session_options()
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (1, 1)


def test_one_export_runs_without_the_collector_pytorch_beside_the_write_and_onnxruntime_on_the_file(
    base_export: Export, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch.onnx.export builds millions of objects: the collector waits, no op records its stack, and
    both come back. The reference outputs come from a second thread during the write; verification
    opens the view. A second export in the same process is byte for byte the first."""
    import gc
    import threading

    import torch.fx.config

    from bertgraph.onnx import export

    seen: dict[str, Any] = {}
    real_reference, real_save, real_parity = export.reference_outputs, export._save, export.verify_parity
    real_export = torch.onnx.export

    def export_watched(*args: Any, **kwargs: Any) -> Any:
        seen["exporter"] = (gc.isenabled(), torch.fx.config.do_not_emit_stack_traces)
        return real_export(*args, **kwargs)

    def reference(*args: Any, **kwargs: Any) -> Any:
        seen["reference thread"] = threading.current_thread().name
        return real_reference(*args, **kwargs)

    def save(model: Any, path: Path, view: Path | None) -> None:
        seen["save thread"] = threading.current_thread().name
        seen["saved"] = (path.name, view.name if view else None)
        real_save(model, path, view)

    def parity(path: Path, *args: Any, **kwargs: Any) -> Any:
        seen["verified"] = path.name
        return real_parity(path, *args, **kwargs)

    monkeypatch.setattr(export, "reference_outputs", reference)
    monkeypatch.setattr(export, "_save", save)
    monkeypatch.setattr(export, "verify_parity", parity)
    monkeypatch.setattr(torch.onnx, "export", export_watched)
    assert gc.isenabled() and not torch.fx.config.do_not_emit_stack_traces
    result = export_onnx_spec(base_export.spec, tmp_path / "m.onnx")
    assert result.verified and seen["exporter"] == (False, True)
    assert gc.isenabled() and not torch.fx.config.do_not_emit_stack_traces
    assert seen["save thread"] == "MainThread" and seen["reference thread"].startswith("bertgraph-reference")
    assert seen["saved"] == ("m.onnx", "m.check.onnx") and seen["verified"] == "m.check.onnx"
    assert (tmp_path / "m.onnx").read_bytes() == base_export.path.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


def test_a_written_file_that_is_not_its_view_is_not_kept(
    base_export: Export, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """onnxruntime reads the weights through the view; the rest of the file is read too, and must agree."""
    from bertgraph.onnx import export

    real_save = export._save

    def save_then_damage(model: Any, path: Path, view: Path | None) -> None:
        real_save(model, path, view)
        raw = bytearray(path.read_bytes())
        where = raw.index(b"bertgraph")  # the producer's name, a field outside every weight
        raw[where] = ord("B")
        path.write_bytes(bytes(raw))

    monkeypatch.setattr(export, "_save", save_then_damage)
    target = tmp_path / "m.onnx"
    target.write_bytes(b"the user's file")
    with pytest.raises(OnnxError, match=r"^the written file m\.onnx does not hold the model that was verified$"):
        export_onnx_spec(base_export.spec, target)
    assert target.read_bytes() == b"the user's file"
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


def test_weights_name_modules_the_checkpoint_lacks(checkpoints: dict[str, Path]) -> None:
    spec = resolve(str(checkpoints["base"]), "sequence-classification", seq_len=TINY_SEQ)
    text = describe_weights(spec, build_model(spec, weights=True))
    assert text == "checkpoint model.safetensors; random (seed 0) for classifier"


# --- bad input: one line, non-zero exit, nothing left behind -------------------------------------------


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err.strip().splitlines()[-1]


@pytest.mark.parametrize("opset", ["3", "99"])
def test_unsupported_opset_is_refused(opset: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "m.onnx"
    target.write_bytes(b"good")
    code, line = _run(["onnx", "bert-tiny", "-o", str(target), "--opset", opset], capsys)
    assert code == 1 and line.startswith(f"bertgraph: error: opset {opset} is not") and "between 18 and" in line
    assert target.read_bytes() == b"good"


def test_opset_the_model_cannot_convert_to(base_export: Export, tmp_path: Path) -> None:
    """LayerNormalization appeared in opset 17: the exporter's down-conversion to 16 fails."""
    target = tmp_path / "m.onnx"
    with pytest.raises(OnnxError, match=r"could not convert BertModel to opset 16 .*between 18 and"):
        export_onnx_spec(base_export.spec, target, opset=16)
    assert not target.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("opset", [17, 23])
def test_other_opsets_are_exported(opset: int, base_export: Export, tmp_path: Path) -> None:
    result = export_onnx_spec(base_export.spec, tmp_path / "o.onnx", opset=opset)
    assert result.opset == opset and result.verified
    assert onnx.load(str(tmp_path / "o.onnx")).opset_import[0].version == opset


@pytest.mark.parametrize("where", ["missing-folder", "directory"])
def test_unwritable_output(where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "nope" / "m.onnx" if where == "missing-folder" else tmp_path / "dir.onnx"
    if where == "directory":
        output.mkdir()
    code, line = _run(["onnx", "bert-tiny", "-o", str(output)], capsys)
    assert code == 1 and line.startswith("bertgraph: error: ") and str(output) in line
    with pytest.raises(BertgraphError):
        bertgraph.export_onnx("bert-tiny", output)


def test_mismatched_checkpoint_is_refused(
    checkpoints: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "mismatch"
    folder.mkdir()
    for item in checkpoints["base"].iterdir():
        (folder / item.name).write_bytes(item.read_bytes())
    config = json.loads((folder / "config.json").read_text())
    config["intermediate_size"] = 40
    (folder / "config.json").write_text(json.dumps(config))
    target = tmp_path / "m.onnx"
    target.write_bytes(b"good")
    code, line = _run(["onnx", str(folder), "--seq-len", "16", "-o", str(target)], capsys)
    assert code == 1 and line.startswith("bertgraph: error: ") and "intermediate" in line and "40" in line
    assert target.read_bytes() == b"good"
    with pytest.raises(CheckpointError):
        export_onnx_spec(resolve(str(folder), seq_len=16), target)


def test_failed_verification_keeps_the_existing_file(base_export: Export, tmp_path: Path) -> None:
    target = tmp_path / "keep.onnx"
    good = base_export.path.read_bytes()
    target.write_bytes(good)
    # A tolerance of zero: onnxruntime and PyTorch sum in different orders, so they differ in the last bits.
    with pytest.raises(OnnxError, match=r"disagree on \w+ at batch .*: max abs difference .* > 0; the file was not"):
        export_onnx_spec(base_export.spec, target, tolerance=0.0)
    assert target.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["keep.onnx"]  # no temporary file left behind


@pytest.mark.parametrize(
    "content",
    [b"", b"not an onnx model\n", bytes(range(256)) * 8, b'{"model_type": "bert"}', "truncated"],
    ids=["empty", "text", "binary", "json", "truncated"],
)
def test_corrupt_onnx_input(
    content: bytes | str, base_export: Export, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(base_export.path.read_bytes()[:5000] if isinstance(content, str) else content)
    for command in ("params", "summary"):
        code, line = _run([command, str(path)], capsys)
        assert code == 1 and line.startswith("bertgraph: error: ") and "bad.onnx" in line
    with pytest.raises(OnnxError):
        read_onnx(path)


def test_missing_onnx_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, line = _run(["params", str(tmp_path / "absent.onnx")], capsys)
    assert code == 1 and line == f"bertgraph: error: no such ONNX file: {tmp_path / 'absent.onnx'}"
