"""Generated inputs for every parser of files a user points bertgraph at.

config.json, a safetensors header, a sharded checkpoint's index.json, an .onnx file and a
graph-cache entry: each parser either gives a correct result or raises a BertgraphError
whose message is one line, never another exception, and never leaves a partial file.
The same inputs go through the command line's ``main()``: exit status 0, or 1 with one
line on stderr and no "internal error".

Each test runs a modest number of examples; ``BERTGRAPH_FUZZ_EXAMPLES=2000`` runs a long
campaign (``tests/helpers.fuzz_examples``).
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from bertgraph import cache
from bertgraph.api import Architecture
from bertgraph.cli import main
from bertgraph.errors import BertgraphError
from bertgraph.graph.validate import graph_problem
from bertgraph.model import resolve
from bertgraph.model.checkpoint import DTYPE_BITS, read_checkpoint, read_header
from bertgraph.model.counts import bert_parameter_total
from tests.helpers import fuzz_examples

pytestmark = pytest.mark.xdist_group("fuzz_inputs")  # its fixtures are built once, on one worker

FIXTURES = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]

TINY = {
    "model_type": "bert",
    "vocab_size": 30,
    "hidden_size": 8,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 12,
    "max_position_embeddings": 16,
    "type_vocab_size": 2,
}

# --- generated values -------------------------------------------------------------------------

numbers = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-3, 40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 0.5, 1.0, 1e40, 10**30, 2**63, 2**64 + 1, float("nan"), float("inf")]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=12))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def one_line_or_success(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run main(); success, or exit 1 with one clean line. Returns (status, stdout)."""
    status = main(argv)
    captured = capsys.readouterr()
    assert status in (0, 1), (status, captured.err)
    if status == 1:
        assert captured.err.count("\n") == 1, captured.err
        assert captured.err.startswith("bertgraph: error: "), captured.err
        assert "internal error" not in captured.err
    return status, captured.out


def assert_one_line(error: BertgraphError) -> None:
    message = str(error)
    assert message and "\n" not in message and "\r" not in message, message


@contextmanager
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bertgraph-fuzz-") as name:
        yield Path(name)


def _no_partial_output(where: Path, expected: set[str]) -> None:
    assert {p.name for p in where.iterdir()} == expected


# --- config.json ---------------------------------------------------------------------------------


@st.composite
def config_files(draw: st.DrawFn) -> bytes:
    """Mostly near-valid configs with a few fields replaced; sometimes text that is barely JSON."""
    kind = draw(st.sampled_from(["plausible", "plausible", "fields", "fields", "json", "bytes", "nested"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    if kind == "nested":
        depth = draw(st.integers(1, 5000))
        return ('{"id2label": ' + "[" * depth + "]" * depth + "}").encode()
    config: dict[str, Any] = dict(TINY)
    if kind == "plausible":
        # Values a real config could hold, near the edges: most are accepted, and then must be right.
        sizes = st.integers(0, 24)
        plausible = {
            "vocab_size": sizes,
            "hidden_size": st.sampled_from([0, 1, 2, 4, 6, 8, 12]),
            "num_hidden_layers": st.integers(0, 4),
            "num_attention_heads": st.sampled_from([0, 1, 2, 3, 4]),
            "intermediate_size": sizes,
            "max_position_embeddings": sizes,
            "type_vocab_size": st.integers(0, 3),
            "num_labels": st.integers(0, 5),
            "pad_token_id": st.one_of(st.none(), st.integers(-1, 30)),
            "hidden_dropout_prob": st.floats(-0.1, 1.1),
            "layer_norm_eps": st.floats(-1e-6, 1e-3),
            "tie_word_embeddings": st.booleans(),
            "is_decoder": st.booleans(),
            "add_cross_attention": st.booleans(),
            "chunk_size_feed_forward": st.integers(-1, 3),
            "hidden_act": st.sampled_from(["gelu", "relu", "tanh", "gelu_new", "swish", "nope"]),
            "id2label": st.dictionaries(st.sampled_from(["0", "1", "2", "x"]), st.text(max_size=3), max_size=3),
        }
        for name in draw(st.lists(st.sampled_from(sorted(plausible)), max_size=4, unique=True)):
            config[name] = draw(plausible[name])
        return json.dumps(config).encode()
    fields = [
        *TINY,
        "num_labels",
        "id2label",
        "pad_token_id",
        "hidden_dropout_prob",
        "attention_probs_dropout_prob",
        "classifier_dropout",
        "layer_norm_eps",
        "initializer_range",
        "hidden_act",
        "is_decoder",
        "add_cross_attention",
        "tie_word_embeddings",
        "chunk_size_feed_forward",
        "dtype",
        "torch_dtype",
        "problem_type",
        "position_embedding_type",
        "something_else",
    ]
    for name in draw(st.lists(st.sampled_from(fields), max_size=3, unique=True)):
        config[name] = draw(
            st.one_of(json_values, st.sampled_from(["gelu", "relu", "float16", "absolute", "regression"]))
        )
    text = json.dumps(config, allow_nan=True)
    return text.encode("utf-8") if draw(st.booleans()) else text.encode("utf-8") + draw(st.binary(max_size=3))


@settings(max_examples=fuzz_examples(30), deadline=None, suppress_health_check=FIXTURES)
@given(content=config_files())
@example(content=b'{"hidden_size": "\xff"}')
@example(content=json.dumps({**TINY, "hidden_dropout_prob": float("inf")}).encode())
@example(content=json.dumps({**TINY, "vocab_size": 10**40}).encode())
@example(content=json.dumps({**TINY, "add_cross_attention": True}).encode())
def test_config_json(content: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    with folder() as root:
        model = root / "model"
        model.mkdir()
        (model / "config.json").write_bytes(content)
        out = root / "out"
        out.mkdir()
        status, _ = one_line_or_success(["params", str(model), "--format", "json", "-o", str(out / "p.json")], capsys)
        event("refused" if status else "accepted")
        if status == 1:
            _no_partial_output(out, set())
            with pytest.raises(BertgraphError) as caught:
                _build(model)
            assert_one_line(caught.value)
            return
        # A correct result: the count the config implies, the count of the module transformers builds.
        spec, total = _build(model)
        written = json.loads((out / "p.json").read_text())
        assert written["total"] == total
        expected = bert_parameter_total(spec.config, spec.head)
        assert expected is None or expected == total


def _build(model: Path) -> tuple[Any, int]:
    from bertgraph.model import build_model

    spec = resolve(str(model))
    return spec, sum(p.numel() for p in build_model(spec).parameters())


# --- safetensors header --------------------------------------------------------------------------


def _safetensors_bytes(header: Any, data: bytes, length: int | None = None) -> bytes:
    raw = json.dumps(header, allow_nan=True).encode()
    return struct.pack("<Q", len(raw) if length is None else length % 2**64) + raw + data


def _valid_tensors() -> tuple[dict[str, Any], bytes]:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    data = b""
    for name, dtype, shape in (("a", "F32", [2, 3]), ("b", "I64", [4]), ("c", "F16", [3]), ("d", "BOOL", [0])):
        size = math.prod(shape) * DTYPE_BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + size]}
        data += bytes(range(size % 256)) + bytes(max(0, size - size % 256))
    return header, data


@st.composite
def safetensors_files(draw: st.DrawFn) -> bytes:
    header, data = _valid_tensors()
    kind = draw(st.sampled_from(["entry", "entry", "header", "data", "length", "bytes", "valid", "valid"]))
    if kind == "valid":
        # Any well-formed file: tensors of every dtype and shape, tiling the data in any key order.
        tensors = draw(
            st.dictionaries(
                st.text(min_size=1, max_size=6).filter(lambda n: n != "__metadata__"),
                st.tuples(st.sampled_from(sorted(DTYPE_BITS)), st.lists(st.integers(0, 5), max_size=3)),
                max_size=4,
            )
        )
        built: dict[str, Any] = {}
        position = 0
        for name, (dtype, shape) in tensors.items():
            if math.prod(shape) * DTYPE_BITS[dtype] % 8:
                shape = [*shape, 2]  # sub-byte dtypes fill whole bytes in pairs
            size = math.prod(shape) * DTYPE_BITS[dtype] // 8
            built[name] = {"dtype": dtype, "shape": shape, "data_offsets": [position, position + size]}
            position += size
        return _safetensors_bytes(built, draw(st.binary(min_size=position, max_size=position)))
    if kind == "bytes":
        return draw(st.binary(max_size=80))
    if kind == "header":
        return _safetensors_bytes(draw(json_values), data)
    if kind == "length":
        return _safetensors_bytes(header, data, draw(st.integers(0, 2**64 + 10)))
    if kind == "data":
        cut = draw(st.integers(0, len(data)))
        return _safetensors_bytes(header, data[:cut] + draw(st.binary(max_size=8)))
    name = draw(st.sampled_from(["a", "b", "c", "d", "__metadata__"]))
    entry = header[name]
    field = draw(st.sampled_from(["dtype", "shape", "data_offsets", "whole", "drop"]))
    if field == "whole":
        header[name] = draw(json_values)
    elif field == "drop" and isinstance(entry, dict) and entry:
        entry.pop(draw(st.sampled_from(sorted(entry))))
    elif field == "dtype":
        entry["dtype"] = draw(st.one_of(st.sampled_from(sorted(DTYPE_BITS)), json_values))
    elif field == "shape":
        entry["shape"] = draw(st.one_of(st.lists(st.integers(-2, 6), max_size=3), json_values))
    else:
        entry["data_offsets"] = draw(st.one_of(st.lists(st.integers(-2, 80), max_size=3), json_values))
    return _safetensors_bytes(header, data)


@settings(max_examples=fuzz_examples(100), deadline=None, suppress_health_check=FIXTURES)
@given(content=safetensors_files())
@example(content=_safetensors_bytes([1, 2], b""))
@example(content=_safetensors_bytes({"a": {"dtype": "F32", "data_offsets": [0, 4]}}, bytes(4)))
@example(content=_safetensors_bytes(*_valid_tensors())[:-7])
def test_safetensors_header(content: bytes) -> None:
    from safetensors import safe_open

    with folder() as root:
        path = root / "model.safetensors"
        path.write_bytes(content)
        try:
            entries = read_header(path)
        except BertgraphError as error:
            event("refused")
            assert_one_line(error)
            # Refused only what the safetensors library refuses too (it validates the header on opening).
            with pytest.raises(Exception), safe_open(str(path), framework="np"):  # noqa: B017
                pass
            return
        event("accepted")
        # A correct result: the safetensors library itself opens the file and agrees on every tensor.
        with safe_open(str(path), framework="np") as opened:
            assert sorted(opened.keys()) == sorted(entries)
            for name, entry in entries.items():
                if entry.dtype in ("F16", "F32", "I64", "BOOL"):
                    assert list(opened.get_tensor(name).shape) == entry.shape


def test_safetensors_fuzz_through_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A checkpoint folder whose weights file is broken: one line from every command, nothing written."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TINY))
    out = tmp_path / "out"
    out.mkdir()
    header, data = _valid_tensors()
    for content in (_safetensors_bytes([1], b""), _safetensors_bytes(header, data)[:-3], b"\x00" * 3):
        (model / "model.safetensors").write_bytes(content)
        for command in ("params", "summary"):
            status, _ = one_line_or_success([command, str(model), "-o", str(out / "x.txt")], capsys)
            assert status == 1
        _no_partial_output(out, set())


# --- index.json ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT saved in two safetensors shards with an index, as save_pretrained makes them."""
    from safetensors.numpy import save_file

    import bertgraph.model

    folder = tmp_path_factory.mktemp("sharded")
    (folder / "config.json").write_text(json.dumps(TINY))
    spec = resolve(str(folder))
    state = {n: p.shape for n, p in bertgraph.model.build_model(spec).state_dict().items()}
    tensors = {name: np.zeros(tuple(shape), np.float32) for name, shape in state.items()}
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    weight_map = {}
    for shard, members in halves.items():
        save_file({name: tensors[name] for name in members}, str(folder / shard))
        weight_map.update(dict.fromkeys(members, shard))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


@st.composite
def index_files(draw: st.DrawFn, weight_map: dict[str, str]) -> bytes:
    kind = draw(st.sampled_from(["map", "map", "entry", "json", "bytes", "valid"]))
    if kind == "valid":
        return json.dumps({"weight_map": weight_map}).encode()
    if kind == "bytes":
        return draw(st.binary(max_size=40))
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    changed = dict(weight_map)
    if kind == "entry":
        name = draw(st.sampled_from(sorted(changed)))
        changed[name] = draw(
            st.one_of(
                st.sampled_from(["", ".", "..", "../x.safetensors", "/etc/passwd", "missing.safetensors"]),
                st.text(max_size=10),
            )
        )
        return json.dumps({"weight_map": changed}).encode()
    extra = draw(st.dictionaries(st.text(max_size=10), json_values, max_size=3))
    return json.dumps({"weight_map": {**changed, **extra}, "metadata": draw(json_values)}).encode()


@settings(max_examples=fuzz_examples(50), deadline=None, suppress_health_check=FIXTURES)
@given(data=st.data())
def test_index_json(sharded: Path, data: st.DataObject, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    weight_map = json.loads((sharded / "model.safetensors.index.json").read_text())["weight_map"]
    content = data.draw(index_files(weight_map))
    with folder() as root:
        model = root / "model"
        shutil.copytree(sharded, model)
        index = model / "model.safetensors.index.json"
        index.write_bytes(content)
        try:
            tensors = read_checkpoint(index)
        except BertgraphError as error:
            event("refused")
            assert_one_line(error)
            status, _ = one_line_or_success(["params", str(model)], capsys)
            assert status == 1
            return
        event("accepted")
        # A correct result: every tensor the index names, from the shard it names.
        named = json.loads(content)["weight_map"]
        assert set(named) <= set(tensors)
        for name, shard in named.items():
            assert name in read_header(model / shard)
        status, _ = one_line_or_success(["params", str(model)], capsys)
        assert status in (0, 1)


# --- .onnx ---------------------------------------------------------------------------------------


def _onnx_model(names: tuple[str, str] = ("dense", "out"), metadata: dict[str, str] | None = None) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    first, second = names
    initializers = [
        numpy_helper.from_array(np.ones((4, 3), np.float32), f"{first}.weight"),
        numpy_helper.from_array(np.zeros(3, np.float32), f"{first}.bias"),
        numpy_helper.from_array(np.array([-1, 3], np.int64), "shape"),
    ]
    scopes = repr(["", first, "linear"])
    classes = repr(["M", "torch.nn.Linear", "aten.linear.default"])
    matmul = helper.make_node("MatMul", ["x", f"{first}.weight"], ["h"], name=f"/{first}/MatMul")
    matmul.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=scopes)
    matmul.metadata_props.add(key="pkg.torch.onnx.class_hierarchy", value=classes)
    nodes = [
        matmul,
        helper.make_node("Add", ["h", f"{first}.bias"], ["h2"], name=f"/{first}/Add"),
        helper.make_node("Reshape", ["h2", "shape"], ["y"], name=f"{second}/Reshape"),
    ]
    graph = helper.make_graph(
        nodes,
        "fuzz",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="bertgraph")
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    return bytes(model.SerializeToString())


@st.composite
def onnx_files(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["names", "metadata", "flip", "cut", "bytes", "valid"]))
    if kind == "valid":
        return _onnx_model()
    if kind == "bytes":
        return draw(st.binary(max_size=120))
    if kind == "names":
        return _onnx_model((draw(st.text(min_size=1, max_size=12)), draw(st.text(max_size=12))))
    if kind == "metadata":
        known = ("config", "example", "tied_parameters", "model_class", "head", "model", "weights")
        keys = st.sampled_from([*known, "family", "model_type", "structure", "backbone", "stacks"])
        values = st.one_of(st.text(max_size=20), json_values.map(lambda v: json.dumps(v, allow_nan=True)))
        return _onnx_model(metadata=draw(st.dictionaries(keys, values, max_size=4)))
    good = bytearray(_onnx_model())
    if kind == "cut":
        return bytes(good[: draw(st.integers(0, len(good)))])
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(good) - 1))
        good[at] = draw(st.integers(0, 255))
    return bytes(good)


@settings(max_examples=fuzz_examples(50), deadline=None, suppress_health_check=FIXTURES)
@given(content=onnx_files())
@example(content=_onnx_model(("a\x00\u202eb", "c\nd")))
@example(content=_onnx_model(metadata={"config": "[]", "tied_parameters": '{"a": 1}', "example": "NaN"}))
@example(content=_onnx_model(metadata={"family": "gpt2", "model_type": "gpt2", "backbone": "dense", "stacks": "[1]"}))
@example(content=_onnx_model(metadata={"family": "bert", "model_type": "bert", "stacks": '{"dense": "sideways"}'}))
@example(content=_onnx_model(metadata={"tied_parameters": '{"dense.weight": ["x"]}'}))  # a list for a name
@example(content=_onnx_model(metadata={"example": '{"batch": "one"}', "config": '{"heads": "2", "hidden": 8}'}))
@example(content=_onnx_model(metadata={"example": '{"batch": [1], "seq": true}', "stacks": '{"dense": ["x"]}'}))
def test_onnx_file(content: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    from bertgraph.onnx.read import read_onnx_graph

    with folder() as root:
        path = root / "model.onnx"
        path.write_bytes(content)
        try:
            graph = read_onnx_graph(path)
        except BertgraphError as error:
            event("refused")
            assert_one_line(error)
            status, _ = one_line_or_success(["summary", str(path)], capsys)
            assert status == 1
            return
        event("accepted")
        # A correct result: every initializer counted once, and every view and table can be made of it.
        arch = Architecture(graph)
        rows = arch.params()["parameters"]
        assert arch.params()["total"] == sum(row["numel"] for row in rows)
        for depth in range(5):
            arch.to_dot(depth)
            arch.to_mermaid(depth)
        for argv in (["summary", str(path)], ["params", str(path)], ["render", str(path), "-o", str(root / "d.mmd")]):
            status, _ = one_line_or_success(argv, capsys)
            assert status == 0
        # Costs evaluate the example sizes the metadata gave: damaged ones are ignored, never a crash.
        for argv in (["cost", str(path)], ["graph", str(path), "-o", str(root / "g.json")]):
            one_line_or_success(argv, capsys)


# --- graph-cache entry ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cached_entry(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, dict[str, Any]]:
    """A real cache entry of bert-tiny (token-classification), and the params it must give."""
    import os

    from bertgraph.api import load

    previous = os.environ.get("BERTGRAPH_CACHE_DIR")
    os.environ["BERTGRAPH_CACHE_DIR"] = str(tmp_path_factory.mktemp("fuzz-cache"))
    try:
        spec = resolve("bert-tiny", "token-classification")
        expected = load(spec).params()
        entry = cache.entry_path(spec).read_bytes()
    finally:
        if previous is None:
            os.environ.pop("BERTGRAPH_CACHE_DIR")
        else:
            os.environ["BERTGRAPH_CACHE_DIR"] = previous
    return entry, expected


def _replace_somewhere(value: Any, path: list[int], new: Any) -> Any:
    """``value`` with the element a path of choices leads to replaced by ``new``."""
    if not path or not isinstance(value, (dict, list)) or not value:
        return new
    keys = sorted(value) if isinstance(value, dict) else list(range(len(value)))
    key = keys[path[0] % len(keys)]
    value[key] = _replace_somewhere(value[key], path[1:], new)
    return value


@st.composite
def cache_entries(draw: st.DrawFn, entry: bytes) -> tuple[str, bytes]:
    header_line, body = entry.split(b"\n", 1)
    kind = draw(st.sampled_from(["forged", "forged", "flip", "cut", "header", "json", "bytes"]))
    if kind == "bytes":
        return kind, draw(st.binary(max_size=100))
    if kind == "json":
        return kind, json.dumps(draw(json_values)).encode()
    if kind == "cut":
        return kind, entry[: draw(st.integers(0, len(entry) - 1))]
    if kind == "flip":
        changed = bytearray(entry)
        at = draw(st.integers(0, len(changed) - 1))
        changed[at] = (changed[at] + draw(st.integers(1, 255))) % 256
        return kind, bytes(changed)
    header = json.loads(header_line)
    if kind == "header":
        header = _replace_somewhere(header, draw(st.lists(st.integers(0, 50), max_size=4)), draw(json_values))
        return kind, json.dumps(header).encode() + b"\n" + body
    # Forged: a changed graph with a digest that matches it, so the schema checks are what stands guard.
    graph = json.loads(body)
    graph = _replace_somewhere(graph, draw(st.lists(st.integers(0, 10_000), max_size=6)), draw(json_values))
    new_body = json.dumps(graph, allow_nan=True).encode()
    header["digest"] = hashlib.sha256(new_body).hexdigest()
    return kind, json.dumps(header).encode() + b"\n" + new_body


@settings(max_examples=fuzz_examples(50), deadline=None, suppress_health_check=FIXTURES)
@given(data=st.data())
def test_cache_entry(
    cached_entry: tuple[bytes, dict[str, Any]],
    data: st.DataObject,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry, expected = cached_entry
    kind, content = data.draw(cache_entries(entry))
    with folder() as root:
        monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(root))
        spec = resolve("bert-tiny", "token-classification")
        cache.entry_path(spec).write_bytes(content)
        if kind == "forged":  # the checks themselves never raise, whatever they are shown
            cache.checked_graph(json.loads(content.split(b"\n", 1)[1]), spec)
        graph = cache.load(spec)
        event(f"{kind}: {'served' if graph is not None else 'rebuilt'}")
        if graph is not None:
            # Served: it must be a sound graph of this model, and every reader must cope with it.
            assert graph_problem(graph) is None
            arch = Architecture(graph)
            assert arch.params()["total"] == bert_parameter_total(spec.config, spec.head)
            arch.summary()
            for depth in range(5):
                arch.to_dot(depth)
            if kind != "forged":  # untouched bytes: exactly the model
                assert arch.params() == expected
        argv = ["params", "bert-tiny", "--head", "token-classification", "--format", "json"]
        status, out = one_line_or_success(argv, capsys)
        assert status == 0
        if kind != "forged":
            assert json.loads(out) == expected
        assert {p.name for p in root.iterdir()} == {cache.entry_path(spec).name}
