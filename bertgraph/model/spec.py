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

from bertgraph.errors import BertgraphError, CheckpointError, ConfigError, ModelReferenceError, first_line
from bertgraph.files import expand_user, path_kind
from bertgraph.model.checkpoint import read_checkpoint
from bertgraph.model.fields import ConfigRules, Field, check_config, problem
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

# Heads whose size follows num_labels; the others ignore it.
LABEL_HEADS = ("sequence-classification", "token-classification", "question-answering")

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

_BERT_DEFAULTS = preset_config("bert-base-uncased") or {}


def _size(name: str, role: str = "size") -> Field:
    return Field("count", default=_BERT_DEFAULTS[name], role=role)


# Every config field bertgraph or transformers reads to build a BERT, and what it must hold.
# Other fields pass through to transformers, which checks them when it builds the model.
BERT_RULES = ConfigRules(
    fields={
        "vocab_size": _size("vocab_size"),
        "hidden_size": _size("hidden_size"),
        "num_hidden_layers": _size("num_hidden_layers", role="layers"),
        "num_attention_heads": _size("num_attention_heads"),
        "intermediate_size": _size("intermediate_size"),
        "max_position_embeddings": _size("max_position_embeddings"),
        "type_vocab_size": _size("type_vocab_size"),
        "num_labels": Field("count", role="labels"),
        "chunk_size_feed_forward": Field("count", minimum=0),
        "pad_token_id": Field("count", minimum=0, nullable=True),
        "hidden_dropout_prob": Field("probability"),
        "attention_probs_dropout_prob": Field("probability"),
        "classifier_dropout": Field("probability", nullable=True),
        "layer_norm_eps": Field("number"),
        "initializer_range": Field("number"),
        "model_type": Field("string"),
        "hidden_act": Field("string"),
        "is_decoder": Field("boolean"),
        "add_cross_attention": Field("boolean"),
        "tie_word_embeddings": Field("boolean"),
        "use_cache": Field("boolean"),
        "output_attentions": Field("boolean"),
        "output_hidden_states": Field("boolean", nullable=True),
        "return_dict": Field("boolean", nullable=True),
        "id2label": Field("mapping", nullable=True),
        "label2id": Field("mapping", nullable=True),
        "dtype": Field("choice", nullable=True, choices=("float32", "float16", "bfloat16", "float64")),
        "torch_dtype": Field("choice", nullable=True, choices=("float32", "float16", "bfloat16", "float64")),
        "problem_type": Field(
            "choice", nullable=True, choices=("regression", "single_label_classification", "multi_label_classification")
        ),
    },
    divisible=(("hidden_size", "num_attention_heads"),),
    below=(("pad_token_id", "vocab_size"),),
)

# A config.json is a flat object with a few small mappings; these bound what is read.
MAX_CONFIG_BYTES = 64 * 1024 * 1024
MAX_CONFIG_NESTING = 64

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
    if weights is not None:
        read_checkpoint(weights)  # headers only: a damaged checkpoint is reported before any work
    clean = {k: v for k, v in (overrides or {}).items() if v is not None}
    for option, value in clean.items():
        if option not in OVERRIDE_FIELDS:
            raise ConfigError(f"unknown override {option!r}; choose from: {', '.join(OVERRIDE_FIELDS)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{_flag(option)} must be a positive integer, got {value!r}")
    if "num_labels" in clean and head not in LABEL_HEADS:
        raise ConfigError(
            f"--num-labels changes only a head with labels ({', '.join(LABEL_HEADS)}); head {head} has none"
        )
    config = apply_overrides(config, clean)
    set_by = {OVERRIDE_FIELDS[option]: _flag(option) for option in clean}
    validate_config(config, config_path or Path(name), set_by)
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


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def _locate(reference: str) -> tuple[str, str, dict[str, Any], Path | None, Path | None]:
    """(name, source, config, config path, weights directory) for a reference."""
    try:
        path = expand_user(reference)
    except BertgraphError as error:
        raise ModelReferenceError(str(error)) from error
    found = path_kind(path)
    if found.kind == "directory":
        config_path = path / "config.json"
        inside = path_kind(config_path)
        if inside.kind == "missing":
            raise ModelReferenceError(
                f"directory {reference} has no config.json; point bertgraph at a folder "
                "made by save_pretrained, or use a preset such as bert-base-uncased"
            )
        if inside.kind != "file":
            raise ModelReferenceError(f"cannot read {config_path}: it is {inside.description}, not a file")
        return _display_name(path.resolve().name), "directory", read_config(config_path), config_path, path
    if found.kind == "file":
        if path.suffix != ".json":
            raise ModelReferenceError(
                f"{reference} is not a config.json; give the model's directory or its config.json"
            )
        return _display_name(path.resolve().parent.name), "config", read_config(path), path, path.parent
    if found.kind != "missing":
        raise ModelReferenceError(
            f"cannot use {reference} as a model: it is {found.description}; "
            "give a directory with config.json, a config.json file or a preset"
        )
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


def _display_name(name: str) -> str:
    """A folder name fit for titles: bytes that are not UTF-8 shown as U+FFFD, not smuggled through."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


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
    found = path_kind(path)
    if found.kind != "file":
        raise ConfigError(f"cannot read {path}: it is {found.description}, not a file")
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from error
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path} is larger than {MAX_CONFIG_BYTES // 2**20} MB; a config.json is a few kilobytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}); save it as UTF-8"
        ) from error
    nesting = _nesting(text)
    if nesting > MAX_CONFIG_NESTING:
        raise ConfigError(
            f"{path} nests objects and lists {nesting} levels deep; a config.json needs a few "
            f"(at most {MAX_CONFIG_NESTING} are read)"
        )
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"{path} is not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from error
    except ValueError as error:  # a number of thousands of digits
        raise ConfigError(f"{path} cannot be read: {first_line(error)}") from error
    if not isinstance(config, dict):
        raise ConfigError(f"{path} must hold a JSON object, not {type(config).__name__}")
    return config


def _nesting(text: str) -> int:
    """How deep brackets nest in JSON text, strings skipped (json.loads would recurse that deep).

    >>> _nesting('{"a": [1, {"b": "[[["}]}'), _nesting("[" * 5)
    (3, 5)
    """
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


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


def validate_config(config: dict[str, Any], origin: Path, set_by: Mapping[str, str] | None = None) -> None:
    """Check the fields that decide the architecture (:data:`BERT_RULES`) and fill their defaults.

    Errors name the file and field, or the command-line option that set the field
    (``set_by``: field → option).
    """
    set_by = set_by or {}
    model_type = config.get("model_type", "bert")
    if model_type != "bert":
        raise ConfigError(
            f"{origin}: model_type is {model_type!r}, but bertgraph draws BERT models (model_type 'bert')"
        )
    check_config(config, BERT_RULES, lambda name: set_by.get(name, str(origin)))
    labels = config.get("id2label")
    if isinstance(labels, dict):
        if not all(isinstance(k, str) and k.strip().isdigit() for k in labels):
            raise ConfigError(f'{origin}: field \'id2label\' must map label numbers ("0", "1", …) to names')
        if "num_labels" not in config:
            found = problem("num_labels", BERT_RULES.fields["num_labels"], len(labels))
            if found:
                raise ConfigError(f"{origin}: id2label names {len(labels):,} labels; {found}")


def _validate_example(config: dict[str, Any], batch: int, seq_len: int) -> None:
    for flag, value in (("--batch", batch), ("--seq-len", seq_len)):
        found = problem(flag, Field("count", role="example"), value)
        if found:
            raise ConfigError(found.replace(f"field {flag!r}", flag))
    limit = config["max_position_embeddings"]
    if seq_len > limit:
        raise ConfigError(
            f"--seq-len {seq_len} is above max_position_embeddings {limit}; use --seq-len {limit} or less"
        )


def _find_weights(directory: Path) -> tuple[Path | None, Path | None]:
    """The safetensors and pickled checkpoints in ``directory``.

    A name that exists but is not a regular file (a broken link left by an interrupted
    download, a FIFO) is an error: silently drawing or exporting without the weights
    the folder promises would be worse.
    """
    found: list[Path | None] = []
    for names in (SAFETENSORS_FILES, PICKLE_FILES):
        chosen = None
        for name in names:
            candidate = directory / name
            kind = path_kind(candidate)
            if kind.kind == "file":
                chosen = candidate
                break
            if kind.kind != "missing":
                raise CheckpointError(
                    f"cannot use {candidate}: it is {kind.description}; restore the file or remove it"
                )
        found.append(chosen)
    return found[0], found[1]
