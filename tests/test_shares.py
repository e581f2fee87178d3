"""Shares in the module tree, checked against sums over the parameter rows themselves."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bertgraph.api import Architecture
from bertgraph.graph import schema as g
from bertgraph.graph import stats


def _below(graph_rows: list[dict[str, object]], prefix: str) -> int:
    return sum(int(r["numel"]) for r in graph_rows if str(r["name"]).startswith(prefix))  # type: ignore[call-overload]


@pytest.mark.parametrize("layers", [2, 5])
def test_a_folded_row_counts_every_repeat(traced: Callable[..., Architecture], layers: int) -> None:
    graph = traced("bert-tiny", "sequence-classification", layers=layers).graph
    rows = {row["path"]: row for row in stats.summary_rows(graph)}
    parameters = g.parameter_rows(graph)
    total = sum(int(r["numel"]) for r in parameters)
    all_layers = _below(parameters, "bert.encoder.layer.")
    one_layer = _below(parameters, "bert.encoder.layer.0.")
    folded = rows["bert.encoder.layer.0"]
    assert folded["name"] == f"(0-{layers - 1})"
    assert (folded["repeat"], folded["each"], folded["params"]) == (layers, one_layer, all_layers)
    assert folded["share"] == pytest.approx(all_layers / total)
    assert folded["share"] == pytest.approx(layers * one_layer / total)
    # rows inside the fold describe one layer
    assert rows["bert.encoder.layer.0.attention"]["share"] == pytest.approx(
        _below(parameters, "bert.encoder.layer.0.attention.") / total
    )
    assert rows["bert.encoder.layer.0.attention"]["in_fold"] is True


def test_children_add_up_to_their_parent(traced: Callable[..., Architecture]) -> None:
    graph = traced("bert-base-uncased", "sequence-classification").graph
    rows = stats.summary_rows(graph)
    assert rows[0]["share"] == 1.0 and rows[0]["params"] == 109_483_778
    checked = 0
    for index, row in enumerate(rows):
        children = []
        for below in rows[index + 1 :]:
            if below["level"] <= row["level"]:
                break
            if below["level"] == row["level"] + 1:
                children.append(below)
        if not children or row["in_fold"] or row.get("repeat", 1) > 1:
            continue  # a folded row's children describe one instance
        assert sum(c["params"] for c in children) == row["params"], row["path"]
        assert sum(c["share"] for c in children) == pytest.approx(row["share"]), row["path"]
        checked += 1
    assert checked >= 6  # the model, bert, embeddings, encoder, the layer list, pooler


def test_the_text_table_shows_the_folded_share(traced: Callable[..., Architecture]) -> None:
    from bertgraph.render import text

    graph = traced("bert-base-uncased", "sequence-classification").graph
    folded = next(line for line in text.generate_summary(stats.summary(graph)) if "(0-11)" in line)
    assert "85,054,464" in folded and "77.69%" in folded
