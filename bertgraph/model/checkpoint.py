"""Checkpoint files, read and validated from their headers without torch.

A safetensors file is an 8-byte little-endian header length, a JSON header (tensor name
→ dtype, shape, byte offsets) and the tensor bytes. :func:`read_header` checks everything
the header promises before any tensor is loaded, as the safetensors library does when it
opens a file: every entry well-formed, offsets contiguous from 0, each tensor's byte size
equal to dtype × shape, and the data ending exactly at the end of the file. A truncated
download, a corrupt header or offsets pointing outside the file are one clear error here
instead of a failure deep inside tracing or ONNX export. An ``.index.json`` (sharded
checkpoint) is checked the same way: valid JSON, a ``weight_map`` of names to shard
files beside it, every shard present and valid, every tensor in the shard that names it.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any, NamedTuple

from bertgraph.errors import CheckpointError, first_line
from bertgraph.files import path_kind

# Bits per element of every dtype the safetensors format defines.
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "F8_E8M0": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}
MAX_HEADER_BYTES = 100_000_000  # the safetensors library's own limit
MAX_INDEX_BYTES = 64 * 1024 * 1024
_HINT = "the file is damaged or truncated; save the checkpoint again (save_pretrained)"


class TensorEntry(NamedTuple):
    """One tensor as a safetensors header describes it."""

    dtype: str
    shape: list[int]
    begin: int
    end: int


def _bad(path: Path | str, detail: str) -> CheckpointError:
    return CheckpointError(f"{path} is not a valid safetensors file: {detail}; {_HINT}")


def read_header(path: Path) -> dict[str, TensorEntry]:
    """Tensor name → :class:`TensorEntry` of one safetensors file, validated completely.

    Raises:
        CheckpointError: the file cannot be read or its header is wrong in any way (one line).
    """
    try:
        with path.open("rb") as handle:
            size = path.stat().st_size
            prefix = handle.read(8)
            length = header_length(prefix, size, path)
            raw = handle.read(length)
    except OSError as error:
        raise CheckpointError(f"cannot read {path}: {error.strerror or error}") from error
    return parse_header(raw, size - 8 - length, path)


def header_length(prefix: bytes, size: int | None, path: Path | str) -> int:
    """The header length a safetensors file's first 8 bytes give, checked against the format's
    limit and (when known) the file's ``size``."""
    if len(prefix) < 8:
        raise _bad(path, f"it is {len(prefix)} bytes long, shorter than the 8-byte header length")
    (length,) = struct.unpack("<Q", prefix[:8])
    if length > MAX_HEADER_BYTES:
        raise _bad(path, f"the header length {length:,} is above the format's {MAX_HEADER_BYTES:,} bytes")
    if size is not None and 8 + length > size:
        raise _bad(path, f"the header needs {length:,} bytes but the file holds {size - 8:,} after the length")
    return int(length)


def parse_header(raw: bytes, data_bytes: int, path: Path | str) -> dict[str, TensorEntry]:
    """The tensors a safetensors header (its JSON bytes) describes, validated as :func:`read_header`
    does: ``data_bytes`` is what the file holds after the header, which the tensors must tile.

    ``path`` names the file in messages: a local path, or a hub file (``org/name@commit:model.safetensors``).
    """
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as error:
        raise _bad(path, f"the header is not JSON ({first_line(error)})") from error
    if not isinstance(header, dict):
        raise _bad(path, f"the header is a JSON {type(header).__name__}, not an object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and (
        not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values())
    ):
        raise _bad(path, "__metadata__ must map names to strings")
    entries = {name: _entry(path, name, value) for name, value in header.items()}
    _check_layout(path, entries, data_bytes)
    return entries


def _entry(path: Path | str, name: str, value: Any) -> TensorEntry:
    if not isinstance(value, dict):
        raise _bad(path, f"tensor {name!r} is described by a JSON {type(value).__name__}, not an object")
    missing = [key for key in ("dtype", "shape", "data_offsets") if key not in value]
    if missing:
        raise _bad(path, f"tensor {name!r} has no {' or '.join(missing)}")
    dtype, shape, offsets = value["dtype"], value["shape"], value["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise _bad(path, f"tensor {name!r} has dtype {_brief(dtype)}, which safetensors does not define")
    if not isinstance(shape, list) or not all(_whole(d) for d in shape):
        raise _bad(path, f"tensor {name!r} has shape {_brief(shape)}; a shape is a list of whole numbers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_whole(o) for o in offsets)):
        raise _bad(path, f"tensor {name!r} has data_offsets {_brief(offsets)}; they are two whole numbers [begin, end]")
    begin, end = offsets
    if end < begin:
        raise _bad(path, f"tensor {name!r} ends (byte {end:,}) before it begins (byte {begin:,})")
    bits = math.prod(shape) * DTYPE_BITS[dtype]
    if bits % 8:
        raise _bad(path, f"tensor {name!r} ({dtype} × {_brief(shape)}) does not fill a whole number of bytes")
    nbytes = bits // 8
    if end - begin != nbytes:
        raise _bad(
            path,
            f"tensor {name!r} ({dtype} × {_brief(shape)}) needs {nbytes:,} bytes but its data_offsets span "
            f"{end - begin:,}",
        )
    return TensorEntry(dtype, list(shape), begin, end)


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_layout(path: Path | str, entries: dict[str, TensorEntry], data_bytes: int) -> None:
    """Tensors must tile the data area from byte 0 to its end, without gaps or overlaps."""
    position = 0
    for name, entry in sorted(entries.items(), key=lambda item: (item[1].begin, item[1].end)):
        if entry.begin != position:
            where = "overlaps the tensor before it" if entry.begin < position else f"leaves a gap at byte {position:,}"
            raise _bad(path, f"tensor {name!r} starts at byte {entry.begin:,} and {where}")
        position = entry.end
    if position > data_bytes:
        raise _bad(path, f"its tensors need {position:,} bytes of data but the file holds {data_bytes:,}")
    if position < data_bytes:
        raise _bad(path, f"its tensors use {position:,} bytes of data but the file holds {data_bytes:,}")


def read_index(path: Path) -> dict[str, str]:
    """Tensor name → shard file name of a sharded checkpoint's ``.index.json``, validated.

    Raises:
        CheckpointError: not JSON, no ``weight_map``, or a shard name that leaves the folder.
    """
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_INDEX_BYTES + 1)
    except OSError as error:
        raise CheckpointError(f"cannot read {path}: {error.strerror or error}") from error
    if len(raw) > MAX_INDEX_BYTES:
        raise CheckpointError(f"{path} is larger than {MAX_INDEX_BYTES // 2**20} MB; an index is a list of names")
    try:
        index = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as error:
        raise CheckpointError(f"{path} is not valid JSON ({first_line(error)}); save the checkpoint again") from error
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{path} has no weight_map of tensor names to shard files; save the checkpoint again")
    for shard in set(weight_map.values()):
        if not shard or Path(shard).name != shard or shard in (".", "..") or "\x00" in shard:
            raise CheckpointError(f"{path} names shard {shard!r}; shards are file names in the same folder")
    return dict(weight_map)


def read_checkpoint(path: Path) -> dict[str, TensorEntry]:
    """Every tensor of a safetensors file or of all shards an index names, validated."""
    tensors: dict[str, TensorEntry] = {}
    for entries in read_checkpoint_files(path).values():
        tensors.update(entries)
    return tensors


def read_checkpoint_files(path: Path) -> dict[str, dict[str, TensorEntry]]:
    """File name → its tensors, for a safetensors file or every shard an index names, validated."""
    if not path.name.endswith(".index.json"):
        return {path.name: read_header(path)}
    weight_map = read_index(path)
    files: dict[str, dict[str, TensorEntry]] = {}
    for shard in sorted(set(weight_map.values())):
        shard_path = path.parent / shard
        found = path_kind(shard_path)
        if found.kind == "missing":
            raise CheckpointError(f"{path} names shard {shard}, which is not in {path.parent}; copy it there")
        if found.kind != "file":
            raise CheckpointError(f"cannot read shard {shard_path}: it is {found.description}")
        files[shard] = read_header(shard_path)
    check_index(path, weight_map, files)
    return files


def check_index(path: Path | str, weight_map: dict[str, str], files: dict[str, dict[str, TensorEntry]]) -> None:
    """Every tensor an index lists must be in the shard it names."""
    absent = sorted(name for name, shard in weight_map.items() if name not in files.get(shard, {}))
    if absent:
        raise CheckpointError(
            f"{path} lists {len(absent)} tensor(s) its shards do not hold (first: {absent[0]!r}); save the "
            "checkpoint again"
        )


def safetensors_shapes(path: Path) -> dict[str, list[int]]:
    """Tensor name → shape from a safetensors file or index, reading and validating headers only."""
    return {name: entry.shape for name, entry in read_checkpoint(path).items()}


# The dtypes a floating-point weight may be stored in: loading them into the model changes no value's meaning.
FLOAT_DTYPES = frozenset({"F16", "BF16", "F32", "F64"})


def check_checkpoint(
    expected: dict[str, list[int]],
    found: dict[str, list[int]],
    path: Path | str,
    prefix: str,
    floating: frozenset[str] = frozenset(),
    dtypes: dict[str, str] | None = None,
) -> None:
    """Every checkpoint tensor the model uses must have the shape the config gives it, and a
    weight the model holds in floating point (``floating``) a floating dtype (``dtypes``).

    ``prefix`` is the base-model prefix (``bert``): checkpoints of a bare BertModel and of
    a model with a head name the same tensors with and without it. A bool or int8 tensor
    where a float weight belongs is quantised or damaged data: cast silently, it would
    give a file that computes something else, so it is refused.
    """

    def normal(name: str) -> str:
        return name[len(prefix) + 1 :] if name.startswith(prefix + ".") else name

    wanted = {normal(name): shape for name, shape in expected.items()}
    floating_keys = {normal(name) for name in floating}
    matched = 0
    for name, shape in sorted(found.items()):
        key = normal(name)
        if key not in wanted:
            continue
        matched += 1
        dtype = (dtypes or {}).get(name)
        if dtype is not None and dtype not in FLOAT_DTYPES and key in floating_keys:
            raise CheckpointError(
                f"{path}: tensor {name!r} is {dtype}, where the model has a floating-point weight; bertgraph "
                "does not cast quantised or boolean weights: save the checkpoint in float32, float16 or bfloat16"
            )
        if list(wanted[key]) != list(shape):
            raise CheckpointError(
                f"{path}: tensor {name!r} has shape {list(shape)} but the config needs "
                f"{list(wanted[key])}; use the config.json saved with these weights "
                "(and no size overrides)"
            )
    if not matched:
        raise CheckpointError(f"{path} holds none of the model's tensors; is it a BERT checkpoint for this config?")
