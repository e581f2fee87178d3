"""Repairs of a shrunk default config that transformers cannot build or trace as it is.

Two kinds, both generic (keyed on the shape of a field or of an error, never on a model type):

- :func:`fit_shrunk` runs on every shrunk config: fields whose values were sized for the
  default depth or head size (a per-layer pattern with a repeat count, rotary sections that
  must add up to half a rotary head) are refitted to the shrunk ones.
- :func:`repair` runs when building the meta model, or running it on meta inputs, failed: it
  reads the error, changes the one field the error points at, and says whether it changed
  anything (the caller builds again).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# Counts a default config may leave ``None`` although the modeling code multiplies by them.
_NONE_COUNTS = ("n_shared_experts", "num_shared_experts")
_MISSING_ATTRIBUTE = re.compile(r"'(\w+Config)' object has no attribute '(\w+)'")
# A setter the error asks to be called (X-MOD: ``set_default_language()``): the field it sets.
_SETTER_ASKED = re.compile(r"\bset_(default_\w+?)\(")
# torch's refusal of a clamp whose bounds are both None (DBRX's ``clip_qkv``, None by default).
_CLAMP_UNBOUNDED = "clamp called but both min and max are none"
# The bound such a field gets: DBRX's published checkpoints clip at 8; the graph only needs a number.
CLIP_BOUND = 8.0
# The layer kind transformers' configs give a plain attention layer.
_FULL_ATTENTION = "full_attention"


def fit_shrunk(
    config: dict[str, Any],
    layers: int | None,
    rotary_half: int | None,
    mrope: bool,
    hidden: tuple[int, int] | None = None,
) -> None:
    """Refit, in place, fields sized for the default model to a shrunk one of ``layers`` layers.

    ``rotary_half`` is half the rotary size of one head (the frequencies a position has), and
    ``mrope`` says whether the modeling code splits them into sections (multimodal rotary).
    ``hidden`` is the hidden size before and after shrinking: a list of widths that added up to
    it (Reformer's axial position embeddings, ``[64, 192]`` of 256) adds up to the new one.
    """
    if layers is not None:
        _fit_patterns(config, layers)
    if hidden is not None and hidden[0] != hidden[1]:
        for name, value in list(config.items()):
            if (
                isinstance(value, list)
                and len(value) > 1
                and all(type(v) is int for v in value)
                and sum(value) == hidden[0]
            ):
                config[name] = _sections(hidden[1], len(value))
    rope = config.get("rope_parameters")
    if mrope and rotary_half and isinstance(rope, dict) and "rope_type" in rope:
        parts = len(rope.get("mrope_section") or ()) or 3
        if rotary_half >= parts:  # each section keeps a frequency (a quarter-rotary head of 16 has two)
            rope["mrope_section"] = _sections(rotary_half, parts)


def _fit_patterns(config: dict[str, Any], layers: int) -> None:
    """A pattern repeated a number of times (GPT-Neo's ``attention_types: [[["global", "local"], 12]]``)
    repeated so it covers ``layers``; the list it expands to (``attention_layers``) follows."""
    for name, value in list(config.items()):
        if not (isinstance(value, list) and len(value) == 1 and isinstance(value[0], list) and len(value[0]) == 2):
            continue
        pattern, count = value[0]
        if not (isinstance(pattern, list) and pattern and isinstance(count, int) and len(pattern) * count > layers):
            continue
        repeat = max(1, layers // len(pattern))
        config[name] = [[pattern, repeat]]
        expanded = (pattern * repeat)[:layers]
        for other, listed in config.items():
            same_length = isinstance(listed, list) and len(listed) == len(pattern) * count
            if other != name and same_length and all(isinstance(item, str) and item in pattern for item in listed):
                config[other] = expanded


def _sections(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal whole sections, the larger last.

    >>> _sections(8, 3), _sections(4, 3)
    ([2, 3, 3], [1, 1, 2])
    """
    small, extra = divmod(total, parts)
    return [small] * (parts - extra) + [small + 1] * extra


def repair(config: dict[str, Any], error: BaseException, layers: int | None) -> bool:
    """Change the field ``error`` says is missing or unusable; False when no repair applies."""
    return any(step(config, error, layers) for step in _REPAIRS)


def _sub_config_attribute(config: dict[str, Any], error: BaseException, layers: int | None) -> bool:
    """A sub-config the modeling code reads a field from that only the outer config has
    (DBRX's attention config and ``rope_theta``): the outer value, copied in."""
    found = _MISSING_ATTRIBUTE.search(str(error)) if isinstance(error, AttributeError) else None
    if found is None:
        return False
    name = found.group(2)
    rope = config.get("rope_parameters")
    value = config.get(name, rope.get(name) if isinstance(rope, dict) else None)
    if value is None:
        return False
    changed = False
    for sub in config.values():
        if isinstance(sub, dict) and "model_type" in sub and name not in sub:
            sub[name] = value
            changed = True
    return changed


def _none_fields(config: dict[str, Any], error: BaseException, layers: int | None) -> bool:
    """A ``None`` the modeling code multiplies or indexes: a count of one, or one attention layer per layer."""
    if not (isinstance(error, TypeError) and "NoneType" in str(error)):
        return False
    for name in _NONE_COUNTS:
        if name in config and config[name] is None:
            config[name] = 1
            return True
    if "layer_types" in config and config["layer_types"] is None and layers:
        config["layer_types"] = [_FULL_ATTENTION] * layers
        return True
    return False


def _rope_per_layer_type(config: dict[str, Any], error: BaseException, layers: int | None) -> bool:
    """Rotary parameters looked up by layer kind where the config gives one set for all
    (Cohere Compass): the one set, for every kind."""
    kinds = config.get("layer_types")
    if not (isinstance(error, KeyError) and isinstance(kinds, list) and error.args and error.args[0] in kinds):
        return False
    rope = config.get("rope_parameters") or {}
    if not isinstance(rope, dict) or any(kind in rope for kind in kinds):
        return False
    shared = {"rope_type": rope.get("rope_type", "default"), "rope_theta": rope.get("rope_theta", 10000.0)}
    config["rope_parameters"] = {kind: dict(shared) for kind in sorted(set(kinds))}
    return True


def _default_asked_for(config: dict[str, Any], error: BaseException, layers: int | None) -> bool:
    """A default the forward pass refuses to run without (X-MOD's ``default_language``, asked for
    through ``set_default_language()``): the first of the values the config lists for it (``languages``)."""
    found = _SETTER_ASKED.search(str(error))
    if found is None:
        return False
    name = found.group(1)
    listed = config.get(name.removeprefix("default_") + "s")
    if name not in config or config[name] is not None or not isinstance(listed, (list, tuple)) or not listed:
        return False
    config[name] = listed[0]
    return True


def _unbounded_clamp(config: dict[str, Any], error: BaseException, layers: int | None) -> bool:
    """A clamp both of whose bounds came from a field left ``None`` (DBRX's ``clip_qkv``, in its
    attention sub-config): every such ``clip`` field, here or in a sub-config, gets a bound."""
    if _CLAMP_UNBOUNDED not in str(error).lower():
        return False
    changed = False
    for part in (config, *(value for value in config.values() if isinstance(value, dict))):
        unset = [name for name, value in part.items() if value is None and str(name).startswith("clip")]
        for name in unset:
            part[name] = CLIP_BOUND
            changed = True
    return changed


_REPAIRS: tuple[Callable[[dict[str, Any], BaseException, int | None], bool], ...] = (
    _sub_config_attribute,
    _none_fields,
    _rope_per_layer_type,
    _default_asked_for,
    _unbounded_clamp,
)
