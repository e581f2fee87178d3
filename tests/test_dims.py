"""Naming batch and sequence from two static traces gives what a dynamic export gives."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.model import HEADS, ModelSpec, build_model, family_of, resolve
from bertgraph.tracing import export_program, graph_from_program, trace_module
from bertgraph.tracing.dims import (
    DimsError,
    example_sizes,
    known_sizes,
    name_dim,
    name_dims_once,
    own_sizes,
    single_sizes,
)
from bertgraph.tracing.export import MAX_DYNAMIC, shrunk_config, stack_plans, trace_module_twice
from tests.family_configs import TINY, shallow


@pytest.mark.parametrize("head", ["base", "multiple-choice", "question-answering", "pretraining"])
def test_static_pair_equals_dynamic_export(head: str) -> None:
    spec = resolve("bert-tiny", head)
    model = build_model(spec)
    named = trace_module(model, spec)
    dynamic = graph_from_program(export_program(model, spec), model, spec)
    assert "".join(graph_io.generate_json(named)) == "".join(graph_io.generate_json(dynamic))
    assert any("batch*choices" in str(d[g.SHAPE]) for _, d in named.nodes(data=True)) == (head == "multiple-choice")


def test_every_head_names_its_inputs() -> None:
    for head in HEADS:
        spec = resolve("bert-tiny", head)
        graph = trace_module(build_model(spec), spec)
        assert graph.nodes["input_ids"][g.SHAPE] == list(spec.dim_names)


def test_ambiguous_sizes_are_refused() -> None:
    first, second = {"batch": 2, "seq": 7}, {"batch": 3, "seq": 13}
    with pytest.raises(DimsError, match="fits 0 formulas"):
        name_dim(5, 17, first, second)
    clash = ({"batch": 2, "seq": 2}, {"batch": 3, "seq": 3})
    with pytest.raises(DimsError, match="fits"):
        name_dim(4, 9, *clash)  # batch*seq, batch**2 and seq**2 all fit


def test_models_with_few_positions_fall_back_to_a_dynamic_export(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert example_sizes(("batch", "seq"), 1) is None
    (tmp_path / "config.json").write_text(
        '{"model_type": "bert", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, '
        '"intermediate_size": 20, '
        '"vocab_size": 30, "max_position_embeddings": 1}'
    )
    spec = resolve(str(tmp_path))
    graph = trace_module(build_model(spec), spec)
    assert graph.nodes["input_ids"][g.SHAPE][0] == "batch"
    assert g.total_params(graph) == sum(p.numel() for p in build_model(spec).parameters())


def test_trace_failure_names_module_and_line() -> None:
    import torch

    from bertgraph.errors import TraceError

    spec = resolve("bert-tiny", "sequence-classification")
    model = build_model(spec)
    attention = model.bert.encoder.layer[1].attention.self

    def data_dependent(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:  # type: ignore[type-arg]
        if args[0].sum() > 0:  # branching on values cannot be exported
            raise AssertionError("unreachable")

    attention.register_forward_pre_hook(data_dependent, with_kwargs=True)
    with pytest.raises(TraceError) as caught:
        export_program(model, spec, (2, 7))
    message = str(caught.value)
    assert message.startswith("cannot trace bert-tiny (BertForSequenceClassification): data-dependent branch"), message
    assert "in module 'bert.encoder.layer.1.attention.self' (BertSelfAttention)" in message
    assert "test_dims.py" in message and "`if args[0].sum() > 0:" in message
    assert "\n" not in message


# --- one export where one is enough ---------------------------------------------------------

# Each family's default head, and the heads that add a dimension (choices, the decoder's
# length) or a size only the data decides (an encoder-decoder classifier's <eos> count).
# XLM-R and CamemBERT are RoBERTa's code and config fields under other names, mT5 is T5's: their
# sizes are named alike, so the sweep takes the family's own type.
CLONES = {"xlm-roberta", "camembert", "mt5"}
ONE_EXPORT_CASES = [(model_type, None) for model_type in TINY if model_type not in CLONES] + [
    ("bert", "multiple-choice"),
    ("t5", "seq2seq-lm"),
    ("bart", "seq2seq-lm"),
    ("bart", "sequence-classification"),
    ("gpt2", "causal-lm"),
]


def _graphml(graph: nx.DiGraph) -> str:
    return "".join(graph_io.generate_graphml(graph))


def _one_export(model: Any, spec: ModelSpec) -> nx.DiGraph:
    """The graph named from a single export, or DimsError (the orchestration would then trace twice)."""
    own = own_sizes(spec.config, (parameter.shape for parameter in model.parameters()))
    sizes = single_sizes(spec.dim_names, spec.max_positions or MAX_DYNAMIC, own)
    assert sizes is not None, "no sizes for a single export"
    shape = tuple(sizes[name] for name in spec.dim_names)
    return name_dims_once(graph_from_program(export_program(model, spec, shape), model, spec), sizes, known_sizes(own))


@pytest.mark.parametrize(("model_type", "head"), ONE_EXPORT_CASES)
def test_one_export_gives_the_graph_two_give(model_type: str, head: str | None, tmp_path: Path) -> None:
    config = shallow(model_type, TINY[model_type])  # the naming is per op: two layers show it as well as ten
    positions = family_of(model_type).sizes.get("max_position")
    if positions:  # 64 positions leave some tiny configs no size a single export could use
        config[positions] = 512
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = resolve(str(tmp_path), head) if head else resolve(str(tmp_path))
    model = build_model(spec)
    assert _graphml(_one_export(model, spec)) == _graphml(trace_module_twice(model, spec))


@pytest.mark.slow
@pytest.mark.parametrize(
    "preset",
    [
        "bert-base-uncased",
        "t5-small",  # the decoder's length
        "modernbert-base",  # a rotary half head (32) is a size of the model's own
    ],
)
def test_one_export_gives_presets_the_graph_two_give(preset: str) -> None:
    spec = resolve(preset, "sequence-classification" if preset.startswith("bert") else "base")
    small = replace(spec, config=shrunk_config(spec, stack_plans(spec, build_model(spec))))
    model = build_model(small)  # the few-layer model tracing exports (then grows)
    assert _graphml(_one_export(model, small)) == _graphml(trace_module_twice(model, small))


@pytest.mark.slow
def test_a_size_the_model_does_not_know_is_never_guessed() -> None:
    spec = resolve("modernbert-base")
    small = replace(spec, config=shrunk_config(spec, stack_plans(spec, build_model(spec))))
    model = build_model(small)
    own = own_sizes(small.config, (parameter.shape for parameter in model.parameters()))
    sizes = single_sizes(small.dim_names, small.max_positions or MAX_DYNAMIC, own)
    assert sizes is not None
    graph = graph_from_program(export_program(model, small, tuple(sizes.values())), model, small)
    with pytest.raises(DimsError, match="size 32 in the one trace has 0 readings"):
        name_dims_once(graph, sizes, known_sizes(own) - {32})  # as if the rotary half were unknown


def test_tracing_exports_once_unless_a_size_is_ambiguous(monkeypatch: pytest.MonkeyPatch) -> None:
    from bertgraph.tracing import export

    shapes: list[tuple[int, ...] | None] = []
    real = export.export_program

    def counted(model: Any, spec: ModelSpec, shape: tuple[int, ...] | None = None) -> Any:
        shapes.append(shape)
        return real(model, spec, shape)

    monkeypatch.setattr(export, "export_program", counted)
    spec = resolve("bert-tiny", "sequence-classification")
    model = build_model(spec)
    once = trace_module(model, spec)
    assert len(shapes) == 1 and shapes[0] is not None and 2 not in shapes[0]
    assert _graphml(once) == _graphml(trace_module_twice(model, spec))
    # A config number next to every size a single export could use leaves only the pair.
    shapes.clear()
    crowded = replace(spec, config={**spec.config, "planted": list(range(5, 2000, 9))})
    assert single_sizes(crowded.dim_names, 512, own_sizes(crowded.config, [])) is None
    assert _graphml(trace_module(model, crowded)) == _graphml(trace_module_twice(model, crowded))
    assert shapes == [(2, 7), (3, 13), (2, 7), (3, 13)]


def test_a_causal_convolution_sends_tracing_straight_to_the_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A convolution that pads ``kernel - 1`` positions (a hybrid's Mamba layer) holds ``seq + 3``,
    which a single export cannot read: tracing takes the pair without trying the single export."""
    import torch

    from bertgraph.model.families.generic import small_config
    from bertgraph.tracing import export

    shapes: list[tuple[int, ...] | None] = []
    real = export.export_program

    def counted(model: Any, spec: ModelSpec, shape: tuple[int, ...] | None = None) -> Any:
        shapes.append(shape)
        return real(model, spec, shape)

    (tmp_path / "config.json").write_text(json.dumps(small_config("nemotron_h"), default=str))
    spec = resolve(str(tmp_path))
    model = build_model(spec)
    monkeypatch.setattr(export, "export_program", counted)
    graph = trace_module(model, spec)
    assert shapes == [(2, 7), (3, 13)]
    assert any("seq + 3" in d[g.SHAPE] for _, d in graph.nodes(data=True) if g.SHAPE in d)
    # The export it skips would have been refused.
    own = own_sizes(spec.config, (parameter.shape for parameter in model.parameters()))
    sizes = single_sizes(spec.dim_names, spec.max_positions or MAX_DYNAMIC, own)
    assert sizes is not None
    single = graph_from_program(real(model, spec, tuple(sizes[name] for name in spec.dim_names)), model, spec)
    with pytest.raises(DimsError, match="close to seq"):
        name_dims_once(single, sizes, known_sizes(own))
    # Only a convolution that changes the length counts: "same" padding and strides do not.
    shifts = export._shifts_the_sequence
    assert shifts(torch.nn.Conv1d(4, 4, 4, padding=3)) and shifts(torch.nn.Conv1d(4, 4, 3, padding="valid"))
    assert not shifts(torch.nn.Conv1d(4, 4, 3, padding=1)) and not shifts(torch.nn.Conv1d(4, 4, 3, padding="same"))
    assert not shifts(torch.nn.Conv1d(4, 4, 5, padding=4, dilation=2))
    assert not shifts(torch.nn.Conv1d(4, 4, 2, stride=2)) and not shifts(torch.nn.Linear(4, 4))


def test_one_trace_reads_a_size_only_when_it_has_one_reading() -> None:
    sizes = {"batch": 47, "seq": 37}
    known = known_sizes(own_sizes({"hidden_size": 768, "num_attention_heads": 12}, []))

    def read(*shape: int) -> list[int | str]:
        graph = nx.DiGraph()
        graph.add_node("op", **{g.SHAPE: list(shape), g.INPUTS: [list(shape)]})
        return list(name_dims_once(graph, sizes, known).nodes["op"][g.SHAPE])

    assert read(47, 37, 768) == ["batch", "seq", 768]
    assert read(47 * 37, 12 * 47, 64) == ["batch*seq", "12*batch", 64]
    with pytest.raises(DimsError, match="close to seq"):
        read(38)  # seq + 1, or a size the model computes (a rotary half of a head): two traces tell
    with pytest.raises(DimsError, match="0 readings"):
        read(2 * 37 + 1)  # a function of seq no formula covers, and no size of the model
    with pytest.raises(DimsError, match="0 readings"):
        read(7 * 37)  # 7 is no size of the model's own
    with pytest.raises(DimsError, match="2 readings"):  # 2*seq, or a size the model has
        name_dims_once(nx.DiGraph([("a", "b", {g.SHAPE: [74]})]), sizes, known | {74})
