"""A written ONNX file must parse into exactly the model its view describes.

Verification reads the file through its view (the weights mapped at their offsets inside
the file); :func:`bertgraph.onnx.framing.check_framing` reads every other byte of the
file and holds the message it spells to the view's. These tests write small models with
the real writer, then damage the file: any changed byte outside the weights' own data,
a truncated or lengthened file, a weight moved — each must be one OnnxError.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bertgraph.errors import OnnxError
from bertgraph.onnx.framing import check_framing, model_without_data
from bertgraph.onnx.save import VIEW_INLINE_BYTES, write_onnx
from tests.helpers import fuzz_examples

pytestmark = [pytest.mark.onnx, pytest.mark.xdist_group("onnx_framing")]  # its fixtures are built once, on one worker


def _model() -> ir.Model:
    """Two weights large enough to be mapped, two small ones kept inline, a node reading them."""
    rng = np.random.default_rng(3)
    arrays = {
        "big": rng.standard_normal((40, 40)).astype(np.float32),
        "ids": np.arange(6, dtype=np.int64),
        "bigger": rng.standard_normal((3, 700)).astype(np.float32),
        "scalar": np.array(1.5, dtype=np.float32),
    }
    graph = ir.Graph(inputs=[], outputs=[], nodes=[], name="g", opset_imports={"": 18})
    for name, array in arrays.items():
        tensor = ir.Tensor(array, name=name)
        value = ir.Value(name=name, shape=tensor.shape, type=ir.TensorType(tensor.dtype), const_value=tensor)
        graph.register_initializer(value)
    total = ir.node("Add", [graph.initializers["big"], graph.initializers["scalar"]], name="add")
    graph.append(total)
    graph.outputs.append(total.outputs[0])
    return ir.Model(graph, ir_version=10, producer_name="bertgraph", metadata_props={"k": "v"})


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("framing")
    path, view = folder / "m.onnx", folder / "m.check.onnx"
    write_onnx(_model(), path, view=view)
    return path, view


def _data_extents(path: Path) -> list[tuple[int, int]]:
    with open(path, "rb") as stream:
        _, extents = model_without_data(stream)
    return [extent for extent in extents if extent is not None]


def _copy(written: tuple[Path, Path], folder: Path) -> tuple[Path, Path]:
    """The file and its view in ``folder`` (the view names the file by its name, not its path)."""
    path, view = written
    folder.mkdir(exist_ok=True)
    shutil.copy(path, folder / path.name)
    shutil.copy(view, folder / view.name)
    return folder / path.name, folder / view.name


def test_the_file_as_written_passes_and_its_weights_are_where_the_view_reads_them(written: tuple[Path, Path]) -> None:
    path, view = written
    check_framing(path, view)
    described = onnx.load(str(view), load_external_data=False)
    external = {t.name for t in described.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
    assert external == {"big", "bigger"}  # above VIEW_INLINE_BYTES; the small ones stay inline
    assert all(t.HasField("raw_data") for t in described.graph.initializer if t.name not in external)
    extents = _data_extents(path)
    assert len(extents) == 4
    raw = path.read_bytes()
    whole = onnx.load(str(path))
    for tensor, (offset, length) in zip(whole.graph.initializer, extents):
        assert raw[offset : offset + length] == tensor.raw_data  # every extent is its tensor's bytes
    assert sorted(length for _, length in extents)[-2:] == [6400, 8400]
    assert VIEW_INLINE_BYTES < 6400


def test_the_rest_of_the_file_is_what_the_walk_reads(written: tuple[Path, Path]) -> None:
    """The walk leaves out exactly the raw data: the rest parses as the model without it."""
    path, _ = written
    with open(path, "rb") as stream:
        skeleton, extents = model_without_data(stream)
    parsed = onnx.ModelProto()
    parsed.ParseFromString(skeleton)
    whole = onnx.load(str(path))
    for tensor in whole.graph.initializer:
        tensor.ClearField("raw_data")
    assert parsed == whole
    assert skeleton == whole.SerializeToString()  # the same bytes, lengths re-counted without the data
    assert len(extents) == 4


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _framing_positions(path: Path) -> list[int]:
    """Every byte of the file outside the mapped weights' data."""
    inside = set()
    for offset, length in _data_extents(path):
        if length > VIEW_INLINE_BYTES:
            inside.update(range(offset, offset + length))
    return [i for i in range(path.stat().st_size) if i not in inside]


@settings(
    max_examples=fuzz_examples(120),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_changed_byte_outside_the_weights_is_one_onnx_error(
    written: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    path, view = _copy(written, tmp_path_factory.mktemp("changed"))
    positions = _framing_positions(path)
    where = data.draw(st.sampled_from(positions), label="byte")
    raw = bytearray(path.read_bytes())
    raw[where] ^= data.draw(st.integers(1, 255), label="xor")
    path.write_bytes(bytes(raw))
    with pytest.raises(OnnxError, match=r"^the written file m\.onnx (is not a well-formed ONNX model|does not hold)"):
        check_framing(path, view)


@pytest.mark.parametrize("how", ["truncated", "lengthened", "moved", "renamed"])
def test_a_file_the_view_does_not_describe_is_refused(written: tuple[Path, Path], tmp_path: Path, how: str) -> None:
    path, view = _copy(written, tmp_path / how)
    raw = path.read_bytes()
    if how == "truncated":
        path.write_bytes(raw[:-1])
    elif how == "lengthened":
        path.write_bytes(raw + b"\x08\x01")  # a well-formed extra field: ir_version again
    elif how == "moved":  # the view says the first weight's data starts one byte later
        described = onnx.load(str(view), load_external_data=False)
        entry = next(e for e in described.graph.initializer[0].external_data if e.key == "offset")
        entry.value = str(int(entry.value) + 1)
        view.write_bytes(described.SerializeToString())
    else:  # the view reads another file's bytes
        path = path.rename(path.with_name("other.onnx"))
    with pytest.raises(OnnxError, match=r"^the written file \w+\.onnx "):
        check_framing(path, view)


def test_the_same_message_framed_twice_is_refused(written: tuple[Path, Path], tmp_path: Path) -> None:
    """A tensor with its raw data twice parses (protobuf keeps the last) but is not what was written."""
    path, view = _copy(written, tmp_path / "twice")
    whole = onnx.load(str(path))
    scalar = next(t for t in whole.graph.initializer if t.name == "scalar")
    doubled = scalar.SerializeToString() + b"\x4a" + _varint(4) + scalar.raw_data  # field 9 again
    assert onnx.TensorProto.FromString(doubled) == scalar
    raw = path.read_bytes()
    old = b"\x2a" + _varint(len(scalar.SerializeToString())) + scalar.SerializeToString()
    assert raw.count(old) == 1
    new = b"\x2a" + _varint(len(doubled)) + doubled
    graph = whole.graph.SerializeToString()
    rebuilt = raw.replace(old, new).replace(b"\x3a" + _varint(len(graph)), b"\x3a" + _varint(len(graph) + 6), 1)
    path.write_bytes(rebuilt)
    with pytest.raises(OnnxError, match="raw data twice"):
        check_framing(path, view)
