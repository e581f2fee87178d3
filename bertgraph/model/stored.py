"""What a safetensors checkpoint stores, as plain data: every tensor's dtype, shape, bytes and part.

Read from headers alone — a local file's (:mod:`~bertgraph.model.checkpoint`) or a hub
model's (:mod:`~bertgraph.model.hub`) — so nothing here loads a weight or imports torch.
A quantized checkpoint stores one weight as several tensors: packed integers, scales, zero
points, a group index (GPTQ, AWQ, compressed-tensors, bitsandbytes, MXFP4), or as 8-bit
floats with a scale beside them (FP8). Each tensor's :data:`part <PARTS>` says which, so the
bytes a checkpoint really stores can be summed part by part, and the checkpoint can be held
to a model's parameters (:func:`compare`) without mistaking a packed weight for a stray tensor.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from bertgraph.model.checkpoint import DTYPE_BITS, TensorEntry

# The parts a stored tensor can be.
WEIGHT = "weight"  # a parameter as the model holds it (any float width)
FLOAT8 = "float8"  # a parameter stored in an 8-, 6- or 4-bit float (FP8, FP6, FP4)
PACKED = "packed"  # a weight's values packed into integers (qweight, weight_packed, *_blocks, an int weight)
SCALES = "scales"  # scales that unpack it (scales, weight_scale, weight_scale_inv, absmax, SCB, *_scales)
ZEROS = "zeros"  # zero points (qzeros, weight_zero_point)
G_IDX = "g_idx"  # the quantization group of each input channel (act-order GPTQ)
QUANT_STATE = "quant-state"  # other bookkeeping of a quantizer (quant_map, quant_state.*, weight_shape)
PARTS = (WEIGHT, FLOAT8, PACKED, SCALES, ZEROS, G_IDX, QUANT_STATE)
QUANTIZED_PARTS = (FLOAT8, PACKED, SCALES, ZEROS, G_IDX, QUANT_STATE)

# A name's last component (or its ending) → the part, as the quantizers that write them name them.
_LAST = {
    "qweight": PACKED,
    "weight_packed": PACKED,
    "scales": SCALES,
    "weight_scale": SCALES,
    "weight_scale_inv": SCALES,
    "weight_global_scale": SCALES,
    "input_scale": SCALES,
    "input_global_scale": SCALES,
    "output_scale": SCALES,
    "k_scale": SCALES,
    "v_scale": SCALES,
    "absmax": SCALES,
    "SCB": SCALES,
    "qzeros": ZEROS,
    "zeros": ZEROS,
    "weight_zero_point": ZEROS,
    "input_zero_point": ZEROS,
    "g_idx": G_IDX,
    "weight_g_idx": G_IDX,
    "quant_map": QUANT_STATE,
    "nested_absmax": QUANT_STATE,
    "nested_quant_map": QUANT_STATE,
    "weight_shape": QUANT_STATE,
    "weight_format": QUANT_STATE,
}
_INTEGER_DTYPES = frozenset({"I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64"})
# Low-precision floats a weight is stored in by FP8/FP6/FP4 quantizers.
_SMALL_FLOATS = frozenset({name for name, bits in DTYPE_BITS.items() if name.startswith("F") and bits < 16})
# What a packed tensor's name becomes as the model's parameter: ``x.qweight`` → ``x.weight``.
_PACKED_PARAMETER = re.compile(r"(\.qweight|\.weight_packed)$|_blocks$")

# safetensors dtype names → the names torch gives them (as the graph's parameter table does).
DTYPE_NAMES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "I16": "int16",
    "U16": "uint16",
    "I32": "int32",
    "U32": "uint32",
    "I64": "int64",
    "U64": "uint64",
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
    "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",
    "F6_E2M3": "float6_e2m3",
    "F6_E3M2": "float6_e3m2",
    "F4": "float4_e2m1",
}


def part_of(name: str, dtype: str) -> str:
    """The part of a stored weight a tensor is, by its name and dtype.

    >>> part_of("model.layers.0.mlp.up_proj.qweight", "I32"), part_of("lm_head.weight", "BF16")
    ('packed', 'weight')
    >>> part_of("h.0.mlp.c_fc.weight.absmax", "F32"), part_of("mlp.experts.down_proj_blocks", "U8")
    ('scales', 'packed')
    >>> part_of("layers.0.self_attn.q_proj.weight", "F8_E4M3"), part_of("q_proj.weight", "I8")
    ('float8', 'packed')
    """
    last = name.rsplit(".", 1)[-1]
    if ".quant_state." in name or last.startswith("quant_state"):
        return QUANT_STATE
    if last in _LAST:
        return _LAST[last]
    if last.endswith("_blocks"):
        return PACKED
    if last.endswith("_scales"):
        return SCALES
    if dtype in _SMALL_FLOATS:
        return FLOAT8
    if last == "weight" and dtype in _INTEGER_DTYPES:
        return PACKED
    return WEIGHT


def parameter_of(name: str, part: str) -> str | None:
    """The model parameter a stored tensor holds (all of it, or packed), or None for a quantizer's helper.

    >>> parameter_of("q_proj.qweight", PACKED), parameter_of("experts.gate_up_proj_blocks", PACKED)
    ('q_proj.weight', 'experts.gate_up_proj')
    >>> parameter_of("q_proj.scales", SCALES) is None
    True
    """
    if part in (WEIGHT, FLOAT8):
        return name
    if part == PACKED:
        return _PACKED_PARAMETER.sub(lambda m: ".weight" if m.group(1) else "", name)
    return None


class StoredTensor(NamedTuple):
    """One tensor as a checkpoint stores it."""

    name: str
    dtype: str  # safetensors' name: BF16, I32, F8_E4M3, …
    shape: tuple[int, ...]
    bytes: int
    file: str  # the safetensors file (shard) that holds it
    part: str  # one of PARTS

    @property
    def elements(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Checkpoint:
    """Every tensor a safetensors checkpoint stores, from its headers.

    Attributes:
        source: where it was read: a local file, or ``org/name@commit``.
        files: the safetensors files, in order (one, or the shards an index names).
        sharded: whether an ``index.json`` names the files.
        tensors: every tensor, sorted by name.
        quantization: the config's ``quantization_config.quant_method`` (``gptq``, ``fp8``, …), if any.
    """

    source: str
    files: tuple[str, ...]
    sharded: bool
    tensors: tuple[StoredTensor, ...]
    quantization: str | None = None

    def digest(self) -> str:
        """A hash of everything recorded: graph caches key on it, so another checkpoint is never served."""
        text = json.dumps([self.source, self.files, self.sharded, self.tensors, self.quantization])
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    @property
    def total_bytes(self) -> int:
        return sum(tensor.bytes for tensor in self.tensors)

    @property
    def quantized(self) -> bool:
        return self.quantization is not None or any(t.part in QUANTIZED_PARTS for t in self.tensors)

    def summary(self) -> dict[str, Any]:
        """Plain JSON data: files, tensors and bytes, per dtype and per quantized part (the graph keeps this)."""
        dtypes: dict[str, dict[str, int]] = {}
        parts: dict[str, dict[str, Any]] = {}
        for tensor in self.tensors:
            row = dtypes.setdefault(tensor.dtype, {"tensors": 0, "elements": 0, "bytes": 0})
            row["tensors"] += 1
            row["elements"] += tensor.elements
            row["bytes"] += tensor.bytes
            if tensor.part in QUANTIZED_PARTS:
                part = parts.setdefault(tensor.part, {"tensors": 0, "bytes": 0, "dtypes": []})
                part["tensors"] += 1
                part["bytes"] += tensor.bytes
                if tensor.dtype not in part["dtypes"]:
                    part["dtypes"].append(tensor.dtype)
        for part in parts.values():
            part["dtypes"].sort()
        found: dict[str, Any] = {
            "source": self.source,
            "files": len(self.files),
            "sharded": self.sharded,
            "tensors": len(self.tensors),
            "bytes": self.total_bytes,
            "elements": sum(tensor.elements for tensor in self.tensors),
            # Most bytes first: the first dtype is the one a checkpoint is said to be in.
            "dtypes": dict(sorted(dtypes.items(), key=lambda item: (-item[1]["bytes"], item[0]))),
        }
        if parts:
            found["parts"] = {name: parts[name] for name in PARTS if name in parts}
        if self.quantization:
            found["quantization"] = self.quantization
        return found


def checkpoint_of(
    files: Mapping[str, Mapping[str, TensorEntry]], source: str, sharded: bool, quantization: str | None = None
) -> Checkpoint:
    """A :class:`Checkpoint` from validated headers: file name → tensor name → entry."""
    tensors = []
    for file, entries in files.items():
        for name, entry in entries.items():
            tensors.append(
                StoredTensor(
                    name, entry.dtype, tuple(entry.shape), entry.end - entry.begin, file, part_of(name, entry.dtype)
                )
            )
    return Checkpoint(source, tuple(files), sharded, tuple(sorted(tensors)), quantization)


def quantization_of(config: Mapping[str, Any]) -> str | None:
    """The quantizer a config names (``quantization_config.quant_method``), if any."""
    found = config.get("quantization_config")
    method = found.get("quant_method") if isinstance(found, dict) else None
    return str(method) if isinstance(method, str) and method else None


# How many names a comparison lists of each side.
NAMES_SHOWN = 3


def compare(
    checkpoint: Checkpoint,
    parameters: Sequence[Mapping[str, Any]],
    tied: Mapping[str, str],
    prefix: str,
) -> dict[str, Any]:
    """The checkpoint held to a model's parameters (the graph's ``parameters`` rows and ``tied``).

    Names are compared without the base model's ``prefix`` (a bare model's checkpoint and a
    head model's name the same tensors with and without it); a tied parameter stored under
    either name counts once. A quantized weight (packed, or an 8-bit float) stands for the
    parameter it holds; scales, zero points and other helpers stand for none.

    Returns plain data: ``graph`` (the model's total), ``stored`` (elements of the tensors that
    are parameters as the model holds them), ``quantized`` (parameters stored quantized: tensors,
    elements), ``not_in_model`` and ``not_in_checkpoint`` (tensors, elements and the first names),
    and ``matches``: every parameter stored, every stored tensor a parameter or a helper of one.
    """

    def normal(name: str) -> str:
        return name[len(prefix) + 1 :] if prefix and name.startswith(prefix + ".") else name

    rows = {normal(str(row["name"])): int(row["numel"]) for row in parameters}
    aliases = {normal(alias): normal(name) for alias, name in tied.items()}
    found: set[str] = set()
    stored = 0
    quantized: set[str] = set()
    extra: list[StoredTensor] = []
    for tensor in checkpoint.tensors:
        held = parameter_of(normal(tensor.name), tensor.part)
        if held is None:
            continue  # a quantizer's helper
        canonical = aliases.get(held, held)
        if canonical not in rows:
            extra.append(tensor)
            continue
        if canonical in found:
            continue  # a tied parameter stored twice
        found.add(canonical)
        if tensor.part == WEIGHT:
            stored += tensor.elements
        else:
            quantized.add(canonical)
    missing = sorted(name for name in rows if name not in found)
    result: dict[str, Any] = {
        "graph": sum(rows.values()),
        "stored": stored,
        "not_in_model": _names((t.name for t in extra), sum(t.elements for t in extra)),
        "not_in_checkpoint": _names(missing, sum(rows[name] for name in missing)),
    }
    if quantized:
        result["quantized"] = {"tensors": len(quantized), "elements": sum(rows[name] for name in quantized)}
    result["matches"] = not extra and not missing
    return result


def _names(names: Iterable[str], elements: int) -> dict[str, Any]:
    listed = list(names)
    return {"tensors": len(listed), "elements": elements, "names": listed[:NAMES_SHOWN]}


def stored_shapes(checkpoint: Checkpoint) -> dict[str, list[int]]:
    """Name → shape of the tensors that hold a parameter at the model's shape (for the shape check):
    plain weights and 8-bit floats; packed weights and helpers have shapes of their own."""
    return {t.name: list(t.shape) for t in checkpoint.tensors if t.part in (WEIGHT, FLOAT8)}
