"""Config fields as data: what each field must hold and how large it may be, checked in one place.

A model family names its fields in a :class:`ConfigRules` table (BERT's ``num_hidden_layers``
is GPT-2's ``n_layer``); :func:`check_config` applies any such table. A size field names a
*role* (``layers``, ``size``, ``labels``) and the role's :data:`LIMITS` entry says how large
bertgraph draws it, and why: drawing needs no weights, but the graph and the meta-device
model must fit in memory and be built in reasonable time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bertgraph.errors import ConfigError

# A config.json is a flat object with a few small mappings; these bound what is read.
MAX_CONFIG_BYTES = 64 * 1024 * 1024
MAX_CONFIG_NESTING = 64


@dataclass(frozen=True)
class Limit:
    """The largest value of a size role, and why."""

    maximum: int
    why: str


LIMITS: dict[str, Limit] = {
    # Each layer adds its operators to the graph: measured on 2 cores, 1,000 layers take
    # about 15 s and 130 MB more than 12 do, and the time grows with the count.
    "layers": Limit(1_024, "each layer adds its operators to the graph, so deeper stacks take minutes to trace"),
    # A weight is two such sizes: 10^9 × 10^9 elements of 8 bytes stay below 2^63 bytes,
    # the largest tensor torch can describe, even on the meta device.
    "size": Limit(1_000_000_000, "a weight of two such sizes must stay below 2^63 bytes, torch's largest tensor"),
    # transformers names every label (id2label) when it builds the config.
    "labels": Limit(100_000, "transformers builds a name for every label before the model exists"),
    "example": Limit(1_000_000, "the example input is a tensor of this size"),
    # The masks figure draws a grid of more than 12 tokens to scale, in at most 240 × 240 squares, so
    # its file stays small; evaluating a mask still holds a value per query and key, so time and memory
    # grow with the square. Measured on 2 cores at 8,192 tokens: Gemma-2, Mistral, ModernBERT, T5 and
    # BERT in one figure took 27 s, 2.4 GB at most and a 360 KB SVG (JSON lists every cell: 200 MB a
    # mask). 8,192 is the longest example the figure picks itself (Mistral's and Gemma-2's: twice a
    # causal window of 4,096), so every default is one a user may also ask for.
    "mask": Limit(8_192, "evaluating a mask holds every query and key, so time and memory grow with the square"),
}


# What transformers reads a field as when a config.json leaves it out, for fields every config class
# shares with one default (PretrainedConfig's own, and the flags the classes default alike): a
# comparison of two configs reads a missing field so, rather than claim a difference.
COMMON_DEFAULTS: dict[str, Any] = {
    "output_hidden_states": False,
    "output_attentions": False,
    "return_dict": True,
    "chunk_size_feed_forward": 0,
    "is_decoder": False,
    "add_cross_attention": False,
    "use_cache": True,
    "problem_type": None,
    "dtype": "float32",  # what transformers builds a model in unless told otherwise
}


@dataclass(frozen=True)
class Field:
    """What one config field must hold.

    Attributes:
        kind: ``count`` (a whole number ≥ ``minimum``, at most its role's limit),
            ``probability`` (a number in [0, 1]), ``number`` (a finite number ≥ 0),
            ``string``, ``boolean``, ``mapping``, ``choice`` (one of ``choices``).
        default: used when the field is absent (None: absent is fine and stays absent).
        role: for counts, the key of :data:`LIMITS` that bounds it.
        nullable: ``null`` in config.json is accepted (transformers' "not set").
        multiple_of: a count must be a multiple of this, for the reason ``why``.
        when: the rule holds only when this boolean field of the config is true (Qwen's
            ``sliding_window`` counts only with ``use_sliding_window``).
    """

    kind: str
    default: Any = None
    role: str = "size"
    minimum: int = 1
    nullable: bool = False
    choices: tuple[str, ...] = ()
    multiple_of: int = 1
    why: str = ""
    when: str | None = None


@dataclass(frozen=True)
class ConfigRules:
    """A family's config fields and the relations between them.

    Attributes:
        fields: field name → :class:`Field`.
        divisible: ``(a, b)``: ``a`` must be a multiple of ``b`` (hidden size by heads).
        below: ``(a, b)``: ``a``, when set, must be less than ``b`` (a token id and the vocabulary).
        at_most: ``(a, b)``: ``a`` must not exceed ``b`` when ``b`` is above 0 (the experts a token
            is routed to, of the experts there are).
    """

    fields: Mapping[str, Field]
    divisible: tuple[tuple[str, str], ...] = ()
    below: tuple[tuple[str, str], ...] = ()
    at_most: tuple[tuple[str, str], ...] = ()


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def problem(name: str, rule: Field, value: Any) -> str | None:
    """What is wrong with ``value`` for the field ``name``, or None.

    >>> print(problem("num_hidden_layers", Field("count", role="layers"), 10**9))  # doctest: +ELLIPSIS
    num_hidden_layers 1,000,000,000 is above the limit of 1,024: each layer adds its operators ...
    >>> problem("hidden_dropout_prob", Field("probability"), float("inf"))
    "field 'hidden_dropout_prob' must be a number from 0 to 1, got inf"
    >>> problem("layer_norm_eps", Field("number"), float("nan")) is not None
    True
    """
    if value is None and rule.nullable:
        return None
    if rule.kind == "count":
        if isinstance(value, bool) or not isinstance(value, int) or value < rule.minimum:
            wanted = "a positive integer" if rule.minimum == 1 else f"a whole number of at least {rule.minimum}"
            return f"field {name!r} must be {wanted}, got {value!r}"
        limit = LIMITS[rule.role]
        if value > limit.maximum:
            return f"{name} {_count(value)} is above the limit of {limit.maximum:,}: {limit.why}"
        if value % rule.multiple_of:
            return f"field {name!r} must be a multiple of {rule.multiple_of} ({rule.why}), got {value}"
        return None
    if rule.kind == "probability":
        if not _number(value) or not 0 <= value <= 1:
            return f"field {name!r} must be a number from 0 to 1, got {value!r}"
        return None
    if rule.kind == "number":
        if not _number(value) or not math.isfinite(value) or value < 0:
            return f"field {name!r} must be a finite number of at least 0, got {value!r}"
        return None
    if rule.kind == "choice":
        if value not in rule.choices:
            return f"field {name!r} must be one of {', '.join(map(repr, rule.choices))}, got {value!r}"
        return None
    expected = {"string": str, "boolean": bool, "mapping": dict}[rule.kind]
    if not isinstance(value, expected):
        noun = {"string": "a string", "boolean": "true or false", "mapping": "a JSON object"}[rule.kind]
        return f"field {name!r} must be {noun}, got {_short(value)}"
    return None


def _count(value: int) -> str:
    """``1,234`` — or, for a number too long to read, how many digits it has.

    >>> _count(1234), _count(10**40)
    ('1,234', 'of 41 digits')
    """
    digits = len(str(value))
    return f"{value:,}" if digits <= 24 else f"of {digits} digits"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def check_config(
    config: dict[str, Any],
    rules: ConfigRules,
    origin: Callable[[str], str],
    prepare: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Check every field ``rules`` names, then the relations; fill defaults of absent fields.

    ``origin(field)`` says where a field came from (the config.json path, or the
    command-line option that set it), so the one-line error points at what to change.
    ``prepare`` completes the config once defaults are in, before the relations are
    checked (a size that defaults to another size).

    Raises:
        ConfigError: the first problem found.
    """
    check_fields(config, rules, origin)
    for name, rule in rules.fields.items():
        if rule.default is not None:
            config.setdefault(name, rule.default)
    if prepare is not None:
        prepare(config)
    check_relations(config, rules, origin)


def check_fields(config: Mapping[str, Any], rules: ConfigRules, origin: Callable[[str], str]) -> None:
    """Check each field ``rules`` names that ``config`` has, alone (:func:`problem`).

    Raises:
        ConfigError: the first problem found.
    """
    for name, rule in rules.fields.items():
        if name not in config or (rule.when is not None and config.get(rule.when) is not True):
            continue
        found = problem(name, rule, config[name])
        if found:
            raise ConfigError(f"{origin(name)}: {found}")


def check_relations(config: Mapping[str, Any], rules: ConfigRules, origin: Callable[[str], str]) -> None:
    """Check the relations between fields; a field left ``null`` (transformers' "not set") is in none.

    Raises:
        ConfigError: the first problem found.
    """

    def counts(a: str, b: str) -> tuple[int, int] | None:
        first, second = config.get(a), config.get(b)
        return (first, second) if isinstance(first, int) and isinstance(second, int) else None

    for a, b in rules.divisible:
        pair = counts(a, b)
        if pair and pair[1] and pair[0] % pair[1]:
            raise ConfigError(
                f"{origin(a)}: {a} {pair[0]} is not a multiple of {b} {pair[1]}; pick sizes where {a} / {b} is whole"
            )
    for a, b in rules.below:
        value = config.get(a)
        if value is not None and value >= config[b]:
            raise ConfigError(f"{origin(a)}: {a} {value} must be less than {b} {config[b]}")
    for a, b in rules.at_most:
        pair = counts(a, b)
        if pair and pair[1] > 0 and pair[0] > pair[1]:
            raise ConfigError(f"{origin(a)}: {a} {pair[0]} is more than {b} {pair[1]}; use {pair[1]} or less")
