"""What bertgraph knows about a model family, as frozen plain data.

A :class:`Family` says what differs between BERT, RoBERTa, GPT-2, T5, …: its
``model_type``\\ s, the transformers class of each head, the config fields of its sizes,
the example inputs each head takes, where its layer stacks are and which role each
module plays. Nothing here imports torch or transformers: the records are read when a
reference is resolved, before (and often instead of) building a model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from bertgraph.model.fields import Field

ENCODER_ONLY = "encoder-only"
DECODER_ONLY = "decoder-only"
ENCODER_DECODER = "encoder-decoder"
STRUCTURES = (ENCODER_ONLY, DECODER_ONLY, ENCODER_DECODER)
# A generic record's structure when nothing about the type says which of those it is (VITS, text to
# speech, has an encoder stack but is no encoder-only model): drawings and tables then claim none.
UNTOLD = ""

# The head vocabulary every family's heads are named in.
HEAD_NAMES = (
    "base",
    "sequence-classification",
    "token-classification",
    "question-answering",
    "masked-lm",
    "multiple-choice",
    "next-sentence",
    "pretraining",
    "causal-lm",
    "seq2seq-lm",
)

# Module roles (``G_MODULES[path]["role"]``): what views, diagrams and tables speak.
MODEL = "model"
EMBEDDINGS = "embeddings"
POSITION = "position"
STACK = "stack"
LAYER = "layer"
SELF_ATTENTION = "self-attention"
CROSS_ATTENTION = "cross-attention"
FEED_FORWARD = "feed-forward"
NORM = "norm"
POOLER = "pooler"
HEAD = "head"
ROLES = (MODEL, EMBEDDINGS, POSITION, STACK, LAYER, SELF_ATTENTION, CROSS_ATTENTION, FEED_FORWARD, NORM, POOLER, HEAD)

# Stack kinds.
ENCODER = "encoder"
DECODER = "decoder"

# Example inputs and their dimensions. The decoder's length is a dimension of its own,
# ``tgt``, so cross-attention shows ``[…, tgt, seq]`` and costs are polynomials in both.
INPUT_DIMS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "input_ids": ("batch", "seq"),
        "attention_mask": ("batch", "seq"),
        "token_type_ids": ("batch", "seq"),
        "decoder_input_ids": ("batch", "tgt"),
        "decoder_attention_mask": ("batch", "tgt"),
    }
)
CHOICE_DIMS = ("batch", "choices", "seq")

# Command-line size options → the size names of a family (``--layers`` sets every stack's count).
OVERRIDE_SIZES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "layers": ("layers", "decoder_layers"),
        "hidden": ("hidden",),
        "heads": ("heads", "decoder_heads"),
        "kv_heads": ("kv_heads",),
        "intermediate": ("intermediate", "decoder_intermediate"),
        "vocab": ("vocab",),
    }
)


@dataclass(frozen=True)
class Variant:
    """One ``model_type`` of a family: where transformers keeps it, and its config's defaults.

    Attributes:
        module: the modeling module, imported directly (``transformers.models.bert.modeling_bert``).
        prefix: the class-name prefix its heads' templates complete (``Bert``).
        defaults: what the config class gives the fields bertgraph reads when config.json
            leaves them out (a test checks them against transformers).
    """

    module: str
    prefix: str
    defaults: Mapping[str, Any]


@dataclass(frozen=True)
class Head:
    """A task head in transformers.

    Attributes:
        template: the class name with ``{}`` for the variant's prefix (``{}ForSequenceClassification``).
        outputs: the names of its outputs, in order (what ONNX export names them).
        decoder_inputs: it takes ``decoder_input_ids`` and ``decoder_attention_mask``.
        backbone: the attribute holding the base model (``bert``); ``None``: the family's
            base-model prefix; ``""``: the head's modules sit beside the stacks (T5's LM head).
        pad_token: it finds each sequence's last token through ``pad_token_id``, which must
            be set for a batch of more than one.
    """

    template: str
    outputs: tuple[str, ...]
    decoder_inputs: bool = False
    backbone: str | None = None
    pad_token: bool = False


@dataclass(frozen=True)
class Stack:
    """A list of layers.

    Attributes:
        path: the layer list's module path relative to the backbone (``encoder.layer``).
        kind: ``encoder`` or ``decoder``.
        size: the size name of its layer count (``layers``, ``decoder_layers``).
        shared: one layer module called once per layer (ALBERT): layers are calls, not modules.
        special: how many leading layers differ from the rest (T5's block 0 owns the
            relative-position bias every later block reads).
        period: the config field of the period after which layers repeat (ModernBERT's
            global layer every third); ``None``: every layer after the special ones is alike.
        types: the config field listing each layer's kind, cut to length when tracing fewer layers.
    """

    path: str
    kind: str
    size: str = "layers"
    shared: bool = False
    special: int = 0
    period: str | None = None
    types: str | None = None


@dataclass(frozen=True)
class Family:
    """Everything bertgraph needs to know about one family of models.

    Attributes:
        name: the family (``bert``).
        structure: ``encoder-only``, ``decoder-only`` or ``encoder-decoder``; :data:`UNTOLD` (a
            generic record only) when none of them can be told.
        variants: ``model_type`` → :class:`Variant`.
        prefix: the base-model prefix (``bert``): heads keep the base model under it, and
            checkpoints name tensors with or without it.
        heads: head name (from :data:`HEAD_NAMES`) → :class:`Head`.
        sizes: size name (``layers``, ``hidden``, ``heads``, ``kv_heads``, ``intermediate``,
            ``vocab``, ``max_position``, ``type_vocab``, …) → its config field.
        aliases: other config field names transformers accepts for a size field
            (``num_hidden_layers`` for GPT-2's ``n_layer``).
        fallbacks: size name → (another size, factor) that gives it when the config leaves it
            empty (T5's decoder has as many layers as its encoder, GPT-2's feed-forward is 4 × hidden).
        stacks: the layer lists.
        roles: ``(pattern, role)`` rules over module paths relative to the backbone; the first
            pattern that matches the whole path decides, otherwise a module has its parent's role.
        titles: ``(pattern, title)`` rules, matched like ``roles``: what a diagram calls a module
            whose name does not say what it is (DeBERTa's relative-position table is read through
            ``encoder.LayerNorm``).
        token_types: the config field that makes ``token_type_ids`` an input when above 0.
        activation: the config field naming the activation function.
        head_dim: the config field of each attention head's size, when it need not be
            hidden / heads (T5's ``d_kv``).
        attention: the attention implementation transformers picks (``sdpa``, or ``eager``
            where the family has no other).
        presets: preset name → published config.json (with ``model_type``).
        hub_ids: hub id → preset name.
        uses: what models of the family are typically used for (the families table's last column).
        fields: rules for other config fields the family's models read (a window size, a
            bias switch), checked with the sizes; the variant's default, if any, still applies.
        positions_after: the config field after whose value learned positions start
            (RoBERTa's ``pad_token_id``: positions count from ``pad_token_id + 1``, so
            roberta-base uses 512 of its 514); ``None``: they start at 0.
        inferred: the record was read off transformers' module tree
            (:mod:`bertgraph.model.families.generic`), not written by hand.
    """

    name: str
    structure: str
    variants: Mapping[str, Variant]
    prefix: str
    heads: Mapping[str, Head]
    sizes: Mapping[str, str]
    stacks: tuple[Stack, ...]
    roles: tuple[tuple[str, str], ...]
    titles: tuple[tuple[str, str], ...] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)
    fallbacks: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    token_types: str | None = None
    activation: str | None = None
    head_dim: str | None = None
    attention: str = "sdpa"
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    hub_ids: Mapping[str, str] = field(default_factory=dict)
    uses: str = ""
    fields: Mapping[str, Field] = field(default_factory=dict)
    positions_after: str | None = None
    inferred: bool = False

    # --- classes ------------------------------------------------------------------------------
    def class_name(self, model_type: str, head: str) -> str:
        """The transformers class of ``head`` (``BertForSequenceClassification``)."""
        return self.heads[head].template.format(self.variants[model_type].prefix)

    def backbone(self, head: str) -> str:
        """Module path of the base model inside the head's model; ``""`` for the base model."""
        if head == "base":
            return ""
        chosen = self.heads[head].backbone
        return self.prefix if chosen is None else chosen

    # --- inputs ----------------------------------------------------------------------------
    def input_names(self, head: str, config: Mapping[str, Any]) -> tuple[str, ...]:
        """The example inputs ``head`` is traced with, decided by the family and its config."""
        names = ["input_ids", "attention_mask"]
        if self.token_types is not None and int(config.get(self.token_types) or 0) > 0:
            names.append("token_type_ids")
        if self.heads[head].decoder_inputs:
            names += ["decoder_input_ids", "decoder_attention_mask"]
        return tuple(names)

    def input_dims(self, head: str, config: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
        """Input name → its dimension names (multiple choice adds ``choices``)."""
        dims = {}
        for name in self.input_names(head, config):
            dims[name] = CHOICE_DIMS if head == "multiple-choice" and INPUT_DIMS[name][1] == "seq" else INPUT_DIMS[name]
        return dims

    # --- sizes -----------------------------------------------------------------------------
    def size(self, config: Mapping[str, Any], name: str) -> Any:
        """A size from a complete config (``None`` when the family has no such size)."""
        fieldname = self.sizes.get(name)
        return None if fieldname is None else config.get(fieldname)

    def position_offset(self, config: Mapping[str, Any]) -> int:
        """Learned positions the embedding never uses: ``positions_after``'s value + 1, else 0.

        transformers' default padding index of these families is 1; ``null`` means none (0).
        """
        if self.positions_after is None:
            return 0
        return int(config.get(self.positions_after, 1) or 0) + 1

    def usable_positions(self, config: Mapping[str, Any]) -> int | None:
        """The longest sequence the model can take (None: no learned positions bound it).

        The one place validation, tracing, cost, ONNX export and verification read it from.
        """
        limit = self.size(config, "max_position")
        return None if limit is None else int(limit) - self.position_offset(config)

    def stack_layers(self, stack: Stack, config: Mapping[str, Any]) -> int:
        return int(self.size(config, stack.size))

    # --- roles -----------------------------------------------------------------------------
    def roles_of(self, paths: list[str], backbone: str) -> dict[str, str]:
        """The role of every module path of a model with this backbone (see :data:`ROLES`).

        The root is ``model``; a module outside the backbone is part of the ``head``.
        """
        rules = [(re.compile(pattern), role) for pattern, role in self.roles]
        found: dict[str, str] = {}
        for path in sorted(paths, key=lambda p: (p.count(".") if p else -1, p)):
            parent = path.rsplit(".", 1)[0] if "." in path else ""
            if path in ("", backbone):
                found[path] = MODEL
                continue
            if backbone and not path.startswith(backbone + "."):
                found[path] = HEAD
                continue
            relative = path[len(backbone) + 1 :] if backbone else path
            role = next((r for pattern, r in rules if pattern.fullmatch(relative)), None)
            found[path] = role or found.get(parent, MODEL)
        return found


def frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only view of a mapping, so a record cannot be changed by accident."""
    return MappingProxyType(dict(mapping))
