"""Growing a stack from a few traced layers, in-process: nothing is traced.

The expected graph of each case is built at full depth the way a full trace would record it
(``toy_stack`` with every layer, or the committed bert-tiny with 3 layers), and the grown graph
must equal it byte for byte once both are canonical. The traced graph is the same construction
with fewer layers (bert-tiny: its third layer taken out, the classifier reading the second).
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import pytest

from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.tracing.grow import (
    TRACED_LAYERS,
    GrowError,
    StackPlan,
    check_parameters,
    grow_stacks,
    layer_pattern,
    traced_layers,
)
from tests.graph_fixtures import bert_tiny, op

SHAPE = ["batch", 4]


def text(graph: nx.DiGraph) -> str:
    return "".join(graph_io.generate_json(graph))


def toy_stack(*stacks: tuple[str, str], shared: bool = False, bias: bool = False, last: int = 1) -> nx.DiGraph:
    """``x → stack → stack → … → head:linear → y``, each stack given as ``(container, kinds)``.

    Layer ``i`` of a stack (module ``container.i``, or ``container.0`` called ``i`` times when
    ``shared``) runs the op named ``kinds[i]`` in its ``proj`` child on what the layer before gave,
    with a weight of 16, then adds that input back (``add`` reads the weight too). With ``bias``,
    layer 0 first computes a bias from ``x`` that every later layer's ``proj`` reads, and so does
    the head. The head reads the outputs of the ``last`` layers of the last stack. Edges carry the
    argument position they fill.
    """
    graph = g.new_graph(**{g.G_NAME: "toy", g.G_HEAD: "base", g.G_BACKBONE: "", g.G_MODEL_CLASS: "Toy"})
    graph.add_node("x", **g.io_attributes(g.INPUT, SHAPE, "float32", 0))

    def add(name: str, data: dict[str, Any], reads: list[str]) -> None:
        data[g.ORDER] = len(graph)
        data.setdefault(g.PARAM_NAMES, [])  # a trace lists every op's parameters, none too
        graph.add_node(name, **data)
        for position, source in enumerate(reads):
            graph.add_edge(source, name, **{g.SHAPE: SHAPE, g.DTYPE: "float32", g.ARGS: [position]})

    previous = "x"
    outputs = []
    for container, kinds in stacks:
        for index, kind in enumerate(kinds):
            module = f"{container}.0" if shared else f"{container}.{index}"
            call = {g.CALL: index} if shared and index else {}
            weight = f"{module}.proj.weight"
            if shared and index:
                reading: dict[str, Any] = {g.SHARED_PARAMS: [weight]}
            else:
                reading = {g.PARAMS: 16, g.PARAM_NAMES: [weight]}
            if bias and index == 0:
                add(f"{container}-bias", op(f"{module}.bias", "embedding", 0, **call), ["x"])
            reads = [previous, f"{container}-bias"] if bias and index else [previous]
            add(f"{container}-proj{index}", op(f"{module}.proj", kind, 0, **call, **reading), reads)
            add(
                f"{container}-add{index}",
                op(module, "add", 0, **call, shared_params=[weight]),
                [previous, f"{container}-proj{index}"],
            )
            previous = f"{container}-add{index}"
            outputs.append(previous)
    head_reads = outputs[-last:] + ([f"{stacks[-1][0]}-bias"] if bias else [])
    add("head", op("head", "linear", 0, params=8, param_names=["head.weight"]), head_reads)
    graph.add_node("y", **g.io_attributes(g.OUTPUT, SHAPE, "float32", len(graph)))
    graph.add_edge("head", "y", **{g.SHAPE: SHAPE, g.DTYPE: "float32"})
    return graph


def numel(graph: nx.DiGraph) -> dict[str, int]:
    """Every parameter name an op reads as its own, with the size the op gives it."""
    return {name: data[g.PARAMS] for _, data in graph.nodes(data=True) for name in data.get(g.PARAM_NAMES, [])}


# --- how many layers to trace, and the pattern of kinds ------------------------------------------


def test_a_uniform_stack_traces_its_first_layer_and_one_fed_by_another() -> None:
    assert TRACED_LAYERS == 2
    assert {traced_layers(layers) for layers in range(2, 50)} == {TRACED_LAYERS}


@pytest.mark.parametrize(
    ("layers", "special", "period", "traced"),
    [
        (1, 0, 1, 1),  # fewer than the least: all of them
        (2, 0, 1, 2),
        (3, 0, 1, 2),  # the first layer and one fed by another
        (12, 0, 1, 2),
        (3, 1, 1, 3),
        (4, 1, 1, 3),
        (7, 0, 3, 4),  # 0 1 2 | 3: layer 6 is the kind of layer 3
        (8, 0, 3, 5),  # layer 7 is the kind of layer 4
        (9, 0, 3, 6),
        (5, 0, 4, 5),
        (6, 0, 4, 6),
        (10, 2, 3, 7),  # 2 special, then kinds of 2 3 4 | 5 6: layer 9 is the kind of layer 6
        (22, 1, 3, 7),
    ],
)
def test_traced_layers_are_the_special_ones_a_period_and_up_to_the_last_kind(
    layers: int, special: int, period: int, traced: int
) -> None:
    assert traced_layers(layers, special, period) == traced


@pytest.mark.parametrize(
    ("kinds", "given", "pattern"),
    [
        ("aaaa", (0, 1), (0, 1)),
        ("aaaa", (1, 1), (1, 1)),  # a record's pair the kinds keep is taken as it is
        ("abababab", (0, 1), (0, 2)),
        ("xababab", (0, 1), (1, 2)),  # one leading layer, then a period of 2: 5 traced of 7
        ("xabcabcabc", (0, 1), (1, 3)),
        ("aabaab", (0, 1), None),  # no pair traces fewer than the 6 layers
        ("aab", (0, 1), None),
        ("abcd", (0, 1), None),
        ("ab" * 6, (1, 1), (1, 2)),  # the search starts at the record's leading layers
        ("aaab" * 3, (0, 1), (0, 4)),
        ("ababa", (0, 1), (0, 2)),  # a period of half the layers, rounded down
        ("abaaabaaa", (0, 1), (0, 4)),  # 5 traced; constant from layer 6 on would trace 8
        ("aababaababa", (0, 1), (0, 5)),  # 6 traced; (6, 2), found first, traces 9
        ("aaababbbabbb", (0, 1), (3, 4)),  # 8 traced; constant from layer 9 on would trace 11
    ],
)
def test_layer_pattern_finds_the_pair_that_traces_fewest(
    kinds: str, given: tuple[int, int], pattern: tuple[int, int] | None
) -> None:
    assert layer_pattern(kinds, *given) == pattern
    assert layer_pattern(list(kinds), *given) == pattern


def test_without_a_record_the_search_starts_from_no_special_layer_and_a_period_of_one() -> None:
    assert layer_pattern("aaaa") == (0, 1)
    assert layer_pattern("abab" * 2) == (0, 2)


def test_the_first_pair_that_holds_with_fewest_traced_layers_is_taken() -> None:
    """``xyxy`` then 8 × ``c``: (4, 1) holds and traces 6 of 12 layers; (0, 2) and (1, 2) trace 4
    but do not hold, and every other pair traces 6 or more."""
    kinds = "xyxy" + "c" * 8
    assert layer_pattern(kinds) == (4, 1)
    assert traced_layers(len(kinds), 4, 1) == 6
    # two leading kinds, then a period of 3 that holds from the start of the repeats on
    kinds = "pq" + "abc" * 4
    assert layer_pattern(kinds) == (2, 3)
    assert traced_layers(len(kinds), 2, 3) == 8  # p q | a b c a | b c: the last is a ``c``


# --- growing ---------------------------------------------------------------------------------------


def test_a_uniform_stack_grows_to_twelve_layers_as_a_full_trace_records_them() -> None:
    traced, full = toy_stack(("enc.layer", "aa")), toy_stack(("enc.layer", "a" * 12))
    grown = grow_stacks(traced, [StackPlan("enc.layer", layers=12, traced=2)])
    assert text(grown) == text(g.canonicalize(full))
    assert grown.has_edge("enc.layer.11:add", "head:linear")
    assert grown.nodes["enc.layer.10.proj:a"][g.PARAM_NAMES] == ["enc.layer.10.proj.weight"]
    assert grown.nodes["enc.layer.10:add"][g.SHARED_PARAMS] == ["enc.layer.10.proj.weight"]
    assert grown.edges["enc.layer.9:add", "enc.layer.10:add"][g.ARGS] == [0]
    assert grown.edges["enc.layer.10.proj:a", "enc.layer.10:add"][g.ARGS] == [1]
    assert [grown.nodes[node][g.ORDER] for node in grown] == list(range(len(full)))
    check_parameters(grown, numel(full))


def test_layers_after_a_special_one_read_its_result_and_the_layer_before() -> None:
    plan = StackPlan("enc.layer", layers=6, traced=traced_layers(6, special=1), special=1)
    assert plan.traced == 3
    traced, full = toy_stack(("enc.layer", "saa"), bias=True), toy_stack(("enc.layer", "saaaaa"), bias=True)
    grown = grow_stacks(traced, [plan])
    assert text(grown) == text(g.canonicalize(full))
    assert grown.has_edge("enc.layer.0.bias:embedding", "enc.layer.5.proj:a")
    assert grown.has_edge("enc.layer.0.bias:embedding", "head:linear")
    assert grown.has_edge("enc.layer.4:add", "enc.layer.5.proj:a")


def test_a_stack_with_a_period_copies_the_last_traced_layer_of_each_kind() -> None:
    plan = StackPlan("enc.layer", layers=8, traced=traced_layers(8, 1, 2), special=1, period=2)
    assert plan.traced == 4  # s a b a: layer 7 is an ``a`` like layer 3
    traced, full = toy_stack(("enc.layer", "saba"), bias=True), toy_stack(("enc.layer", "sabababa"), bias=True)
    grown = grow_stacks(traced, [plan])
    assert text(grown) == text(g.canonicalize(full))
    assert grown.nodes["enc.layer.6.proj:b"][g.MODULE] == "enc.layer.6.proj"


def test_a_period_of_three_after_a_special_layer() -> None:
    """Layer 5 is a ``b`` (4 layers after the special one, 1 modulo 3): it copies layer 2, not 3."""
    plan = StackPlan("enc.layer", layers=8, traced=traced_layers(8, 1, 3), special=1, period=3)
    assert plan.traced == 5
    traced, full = toy_stack(("enc.layer", "sabca"), bias=True), toy_stack(("enc.layer", "sabcabca"), bias=True)
    grown = grow_stacks(traced, [plan])
    assert text(grown) == text(g.canonicalize(full))
    assert all(f"enc.layer.{index}.proj:{kind}" in grown for index, kind in enumerate("sabcabca"))


def test_what_reads_the_last_layers_reads_the_last_layers_of_the_full_stack() -> None:
    """A head that reads the outputs of the last two layers: of layers 0 and 1 when two are traced,
    of layers 4 and 5 when the stack has six."""
    traced, full = toy_stack(("enc.layer", "aa"), last=2), toy_stack(("enc.layer", "a" * 6), last=2)
    grown = grow_stacks(traced, [StackPlan("enc.layer", layers=6, traced=2)])
    assert text(grown) == text(g.canonicalize(full))
    assert sorted(grown.predecessors("head:linear")) == ["enc.layer.4:add", "enc.layer.5:add"]


def test_a_shared_layer_grows_by_calls() -> None:
    """ALBERT: one layer module called once per layer; copies keep its path and count calls."""
    traced, full = toy_stack(("enc.layer", "aa"), shared=True), toy_stack(("enc.layer", "aaaa"), shared=True)
    grown = grow_stacks(traced, [StackPlan("enc.layer", layers=4, traced=2, shared=True)])
    assert text(grown) == text(g.canonicalize(full))
    assert [grown.nodes[f"enc.layer.0:add{suffix}"].get(g.CALL) for suffix in ("", "_1", "_2", "_3")] == [None, 1, 2, 3]
    assert grown.nodes["enc.layer.0.proj:a_3"][g.SHARED_PARAMS] == ["enc.layer.0.proj.weight"]
    check_parameters(grown, {"enc.layer.0.proj.weight": 16, "head.weight": 8})


def test_two_stacks_grow_one_after_the_other_and_a_full_stack_is_left_alone() -> None:
    traced = toy_stack(("enc.layer", "aa"), ("dec.layer", "bb"), ("top.layer", "cc"))
    full = toy_stack(("enc.layer", "aaa"), ("dec.layer", "bbbbb"), ("top.layer", "cc"))
    plans = [
        StackPlan("enc.layer", layers=3, traced=2),
        StackPlan("dec.layer", layers=5, traced=2),
        StackPlan("top.layer", layers=2, traced=2),
    ]
    grown = grow_stacks(traced, plans)
    assert text(grown) == text(g.canonicalize(full))
    assert grown.has_edge("enc.layer.2:add", "dec.layer.0.proj:b")


def test_nothing_to_grow_gives_the_canonical_graph() -> None:
    traced = toy_stack(("enc.layer", "aa"))
    assert text(grow_stacks(traced, [])) == text(g.canonicalize(traced))
    assert text(grow_stacks(traced, [StackPlan("other.layer", layers=1, traced=1)])) == text(g.canonicalize(traced))


def _bert_tiny_of_two() -> nx.DiGraph:
    """bert-tiny without its third layer: what read layer 2 reads the same op of layer 1."""
    graph = bert_tiny()
    third = [node for node in graph if graph.nodes[node][g.MODULE].startswith("bert.encoder.layer.2")]
    for node in third:
        for target in list(graph.successors(node)):
            if target not in third:
                same = node.replace("bert.encoder.layer.2", "bert.encoder.layer.1", 1)
                graph.add_edge(same, target, **graph.edges[node, target])
    graph.remove_nodes_from(third)
    return graph


def test_bert_tiny_grown_from_two_layers_is_the_committed_three_layer_graph() -> None:
    full = bert_tiny()
    traced = _bert_tiny_of_two()
    assert len(traced) == len(full) - 24  # BERT's layer runs 24 ops
    grown = grow_stacks(traced, [StackPlan("bert.encoder.layer", layers=3, traced=2)])
    assert text(grown) == text(full)
    numel = {row["name"]: row["numel"] for row in full.graph[g.G_PARAMETERS]}
    check_parameters(grown, numel)
    assert grown.has_edge("bert.encoder.layer.2.output.LayerNorm:layer_norm", "bert.pooler:select")


def test_bert_tiny_grows_to_five_layers_renamed_and_rewired() -> None:
    grown = grow_stacks(bert_tiny(), [StackPlan("bert.encoder.layer", layers=5, traced=3)])
    assert len(grown) == len(bert_tiny()) + 2 * 24
    query = grown.nodes["bert.encoder.layer.4.attention.self.query:linear"]
    assert query[g.PARAM_NAMES] == [
        "bert.encoder.layer.4.attention.self.query.weight",
        "bert.encoder.layer.4.attention.self.query.bias",
    ]
    assert query[g.PARAMS] == 128 * 128 + 128
    assert grown.has_edge(
        "bert.encoder.layer.3.output.LayerNorm:layer_norm", "bert.encoder.layer.4.attention.self.query:linear"
    )
    assert grown.has_edge("bert.encoder.layer.4.output.LayerNorm:layer_norm", "bert.pooler:select")
    assert not grown.has_edge("bert.encoder.layer.2.output.LayerNorm:layer_norm", "bert.pooler:select")
    sdpa = "bert.encoder.layer.{}.attention.self:scaled_dot_product_attention"
    assert {source.replace("layer.4.", "layer.2.") for source in grown.predecessors(sdpa.format(4))} == set(
        grown.predecessors(sdpa.format(2))
    )


# --- what cannot be grown ------------------------------------------------------------------------


def _reorder(graph: nx.DiGraph, nodes: list[str]) -> nx.DiGraph:
    for number, node in enumerate(nodes):
        graph.nodes[node][g.ORDER] = number
    return graph


def test_a_shared_stack_with_a_second_layer_module_is_refused() -> None:
    traced = toy_stack(("enc.layer", "aa"))
    with pytest.raises(GrowError, match=r"^enc\.layer has more than one shared layer$"):
        grow_stacks(traced, [StackPlan("enc.layer", layers=4, traced=2, shared=True)])


def test_too_few_traced_layers_are_refused() -> None:
    """With one special layer, layer 2 needs a traced layer after layer 1 to copy."""
    traced = toy_stack(("enc.layer", "sa"), bias=True)
    with pytest.raises(GrowError, match=r"^too few traced layers in enc\.layer to grow layer 2$"):
        grow_stacks(traced, [StackPlan("enc.layer", layers=3, traced=2, special=1)])
    # with a period of 2 and none special, layer 3 copies layer 1, but layer 2 has no template
    traced = toy_stack(("enc.layer", "ab"))
    with pytest.raises(GrowError, match=r"^too few traced layers in enc\.layer to grow layer 2$"):
        grow_stacks(traced, [StackPlan("enc.layer", layers=4, traced=2, period=2)])


def test_a_stack_without_ops_is_refused() -> None:
    with pytest.raises(GrowError, match=r"^no ops in dec\.layer$"):
        grow_stacks(toy_stack(("enc.layer", "aa")), [StackPlan("dec.layer", layers=4, traced=2)])


def test_layers_that_are_not_contiguous_in_execution_order_are_refused() -> None:
    traced = toy_stack(("enc.layer", "aa"))
    order = g.ops_in_order(traced)
    # the head's op between the two layers
    moved = [node for node in order if node != "head"]
    moved.insert(moved.index("enc.layer-proj1"), "head")
    plan = StackPlan("enc.layer", layers=4, traced=2)
    with pytest.raises(GrowError, match=r"^the layers of enc\.layer are not contiguous in execution order$"):
        grow_stacks(_reorder(toy_stack(("enc.layer", "aa")), moved), [plan])
    # layer 0's add after layer 1's proj
    moved = [node for node in order if node != "enc.layer-add0"]
    moved.insert(moved.index("enc.layer-proj1") + 1, "enc.layer-add0")
    with pytest.raises(GrowError, match="not contiguous"):
        grow_stacks(_reorder(toy_stack(("enc.layer", "aa")), moved), [plan])


def test_a_stack_traced_with_other_layers_is_refused() -> None:
    plan = StackPlan("enc.layer", layers=4, traced=2)
    traced = toy_stack(("enc.layer", "aa"))
    for _, data in traced.nodes(data=True):
        if data[g.MODULE].startswith("enc.layer."):
            index = int(data[g.MODULE].split(".")[2])
            data[g.MODULE] = data[g.MODULE].replace(f"enc.layer.{index}", f"enc.layer.{index + 1}", 1)
    with pytest.raises(GrowError, match=r"^enc\.layer was traced with layers \[1, 2\], not 0-1$"):
        grow_stacks(traced, [plan])
    with pytest.raises(GrowError, match=r"^enc\.layer was traced with layers \[0, 1\], not 0-2$"):
        grow_stacks(toy_stack(("enc.layer", "aa")), [StackPlan("enc.layer", layers=4, traced=3)])


def test_a_layer_reading_what_runs_after_the_stack_is_refused() -> None:
    traced = toy_stack(("enc.layer", "aa"))
    traced.add_node("late", **op("other", "ones", len(traced), param_names=[]))
    traced.add_edge("late", "enc.layer-proj1")
    with pytest.raises(GrowError, match=r"^late is read by enc\.layer but runs after it$"):
        grow_stacks(traced, [StackPlan("enc.layer", layers=3, traced=2)])


def test_layers_of_one_kind_that_differ_are_refused() -> None:
    """Layer 1 reads the third op of layer 0, which layer 1 itself (the one layer 2 would read
    from) does not have."""
    traced = toy_stack(("enc.layer", "aa"))
    order = g.ops_in_order(traced)
    traced.add_node("extra", **op("enc.layer.0", "mul", 0, param_names=[]))
    traced.add_edge("enc.layer-add0", "extra")
    traced.add_edge("extra", "enc.layer-add1")
    order.insert(order.index("enc.layer-add0") + 1, "extra")
    _reorder(traced, order)
    with pytest.raises(GrowError, match=r"^layers of one kind in enc\.layer differ$"):
        grow_stacks(traced, [StackPlan("enc.layer", layers=3, traced=2)])


def test_parameters_are_checked_by_name_size_and_count() -> None:
    graph = toy_stack(("enc.layer", "aaa"))
    sizes = numel(graph)
    assert sizes == {
        "enc.layer.0.proj.weight": 16,
        "enc.layer.1.proj.weight": 16,
        "enc.layer.2.proj.weight": 16,
        "head.weight": 8,
    }
    check_parameters(graph, sizes)
    with pytest.raises(GrowError, match=r"^the grown graph does not read every parameter exactly once$"):
        check_parameters(graph, {**sizes, "enc.layer.3.proj.weight": 16})
    graph.nodes["enc.layer-proj1"][g.PARAM_NAMES] = ["enc.layer.1.proj.weight"]
    graph.nodes["enc.layer-proj2"][g.PARAM_NAMES] = ["enc.layer.1.proj.weight"]
    with pytest.raises(GrowError, match="exactly once"):
        check_parameters(graph, sizes)  # one read twice, one not at all


def test_unknown_parameters_are_named_three_at_most() -> None:
    graph = toy_stack(("enc.layer", "a"))
    sizes = numel(graph)
    graph.nodes["enc.layer-add0"][g.SHARED_PARAMS] = ["s.a", "s.b", "s.c", "s.d"]
    message = r"^enc\.layer-add0 reads parameters the model does not have: \['s\.a', 's\.b', 's\.c'\]$"
    with pytest.raises(GrowError, match=message):
        check_parameters(graph, sizes)
    graph = toy_stack(("enc.layer", "a"))
    graph.nodes["head"][g.PARAM_NAMES] = ["head.weight", "head.bias"]
    with pytest.raises(GrowError, match=r"^head reads parameters the model does not have: \['head\.bias'\]$"):
        check_parameters(graph, sizes)


def test_a_node_whose_count_differs_from_its_names_is_refused() -> None:
    graph = toy_stack(("enc.layer", "a"))
    sizes = numel(graph)
    graph.nodes["head"][g.PARAMS] = 9
    with pytest.raises(GrowError, match=r"^head counts 9 parameters, its names say otherwise$"):
        check_parameters(graph, sizes)
    graph.nodes["head"][g.PARAMS] = 8
    del graph.nodes["enc.layer-proj0"][g.PARAMS]  # a node without a count reads none
    with pytest.raises(GrowError, match=r"^enc\.layer-proj0 counts None parameters"):
        check_parameters(graph, sizes)
    graph.nodes["enc.layer-proj0"][g.PARAM_NAMES] = []
    with pytest.raises(GrowError, match="exactly once"):
        check_parameters(graph, sizes)
