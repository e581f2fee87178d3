"""A :class:`Family` record for a transformers text model type that has no hand-written one.

The record is read off transformers itself: the auto tables give the base class and the
causal-LM, seq2seq-LM and masked-LM heads, the type's config class gives its defaults, and
a small model built on the meta device gives the module tree — a stack is an
``nn.ModuleList`` whose length is a layer-count field of the config, and each module's role
comes from its class and attribute names. The 16 hand-written records always win
(:func:`bertgraph.model.families.family_of` is asked first); this module imports torch and
transformers, so it is imported only for a type none of them knows.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Mapping
from typing import Any

from bertgraph.errors import ConfigError, first_line
from bertgraph.model.families.bert import LAST_HIDDEN, LOGITS
from bertgraph.model.families.generic_repairs import fit_shrunk, repair
from bertgraph.model.families.record import (
    CROSS_ATTENTION,
    DECODER,
    DECODER_ONLY,
    EMBEDDINGS,
    ENCODER,
    ENCODER_DECODER,
    ENCODER_ONLY,
    FEED_FORWARD,
    LAYER,
    NORM,
    POSITION,
    SELF_ATTENTION,
    STACK,
    UNTOLD,
    Family,
    Head,
    Stack,
    Variant,
    frozen,
)

# Size name → the config fields that may hold it, first found wins (names differ by family).
SIZE_FIELDS: Mapping[str, tuple[str, ...]] = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers", "num_encoder_layers"),
    "decoder_layers": ("decoder_layers", "num_decoder_layers"),
    "hidden": ("hidden_size", "d_model", "n_embd", "dim", "model_dim", "embed_dim", "emb_dim"),
    "heads": ("num_attention_heads", "n_head", "num_heads", "n_heads", "encoder_attention_heads"),
    "decoder_heads": ("decoder_attention_heads",),
    "kv_heads": ("num_key_value_heads", "n_kv_heads", "num_kv_heads"),
    "intermediate": ("intermediate_size", "ffn_dim", "n_inner", "d_ff", "encoder_ffn_dim", "ffn_hidden_size"),
    "decoder_intermediate": ("decoder_ffn_dim",),
    "vocab": ("vocab_size",),
    "max_position": ("max_position_embeddings", "n_positions", "max_seq_len", "max_sequence_length"),
    # Mixture of experts: routed experts per block and how many each token goes to (graph/moe.py).
    "experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
    "experts_per_token": ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "moe_k"),
}
# A head's own size, where the hidden size need not divide by the heads (Reformer's 12 heads of 64 in 256).
HEAD_SIZE_FIELDS = ("head_dim", "attention_head_size", "d_kv", "kv_channels", "head_size")
_ACTIVATION_FIELDS = ("hidden_act", "activation_function", "hidden_activation", "activation", "act_fn")

# What small_config sets wherever a type's config has the field: a model of a few hundred
# thousand parameters that still has every part (experts, shared experts, grouped heads).
SMALL: Mapping[str, Any] = {
    **dict.fromkeys(SIZE_FIELDS["layers"] + SIZE_FIELDS["decoder_layers"], 2),
    **dict.fromkeys(SIZE_FIELDS["hidden"], 64),
    **dict.fromkeys(SIZE_FIELDS["heads"] + SIZE_FIELDS["decoder_heads"] + ("n_heads",), 4),
    **dict.fromkeys(SIZE_FIELDS["kv_heads"], 2),
    **dict.fromkeys(SIZE_FIELDS["intermediate"] + SIZE_FIELDS["decoder_intermediate"], 128),
    "moe_intermediate_size": 128,
    "shared_expert_intermediate_size": 128,
    "head_dim": 16,
    "d_kv": 16,
    # Multi-head latent attention's sizes (DeepSeek) and a partial rotary size (GPT-J), within a 16-wide head.
    "qk_rope_head_dim": 16,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    "rotary_dim": 8,
    "vocab_size": 1000,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "moe_num_experts": 4,
    "num_experts_per_tok": 2,
    "num_experts_per_token": 2,
    "moe_topk": 2,
    "moe_k": 2,
    "n_group": 1,
    "num_expert_group": 1,
    "topk_group": 1,
    "decoder_sparse_step": 1,
    "use_cache": False,
}
# Leading dense layers of a mixture-of-experts stack: one, so a two-layer model has both kinds.
_FIRST_DENSE = ("first_k_dense_replace", "num_dense_layers")
_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id", "cls_token_id")
# Forward arguments that say a model reads something other than text.
NON_TEXT_INPUTS = (
    "pixel_values",
    "pixel_values_videos",
    "input_features",
    "input_values",
    "audio_codes",
    "past_values",
    "bbox",
    "image_embeds",
    "visual_embeds",
    "states",
)

# Sub-configs of one text model's parts (DBRX's attention and feed-forward configs) are fine;
# one for another modality (a vision tower, an audio encoder) makes a multimodal model.
_TEXT_PART = re.compile(r"\w*(attn|attention|ffn|mlp|moe|encoder|decoder|text)_config")
_OTHER_MODALITY = re.compile(r"vision|audio|speech|image|video|visual|vq|codec|acoustic|perceiver|qformer")

# Role rules by class name (and, below, by attribute name) for modules inside a layer.
_ATTENTION_CLASS = re.compile(r"Attention|Attn", re.I)
_CROSS_NAME = re.compile(r"(encoder_attn|cross_attn\w*|crossattention|cross_attention|enc_dec_attention)$")
_ATTENTION_NAME = re.compile(r"(self_attn|self_attention|attention|attn|mixer)$")
_FEED_FORWARD_CLASS = re.compile(r"MLP|FeedForward|FFN|Moe|MoE|Experts|SparseMoeBlock|Expert", re.I)
_FEED_FORWARD_NAME = re.compile(r"(mlp|feed_forward|ffn|moe|block_sparse_moe|experts|fc1|fc2|fc_in|fc_out|ff)$")
_NORM_CLASS = re.compile(r"Norm", re.I)
_NORM_NAME = re.compile(r"(\w*norm\w*|ln_\w+|ln\d*)$", re.I)
_EMBEDDING_NAME = re.compile(r"(embed\w*|wte|word_embeddings|tok_embeddings|embeddings|shared)$")
_POSITION_NAME = re.compile(r"(rotary\w*|\w*pos\w*|wpe)$")


@functools.cache
def auto_tables() -> dict[str, Mapping[str, Any]]:
    """transformers' auto tables: head name → ``model_type`` → class name (or names: the first is taken)."""
    from transformers.models.auto import modeling_auto as auto

    return {
        "base": auto.MODEL_MAPPING_NAMES,
        "causal-lm": auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        "seq2seq-lm": auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
        "masked-lm": auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    }


def known_type(model_type: str) -> bool:
    """Whether the installed transformers has a config class for ``model_type``."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return model_type in CONFIG_MAPPING_NAMES


def config_class(model_type: str) -> Any:
    """The config class of a ``model_type``; an unknown type is a one-line error."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES

    if model_type not in CONFIG_MAPPING_NAMES:
        raise ConfigError(f"model_type {model_type!r} is not a model type transformers knows")
    return CONFIG_MAPPING[model_type]


def aliases(model_type: str) -> dict[str, str]:
    """Other names the type's config class takes for its fields (its ``attribute_map``: Qwen3-MoE's
    ``num_experts`` for ``num_local_experts``, UMT5's ``num_hidden_layers`` for ``num_layers``)."""
    cls = config_class(model_type)
    fields = cls().to_dict()
    mapped = getattr(cls, "attribute_map", None) or {}
    return {alias: name for alias, name in sorted(mapped.items()) if name in fields and alias not in fields}


# What a config's to_dict() carries besides the model's fields.
_BOOKKEEPING = ("transformers_version", "architectures", "auto_map", "_name_or_path")


def derived_config(model_type: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The complete config transformers makes of ``kwargs`` for ``model_type``, as plain data.

    The type's config class is given them as ``from_pretrained`` gives a config.json's fields, so
    every field it derives follows them (Falcon's key/value heads and 4 × hidden feed-forward, a
    head size, per-layer kinds) and every field left out has the class's default.

    Raises:
        Exception: the config class's own refusal.
    """
    import json

    cls = config_class(model_type)
    # As from_pretrained reads a config.json and save_pretrained writes one: JSON's types (label
    # numbers as strings, dtypes by name), floats JSON has no word for tagged ({"__float__": "Infinity"}).
    decoded = cls._decode_special_floats
    values: dict[str, Any] = decoded(json.loads(cls(**decoded(dict(kwargs))).to_json_string(use_diff=False)))
    for name in _BOOKKEEPING:
        values.pop(name, None)
    values["model_type"] = model_type
    return values


def head_class(model_type: str, head: str) -> Any:
    """The transformers class of ``head`` for a ``model_type`` (``MistralForCausalLM``)."""
    import transformers

    name = auto_tables()[head][model_type]
    name = name[0] if isinstance(name, (list, tuple)) else name
    return getattr(transformers, name)


def text_refusal(model_type: str) -> str | None:
    """Why a ``model_type`` is not a text model bertgraph can draw generically, or None."""
    cls = config_class(model_type)
    if model_type not in auto_tables()["base"]:
        return f"transformers has no base model class for model_type {model_type!r}"
    subs = tuple(getattr(cls, "sub_configs", None) or ())
    other = sorted(name for name in subs if not _TEXT_PART.fullmatch(name))
    if other and any(_OTHER_MODALITY.search(name) for name in subs):
        return f"model_type {model_type!r} combines sub-models ({', '.join(sorted(subs))}), not a text model"
    try:
        base = head_class(model_type, "base")
    except Exception as error:  # a class transformers lists but cannot import
        return f"transformers cannot import the base class of {model_type!r}: {first_line(error)}"
    parameters = inspect.signature(base.forward).parameters
    other = sorted(name for name in NON_TEXT_INPUTS if name in parameters)
    if other:
        return f"model_type {model_type!r} reads {', '.join(other)}, not only text"
    if "input_ids" not in parameters:
        return f"model_type {model_type!r} takes no input_ids, so it is not a text model"
    return None


# Fields a shallow shrink sets: depth and experts only, every width as the type's default
# (for types whose widths are tied by rules small widths break: a rotary size, a head size).
SHALLOW = frozenset(
    SIZE_FIELDS["layers"]
    + SIZE_FIELDS["decoder_layers"]
    + SIZE_FIELDS["experts"]
    + SIZE_FIELDS["experts_per_token"]
    + ("n_group", "num_expert_group", "topk_group", "decoder_sparse_step", "use_cache")
)
# How far small_config shrinks: every size, depth and experts only, or nothing (the type's default).
LEVELS = ("small", "shallow", "default")
# Builds a default config gets before it is given up: each repair fixes one field.
_MAX_REPAIRS = 8


def small_config(model_type: str, level: str = "small", **extra: Any) -> dict[str, Any]:
    """A type's default config shrunk to a model small enough to build and run on a CPU.

    Every field of :data:`SMALL` the config has is set (at level ``shallow`` only those of
    :data:`SHALLOW`, at ``default`` only ``use_cache``), through the config class so that the
    fields it derives follow; then generic repairs: sizes the defaults leave ``None`` are filled,
    special token ids beyond the shrunk vocabulary are cut back into it, ``use_cache`` is
    off in sub-configs, and per-layer lists follow the layer count. ``extra`` fields win.
    """
    cls = config_class(model_type)
    defaults = cls().to_dict()
    wanted = {
        name: value
        for name, value in SMALL.items()
        if name in defaults and (level == "small" or (level == "shallow" and name in SHALLOW) or name == "use_cache")
    }
    for name in _FIRST_DENSE:
        if level != "default" and isinstance(defaults.get(name), int):
            wanted[name] = 1
    try:
        # Made by the config class, so fields it derives (per-layer lists, a head size) follow the new sizes.
        config = cls(**wanted).to_dict()
    except Exception:  # a config class that refuses the sizes alone: set them over its defaults
        config = {**defaults, **wanted}
    _fill_none(config)
    if level == "small" and isinstance(config.get("qk_head_dim"), int):
        # Derived when the config is made, so to_dict() holds the default's sum: made again.
        config["qk_head_dim"] = config["qk_nope_head_dim"] + config["qk_rope_head_dim"]
    if level == "small" and "kv_lora_rank" in config and "num_key_value_heads" in config:
        config["num_key_value_heads"] = config["num_attention_heads"]  # latent attention has no grouped heads
    config.update(extra)
    vocab = config.get("vocab_size")
    for name in _TOKEN_IDS:
        value = config.get(name)
        if isinstance(vocab, int) and isinstance(value, int) and not isinstance(value, bool) and value >= vocab:
            config[name] = vocab - 1
        if isinstance(vocab, int) and isinstance(value, list):
            config[name] = [v if not isinstance(v, int) or v < vocab else vocab - 1 for v in value]
    for value in config.values():
        if isinstance(value, dict) and "use_cache" in value:
            value["use_cache"] = False
    _fit_layer_lists(config)
    if config.get("pad_token_id", 0) is None and _source_has(model_type, ".ne(padding_idx)"):
        config["pad_token_id"] = 0  # positions counted from the padding (ESM, as RoBERTa): there must be one
    if level != "default":
        mrope = _source_has(model_type, "mrope_section")
        old, new = _hidden(defaults), _hidden(config)
        rotary = _rotary_half(config) if level == "small" else None
        fit_shrunk(config, _layer_count(config), rotary, mrope, (old, new) if old and new else None)
    for name in ("architectures", "transformers_version", "auto_map", "_name_or_path"):
        config.pop(name, None)
    config["model_type"] = model_type
    return config


def _fill_none(config: dict[str, Any]) -> None:
    """Fields a default config leaves ``None`` that the modeling code reads as sizes."""
    if "head_dim" in config and config["head_dim"] is None:
        config["head_dim"] = SMALL["head_dim"]
    for name in SIZE_FIELDS["kv_heads"]:
        if name in config and config[name] is None:
            config[name] = SMALL[name]
    if "num_experts_per_tok" in config and config["num_experts_per_tok"] is None:
        config["num_experts_per_tok"] = SMALL["num_experts_per_tok"]


def _layer_count(config: Mapping[str, Any]) -> int | None:
    return next((config[name] for name in SIZE_FIELDS["layers"] if _count(config.get(name))), None)


def _hidden(config: Mapping[str, Any]) -> int | None:
    return next((config[n] for n in SIZE_FIELDS["hidden"] if _count(config.get(n))), None)


def _rotary_half(config: Mapping[str, Any]) -> int | None:
    """Half the rotary size of one head: how many frequencies a position has."""
    hidden = _hidden(config)
    heads = next((config[n] for n in SIZE_FIELDS["heads"] if _count(config.get(n))), None)
    head = config.get("head_dim") if _count(config.get("head_dim")) else (hidden // heads if hidden and heads else None)
    found = config.get("rope_parameters")
    rope: Mapping[str, Any] = found if isinstance(found, dict) else {}
    factor = rope.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
    if not head or not isinstance(factor, (int, float)):
        return None
    return int(head * factor) // 2


@functools.cache
def _source(model_type: str) -> str:
    """The type's modeling code, for the few repairs that depend on what it does with a field."""
    import sys

    module = sys.modules.get(head_class(model_type, "base").__module__)
    try:
        return inspect.getsource(module) if module is not None else ""
    except (OSError, TypeError):
        return ""


def _source_has(model_type: str, text: str) -> bool:
    """Whether the type's modeling code holds ``text`` (``mrope_section``: rotary frequencies split
    into sections, which must add up to half a shrunk head)."""
    return text in _source(model_type)


def built_config(model_type: str, level: str = "small") -> tuple[dict[str, Any], Any]:
    """:func:`small_config` at ``level`` and the meta model transformers builds from it, repaired
    (:mod:`generic_repairs`) as often as a build failure names a field a repair knows.

    Raises:
        Exception: transformers' own error of the last build, when no repair applies.
    """
    import torch

    base = head_class(model_type, "base")
    config = small_config(model_type, level)
    for _ in range(_MAX_REPAIRS):
        try:
            made = config_class(model_type)(**{k: v for k, v in config.items() if k != "model_type"})
            with torch.device("meta"):
                model = base(made)
        except Exception as error:
            if not repair(config, error, _layer_count(config)):
                raise
            continue
        try:
            _run_on_meta(model)
        except Exception as error:  # a forward that fails for a field a repair knows is built again
            if repair(config, error, _layer_count(config)):
                continue
        return config, model  # any other failure is the trace's to tell, with its cause
    raise ConfigError(f"transformers cannot build {base.__name__} from its default config after {_MAX_REPAIRS} repairs")


def _run_on_meta(model: Any) -> None:
    """One forward pass of ``model`` on fake inputs (two sequences of seven tokens) with sizes torch may
    reason about, as tracing runs it: a default config can build a model whose forward fails (X-MOD's
    missing default language, DBRX's clamp without bounds)."""
    import logging

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    quiet = logging.getLogger("torch._subclasses.fake_tensor")  # logs every data-dependent guard it refuses
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        with FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv()) as mode, torch.no_grad():
            ids = mode.from_tensor(torch.zeros((2, 7), dtype=torch.long, device="meta"))
            inputs = {"input_ids": ids}
            if getattr(model.config, "is_encoder_decoder", False) and "decoder_input_ids" in _forward_arguments(model):
                inputs["decoder_input_ids"] = ids
            model.eval()(**inputs)
    finally:
        quiet.setLevel(level)


def _forward_arguments(model: Any) -> frozenset[str]:
    return frozenset(inspect.signature(model.forward).parameters)


def _fit_layer_lists(config: dict[str, Any]) -> None:
    """Per-layer lists (``layer_types``, …) cut to the shrunk layer count."""
    layers = _layer_count(config)
    if layers is None:
        return
    for name in ("layer_types", "mlp_layer_types", "layers_block_type"):
        value = config.get(name)
        if isinstance(value, list) and len(value) > layers:
            config[name] = value[:layers]


def generic_family(model_type: str) -> Family:
    """The record of a text ``model_type`` no hand-written record knows, built once per process.

    Raises:
        ConfigError: the type is not a text model, or transformers cannot build it (the reason).
    """
    return _generic_family(model_type)


@functools.cache
def _generic_family(model_type: str) -> Family:
    refusal = text_refusal(model_type)
    if refusal is not None:
        raise ConfigError(refusal + "; bertgraph draws text models")
    base = head_class(model_type, "base")
    for level in LEVELS:
        try:
            _, model = built_config(model_type, level)
            config = model.config
            break
        except Exception as error:  # the shallow shrink is tried next; its failure is reported
            failure = error
    else:
        raise ConfigError(
            f"transformers cannot build {base.__name__} from its default config: {first_line(failure)}; "
            "give the checkpoint's config.json instead of the type's defaults"
        ) from failure
    values = config.to_dict()
    sizes = _sizes(values)
    stacks = _stacks(model, values, sizes)
    # No layer list as long as a layer count (BLT's patcher and global model): traced whole, not grown.
    structure = _structure(model_type, config)
    heads = {"base": Head(base.__name__, LAST_HIDDEN, decoder_inputs=structure == ENCODER_DECODER)}
    for head in ("causal-lm", "seq2seq-lm", "masked-lm"):
        if model_type in auto_tables()[head]:
            heads[head] = Head(head_class(model_type, head).__name__, LOGITS, decoder_inputs=head == "seq2seq-lm")
    # The type's own config class, not the base class's: EXAONE's base model is LlamaModel, its defaults ExaoneConfig's.
    own = config_class(model_type)
    defaults = {field: _default(own, field) for field in sizes.values()}
    activation = next((name for name in _ACTIVATION_FIELDS if isinstance(values.get(name), str)), None)
    if activation is not None:
        defaults[activation] = _default(own, activation)
    fallbacks = {}
    if "kv_heads" in sizes and defaults.get(sizes["kv_heads"]) is None:
        fallbacks["kv_heads"] = ("heads", 1)
    if "intermediate" in sizes and defaults.get(sizes["intermediate"]) is None:
        fallbacks["intermediate"] = ("hidden", 4)
    return Family(
        name=model_type,
        structure=structure,
        variants=frozen({model_type: Variant(base.__module__, "", frozen(defaults))}),
        prefix=getattr(base, "base_model_prefix", "") or "model",
        heads=frozen(heads),
        sizes=frozen(sizes),
        aliases=frozen(aliases(model_type)),
        stacks=tuple(stacks),
        roles=tuple(_roles(model, stacks, values.get(sizes["layers"]) if "layers" in sizes else None)),
        fallbacks=frozen(fallbacks),
        activation=activation,
        head_dim=next((name for name in HEAD_SIZE_FIELDS if name in values), None),
        uses="roles inferred from the module tree",
        inferred=True,
    )


def _default(config_class: Any, field: str) -> Any:
    """A field's default in the type's own config class (what a config.json without it gets)."""
    value = config_class().to_dict().get(field)
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def _sizes(values: Mapping[str, Any]) -> dict[str, str]:
    """Size name → the config field that holds it in this type's config."""
    found = {}
    for size, names in SIZE_FIELDS.items():
        name = next((n for n in names if _count(values.get(n))), None)
        if name is not None:
            found[size] = name
    return found


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _structure(model_type: str, config: Any) -> str:
    """What the config or the type's heads say the model is; :data:`UNTOLD` for a base model alone
    (VITS: an encoder stack inside a text-to-speech model is no encoder-only backbone)."""
    if getattr(config, "is_encoder_decoder", False):
        return ENCODER_DECODER
    if model_type in auto_tables()["masked-lm"]:
        return ENCODER_ONLY
    if model_type in auto_tables()["causal-lm"]:
        return DECODER_ONLY
    return UNTOLD


def _stacks(model: Any, values: Mapping[str, Any], sizes: Mapping[str, str]) -> list[Stack]:
    """The layer lists: top-most ``ModuleList``\\ s of modules with parameters, as long as a layer count."""
    from torch import nn

    stacks: list[Stack] = []
    for path, module in model.named_modules():
        if not path or not isinstance(module, nn.ModuleList) or len(module) == 0:
            continue
        if any(path.startswith(stack.path + ".") for stack in stacks):
            continue
        if not all(isinstance(child, nn.Module) and list(child.children()) for child in module):
            continue  # a list of bare linears or norms is part of a layer, not a stack
        decoder_side = "decoder" in path.split(".")[0] or path.startswith("decoder")
        size = "decoder_layers" if decoder_side and "decoder_layers" in sizes else "layers"
        if size not in sizes or values.get(sizes[size]) != len(module):
            continue
        kind = DECODER if decoder_side or "encoder" not in path else ENCODER
        types = "layer_types" if isinstance(values.get("layer_types"), list) else None
        stacks.append(Stack(path, kind, size, types=types if size == "layers" else None))
    keys = [(stack.path.rpartition(".")[0], stack.kind, stack.size) for stack in stacks]
    # Lists beside each other under one parent, each a layer's part (XLM's attentions and ffns), are no stack.
    return [stack for stack, key in zip(stacks, keys) if keys.count(key) == 1]


def _roles(model: Any, stacks: list[Stack], layers: int | None = None) -> list[tuple[str, str]]:
    """Role rules over paths relative to the base model, from class and attribute names.

    An item of a per-layer list (one item per layer, ``layers`` of them) that is not a stack
    (XLM's ``attentions.3``, ``ffns.3``) has the role its class gives a layer's part.
    """
    from torch import nn

    rules: dict[str, str] = {}
    for path, module in model.named_modules():
        per_layer = isinstance(module, nn.ModuleList) and layers is not None and len(module) == layers
        if per_layer and not any(s.path == path or path.startswith(s.path + ".") for s in stacks):
            first = next(iter(module), None)
            name = path.rsplit(".", 1)[-1]
            role = None if first is None else _layer_part_role(name, type(first).__name__, first, nn)
            if role is not None:
                rules[re.escape(path) + r"\.\d+"] = role
    layer_of = {stack.path: re.escape(stack.path) for stack in stacks}
    for path, module in model.named_modules():
        if not path:
            continue
        name = path.rsplit(".", 1)[-1]
        cls = type(module).__name__
        stack = next((s for s in stacks if path == s.path or path.startswith(s.path + ".")), None)
        if stack is not None:
            if path == stack.path:
                rules[re.escape(path)] = STACK
                continue
            rest = path[len(stack.path) + 1 :].split(".", 1)
            pattern = layer_of[stack.path] + r"\.\d+" + ("" if len(rest) == 1 else r"\." + re.escape(rest[1]))
            if len(rest) == 1:
                rules[pattern] = LAYER
                continue
            role = _layer_part_role(name, cls, module, nn)
            if role is not None:
                rules.setdefault(pattern, role)
            continue
        role = _outside_role(name, cls, module, nn)
        if role is not None:
            rules[re.escape(path)] = role
        elif any(stack.path.startswith(path + ".") for stack in stacks):
            rules[re.escape(path)] = STACK  # BART's encoder and decoder: the stack's owner
    return list(rules.items())


def _layer_part_role(name: str, cls: str, module: Any, nn: Any) -> str | None:
    if _CROSS_NAME.fullmatch(name):
        return CROSS_ATTENTION
    if _NORM_CLASS.search(cls) or (isinstance(module, nn.LayerNorm) or _NORM_NAME.fullmatch(name)):
        return NORM
    if _ATTENTION_NAME.fullmatch(name) or (_ATTENTION_CLASS.search(cls) and not _FEED_FORWARD_NAME.fullmatch(name)):
        return SELF_ATTENTION
    if _FEED_FORWARD_NAME.fullmatch(name) or _FEED_FORWARD_CLASS.search(cls):
        return FEED_FORWARD
    return None


def _outside_role(name: str, cls: str, module: Any, nn: Any) -> str | None:
    if "Rotary" in cls or ((_POSITION_NAME.fullmatch(name) and "emb" in name.lower()) or name == "wpe"):
        return POSITION
    if isinstance(module, nn.Embedding) or _EMBEDDING_NAME.fullmatch(name):
        return EMBEDDINGS
    if _NORM_CLASS.search(cls) or isinstance(module, nn.LayerNorm) or _NORM_NAME.fullmatch(name):
        return NORM
    return None
