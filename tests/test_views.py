"""Views of the graph: module depth, folding, the layer anatomy, head diffs, tied weights."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import networkx as nx
import pytest

from bertgraph.api import Architecture
from bertgraph.graph import schema as g
from bertgraph.graph import stats, views
from bertgraph.model import HEADS
from tests.helpers import shuffled as shuffle


def nodes_of(shown: nx.DiGraph, kind: str = g.MODULE_NODE) -> list[str]:
    return [n for n, d in shown.nodes(data=True) if d[g.KIND] == kind]


def test_depth_one_is_parts_and_head(traced: Callable[..., Architecture]) -> None:
    shown = traced("bert-base-uncased", "sequence-classification").view(1)
    assert nodes_of(shown) == ["bert.embeddings", "bert:ops", "bert.encoder", "bert.pooler", "dropout", "classifier"]
    assert shown.nodes["bert.encoder"][g.PARAMS] == 85_054_464
    assert shown.nodes["bert:ops"][g.OWN_OPS] is True
    assert shown.edges["bert.pooler", "dropout"][g.SHAPE] == ["batch", 768]
    assert shown.edges["bert.embeddings", "bert.encoder"][g.DTYPE] == "float32"


def test_depth_zero_is_the_whole_model(traced: Callable[..., Architecture]) -> None:
    shown = traced("bert-base-uncased", "sequence-classification").view(0)
    assert nodes_of(shown) == [""]
    assert shown.nodes[""][g.MODULE_TYPE] == "BertForSequenceClassification"
    assert shown.nodes[""][g.PARAMS] == 109_483_778


def test_layers_fold_into_one_node(traced: Callable[..., Architecture]) -> None:
    arch = traced("bert-base-uncased", "sequence-classification")
    folded = arch.view(2)
    layer = folded.nodes["bert.encoder.layer.0-11"]
    assert (layer[g.REPEAT], layer[g.PARAMS], layer[g.MODULE_TYPE]) == (12, 85_054_464, "BertLayer")
    assert len(layer[g.PARAM_NAMES]) == 12 * 16
    unfolded = arch.view(2, fold=False)
    layers = [n for n in nodes_of(unfolded) if unfolded.nodes[n][g.MODULE_TYPE] == "BertLayer"]
    assert layers == [f"bert.encoder.layer.{i}" for i in range(12)]
    assert all(unfolded.has_edge(f"bert.encoder.layer.{i}", f"bert.encoder.layer.{i + 1}") for i in range(11))
    assert g.total_params(folded) == g.total_params(unfolded) == 109_483_778


def test_folding_keeps_a_deep_model_small(traced: Callable[..., Architecture]) -> None:
    deep = traced("bert-tiny", "base", layers=24).view(3)
    shallow = traced("bert-tiny", "base").view(3)
    assert deep.number_of_nodes() == shallow.number_of_nodes()
    assert max(d.get(g.REPEAT, 1) for _, d in deep.nodes(data=True)) == 24


def test_layer_anatomy(traced: Callable[..., Architecture]) -> None:
    shown = traced("bert-base-uncased", "sequence-classification").view(3)
    prefix = "bert.encoder.layer.0-11."
    for leaf in (
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
        "attention.output.LayerNorm",
        "intermediate.dense",
        "intermediate.intermediate_act_fn",
        "output.dense",
        "output.LayerNorm",
    ):
        assert prefix + leaf in shown, leaf
    sdpa = [n for n, d in shown.nodes(data=True) if d.get(g.OP) == "scaled_dot_product_attention"]
    assert len(sdpa) == 1
    assert set(shown.predecessors(sdpa[0])) >= {prefix + "attention.self." + p for p in ("query", "key", "value")}
    adds = [n for n, d in shown.nodes(data=True) if d.get(g.OP) == "add" and "layer" in d[g.MODULE]]
    assert len(adds) == 2
    # residual connections: the layer input reaches the first add, the attention output the second
    assert "bert.embeddings.dropout" in set(shown.predecessors(adds[0]))
    assert prefix + "attention.output.LayerNorm" in set(shown.predecessors(adds[1]))
    assert not any(d.get(g.OP) in views.LAYOUT_OPS for _, d in shown.nodes(data=True))
    assert shown.nodes[prefix + "intermediate.dense"][g.SHAPE] == ["batch", "seq", 3072]


def test_operator_level_keeps_every_op(traced: Callable[..., Architecture]) -> None:
    arch = traced("bert-tiny", "sequence-classification")
    unfolded = arch.view(4, fold=False)
    assert nx.utils.graphs_equal(unfolded, arch.graph)
    assert arch.view(4).number_of_nodes() < arch.graph.number_of_nodes()


def test_tied_weights_count_once(traced: Callable[..., Architecture]) -> None:
    graph = traced("bert-tiny", "masked-lm").graph
    assert graph.graph[g.G_TIED]["cls.predictions.decoder.weight"] == "bert.embeddings.word_embeddings.weight"
    decoder = next(d for _, d in graph.nodes(data=True) if d[g.MODULE] == "cls.predictions.decoder")
    assert decoder[g.SHARED_PARAMS] == ["bert.embeddings.word_embeddings.weight"]
    assert decoder[g.PARAM_NAMES] == ["cls.predictions.bias"]
    word = next(d for _, d in graph.nodes(data=True) if d[g.MODULE] == "bert.embeddings.word_embeddings")
    assert word[g.PARAMS] == 30522 * 128


def test_diff_between_every_pair_of_heads(traced: Callable[..., Architecture]) -> None:
    archs = {head: traced("bert-tiny", head) for head in HEADS}
    for first, second in itertools.permutations(HEADS, 2):
        difference = archs[first].diff(archs[second])
        total_a, total_b = (archs[h].params()["total"] for h in (first, second))
        assert difference["delta"] == total_b - total_a
        moved = (
            sum(m["params"] for m in difference["added"])
            - sum(m["params"] for m in difference["removed"])
            + sum(m["b"]["params"] - m["a"]["params"] for m in difference["changed"])
        )
        assert moved == difference["delta"], (first, second)
    qa = archs["base"].diff(archs["question-answering"])
    assert [m["module"] for m in qa["removed"]] == ["pooler"]
    assert [(m["module"], m["sizes"]) for m in qa["added"]] == [("qa_outputs", "128 → 2")]


def test_diff_of_label_counts_is_a_change(traced: Callable[..., Architecture]) -> None:
    two = traced("bert-tiny", "sequence-classification")
    five = traced("bert-tiny", "sequence-classification", num_labels=5)
    difference = two.diff(five)
    assert [(m["module"], m["a"]["sizes"], m["b"]["sizes"]) for m in difference["changed"]] == [
        ("classifier", "128 → 2", "128 → 5")
    ]
    assert difference["delta"] == 3 * 129


def test_views_do_not_depend_on_insertion_order(traced: Callable[..., Architecture]) -> None:
    graph = traced("bert-tiny", "sequence-classification").graph
    shuffled = shuffle(graph, 7)
    for level in range(5):
        a, b = views.view(graph, level), views.view(shuffled, level)
        assert list(a.nodes) == list(b.nodes)
        assert sorted(a.edges) == sorted(b.edges)


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 5])
def test_summary_depth_filters_rows(traced: Callable[..., Architecture], depth: int) -> None:
    rows = stats.summary_rows(traced("bert-tiny", "sequence-classification").graph, depth=depth)
    assert all(row["depth"] <= depth for row in rows)
    assert rows[0]["params"] == 4_386_178
