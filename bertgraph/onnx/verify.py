"""Is an exported ONNX file right? The full checker, then onnxruntime against PyTorch.

Parity runs at two input sizes other than the export example (the second with padded
rows in ``attention_mask``), on seeded random token ids; every output must agree with
PyTorch eager within the tolerance for the file's dtype, or the file is not kept.
PyTorch's outputs are computed first (:func:`reference_outputs`), so its weights can be
freed before onnxruntime opens the file: the two never hold the weights at once. The
export hands :func:`verify_parity` the file's view, whose weights onnxruntime maps from
the file itself (:mod:`bertgraph.onnx.framing` holds the rest of the file to that view).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bertgraph import interrupts
from bertgraph.errors import OnnxError, first_line
from bertgraph.model import ModelSpec

if TYPE_CHECKING:
    import numpy as np
    import onnxruntime as ort
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


# The family records' dimension names → the names the ONNX file gives them (``seq`` is
# spelled out; the decoder's length of an encoder-decoder is a dimension of its own).
ONNX_DIMS = {"batch": "batch", "choices": "choices", "seq": "sequence", "tgt": "decoder_sequence"}


def dim_names(spec: ModelSpec) -> tuple[str, ...]:
    """Names of every input dimension in the ONNX file, in the order of :attr:`ModelSpec.dim_names`."""
    return tuple(ONNX_DIMS[name] for name in spec.dim_names)


def input_dims(spec: ModelSpec) -> dict[str, tuple[str, ...]]:
    """Input name → the ONNX names of its dimensions, from the family record."""
    return {name: tuple(ONNX_DIMS[dim] for dim in dims) for name, dims in spec.input_dims.items()}


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


# Verification runs PyTorch and onnxruntime on one thread each. Its inputs are a few dozen
# tokens, too small for threads to pay: a multi-threaded kernel there mostly waits at its
# barriers, and on a busy machine (a CI runner, shared cores) a waiting thread spins until
# its descheduled peers run again. Measured on 2 shared cores for bert-base's reference
# outputs: 0.7–0.9 s on one thread, 3.5–5.5 s on two. The numbers compared are the same
# computations either way; the tolerance does not change.
VERIFY_THREADS = 1


@contextmanager
def _torch_threads(count: int) -> Iterator[None]:
    """PyTorch's intra-op threads set to ``count`` for the block, restored after it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# The two verification sizes of each dimension; the second size pads some rows.
_PARITY_SIZES = {"batch": (1, 3), "choices": (3, 2), "sequence": (19, 45), "decoder_sequence": (11, 29)}
_PADDED_ROWS = (0, 2)


def parity_sizes(spec: ModelSpec) -> list[tuple[tuple[int, ...], int]]:
    """Two input shapes other than the export example, the second with padded rows.

    Returns ``[(shape, padded_rows), ...]``; shapes follow :func:`dim_names`. Sequence
    lengths stay within the model's positions; the decoder's length differs from the
    encoder's, so a file that mixed them up fails.
    """
    names = dim_names(spec)
    limit = sequence_limit(spec)
    example = tuple(max(2, size) for size in spec.example_shape)
    sizes: list[tuple[tuple[int, ...], int]] = []
    for index, padded in enumerate(_PADDED_ROWS):
        wanted = {name: _PARITY_SIZES[name][index] for name in names}
        for name in ("sequence", "decoder_sequence"):
            if name in wanted:
                wanted[name] = min(wanted[name], limit)
        shape = tuple(wanted[name] for name in names)
        last = max(i for i, name in enumerate(names) if name != "batch" and name != "choices")
        while (shape == example or any(shape == s for s, _ in sizes)) and shape[last] > 1:
            shape = (*shape[:last], shape[last] - 1, *shape[last + 1 :])
        sizes.append((shape, padded if shape[names.index("sequence")] > 1 else 0))
    return sizes


def sequence_limit(spec: ModelSpec) -> int:
    """The longest sequence verification and the file's dynamic axes allow.

    Learned positions bound it (RoBERTa's count from ``pad_token_id + 1``, so two of its
    514 positions are never used); relative or rotary positions bound it only by
    ``MAX_SEQUENCE``.
    """
    limit = spec.max_positions  # the usable positions: the family record knows RoBERTa's offset
    if limit is None:
        return MAX_SEQUENCE
    return max(2, limit)


def position_offset(spec: ModelSpec) -> int:
    """Positions a family's embedding skips (RoBERTa-like models start after the padding index)."""
    return spec.family.position_offset(spec.config)


MAX_SEQUENCE = 4096


def random_inputs(spec: ModelSpec, shape: tuple[int, ...], padded_rows: int, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs for every input of the spec's head, at ``shape`` (over :func:`dim_names`).

    Token ids are drawn below the vocabulary, segment ids below the token types;
    ``padded_rows`` rows end in attention-mask zeros (the decoder's mask too). Heads that
    read each row's end-of-sequence token (encoder-decoder classification) find exactly
    one, at the row's last kept position.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    sizes = dict(zip(dim_names(spec), shape))
    vocab = int(spec.family.size(spec.config, "vocab"))
    token_types = int(spec.config.get(spec.family.token_types or "", 0) or 0)
    eos = _eos_token(spec)
    feeds: dict[str, np.ndarray] = {}
    for name, dims in input_dims(spec).items():
        dims_shape = tuple(sizes[dim] for dim in dims)
        if name.endswith("attention_mask"):
            feeds[name] = _padding_mask(dims_shape, padded_rows)
        elif name == "token_type_ids":
            feeds[name] = rng.integers(0, max(1, token_types), size=dims_shape, dtype=np.int64)
        else:
            ids = rng.integers(0, vocab, size=dims_shape, dtype=np.int64)
            if eos is not None and name == "input_ids":
                ids[ids == eos] = (eos + 1) % vocab
                kept = _padding_mask(dims_shape, padded_rows).sum(axis=-1)
                np.put_along_axis(ids, (kept - 1)[..., None], eos, axis=-1)
            feeds[name] = ids
    return feeds


def _padding_mask(shape: tuple[int, ...], padded_rows: int) -> np.ndarray:
    import numpy as np

    mask = np.ones(shape, dtype=np.int64)
    seq = shape[-1]
    for row in range(1, min(padded_rows, shape[0] - 1) + 1):
        keep = max(1, seq - row * max(1, seq // 4))
        mask[row, ..., keep:] = 0
    return mask


def _eos_token(spec: ModelSpec) -> int | None:
    """The end-of-sequence id an encoder-decoder classifier reads each row at, else None."""
    from bertgraph.model.families.record import ENCODER_DECODER

    if spec.family.structure != ENCODER_DECODER or spec.head != "sequence-classification":
        return None
    eos = spec.config.get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) and eos else eos
    return int(eos) if isinstance(eos, int) and not isinstance(eos, bool) else None


@dataclass(frozen=True)
class Reference:
    """PyTorch's outputs for one input size, computed before onnxruntime runs.

    ``kept``: where outputs along the sequence are compared (``None``: everywhere).
    """

    check: ParityCheck
    feeds: dict[str, np.ndarray]
    outputs: tuple[np.ndarray, ...]
    kept: np.ndarray | None = None


# Families whose outputs at padded positions are undefined, and why: those positions are
# not compared. ModernBERT's sliding window leaves a padded position near the end of a row
# with no real token in reach; its attention row is all masked, and PyTorch's SDPA and
# ONNX's Softmax make different things of it (differences of about 3e-4 there, 1e-7 at
# every real token).
UNDEFINED_AT_PADDING: dict[str, str] = {
    "modernbert": "a padded position beyond the sliding window sees no real token",
}


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
        try:
            with torch.no_grad(), _torch_threads(VERIFY_THREADS):
                expected = wrapper(**{name: torch.from_numpy(array) for name, array in feeds.items()})
        except Exception as error:  # the model itself fails on inputs its config allows
            interrupts.reraise_if_interrupted(error)
            raise OnnxError(
                f"PyTorch cannot run {spec.model_class} at {check.size_label()} ({first_line(error)}), so the file "
                "cannot be verified; check the config's sizes, or export with --no-verify"
            ) from error
        kept = feeds["attention_mask"].astype(bool) if spec.family.name in UNDEFINED_AT_PADDING else None
        references.append(Reference(check, feeds, tuple(output.float().numpy() for output in expected), kept))
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
    say = progress or (lambda message: None)
    session = open_session(path)
    names = [output.name for output in session.get_outputs()]
    checks = [ParityCheck(r.check.shape, r.check.dims, r.check.padded_rows, {}) for r in references]
    for check in checks:
        say(f"verifying with onnxruntime at {check.size_label()}")
    # One run per size, at once: each computes on its own thread (onnxruntime leaves the
    # interpreter lock while it runs), so two sizes take about as long as the larger one.
    with ThreadPoolExecutor(max_workers=max(1, len(references))) as pool:
        runs = [pool.submit(session.run, names, reference.feeds) for reference in references]
        for check, reference, run in zip(checks, references, runs):
            try:
                actual = run.result()
            except Exception as error:
                interrupts.reraise_if_interrupted(error)
                raise OnnxError(f"onnxruntime failed at {check.size_label()}: {first_line(error)}") from error
            for name, ours, theirs in zip(names, actual, reference.outputs):
                check.max_abs_diff[name] = _compare(name, ours, theirs, check, tolerance, reference.kept)
    return checks


def open_session(path: Path) -> ort.InferenceSession:
    """An onnxruntime session of the file as written, on :data:`VERIFY_THREADS` threads.

    Raises:
        OnnxError: onnxruntime cannot load the file.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3  # onnxruntime's warnings are about its own optimisations
    # The file as written: graph optimisations rewrite it (folding each weight's Transpose
    # into a second copy of the weights), and the priority-based order runs those Transposes
    # just before their MatMuls rather than all at the start. Either would double the memory.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.execution_order = ort.ExecutionOrder.PRIORITY_BASED
    options.intra_op_num_threads = options.inter_op_num_threads = VERIFY_THREADS
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as error:
        interrupts.reraise_if_interrupted(error)
        raise OnnxError(f"onnxruntime cannot load the exported model: {first_line(error)}") from error
    return session


def _compare(
    name: str, ours: np.ndarray, theirs: np.ndarray, check: ParityCheck, tolerance: float, kept: np.ndarray | None
) -> float:
    import numpy as np

    if ours.shape != theirs.shape:
        raise OnnxError(
            f"onnxruntime gives {name} the shape {list(ours.shape)} at {check.size_label()}, PyTorch "
            f"{list(theirs.shape)}; the file was not written"
        )
    difference = np.abs(ours.astype(np.float64) - theirs.astype(np.float64))
    if kept is not None and difference.shape[: kept.ndim] == kept.shape:
        difference = difference[kept]  # every real token's row; padded ones are undefined
    worst = float(difference.max()) if difference.size else 0.0
    if not np.isfinite(difference).all():
        worst = float("inf")
    if worst > tolerance:
        raise OnnxError(
            f"onnxruntime and PyTorch disagree on {name} at {check.size_label()}: max abs difference "
            f"{worst:.2e} > {tolerance:g}; the file was not written"
        )
    return worst
