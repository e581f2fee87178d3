"""Weights from a real checkpoint on disk: safetensors only, pickles on request, shapes checked."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
import torch

from bertgraph.cli import main
from bertgraph.errors import CheckpointError
from bertgraph.model import build_model, resolve, safetensors_shapes
from bertgraph.model.checkpoint import read_header
from tests.conftest import TINY_CONFIG
from tests.helpers import one_line_error


def test_real_weights_load_from_safetensors(tiny_checkpoint: Path) -> None:
    import transformers
    from safetensors.torch import load_file

    spec = resolve(str(tiny_checkpoint), "sequence-classification")
    assert spec.weights == tiny_checkpoint / "model.safetensors"
    model = build_model(spec, weights=True)
    saved = load_file(str(spec.weights))
    state = model.state_dict()
    assert set(saved) <= set(state)
    for name, tensor in saved.items():
        assert torch.equal(state[name], tensor), name
    reference = transformers.BertForSequenceClassification.from_pretrained(tiny_checkpoint).eval()
    ids = torch.tensor([[2, 5, 7, 11]])
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, reference(input_ids=ids).logits)


def test_meta_build_needs_no_memory_for_weights(tiny_checkpoint: Path) -> None:
    model = build_model(resolve(str(tiny_checkpoint), "sequence-classification"))
    assert all(p.device.type == "meta" for p in model.parameters())


def test_tables_from_the_checkpoint_directory(tiny_checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import transformers

    module = transformers.BertForSequenceClassification.from_pretrained(tiny_checkpoint)
    expected = sum(p.numel() for p in module.parameters())
    assert main(["params", str(tiny_checkpoint), "--head", "sequence-classification", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"] == expected
    assert data["groups"]["classifier"] == 32 * 3 + 3
    assert [p["name"] for p in data["parameters"]] == [n for n, _ in module.named_parameters()]
    assert main(["summary", str(tiny_checkpoint), "--head", "sequence-classification"]) == 0
    assert "(0-1): 2 × BertLayer" in capsys.readouterr().out


def test_pickled_checkpoint_needs_permission(tmp_path: Path) -> None:
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=20,
        max_position_embeddings=32,
    )
    saved = transformers.BertModel(config)
    config.save_pretrained(tmp_path)
    torch.save(saved.state_dict(), tmp_path / "pytorch_model.bin")  # the format older checkpoints ship in
    with pytest.raises(CheckpointError, match="pickled checkpoint.*--allow-pickle"):
        build_model(resolve(str(tmp_path)), weights=True)
    model = build_model(resolve(str(tmp_path), allow_pickle=True), weights=True)
    assert torch.equal(model.embeddings.word_embeddings.weight, saved.embeddings.word_embeddings.weight)


def test_onnx_refuses_a_pickled_checkpoint_before_exporting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal comes first, not after a minute of export work that is then thrown away."""
    from bertgraph import cli
    from bertgraph.onnx import export

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", **TINY_CONFIG}))
    torch.save({"embeddings.word_embeddings.weight": torch.zeros(2, 2)}, folder / "pytorch_model.bin")

    def exporting(*args: object, **kwargs: object) -> None:
        raise AssertionError("the export started before the checkpoint was refused")

    monkeypatch.setattr(export, "_meta_model", exporting)
    target = tmp_path / "m.onnx"
    assert cli.main(["onnx", str(folder), "-o", str(target)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("bertgraph: error: ") and "pickled checkpoint" in err[-1] and "--allow-pickle" in err[-1]
    assert not any("exporting" in line or "loading" in line for line in err[:-1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_checkpoint_that_does_not_fit_its_config(
    tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "mismatch"
    shutil.copytree(tiny_checkpoint, folder)
    config = json.loads((folder / "config.json").read_text())
    config["hidden_size"] = 64
    (folder / "config.json").write_text(json.dumps(config))
    assert main(["params", str(folder), "--head", "sequence-classification"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "tensor 'bert.embeddings.LayerNorm.bias' has shape [32] but the config needs [64]" in err
    # The same mismatch made by an override on the command line.
    assert main(["summary", str(tiny_checkpoint), "--hidden", "64"]) == 1
    assert "but the config needs" in capsys.readouterr().err


def test_corrupt_safetensors(tiny_checkpoint: Path, tmp_path: Path) -> None:
    folder = tmp_path / "corrupt"
    shutil.copytree(tiny_checkpoint, folder)
    (folder / "model.safetensors").write_bytes(b"\x05\x00not a safetensors file")
    with pytest.raises(CheckpointError, match="is not a valid safetensors file"):
        build_model(resolve(str(folder)))


def write_safetensors(path: Path, header: object, data: bytes = b"", length: int | None = None) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw) if length is None else length) + raw + data)


def corrupt_copy(source: Path, folder: Path, header: object, data: bytes = b"") -> Path:
    shutil.copytree(source, folder)
    write_safetensors(folder / "model.safetensors", header, data)
    return folder


ENTRY = {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}


@pytest.mark.parametrize(
    ("header", "data", "message"),
    [
        ([1, 2, 3], b"", "the header is a JSON list, not an object"),
        ({"a": [1]}, b"", "tensor 'a' is described by a JSON list"),
        ({"a": {"dtype": "F32", "data_offsets": [0, 16]}}, bytes(16), "tensor 'a' has no shape"),
        ({"a": {"shape": [2, 2]}}, bytes(16), "tensor 'a' has no dtype or data_offsets"),
        ({"a": {**ENTRY, "dtype": "F33"}}, bytes(16), "dtype 'F33', which safetensors does not define"),
        ({"a": {**ENTRY, "shape": [2, -2]}}, bytes(16), "has shape [2, -2]; a shape is a list of whole numbers"),
        ({"a": {**ENTRY, "data_offsets": [0]}}, bytes(16), "data_offsets [0]; they are two whole numbers"),
        ({"a": {**ENTRY, "data_offsets": [16, 0]}}, bytes(16), "ends (byte 0) before it begins (byte 16)"),
        ({"a": {**ENTRY, "data_offsets": [0, 12]}}, bytes(12), "needs 16 bytes but its data_offsets span 12"),
        ({"a": ENTRY}, bytes(10), "its tensors need 16 bytes of data but the file holds 10"),
        ({"a": ENTRY}, bytes(20), "its tensors use 16 bytes of data but the file holds 20"),
        ({"a": {**ENTRY, "data_offsets": [4, 20]}}, bytes(20), "starts at byte 4 and leaves a gap at byte 0"),
        ({"a": ENTRY, "b": ENTRY}, bytes(32), "starts at byte 0 and overlaps the tensor before it"),
        ({"__metadata__": [1], "a": ENTRY}, bytes(16), "__metadata__ must map names to strings"),
    ],
)
def test_safetensors_header_validated_completely(tmp_path: Path, header: object, data: bytes, message: str) -> None:
    path = tmp_path / "model.safetensors"
    write_safetensors(path, header, data)
    with pytest.raises(CheckpointError, match="is not a valid safetensors file") as caught:
        read_header(path)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_header_length_beyond_the_file(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    write_safetensors(path, {"a": ENTRY}, bytes(16), length=10_000)
    with pytest.raises(CheckpointError, match="the header needs 10,000 bytes but the file holds"):
        read_header(path)
    path.write_bytes(b"\x01\x02")
    with pytest.raises(CheckpointError, match="it is 2 bytes long, shorter than the 8-byte header length"):
        read_header(path)


def test_truncated_checkpoint_is_one_line_for_every_command(
    tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "truncated"
    shutil.copytree(tiny_checkpoint, folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    for argv in (["params", str(folder)], ["onnx", str(folder), "-o", str(tmp_path / "m.onnx"), "--no-verify"]):
        line = one_line_error(argv, capsys)
        assert "bytes of data but the file holds" in line and "truncated" in line
    assert not (tmp_path / "m.onnx").exists()


def test_checkpoint_whose_header_is_a_list_or_lacks_shape(
    tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = corrupt_copy(tiny_checkpoint, tmp_path / "list", [1, 2])
    assert "the header is a JSON list" in one_line_error(["summary", str(listed)], capsys)
    shapeless = corrupt_copy(tiny_checkpoint, tmp_path / "noshape", {"a": {"dtype": "F32", "data_offsets": [0, 4]}})
    assert "tensor 'a' has no shape" in one_line_error(["summary", str(shapeless)], capsys)


def _sharded(tiny_checkpoint: Path, folder: Path, index: str) -> Path:
    shutil.copytree(tiny_checkpoint, folder)
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    (folder / "model.safetensors.index.json").write_text(index)
    return folder


def test_sharded_checkpoint_index(tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = list(read_header(tiny_checkpoint / "model.safetensors"))
    good = json.dumps({"weight_map": dict.fromkeys(names, "model-00001-of-00001.safetensors")})
    folder = _sharded(tiny_checkpoint, tmp_path / "good", good)
    assert safetensors_shapes(folder / "model.safetensors.index.json") == safetensors_shapes(
        tiny_checkpoint / "model.safetensors"
    )
    cases = {
        "{not json": "is not valid JSON",
        "[]": "has no weight_map of tensor names to shard files",
        json.dumps({"weight_map": {"x": "../../etc/passwd"}}): "shards are file names in the same folder",
        json.dumps({"weight_map": {"x": "two\nlines\x1b[2J"}}): "names shard two\\nlines\\x1b[2J, which",
        json.dumps({"weight_map": {"x": "model-00002.safetensors"}}): "names shard model-00002.safetensors, which",
        json.dumps({"weight_map": {**json.loads(good)["weight_map"], "ghost": "model-00001-of-00001.safetensors"}}): (
            "lists 1 tensor(s) its shards do not hold (first: 'ghost')"
        ),
    }
    for number, (index, message) in enumerate(cases.items()):
        bad = _sharded(tiny_checkpoint, tmp_path / f"bad{number}", index)
        assert message in one_line_error(["params", str(bad)], capsys)
