"""Model references → a validated :class:`ModelSpec`, reading only JSON and file headers.

Resolving a reference (:func:`resolve`) needs neither torch nor transformers, so the
command line can decide what to do — and hit the graph cache — before importing them.
Building the module is :mod:`bertgraph.model.build`'s job.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from bertgraph.errors import BertgraphError, CheckpointError, ConfigError, ModelReferenceError, first_line
from bertgraph.files import expand_user, path_kind
from bertgraph.model import hub
from bertgraph.model.checkpoint import read_checkpoint_files
from bertgraph.model.families import BY_NAME, MODEL_TYPES, Family, family_of
from bertgraph.model.families.record import HEAD_NAMES, OVERRIDE_SIZES
from bertgraph.model.fields import (
    LIMITS,
    MAX_CONFIG_BYTES,
    MAX_CONFIG_NESTING,
    ConfigRules,
    Field,
    check_config,
    check_fields,
    problem,
)
from bertgraph.model.presets import canonical_name, closest_presets, preset_config
from bertgraph.model.stored import Checkpoint, checkpoint_of, quantization_of

BERT = BY_NAME["bert"]
# BERT's heads and inputs, for code written when bertgraph drew BERT alone (ONNX export).
# Every other question goes to the spec's family: ``spec.family.heads``, ``spec.input_names``.
HEADS: dict[str, str] = {head: BERT.class_name("bert", head) for head in BERT.heads}
INPUT_NAMES: tuple[str, ...] = BERT.input_names("base", BERT.variants["bert"].defaults)

# Heads whose size follows num_labels; the others ignore it.
LABEL_HEADS = ("sequence-classification", "token-classification", "question-answering")

# Command-line overrides: sizes (set in every field the family keeps that size in) and labels.
OVERRIDES: tuple[str, ...] = (*OVERRIDE_SIZES, "num_labels")

_DTYPES = ("float32", "float16", "bfloat16", "float64")
# Fields every family's config reads alike, and what they must hold.
_COMMON_FIELDS: dict[str, Field] = {
    "num_labels": Field("count", role="labels"),
    "chunk_size_feed_forward": Field("count", minimum=0),
    "pad_token_id": Field("count", minimum=0, nullable=True),
    "initializer_range": Field("number"),
    "model_type": Field("string"),
    "is_decoder": Field("boolean"),
    "add_cross_attention": Field("boolean"),
    "tie_word_embeddings": Field("boolean"),
    "use_cache": Field("boolean"),
    "output_attentions": Field("boolean"),
    "output_hidden_states": Field("boolean", nullable=True),
    "return_dict": Field("boolean", nullable=True),
    "id2label": Field("mapping", nullable=True),
    "label2id": Field("mapping", nullable=True),
    "dtype": Field("choice", nullable=True, choices=_DTYPES),
    "torch_dtype": Field("choice", nullable=True, choices=_DTYPES),
    "problem_type": Field(
        "choice", nullable=True, choices=("regression", "single_label_classification", "multi_label_classification")
    ),
}
# Field names, by ending, that are dropout probabilities or normalisation epsilons in every family.
_PROBABILITY_SUFFIXES = ("dropout", "dropout_prob", "dropout_rate", "_pdrop")
_EPSILON_SUFFIXES = ("_eps", "epsilon")
# Sizes that may be zero (DeBERTa-v3 has no token types) and sizes that count layers.
_MAY_BE_ZERO = frozenset({"type_vocab", "experts", "experts_per_token"})
_LAYER_SIZES = frozenset({"layers", "decoder_layers"})
# Sizes every model is built from: never left null, whatever a config class's default is (ESM's vocabulary).
_NEEDED_SIZES = frozenset({"layers", "hidden", "heads", "vocab"})
# Field names, by ending, that the modeling code divides by whatever their value: a layer pattern's
# period (Jamba's ``attn_layer_period``: ``i % period``), or the groups experts are split into
# (DeepSeek's ``n_group``). Not a sparse step: Switch derives 0 for no sparse layer, which its code allows.
_DIVISOR_SUFFIXES = ("_period", "_layer_step", "_freq", "_interval", "window_pattern", "n_group", "expert_group")


def rules_for(family: Family, model_type: str, config: Mapping[str, Any] | None = None) -> ConfigRules:
    """The checks of a config of ``model_type``, from its family's record.

    The family's size fields are counts bounded by their role's limit, with transformers'
    defaults (a size another gives, like GPT-2's ``n_inner``, may be ``null``); the
    activation field is a string; dropout and epsilon fields of ``config`` are
    probabilities and non-negative numbers; a layer pattern's period is a positive whole
    number; the hidden size divides by the heads unless each head's size is a field of its
    own (a record's type only: a type read off transformers has its model class's checks), and
    the heads by the key/value heads; a token goes to no more experts than there are.
    """
    defaults = family.variants[model_type].defaults
    fields = dict(_COMMON_FIELDS)
    for size, name in family.sizes.items():
        fields[name] = Field(
            "count",
            default=defaults.get(name),
            role="layers" if size in _LAYER_SIZES else "size",
            minimum=0 if size in _MAY_BE_ZERO else 1,
            # A type read off transformers may leave a size to its code (DeepSeek-V2's experts per token).
            nullable=size in family.fallbacks or (family.inferred and size not in _NEEDED_SIZES),
        )
    # The family's other fields with defaults: the activation, T5's head size, ModernBERT's period.
    for name, value in defaults.items():
        if name not in fields and value is not None:
            kind = "string" if isinstance(value, str) else "count"
            fields[name] = Field(kind, default=value)
    for name, rule in family.fields.items():
        fields[name] = replace(rule, default=defaults.get(name))
    for name in config or {}:
        if name.endswith(_PROBABILITY_SUFFIXES):
            # ESM's token_dropout is a switch, not a probability; a record's families have none such.
            flag = family.inferred and isinstance((config or {})[name], bool)
            fields.setdefault(name, Field("boolean") if flag else Field("probability", nullable=True))
        elif name.endswith(_EPSILON_SUFFIXES):
            # A record's families always set their epsilon; a type read off transformers may leave it to the code.
            fields.setdefault(name, Field("number", nullable=family.inferred))
        elif name.endswith(_DIVISOR_SUFFIXES) and type((config or {})[name]) is int:
            fields.setdefault(name, Field("count"))
    hidden, heads = family.sizes.get("hidden"), family.sizes.get("heads")
    divisible = []
    head_dim = family.head_dim
    no_head_dim = head_dim is None or (defaults.get(head_dim) is None and (config or {}).get(head_dim) is None)
    # A type read off transformers has its model class's own size checks, made when it is built
    # (BERT's refuses such a hidden size; LLaMA's takes heads of hidden // heads): none is added here.
    if hidden and heads and no_head_dim and not family.inferred:
        divisible.append((hidden, heads))
    if heads and "kv_heads" in family.sizes:
        divisible.append((heads, family.sizes["kv_heads"]))
    vocab = family.sizes.get("vocab")
    routed = (
        (family.sizes["experts_per_token"], family.sizes["experts"])
        if {"experts", "experts_per_token"} <= set(family.sizes)
        else None
    )
    return ConfigRules(
        fields=fields,
        divisible=tuple(divisible),
        below=(("pad_token_id", vocab),) if vocab else (),
        at_most=(routed,) if routed else (),
    )


BERT_RULES = rules_for(BY_NAME["bert"], "bert", {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1})

SAFETENSORS_FILES = ("model.safetensors", "model.safetensors.index.json")
PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json")
MULTIPLE_CHOICE_EXAMPLE = 4
DEFAULT_SEQ_LEN = 128
# The attention implementations a model can be built with (transformers' attn_implementation).
ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa")
# The floating dtypes a model can be built in for tracing.
BUILD_DTYPES = ("float32", "float16", "bfloat16")


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
        attention: the attention implementation asked for (``eager`` or ``sdpa``); ``None``:
            the one transformers picks (``sdpa`` where the model has it).
        dtype: the floating dtype the model is built in for tracing (``bfloat16``: its casts,
            such as a norm computing in float32, are then in the graph); ``None``: float32.
        checkpoint: every tensor the checkpoint stores, from its headers (a local safetensors
            checkpoint's, or a hub model's fetched without its weights); ``None``: none known.
        remote_code: the classes the config's ``auto_map`` names, which bertgraph never runs (the
            model is built from transformers' own classes for its ``model_type``).
        inputs: the inputs the model is given, of those its head takes (an ONNX export's: what
            the type's tokenizer gives, so RoBERTa's has no ``token_type_ids``); ``None``: all of them.
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
    attention: str | None = None
    dtype: str | None = None
    checkpoint: Checkpoint | None = None
    remote_code: tuple[str, ...] = ()
    inputs: tuple[str, ...] | None = None

    @property
    def family(self) -> Family:
        return any_family(str(self.config.get("model_type")))

    @property
    def model_type(self) -> str:
        return str(self.config["model_type"])

    @property
    def model_class(self) -> str:
        """The transformers class of the head (``BertForSequenceClassification``)."""
        return self.family.class_name(self.model_type, self.head)

    @property
    def input_names(self) -> tuple[str, ...]:
        """The example inputs, in the order the model takes them."""
        return tuple(self.input_dims)

    @property
    def input_dims(self) -> dict[str, tuple[str, ...]]:
        """Input name → its dimension names (``("batch", "seq")``)."""
        dims = self.family.input_dims(self.head, self.config)
        return dims if self.inputs is None else {name: dims[name] for name in dims if name in self.inputs}

    @property
    def dim_names(self) -> tuple[str, ...]:
        """Every dimension the inputs have: ``batch``, ``choices``, ``seq``, ``tgt`` (decoder length)."""
        return tuple(dict.fromkeys(dim for dims in self.input_dims.values() for dim in dims))

    @property
    def example_shape(self) -> tuple[int, ...]:
        """The example size of each of :attr:`dim_names` (the decoder as long as the encoder)."""
        sizes = {"batch": self.batch, "choices": MULTIPLE_CHOICE_EXAMPLE, "seq": self.seq_len, "tgt": self.seq_len}
        return tuple(sizes[name] for name in self.dim_names)

    @property
    def max_positions(self) -> int | None:
        """The longest sequence the model can take (None: relative positions only): its learned
        positions less those it skips (:meth:`Family.usable_positions`, RoBERTa's 512 of 514)."""
        return self.family.usable_positions(self.config)

    def weights_file(self) -> Path | None:
        """The checkpoint this spec would load real weights from, if any."""
        if self.weights is not None:
            return self.weights
        if self.pickle_weights is not None and self.allow_pickle:
            return self.pickle_weights
        return None

    def summary(self) -> dict[str, int]:
        """The architecture-defining numbers, for titles and metadata.

        ``layers``, ``hidden``, ``heads``, ``intermediate``, ``vocab`` and whichever of
        ``decoder_layers``, ``kv_heads``, ``max_position``, ``type_vocab``, … the family has;
        ``num_labels``; and ``pad_token_id`` for heads that find the last token by padding
        (bertgraph sets it to the end-of-sequence token when the config has none, so that
        batches above one trace).
        """
        family = self.family
        found = {name: family.size(self.config, name) for name in family.sizes}
        result = {name: int(value) for name, value in found.items() if value is not None}
        result["num_labels"] = num_labels(self.config)
        if family.heads[self.head].pad_token:
            result["pad_token_id"] = int(self.config["pad_token_id"])
        return result


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
    attention: str | None = None,
    dtype: str | None = None,
    revision: str | None = None,
    offline: bool | None = None,
) -> ModelSpec:
    """Turn a model reference into a validated :class:`ModelSpec`.

    Parameters:
        reference: a preset (``bert-base-uncased``), a directory holding config.json,
            a config.json path, or a hub id (``org/name``, ``org/name@revision``): read from
            the local Hugging Face cache, or fetched into it (config and safetensors headers,
            never weights: :mod:`bertgraph.model.hub`).
        head: one of :data:`~bertgraph.model.families.HEAD_NAMES` that the family has.
        overrides: ``{"layers": 4, "hidden": 256, ...}``; ``None`` values are ignored.
        batch, seq_len: example input size; the sequence defaults to 128, or less when the
            model has fewer positions.
        allow_pickle: permit a pickled ``pytorch_model.bin`` checkpoint.
        attention: ``eager`` or ``sdpa`` (default: transformers' choice, ``sdpa`` where it exists).
        dtype: ``float32``, ``float16`` or ``bfloat16``: build the model in it (default float32).
        revision: a hub id's branch, tag or commit (``--revision``; or ``org/name@revision``).
        offline: never fetch (``--offline``); ``HF_HUB_OFFLINE`` says the same.

    Raises:
        ModelReferenceError, ConfigError: with a one-line message saying what to do.

    Examples:
        >>> spec = resolve("bert-tiny", "sequence-classification", overrides={"num_labels": 3})
        >>> spec.config["num_hidden_layers"], spec.config["num_labels"], spec.model_class
        (2, 3, 'BertForSequenceClassification')
    """
    if head not in HEAD_NAMES:
        raise ConfigError(f"unknown head {head!r}; choose one of: {', '.join(HEAD_NAMES)}")
    if attention not in (None, *ATTENTION_IMPLEMENTATIONS):
        raise ConfigError(f"unknown attention {attention!r}; choose one of: {', '.join(ATTENTION_IMPLEMENTATIONS)}")
    if dtype not in (None, *BUILD_DTYPES):
        raise ConfigError(f"unknown dtype {dtype!r}; choose one of: {', '.join(BUILD_DTYPES)}")
    with _located(reference, revision, offline) as found:
        return _resolve_found(found, head, overrides, batch, seq_len, allow_pickle, attention, dtype)


def _resolve_found(
    found: Located,
    head: str,
    overrides: Mapping[str, int | None] | None,
    batch: int,
    seq_len: int | None,
    allow_pickle: bool,
    attention: str | None,
    dtype: str | None,
) -> ModelSpec:
    name, config = found.name, found.config
    origin = found.config_path or Path(name)
    family = _family_or_refusal(config, origin, name)
    if head not in family.heads:
        raise ConfigError(
            f"{name} is a {family.name} model, which has no {head} head; choose one of: {', '.join(family.heads)}"
        )
    weights, pickle_weights = _find_weights(found.directory) if found.directory is not None else (None, None)
    if found.headers_only:
        weights = None  # the snapshot holds an index at most: its shards were never downloaded
    checkpoint = found.checkpoint
    if weights is not None:
        # headers only: a damaged checkpoint is reported before any work
        files = read_checkpoint_files(weights)
        checkpoint = checkpoint_of(files, weights.name, weights.name.endswith(".index.json"))
    if checkpoint is not None:
        checkpoint = replace(checkpoint, quantization=quantization_of(config))
    clean = {k: v for k, v in (overrides or {}).items() if v is not None}
    for option, value in clean.items():
        if option not in OVERRIDES:
            raise ConfigError(f"unknown override {option!r}; choose from: {', '.join(OVERRIDES)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{_flag(option)} must be a positive integer, got {value!r}")
        if option in OVERRIDE_SIZES and not any(size in family.sizes for size in OVERRIDE_SIZES[option]):
            raise ConfigError(f"{_flag(option)} does not apply to {family.name} models")
    if "num_labels" in clean and head not in LABEL_HEADS:
        raise ConfigError(
            f"--num-labels changes only a head with labels ({', '.join(LABEL_HEADS)}); head {head} has none"
        )
    config = apply_overrides(normalise(config, family, origin), clean, family)
    set_by = {
        family.sizes[size]: _flag(option)
        for option in clean
        for size in OVERRIDE_SIZES.get(option, ())
        if size in family.sizes
    }
    if "num_labels" in clean:
        set_by["num_labels"] = "--num-labels"
    validate_config(config, origin, family, head, set_by)
    if attention == "sdpa" and family.attention == "eager":
        raise ConfigError(
            f"{name} is a {family.name} model, which transformers runs with eager attention only; "
            "leave out --attention or use --attention eager"
        )
    spec = ModelSpec(
        reference=found.reference,
        name=name,
        source=found.source,
        config=config,
        head=head,
        batch=batch,
        seq_len=DEFAULT_SEQ_LEN,
        weights=weights,
        pickle_weights=pickle_weights,
        allow_pickle=allow_pickle,
        config_path=found.config_path,
        overrides=clean,
        attention=attention,
        dtype=None if dtype == "float32" else dtype,
        checkpoint=checkpoint,
        remote_code=remote_code(config),
    )
    if spec.max_positions is not None and spec.max_positions < 1:
        name = family.sizes["max_position"]
        raise ConfigError(f"{origin}: {_positions(spec)} leaves no position for a token; raise {name}")
    if seq_len is None:
        seq_len = min(DEFAULT_SEQ_LEN, spec.max_positions or DEFAULT_SEQ_LEN)
    _validate_example(spec, batch, seq_len)
    return replace(spec, seq_len=seq_len)


def reference_files(reference: str) -> list[Path]:
    """The files a command reads for a local model reference (none for a preset or hub id):
    the .onnx file, or the config.json and the checkpoint files beside it (an index's shards too).

    Found without reading or checking anything, so an output path can be compared with them
    before any work; :func:`resolve` reports what is wrong with them.
    """
    try:
        path = expand_user(reference)
    except BertgraphError:
        return []
    kind = path_kind(path).kind
    if kind == "file" and path.suffix.lower() != ".json":
        return [path]
    if kind not in ("file", "directory"):
        return []
    folder = path if kind == "directory" else path.parent
    files = [path if kind == "file" else folder / "config.json"]
    for name in (*SAFETENSORS_FILES, *PICKLE_FILES):
        candidate = folder / name
        files.append(candidate)
        if name.endswith(".index.json") and path_kind(candidate).kind == "file":
            from bertgraph.model.checkpoint import read_index

            with contextlib.suppress(BertgraphError):
                files += [folder / shard for shard in sorted(set(read_index(candidate).values()))]
    return files


def family_for(config: Mapping[str, Any], origin: Path) -> Family:
    """The family of a config by its ``model_type``; a missing or unknown type is an error, never a guess."""
    supported = ", ".join(MODEL_TYPES)
    model_type = config.get("model_type")
    if model_type is None:
        raise ConfigError(
            f"{origin}: config has no model_type, so bertgraph cannot tell which model it is; add one of: {supported}"
        )
    found = family_of(model_type) if isinstance(model_type, str) else None
    if found is not None:
        return found
    from bertgraph.model.families.generic import known_type

    if not isinstance(model_type, str) or not known_type(model_type):
        raise ConfigError(
            f"{origin}: model_type {model_type!r} is not supported; bertgraph draws: {supported}, "
            "and the other text model types of the installed transformers"
        )
    try:
        return any_family(model_type)
    except ConfigError as error:
        raise ConfigError(f"{origin}: {error}") from error


def any_family(model_type: str) -> Family:
    """A hand-written record, or for another transformers text type the record read off its
    module tree (:mod:`bertgraph.model.families.generic`, which imports torch and transformers)."""
    found = family_of(model_type)
    if found is not None:
        return found
    from bertgraph.model.families.generic import generic_family

    return generic_family(model_type)


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


class Located(NamedTuple):
    """Where a reference's config (and checkpoint) was found."""

    reference: str
    name: str
    source: str
    config: dict[str, Any]
    config_path: Path | None = None
    directory: Path | None = None  # the folder whose checkpoint files count
    checkpoint: Checkpoint | None = None  # what a hub model's headers say
    headers_only: bool = False  # a hub snapshot whose safetensors files were never downloaded


@contextlib.contextmanager
def _located(reference: str, revision: str | None, offline: bool | None) -> Iterator[Located]:
    """The config and checkpoint a reference names; a hub id is fetched if need be, and what the
    fetch added to the cache is taken back if anything in the ``with`` block fails."""
    if not reference.strip():
        raise ModelReferenceError(
            "MODEL is empty; give a preset such as bert-base-uncased, a directory with config.json, "
            "a config.json file, a hub id such as org/name, or an .onnx file"
        )
    try:
        path = expand_user(reference)
    except BertgraphError as error:
        raise ModelReferenceError(str(error)) from error
    found = path_kind(path)
    if found.kind != "missing":
        _no_revision(revision, reference, "a local path")
        yield _local(reference, path)
        return
    target = hub.hub_reference(reference, revision)
    preset = preset_config(reference)
    if preset is not None and (target is None or target.revision is None):
        _no_revision(revision, reference, "a preset")
        yield Located(reference, canonical_name(reference), "preset", preset)
        return
    if target is not None:
        with hub.located(target, offline_only=bool(offline)) as snapshot:
            yield _from_snapshot(reference, snapshot)
        return
    _no_revision(revision, reference, "not a hub id (org/name)")
    if os.sep in reference or reference.endswith(".json"):
        raise ModelReferenceError(f"no such file or directory: {reference}")
    raise ModelReferenceError(
        f"unknown model {reference!r}; closest presets: {', '.join(closest_presets(reference))} "
        "(or give a local directory with config.json, or a hub id such as org/name)"
    )


def _no_revision(revision: str | None, reference: str, what: str) -> None:
    if revision is not None:
        raise ModelReferenceError(f"--revision {revision} names a revision of a hub id; {reference} is {what}")


def _local(reference: str, path: Path) -> Located:
    """A directory holding config.json (and a checkpoint), or a config.json file."""
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
        return Located(
            reference, _display_name(path.resolve().name), "directory", read_config(config_path), config_path, path
        )
    if found.kind == "file":
        if path.suffix != ".json":
            raise ModelReferenceError(
                f"{reference} is not a config.json; give the model's directory or its config.json"
            )
        return Located(
            reference, _display_name(path.resolve().parent.name), "config", read_config(path), path, path.parent
        )
    raise ModelReferenceError(
        f"cannot use {reference} as a model: it is {found.description}; "
        "give a directory with config.json, a config.json file or a preset"
    )


def _from_snapshot(reference: str, snapshot: hub.HubSnapshot) -> Located:
    """A hub model in the cache: its checkpoint files when another tool downloaded them all,
    else the headers bertgraph fetched (or none, offline, for a config cached alone)."""
    config_path = snapshot.folder / "config.json"
    headers_only = snapshot.headers != "files"
    return Located(
        reference,
        snapshot.name,
        "hub",
        read_config(config_path),
        config_path,
        snapshot.folder,
        snapshot.checkpoint,
        headers_only,
    )


def _family_or_refusal(config: Mapping[str, Any], origin: Path, name: str) -> Family:
    """The config's family; a config that needs its own code (``auto_map``) of a type transformers
    does not know is refused, since that code is never fetched or run."""
    try:
        return family_for(config, origin)
    except ConfigError as error:
        classes = remote_code(config)
        if not classes:
            raise
        raise ConfigError(
            f"{name} needs its own code ({classes[0]}, named by auto_map in its config), which bertgraph never "
            f"fetches or runs, and its model_type {config.get('model_type')!r} is not one transformers knows; "
            "draw a model of a type transformers has"
        ) from error


def remote_code(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The classes a config's ``auto_map`` names (code shipped with the model), sorted.

    >>> remote_code({"auto_map": {"AutoModel": "modeling_x.XModel", "AutoTokenizer": ["t.T", None]}})
    ('modeling_x.XModel', 't.T')
    """
    found = config.get("auto_map")
    if not isinstance(found, dict):
        return ()
    names: set[str] = set()
    for value in found.values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and item:
                names.add(item)
    return tuple(sorted(names))


def _display_name(name: str) -> str:
    """A folder name fit for titles: bytes that are not UTF-8 shown as U+FFFD, not smuggled through."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


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


def normalise(config: dict[str, Any], family: Family, origin: Path) -> dict[str, Any]:
    """A copy of ``config`` with size fields under the names the family's config class uses.

    transformers reads an alias (BART's ``num_hidden_layers``) as the field it stands for, so
    the two must agree; the alias is dropped, so that an override of the field is not undone.
    A type read off transformers keeps its aliases: its config class reads them as it would
    from config.json, after deriving fields (UMT5's decoder depth follows ``num_layers``, not
    its alias), and an override drops them (:func:`apply_overrides`).
    """
    result = dict(config)
    for alias, name in family.aliases.items():
        if alias not in result:
            continue
        value = result[alias] if family.inferred else result.pop(alias)
        if name in result and result[name] != value:
            raise ConfigError(
                f"{origin}: {alias} {value!r} and {name} {result[name]!r} name the same size; "
                "remove one or make them agree"
            )
        if not family.inferred:
            result[name] = value
    return result


def apply_overrides(config: dict[str, Any], overrides: dict[str, int], family: Family) -> dict[str, Any]:
    """A copy of ``config`` with command-line overrides applied to every field they size."""
    result = dict(config)
    for option, value in overrides.items():
        if option == "num_labels":
            result["num_labels"] = value
            # An explicit count replaces the label names that imply another count.
            result.pop("id2label", None)
            result.pop("label2id", None)
            continue
        for size in OVERRIDE_SIZES[option]:
            if size in family.sizes:
                name = family.sizes[size]
                result[name] = value
                for alias in [alias for alias, field in family.aliases.items() if field == name]:
                    result.pop(alias, None)  # read after the field, it would undo the override
    return result


def validate_config(
    config: dict[str, Any],
    origin: Path,
    family: Family | None = None,
    head: str = "base",
    set_by: Mapping[str, str] | None = None,
) -> None:
    """Check the fields that decide the architecture (:func:`rules_for` the family) and fill their defaults.

    Errors name the file and field, or the command-line option that set the field
    (``set_by``: field → option). The config is completed with what transformers would
    default — for a type read off transformers, by its own config class, which derives what
    follows from the fields given — (and, for a head that finds the last token by padding, a
    padding token), so the spec is complete and hashable as JSON.
    """
    set_by = set_by or {}
    family = family or family_for(config, origin)
    rules = rules_for(family, config["model_type"], config)

    def where(name: str) -> str:
        return set_by.get(name, str(origin))

    if family.inferred:
        check_fields(config, rules, where)  # the values as written, before transformers reads them
        _as_transformers_makes(config, family, origin)
        # Checked again as transformers completed them; fields known by their name's ending are still
        # those written (Switch derives a sparse step of 0 for no sparse layer, which its code allows).
        check_config(config, rules, where)
    else:
        check_config(config, rules, where, prepare=lambda c: _fill(c, family))
    _check_rope(config, origin)
    labels = config.get("id2label")
    if isinstance(labels, dict):
        if not all(isinstance(k, str) and k.strip().isdigit() for k in labels):
            raise ConfigError(f'{origin}: field \'id2label\' must map label numbers ("0", "1", …) to names')
        if "num_labels" not in config:
            found = problem("num_labels", rules.fields["num_labels"], len(labels))
            if found:
                raise ConfigError(f"{origin}: id2label names {len(labels):,} labels; {found}")
    if head in family.heads and family.heads[head].pad_token and config.get("pad_token_id") is None:
        eos = config.get("eos_token_id")
        eos = eos[0] if isinstance(eos, list) and eos else eos
        config["pad_token_id"] = eos if isinstance(eos, int) and not isinstance(eos, bool) else 0


# transformers' rotary kinds (modeling_rope_utils.ROPE_INIT_FUNCTIONS and "default"); a test keeps them in step.
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional")


def _check_rope(config: Mapping[str, Any], origin: Path) -> None:
    """A rotary-scaling kind transformers does not know is named, not left to a bare KeyError."""
    for name in ("rope_scaling", "rope_parameters"):
        value = config.get(name)
        parts = (
            value.values() if isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()) else [value]
        )
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("rope_type", part.get("type", "default"))
            if kind not in ROPE_TYPES:
                raise ConfigError(
                    f"{origin}: {name} has rope_type {_short(kind)}, which transformers does not know; "
                    f"use one of: {', '.join(ROPE_TYPES)}"
                )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _as_transformers_makes(config: dict[str, Any], family: Family, origin: Path) -> None:
    """A config of a type read off transformers, completed in place by the type's own config class
    (:func:`~bertgraph.model.families.generic.derived_config`): aliases under their field's name,
    derived fields derived, every other field at the class's default — never a default of bertgraph's."""
    from bertgraph.model.families.generic import derived_config

    model_type = config["model_type"]
    try:
        made = derived_config(model_type, config_kwargs(config))
    except Exception as error:
        raise ConfigError(
            f"{origin}: transformers cannot make a {model_type} config of this one: {first_line(error)}"
            + zero_divisors(config, error)
        ) from error
    config.clear()
    config.update(made)
    kv, heads = family.sizes.get("kv_heads"), family.sizes.get("heads")
    if kv and heads and kv in config and isinstance(config.get("kv_lora_rank"), int):
        # Latent attention (DeepSeek's) expands its keys and values to every query head: the key/value
        # heads are the query heads. transformers reads this field only for heads // it, which its sdpa
        # path repeats the keys by when a padding mask is given (a broadcast error for 4 heads of 2).
        config[kv] = config[heads]


def zero_divisors(config: Mapping[str, Any], error: BaseException) -> str:
    """For a division by zero in transformers' code, the fields of ``config`` the failing line reads
    that are 0, as advice (``" (attn_layer_period is 0: make it positive)"``); ``""`` otherwise."""
    import traceback

    if not isinstance(error, ZeroDivisionError) or error.__traceback__ is None:
        return ""
    line = traceback.extract_tb(error.__traceback__)[-1].line or ""
    read = re.findall(r"\.(\w+)", line)
    zero = sorted({name for name in read if type(config.get(name)) is int and config[name] == 0})
    if not zero:
        return ""
    return f" ({', '.join(zero)} {'is' if len(zero) == 1 else 'are'} 0, which the model divides by: make it positive)"


# What config.json holds besides the config class's arguments.
_NOT_KWARGS = ("auto_map", "architectures", "transformers_version", "model_type")


def config_kwargs(config: Mapping[str, Any]) -> dict[str, Any]:
    """config.json content as config-class keyword arguments, without remote-code hooks."""
    return {k: v for k, v in config.items() if k not in _NOT_KWARGS}


def _fill(config: dict[str, Any], family: Family) -> None:
    """Sizes that default to another size (T5's decoder depth is its encoder's) once defaults are in."""
    for size, (other, factor) in family.fallbacks.items():
        name, source = family.sizes[size], family.sizes[other]
        if config.get(name) is None and isinstance(config.get(source), int):
            config[name] = config[source] * factor


def _validate_example(spec: ModelSpec, batch: int, seq_len: int) -> None:
    _check_example_size("--batch", batch)
    check_length(spec, seq_len)


def _check_example_size(flag: str, value: int) -> None:
    found = problem(flag, Field("count", role="example"), value)
    if found:
        raise ConfigError(found.replace(f"field {flag!r}", flag))


def check_length(spec: ModelSpec, length: int, flag: str = "--seq-len") -> None:
    """A sequence of ``length`` tokens (given by ``flag``) that ``spec``'s model can take: within
    the example limit and the model's positions.

    Raises:
        ConfigError: one line naming ``flag`` and the longest length there is room for.
    """
    _check_example_size(flag, length)
    limit = spec.max_positions
    if limit is not None and length > limit:
        raise ConfigError(f"{flag} {length} is above {_positions(spec)}; use {flag} {limit} or less")


def check_generation(spec: ModelSpec, prompt: int, tokens: int, flag: str | None = "--seq-len") -> None:
    """A prompt of ``prompt`` tokens (given by ``flag``; None: the default example) and ``tokens``
    generated after it: the last step's cache holds both, so together they are one sequence, held to
    :func:`check_length`'s rule.

    Raises:
        ConfigError: one line naming both options and the most tokens there is room for.
    """
    check_length(spec, prompt, flag or "--seq-len")
    limit = spec.max_positions if spec.max_positions is not None else LIMITS["example"].maximum
    if prompt + tokens > limit:
        bound = (
            _positions(spec) if spec.max_positions is not None else f"the longest sequence bertgraph takes, {limit:,}"
        )
        total = f" ({prompt + tokens:,} tokens)" if len(str(tokens)) <= 12 else ""
        room = limit - prompt
        advice = f"use --generate {room} or less" if room else f"give a {flag} below {limit} to leave room"
        example_words = f"the default example's {prompt} token" + ("s" if prompt != 1 else "")
        given = (
            f"{flag} {prompt} and --generate {tokens} run"
            if flag
            else f"--generate {tokens} after {example_words} runs"
        )
        raise ConfigError(f"{given} past {bound}{total}; {advice}")


def _positions(spec: ModelSpec) -> str:
    """``max_position_embeddings 512``, or for RoBERTa ``the 512 positions roberta-base can use (…)``."""
    name = spec.family.sizes["max_position"]
    offset = spec.family.position_offset(spec.config)
    if not offset:
        return f"{name} {spec.max_positions}"
    return (
        f"the {spec.max_positions} positions {spec.name} can use ({name} {spec.config[name]}, counted from "
        f"{spec.family.positions_after} + 1 = {offset})"
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
