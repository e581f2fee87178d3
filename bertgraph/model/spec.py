"""Model references → a validated :class:`ModelSpec`, reading only JSON and file headers.

Resolving a reference (:func:`resolve`) needs neither torch nor transformers, so the
command line can decide what to do — and hit the graph cache — before importing them.
Building the module is :mod:`bertgraph.model.build`'s job.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertgraph.errors import ConfigError, ModelReferenceError
from bertgraph.model.presets import canonical_name, closest_presets, preset_config

HEADS: dict[str, str] = {
    "base": "BertModel",
    "sequence-classification": "BertForSequenceClassification",
    "token-classification": "BertForTokenClassification",
    "question-answering": "BertForQuestionAnswering",
    "masked-lm": "BertForMaskedLM",
    "multiple-choice": "BertForMultipleChoice",
    "next-sentence": "BertForNextSentencePrediction",
    "pretraining": "BertForPreTraining",
}

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")

# Overrides on the command line → the config.json field each one sets.
OVERRIDE_FIELDS: dict[str, str] = {
    "layers": "num_hidden_layers",
    "hidden": "hidden_size",
    "heads": "num_attention_heads",
    "intermediate": "intermediate_size",
    "vocab": "vocab_size",
    "num_labels": "num_labels",
}

# Fields that must be positive integers for the model to exist at all.
_POSITIVE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
)

SAFETENSORS_FILES = ("model.safetensors", "model.safetensors.index.json")
PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
MULTIPLE_CHOICE_EXAMPLE = 4
DEFAULT_SEQ_LEN = 128


@dataclass(frozen=True)
class ModelSpec:
    """Everything that determines a model's graph, resolved without torch.

    Attributes:
        reference: what the user typed.
        name: a short display name (preset name, directory name or hub id).
        source: ``preset``, ``directory``, ``config`` or ``hub``.
        config: the complete ``config.json`` content after overrides.
        head: a key of :data:`HEADS`.
        batch, seq_len: the example input size (the graph shows them symbolically).
        weights: a safetensors file (or index) when the reference carries weights.
        pickle_weights: a pickled checkpoint that is only used with ``allow_pickle``.
        config_path: the config.json the config came from, for error messages.
    """

    reference: str
    name: str
    source: str
    config: dict[str, Any]
    head: str = "base"
    batch: int = 1
    seq_len: int = DEFAULT_SEQ_LEN
    weights: Path | None = None
    pickle_weights: Path | None = None
    allow_pickle: bool = False
    config_path: Path | None = None
    overrides: dict[str, int] = field(default_factory=dict)

    @property
    def model_class(self) -> str:
        return HEADS[self.head]

    @property
    def example_shape(self) -> tuple[int, ...]:
        if self.head == "multiple-choice":
            return (self.batch, MULTIPLE_CHOICE_EXAMPLE, self.seq_len)
        return (self.batch, self.seq_len)

    @property
    def dim_names(self) -> tuple[str, ...]:
        return ("batch", "choices", "seq") if self.head == "multiple-choice" else ("batch", "seq")

    def weights_file(self) -> Path | None:
        """The checkpoint this spec would load real weights from, if any."""
        if self.weights is not None:
            return self.weights
        if self.pickle_weights is not None and self.allow_pickle:
            return self.pickle_weights
        return None

    def summary(self) -> dict[str, int]:
        """The architecture-defining numbers, for titles and metadata."""
        c = self.config
        return {
            "layers": int(c["num_hidden_layers"]),
            "hidden": int(c["hidden_size"]),
            "heads": int(c["num_attention_heads"]),
            "intermediate": int(c["intermediate_size"]),
            "vocab": int(c["vocab_size"]),
            "max_position": int(c["max_position_embeddings"]),
            "type_vocab": int(c["type_vocab_size"]),
            "num_labels": num_labels(c),
        }


def num_labels(config: dict[str, Any]) -> int:
    """The label count transformers derives from a config (``num_labels`` or ``id2label``)."""
    if "num_labels" in config:
        return int(config["num_labels"])
    if isinstance(config.get("id2label"), dict):
        return len(config["id2label"])
    return 2


def resolve(
    reference: str,
    head: str = "base",
    *,
    overrides: Mapping[str, int | None] | None = None,
    batch: int = 1,
    seq_len: int | None = None,
    allow_pickle: bool = False,
) -> ModelSpec:
    """Turn a model reference into a validated :class:`ModelSpec`.

    Parameters:
        reference: a preset (``bert-base-uncased``), a directory holding config.json,
            a config.json path, or a hub id present in the local Hugging Face cache.
        head: one of :data:`HEADS`.
        overrides: ``{"layers": 4, "hidden": 256, ...}``; ``None`` values are ignored.
        batch, seq_len: example input size; the sequence defaults to 128, or less when the
            model has fewer positions.
        allow_pickle: permit a pickled ``pytorch_model.bin`` checkpoint.

    Raises:
        ModelReferenceError, ConfigError: with a one-line message saying what to do.

    Examples:
        >>> spec = resolve("bert-tiny", "sequence-classification", overrides={"num_labels": 3})
        >>> spec.config["num_hidden_layers"], spec.config["num_labels"], spec.model_class
        (2, 3, 'BertForSequenceClassification')
    """
    if head not in HEADS:
        raise ConfigError(f"unknown head {head!r}; choose one of: {', '.join(HEADS)}")
    name, source, config, config_path, directory = _locate(reference)
    weights, pickle_weights = _find_weights(directory) if directory is not None else (None, None)
    clean = {k: v for k, v in (overrides or {}).items() if v is not None}
    for option, value in clean.items():
        if option not in OVERRIDE_FIELDS:
            raise ConfigError(f"unknown override {option!r}; choose from: {', '.join(OVERRIDE_FIELDS)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"--{option.replace('_', '-')} must be a positive integer, got {value!r}")
    config = apply_overrides(config, clean)
    validate_config(config, config_path or Path(name))
    if seq_len is None:
        seq_len = min(DEFAULT_SEQ_LEN, int(config["max_position_embeddings"]))
    _validate_example(config, batch, seq_len)
    return ModelSpec(
        reference=reference,
        name=name,
        source=source,
        config=config,
        head=head,
        batch=batch,
        seq_len=seq_len,
        weights=weights,
        pickle_weights=pickle_weights,
        allow_pickle=allow_pickle,
        config_path=config_path,
        overrides=clean,
    )


def _locate(reference: str) -> tuple[str, str, dict[str, Any], Path | None, Path | None]:
    """(name, source, config, config path, weights directory) for a reference."""
    path = Path(reference).expanduser()
    if path.is_dir():
        config_path = path / "config.json"
        if not config_path.is_file():
            raise ModelReferenceError(
                f"directory {reference} has no config.json; point bertgraph at a folder "
                "made by save_pretrained, or use a preset such as bert-base-uncased"
            )
        return path.resolve().name, "directory", read_config(config_path), config_path, path
    if path.is_file():
        if path.suffix != ".json":
            raise ModelReferenceError(
                f"{reference} is not a config.json; give the model's directory or its config.json"
            )
        return path.resolve().parent.name, "config", read_config(path), path, path.parent
    preset = preset_config(reference)
    if preset is not None:
        return canonical_name(reference), "preset", preset, None, None
    if _HUB_ID.match(reference) and not reference.startswith((".", "/")):
        snapshot = _hub_snapshot(reference)
        if snapshot is not None:
            return reference, "hub", read_config(snapshot / "config.json"), snapshot / "config.json", snapshot
        raise ModelReferenceError(
            f"{reference!r} is not a local path and not in the local Hugging Face cache "
            f"(bertgraph never downloads); use a preset such as {closest_presets(reference)[0]} "
            "or a local directory with config.json"
        )
    if os.sep in reference or reference.endswith(".json"):
        raise ModelReferenceError(f"no such file or directory: {reference}")
    raise ModelReferenceError(
        f"unknown model {reference!r}; closest presets: {', '.join(closest_presets(reference))} "
        "(or give a local directory with config.json)"
    )


def _hub_snapshot(repo_id: str) -> Path | None:
    """The cached snapshot folder of a hub model, looked up without any network."""
    from huggingface_hub import try_to_load_from_cache

    # Read the cache location now, not at import time, so HF_HUB_CACHE / HF_HOME set later count.
    cache = os.environ.get("HF_HUB_CACHE") or (
        os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None
    )
    found = try_to_load_from_cache(repo_id, "config.json", cache_dir=cache)
    return Path(found).parent if isinstance(found, str) else None


def read_config(path: Path) -> dict[str, Any]:
    """Read a config.json; a malformed file is an error naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from error
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"{path} is not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from error
    if not isinstance(config, dict):
        raise ConfigError(f"{path} must hold a JSON object, not {type(config).__name__}")
    return config


def apply_overrides(config: dict[str, Any], overrides: dict[str, int]) -> dict[str, Any]:
    """A copy of ``config`` with command-line overrides applied."""
    result = dict(config)
    for option, value in overrides.items():
        result[OVERRIDE_FIELDS[option]] = value
        if option == "num_labels":
            # An explicit count replaces the label names that imply another count.
            result.pop("id2label", None)
            result.pop("label2id", None)
    return result


def validate_config(config: dict[str, Any], origin: Path) -> None:
    """Check the fields that decide the architecture; errors name the file and field."""
    model_type = config.get("model_type", "bert")
    if model_type != "bert":
        raise ConfigError(
            f"{origin}: model_type is {model_type!r}, but bertgraph draws BERT models (model_type 'bert')"
        )
    defaults = preset_config("bert-base-uncased") or {}
    for name in _POSITIVE_FIELDS:
        value = config.get(name, defaults.get(name))
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{origin}: field {name!r} must be a positive integer, got {value!r}")
    labels = config.get("num_labels")
    if labels is not None and (isinstance(labels, bool) or not isinstance(labels, int) or labels < 1):
        raise ConfigError(f"{origin}: field 'num_labels' must be a positive integer, got {labels!r}")
    hidden = config.get("hidden_size", defaults["hidden_size"])
    heads = config.get("num_attention_heads", defaults["num_attention_heads"])
    if hidden % heads:
        raise ConfigError(
            f"{origin}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}; "
            "pick sizes where hidden / heads is whole"
        )
    act = config.get("hidden_act", "gelu")
    if not isinstance(act, str):
        raise ConfigError(f"{origin}: field 'hidden_act' must be a string, got {act!r}")
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "layer_norm_eps"):
        value = config.get(name, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError(f"{origin}: field {name!r} must be a non-negative number, got {value!r}")
    # Fill what transformers would default, so the spec is complete and hashable as JSON.
    for name in _POSITIVE_FIELDS:
        config.setdefault(name, defaults[name])


def _validate_example(config: dict[str, Any], batch: int, seq_len: int) -> None:
    if batch < 1:
        raise ConfigError(f"--batch must be at least 1, got {batch}")
    if seq_len < 1:
        raise ConfigError(f"--seq-len must be at least 1, got {seq_len}")
    limit = config["max_position_embeddings"]
    if seq_len > limit:
        raise ConfigError(
            f"--seq-len {seq_len} is above max_position_embeddings {limit}; use --seq-len {limit} or less"
        )


def _find_weights(directory: Path) -> tuple[Path | None, Path | None]:
    safe = next((directory / f for f in SAFETENSORS_FILES if (directory / f).is_file()), None)
    pickled = next((directory / f for f in PICKLE_FILES if (directory / f).is_file()), None)
    return safe, pickled
