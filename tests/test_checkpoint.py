"""Weights from a real checkpoint on disk: safetensors only, pickles on request, shapes checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from bertgraph.cli import main
from bertgraph.errors import CheckpointError
from bertgraph.model import build_model, resolve


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
    with pytest.raises(CheckpointError, match="is not a readable safetensors file"):
        build_model(resolve(str(folder)))
