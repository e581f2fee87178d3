"""PyTorch → ONNX with ``torch.onnx.export(dynamo=True)``, verified before it is kept.

The steps, each timed and announced through ``progress``:

1. build the model on the meta device (no memory for weights), in the dtype its
   checkpoint loads in, and estimate the memory the export needs — refusing up front
   when the machine does not have it;
2. export it through torch.export with dynamic ``batch`` and ``sequence`` (and
   ``choices``) dimensions, falling back to the TorchScript exporter (which needs the
   real weights) only when torch.export fails;
3. optimise the graph (:mod:`~bertgraph.onnx.optimise`) with the values of the weights
   hidden from the optimiser, so that no folding or rewrite can depend on them (a fresh
   model's zero biases would otherwise be removed and its identical LayerNorm weights
   merged) and every parameter keeps its PyTorch name and shape;
4. give the initializers the real weights (:mod:`~bertgraph.onnx.weights`): the
   checkpoint's, memory-mapped, or seeded random ones — the values an export of the
   real model holds;
5. label it for Netron: nodes named after their module, model metadata (source,
   head, config, parameter totals, weights, versions), producer ``bertgraph``;
6. write it tensor by tensor (:mod:`~bertgraph.onnx.save`) into a staging folder
   beside the target while a second thread runs PyTorch at two input sizes other than
   the export example, and free its weights; check the file's view with ``onnx.checker``
   (``full_check``) and the rest of the file against it (:mod:`~bertgraph.onnx.framing`),
   then run it in onnxruntime and compare, within a tolerance set by the dtype;
7. only then move it into place, so a failure or an interrupting signal never leaves
   a partial or unverified file and never replaces a good one.

The same command gives a byte-identical file: names come from the traced graph,
and the exporter's stack traces (absolute paths of this machine) are dropped.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from bertgraph import interrupts
from bertgraph.errors import OnnxError, first_line
from bertgraph.files import check_writable, staging_folder
from bertgraph.model import ModelSpec, build_model, example_inputs, resolve
from bertgraph.model.build import ordered_sets, refuse_pickle
from bertgraph.model.families.record import ENCODER_DECODER
from bertgraph.onnx import memory, packages
from bertgraph.onnx.framing import check_framing
from bertgraph.onnx.optimise import check_parameters_kept, name_parameters, optimise, quiet_exporter
from bertgraph.onnx.read import CLASS_HIERARCHY_KEY, NAME_SCOPES_KEY, NAMESPACE_KEY, PRODUCER, module_of_node
from bertgraph.onnx.save import write_onnx, write_onnx_external
from bertgraph.onnx.verify import (
    SEED,
    TOLERANCE,
    ParityCheck,
    check_file,
    dim_names,
    input_dims,
    reference_outputs,
    sequence_limit,
    tolerance_for,
    verify_parity,
)
from bertgraph.onnx.weights import (
    apply_weights,
    check_readable,
    checkpoint_dtype,
    export_dtype,
    load_weights,
    release_weights,
)
from bertgraph.tracing import collector
from bertgraph.tracing.export import without_stack_traces

if TYPE_CHECKING:
    import onnx_ir as ir

Progress = Callable[[str], None]


def output_names(spec: ModelSpec) -> tuple[str, ...]:
    """The head's outputs, named and ordered as the family record gives them (ModelOutput fields)."""
    return spec.family.heads[spec.head].outputs


def export_inputs(spec: ModelSpec) -> tuple[str, ...]:
    """The inputs an export takes: of those the spec's head takes, what the type's tokenizer gives
    (:func:`tokenizer_inputs`: RoBERTa's, XLM-R's and CamemBERT's give no ``token_type_ids``, so
    the file takes none and the model reads its zeros) and the decoder's; all of them for a type
    transformers names no tokenizer for."""
    given = tokenizer_inputs(spec.model_type)
    if given is None:
        return spec.input_names
    return tuple(name for name in spec.input_names if name in given or name.startswith("decoder_"))


def tokenizer_inputs(model_type: str) -> frozenset[str] | None:
    """``model_input_names`` of the tokenizer transformers' auto table gives ``model_type``
    (``RobertaTokenizer``: ``input_ids``, ``attention_mask``); None when it names none it has."""
    import transformers
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES

    names = TOKENIZER_MAPPING_NAMES.get(model_type)
    for name in names if isinstance(names, (list, tuple)) else (names,):
        found = getattr(getattr(transformers, name, None), "model_input_names", None) if name else None
        if found:
            return frozenset(found)
    return None


# The opsets torch.onnx's exporter implements; others are silently left unconverted
# by its version converter, so they are refused up front.
MIN_OPSET = 18
# Below MIN_OPSET the exporter converts the graph down, which works only when every op
# existed then (LayerNormalization needs 17): tried, and refused when the result differs.
OLDEST_OPSET = 7
# Protobuf cannot serialise a message of 2 GiB or more; keep headroom for the graph.
EXTERNAL_DATA_THRESHOLD = 2**31 - 2**27
_MAX_BATCH = 4096
_STACK_TRACE_KEY = "pkg.torch.onnx.stack_trace"
_EXPORTERS = ("auto", "dynamo", "torchscript")


@dataclass
class OnnxExportResult:
    """What an export produced and how it was checked (``report_lines()`` renders it)."""

    path: Path
    model: str
    head: str
    model_class: str
    opset: int
    exporter: str
    weights: str
    inputs: dict[str, list[int | str]]
    outputs: dict[str, list[int | str]]
    parameters: int
    dtype: str = "float32"
    checkpoint_dtype: str = "float32"
    file_size: int = 0
    data_path: Path | None = None
    checked: bool = False
    parity: list[ParityCheck] = field(default_factory=list)
    tolerance: float = TOLERANCE
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def verified(self) -> bool:
        return self.checked and bool(self.parity)

    @property
    def max_abs_diff(self) -> float:
        """The largest difference over every output and size (0.0 when not verified)."""
        return max((d for check in self.parity for d in check.max_abs_diff.values()), default=0.0)

    def _dtype_text(self) -> str:
        if self.checkpoint_dtype == self.dtype:
            return self.dtype
        widened = self.checkpoint_dtype
        return f"{widened} stored as {self.dtype} (onnxruntime has no {widened} CPU kernels)"

    def report_lines(self) -> list[str]:
        """A short, aligned report for the terminal."""
        storage = f"weights in {self.data_path.name}" if self.data_path else "self-contained"
        lines = [
            f"model     {self.model} ({self.model_class}), head {self.head}, {self.parameters:,} parameters",
            f"exporter  {self.exporter}, opset {self.opset}",
            f"weights   {self.weights}, {self._dtype_text()}",
            f"file      {self.path.name}, {_human_bytes(self.file_size)} ({storage})",
            "inputs    " + ", ".join(f"{n} {_dims_text(d)}" for n, d in self.inputs.items()),
            "outputs   " + ", ".join(f"{n} {_dims_text(d)}" for n, d in self.outputs.items()),
        ]
        if self.checked:
            lines.append("checker   onnx.checker full_check passed")
        for index, check in enumerate(self.parity):
            diffs = ", ".join(f"{name} {diff:.1e}" for name, diff in check.max_abs_diff.items())
            label = "parity    " if index == 0 else "          "
            lines.append(
                f"{label}{check.size_label()}: max |onnxruntime − PyTorch| {diffs} "
                f"(≤ {self.tolerance:.0e}, the {self.dtype} tolerance)"
            )
        if not self.verified:
            lines.append("verify    skipped (--no-verify)")
        steps = " · ".join(f"{step} {seconds:.1f} s" for step, seconds in self.timings.items())
        lines.append(f"time      {steps}")
        return lines


def _dims_text(dims: list[int | str]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"


# --- public entry points -------------------------------------------------------------------


def export_onnx(
    model: str,
    path: str | Path,
    head: str = "base",
    *,
    opset: int | None = None,
    verify: bool = True,
    seq_len: int | None = None,
    batch: int = 1,
    allow_pickle: bool = False,
    progress: Progress | None = None,
    **overrides: int,
) -> OnnxExportResult:
    """Export a model of any supported family to a verified ONNX file.

    Parameters:
        model: a preset, a directory with config.json (and model.safetensors), a
            config.json path or a cached hub id.
        path: the ``.onnx`` file to write; weights go to ``PATH.data`` beside it above 2 GB.
        head: a head the model's family has (``base``, ``masked-lm``, ``causal-lm``, ``seq2seq-lm``, …).
        opset: the ONNX opset (default: the exporter's).
        verify: run ``onnx.checker`` and compare onnxruntime with PyTorch before keeping the file.
        seq_len, batch: the example size (default 128 positions, fewer when the model has
            fewer); the file accepts any size up to the model's positions.
        overrides: ``layers``, ``hidden``, ``heads``, ``kv_heads``, ``intermediate``, ``vocab``, ``num_labels``.

    Returns:
        An :class:`OnnxExportResult` with the figures of the export and its verification.

    Raises:
        OnnxError, CheckpointError, ConfigError, ModelReferenceError: one-line messages.
    """
    sizes: dict[str, int | None] = dict(overrides)
    spec = resolve(model, head, overrides=sizes, batch=batch, seq_len=seq_len, allow_pickle=allow_pickle)
    return export_onnx_spec(spec, Path(path), opset=opset, verify=verify, progress=progress)


def export_onnx_spec(
    spec: ModelSpec,
    output: Path,
    opset: int | None = None,
    verify: bool = True,
    progress: Progress | None = None,
    *,
    exporter: str = "auto",
    tolerance: float | None = None,
    external_data_threshold: int = EXTERNAL_DATA_THRESHOLD,
) -> OnnxExportResult:
    """Export a resolved spec to ``output`` (see the module docstring for the steps).

    Parameters:
        exporter: ``auto`` (torch.export, TorchScript only if that fails), ``dynamo``
            (never fall back) or ``torchscript`` (the legacy exporter).
        tolerance: the largest absolute difference verification accepts (default: by the
            dtype the file computes in, :data:`bertgraph.onnx.verify.TOLERANCES`).
        external_data_threshold: weights above this many bytes go to ``PATH.data``.
    """
    say = progress or (lambda message: None)
    if exporter not in _EXPORTERS:
        raise OnnxError(f"unknown exporter {exporter!r}; choose one of: {', '.join(_EXPORTERS)}")
    packages.require(packages.EXPORT, "ONNX export")
    spec = replace(spec, inputs=export_inputs(spec))
    target = check_writable(output)
    _check_opset(opset)
    check_readable(spec)
    refuse_pickle(spec)  # before the export's minute, not after it
    timings: dict[str, float] = {}
    dtype = export_dtype(spec)
    # As in tracing: no automatic collection while torch.export and the exporter build their
    # millions of objects (a seventh of the command's time); one collection after, before the weights.
    with collector.paused() as settle:
        with _timed(timings, "build"):
            meta = _meta_model(spec, dtype)
            weight_bytes = sum(t.numel() * t.element_size() for t in [*meta.parameters(), *meta.buffers()])
            memory.check_memory(weight_bytes, verify, f"{spec.name} ({spec.model_class})")
        settle()
        onnx_model, exporter_used, model = _convert(meta, spec, opset, exporter, say, timings)
    if model is None:
        with _timed(timings, "weights"):
            say(f"loading {_weights_phrase(spec)}")
            with _no_progress_bars():
                model = for_export(load_weights(spec), spec)
            apply_weights(onnx_model, model)
    weights = describe_weights(spec, model)
    _label(onnx_model, spec, model, weights, exporter_used)
    result = OnnxExportResult(
        path=target,
        model=spec.name,
        head=spec.head,
        model_class=spec.model_class,
        opset=_opset_of(onnx_model),
        exporter=exporter_used,
        weights=weights,
        inputs=_io_dims(onnx_model.graph.inputs),
        outputs=_io_dims(onnx_model.graph.outputs),
        parameters=sum(p.numel() for p in meta.parameters()),
        dtype=dtype,
        checkpoint_dtype=checkpoint_dtype(spec),
        tolerance=tolerance_for(dtype) if tolerance is None else tolerance,
        timings=timings,
    )
    external = _weight_bytes(onnx_model) > external_data_threshold
    holder = [ExportableModel(model, output_names(spec))]
    del model  # from here on only ``holder`` and the initializers hold the weights
    _write_verified(onnx_model, result, holder, spec, external=external, verify=verify, say=say)
    return result


# Families exported with transformers' eager attention instead of SDPA, and why. T5's
# attention hands SDPA a float position bias as its mask; torch's fake SDPA kernel then
# gives the output the strides of a transposed layout, which its decomposition in
# torch.onnx does not, so the ``view`` after the transpose fails there ("Cannot view a
# tensor with shape [batch, seq, heads, d_kv] and strides … as [batch, seq, inner]").
EAGER_ATTENTION: dict[str, str] = {
    "t5": "torch.onnx cannot decompose SDPA with T5's position bias (a view of a transposed output)",
}


def _meta_model(spec: ModelSpec, dtype: str) -> torch.nn.Module:
    """The spec's model with fake CPU tensors (meta storage), in the dtype the file computes in.

    A model whose initialisation asks for values (ModernBERT's truncated-normal init decides
    on the data) cannot be built among fake tensors; it is built on the meta device and its
    tensors made fake CPU ones of the same shapes afterwards (their values are never read:
    the export sees shapes, and the real weights are applied to the initializers later), and
    its tied weights tied again.
    """
    from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensorMode

    try:
        model = build_model(spec, weights=False, fake=True, dtype=dtype)
    except DataDependentOutputException:
        model = build_model(spec).to(getattr(torch, dtype))
        with FakeTensorMode(allow_non_fake_inputs=True):
            model = model.to_empty(device="cpu")
        model.tie_weights()  # type: ignore[operator]  # new tensors, so tied parameters are one again
    return for_export(model, spec)


def for_export(model: torch.nn.Module, spec: ModelSpec) -> torch.nn.Module:
    """The model with the attention implementation its family exports with (:data:`EAGER_ATTENTION`)."""
    if spec.family.name in EAGER_ATTENTION:
        model.set_attn_implementation("eager")  # type: ignore[operator]
    return model


def _convert(
    meta: torch.nn.Module,
    spec: ModelSpec,
    opset: int | None,
    exporter: str,
    say: Progress,
    timings: dict[str, float],
) -> tuple[ir.Model, str, torch.nn.Module | None]:
    """Export, then (torch.export only) optimise with every parameter kept under its name.

    Returns the ONNX model, the exporter's description, and the real model when the
    export needed it (its initializers hold the real weights already): the TorchScript
    exporter traces real tensors, and converting below opset 18 serialises the weights.
    """
    model = None
    with _timed(timings, "export"):
        source = meta
        if opset is not None and opset < MIN_OPSET and exporter != "torchscript":
            with _no_progress_bars():
                model = source = for_export(load_weights(spec), spec)
        onnx_model, exporter_used = _export(ExportableModel(source, output_names(spec)), spec, opset, exporter, say)
        if onnx_model is None:
            if model is None:
                with _no_progress_bars():
                    model = for_export(load_weights(spec), spec)
            onnx_model = _export_torchscript(ExportableModel(model, output_names(spec)), spec, opset, say)
    if opset is not None and _opset_of(onnx_model) != opset:
        raise OnnxError(
            f"the exporter could not convert {spec.model_class} to opset {opset} (it stayed at opset "
            f"{_opset_of(onnx_model)}); use --opset between {MIN_OPSET} and {max_opset()}, or leave it out"
        )
    if exporter_used.startswith("torch.export"):
        with _timed(timings, "optimise"):
            say("optimising the ONNX graph (weights kept as they are)")
            optimise(onnx_model)
            name_parameters(onnx_model, meta)
            check_parameters_kept(onnx_model, meta)
    return onnx_model, exporter_used, model


def _write_verified(
    onnx_model: ir.Model,
    result: OnnxExportResult,
    holder: list[ExportableModel],
    spec: ModelSpec,
    *,
    external: bool,
    verify: bool,
    say: Progress,
) -> None:
    """Write into a staging folder beside the target, verify there, then move into place.

    Memory: the weights are held once while writing and running PyTorch, then freed
    (``holder`` is emptied) before the checker and onnxruntime each load the file.
    """
    target = result.path
    with staging_folder(target) as staging:
        staged = staging / target.name
        data = staged.with_name(staged.name + ".data") if external else None
        # What the checker reads: the file's graph and tensor descriptions, the weights left in place.
        view = staged if external else staging / f"{target.stem}.check.onnx"
        # PyTorch's reference outputs are computed on a second thread while the file is written:
        # both read the same weights, the one thread mostly in its kernels, the other in writes.
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bertgraph-reference")
        try:
            with _timed(result.timings, "save"):
                pending = pool.submit(reference_outputs, holder[0], spec, say) if verify else None
                say(f"writing {target.name}" + (f" and {target.name}.data" if external else ""))
                _save(onnx_model, staged, None if external else view)
                references = pending.result() if pending else []
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        holder.clear()  # the last references to the weights: freed now (mapped checkpoint pages too)
        release_weights(onnx_model)
        if verify:
            with _timed(result.timings, "check"):
                say("checking with onnx.checker (full_check)")
                check_file(view)
                if view != staged:
                    check_framing(staged, view)
                result.checked = True
            with _timed(result.timings, "verify"):
                result.parity = verify_parity(view, references, tolerance=result.tolerance, progress=say)
        result.file_size = staged.stat().st_size + (data.stat().st_size if data else 0)
        result.data_path = _move_into_place(staged, data, target)


# --- the model wrapper ------------------------------------------------------------------


class ExportableModel(torch.nn.Module):
    """A transformers model that returns its head's outputs as a plain tuple.

    The wrapper adopts the model's children instead of holding the model as a child,
    so parameter names and module paths stay exactly those of ``named_parameters()``
    (``bert.encoder.layer.0…``, not ``model.bert.encoder…``) in the exported file.
    """

    wrapped: torch.nn.Module

    def __init__(self, model: torch.nn.Module, outputs: tuple[str, ...]) -> None:
        super().__init__()
        # Held outside the module tree: the wrapper is the root torch.export records.
        object.__setattr__(self, "wrapped", model)
        self.output_names = outputs
        for name, child in model.named_children():
            self.add_module(name, child)
        for name, parameter in model.named_parameters(recurse=False):
            self.register_parameter(name, parameter)
        for name, buffer in model.named_buffers(recurse=False):
            self.register_buffer(name, buffer)
        # The model's own tensors, outside its children (BART's ``final_logits_bias``): ``forward``
        # hands them to the model from the wrapper.
        self.own_tensors = tuple(self._parameters) + tuple(self._buffers)
        self.train(model.training)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, ...]:
        # Every input a family's head takes (its record's ``input_names``), in that order;
        # the ones a head does not take are left out of the call, not passed as None.
        given = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": token_type_ids,
            "decoder_input_ids": decoder_input_ids,
            "decoder_attention_mask": decoder_attention_mask,
        }
        inputs = {name: value for name, value in given.items() if value is not None}
        if self.own_tensors:
            # torch.export swaps its tracing tensors in for the wrapper's, not the model's: read off the model
            # itself, its own tensors are constants the non-strict capture refuses ("a fake tensor in the
            # exported program constant's list"), and torch.onnx falls back to the strict capture, twice as slow.
            own = {name: getattr(self, name) for name in self.own_tensors}
            result = torch.func.functional_call(self.wrapped, own, (), {**inputs, "return_dict": True})
        else:
            result = self.wrapped.forward(**inputs, return_dict=True)
        return tuple(result[name] for name in self.output_names)


def output_dims(spec: ModelSpec, output: str) -> tuple[str, ...]:
    """The dynamic dimensions an output starts with (its last one may be a fixed size).

    Pooled and sequence-level outputs have one row per example; an encoder-decoder's
    outputs other than the encoder's states follow the decoder's length.
    """
    names = dict(zip(spec.dim_names, dim_names(spec)))
    if output in ("pooler_output", "seq_relationship_logits", "sop_logits"):
        return ("batch",)
    if spec.head == "multiple-choice":
        return ("batch", "choices")
    if spec.head in ("sequence-classification", "next-sentence"):
        return ("batch",)
    if spec.family.structure == ENCODER_DECODER and output != "encoder_last_hidden_state":
        return ("batch", names.get("tgt", "sequence"))
    return ("batch", "sequence")


# --- exporting ----------------------------------------------------------------------------


def max_opset() -> int:
    """The highest opset torch.onnx's exporter declares support for."""
    from torch.onnx import _constants

    return int(getattr(_constants, "ONNX_MAX_OPSET", 23))


def _check_opset(opset: int | None) -> None:
    if opset is None:
        return
    high = max_opset()
    if not OLDEST_OPSET <= opset <= high:
        raise OnnxError(
            f"opset {opset} is not one the ONNX exporter can target; use --opset between {MIN_OPSET} and {high} "
            "(or leave it out for the exporter's default)"
        )


# How torch.onnx captured the model: it tries the non-strict capture first and falls back to the
# strict one (TorchDynamo), about twice as slow, when that fails.
_CAPTURES = {"TorchExportNonStrictStrategy": ", non-strict capture", "TorchExportStrictStrategy": ", strict capture"}


def _export(
    wrapper: ExportableModel, spec: ModelSpec, opset: int | None, exporter: str, say: Progress
) -> tuple[ir.Model | None, str]:
    """The ONNX IR model torch.export made of the meta-device ``wrapper`` and a description of
    the exporter; ``None`` for the model when the TorchScript exporter is to be used instead."""
    if exporter == "torchscript":
        return None, "TorchScript exporter (requested)"
    say(f"exporting {spec.model_class} with torch.export (dynamic {', '.join(dim_names(spec))})")
    try:
        with quiet_exporter(), without_stack_traces(), ordered_sets(wrapper):  # stacks are dropped when labelling
            program = torch.onnx.export(
                wrapper,
                (),
                kwargs=example_inputs(spec, device="cpu"),
                dynamo=True,
                dynamic_shapes=_dynamic_shapes(spec),
                input_names=list(spec.input_names),
                output_names=list(wrapper.output_names),
                opset_version=opset,
                optimize=False,
                verbose=False,
            )
    except Exception as error:  # whatever stops torch.export is a reason to try the legacy exporter
        interrupts.reraise_if_interrupted(error)
        if exporter == "dynamo":
            raise OnnxError(f"torch.export could not export {spec.model_class}: {exporter_reason(error)}") from error
        reason = exporter_reason(error)
        say(f"torch.export could not export {spec.model_class} ({reason}); using the TorchScript exporter")
        return None, f"TorchScript exporter (fallback: torch.export failed: {reason})"
    if program is None:  # only the TorchScript exporter returns nothing
        raise OnnxError(f"torch.onnx.export returned no program for {spec.model_class}")
    capture = _CAPTURES.get(str(getattr(program, "_capture_strategy", "")), "")
    return program.model, f"torch.export (dynamo){capture}, torch {torch.__version__}"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_EXCEPTION_CLASS = re.compile(r"^<class '[\w.]+'>: ")


def exporter_reason(error: BaseException) -> str:
    """What stopped torch.onnx, in one line: its "Exception summary" when it gives one
    (the first line only says which step failed), without terminal colour codes."""
    text = _ANSI.sub("", str(error))
    summary = text.split("## Exception summary", 1)
    if len(summary) == 2:
        found = [line.strip() for line in summary[1].splitlines() if line.strip()]
        if found:
            text = _EXCEPTION_CLASS.sub("", found[0])  # "<class 'ValueError'>: Cannot view …"
    return first_line(ValueError(text))


def _dynamic_shapes(spec: ModelSpec) -> dict[str, dict[int, Any]]:
    from torch.export import Dim

    limit = sequence_limit(spec)
    sizes = {"batch": _MAX_BATCH, "choices": _MAX_BATCH, "sequence": limit, "decoder_sequence": limit}
    dims = {name: Dim(name, min=1, max=sizes[name]) for name in dim_names(spec)}
    return {name: {axis: dims[dim] for axis, dim in enumerate(names)} for name, names in input_dims(spec).items()}


def _export_torchscript(wrapper: ExportableModel, spec: ModelSpec, opset: int | None, say: Progress) -> ir.Model:
    """The legacy exporter: positional inputs, ``dynamic_axes``, written to a temporary file."""
    import onnx_ir as ir

    say(f"exporting {spec.model_class} with the TorchScript exporter")
    inputs = example_inputs(spec, device="cpu")
    axes = {name: dict(enumerate(dims)) for name, dims in input_dims(spec).items()}
    axes.update({name: dict(enumerate(output_dims(spec, name))) for name in wrapper.output_names})
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        try:
            with quiet_exporter(), ordered_sets(wrapper):
                torch.onnx.export(
                    wrapper,
                    tuple(inputs[name] for name in spec.input_names),
                    str(path),
                    dynamo=False,
                    input_names=list(spec.input_names),
                    output_names=list(wrapper.output_names),
                    dynamic_axes=axes,
                    opset_version=opset,
                )
        except Exception as error:
            message = f"the TorchScript exporter could not export {spec.model_class}: {first_line(error)}"
            raise OnnxError(message) from error
        model = ir.load(path)
        # Read every tensor now: the temporary file goes away with the folder.
        for value in model.graph.initializers.values():
            if value.const_value is not None:
                value.const_value = ir.Tensor(value.const_value.numpy(), name=value.name)
    return model


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """transformers draws a progress bar while loading weights; bertgraph reports steps itself."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


# --- labels and metadata ----------------------------------------------------------------


def _weights_phrase(spec: ModelSpec) -> str:
    checkpoint = spec.weights_file()
    return f"weights from {checkpoint.name}" if checkpoint else f"random weights (seed {SEED})"


def describe_weights(spec: ModelSpec, model: torch.nn.Module) -> str:
    """``checkpoint model.safetensors`` or ``random (seed 0)``, naming modules a checkpoint lacked."""
    from bertgraph.model import safetensors_shapes

    checkpoint = spec.weights_file()
    if checkpoint is None:
        return f"random (seed {SEED})"
    text = f"checkpoint {checkpoint.name}"
    if not checkpoint.name.startswith("model.safetensors"):
        return text
    prefix = getattr(model, "base_model_prefix", "bert")

    def normal(name: str) -> str:
        return name[len(prefix) + 1 :] if name.startswith(prefix + ".") else name

    stored = {normal(name) for name in safetensors_shapes(checkpoint)}
    missing = [name for name, _ in model.named_parameters() if normal(name) not in stored]
    if not missing:
        return text
    modules = list(dict.fromkeys(name.rsplit(".", 1)[0] for name in missing))
    shown = ", ".join(modules[:4]) + (f" and {len(modules) - 4} more" if len(modules) > 4 else "")
    return f"{text}; random (seed {SEED}) for {shown}"


def metadata(spec: ModelSpec, weights: str, exporter: str) -> dict[str, str]:
    """The model-level metadata Netron shows in its sidebar (and :mod:`bertgraph.onnx.read` reads back)."""
    from bertgraph.graph import schema as g
    from bertgraph.graph import stats
    from bertgraph.tracing import skeleton
    from bertgraph.version import __version__

    facts = skeleton(spec)
    totals = stats.parameter_stats(facts)
    tied = facts.graph.get(g.G_TIED, {})
    return {
        "model": spec.name,
        "model_source": spec.source,
        "head": spec.head,
        "model_class": spec.model_class,
        "family": spec.family.name,
        "model_type": spec.model_type,
        "structure": spec.family.structure,
        "backbone": str(facts.graph.get(g.G_BACKBONE, "")),
        "stacks": json.dumps(facts.graph.get(g.G_STACKS, {}), sort_keys=True),
        "config": json.dumps(spec.summary()),
        "parameters": str(totals["total"]),
        "parameter_groups": json.dumps(totals["groups"]),
        "tied_parameters": json.dumps(tied, sort_keys=True),
        "weights": weights,
        "inputs": _inputs_text(spec),
        "example": json.dumps(dict(zip(dim_names(spec), spec.example_shape))),
        "exporter": exporter,
        "bertgraph_version": __version__,
    }


def _inputs_text(spec: ModelSpec) -> str:
    """``input_ids, attention_mask: int64 [batch, sequence]``, one group per shape."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, dims in input_dims(spec).items():
        groups.setdefault(dims, []).append(name)
    return "; ".join(f"{', '.join(names)}: int64 [{', '.join(dims)}]" for dims, names in groups.items())


def _label(model: ir.Model, spec: ModelSpec, torch_model: torch.nn.Module, weights: str, exporter: str) -> None:
    """Producer, description, metadata, and node names that say which module they belong to."""
    import onnx_ir as ir

    from bertgraph.version import __version__

    model.producer_name = PRODUCER
    model.producer_version = __version__
    model.doc_string = f"{spec.model_class} of {spec.name} (head {spec.head}), exported by bertgraph {__version__}"
    model.graph.name = spec.model_class
    model.metadata_props.clear()
    model.metadata_props.update(metadata(spec, weights, exporter))
    wrapper = f"{ExportableModel.__module__}.{ExportableModel.__qualname__}"
    real = f"{type(torch_model).__module__}.{type(torch_model).__qualname__}"
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        props = node.metadata_props
        # Absolute paths of this machine: private, and they would make files differ between installs.
        props.pop(_STACK_TRACE_KEY, None)
        for key in (CLASS_HIERARCHY_KEY, NAMESPACE_KEY):
            if key in props:
                props[key] = props[key].replace(wrapper, real)
        if NAME_SCOPES_KEY not in props:
            continue  # named by another exporter (TorchScript scopes its names itself)
        module, _ = module_of_node(dict(props), node.name or "")
        if module and node.name and not node.name.startswith(module + "/"):
            node.name = f"{module}/{node.name}"


def _opset_of(model: ir.Model) -> int:
    return int(model.opset_imports.get("", model.opset_imports.get("ai.onnx", 0)))


def _io_dims(values: Any) -> dict[str, list[int | str]]:
    dims: dict[str, list[int | str]] = {}
    for value in values:
        shape = value.shape if value.shape is not None else []
        dims[str(value.name)] = [d if isinstance(d, int) else str(d.value or "?") for d in shape]
    return dims


# --- saving ------------------------------------------------------------------------------


def _weight_bytes(model: ir.Model) -> int:
    return sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)


def _save(model: ir.Model, path: Path, view: Path | None) -> None:
    """Self-contained, with a view for the checker; or (``view`` None) with the weights in ``PATH.data``."""
    try:
        if view is None:
            write_onnx_external(model, path, f"{path.name}.data")
        else:
            write_onnx(model, path, view=view)
    except (OSError, ValueError) as error:
        raise OnnxError(f"cannot write {path.name}: {first_line(error)}") from error


def _move_into_place(staged: Path, data: Path | None, target: Path) -> Path | None:
    """Move the verified file (and its weights, first) over the target."""
    moves = [(data, target.with_name(target.name + ".data"))] if data else []
    moves.append((staged, target))
    for source, destination in moves:
        if destination.exists():
            os.chmod(source, destination.stat().st_mode & 0o777)
        os.replace(source, destination)
    return moves[0][1] if data else None


# --- small helpers ---------------------------------------------------------------------------


@contextmanager
def _timed(timings: dict[str, float], step: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[step] = timings.get(step, 0.0) + time.perf_counter() - start
