"""Config fields checked from one table: types, ranges, size limits; references that are not files."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from bertgraph.errors import ConfigError
from bertgraph.model import resolve
from bertgraph.model.fields import LIMITS
from bertgraph.model.spec import BERT_RULES, validate_config
from tests.helpers import one_line_error

TINY = {
    "model_type": "bert",
    "num_hidden_layers": 2,
    "hidden_size": 128,
    "num_attention_heads": 2,
    "intermediate_size": 512,
}


def model_dir(tmp_path: Path, content: str | bytes, name: str = "m") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    data = content.encode() if isinstance(content, str) else content
    (folder / "config.json").write_bytes(data)
    return folder


def with_tiny(**fields: object) -> str:
    return json.dumps({**TINY, **fields})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"hidden_size": "\xff"}', "is not UTF-8 text (byte 0xff at offset 17); save it as UTF-8"),
        ("[" * 100_000 + "]" * 100_000, "nests objects and lists 100000 levels deep"),
        ('{"vocab_size": 1' + "0" * 5000 + "}", "cannot be read: Exceeds the limit"),
        (with_tiny(hidden_dropout_prob=2.0), "field 'hidden_dropout_prob' must be a number from 0 to 1, got 2.0"),
        (with_tiny().replace("}", ', "attention_probs_dropout_prob": Infinity}'), "from 0 to 1, got inf"),
        (with_tiny(classifier_dropout=-0.5), "field 'classifier_dropout' must be a number from 0 to 1"),
        (with_tiny().replace("}", ', "layer_norm_eps": NaN}'), "'layer_norm_eps' must be a finite number"),
        (with_tiny(layer_norm_eps=-1e-12), "'layer_norm_eps' must be a finite number of at least 0, got -1e-12"),
        (with_tiny().replace("}", ', "layer_norm_eps": -Infinity}'), "'layer_norm_eps' must be a finite number"),
        ('{"model_type": "bert", "vocab_size": 1e40}', "field 'vocab_size' must be a positive integer, got 1e+40"),
        (
            '{"model_type": "bert", "vocab_size": 1' + "0" * 40 + "}",
            "vocab_size of 41 digits is above the limit of 1,000,000,000",
        ),
        (with_tiny(num_hidden_layers=10**9), "num_hidden_layers 1,000,000,000 is above the limit of 1,024"),
        (with_tiny(pad_token_id=500, vocab_size=100), "pad_token_id 500 must be less than vocab_size 100"),
        (with_tiny(is_decoder="yes"), "field 'is_decoder' must be true or false, got 'yes'"),
        (with_tiny(id2label=["a", "b"]), "field 'id2label' must be a JSON object"),
        (with_tiny(id2label={"x": "a"}), "field 'id2label' must map label numbers"),
        (with_tiny(dtype="int8"), "field 'dtype' must be one of 'float32', 'float16', 'bfloat16', 'float64'"),
        (with_tiny(chunk_size_feed_forward=-1), "'chunk_size_feed_forward' must be a whole number of at least 0"),
    ],
)
def test_bad_config_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes, message: str
) -> None:
    folder = model_dir(tmp_path, content)
    line = one_line_error(["params", str(folder)], capsys)
    assert str(folder / "config.json") in line
    assert message in line


def _family(model_type: str, **fields: object) -> str:
    from tests.family_configs import TINY as FAMILIES

    return json.dumps({**FAMILIES[model_type], **fields})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            _family("modernbert", local_attention=0),
            "field 'local_attention' must be a whole number of at least 2, got 0",
        ),
        (
            _family("modernbert", local_attention=-128),
            "'local_attention' must be a whole number of at least 2, got -128",
        ),
        (
            _family("qwen2", use_sliding_window=True, sliding_window=0),
            "'sliding_window' must be a positive integer, got 0",
        ),
        (_family("qwen3", use_sliding_window=True, sliding_window=-5), "'sliding_window' must be a positive integer"),
        (_family("qwen2", use_sliding_window=True, sliding_window="16"), "'sliding_window' must be a positive integer"),
        (_family("llama", mlp_bias="true"), "field 'mlp_bias' must be true or false, got 'true'"),
        (_family("llama", head_dim=0), "field 'head_dim' must be a positive integer, got 0"),
        (_family("llama", head_dim=63), "'head_dim' must be a multiple of 2 (rotary positions turn pairs of dim"),
        (
            _family("llama", rope_scaling={"rope_type": "evil", "factor": 2.0}),
            "rope_scaling has rope_type 'evil', which transformers does not know; use one of: default, linear",
        ),
        (_family("qwen3", rope_parameters={"type": "evil"}), "rope_parameters has rope_type 'evil'"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 20 else None,
)
def test_nonsense_in_a_family_field_is_refused_before_transformers_sees_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    folder = model_dir(tmp_path, content)
    line = one_line_error(["params", str(folder)], capsys)
    assert f"{folder / 'config.json'}: " in line and message in line, line


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"use_sliding_window": False, "sliding_window": 0}, None),  # a window switched off is not read
        ({"eos_token_id": "2"}, "Validation error for field 'eos_token_id': TypeError: Field 'eos_token_id' with"),
        ({"bos_token_id": "1"}, "Validation error for field 'bos_token_id': TypeError: Field 'bos_token_id' with"),
    ],
)
def test_what_transformers_refuses_is_said_whole_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, object], message: str | None
) -> None:
    """huggingface_hub's messages open with a line ending in ':'; the reason on the next line is kept."""
    from bertgraph.cli import main

    folder = model_dir(tmp_path, _family("qwen2", **fields))
    if message is None:
        assert main(["summary", str(folder), "--no-cache"]) == 0
        return
    line = one_line_error(["summary", str(folder), "--no-cache"], capsys)
    assert "transformers cannot build Qwen2Model from this config: " in line and message in line, line
    assert not line.endswith(":")


def test_rope_types_are_transformers_own() -> None:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from bertgraph.model.spec import ROPE_TYPES

    assert set(ROPE_TYPES) == {"default", *ROPE_INIT_FUNCTIONS}


def test_what_transformers_refuses_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Cross-attention without a decoder: valid types, refused by BertLayer itself.
    folder = model_dir(tmp_path, with_tiny(add_cross_attention=True))
    line = one_line_error(["params", str(folder)], capsys)
    assert "transformers cannot build BertModel from this config" in line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--vocab", "99999999999999999999"], "--vocab: vocab_size 99,999,999,999,999,999,999 is above the limit"),
        (["--layers", "1000000000"], "--layers: num_hidden_layers 1,000,000,000 is above the limit of 1,024"),
        (["--batch", "99999999999"], "--batch 99,999,999,999 is above the limit of 1,000,000"),
        (["--num-labels", "3"], "--num-labels changes only a head with labels"),
        (["--head", "sequence-classification", "--num-labels", "100001"], "num_labels 100,001 is above the limit"),
    ],
)
def test_bad_override_is_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert message in one_line_error(["params", "bert-tiny", *argv], capsys)


@pytest.mark.parametrize("role", sorted(LIMITS))
def test_every_limit_is_the_largest_accepted_value(role: str) -> None:
    limit = LIMITS[role].maximum
    bounded_by_others = {a for a, _ in BERT_RULES.below}
    fields = [
        name
        for name, rule in BERT_RULES.fields.items()
        if rule.kind == "count" and rule.role == role and name not in bounded_by_others
    ]
    if role == "mask":  # the masks figure's example lengths, a limit of the command line, not of a config
        from bertgraph.cli import _mask_tokens

        assert _mask_tokens(str(limit)) == limit
        with pytest.raises(argparse.ArgumentTypeError, match=f"must be at most {limit:,}"):
            _mask_tokens(str(limit + 1))
        return
    if role == "example":
        assert resolve("bert-tiny", batch=limit).batch == limit
        with pytest.raises(ConfigError, match=f"--batch {limit + 1:,} is above the limit of {limit:,}"):
            resolve("bert-tiny", batch=limit + 1)
        return
    assert fields, role
    for name in fields:
        # hidden_size at its own limit divides by any head count up to it.
        config = {"model_type": "bert", "hidden_size": LIMITS["size"].maximum, "num_attention_heads": 1, name: limit}
        validate_config(dict(config), Path("config.json"))
        config[name] = limit + 1
        with pytest.raises(ConfigError, match=f"{name} {limit + 1:,} is above the limit of {limit:,}"):
            validate_config(dict(config), Path("config.json"))


def test_labels_named_by_id2label_count_against_the_limit(tmp_path: Path) -> None:
    labels = {str(i): f"l{i}" for i in range(LIMITS["labels"].maximum + 1)}
    folder = model_dir(tmp_path, with_tiny(id2label=labels))
    with pytest.raises(ConfigError, match="id2label names 100,001 labels; num_labels 100,001 is above the limit"):
        resolve(str(folder))


def test_unknown_user_symlink_loop_and_fifo_as_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "cannot expand ~nouser-bertgraph in ~nouser-bertgraph/x: no such user" in one_line_error(
        ["params", "~nouser-bertgraph/x"], capsys
    )
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert f"cannot use {loop} as a model: it is a symbolic link loop" in one_line_error(["params", str(loop)], capsys)
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    assert "it is a FIFO (named pipe)" in one_line_error(["params", str(fifo)], capsys)
    folder = tmp_path / "model"
    folder.mkdir()
    os.mkfifo(folder / "config.json")
    assert "config.json: it is a FIFO (named pipe), not a file" in one_line_error(["params", str(folder)], capsys)


def test_broken_weights_link_is_not_silently_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = model_dir(tmp_path, with_tiny())
    (folder / "model.safetensors").symlink_to(tmp_path / "blobs" / "missing")
    line = one_line_error(["params", str(folder)], capsys)
    assert "model.safetensors: it is a broken symbolic link" in line and "restore the file or remove it" in line
