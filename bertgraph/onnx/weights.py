"""Weights for an ONNX file exported from a meta-device model.

The graph is exported from a model without weights; its initializers are then given
the tensors of the model bertgraph has always exported — the checkpoint's, loaded with
transformers (memory-mapped from safetensors), or seeded random ones
(``torch.manual_seed(SEED)``, then the model class) — one tensor at a time, without
copies. So the file holds exactly the values an export of the real model would, while
the exporter never needs memory for them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bertgraph.errors import BertgraphError, CheckpointError, OnnxError, first_line
from bertgraph.model import ModelSpec, build_model
from bertgraph.onnx.verify import SEED

if TYPE_CHECKING:
    import onnx_ir as ir
    import torch

# onnxruntime has no bfloat16 kernels on the CPU (not even Add), so a bfloat16 file could
# never be verified or run there: such checkpoints are exported as float32, which holds
# every bfloat16 value exactly.
WIDENED = {"bfloat16": "float32"}
_FLOAT_NAMES = ("float32", "float16", "bfloat16", "float64")
_SAFETENSORS_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64"}


def checkpoint_dtype(spec: ModelSpec) -> str:
    """The floating dtype transformers loads the spec's weights in (``float32`` without a checkpoint).

    Like ``from_pretrained(dtype="auto")``: the config's ``dtype`` (or ``torch_dtype``),
    else the first floating tensor of a safetensors checkpoint.
    """
    if spec.weights_file() is None:
        return "float32"  # seeded random weights are built by the model class, in float32
    for key in ("dtype", "torch_dtype"):
        value = spec.config.get(key)
        if isinstance(value, str) and value in _FLOAT_NAMES:
            return value
    if spec.weights is not None:
        for dtype in _stored_dtypes(spec.weights):
            if dtype in _SAFETENSORS_DTYPES:
                return _SAFETENSORS_DTYPES[dtype]
    return "float32"


def export_dtype(spec: ModelSpec) -> str:
    """The dtype the ONNX file computes in: the checkpoint's, bfloat16 widened to float32."""
    dtype = checkpoint_dtype(spec)
    return WIDENED.get(dtype, dtype)


def check_readable(spec: ModelSpec) -> None:
    """Open the checkpoint's safetensors files (header and extent only), before the long export.

    Raises:
        CheckpointError: a file is truncated, has tensors at bad offsets or is not safetensors.
    """
    from safetensors import safe_open

    if spec.weights is None:
        return
    for path in _safetensors_files(spec.weights):
        try:
            with safe_open(str(path), framework="pt"):
                pass
        except Exception as error:  # the reader's own error type; said in one line
            raise CheckpointError(
                f"cannot load weights from {path}: {first_line(error)}; is the checkpoint complete?"
            ) from error


def load_weights(spec: ModelSpec) -> torch.nn.Module:
    """The model with the weights bertgraph exports, bfloat16 widened to float32.

    Raises:
        CheckpointError: the checkpoint cannot be read (truncated, bad offsets, not safetensors, …).
    """
    import torch

    try:
        model = build_model(spec, weights=True, seed=SEED)
    except BertgraphError:
        raise
    except Exception as error:  # whatever a damaged file makes the loader raise, said in one line
        from bertgraph import interrupts

        interrupts.reraise_if_interrupted(error)
        checkpoint = spec.weights_file()
        if checkpoint is None:
            raise OnnxError(f"cannot build {spec.name} with random weights: {first_line(error)}") from error
        raise CheckpointError(
            f"cannot load weights from {checkpoint}: {first_line(error)}; is the checkpoint complete?"
        ) from error
    dtype = model_dtype(model)
    if dtype in WIDENED:
        model = model.to(getattr(torch, WIDENED[dtype]))
    return model


def model_dtype(model: torch.nn.Module) -> str:
    """The floating dtype of a model's parameters, as a name (``float32``)."""
    for parameter in model.parameters():
        if parameter.is_floating_point():
            return str(parameter.dtype).removeprefix("torch.")
    return "float32"


def apply_weights(onnx_model: ir.Model, model: torch.nn.Module) -> None:
    """Give every initializer that holds a meta tensor the model's tensor of the same name.

    Raises:
        OnnxError: an initializer has no tensor in the model, or one of another shape or dtype
            (a bug in the export: the file would not be the model's).
    """
    from torch.onnx._internal.exporter._core import TorchTensor

    tensors: dict[str, Any] = dict(model.named_parameters())
    tensors.update(model.named_buffers())
    for name, value in onnx_model.graph.initializers.items():
        placeholder: Any = getattr(value.const_value, "raw", None)
        if not _is_placeholder(placeholder):
            continue
        tensor = tensors.get(name)
        if tensor is None or tensor.shape != placeholder.shape or tensor.dtype != placeholder.dtype:
            found = None if tensor is None else f"{list(tensor.shape)} {tensor.dtype}"
            raise OnnxError(
                f"the weights do not fit the exported graph: initializer {name} is "
                f"{list(placeholder.shape)} {placeholder.dtype}, the model has {found}; "
                "this is a bug in the export, please report it"
            )
        value.const_value = TorchTensor(tensor.detach(), name)


def _is_placeholder(tensor: Any) -> bool:
    """A tensor without data: meta, or fake (meta storage behind a CPU device)."""
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(tensor, FakeTensor) or bool(getattr(tensor, "is_meta", False))


def release_weights(onnx_model: ir.Model) -> None:
    """Drop the initializers' tensors (once written), so their memory can go back before verifying."""
    for value in onnx_model.graph.initializers.values():
        value.const_value = None


def _safetensors_files(path: Path) -> list[Path]:
    """A safetensors file, or the shards an index names."""
    if not path.name.endswith(".index.json"):
        return [path]
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
        shards = sorted(set(index.get("weight_map", {}).values()))
    except (OSError, ValueError, AttributeError) as error:
        raise CheckpointError(f"{path} is not a readable safetensors index ({first_line(error)})") from error
    return [path.parent / str(shard) for shard in shards]


def _stored_dtypes(path: Path) -> list[str]:
    """Tensor dtypes of a safetensors file (or an index's first shard), read from its header."""
    from safetensors import safe_open

    try:
        first = _safetensors_files(path)[0]
        with safe_open(str(first), framework="pt") as handle:
            return [handle.get_slice(key).get_dtype() for key in handle.keys()]  # noqa: SIM118 (not a dict)
    except Exception:
        return []  # check_readable and the loader report what is wrong with the file
