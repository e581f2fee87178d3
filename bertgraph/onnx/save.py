"""Writing an ONNX model tensor by tensor, so the weights are never copied into one buffer.

``onnx_ir.save`` builds the whole ``ModelProto`` and serialises it: three copies of the
weights (the tensors, the message, its bytes) live at once. Protobuf writes a message as
its fields in field-number order, each a key, a length and the bytes, so the same file
can be written in pieces: everything but the tensor data is serialised as usual, and
each initializer's data goes straight from its tensor to the file, between the bytes
that precede and follow it. The file is byte for byte what ``onnx_ir.save`` writes
(the test suite compares the two).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx
    import onnx_ir as ir


def write_onnx(model: ir.Model, path: Path, view: Path | None = None) -> None:
    """Write ``model`` as one self-contained ``.onnx`` file, streaming each initializer's data.

    Parameters:
        view: also write here (in the same folder) the same model with every streamed
            initializer stored as external data *inside* ``path``: its exact bytes, by
            offset. ``onnx.checker`` then checks the graph and every tensor's type, shape
            and extent without loading the weights (twice: file and message) into memory.

    Raises:
        OSError: the file cannot be written.
    """
    import onnx
    import onnx_ir as ir

    streamed = _streamable(model)
    with _hollowed(model, streamed):
        proto = ir.serde.serialize_model(model)
    graph_field = _number(onnx.ModelProto, "graph")
    initializer_field = _number(onnx.GraphProto, "initializer")
    data_field = _number(onnx.TensorProto, "raw_data")

    tensors = list(proto.graph.initializer)
    proto.graph.ClearField("initializer")
    model_low, model_high = _split(proto, graph_field)
    graph_low, graph_high = _split(proto.graph, initializer_field)
    pieces = []  # (bytes before the data, data tensor or None, its size, bytes after)
    for tensor_proto in tensors:
        source = streamed.get(tensor_proto.name) if tensor_proto.HasField("raw_data") else None
        if source is None:
            body = tensor_proto.SerializeToString()
            pieces.append((length_key(initializer_field) + encode_varint(len(body)) + body, None, 0, b""))
            continue
        size = int(source.nbytes)
        if size != math.ceil(math.prod(source.shape.numpy()) * source.dtype.itemsize):
            raise ValueError(f"tensor {tensor_proto.name} holds {size} bytes, not what its shape and type need")
        low, high = _split(tensor_proto, data_field)
        data_key = length_key(data_field) + encode_varint(size)
        length = len(low) + len(data_key) + size + len(high)
        head = length_key(initializer_field) + encode_varint(length) + low + data_key
        pieces.append((head, source, size, high))
    graph_length = len(graph_low) + len(graph_high) + sum(len(a) + n + len(b) for a, _, n, b in pieces)

    extents: dict[str, tuple[int, int]] = {}  # name → (offset, length) of its data in the file
    with open(path, "wb") as stream:
        stream.write(model_low)
        stream.write(length_key(graph_field) + encode_varint(graph_length))
        stream.write(graph_low)
        for (head, source, size, tail), tensor_proto in zip(pieces, tensors):
            stream.write(head)
            if source is not None:
                extents[tensor_proto.name] = (stream.tell(), size)
                _write_data(stream, source, size)
            stream.write(tail)
        stream.write(graph_high)
        stream.write(model_high)
    if view is not None:
        _write_view(proto, tensors, extents, streamed, path, view)


# Smaller tensors stay in the view: shape inference reads constants (axes, shapes, slice bounds).
VIEW_INLINE_BYTES = 4096


def _write_view(
    proto: onnx.ModelProto,
    tensors: list[onnx.TensorProto],
    extents: dict[str, tuple[int, int]],
    streamed: dict[str, Any],
    path: Path,
    view: Path,
) -> None:
    """The model with its streamed initializers as external data inside ``path``."""
    import onnx

    for tensor_proto in tensors:
        if tensor_proto.name not in extents:
            continue
        offset, length = extents[tensor_proto.name]
        if length <= VIEW_INLINE_BYTES:
            tensor_proto.raw_data = streamed[tensor_proto.name].tobytes()
        else:
            tensor_proto.ClearField("raw_data")
            tensor_proto.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", path.name), ("offset", str(offset)), ("length", str(length))):
                entry = tensor_proto.external_data.add()
                entry.key, entry.value = key, value
    proto.graph.initializer.extend(tensors)
    view.write_bytes(proto.SerializeToString())


def write_onnx_external(model: ir.Model, path: Path, data_name: str) -> None:
    """Write ``model`` with its initializers in ``data_name`` beside it (for models over 2 GB).

    ``onnx_ir`` writes external data one tensor at a time already.
    """
    import onnx_ir as ir

    ir.save(model, path, external_data=data_name)


def _streamable(model: ir.Model) -> dict[str, Any]:
    """Initializers whose bytes can be written straight from the tensor, by name."""
    import onnx_ir as ir

    streamed = {}
    for name, value in model.graph.initializers.items():
        tensor = value.const_value
        if tensor is None or isinstance(tensor, ir.ExternalTensor | ir.StringTensor | ir.serde.TensorProtoTensor):
            continue
        streamed[name] = tensor
    return streamed


class _Hollow:
    """A tensor's name, type and shape without its data: serialises with empty ``raw_data``."""

    def __init__(self, tensor: Any) -> None:
        self.name = tensor.name
        self.doc_string = tensor.doc_string
        self.dtype = tensor.dtype
        self.shape = tensor.shape
        self.metadata_props = tensor.metadata_props
        self.meta = tensor.meta
        self.size = 0
        self.nbytes = 0

    def tobytes(self) -> bytes:
        return b""

    def numpy(self) -> Any:
        raise TypeError("a hollow tensor has no data")

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise TypeError("a hollow tensor has no data")


@contextmanager
def _hollowed(model: ir.Model, streamed: dict[str, Any]) -> Iterator[None]:
    """Stand-ins without data for the streamed tensors while the rest is serialised."""
    initializers = model.graph.initializers
    try:
        for name, tensor in streamed.items():
            initializers[name].const_value = _Hollow(tensor)  # type: ignore[assignment]
        yield
    finally:
        for name, tensor in streamed.items():
            initializers[name].const_value = tensor


def _write_data(stream: IO[bytes], tensor: Any, size: int) -> None:
    """The tensor's little-endian bytes, written from its own memory when it allows that."""
    start = stream.tell()
    if hasattr(tensor, "tofile"):
        tensor.tofile(stream)
    else:
        stream.write(tensor.tobytes())
    written = stream.tell() - start
    if written != size:
        raise OSError(f"wrote {written} bytes of tensor {tensor.name}, expected {size}")


def _split(message: Any, number: int) -> tuple[bytes, bytes]:
    """The serialised fields of ``message`` numbered below ``number``, and those above it."""
    low, high = type(message)(), type(message)()
    low.CopyFrom(message)
    high.CopyFrom(message)
    for field, _ in message.ListFields():
        if field.number >= number:
            low.ClearField(field.name)
        if field.number <= number:
            high.ClearField(field.name)
    return low.SerializeToString(), high.SerializeToString()


def _number(message_type: type[onnx.ModelProto | onnx.GraphProto | onnx.TensorProto], field: str) -> int:
    return int(message_type.DESCRIPTOR.fields_by_name[field].number)


def length_key(number: int) -> bytes:
    """The key of a length-delimited field (wire type 2)."""
    return encode_varint(number << 3 | 2)


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
