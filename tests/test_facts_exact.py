"""The facts pass run again on committed graphs, in-process, against what each architecture is.

Each graph's stored facts are removed and :func:`bertgraph.graph.facts.annotate` run on the
ops alone. What it must find comes from the models' configs (``tests/generation_runs.py``,
``tests/fixtures/bert-tiny-3-*.json``): bert-tiny 3 bidirectional layers of 2 heads, absolute
positions; GPT-2 3 causal layers of 4 heads; LLaMA 4 query heads sharing 2 key/value heads,
rotary; Qwen2 4 layers whose last 2 (``max_window_layers`` 2) slide with a window of 16;
T5 4 blocks per stack, the decoder's self-attention causal and its cross-attention reading the
encoder, relative buckets; ModernBERT 10 layers, global every third (0, 3, 6, 9), the others a
two-sided window of 16 / 2 = 8 tokens, rotary.
"""

from __future__ import annotations

import copy
from typing import Any

import networkx as nx
import pytest

from bertgraph.graph import facts
from bertgraph.graph import schema as g
from bertgraph.graph.facts import attention, position, sharing, summary, walk
from tests.generation_runs import graph_of
from tests.graph_fixtures import bert_tiny, chain

NODE_FACTS = (g.ATTENTION, g.WINDOW, g.PADDING_MASK, g.Q_HEADS, g.KV_HEADS)
GRAPH_FACTS = (g.G_ATTENTION, g.G_POSITION, g.G_SHARED)


def bare(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy of ``graph`` without any fact."""
    graph = copy.deepcopy(graph)
    for _, data in graph.nodes(data=True):
        for key in NODE_FACTS:
            data.pop(key, None)
    for key in GRAPH_FACTS:
        graph.graph.pop(key, None)
    for info in graph.graph.get(g.G_MODULES, {}).values():
        for key in (*NODE_FACTS, g.M_CALLS):
            info.pop(key, None)
    return graph


def annotated(name: str, attention_kind: str | None = None) -> nx.DiGraph:
    graph = bert_tiny() if name == "bert-tiny" else graph_of(name, attention_kind)
    return facts.annotate(bare(graph))


def node_facts(graph: nx.DiGraph) -> list[tuple[Any, ...]]:
    return [tuple(graph.nodes[n].get(key) for key in NODE_FACTS) for n in attention.attention_operators(graph)]


ARCHITECTURES: dict[str, tuple[dict[str, dict[str, int]], dict[str, list[str]], list[tuple[Any, ...]]]] = {
    "bert-tiny": (
        {"bert.encoder.layer": {g.BIDIRECTIONAL: 3}},
        {"bert.encoder.layer": [g.ABSOLUTE]},
        [(g.BIDIRECTIONAL, None, "attention_mask", 2, 2)] * 3,
    ),
    "gpt2": (
        {"transformer.h": {g.CAUSAL: 3}},
        {"transformer.h": [g.ABSOLUTE]},
        [(g.CAUSAL, None, "attention_mask", 4, 4)] * 3,
    ),
    "llama": (
        {"model.layers": {g.CAUSAL: 3}},
        {"model.layers": [g.ROTARY]},
        [(g.CAUSAL, None, "attention_mask", 4, 2)] * 3,
    ),
    "qwen2-sliding": (
        {"model.layers": {g.CAUSAL: 2, "causal-sliding-window(16)": 2}},
        {"model.layers": [g.ROTARY]},
        [(g.CAUSAL, None, "attention_mask", 4, 2)] * 2 + [(g.CAUSAL_SLIDING_WINDOW, 16, "attention_mask", 4, 2)] * 2,
    ),
    "t5": (
        {"decoder.block": {g.CAUSAL: 4, g.CROSS: 4}, "encoder.block": {g.BIDIRECTIONAL: 4}},
        {"decoder.block": [g.RELATIVE_BUCKETS], "encoder.block": [g.RELATIVE_BUCKETS]},
        [(g.BIDIRECTIONAL, None, "attention_mask", 4, 4)] * 4
        + [(g.CAUSAL, None, "decoder_attention_mask", 4, 4), (g.CROSS, None, "attention_mask", 4, 4)] * 4,
    ),
    "modernbert": (
        {"layers": {g.BIDIRECTIONAL: 4, "sliding-window(8)": 6}},
        {"layers": [g.ROTARY]},
        [
            (g.BIDIRECTIONAL, None, "attention_mask", 4, 4)
            if layer % 3 == 0
            else (g.SLIDING_WINDOW, 8, "attention_mask", 4, 4)
            for layer in range(10)
        ],
    ),
}


# Every committed graph: the encoders are committed with their default attention only.
FACT_CASES = [(name, None) for name in ARCHITECTURES] + [
    (name, "eager") for name in ARCHITECTURES if name not in ("bert-tiny", "modernbert")
]


@pytest.mark.parametrize(("name", "attention_kind"), FACT_CASES)
def test_the_facts_are_what_the_architecture_is(name: str, attention_kind: str | None) -> None:
    kinds, positions, per_op = ARCHITECTURES[name]
    graph = annotated(name, attention_kind)
    assert graph.graph[g.G_ATTENTION] == kinds
    assert graph.graph[g.G_POSITION] == positions
    assert node_facts(graph) == per_op
    assert g.G_SHARED not in graph.graph  # no layer runs twice
    modules = graph.graph[g.G_MODULES]
    for node in attention.attention_operators(graph):
        entry = modules[graph.nodes[node][g.MODULE]]
        assert entry[g.ATTENTION] == graph.nodes[node][g.ATTENTION]  # the module carries its op's facts


def test_annotating_copies_the_module_table() -> None:
    graph = bare(bert_tiny())
    table = graph.graph[g.G_MODULES]
    result = facts.annotate(graph)
    assert result is graph and graph.graph[g.G_MODULES] is not table
    assert not any(g.ATTENTION in info for info in table.values())
    without = bare(bert_tiny())
    del without.graph[g.G_MODULES]
    facts.annotate(without)
    assert g.G_MODULES not in without.graph and without.graph[g.G_ATTENTION] == ARCHITECTURES["bert-tiny"][0]


def test_a_module_keeps_the_facts_it_has() -> None:
    graph = bare(bert_tiny())
    module = "bert.encoder.layer.0.attention.self"
    graph.graph[g.G_MODULES][module][g.ATTENTION] = g.CAUSAL
    attention.annotate_attention(graph)
    assert graph.graph[g.G_MODULES][module] == {**bare(bert_tiny()).graph[g.G_MODULES][module], g.ATTENTION: g.CAUSAL}


def test_a_graph_without_attention_has_no_attention_kinds() -> None:
    graph = chain(["linear", "gelu"])
    assert attention.annotate_attention(graph) == {} and g.G_ATTENTION not in graph.graph
    assert position.annotate_position(graph) == {"": []}
    assert sharing.annotate_sharing(graph) == {} and g.G_SHARED not in graph.graph


def test_a_router_softmax_in_a_feed_forward_module_is_not_attention() -> None:
    graph = chain(["softmax", "softmax"])
    graph.graph[g.G_MODULES]["stack.layer.0"][g.M_ROLE] = "feed-forward"
    assert attention.attention_operators(graph) == ["stack.layer.1:softmax"]


def test_eager_products_around_the_softmax() -> None:
    graph = graph_of("gpt2", "eager")
    softmax = attention.attention_operators(graph)[0]
    scores, values = attention.eager_products(graph, softmax)
    assert scores is not None and values is not None
    assert graph.nodes[scores][g.OP] == "matmul" and graph.nodes[values][g.OP] == "matmul"
    assert graph.nodes[scores][g.ORDER] < graph.nodes[softmax][g.ORDER] < graph.nodes[values][g.ORDER]
    assert graph.nodes[scores][g.SHAPE][-1] == graph.nodes[scores][g.SHAPE][-2] == "seq"  # the scores
    lone = chain(["softmax", "gelu"])
    assert attention.eager_products(lone, "stack.layer.0:softmax") == (None, None)


def test_the_mask_walk_reaches_the_boolean_conditions() -> None:
    graph = bert_tiny()
    sdpa = attention.attention_operators(graph)[0]
    mask = walk.argument(graph, sdpa, attention.SDPA_MASK)
    assert mask == "bert:expand"
    conditions = attention.mask_conditions(graph, mask)
    assert conditions == ["bert:expand"]
    nodes, inputs = attention.condition_nodes(graph, conditions)
    assert inputs == ["attention_mask"]
    assert {"bert:and_1", "bert:index", "bert:ge", "attention_mask"} <= nodes
    assert not any(graph.nodes[n].get(g.DTYPE) == "float32" for n in nodes)
    found = attention.read_mask(graph, conditions)
    assert found == {"causal": False, "window": None, "causal_window": False, "padding": ["attention_mask"]}


def test_keys_from_another_stack() -> None:
    graph = graph_of("t5")
    ops = attention.attention_operators(graph)
    kinds = [attention.keys_from_another_stack(graph, n) for n in ops]
    assert kinds == [False] * 4 + [False, True] * 4
    bert = bert_tiny()
    assert not any(attention.keys_from_another_stack(bert, n) for n in attention.attention_operators(bert))


def test_heads_need_a_four_dimensional_query_with_a_known_head_count() -> None:
    graph = bert_tiny()
    sdpa = attention.attention_operators(graph)[0]
    assert attention.heads(graph, sdpa, True) == {g.Q_HEADS: 2, g.KV_HEADS: 2}
    query = walk.argument(graph, sdpa, 0)
    assert query is not None
    graph.nodes[query][g.SHAPE] = ["batch", "heads", "seq", 64]
    assert attention.heads(graph, sdpa, True) == {}
    graph.nodes[query][g.SHAPE] = ["batch", "seq", 128]
    assert attention.heads(graph, sdpa, True) == {}
    llama = graph_of("llama", "eager")
    softmax = attention.attention_operators(llama)[0]
    scores, _ = attention.eager_products(llama, softmax)
    assert attention.heads(llama, softmax, False, scores) == {g.Q_HEADS: 4, g.KV_HEADS: 2}
    assert attention.heads(llama, softmax, False, None) == {g.Q_HEADS: 4, g.KV_HEADS: 4}


def test_readers_of_arguments_literals_and_stacks() -> None:
    graph = bert_tiny()
    add = "bert.embeddings:add_1"
    assert walk.argument(graph, add, 0) == "bert.embeddings:add"
    assert walk.argument(graph, add, 1) == "bert.embeddings.position_embeddings:embedding"
    assert walk.argument(graph, add, 2) is None
    assert walk.op(graph, add) == "add" and walk.op(graph, "input_ids") == "" and walk.op(graph, None) == ""
    assert walk.literal(graph, "bert:ge", 1) == 0
    assert walk.literal(graph, "bert:ge", "nope") is None and walk.literal(graph, "input_ids", 0) is None
    assert walk.operators(graph, ["tanh", "gelu"]) == [
        f"bert.encoder.layer.{i}.intermediate.intermediate_act_fn:gelu" for i in range(3)
    ] + ["bert.pooler.activation:tanh"]
    stacks = {"bert.encoder.layer": "encoder"}
    assert graph.graph[g.G_STACKS] == stacks
    assert walk.stack_of(graph, "bert.encoder.layer") == "bert.encoder.layer"
    assert walk.stack_of(graph, "bert.encoder.layer.1.output") == "bert.encoder.layer"
    assert walk.stack_of(graph, "bert.encoder.layerx") == "bert.encoder.layer"  # beside the list, in bert.encoder
    assert walk.stack_of(graph, "bert.encoder") == "bert.encoder.layer"
    assert walk.stack_of(graph, "bert.embeddings") is None
    assert (
        walk.stack_key(graph, "bert.embeddings") == "" and walk.stack_key(graph, "bert.encoder") == "bert.encoder.layer"
    )
    t5 = graph_of("t5")
    assert walk.stack_of(t5, "decoder.final_layer_norm") == "decoder.block"
    assert walk.stack_of(t5, "shared") is None
    top = nx.DiGraph(**{g.G_STACKS: {"layers": "encoder", "a.b.layers": "decoder"}})
    assert walk.stack_of(top, "embeddings") is None  # a list at the top has no module beside it
    assert walk.stack_of(top, "a.b.norm") == "a.b.layers"
    nested = nx.DiGraph(**{g.G_STACKS: {"a.layers": "encoder", "a.b.layers": "decoder"}})
    assert walk.stack_of(nested, "a.b.norm") == "a.b.layers"  # the innermost holder wins
    assert walk.stack_of(nested, "a.norm") == "a.layers"


def test_positions_are_read_off_the_index_ops() -> None:
    graph = bert_tiny()
    uses = position.position_uses(graph)
    assert uses == [(g.ABSOLUTE, "bert.embeddings.position_embeddings")]  # token ids and types come from inputs
    kinds = {kind for kind, _ in position.position_uses(graph_of("t5"))}
    assert kinds == {g.RELATIVE_BUCKETS}
    rotary = position.position_uses(graph_of("llama"))
    assert {kind for kind, _ in rotary} == {g.ROTARY} and len(rotary) == 2 * 3  # queries and keys, 3 layers
    assert position._index_ops(graph, None) == (set(), False)
    ops, reads = position._index_ops(graph, "bert.embeddings:slice")
    assert ops == {"slice"} and not reads  # the stored position ids: no node feeds the slice
    bare_graph = bare(bert_tiny())
    bare_graph.graph[g.G_STACKS] = {}
    assert position.annotate_position(bare_graph) == {"": [g.ABSOLUTE]}


def test_a_layer_run_three_times_is_shared() -> None:
    """bert-tiny rewritten as ALBERT runs it: layers 1 and 2 are calls 1 and 2 of layer 0."""
    graph = bare(bert_tiny())
    for _, data in graph.nodes(data=True):
        module = str(data.get(g.MODULE, ""))
        for layer in (1, 2):
            prefix = f"bert.encoder.layer.{layer}"
            if module == prefix or module.startswith(prefix + "."):
                data[g.MODULE] = "bert.encoder.layer.0" + module[len(prefix) :]
                data[g.CALL] = layer
    assert sharing.module_calls(graph)["bert.encoder.layer.0.attention.self.query"] == 3
    assert sharing.module_calls(graph)["bert.pooler.dense"] == 1
    assert sharing.shared_layers(graph) == {"bert.encoder.layer.0": 3}
    assert sharing.annotate_sharing(graph) == {"bert.encoder.layer.0": 3}
    assert graph.graph[g.G_SHARED] == {"bert.encoder.layer.0": 3}
    assert graph.graph[g.G_MODULES]["bert.encoder.layer.0"][g.M_CALLS] == 3
    assert summary.shared_lines(graph.graph[g.G_SHARED]) == ["bert.encoder.layer.0 runs 3 times (one set of weights)"]


def test_weights_shared_inside_a_layer_are_not_a_shared_layer() -> None:
    # Only the feed-forward's output projection runs twice (DeBERTa-like): no attention in that group.
    graph = bare(bert_tiny())
    graph.nodes["bert.encoder.layer.1.output.dense:linear"][g.CALL] = 1
    assert sharing.module_calls(graph)["bert.encoder.layer.1.output.dense"] == 2
    assert sharing.shared_layers(graph) == {}
    graph.nodes["bert.encoder.layer.1.attention.self.query:linear"][g.CALL] = 1
    graph.nodes["bert.encoder.layer.1.attention.self.key:linear"][g.CALL] = "1"  # not a number: call 0
    assert sharing.module_calls(graph)["bert.encoder.layer.1.attention.self.key"] == 1


def test_module_path_helpers() -> None:
    assert sharing._parent("a.b.c") == "a.b" and sharing._parent("a") == ""
    assert sharing._inside("a.b", "") and sharing._inside("a.b", "a.b") and sharing._inside("a.b.c", "a.b")
    assert not sharing._inside("a.bc", "a.b")
    assert sharing._common_module(["a.b.c", "a.b.d"]) == "a.b"
    assert sharing._common_module(["a.b.c", "a.b.c"]) == "a.b.c"
    assert sharing._common_module(["a.b", "x.b"]) == ""
    assert sharing._common_module(["", "a"]) == ""
    graph = bert_tiny()
    assert sharing._stack_layer(graph, "bert.encoder.layer.2.output.dense") == "bert.encoder.layer.2"
    assert sharing._stack_layer(graph, "bert.pooler") == "bert.pooler"
    assert sharing._stack_layer(graph, "bert.encoder.layer") == "bert.encoder.layer"


def test_the_summary_of_each_architecture() -> None:
    found = summary.architecture(annotated("bert-tiny"))
    assert found == {
        "structure": "encoder-only",
        "stacks": [
            {
                "path": "bert.encoder.layer",
                "kind": "encoder",
                "attention": {g.BIDIRECTIONAL: 3},
                "padding_masks": ["attention_mask"],
                "q_heads": [2],
                "kv_heads": [2],
                "position": [g.ABSOLUTE],
            }
        ],
        "shared": {},
    }
    assert summary.stack_line(found["stacks"][0]) == (
        "bert.encoder.layer (encoder): 3 × bidirectional · padding mask from attention_mask · 2 heads · "
        "positions: absolute"
    )
    llama = summary.architecture(annotated("llama"))["stacks"][0]
    assert summary.stack_line(llama) == (
        "model.layers (decoder): 3 × causal · padding mask from attention_mask · 4 heads, 2 key/value heads "
        "(grouped-query) · positions: rotary"
    )
    t5 = summary.architecture(annotated("t5"))
    assert [stack["path"] for stack in t5["stacks"]] == ["decoder.block", "encoder.block"]  # the file's order
    assert t5["stacks"][0]["padding_masks"] == ["attention_mask", "decoder_attention_mask"]
    assert t5["stacks"][1]["padding_masks"] == ["attention_mask"]
    assert summary.stack_line(t5["stacks"][0]).startswith("decoder.block (decoder): 4 × causal, 4 × cross · ")
    bare_line = {
        "path": "",
        "kind": "",
        "attention": {},
        "padding_masks": [],
        "q_heads": [],
        "kv_heads": [],
        "position": [],
    }
    assert summary.stack_line(bare_line) == "model: — · positions: none found"
    assert summary.architecture(chain(["linear"])) == {"structure": "", "stacks": [], "shared": {}}
    outside = bare(bert_tiny())
    outside.graph[g.G_STACKS] = {}
    facts.annotate(outside)
    stacks = summary.architecture(outside)["stacks"]
    assert [stack["path"] for stack in stacks] == [""] and stacks[0]["kind"] == ""
    assert summary.stack_line(stacks[0]).startswith("model: 3 × bidirectional · ")


def ops_graph(edges: list[tuple[str, str, int]], stacks: dict[str, str] | None = None) -> nx.DiGraph:
    """Ops named ``module:op`` or ``module:op_N`` (a name without ``:`` an input), linked by
    ``(source, target, argument)``, run in the order they first appear."""
    graph = nx.DiGraph(**{g.G_STACKS: stacks or {}})
    for source, target, position_ in edges:
        for node in (source, target):
            if node not in graph:
                name = node.split(":")[-1].rstrip("0123456789").rstrip("_")
                data = {g.KIND: g.INPUT} if ":" not in node else {g.KIND: g.OPERATOR, g.OP: name}
                graph.add_node(node, **data, **{g.MODULE: node.split(":")[0], g.ORDER: len(graph)})
        graph.add_edge(source, target, **{g.ARGS: [position_]})
    return graph


def test_each_index_computation_is_its_own_kind_of_position() -> None:
    table = ("w", "m:embedding", 0)
    relative = ops_graph([("m:arange", "m:sub", 0), ("m:arange_1", "m:sub", 1), ("m:sub", "m:gather", 1)])
    assert position.position_uses(relative) == [(g.RELATIVE, "m")]  # DeBERTa: the index is exactly sub(arange, arange)
    plain = ops_graph([("m:arange", "m:gather", 1), ("x", "m:gather", 0)])
    assert position.position_uses(plain) == []  # a gather at positions themselves, no difference
    steps = [("m:arange", "m:sub", 0), ("m:arange_1", "m:sub", 1), ("m:sub", "m:log", 0), ("m:log", "m:embedding", 1)]
    buckets = ops_graph(steps)
    assert position.position_uses(buckets) == [(g.RELATIVE_BUCKETS, "m")]  # exactly log(sub(arange, arange))
    stored = ops_graph([table])
    assert position.position_uses(stored) == [(g.ABSOLUTE, "m")]  # indices not traced: a stored buffer
    shifted = ops_graph([("m:arange", "m:add", 0), ("ids", "m:add", 1), ("m:add", "m:embedding", 1)])
    assert position.position_uses(shifted) == [(g.ABSOLUTE, "m")]  # arange, though an input feeds it too
    roberta = ops_graph([("ids", "m:ne", 0), ("m:ne", "m:cumsum", 0), ("m:cumsum", "m:embedding", 1)])
    assert position.position_uses(roberta) == [(g.ABSOLUTE, "m")]  # ids counted from the padding
    tokens = ops_graph([("ids", "m:add", 0), ("m:add", "m:embedding", 1)])
    assert position.position_uses(tokens) == []  # computed from an input, but not positions
    assert position._index_ops(tokens, "m:add") == ({"add", ""}, True)


def test_a_position_kind_found_in_one_stack_is_that_stacks_only() -> None:
    graph = ops_graph(
        [("a.layers.0:arange", "a.layers.0:embedding", 1), ("ids", "b.layers.0:embedding", 1)],
        {"a.layers": "encoder", "b.layers": "decoder"},
    )
    assert position.annotate_position(graph) == {"a.layers": [g.ABSOLUTE], "b.layers": []}


def rotation(others: list[str]) -> nx.DiGraph:
    """``cat(neg(slice(q)), …)`` times ``others``; neg and cat each feed an ``add`` first."""
    edges = [("q", "m:slice", 0), ("m:slice", "m:neg", 0), ("m:neg", "m:add", 0), ("m:neg", "m:cat", 0)]
    edges += [("m:cat", "m:add_1", 0), ("m:cat", "m:mul", 0)]
    return ops_graph(edges + [(other, "m:mul", 1) for other in others])


def test_rotary_needs_the_rotated_half_multiplied_by_a_sine() -> None:
    assert position.position_uses(rotation(["m:sin"])) == [(g.ROTARY, "m")]
    assert position.position_uses(rotation(["ids"])) == []  # multiplied, but by nothing from sin
    assert position.position_uses(ops_graph([("q", "m:neg", 0), ("m:neg", "m:cat", 0)])) == []  # no slice


def test_a_gather_at_differences_computed_from_weights_is_no_position() -> None:
    """A mixture of experts' router gathers at top-k choices made from the hidden states, downstream of
    positions (``arange``) and subtractions: no relative position, unlike DeBERTa's index of positions alone."""
    edges = [("m:arange", "m:sub", 0), ("m:arange_1", "m:sub", 1), ("m:sub", "m:linear", 0), ("m:linear", "m:topk", 0)]
    routed = ops_graph([*edges, ("m:topk", "m:gather", 1)])
    assert position.position_uses(routed) == [(g.RELATIVE, "m")]  # without weights it would be one
    routed.nodes["m:linear"][g.PARAM_NAMES] = ["m.weight"]
    assert position.position_uses(routed) == []
    routed.nodes["m:linear"][g.PARAM_NAMES] = []
    routed.nodes["m:linear"][g.SHARED_PARAMS] = ["tied.weight"]
    assert position.position_uses(routed) == []


def interleaved(
    starts: tuple[int, int] = (0, 1), tables: tuple[str, str] = ("cos", "sin"), step: int = 2
) -> nx.DiGraph:
    """``x[..., a::step] · T1 − x[..., b::step] · T2``, each table broadcast (``unsqueeze``) and halved (``slice``)."""
    edges = [("x", "m:slice", 0), ("x", "m:slice_1", 0), ("m:slice", "m:mul", 0), ("m:slice_1", "m:mul_1", 0)]
    edges += [(f"r:{tables[0]}", "m:slice_2", 0), ("m:slice_2", "m:unsqueeze", 0), ("m:unsqueeze", "m:mul", 1)]
    edges += [(f"r:{tables[1]}_1", "m:to", 0), ("m:to", "m:mul_1", 1), ("m:mul", "m:sub", 0), ("m:mul_1", "m:sub", 1)]
    graph = ops_graph(edges)
    for node, start in zip(("m:slice", "m:slice_1"), starts):
        graph.nodes[node][g.LITERALS] = {"1": 3, "2": start, "3": 2**63 - 1, "4": step}
    return graph


def test_rotating_interleaved_pairs_is_rotary() -> None:
    """DeepSeek's interleaved rotation: the even and odd halves of one tensor, times cos and sin."""
    assert position.position_uses(interleaved()) == [(g.ROTARY, "m")]
    assert position.position_uses(interleaved(starts=(0, 0))) == []  # the same half twice
    assert position.position_uses(interleaved(tables=("sin", "cos"))) == []  # x_even · sin − x_odd · cos
    assert position.position_uses(interleaved(tables=("cos", "cos"))) == []
    assert position.position_uses(interleaved(step=1)) == []  # not pairs
    other = interleaved()
    other.add_edge("y", "m:slice_1", **{g.ARGS: [0]})
    other.remove_edge("x", "m:slice_1")
    assert position.position_uses(other) == []  # halves of two tensors
    plain = interleaved()
    plain.remove_edge("m:mul_1", "m:sub")
    plain.add_edge("x", "m:sub", **{g.ARGS: [1]})
    assert position.position_uses(plain) == []  # one operand no product
    untabled = interleaved()
    untabled.nodes["r:sin_1"][g.OP] = "exp"
    assert position.position_uses(untabled) == []  # a factor from no table
    far = interleaved()
    chain_ = ["m:to"] + [f"m:view_{i}" for i in range(8)]
    for a, b in zip(chain_[1:], chain_[:-1]):
        far.add_node(a, **{g.KIND: g.OPERATOR, g.OP: "view", g.MODULE: "m", g.ORDER: 0})
        far.add_edge(a, b, **{g.ARGS: [0]})
    far.remove_edge("r:sin_1", "m:to")
    far.add_edge("r:sin_1", chain_[-1], **{g.ARGS: [0]})
    assert position.position_uses(far) == []  # a table read too far back is not this rotation's


def test_a_module_beside_two_lists_goes_to_the_first_and_a_graph_without_stacks_has_none() -> None:
    twins = nx.DiGraph(**{g.G_STACKS: {"a.xs": "encoder", "a.ys": "decoder"}})
    assert walk.stack_of(twins, "a.norm") == "a.xs"  # equally deep holders: the file's order decides
    assert walk.stack_of(twins, "a.ys.0") == "a.ys"
    assert walk.stack_of(nx.DiGraph(), "a.norm") is None and walk.stack_key(nx.DiGraph(), "a") == ""


def test_a_layer_run_twice_is_shared_whatever_order_its_calls_come_in() -> None:
    # Layer 0's ops rewritten as the second call of layer 1: the later call is listed first.
    graph = bare(bert_tiny())
    for _, data in graph.nodes(data=True):
        module = str(data.get(g.MODULE, ""))
        prefix = "bert.encoder.layer.0"
        if module == prefix or module.startswith(prefix + "."):
            data[g.MODULE] = "bert.encoder.layer.1" + module[len(prefix) :]
            data[g.CALL] = 1
    assert sharing.module_calls(graph)["bert.encoder.layer.1.attention.self.query"] == 2
    del graph.graph[g.G_MODULES]  # no module table to write the count into
    assert sharing.annotate_sharing(graph) == {"bert.encoder.layer.1": 2}
    assert graph.graph[g.G_SHARED] == {"bert.encoder.layer.1": 2}


def test_only_modules_that_read_weights_are_counted() -> None:
    graph = bare(bert_tiny())
    owners = {entry["module"] for entry in graph.graph[g.G_PARAMETERS]}
    assert set(sharing.module_calls(graph)) == owners
    gelu = "bert.encoder.layer.0.intermediate.intermediate_act_fn:gelu"
    graph.nodes[gelu][g.SHARED_PARAMS] = ["bert.embeddings.word_embeddings.weight"]  # a tied weight only
    assert set(sharing.module_calls(graph)) == owners | {"bert.encoder.layer.0.intermediate.intermediate_act_fn"}
    assert sharing._stack_layer(nx.DiGraph(), "a.layers.0.b") == "a.layers.0.b"  # no stacks recorded


def test_the_summary_lists_stacks_with_attention_or_positions_and_only_those() -> None:
    graph = annotated("bert-tiny")
    layer = "bert.encoder.layer"
    graph.graph[g.G_STACKS] = {"empty.layers": "decoder", layer: "encoder", "pos.layers": "encoder"}
    graph.graph[g.G_POSITION] = {"empty.layers": [], layer: [g.ABSOLUTE], "pos.layers": [g.ROTARY]}
    graph.graph[g.G_SHARED] = {f"{layer}.0": 3}
    first, second = attention.attention_operators(graph)[:2]
    graph.nodes[first][g.PADDING_MASK] = "attention_mask, token_type_ids"  # two masks on one op
    del graph.nodes[second][g.KV_HEADS]  # an op whose key/value heads are unknown
    found = summary.architecture(graph)
    assert [stack["path"] for stack in found["stacks"]] == [layer, "pos.layers"]
    assert found["stacks"][0]["padding_masks"] == ["attention_mask", "token_type_ids"]
    assert found["stacks"][0]["q_heads"] == [2] and found["stacks"][0]["kv_heads"] == [2]
    assert found["stacks"][1] == {
        "path": "pos.layers",
        "kind": "encoder",
        "attention": {},
        "padding_masks": [],
        "q_heads": [],
        "kv_heads": [],
        "position": [g.ROTARY],
    }
    assert found["shared"] == {f"{layer}.0": 3}
    del graph.graph[g.G_POSITION]  # attention found, positions never looked for
    graph.graph[g.G_ATTENTION]["outside"] = {g.CAUSAL: 1}  # a path that is no stack
    stacks = summary.architecture(graph)["stacks"]
    assert [(stack["path"], stack["position"]) for stack in stacks] == [(layer, []), ("outside", [])]


def test_a_stack_line_joins_several_masks_head_counts_and_positions() -> None:
    stack = {
        "path": "enc.layers",
        "kind": "encoder",
        "attention": {g.BIDIRECTIONAL: 2, g.SLIDING_WINDOW: 4},
        "padding_masks": ["attention_mask", "token_type_ids"],
        "q_heads": [4, 8],
        "kv_heads": [2, 4],
        "position": [g.ABSOLUTE, g.ROTARY],
    }
    assert summary.stack_line(stack) == (
        f"enc.layers (encoder): 2 × {g.BIDIRECTIONAL}, 4 × {g.SLIDING_WINDOW} · padding mask from attention_mask, "
        "token_type_ids · 4/8 heads, 2/4 key/value heads (grouped-query) · positions: absolute, rotary"
    )
