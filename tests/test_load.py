"""Resolving model references offline: presets, directories, config files, the hub cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertgraph.errors import ConfigError, ModelReferenceError
from bertgraph.model import HEAD_NAMES, resolve
from bertgraph.model.presets import PRESETS

PUBLISHED = {
    # name: (vocab, hidden, layers, heads, intermediate)
    "bert-base-uncased": (30522, 768, 12, 12, 3072),
    "bert-base-cased": (28996, 768, 12, 12, 3072),
    "bert-large-uncased": (30522, 1024, 24, 16, 4096),
    "bert-large-cased": (28996, 1024, 24, 16, 4096),
    "bert-base-multilingual-cased": (119547, 768, 12, 12, 3072),
    "bert-base-chinese": (21128, 768, 12, 12, 3072),
    "bert-tiny": (30522, 128, 2, 2, 512),
    "bert-mini": (30522, 256, 4, 4, 1024),
    "bert-small": (30522, 512, 4, 8, 2048),
    "bert-medium": (30522, 512, 8, 8, 2048),
    "all-MiniLM-L6-v2": (30522, 384, 6, 12, 1536),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_presets_hold_published_configs(name: str) -> None:
    config = resolve(name).config
    fields = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    assert tuple(config[f] for f in fields) == PUBLISHED[name]
    assert config["max_position_embeddings"] == 512 and config["type_vocab_size"] == 2


def test_every_bert_preset_is_covered() -> None:
    assert {name for name, config in PRESETS.items() if config["model_type"] == "bert"} == set(PUBLISHED)


def test_hub_aliases_resolve_to_presets() -> None:
    assert resolve("google-bert/bert-base-uncased").name == "bert-base-uncased"
    assert resolve("google/bert_uncased_L-2_H-128_A-2").config["hidden_size"] == 128
    assert resolve("prajjwal1/bert-mini").name == "bert-mini"


def test_overrides_change_the_config() -> None:
    spec = resolve(
        "bert-base-uncased",
        "sequence-classification",
        overrides={"layers": 4, "hidden": 256, "heads": 4, "intermediate": 1000, "vocab": 500, "num_labels": 5},
    )
    c = spec.config
    assert (
        c["num_hidden_layers"],
        c["hidden_size"],
        c["num_attention_heads"],
        c["intermediate_size"],
        c["vocab_size"],
        c["num_labels"],
    ) == (4, 256, 4, 1000, 500, 5)
    assert spec.overrides["layers"] == 4


def test_local_directory_and_config_file(tmp_path: Path) -> None:
    config = {
        "model_type": "bert",
        "hidden_size": 64,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 1000,
        "id2label": {"0": "a", "1": "b", "2": "c"},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    from_dir = resolve(str(tmp_path), "sequence-classification")
    from_file = resolve(str(tmp_path / "config.json"))
    assert from_dir.source == "directory" and from_file.source == "config"
    assert from_dir.config["num_hidden_layers"] == 3
    assert from_dir.summary()["num_labels"] == 3
    assert from_dir.weights is None


def _fake_hub_cache(root: Path, repo: str, config: dict) -> Path:
    folder = root / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / ("0123456789abcdef" * 3)[:40]
    snapshot.mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(snapshot.name)
    (snapshot / "config.json").write_text(json.dumps(config))
    return snapshot


def test_hub_id_from_the_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_hub_cache(
        tmp_path,
        "someone/little-bert",
        {
            "model_type": "bert",
            "hidden_size": 48,
            "num_attention_heads": 3,
            "num_hidden_layers": 1,
            "intermediate_size": 96,
        },
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a config cached alone is drawn offline, without checkpoint facts
    spec = resolve("someone/little-bert")
    assert spec.source == "hub" and spec.config["hidden_size"] == 48 and spec.checkpoint is None


def test_hub_id_not_cached_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelReferenceError, match=r"not in the Hugging Face cache .*fetching is off \(--offline"):
        resolve("someone/not-here")


def test_unknown_model_names_closest_presets() -> None:
    with pytest.raises(ModelReferenceError, match="closest presets: bert-base-uncased"):
        resolve("bert-bsae-uncased")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", r"config.json is not valid JSON \(line 1, column 2"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"model_type": "bert", "hidden_size": "big"}', "field 'hidden_size' must be a positive integer, got 'big'"),
        (
            '{"model_type": "bert", "num_hidden_layers": 0}',
            "field 'num_hidden_layers' must be a positive integer, got 0",
        ),
        (
            '{"model_type": "bert", "hidden_size": 100, "num_attention_heads": 12}',
            "hidden_size 100 is not a multiple of",
        ),
        ('{"hidden_size": 768}', "config has no model_type.*add one of: bert, roberta, xlm-roberta"),
        # gptj is a transformers text type (drawn through the generic record); gptx is none
        (
            '{"model_type": "gptx"}',
            "model_type 'gptx' is not supported; bertgraph draws: bert, roberta, .*, bart, and the other text model "
            "types of the installed transformers$",
        ),
        ('{"model_type": "bert", "num_labels": -1}', "field 'num_labels' must be a positive integer"),
        (
            '{"model_type": "bert", "hidden_dropout_prob": "x"}',
            "field 'hidden_dropout_prob' must be a number from 0 to 1",
        ),
    ],
)
def test_malformed_config_names_file_and_field(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "config.json").write_text(content)
    with pytest.raises(ConfigError, match=message) as caught:
        resolve(str(tmp_path))
    assert str(tmp_path / "config.json") in str(caught.value)


def test_directory_without_config(tmp_path: Path) -> None:
    with pytest.raises(ModelReferenceError, match="has no config.json"):
        resolve(str(tmp_path))


def test_unknown_head_lists_heads() -> None:
    with pytest.raises(ConfigError, match="unknown head 'sentiment'; choose one of: " + ", ".join(HEAD_NAMES)):
        resolve("bert-tiny", "sentiment")


def test_sequence_longer_than_positions() -> None:
    with pytest.raises(ConfigError, match="--seq-len 513 is above max_position_embeddings 512"):
        resolve("bert-tiny", seq_len=513)


@pytest.mark.parametrize("field", ["layers", "hidden", "heads", "intermediate", "vocab", "num_labels"])
def test_non_positive_overrides(field: str) -> None:
    flag = "--" + field.replace("_", "-")
    with pytest.raises(ConfigError, match=f"^{flag} must be a positive integer, got 0$"):
        resolve("bert-tiny", overrides={field: 0})
