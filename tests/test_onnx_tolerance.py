"""ONNX verification rejects a file that computes something else, at the tolerance users get."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import bertgraph
from bertgraph.errors import OnnxError
from bertgraph.model import build_model, resolve
from bertgraph.onnx import verify
from bertgraph.onnx.export import ExportableModel, OnnxExportResult

pytestmark = [pytest.mark.onnx, pytest.mark.xdist_group("onnx_tolerance")]  # its fixtures are built once, on one worker

HEAD = "sequence-classification"
DOCUMENTED = 1e-4  # README: "the largest absolute difference must stay within 1e-4"
NUDGE = 1e-3  # well above the documented tolerance, far below a loosened one


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, once: Any) -> tuple[Path, OnnxExportResult]:
    def build() -> tuple[Path, OnnxExportResult]:
        path = tmp_path_factory.mktemp("tolerance") / "model.onnx"
        return path, bertgraph.export_onnx("bert-tiny", path, head=HEAD)  # the public API, default tolerance

    return once("onnx-tolerance", build)


def _wrapper() -> ExportableModel:
    """The PyTorch model the file was exported from (seeded random weights, as the exporter makes them)."""
    spec = resolve("bert-tiny", HEAD)
    return ExportableModel(build_model(spec, weights=True, seed=verify.SEED), ("logits",))


def _nudged(source: Path, target: Path, initializer: str) -> Path:
    model = onnx.load(str(source))
    tensor = next(t for t in model.graph.initializer if t.name == initializer)
    tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor) + np.float32(NUDGE), initializer))
    onnx.save(model, str(target))
    return target


def test_the_public_path_verifies_at_the_documented_tolerance(exported: tuple[Path, OnnxExportResult]) -> None:
    _, result = exported
    assert result.verified
    assert result.tolerance == DOCUMENTED
    assert all(diff <= DOCUMENTED for check in result.parity for diff in check.max_abs_diff.values())
    assert any("(≤ 1e-04, the float32 tolerance)" in line for line in result.report_lines())


def test_a_perturbed_file_fails_verification_at_the_default_tolerance(
    exported: tuple[Path, OnnxExportResult], tmp_path: Path
) -> None:
    path, _ = exported
    spec = resolve("bert-tiny", HEAD)
    references = verify.reference_outputs(_wrapper(), spec)  # PyTorch's outputs, computed once
    checks = verify.verify_parity(path, references)  # the untouched file passes
    assert all(diff <= DOCUMENTED for check in checks for diff in check.max_abs_diff.values())
    nudged = _nudged(path, tmp_path / "nudged.onnx", "classifier.bias")
    with pytest.raises(OnnxError, match=r"disagree on logits at batch 1 × sequence 19: max abs difference 1\.00e-03"):
        verify.verify_parity(nudged, references)
