"""Siblings fold only when identical, judged on their operator-level content, at every depth."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable

import networkx as nx
import pytest

from bertgraph.graph import schema as g
from bertgraph.graph import stats, views
from bertgraph.model import resolve

pytestmark = pytest.mark.xdist_group("folding")  # its fixtures are built once, on one worker

FOLDING_DEPTHS = (2, 3, 4)
LAYER = "encoder.layer.1"
LAYER_PATH = re.compile(r"encoder\.layer\.[\d-]+")


def folded_modules(shown: nx.DiGraph) -> set[str]:
    """Module paths of the folded nodes of a view (``encoder.layer.0-1``, …)."""
    return {LAYER_PATH.match(d[g.MODULE]).group() for _, d in shown.nodes(data=True) if d.get(g.REPEAT, 1) > 1}


def layer_boxes(shown: nx.DiGraph) -> list[str]:
    """The layer nodes of a depth-2 view, in order."""
    return [n for n, d in shown.nodes(data=True) if d[g.KIND] == g.MODULE_NODE and ".layer." in n]


def summary_names(graph: nx.DiGraph) -> list[str]:
    return [
        row["name"] for row in stats.summary_rows(graph) if row["path"].count(".") == 2 and ".layer." in row["path"]
    ]


@pytest.fixture(scope="module")
def swapped_activation() -> nx.DiGraph:
    """A real 4-layer BertModel whose layer 2 uses ReLU where the others use GELU."""
    import torch

    from bertgraph.model.build import build_model
    from bertgraph.tracing import trace_module

    spec = resolve("bert-tiny", "base", overrides={"layers": 4})
    model = build_model(spec)
    model.encoder.layer[2].intermediate.intermediate_act_fn = torch.nn.ReLU()
    return trace_module(model, spec)


@pytest.fixture(scope="module")
def three_layers() -> nx.DiGraph:
    """A traced 3-layer BertModel whose layers are identical."""
    from bertgraph.tracing import trace

    return trace(resolve("bert-tiny", "base", overrides={"layers": 3}))


def test_identical_layers_fold_at_every_depth(three_layers: nx.DiGraph) -> None:
    assert layer_boxes(views.view(three_layers, 2)) == ["encoder.layer.0-2"]
    for depth in FOLDING_DEPTHS:
        shown = views.view(three_layers, depth)
        assert folded_modules(shown) == {"encoder.layer.0-2"}, depth
        assert {d[g.REPEAT] for _, d in shown.nodes(data=True) if g.REPEAT in d} == {3}
    assert summary_names(three_layers) == ["(0-2)"]


def test_a_layer_with_another_activation_stays_apart(swapped_activation: nx.DiGraph) -> None:
    graph = swapped_activation
    assert layer_boxes(views.view(graph, 2)) == ["encoder.layer.0-1", "encoder.layer.2", "encoder.layer.3"]
    for depth in FOLDING_DEPTHS:
        assert folded_modules(views.view(graph, depth)) == {"encoder.layer.0-1"}, depth
    relu = [d for _, d in views.view(graph, 3).nodes(data=True) if d.get(g.MODULE_TYPE) == "ReLU"]
    assert [d[g.MODULE] for d in relu] == ["encoder.layer.2.intermediate.intermediate_act_fn"]
    assert summary_names(graph) == ["(0-1)", "(2)", "(3)"]


def _layer_node(graph: nx.DiGraph, suffix: str) -> str:
    return f"{LAYER}.{suffix}"


def _other_activation(graph: nx.DiGraph) -> None:
    node = graph.nodes[_layer_node(graph, "intermediate.intermediate_act_fn:gelu")]
    node[g.OP], node[g.TARGET] = "relu", "aten.relu.default"


def _other_overload(graph: nx.DiGraph) -> None:
    graph.nodes[_layer_node(graph, "intermediate.intermediate_act_fn:gelu")][g.TARGET] = "aten.gelu.tanh"


def _other_module_type(graph: nx.DiGraph) -> None:
    graph.nodes[_layer_node(graph, "intermediate.intermediate_act_fn:gelu")][g.MODULE_TYPE] = "FastGELU"


def _other_shape(graph: nx.DiGraph) -> None:
    graph.nodes[_layer_node(graph, "attention.self:view")][g.SHAPE] = ["batch", "seq", 4, 32]


def _other_argument_shape(graph: nx.DiGraph) -> None:
    node = graph.nodes[_layer_node(graph, "intermediate.dense:linear")]
    node[g.INPUTS] = [["batch", "seq", 128], [512, 128]]  # no bias


def _aliasing(graph: nx.DiGraph) -> None:
    source, target = _layer_node(graph, "output.dense:linear"), _layer_node(graph, "output.dropout:dropout")
    graph.nodes[target][g.ALIAS] = not graph.nodes[target].get(g.ALIAS, False)
    graph.edges[source, target][g.ALIAS] = graph.nodes[target][g.ALIAS]


def _edge_aliasing(graph: nx.DiGraph) -> None:
    edge = graph.edges[_layer_node(graph, "output.dense:linear"), _layer_node(graph, "output.dropout:dropout")]
    edge[g.ALIAS] = not edge.get(g.ALIAS, False)


def _other_dtype(graph: nx.DiGraph) -> None:
    graph.nodes[_layer_node(graph, "intermediate.intermediate_act_fn:gelu")][g.DTYPE] = "float16"


def _parameters_moved(graph: nx.DiGraph) -> None:
    # the same total, held by other ops
    query = graph.nodes[_layer_node(graph, "attention.self.query:linear")]
    dense = graph.nodes[_layer_node(graph, "attention.output.dense:linear")]
    query[g.PARAMS], dense[g.PARAMS] = query[g.PARAMS] + 128, dense[g.PARAMS] - 128


def _parameter_renamed(graph: nx.DiGraph) -> None:
    query = graph.nodes[_layer_node(graph, "attention.self.query:linear")]
    query[g.PARAM_NAMES] = [f"bert.{LAYER}.attention.self.query.kernel", *query[g.PARAM_NAMES][1:]]


def _tied_parameter(graph: nx.DiGraph) -> None:
    graph.nodes[_layer_node(graph, "output.dense:linear")][g.SHARED_PARAMS] = ["embeddings.word_embeddings.weight"]


def _rewired_inside(graph: nx.DiGraph) -> None:
    # the second residual add reads the attention output instead of the feed-forward's
    graph.remove_edge(_layer_node(graph, "output.dropout:dropout"), _layer_node(graph, "output:add"))
    graph.add_edge(_layer_node(graph, "attention.output:add"), _layer_node(graph, "output:add"))


def _other_mask(graph: nx.DiGraph) -> None:
    # like a sliding-window layer among global ones: the same ops, another mask
    sdpa = _layer_node(graph, "attention.self:scaled_dot_product_attention")
    graph.add_node(":sliding_mask", **{**graph.nodes[":expand"], g.ORDER: graph.nodes[":expand"][g.ORDER]})
    graph.add_edge(":expand", ":sliding_mask", **graph.edges[":expand", sdpa])
    graph.add_edge(":sliding_mask", sdpa, **graph.edges[":expand", sdpa])
    graph.remove_edge(":expand", sdpa)


def _read_outside(graph: nx.DiGraph) -> None:
    # an inner result leaves the layer (as returned attention weights would)
    graph.add_node("attentions", **g.io_attributes(g.OUTPUT, ["batch", "seq", 128], "float32", 10_000))
    graph.add_edge(_layer_node(graph, "attention.output:add"), "attentions", shape=["batch", "seq", 128])


def _edge_shape(graph: nx.DiGraph) -> None:
    graph.edges[
        _layer_node(graph, "intermediate.dense:linear"), _layer_node(graph, "intermediate.intermediate_act_fn:gelu")
    ][g.SHAPE] = ["batch", "seq", 256]


EDITS: dict[str, Callable[[nx.DiGraph], None]] = {
    "another activation op": _other_activation,
    "another overload of the op": _other_overload,
    "another module type": _other_module_type,
    "another shape inside": _other_shape,
    "another dtype": _other_dtype,
    "another argument shape": _other_argument_shape,
    "an output that aliases its input": _aliasing,
    "an edge that aliases": _edge_aliasing,
    "parameters held elsewhere": _parameters_moved,
    "a parameter renamed": _parameter_renamed,
    "a tied parameter read": _tied_parameter,
    "wired differently inside": _rewired_inside,
    "another attention mask": _other_mask,
    "an inner result read outside": _read_outside,
    "another shape on an inner edge": _edge_shape,
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_the_middle_layer_differs_so_nothing_folds(three_layers: nx.DiGraph, edit: str) -> None:
    graph = copy.deepcopy(three_layers)
    EDITS[edit](graph)
    assert layer_boxes(views.view(graph, 2)) == ["encoder.layer.0", "encoder.layer.1", "encoder.layer.2"]
    for depth in FOLDING_DEPTHS:
        assert folded_modules(views.view(graph, depth)) == set(), depth
    assert summary_names(graph) == ["(0)", "(1)", "(2)"]


def test_layers_that_read_another_mask_fold_among_themselves(three_layers: nx.DiGraph) -> None:
    graph = copy.deepcopy(three_layers)
    graph.add_node(":sliding_mask", **graph.nodes[":expand"])
    graph.add_edge(":expand", ":sliding_mask", shape=graph.nodes[":expand"][g.SHAPE])
    for layer in (1, 2):
        sdpa = f"encoder.layer.{layer}.attention.self:scaled_dot_product_attention"
        graph.add_edge(":sliding_mask", sdpa, **graph.edges[":expand", sdpa])
        graph.remove_edge(":expand", sdpa)
    assert layer_boxes(views.view(graph, 2)) == ["encoder.layer.0", "encoder.layer.1-2"]
    assert summary_names(graph) == ["(0)", "(1-2)"]


def test_the_content_digest_ignores_the_index_and_the_stream(three_layers: nx.DiGraph) -> None:
    content = views.sibling_content(three_layers)
    assert set(content) == {"encoder.layer.0", "encoder.layer.1", "encoder.layer.2"}
    assert len(set(content.values())) == 1  # layer 0 reads the embeddings, the others the layer before


def test_a_view_cannot_fold_without_the_operator_content(three_layers: nx.DiGraph) -> None:
    with pytest.raises(ValueError, match="sibling_content"):
        views.fold_repeats(views.collapse(three_layers, 2))
    folded = views.fold_repeats(views.collapse(three_layers, 2), views.sibling_content(three_layers))
    assert layer_boxes(folded) == ["encoder.layer.0-2"]


def test_a_sibling_of_unknown_content_folds_with_none(three_layers: nx.DiGraph) -> None:
    content = views.sibling_content(three_layers)
    del content["encoder.layer.1"]
    folded = views.fold_repeats(views.collapse(three_layers, 2), content)
    assert layer_boxes(folded) == ["encoder.layer.0", "encoder.layer.1", "encoder.layer.2"]
