"""Config field rules as data, in-process: each kind, the limits, defaults and relations.

Every expected message is the rule written out (the field's name, what it must hold, the value as
given); the tables here are made for the test, not a family's.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from bertgraph.errors import ConfigError
from bertgraph.model.fields import LIMITS, ConfigRules, Field, check_config, problem


def test_the_limits_and_why() -> None:
    assert {role: limit.maximum for role, limit in LIMITS.items()} == {
        "layers": 1024,
        "size": 10**9,
        "labels": 100_000,
        "example": 10**6,
        "mask": 8_192,
    }
    assert {role: limit.why for role, limit in LIMITS.items()} == {
        "layers": "each layer adds its operators to the graph, so deeper stacks take minutes to trace",
        "size": "a weight of two such sizes must stay below 2^63 bytes, torch's largest tensor",
        "labels": "transformers builds a name for every label before the model exists",
        "example": "the example input is a tensor of this size",
        "mask": "evaluating a mask holds every query and key, so time and memory grow with the square",
    }
    assert (10**9) ** 2 * 8 < 2**63  # the reason holds


def test_a_fields_defaults() -> None:
    rule = Field("count")
    assert (rule.default, rule.role, rule.minimum, rule.nullable) == (None, "size", 1, False)
    assert (rule.choices, rule.multiple_of, rule.why, rule.when) == ((), 1, "", None)
    assert ConfigRules({}).divisible == () and ConfigRules({}).below == ()


@pytest.mark.parametrize("value", [1, 2, 10**9])
def test_counts_in_range(value: int) -> None:
    assert problem("hidden_size", Field("count"), value) is None


@pytest.mark.parametrize("value", [0, -1, 1.0, 2.5, "8", None, True, False, [4]])
def test_counts_that_are_no_positive_integer(value: Any) -> None:
    assert problem("n", Field("count"), value) == f"field 'n' must be a positive integer, got {value!r}"


def test_counts_with_another_minimum() -> None:
    rule = Field("count", minimum=0)
    assert problem("pad", rule, 0) is None
    assert problem("pad", rule, -1) == "field 'pad' must be a whole number of at least 0, got -1"
    rule = Field("count", minimum=2)
    assert problem("n", rule, 2) is None
    assert problem("n", rule, 1) == "field 'n' must be a whole number of at least 2, got 1"


def test_counts_above_their_roles_limit() -> None:
    layers = Field("count", role="layers")
    assert problem("num_hidden_layers", layers, 1024) is None
    assert problem("num_hidden_layers", layers, 1025) == (
        "num_hidden_layers 1,025 is above the limit of 1,024: "
        "each layer adds its operators to the graph, so deeper stacks take minutes to trace"
    )
    assert problem("hidden_size", Field("count"), 10**9 + 1) == (
        "hidden_size 1,000,000,001 is above the limit of 1,000,000,000: "
        "a weight of two such sizes must stay below 2^63 bytes, torch's largest tensor"
    )
    labels = Field("count", role="labels")
    assert problem("num_labels", labels, 100_000) is None
    assert problem("num_labels", labels, 100_001) is not None
    example = Field("count", role="example")
    assert problem("seq", example, 10**6) is None
    assert problem("seq", example, 10**6 + 1) is not None


def test_a_count_too_long_to_read_says_how_many_digits_it_has() -> None:
    layers = Field("count", role="layers")
    assert problem("n", layers, 10**23).startswith("n 100,000,000,000,000,000,000,000 is above")  # 24 digits
    assert problem("n", layers, 10**24).startswith("n of 25 digits is above the limit of 1,024: ")
    assert problem("n", layers, 10**4000).startswith("n of 4001 digits is above")


def test_counts_that_must_be_a_multiple() -> None:
    rule = Field("count", multiple_of=8, why="the kernel tiles by 8")
    assert problem("hidden_size", rule, 64) is None
    assert problem("hidden_size", rule, 8) is None
    assert (
        problem("hidden_size", rule, 12)
        == "field 'hidden_size' must be a multiple of 8 (the kernel tiles by 8), got 12"
    )
    assert problem("n", Field("count", multiple_of=1), 7) is None


@pytest.mark.parametrize("value", [0, 1, 0.5, 0.0, 1.0])
def test_probabilities_in_range(value: float) -> None:
    assert problem("p", Field("probability"), value) is None


@pytest.mark.parametrize("value", [-0.1, 1.01, 2, True, False, "0.1", None, math.nan, math.inf, -math.inf])
def test_probabilities_out_of_range_or_no_number(value: Any) -> None:
    assert problem("p", Field("probability"), value) == f"field 'p' must be a number from 0 to 1, got {value!r}"


@pytest.mark.parametrize("value", [0, 0.0, 1e-12, 3, 1e300])
def test_numbers_finite_and_not_negative(value: float) -> None:
    assert problem("eps", Field("number"), value) is None


@pytest.mark.parametrize("value", [-1e-12, -1, math.nan, math.inf, -math.inf, True, "1", None])
def test_numbers_that_are_not(value: Any) -> None:
    assert problem("eps", Field("number"), value) == f"field 'eps' must be a finite number of at least 0, got {value!r}"


def test_choices() -> None:
    rule = Field("choice", choices=("absolute", "relative_key"))
    assert problem("kind", rule, "absolute") is None
    assert problem("kind", rule, "relative_key") is None
    assert problem("kind", rule, "rotary") == "field 'kind' must be one of 'absolute', 'relative_key', got 'rotary'"
    assert problem("kind", Field("choice"), "") == "field 'kind' must be one of , got ''"


@pytest.mark.parametrize(
    ("kind", "good", "bad", "noun"),
    [
        ("string", "bert", 3, "a string"),
        ("boolean", False, 0, "true or false"),
        ("boolean", True, "true", "true or false"),
        ("mapping", {"a": 1}, [["a", 1]], "a JSON object"),
    ],
)
def test_strings_booleans_and_mappings(kind: str, good: Any, bad: Any, noun: str) -> None:
    assert problem("f", Field(kind), good) is None
    assert problem("f", Field(kind), bad) == f"field 'f' must be {noun}, got {bad!r}"


def test_long_values_are_cut_in_messages() -> None:
    text = "x" * 58  # repr: 60 characters, kept
    assert problem("f", Field("mapping"), text) == f"field 'f' must be a JSON object, got '{text}'"
    text = "x" * 59  # repr: 61 characters, cut to 57 and an ellipsis
    assert problem("f", Field("mapping"), text) == "field 'f' must be a JSON object, got '" + "x" * 56 + "…"


def test_null_is_accepted_only_where_nullable() -> None:
    for kind in ("count", "probability", "number", "string", "boolean", "mapping", "choice"):
        assert problem("f", Field(kind, nullable=True), None) is None
        assert problem("f", Field(kind), None) is not None
    assert problem("f", Field("count", nullable=True), 0) == "field 'f' must be a positive integer, got 0"


def test_an_unknown_kind_is_a_programming_error() -> None:
    with pytest.raises(KeyError):
        problem("f", Field("colour"), "red")


RULES = ConfigRules(
    {
        "hidden_size": Field("count"),
        "num_attention_heads": Field("count"),
        "num_labels": Field("count", role="labels", default=2),
        "dropout": Field("probability", default=0.1),
        "window": Field("count", when="use_window"),
        "pad_token_id": Field("count", minimum=0, nullable=True),
        "vocab_size": Field("count", default=100),
    },
    divisible=(("hidden_size", "num_attention_heads"),),
    below=(("pad_token_id", "vocab_size"),),
)


def origin(name: str) -> str:
    return f"config.json [{name}]"


def test_a_config_that_keeps_every_rule_gets_its_defaults() -> None:
    config: dict[str, Any] = {"hidden_size": 128, "num_attention_heads": 2, "dropout": 0.0}
    check_config(config, RULES, origin)
    assert config == {"hidden_size": 128, "num_attention_heads": 2, "dropout": 0.0, "num_labels": 2, "vocab_size": 100}


def test_the_first_broken_field_is_reported_with_its_origin() -> None:
    config = {"hidden_size": 0, "num_attention_heads": 0}
    with pytest.raises(ConfigError) as caught:
        check_config(config, RULES, origin)
    assert str(caught.value) == "config.json [hidden_size]: field 'hidden_size' must be a positive integer, got 0"
    assert "num_labels" not in config  # no defaults before every field is checked
    with pytest.raises(ConfigError, match=r"^config\.json \[dropout\]: field 'dropout' must be a number from 0 to 1"):
        check_config({"hidden_size": 4, "num_attention_heads": 2, "dropout": 2}, RULES, origin)


def test_a_field_with_a_condition_is_checked_only_when_the_condition_is_true() -> None:
    for flag in (None, False, 1, "true"):
        config: dict[str, Any] = {"hidden_size": 4, "num_attention_heads": 2, "window": -5}
        if flag is not None:
            config["use_window"] = flag
        check_config(config, RULES, origin)
        assert config["window"] == -5
    with pytest.raises(
        ConfigError, match=r"^config\.json \[window\]: field 'window' must be a positive integer, got -5$"
    ):
        check_config({"hidden_size": 4, "num_attention_heads": 2, "window": -5, "use_window": True}, RULES, origin)


def test_relations_are_checked_after_defaults_and_prepare() -> None:
    with pytest.raises(ConfigError) as caught:
        check_config({"hidden_size": 130, "num_attention_heads": 4}, RULES, origin)
    assert str(caught.value) == (
        "config.json [hidden_size]: hidden_size 130 is not a multiple of num_attention_heads 4; "
        "pick sizes where hidden_size / num_attention_heads is whole"
    )
    seen: list[dict[str, Any]] = []

    def prepare(config: dict[str, Any]) -> None:
        seen.append(dict(config))
        config.setdefault("num_attention_heads", config["hidden_size"] // 64)

    config: dict[str, Any] = {"hidden_size": 256}
    check_config(config, RULES, origin, prepare)
    assert seen == [{"hidden_size": 256, "num_labels": 2, "dropout": 0.1, "vocab_size": 100}]
    assert config["num_attention_heads"] == 4
    config = {"hidden_size": 96}
    check_config(config, RULES, origin, prepare)  # 96 // 64: one head, which divides
    config = {"hidden_size": 200}
    with pytest.raises(ConfigError, match=r"hidden_size 200 is not a multiple of num_attention_heads 3"):
        check_config(config, RULES, origin, prepare)


def test_a_token_id_must_be_below_the_vocabulary() -> None:
    base = {"hidden_size": 4, "num_attention_heads": 2}
    check_config({**base, "pad_token_id": 99}, RULES, origin)
    check_config({**base, "pad_token_id": None}, RULES, origin)  # not set: nothing to compare
    check_config({**base, "pad_token_id": 0}, RULES, origin)
    with pytest.raises(ConfigError) as caught:
        check_config({**base, "pad_token_id": 100}, RULES, origin)
    assert str(caught.value) == "config.json [pad_token_id]: pad_token_id 100 must be less than vocab_size 100"
    with pytest.raises(ConfigError, match="pad_token_id 7 must be less than vocab_size 5"):
        check_config({**base, "pad_token_id": 7, "vocab_size": 5}, RULES, origin)
