"""The attention facts on hand-built op graphs shaped like real attention, in-process.

Each graph is the part of an attention block the facts pass reads: the index tensors from
``arange`` and the boolean conditions transformers builds from them (``kv_idx <= q_idx`` causal,
``abs(q_idx - kv_idx) <= w`` a two-sided window), padding read from an input, the float mask an
eager block adds or fills in before its softmax, and the key's path back to its projection
(grouped-query attention repeats 2 key/value heads to 8). What each must give comes from what
that mask or key computes.
"""

from __future__ import annotations

import itertools
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.facts import attention

BOOL = {g.DTYPE: "bool"}
INDEX = {g.DTYPE: "int64"}
SCORES = {g.SHAPE: ["batch", 2, "seq", "seq"]}


def build(
    nodes: list[tuple[str, dict[str, Any]]], edges: list[tuple[str, str, int]], stacks: dict[str, str] | None = None
) -> nx.DiGraph:
    """Nodes named ``module:op`` or ``module:op_N`` (a name without ``:`` an input), run in the order
    listed, with their dtype (float32 unless given), shape and literals; edges ``(source, target,
    argument)``. Each op's ``inputs`` are the shapes of its tensor arguments."""
    graph = nx.DiGraph(**{g.G_STACKS: stacks or {}})
    for order, (node, attrs) in enumerate(nodes):
        module, _, name = node.rpartition(":")
        kind = {g.KIND: g.OPERATOR, g.OP: name.rstrip("0123456789").rstrip("_")} if module else {g.KIND: g.INPUT}
        graph.add_node(node, **kind | {g.MODULE: module, g.ORDER: order, g.DTYPE: "float32", g.SHAPE: []} | attrs)
    for source, target, position in edges:
        assert source in graph and target in graph, (source, target)
        graph.add_edge(source, target, **{g.ARGS: [position]})
    for node, data in graph.nodes(data=True):
        if data[g.KIND] == g.OPERATOR:
            arguments = sorted((graph.edges[s, node][g.ARGS][0], s) for s in graph.predecessors(node))
            data[g.INPUTS] = [graph.nodes[s][g.SHAPE] for _, s in arguments]
    return graph


def eager_causal_with_padding() -> nx.DiGraph:
    """Eager attention of 2 heads of 64: the causal condition ``le(kv_idx, q_idx)`` made a float mask by
    ``where`` and added to the scores (here twice: into a bias and into the scores), then the padding
    of ``attention_mask`` applied by ``masked_fill``. The padding condition is computed first."""
    nodes = [
        ("hidden", {g.SHAPE: ["batch", "seq", 128]}),
        ("attention_mask", {**INDEX, g.SHAPE: ["batch", "seq"]}),
        ("a:to", {**BOOL, g.SHAPE: ["batch", 1, 1, "seq"]}),
        ("a:arange", {**INDEX, g.SHAPE: ["seq"]}),
        ("a:arange_1", {**INDEX, g.SHAPE: ["seq"]}),
        ("a:le", {**BOOL, g.SHAPE: ["seq", "seq"]}),
        ("a:where", {g.SHAPE: ["seq", "seq"], g.LITERALS: {"1": 0.0, "2": "-inf"}}),
        ("a.query:linear", {g.SHAPE: ["batch", "seq", 128]}),
        ("a:view", {g.SHAPE: ["batch", "seq", 2, 64]}),
        ("a:transpose", {g.SHAPE: ["batch", 2, "seq", 64]}),
        ("a.key:linear", {g.SHAPE: ["batch", "seq", 128]}),
        ("a:view_1", {g.SHAPE: ["batch", "seq", 2, 64]}),
        ("a:transpose_1", {g.SHAPE: ["batch", 2, 64, "seq"]}),
        ("a:matmul", SCORES),
        ("a:add", SCORES),
        ("a:add_1", SCORES),
        ("a:masked_fill", {**SCORES, g.LITERALS: {"2": "-inf"}}),
        ("a:softmax", SCORES),
    ]
    edges = [
        ("attention_mask", "a:to", 0),
        ("a:arange_1", "a:le", 0),  # kv_idx
        ("a:arange", "a:le", 1),  # q_idx
        ("a:le", "a:where", 0),
        ("hidden", "a.query:linear", 0),
        ("a.query:linear", "a:view", 0),
        ("a:view", "a:transpose", 0),
        ("hidden", "a.key:linear", 0),
        ("a.key:linear", "a:view_1", 0),
        ("a:view_1", "a:transpose_1", 0),
        ("a:transpose", "a:matmul", 0),
        ("a:transpose_1", "a:matmul", 1),
        ("a:matmul", "a:add", 0),
        ("a:where", "a:add", 1),
        ("a:add", "a:add_1", 0),
        ("a:where", "a:add_1", 1),
        ("a:add_1", "a:masked_fill", 0),
        ("a:to", "a:masked_fill", 1),
        ("a:masked_fill", "a:softmax", 0),
    ]
    return build(nodes, edges)


def test_masked_fill_reads_its_mask_and_the_scores_it_fills() -> None:
    graph = eager_causal_with_padding()
    conditions, passed = attention.mask_walk(graph, "a:masked_fill")
    assert conditions == ["a:to", "a:le"]  # both masks, in execution order
    assert passed == {"a:masked_fill", "a:add_1", "a:add", "a:where", "a:le", "a:matmul", "a:to"}
    nodes, inputs = attention.condition_nodes(graph, conditions)
    # The mask subgraph masks.py evaluates: the conditions, the index ranges and the input they read.
    assert nodes == {"a:to", "attention_mask", "a:le", "a:arange", "a:arange_1"} and inputs == ["attention_mask"]
    assert attention.read_mask(graph, conditions) == {
        "causal": True,
        "window": None,
        "causal_window": False,
        "padding": ["attention_mask"],
    }
    assert attention.attention_facts(graph, "a:softmax") == {
        g.ATTENTION: g.CAUSAL,
        g.PADDING_MASK: "attention_mask",
        g.Q_HEADS: 2,
        g.KV_HEADS: 2,
    }


def test_a_masked_fill_of_a_stored_tensor_still_reads_its_condition() -> None:
    # A stored bias buffer (no node feeds it) filled where the causal condition fails.
    nodes = [("a:arange", INDEX), ("a:arange_1", INDEX), ("a:le", BOOL), ("a:masked_fill", {})]
    edges = [("a:arange_1", "a:le", 0), ("a:arange", "a:le", 1), ("a:le", "a:masked_fill", 1)]
    graph = build(nodes, edges)
    assert attention.mask_walk(graph, "a:masked_fill") == (["a:le"], {"a:masked_fill", "a:le"})


def sdpa(
    literals: dict[str, Any],
    mask: list[tuple[str, dict[str, Any]]] | None = None,
    mask_edges: list[tuple[str, str, int]] | None = None,
) -> nx.DiGraph:
    """scaled_dot_product_attention of 4 heads of 64 on inputs, its mask the last of ``mask``."""
    head = {g.SHAPE: ["batch", 4, "seq", 64]}
    nodes = [("query", head), ("key", head), ("value", head), *(mask or [])]
    nodes.append(("a:scaled_dot_product_attention", {**head, g.LITERALS: literals}))
    edges = [(name, "a:scaled_dot_product_attention", i) for i, name in enumerate(("query", "key", "value"))]
    if mask:
        edges.append((mask[-1][0], "a:scaled_dot_product_attention", attention.SDPA_MASK))
    return build(nodes, edges + (mask_edges or []))


def test_sdpa_without_a_mask_is_causal_only_by_its_flag() -> None:
    heads = {g.Q_HEADS: 4, g.KV_HEADS: 4}
    node = "a:scaled_dot_product_attention"
    assert attention.attention_facts(sdpa({"is_causal": True}), node) == {g.ATTENTION: g.CAUSAL, **heads}
    assert attention.attention_facts(sdpa({"is_causal": False}), node) == {g.ATTENTION: g.BIDIRECTIONAL, **heads}
    assert attention.attention_facts(sdpa({}), node) == {g.ATTENTION: g.BIDIRECTIONAL, **heads}


def test_a_mask_padded_on_both_sides_names_both_inputs() -> None:
    # Rows from the decoder's padding, columns from the encoder's: both inputs pad this mask.
    mask = [
        ("decoder_attention_mask", INDEX),
        ("attention_mask", INDEX),
        ("a:to", {**BOOL, g.SHAPE: ["batch", 1, "target", 1]}),
        ("a:to_1", {**BOOL, g.SHAPE: ["batch", 1, 1, "seq"]}),
        ("a:and", {**BOOL, g.SHAPE: ["batch", 1, "target", "seq"]}),
    ]
    steps = [("decoder_attention_mask", "a:to", 0), ("attention_mask", "a:to_1", 0)]
    graph = sdpa({}, mask, [*steps, ("a:to", "a:and", 0), ("a:to_1", "a:and", 1)])
    found = attention.attention_facts(graph, "a:scaled_dot_product_attention")
    assert found[g.ATTENTION] == g.BIDIRECTIONAL
    assert found[g.PADDING_MASK] == "attention_mask, decoder_attention_mask"


def index_mask(extra: list[tuple[str, dict[str, Any]]], edges: list[tuple[str, str, int]]) -> nx.DiGraph:
    """``a:arange`` (q_idx) and ``a:arange_1`` (kv_idx) and the condition built from them in ``extra``."""
    return build([("a:arange", INDEX), ("a:arange_1", INDEX), *extra], edges)


def read(graph: nx.DiGraph, condition: str) -> dict[str, Any]:
    return attention.read_mask(graph, [condition])


def test_each_condition_says_what_it_masks() -> None:
    window = [("a:sub", INDEX), ("a:abs", INDEX), ("a:le", {**BOOL, g.LITERALS: {"1": 8}})]
    steps = [("a:arange", "a:sub", 0), ("a:arange_1", "a:sub", 1), ("a:sub", "a:abs", 0), ("a:abs", "a:le", 0)]
    two_sided = {"causal": False, "window": 8, "causal_window": False, "padding": []}
    assert read(index_mask(window, steps), "a:le") == two_sided  # abs(q_idx - kv_idx) <= 8
    # The token itself left out, abs(q_idx - kv_idx) > 0: still a window of 8.
    holed = [*window, ("a:gt", {**BOOL, g.LITERALS: {"1": 0}}), ("a:and", BOOL)]
    holed_steps = [*steps, ("a:abs", "a:gt", 0), ("a:le", "a:and", 0), ("a:gt", "a:and", 1)]
    assert read(index_mask(holed, holed_steps), "a:and") == two_sided
    # The key index shifted by a constant, abs(q_idx - (kv_idx - 2)) <= 8: a two-sided window of 8.
    shifted = [("a:sub", {**INDEX, g.LITERALS: {"1": 2}}), ("a:sub_1", INDEX), ("a:abs", INDEX)]
    shifted += [("a:le", {**BOOL, g.LITERALS: {"1": 8}})]
    shifted_steps = [("a:arange_1", "a:sub", 0), ("a:arange", "a:sub_1", 0), ("a:sub", "a:sub_1", 1)]
    shifted_steps += [("a:sub_1", "a:abs", 0), ("a:abs", "a:le", 0)]
    assert read(index_mask(shifted, shifted_steps), "a:le") == two_sided
    # Causal with a prefix every query sees, kv_idx <= q_idx or kv_idx <= 3: causal, no window.
    prefix = [("a:le", BOOL), ("a:le_1", {**BOOL, g.LITERALS: {"1": 3}}), ("a:or", BOOL)]
    prefix_steps = [("a:arange_1", "a:le", 0), ("a:arange", "a:le", 1), ("a:arange_1", "a:le_1", 0)]
    prefix_steps += [("a:le", "a:or", 0), ("a:le_1", "a:or", 1)]
    assert read(index_mask(prefix, prefix_steps), "a:or") == {
        "causal": True,
        "window": None,
        "causal_window": False,
        "padding": [],
    }


def test_a_packed_sequence_mask_from_position_ids_is_no_padding() -> None:
    # Sequences packed in one row are told apart by a count over position_ids (cumsum): that count is
    # not index arithmetic, so position_ids pads nothing; kv_idx <= q_idx makes it causal.
    nodes = [
        ("position_ids", INDEX),
        ("a:cumsum", INDEX),
        ("a:unsqueeze", INDEX),
        ("a:unsqueeze_1", INDEX),
        ("a:eq", BOOL),
        ("a:arange", INDEX),
        ("a:arange_1", INDEX),
        ("a:le", BOOL),
        ("a:and", BOOL),
    ]
    edges = [
        ("position_ids", "a:cumsum", 0),
        ("a:cumsum", "a:unsqueeze", 0),
        ("a:cumsum", "a:unsqueeze_1", 0),
        ("a:unsqueeze", "a:eq", 0),
        ("a:unsqueeze_1", "a:eq", 1),
        ("a:arange_1", "a:le", 0),
        ("a:arange", "a:le", 1),
        ("a:eq", "a:and", 0),
        ("a:le", "a:and", 1),
    ]
    graph = build(nodes, edges)
    assert read(graph, "a:and") == {"causal": True, "window": None, "causal_window": False, "padding": []}
    assert "a:cumsum" not in attention.condition_nodes(graph, ["a:and"])[0]


def eager(between: list[str], after: list[str], product: str = "matmul") -> nx.DiGraph:
    """``product → between… → softmax → after… → product``, each op reading the one before."""
    names = [f"a:{product}", *(f"a:{op}_{i}" for i, op in enumerate(between)), "a:softmax"]
    names += [*(f"a:{op}_{i}" for i, op in enumerate(after, len(between))), f"a:{product}_9"]
    edges = [(source, target, 0) for source, target in itertools.pairwise(names)]
    return build([(name, SCORES) for name in names], edges)


def test_the_products_around_an_eager_softmax() -> None:
    # bmm (OPT, BART): scores scaled, the weights dropped out, then the values.
    assert attention.eager_products(eager(["mul"], ["dropout"], "bmm"), "a:softmax") == ("a:bmm", "a:bmm_9")
    # Dropout comes after the softmax, never between the scores and it.
    assert attention.eager_products(eager(["dropout"], []), "a:softmax") == (None, "a:matmul_9")
    # The walk looks at most 8 ops away: 7 casts, scales and masks between are crossed, 8 are not.
    seven = ["mul", "div", "add", "to", "masked_fill", "where", "type_as"]
    assert attention.eager_products(eager(seven, []), "a:softmax") == ("a:matmul", "a:matmul_9")
    assert attention.eager_products(eager([*seven, "float"], []), "a:softmax") == (None, "a:matmul_9")


def grouped(views: int, value_size: int = 64) -> nx.DiGraph:
    """sdpa of 8 query heads of 64 whose key is 2 heads ``transpose``d from its projection, then
    repeated to 8 (unsqueeze, expand, reshape) and passed through ``views`` more views; the value
    has 2 heads of ``value_size``, repeated alike."""
    nodes: list[tuple[str, dict[str, Any]]] = [("query", {g.SHAPE: ["batch", 8, "seq", 64]})]
    edges: list[tuple[str, str, int]] = [("query", "a:scaled_dot_product_attention", 0)]
    for tensor, size, position in (("key", 64, 1), ("value", value_size, 2)):
        chain = [
            (f"a.{tensor}:linear", ["batch", "seq", 2 * size]),
            (f"a.{tensor}:view", ["batch", "seq", 2, size]),
            (f"a.{tensor}:transpose", ["batch", 2, "seq", size]),
            (f"a.{tensor}:unsqueeze", ["batch", 2, 1, "seq", size]),
            (f"a.{tensor}:expand", ["batch", 2, 4, "seq", size]),
            (f"a.{tensor}:reshape", ["batch", 8, "seq", size]),
        ]
        chain += [
            (f"a.{tensor}:view_{i + 1}", ["batch", 8, "seq", size]) for i in range(views if tensor == "key" else 0)
        ]
        nodes += [(name, {g.SHAPE: shape}) for name, shape in chain]
        edges += [(source, target, 0) for (source, _), (target, _) in itertools.pairwise(chain)]
        edges.append((chain[-1][0], "a:scaled_dot_product_attention", position))
    nodes.append(("a:scaled_dot_product_attention", {g.SHAPE: ["batch", 8, "seq", 64]}))
    return build(nodes, edges)


def test_key_value_heads_are_read_on_the_keys_path() -> None:
    node = "a:scaled_dot_product_attention"
    assert attention.heads(grouped(0), node, True) == {g.Q_HEADS: 8, g.KV_HEADS: 2}
    # Values of another head size (DeepSeek's v_head_dim): the heads are still the key's.
    assert attention.heads(grouped(0, value_size=32), node, True) == {g.Q_HEADS: 8, g.KV_HEADS: 2}
    # The walk looks at 64 ops from the key back: with 60 views added the 2 heads are the 64th
    # (60 views, reshape, expand, unsqueeze, transpose), with 61 the 65th, beyond the walk.
    assert attention.heads(grouped(60), node, True) == {g.Q_HEADS: 8, g.KV_HEADS: 2}
    assert attention.heads(grouped(61), node, True) == {g.Q_HEADS: 8, g.KV_HEADS: 8}


def test_heads_of_a_query_that_is_not_split_into_heads() -> None:
    graph = grouped(0)
    graph.nodes["query"][g.SHAPE] = ["batch", 12, 512]  # 12 tokens of 512, no heads dimension
    assert attention.heads(graph, "a:scaled_dot_product_attention", True) == {}


def cross_keys() -> nx.DiGraph:
    """Decoder cross-attention whose key is the encoder output's projection plus a position term the
    attention module computes from one embedding read twice (``p - neg(p)``)."""
    stacks = {"enc.layers": "encoder", "dec.layers": "decoder"}
    nodes = [
        ("positions", INDEX),
        ("hidden", {}),
        ("enc.layers.0.out:linear", {}),
        ("dec.layers.0.cross:embedding", {}),
        ("dec.layers.0.cross:neg", {}),
        ("dec.layers.0.cross:sub", {}),
        ("dec.layers.0.cross.key:linear", {}),
        ("dec.layers.0.cross:add", {}),
        ("dec.layers.0.cross:matmul", SCORES),
        ("dec.layers.0.cross:softmax", SCORES),
    ]
    edges = [
        ("hidden", "enc.layers.0.out:linear", 0),
        ("positions", "dec.layers.0.cross:embedding", 1),
        ("dec.layers.0.cross:embedding", "dec.layers.0.cross:sub", 0),
        ("dec.layers.0.cross:embedding", "dec.layers.0.cross:neg", 0),
        ("dec.layers.0.cross:neg", "dec.layers.0.cross:sub", 1),
        ("enc.layers.0.out:linear", "dec.layers.0.cross.key:linear", 0),
        ("dec.layers.0.cross.key:linear", "dec.layers.0.cross:add", 0),
        ("dec.layers.0.cross:sub", "dec.layers.0.cross:add", 1),
        ("hidden", "dec.layers.0.cross:matmul", 0),
        ("dec.layers.0.cross:add", "dec.layers.0.cross:matmul", 1),
        ("dec.layers.0.cross:matmul", "dec.layers.0.cross:softmax", 0),
    ]
    return build(nodes, edges, stacks)


def test_cross_attention_keys_reached_past_a_term_read_twice() -> None:
    graph = cross_keys()
    assert attention.keys_from_another_stack(graph, "dec.layers.0.cross:matmul")
    assert attention.attention_facts(graph, "dec.layers.0.cross:softmax")[g.ATTENTION] == g.CROSS
    # Keys the module holds itself (no key tensor in the graph) come from no other stack.
    graph.remove_edge("dec.layers.0.cross:add", "dec.layers.0.cross:matmul")
    assert not attention.keys_from_another_stack(graph, "dec.layers.0.cross:matmul")


def test_a_padding_mask_from_sequence_lengths_has_no_window() -> None:
    # lengths[:, None] > arange(seq)[None, :]: keys past each row's length are padding.
    nodes = [
        ("input_lengths", {**INDEX, g.SHAPE: ["batch"]}),
        ("a:arange", {**INDEX, g.SHAPE: ["seq"]}),
        ("a:unsqueeze", {**INDEX, g.SHAPE: ["batch", 1], g.LITERALS: {"1": 1}}),
        ("a:unsqueeze_1", {**INDEX, g.SHAPE: [1, "seq"], g.LITERALS: {"1": 0}}),
        ("a:gt", {**BOOL, g.SHAPE: ["batch", "seq"]}),
    ]
    edges = [
        ("input_lengths", "a:unsqueeze", 0),
        ("a:arange", "a:unsqueeze_1", 0),
        ("a:unsqueeze", "a:gt", 0),
        ("a:unsqueeze_1", "a:gt", 1),
    ]
    graph = build(nodes, edges)
    assert read(graph, "a:gt") == {
        "causal": False,
        "window": None,
        "causal_window": False,
        "padding": ["input_lengths"],
    }


def causal_window(shift: str, amount: int) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, str, int]]]:
    """``kv_idx <= q_idx and kv_idx > q_idx <shift> amount``: causal, looking back a window."""
    nodes = [("a:le", BOOL), (f"a:{shift}", {**INDEX, g.LITERALS: {"1": amount}}), ("a:gt", BOOL), ("a:and", BOOL)]
    edges = [("a:arange_1", "a:le", 0), ("a:arange", "a:le", 1), ("a:arange", f"a:{shift}", 0)]
    edges += [("a:arange_1", "a:gt", 0), (f"a:{shift}", "a:gt", 1), ("a:le", "a:and", 0), ("a:gt", "a:and", 1)]
    return nodes, edges


def test_a_causal_window_is_read_whichever_way_its_shift_is_written() -> None:
    expected = {"causal": True, "window": 4, "causal_window": True, "padding": []}
    assert read(index_mask(*causal_window("sub", 4)), "a:and") == expected  # kv_idx > q_idx - 4
    assert read(index_mask(*causal_window("add", -4)), "a:and") == expected  # kv_idx > q_idx + (-4)
    # A shift of 0 or forward is no window: kv_idx > q_idx + 4 masks every key at or before the query's.
    for shift, amount in (("add", 4), ("sub", -4), ("add", 0), ("sub", 0)):
        assert read(index_mask(*causal_window(shift, amount)), "a:and")["window"] is None
    assert read(index_mask(*causal_window("sub", 1)), "a:and")["window"] == 1
    assert read(index_mask(*causal_window("add", -1)), "a:and")["window"] == 1


def test_of_two_windows_the_narrower_is_the_one_attention_sees() -> None:
    # abs(q_idx - kv_idx) <= w and kv_idx > q_idx - v, in either order of execution: the mask keeps
    # the keys both keep, so its window is the narrower; at equal widths the causal form.
    def both(two_sided: int, causal: int, two_sided_first: bool) -> dict[str, Any]:
        window = [("a:sub_1", INDEX), ("a:abs", INDEX), ("a:le_1", {**BOOL, g.LITERALS: {"1": two_sided}})]
        window_steps = [("a:arange", "a:sub_1", 0), ("a:arange_1", "a:sub_1", 1), ("a:sub_1", "a:abs", 0)]
        window_steps += [("a:abs", "a:le_1", 0), ("a:le_1", "a:and_1", 1), ("a:and", "a:and_1", 0)]
        nodes, edges = causal_window("sub", causal)
        ordered = [*window, *nodes] if two_sided_first else [*nodes, *window]
        graph = index_mask([*ordered, ("a:and_1", BOOL)], [*edges, *window_steps])
        return read(graph, "a:and_1")

    for first in (True, False):
        assert both(8, 4, first) == {"causal": True, "window": 4, "causal_window": True, "padding": []}
        assert both(3, 4, first) == {"causal": True, "window": 3, "causal_window": False, "padding": []}
        assert both(4, 4, first) == {"causal": True, "window": 4, "causal_window": True, "padding": []}
