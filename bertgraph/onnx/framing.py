"""Does a self-contained ONNX file parse into exactly the model its view describes?

Verification reads the file through its view (:func:`bertgraph.onnx.save.write_onnx`):
the checker and onnxruntime see the file's graph, and each weight as the bytes at an
offset inside the file, memory-mapped rather than parsed and copied. What that leaves
unread is the protobuf framing around those bytes: the keys and lengths that make the
file one ``ModelProto``. :func:`check_framing` reads exactly that — every byte of the
file but the weights' own — and requires the message it spells to be the view's, with
each weight's data at the offset the view gave onnxruntime.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, TYPE_CHECKING

from bertgraph.errors import OnnxError
from bertgraph.onnx.save import encode_varint, length_key

if TYPE_CHECKING:
    import onnx

# The path from a model to a weight's bytes (field numbers of onnx.proto): ModelProto.graph,
# GraphProto.initializer, TensorProto.raw_data. Every other field is read whole.
_MODEL, _GRAPH, _TENSOR = "model", "graph", "tensor"
_INNER = {(_MODEL, 7): _GRAPH, (_GRAPH, 5): _TENSOR}
_RAW_DATA = 9
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
_FIXED_SIZES = {_FIXED64: 8, _FIXED32: 4}

Extent = tuple[int, int]  # (offset, length) of a tensor's raw data in the file


class FramingError(ValueError):
    """The bytes are not one well-formed protobuf message."""


def check_framing(path: Path, view: Path) -> None:
    """The file at ``path`` must be the view's model, each external tensor's data where the view puts it.

    Raises:
        OnnxError: the file does not parse, or parses into another model than the view.
    """
    import onnx
    from google.protobuf.message import DecodeError

    expected = onnx.load(str(view), load_external_data=False)
    try:
        with open(path, "rb") as stream:
            skeleton, extents = model_without_data(stream)
            found = onnx.ModelProto()
            found.ParseFromString(skeleton)
            _fill_inline(found, expected, extents, stream, path.name)
    except (FramingError, ValueError, DecodeError) as error:
        raise OnnxError(f"the written file {path.name} is not a well-formed ONNX model: {error}") from error
    if found != expected:
        raise OnnxError(f"the written file {path.name} does not hold the model that was verified")


def model_without_data(stream: IO[bytes]) -> tuple[bytes, list[Extent | None]]:
    """The message in ``stream`` with every initializer's raw data left out, and where each was.

    Returns the serialised rest of the model (it parses as a ``ModelProto``) and, per
    initializer in file order, the extent of its raw data (``None``: it has none). Reads
    every byte but those of the raw data.

    Raises:
        FramingError: a key, length or field does not fit the bytes.
    """
    size = stream.seek(0, 2)
    stream.seek(0)
    extents: list[Extent | None] = []

    def walk(end: int, level: str) -> bytes:
        parts = []
        raw: Extent | None = None
        while stream.tell() < end:
            start = stream.tell()
            number, kind = divmod(_read_varint(stream, end), 8)
            if number == 0 or kind not in (_VARINT, _FIXED64, _LENGTH, _FIXED32):
                raise FramingError(f"no field can have the key {number << 3 | kind} (at byte {start})")
            if kind != _LENGTH:
                _skip_scalar(stream, kind, end)
                parts.append(_read_at(stream, start, stream.tell() - start))
                continue
            length = _read_varint(stream, end)
            body = stream.tell()
            if body + length > end:
                raise FramingError(f"field {number} at byte {start} runs past the end of its message")
            inner = _INNER.get((level, number))
            if inner is not None:
                content = walk(body + length, inner)
                if stream.tell() != body + length:
                    raise FramingError(f"field {number} at byte {start} ends inside a field of its own")
                parts.append(length_key(number) + encode_varint(len(content)) + content)
            elif level == _TENSOR and number == _RAW_DATA:
                if raw is not None:
                    raise FramingError(f"a tensor has its raw data twice (at byte {start})")
                raw = (body, length)
                stream.seek(body + length)
            else:
                parts.append(_read_at(stream, start, body + length - start))
        if level == _TENSOR:
            extents.append(raw)
        return b"".join(parts)

    return walk(size, _MODEL), extents


def _fill_inline(
    found: onnx.ModelProto, expected: onnx.ModelProto, extents: list[Extent | None], stream: IO[bytes], name: str
) -> None:
    """Put back the data the view holds inline; for the rest, check the view's offsets and drop them.

    Afterwards ``found`` equals ``expected`` exactly when the file is the view's model.
    """
    import onnx

    if len(found.graph.initializer) != len(expected.graph.initializer):
        return  # a different model: the comparison says so
    for extent, ours, theirs in zip(extents, found.graph.initializer, expected.graph.initializer):
        if theirs.data_location == onnx.TensorProto.EXTERNAL:
            entries = {entry.key: entry.value for entry in theirs.external_data}
            given = (int(entries.get("offset", "0")), int(entries.get("length", "-1")))
            if entries.get("location") != name or extent != given:
                raise FramingError(f"tensor {theirs.name} is not where the view read it ({extent} vs {given})")
            theirs.ClearField("external_data")
            theirs.ClearField("data_location")
        elif extent is not None:
            ours.raw_data = _read_at(stream, *extent)


def _read_at(stream: IO[bytes], offset: int, length: int) -> bytes:
    stream.seek(offset)
    data = stream.read(length)
    if len(data) != length:
        raise FramingError(f"the file ends inside a field (at byte {offset + len(data)})")
    return data


def _read_varint(stream: IO[bytes], end: int) -> int:
    value, shift = 0, 0
    while True:
        if stream.tell() >= end or shift > 63:
            raise FramingError(f"a number runs past its message (at byte {stream.tell()})")
        byte = stream.read(1)
        if not byte:
            raise FramingError("the file ends inside a number")
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7


def _skip_scalar(stream: IO[bytes], kind: int, end: int) -> None:
    if kind == _VARINT:
        _read_varint(stream, end)
        return
    after = stream.tell() + _FIXED_SIZES[kind]
    if after > end:
        raise FramingError(f"a fixed-size field runs past its message (at byte {stream.tell()})")
    stream.seek(after)
