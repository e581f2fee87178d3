"""A docs author's options checked in-process, value by value (``bertgraph/docs/request.py``).

Checking resolves model configs only (no torch, no trace, no process), so these tests also
serve the mutation run (docs/mutation.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from bertgraph.docs.request import MAX_DEPTH, OPTIONS, DiagramRequest, OptionError, join_models, model_names, parse
from bertgraph.errors import BertgraphError


def test_a_model_alone_takes_every_default() -> None:
    request = parse({"model": "  bert-tiny "})
    assert request == DiagramRequest(model="bert-tiny")
    assert (request.head, request.depth, request.format, request.compare, request.theme) == (
        "base",
        2,
        "svg",
        None,
        "auto",
    )
    assert (request.edge_labels, request.unfold, request.sizes, request.seq_len, request.batch, request.figure) == (
        "changes",
        False,
        (),
        None,
        1,
        "diagram",
    )


def test_every_option_is_read_and_underscores_spell_dashes() -> None:
    request = parse(
        {
            "model": "bert-tiny",
            "head": " sequence-classification ",
            "depth": "3",
            "format": "html",
            "compare": "token-classification",
            "theme": "dark",
            "edge_labels": "none",
            "caption": "ignored by the request, used by the page",
            "unfold": "yes",
            "intermediate": 64,
            "layers": "3",
            "vocab": 120,
            "num_labels": 4,
            "hidden": 64,
            "heads": 4,
            "seq_len": "16",
            "batch": 2,
        }
    )
    assert request == DiagramRequest(
        model="bert-tiny",
        head="sequence-classification",
        depth=3,
        format="html",
        compare="token-classification",
        theme="dark",
        edge_labels="none",
        unfold=True,
        # In SIZE_OPTIONS' order, whatever order the author wrote them in.
        sizes=(("layers", 3), ("hidden", 64), ("heads", 4), ("intermediate", 64), ("vocab", 120), ("num-labels", 4)),
        seq_len=16,
        batch=2,
    )
    assert request.describe() == (
        "bert-tiny · sequence-classification vs token-classification · depth 3 · html · unfolded · edge labels none"
        " · layers 3 · hidden 64 · heads 4 · intermediate 64 · vocab 120 · num-labels 4"
    )


def test_site_defaults_apply_and_options_override_them() -> None:
    site = {"theme": "dark", "format": "mermaid"}
    assert (parse({"model": "bert-tiny"}, site).theme, parse({"model": "bert-tiny"}, site).format) == (
        "dark",
        "mermaid",
    )
    assert parse({"model": "bert-tiny", "theme": "light"}, site).theme == "light"
    with pytest.raises(OptionError, match="^unknown option 'colour'; known: " + ", ".join(OPTIONS) + "$"):
        parse({"model": "bert-tiny"}, {"colour": "red"})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"model": "bert-tiny", "depht": 3}, "unknown option 'depht'; known: model, head, depth, format,"),
        ({}, "give the model: a preset such as bert-base-uncased, a folder with config.json, or a hub id"),
        ({"model": "   "}, "give the model"),
        ({"model": None}, "give the model"),
        ({"model": "bert-tiny", "depth": MAX_DEPTH + 1}, "depth must be 0 to 4, got 5"),
        ({"model": "bert-tiny", "depth": -1}, "depth must be 0 to 4, got -1"),
        ({"model": "bert-tiny", "depth": "two"}, "depth must be a whole number, got 'two'"),
        ({"model": "bert-tiny", "depth": True}, "depth must be a whole number, got True"),
        ({"model": "bert-tiny", "depth": 2.5}, "depth must be a whole number, got 2.5"),
        ({"model": "bert-tiny", "layers": 0}, "layers must be at least 1, got 0"),
        ({"model": "bert-tiny", "seq-len": 0}, "seq-len must be at least 1, got 0"),
        ({"model": "bert-tiny", "batch": 0}, "batch must be at least 1, got 0"),
        ({"model": "bert-tiny", "head": "lm"}, "head must be one of base, sequence-classification,"),
        ({"model": "bert-tiny", "compare": "lm"}, "compare must be one of base,"),
        (
            {"model": "bert-tiny", "compare": "masked-lm", "format": "table"},
            "format table shows one model; drop the compare option (two heads side by side are drawn as svg,",
        ),
        ({"model": "bert-tiny", "compare": "base", "format": "summary"}, "format summary shows one model;"),
        (
            {"model": "bert-tiny", "format": "png"},
            "format must be one of svg, mermaid, html, table, summary; got 'png'",
        ),
        ({"model": "bert-tiny", "theme": "sepia"}, "theme must be one of auto, light, dark; got 'sepia'"),
        ({"model": "bert-tiny", "edge-labels": "all"}, "edge-labels must be one of shapes, changes, none; got 'all'"),
        ({"model": "bert-tiny", "figure": "movie"}, "figure must be one of diagram, schematic, masks; got 'movie'"),
        ({"model": "bert-tiny", "unfold": "maybe"}, "unfold is true or false, got 'maybe'"),
    ],
)
def test_a_value_bertgraph_cannot_use_is_one_line_naming_it(options: dict[str, Any], message: str) -> None:
    with pytest.raises(OptionError) as caught:
        parse(options)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_the_ends_of_each_range_are_allowed() -> None:
    assert [parse({"model": "bert-tiny", "depth": depth}).depth for depth in (0, "4", MAX_DEPTH)] == [0, 4, 4]
    assert parse({"model": "bert-tiny", "layers": 1, "seq-len": 1, "batch": "1"}).sizes == (("layers", 1),)
    assert parse({"model": "bert-tiny", "seq-len": 1}).seq_len == 1
    # An option given without a value (None) is left out, as if not written.
    assert parse({"model": "bert-tiny", "layers": None, "seq-len": None}) == DiagramRequest(model="bert-tiny")


@pytest.mark.parametrize(
    ("value", "unfolded"),
    [
        (None, True),  # a flag written without a value
        (True, True),
        ("", True),
        (" TRUE ", True),
        ("yes", True),
        ("1", True),
        (False, False),
        ("false", False),
        ("No", False),
        ("0", False),
    ],
)
def test_unfold_is_a_flag(value: Any, unfolded: bool) -> None:
    assert parse({"model": "bert-tiny", "unfold": value}).unfold is unfolded


def test_compare_left_empty_compares_nothing() -> None:
    for value in (None, ""):
        request = parse({"model": "bert-tiny", "compare": value})
        assert request.compare is None
        assert [spec.head for spec in request.specs()] == ["base"]
        assert parse({"model": "bert-tiny", "compare": value, "format": "table"}).specs() == request.specs()


@pytest.mark.parametrize("format", ["svg", "mermaid", "html"])
def test_every_diagram_format_draws_a_compared_head(format: str) -> None:
    request = parse({"model": "bert-tiny", "compare": "masked-lm"}, {"format": format})
    assert [spec.head for spec in request.specs()] == ["base", "masked-lm"]


def test_specs_carry_sizes_example_and_the_compared_head() -> None:
    request = parse(
        {"model": "bert-tiny", "head": "sequence-classification", "compare": "masked-lm"}
        | {"layers": 3, "hidden": 64, "heads": 4, "seq-len": 16, "batch": 2}
    )
    specs = request.specs()
    assert [spec.head for spec in specs] == ["sequence-classification", "masked-lm"]
    for spec in specs:
        assert spec.example_shape == (2, 16)
        assert (spec.config["num_hidden_layers"], spec.config["hidden_size"], spec.config["num_attention_heads"]) == (
            3,
            64,
            4,
        )
    assert request.spec("masked-lm").head == "masked-lm"
    assert request.spec().head == "sequence-classification"
    # A size option spelt with a dash reaches the config under its field's name.
    assert (
        parse({"model": "bert-tiny", "head": "sequence-classification", "num-labels": 5}).spec().config["num_labels"]
        == 5
    )


def test_a_figure_names_several_models_and_draws_each_base_graph() -> None:
    request = parse({"model": " bert-tiny,gpt2 , t5-small,", "figure": "schematic", "layers": 1}, {"format": "html"})
    assert request.names() == ["bert-tiny", "gpt2", "t5-small"]
    assert request.format == "svg"  # the site's default format is for diagrams
    specs = request.specs()
    assert [(spec.name, spec.head) for spec in specs] == [("bert-tiny", "base"), ("gpt2", "base"), ("t5-small", "base")]
    assert specs[0].config["num_hidden_layers"] == 1 and specs[1].config["n_layer"] == 1
    assert request.describe() == "schematic of bert-tiny, gpt2, t5-small · svg"
    # Spaces separate models only in a list without commas, so a path with a space can be named.
    assert model_names("bert-tiny  gpt2\tt5-small") == ["bert-tiny", "gpt2", "t5-small"]
    assert model_names("my model, gpt2") == ["my model", "gpt2"]
    assert model_names(join_models(["my model", "docs/a b", "gpt2"])) == ["my model", "docs/a b", "gpt2"]
    assert model_names(" , ") == [] and join_models(["a"]) == "a"
    # One model's diagram keeps its reference whole.
    assert DiagramRequest(model="a, b").names() == ["a, b"]
    assert parse({"model": "bert-tiny", "figure": "masks", "format": "svg", "seq-len": 6}).seq_len == 6


@pytest.mark.parametrize("name", ["head", "compare", "depth", "unfold", "edge-labels", "seq-len", "batch"])
def test_a_schematic_refuses_options_of_one_models_diagram(name: str) -> None:
    value = {"head": "base", "compare": "base", "edge-labels": "none"}.get(name, 1)
    with pytest.raises(OptionError, match=f"^figure schematic draws each model's base graph; drop the {name} option$"):
        parse({"model": "bert-tiny gpt2", "figure": "schematic", name.replace("-", "_"): value})


def test_a_masks_figure_takes_its_example_length_but_no_other_format() -> None:
    with pytest.raises(OptionError, match="^figure masks draws each model's base graph; drop the batch option$"):
        parse({"model": "bert-tiny", "figure": "masks", "batch": 1})
    with pytest.raises(OptionError, match="^figure masks is drawn as svg; drop format 'mermaid'$"):
        parse({"model": "bert-tiny", "figure": "masks", "format": " mermaid "})


def test_a_request_survives_plain_data() -> None:
    request = parse({"model": "bert-tiny", "layers": 3, "heads": 4, "compare": "masked-lm", "unfold": True})
    data = request.as_dict()
    assert data["sizes"] == [["layers", 3], ["heads", 4]]
    assert DiagramRequest.from_dict(data) == request
    assert DiagramRequest.from_dict({"model": "bert-tiny", "sizes": [["layers", "3"]]}).sizes == (("layers", 3),)
    assert DiagramRequest.from_dict({"model": "bert-tiny"}) == DiagramRequest(model="bert-tiny")


def test_describe_says_only_what_differs_from_the_default() -> None:
    assert DiagramRequest(model="m").describe() == "m · base · depth 2 · svg"
    assert DiagramRequest(model="m", edge_labels="shapes", depth=0).describe() == (
        "m · base · depth 0 · svg · edge labels shapes"
    )


def test_a_model_bertgraph_cannot_resolve_is_refused_while_checking() -> None:
    with pytest.raises(BertgraphError) as caught:
        parse({"model": "no-such-model-anywhere"})
    assert not isinstance(caught.value, OptionError)
    with pytest.raises(BertgraphError):
        parse({"model": "bert-tiny", "compare": "causal-lm"})  # BERT has no such head


def test_a_figures_dashed_size_reaches_the_config_by_its_fields_name() -> None:
    # Figures draw base graphs, which have no labels: the refusal names the option as the author wrote it.
    with pytest.raises(BertgraphError, match="^--num-labels changes only a head with labels"):
        parse({"model": "bert-tiny gpt2", "figure": "schematic", "num-labels": 3})
