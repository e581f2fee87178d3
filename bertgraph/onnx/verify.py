"""Is an exported ONNX file right? The full checker, then onnxruntime against PyTorch.

Parity runs at two input sizes other than the export example (the second with padded
rows in ``attention_mask``), on seeded random token ids; every output must agree with
PyTorch eager within the tolerance for the file's dtype, or the file is not kept.
PyTorch's outputs are computed first (:func:`reference_outputs`), so its weights can be
freed before onnxruntime loads the file: the two never hold the weights at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bertgraph import interrupts
from bertgraph.errors import OnnxError, first_line
from bertgraph.model import ModelSpec

if TYPE_CHECKING:
    import numpy as np
    import torch

Progress = Callable[[str], None]
SEED = 0
# The largest |onnxruntime − PyTorch| accepted, by the dtype the file computes in. Both
# sides round every operation to that dtype, in different orders, so the tolerance
# follows its precision: float32 keeps 24 significant bits, float16 11 (measured on
# bert-base-sized models: float32 differs by about 1e-6, float16 by about 4e-3).
TOLERANCES = {"float32": 1e-4, "float16": 3e-2, "float64": 1e-8}
TOLERANCE = TOLERANCES["float32"]


@dataclass(frozen=True)
class ParityCheck:
    """onnxruntime against PyTorch eager at one input size."""

    shape: tuple[int, ...]
    dims: tuple[str, ...]
    padded_rows: int
    max_abs_diff: dict[str, float]

    def size_label(self) -> str:
        text = " × ".join(f"{name} {size}" for name, size in zip(self.dims, self.shape))
        rows = "row" if self.padded_rows == 1 else "rows"
        return f"{text} ({self.padded_rows} {rows} padded)" if self.padded_rows else text


def dim_names(spec: ModelSpec) -> tuple[str, ...]:
    """Names of the input dimensions in the ONNX file."""
    return ("batch", "choices", "sequence") if spec.head == "multiple-choice" else ("batch", "sequence")


def tolerance_for(dtype: str) -> float:
    """The verification tolerance for a file that computes in ``dtype`` (a name: ``float16``)."""
    return TOLERANCES.get(dtype, TOLERANCE)


def check_file(path: Path) -> None:
    """``onnx.checker`` with ``full_check`` (shape inference too), as a one-line error.

    ``path`` may be the view :func:`bertgraph.onnx.save.write_onnx` writes: the file's graph
    with its large tensors as external data inside the file, so the checker reads the
    graph and every tensor's description but not the weights themselves.
    """
    import onnx

    try:
        onnx.checker.check_model(str(path), full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        interrupts.reraise_if_interrupted(error)
        raise OnnxError(f"onnx.checker rejected the exported model: {first_line(error)}") from error
    except Exception as error:  # the checker's C++ code turns a pending signal into its own errors
        interrupts.reraise_if_interrupted(error)
        raise


def parity_sizes(spec: ModelSpec) -> list[tuple[tuple[int, ...], int]]:
    """Two input shapes other than the export example, the second with padded rows.

    Returns ``[(shape, padded_rows), ...]``; shapes follow :func:`dim_names`.
    """
    limit = int(spec.config["max_position_embeddings"])
    example = tuple(max(2, size) for size in spec.example_shape)
    choices = (3, 2) if spec.head == "multiple-choice" else (None, None)
    wanted = [(1, choices[0], 19, 0), (3, choices[1], 45, 2)]
    sizes: list[tuple[tuple[int, ...], int]] = []
    for batch, choice, seq, padded in wanted:
        seq = min(seq, limit)
        shape = tuple(s for s in (batch, choice, seq) if s is not None)
        while (shape == example or any(shape == s for s, _ in sizes)) and seq > 1:
            seq -= 1
            shape = tuple(s for s in (batch, choice, seq) if s is not None)
        sizes.append((shape, padded if seq > 1 else 0))
    return sizes


def random_inputs(spec: ModelSpec, shape: tuple[int, ...], padded_rows: int, seed: int) -> dict[str, np.ndarray]:
    """Seeded token ids and segment ids; ``padded_rows`` rows end in attention-mask zeros."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vocab = int(spec.config["vocab_size"])
    segments = int(spec.config["type_vocab_size"])
    mask = np.ones(shape, dtype=np.int64)
    seq = shape[-1]
    for row in range(1, padded_rows + 1):
        keep = max(1, seq - row * max(1, seq // 4))
        mask[row, ..., keep:] = 0
    return {
        "input_ids": rng.integers(0, vocab, size=shape, dtype=np.int64),
        "attention_mask": mask,
        "token_type_ids": rng.integers(0, segments, size=shape, dtype=np.int64),
    }


@dataclass(frozen=True)
class Reference:
    """PyTorch's outputs for one input size, computed before onnxruntime runs."""

    check: ParityCheck
    feeds: dict[str, np.ndarray]
    outputs: tuple[np.ndarray, ...]


def reference_outputs(wrapper: torch.nn.Module, spec: ModelSpec, progress: Progress | None = None) -> list[Reference]:
    """PyTorch eager outputs at the :func:`parity_sizes`, on seeded inputs.

    Computed first, so the model's weights can be freed before onnxruntime loads the file.
    """
    import torch

    say = progress or (lambda message: None)
    references = []
    for index, (shape, padded) in enumerate(parity_sizes(spec)):
        check = ParityCheck(shape, dim_names(spec), padded, {})
        say(f"running PyTorch at {check.size_label()}")
        feeds = random_inputs(spec, shape, padded, seed=SEED + index)
        with torch.no_grad():
            expected = wrapper(**{name: torch.from_numpy(array) for name, array in feeds.items()})
        references.append(Reference(check, feeds, tuple(output.float().numpy() for output in expected)))
    return references


def verify_parity(
    path: Path,
    references: list[Reference],
    *,
    tolerance: float = TOLERANCE,
    progress: Progress | None = None,
) -> list[ParityCheck]:
    """Run the file with onnxruntime at each reference's size; every output must agree.

    Raises:
        OnnxError: an output differs by more than ``tolerance``, or has another shape.
    """
    import onnxruntime as ort

    say = progress or (lambda message: None)
    options = ort.SessionOptions()
    options.log_severity_level = 3  # onnxruntime's warnings are about its own optimisations
    # The file as written: graph optimisations rewrite it (folding each weight's Transpose
    # into a second copy of the weights), and the priority-based order runs those Transposes
    # just before their MatMuls rather than all at the start. Either would double the memory.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.execution_order = ort.ExecutionOrder.PRIORITY_BASED
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as error:
        interrupts.reraise_if_interrupted(error)
        raise OnnxError(f"onnxruntime cannot load the exported model: {first_line(error)}") from error
    names = [output.name for output in session.get_outputs()]
    checks = []
    for reference in references:
        shell = reference.check
        check = ParityCheck(shell.shape, shell.dims, shell.padded_rows, {})
        say(f"verifying with onnxruntime at {check.size_label()}")
        try:
            actual = session.run(names, reference.feeds)
        except Exception as error:
            interrupts.reraise_if_interrupted(error)
            raise OnnxError(f"onnxruntime failed at {check.size_label()}: {first_line(error)}") from error
        for name, ours, theirs in zip(names, actual, reference.outputs):
            check.max_abs_diff[name] = _compare(name, ours, theirs, check, tolerance)
        checks.append(check)
    return checks


def _compare(name: str, ours: np.ndarray, theirs: np.ndarray, check: ParityCheck, tolerance: float) -> float:
    import numpy as np

    if ours.shape != theirs.shape:
        raise OnnxError(
            f"onnxruntime gives {name} the shape {list(ours.shape)} at {check.size_label()}, PyTorch "
            f"{list(theirs.shape)}; the file was not written"
        )
    difference = np.abs(ours.astype(np.float64) - theirs.astype(np.float64))
    worst = float(difference.max()) if difference.size else 0.0
    if not np.isfinite(difference).all():
        worst = float("inf")
    if worst > tolerance:
        raise OnnxError(
            f"onnxruntime and PyTorch disagree on {name} at {check.size_label()}: max abs difference "
            f"{worst:.2e} > {tolerance:g}; the file was not written"
        )
    return worst
