"""Naming batch and sequence from two static traces gives what a dynamic export gives."""

from __future__ import annotations

import pytest

from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.model import HEADS, build_model, resolve
from bertgraph.tracing import export_program, graph_from_program, trace_module
from bertgraph.tracing.dims import DimsError, example_sizes, name_dim


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
    assert message.startswith("torch.export could not trace bert-tiny (BertForSequenceClassification)")
    assert "in module 'bert.encoder.layer.1.attention.self' (BertSelfAttention)" in message
    assert "test_dims.py" in message and "`if args[0].sum() > 0:" in message
    assert "\n" not in message
