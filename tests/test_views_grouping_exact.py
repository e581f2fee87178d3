"""How ops are grouped into the nodes of a view, checked exactly on small hand-built graphs.

Every graph here is built by hand so that one grouping rule decides the outcome: own-op runs a
child's call separates, merges that would close a cycle through a third group, ops whose names do
not sort in execution order, a module called three times, a module whose children run nothing.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import networkx as nx
import pytest

from bertgraph.graph import schema as g
from bertgraph.graph import views
from tests.graph_fixtures import op

EDGE = {g.SHAPE: ["batch", 4], g.DTYPE: "float32"}


@pytest.fixture(autouse=True)
def _quick() -> Iterator[None]:
    """Each rule is checked in well under a second; a walk that never ends (or visits every path) fails
    instead of hanging."""

    def stop(signum: int, frame: Any) -> None:
        raise TimeoutError("a grouping rule took more than 30 s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, 30)  # generous: the machine may be busy
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def build(
    ops: list[tuple[str, str, str]],
    edges: list[tuple[str, str]],
    types: dict[str, str] | None = None,
    **attrs: dict[str, Any],
) -> nx.DiGraph:
    """``x → ops → y``: each op ``(id, module, op name)`` runs in list order (``order`` 1, 2, …).

    ``types`` is the module table (module path → type), left out when None; ``attrs`` adds
    attributes to the op of that id. ``x`` and ``y`` take part only through ``edges``.
    """
    graph = g.new_graph(**{g.G_BACKBONE: "", g.G_MODEL_CLASS: "Toy", g.G_NAME: "toy", g.G_HEAD: "base"})
    if types is not None:
        graph.graph[g.G_MODULES] = {path: {"type": kind} for path, kind in types.items()}
    graph.add_node("x", **g.io_attributes(g.INPUT, ["batch", 4], "float32", 0))
    for order, (node, module, name) in enumerate(ops, start=1):
        kind = (types or {}).get(module, "M")
        graph.add_node(node, **op(module, name, order, module_type=kind, **attrs.get(node, {})))
    graph.add_node("y", **g.io_attributes(g.OUTPUT, ["batch", 4], "float32", len(ops) + 1))
    graph.add_edges_from(edges, **EDGE)
    return graph


def in_a_row(ops: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """The edges of ``x → each op in turn → y``."""
    return list(pairwise(["x", *(node for node, _, _ in ops), "y"]))


def ops_of(shown: nx.DiGraph) -> dict[str, list[str]]:
    """View node → the op names it stands for (op nodes kept as they are: their own op)."""
    return {
        node: data[g.OPS] if data[g.KIND] == g.MODULE_NODE else [data.get(g.OP, data[g.KIND])]
        for node, data in shown.nodes(data=True)
    }


def groups(
    ops: list[str], edges: list[tuple[str, str]], keys: dict[str, str], mergeable: set[str]
) -> list[tuple[str, list[str]]]:
    """``_acyclic_groups`` of ops run in list order, wired by ``edges``."""
    graph = nx.DiGraph()
    for order, node in enumerate(ops, start=1):
        graph.add_node(node, **op("m", "add", order))
    graph.add_edges_from(edges)
    return views._acyclic_groups(graph, ops, keys, mergeable)


# --- runs and merges ---------------------------------------------------------------------------


def test_a_merge_that_would_close_a_cycle_through_a_third_group_is_refused() -> None:
    """GPT-2's residual adds: the second reads what the first fed through the feed-forward block."""
    found = groups(["a", "ffn", "b"], [("a", "ffn"), ("ffn", "b"), ("a", "b")], {"a": "A", "ffn": "F", "b": "A"}, {"A"})
    assert found == [("A", ["a"]), ("F", ["ffn"]), ("A", ["b"])]


def test_runs_of_a_mergeable_key_join_when_no_third_group_lies_between() -> None:
    # b reads a directly and the op between them is not on that path: one group.
    found = groups(["a", "c", "b"], [("a", "b"), ("c", "b")], {"a": "A", "c": "C", "b": "A"}, {"A"})
    assert found == [("A", ["a", "b"]), ("C", ["c"])]
    # A run that reads nothing inside joins too.
    assert groups(["a", "c", "b"], [], {"a": "A", "c": "C", "b": "A"}, {"A"}) == [("A", ["a", "b"]), ("C", ["c"])]


def test_runs_of_a_key_that_is_not_mergeable_stay_apart() -> None:
    found = groups(["a", "c", "b"], [("a", "b")], {"a": "A", "c": "C", "b": "A"}, set())
    assert found == [("A", ["a"]), ("C", ["c"]), ("A", ["b"])]


def test_a_merged_group_keeps_the_paths_into_and_out_of_the_run_it_took_in() -> None:
    """B's runs join; the path a1 → s → B → t → a2 then leaves and re-enters A's group, so a2 stays apart.

    Both what read the joined run (s) and what it fed (t) must now be wired to the group.
    """
    ops = ["a1", "b1", "s", "b2", "t", "a2"]
    keys = {"a1": "A", "b1": "B", "s": "S", "b2": "B", "t": "T", "a2": "A"}
    edges = [("a1", "s"), ("s", "b2"), ("b2", "t"), ("t", "a2"), ("a1", "a2")]
    found = groups(ops, edges, keys, {"A", "B"})
    assert found == [("A", ["a1"]), ("B", ["b1", "b2"]), ("S", ["s"]), ("T", ["t"]), ("A", ["a2"])]


def test_a_run_fed_by_a_joined_run_carries_that_edge_when_it_joins_a_group_itself() -> None:
    """a2 joins a1, so a2 → b2 becomes A → b2; b2 then joins b1, so A → B; B → x → a3 keeps a3 apart."""
    ops = ["a1", "b1", "a2", "b2", "x", "a3"]
    keys = {"a1": "A", "b1": "B", "a2": "A", "b2": "B", "x": "X", "a3": "A"}
    edges = [("a1", "a2"), ("a1", "a3"), ("a2", "b2"), ("b2", "x"), ("x", "a3")]
    found = groups(ops, edges, keys, {"A", "B"})
    assert found == [("A", ["a1", "a2"]), ("B", ["b1", "b2"]), ("X", ["x"]), ("A", ["a3"])]


def test_a_path_from_the_later_run_back_into_the_earlier_one_also_refuses_the_merge() -> None:
    """A graph is only checked to be acyclic, not to run its edges forward in ``order``: b → c → a
    runs against the order, and joining a with b would close a cycle."""
    found = groups(["a", "c", "b"], [("b", "c"), ("c", "a")], {"a": "A", "c": "C", "b": "A"}, {"A"})
    assert found == [("A", ["a"]), ("C", ["c"]), ("A", ["b"])]


def test_the_cycle_check_visits_each_group_once() -> None:
    """A ladder of 30 diamonds between two runs has 2**30 paths; the walk must not follow each."""
    ladder = [f"n{i}" for i in range(31)]
    ops = ["a", *(node for i in range(30) for node in (ladder[i], f"l{i}", f"r{i}")), ladder[30], "b"]
    edges = [("a", "n0")]
    for i in range(30):
        edges += [(ladder[i], f"l{i}"), (ladder[i], f"r{i}"), (f"l{i}", ladder[i + 1]), (f"r{i}", ladder[i + 1])]
    keys = {node: node for node in ops} | {"a": "A", "b": "A"}
    found = groups(ops, edges, keys, {"A"})
    assert found[0] == ("A", ["a", "b"])
    assert [members for _, members in found[1:]] == [[node] for node in ops[1:-1]]


# --- own ops in a view ---------------------------------------------------------------------------

BLOCK = {"": "Toy", "blk": "Block", "blk.ln_1": "LayerNorm", "blk.attn": "Attention", "blk.ln_2": "LayerNorm"}
BLOCK |= {"blk.mlp": "MLP"}


def gpt2_block() -> nx.DiGraph:
    """A pre-norm block: ln_1 → attn → add (residual) → ln_2 → mlp → add (residual)."""
    ops = [
        ("blk.ln_1:layer_norm", "blk.ln_1", "layer_norm"),
        ("blk.attn:linear", "blk.attn", "linear"),
        ("blk:add", "blk", "add"),
        ("blk.ln_2:layer_norm", "blk.ln_2", "layer_norm"),
        ("blk.mlp:linear", "blk.mlp", "linear"),
        ("blk:add_1", "blk", "add"),
    ]
    edges = [
        ("x", "blk.ln_1:layer_norm"),
        ("blk.ln_1:layer_norm", "blk.attn:linear"),
        ("blk.attn:linear", "blk:add"),
        ("x", "blk:add"),
        ("blk:add", "blk.ln_2:layer_norm"),
        ("blk.ln_2:layer_norm", "blk.mlp:linear"),
        ("blk.mlp:linear", "blk:add_1"),
        ("blk:add", "blk:add_1"),
        ("blk:add_1", "y"),
    ]
    return build(ops, edges, BLOCK)


def test_gpt2s_two_residual_adds_stay_two_own_op_nodes() -> None:
    shown = views.collapse(gpt2_block(), 2)
    assert list(shown) == ["x", "blk.ln_1", "blk.attn", "blk:ops", "blk.ln_2", "blk.mlp", "blk:ops.1", "y"]
    assert sorted(shown.edges) == [
        ("blk.attn", "blk:ops"),
        ("blk.ln_1", "blk.attn"),
        ("blk.ln_2", "blk.mlp"),
        ("blk.mlp", "blk:ops.1"),
        ("blk:ops", "blk.ln_2"),
        ("blk:ops", "blk:ops.1"),
        ("blk:ops.1", "y"),
        ("x", "blk.ln_1"),
        ("x", "blk:ops"),
    ]
    assert nx.is_directed_acyclic_graph(shown)
    for node, order in (("blk:ops", 3), ("blk:ops.1", 6)):
        assert shown.nodes[node][g.MODULE] == "blk" and shown.nodes[node][g.MODULE_TYPE] == "Block"
        assert shown.nodes[node][g.OWN_OPS] is True and shown.nodes[node][g.ORDER] == order


def test_own_ops_a_childs_call_separates_join_when_the_child_is_not_between_them() -> None:
    """The embedding sum: a slice, the token lookup, then an add reading both: the slice and add join."""
    ops = [("emb:slice", "emb", "slice"), ("emb.tok:embedding", "emb.tok", "embedding"), ("emb:add", "emb", "add")]
    edges = [("x", "emb:slice"), ("x", "emb.tok:embedding"), ("emb:slice", "emb:add")]
    edges += [("emb.tok:embedding", "emb:add"), ("emb:add", "y")]
    shown = views.collapse(build(ops, edges, {"": "Toy", "emb": "Emb", "emb.tok": "Embedding"}), 2)
    assert ops_of(shown) == {"x": ["input"], "emb:ops": ["slice", "add"], "emb.tok": ["embedding"], "y": ["output"]}
    assert sorted(shown.edges) == [("emb.tok", "emb:ops"), ("emb:ops", "y"), ("x", "emb.tok"), ("x", "emb:ops")]
    assert shown.nodes["emb:ops"][g.ORDER] == 1


def split_own_ops() -> nx.DiGraph:
    """Own ops of m in three runs: the first feeds the other two and m.z's call separates it from
    the second; the second and third join (only m.w lies between, on no path from one to the other),
    but stay two connected pieces. Ids sort against execution order (``m:sum`` runs before ``m:add``)."""
    ops = [
        ("m:slice", "m", "slice"),
        ("m.z:linear", "m.z", "linear"),
        ("m:sum", "m", "sum"),
        ("m.w:linear", "m.w", "linear"),
        ("m:add", "m", "add"),
        ("m:mul", "m", "mul"),
    ]
    edges = [
        ("x", "m:slice"),
        ("m:slice", "m.z:linear"),
        ("m.z:linear", "m:sum"),
        ("m:slice", "m:sum"),
        ("m:slice", "m.w:linear"),
        ("m.w:linear", "m:mul"),
        ("m:slice", "m:add"),
        ("m:add", "m:mul"),
        ("m:sum", "y"),
        ("m:mul", "y"),
    ]
    return build(ops, edges, {"": "Toy", "m": "M", "m.z": "Linear", "m.w": "Linear"})


def test_a_joined_own_op_group_becomes_one_node_per_connected_piece_in_execution_order() -> None:
    shown = views.collapse(split_own_ops(), 2)
    assert ops_of(shown) == {
        "x": ["input"],
        "m:ops": ["slice"],
        "m.z": ["linear"],
        "m:ops.1": ["sum"],  # runs first, though its id sorts after m:add
        "m.w": ["linear"],
        "m:ops.2": ["add", "mul"],
        "y": ["output"],
    }
    assert sorted(shown.edges) == [
        ("m.w", "m:ops.2"),
        ("m.z", "m:ops.1"),
        ("m:ops", "m.w"),
        ("m:ops", "m.z"),
        ("m:ops", "m:ops.1"),
        ("m:ops", "m:ops.2"),
        ("m:ops.1", "y"),
        ("m:ops.2", "y"),
        ("x", "m:ops"),
    ]


def test_the_anatomy_keeps_lone_own_ops_and_draws_the_rest_of_their_group() -> None:
    """The joined group holds a lone op (kept as it is) and then a piece of two: both are drawn."""
    graph = split_own_ops()
    shown = views.anatomy(graph)
    assert list(shown) == ["x", "m:slice", "m.z", "m:sum", "m.w", "m:ops", "y"]
    assert shown.nodes["m:slice"] == graph.nodes["m:slice"] and shown.nodes["m:sum"] == graph.nodes["m:sum"]
    assert shown.nodes["m:ops"][g.OPS] == ["add", "mul"]
    assert shown.nodes["m:ops"][g.MODULE] == "m" and shown.nodes["m:ops"][g.OWN_OPS] is True
    assert sorted(shown.edges) == [
        ("m.w", "m:ops"),
        ("m.z", "m:sum"),
        ("m:ops", "y"),
        ("m:slice", "m.w"),
        ("m:slice", "m.z"),
        ("m:slice", "m:ops"),
        ("m:slice", "m:sum"),
        ("m:sum", "y"),
        ("x", "m:slice"),
    ]


def three_own_computations(types: dict[str, str] | None) -> nx.DiGraph:
    """m computes three things of its own, none feeding another, with its children called between."""
    ops = [
        ("m:p1", "m", "slice"),
        ("m:p2", "m", "add"),
        ("m.c:linear", "m.c", "linear"),
        ("m:q1", "m", "arange"),
        ("m:q2", "m", "mul"),
        ("m.d:linear", "m.d", "linear"),
        ("m:r1", "m", "ones"),
        ("m:r2", "m", "sub"),
    ]
    edges = [("x", "m:p1"), ("m:p1", "m:p2"), ("x", "m.c:linear"), ("x", "m:q1"), ("m:q1", "m:q2")]
    edges += [("x", "m.d:linear"), ("x", "m:r1"), ("m:r1", "m:r2")]
    edges += [(node, "y") for node in ("m:p2", "m.c:linear", "m:q2", "m.d:linear", "m:r2")]
    return build(ops, edges, types)


def test_a_modules_separate_own_computations_are_numbered_one_by_one() -> None:
    shown = views.collapse(three_own_computations({"": "Toy", "m": "M", "m.c": "Linear", "m.d": "Linear"}), 2)
    assert ops_of(shown) == {
        "x": ["input"],
        "m:ops": ["slice", "add"],
        "m.c": ["linear"],
        "m:ops.1": ["arange", "mul"],
        "m.d": ["linear"],
        "m:ops.2": ["ones", "sub"],
        "y": ["output"],
    }


def test_the_anatomy_numbers_own_computations_from_zero_with_or_without_a_module_table() -> None:
    """Without a table m is not known to have children; its ops are its own because m.c's are below it."""
    expected = ["x", "m:ops.0", "m.c", "m:ops.1", "m.d", "m:ops.2", "y"]
    for types in ({"": "Toy", "m": "M", "m.c": "Linear", "m.d": "Linear"}, None):
        shown = views.anatomy(three_own_computations(types))
        assert list(shown) == expected
        assert shown.nodes["m:ops.0"][g.OPS] == ["slice", "add"] and shown.nodes["m:ops.0"][g.OWN_OPS] is True
    # Keyed by module path directly (not ``…:ops``), the numbering is the same.
    shown = views.merge_nodes(three_own_computations(None), lambda node, data: data[g.MODULE], keep_ids=True)
    assert list(shown) == expected


def test_a_module_called_again_and_again_is_one_node_per_call() -> None:
    """T5's stack dropout runs after the embeddings, between blocks and after the final norm."""
    ops = [("d:dropout", "d", "dropout"), ("a:linear", "a", "linear"), ("d:dropout_1", "d", "dropout")]
    ops += [("b:linear", "b", "linear"), ("d:dropout_2", "d", "dropout")]
    shown = views.collapse(build(ops, in_a_row(ops), {"": "Toy", "d": "Dropout", "a": "L", "b": "L"}), 1)
    assert list(shown) == ["x", "d", "a", "d#2", "b", "d#3", "y"]
    assert list(shown.edges) == [("x", "d"), ("d", "a"), ("a", "d#2"), ("d#2", "b"), ("b", "d#3"), ("d#3", "y")]
    for node, order in (("d", 1), ("d#2", 3), ("d#3", 5)):
        assert shown.nodes[node][g.MODULE] == "d" and shown.nodes[node][g.MODULE_TYPE] == "Dropout"
        assert shown.nodes[node][g.ORDER] == order and g.OWN_OPS not in shown.nodes[node]


def test_in_the_anatomy_a_module_with_children_is_its_own_ops_even_when_no_child_op_is_left() -> None:
    """``a.b.c`` runs only a view, which the anatomy bridges over: ``a.b``'s ops are still its own,
    and a top-level leaf module (named ``XXXX`` here) is still one node."""
    ops = [("a.b:add", "a.b", "add"), ("a.b.c:view", "a.b.c", "view"), ("a.b:mul", "a.b", "mul")]
    ops += [("XXXX:linear", "XXXX", "linear"), ("XXXX:relu", "XXXX", "relu")]
    types = {"": "Toy", "a": "A", "a.b": "B", "a.b.c": "C", "XXXX": "Leaf"}
    shown = views.anatomy(build(ops, in_a_row(ops), types))
    assert ops_of(shown) == {"x": ["input"], "a.b:ops": ["add", "mul"], "XXXX": ["linear", "relu"], "y": ["output"]}
    assert list(shown.edges) == [("x", "a.b:ops"), ("a.b:ops", "XXXX"), ("XXXX", "y")]
    assert shown.nodes["a.b:ops"][g.OWN_OPS] is True and shown.nodes["a.b:ops"][g.MODULE_TYPE] == "B"
    assert g.OWN_OPS not in shown.nodes["XXXX"] and shown.nodes["XXXX"][g.MODULE_TYPE] == "Leaf"


def test_a_group_named_after_no_module_of_its_ops_takes_its_first_ops_module() -> None:
    """``XXXX`` is a group name, not a module: the node is the first op's module, marked own ops."""
    graph = build([("p", "m.a", "linear"), ("q", "n.b", "relu")], [("x", "p"), ("p", "q"), ("q", "y")])
    node = views.merge_nodes(graph, lambda node, data: "XXXX").nodes["XXXX"]
    assert (node[g.MODULE], node[g.MODULE_TYPE], node[g.OWN_OPS]) == ("m.a", "M", True)


# --- pieces ------------------------------------------------------------------------------------------


def test_connected_pieces_come_in_execution_order_and_ties_by_id() -> None:
    graph = nx.DiGraph()
    for node, order in (("z", 1), ("z2", 2), ("a", 3), ("b", 5), ("a5", 5), ("c", 4)):
        graph.add_node(node, **op("m", "add", order))
    graph.add_edges_from([("z2", "c"), ("z", "c")])
    pieces = views._connected_pieces(graph, ["a", "a5", "b", "c", "z", "z2"])
    assert pieces == [["z", "z2", "c"], ["a"], ["a5"], ["b"]]


# --- the view of a shared layer --------------------------------------------------------------------


def shared_layer() -> nx.DiGraph:
    """ALBERT-like: one linear layer called twice, each call costing 8."""
    ops = [
        ("enc.shared.lin:linear", "enc.shared.lin", "linear"),
        ("enc.shared.lin:linear_1", "enc.shared.lin", "linear"),
    ]
    types = {"": "Toy", "enc": "Enc", "enc.shared": "Layer", "enc.shared.lin": "Linear"}
    graph = build(
        ops,
        in_a_row(ops),
        types,
        **{
            "enc.shared.lin:linear": {g.MATMUL_FLOPS: "8", g.PARAMS: 10, g.PARAM_NAMES: ["enc.shared.lin.weight"]},
            "enc.shared.lin:linear_1": {g.MATMUL_FLOPS: "8", g.CALL: 1},
        },
    )
    graph.graph[g.G_SHARED] = {"enc.shared": 2}
    return graph


def test_a_folded_view_draws_a_shared_layers_calls_as_one_and_an_unfolded_one_each() -> None:
    graph = shared_layer()
    folded = views.view(graph, 4)
    assert list(folded) == ["x", "enc.shared.lin:linear", "y"]
    assert folded.nodes["enc.shared.lin:linear"][g.MATMUL_FLOPS] == "16"
    unfolded = views.view(graph, 4, fold=False)
    assert list(unfolded) == ["x", "enc.shared.lin:linear", "enc.shared.lin:linear_1", "y"]
    assert unfolded.nodes["enc.shared.lin:linear"][g.MATMUL_FLOPS] == "8"


# --- a group's attributes ------------------------------------------------------------------------


def test_a_module_nodes_attributes_add_up_its_ops_and_take_the_output_of_the_last_op_read_outside() -> None:
    """The type comes from the module table, not from the first op; shape and dtype from the last op
    whose result leaves the group (``m:note`` runs later but nothing reads it); parameters add up,
    names in execution order, op names once each; the largest repeat wins."""
    ops = [
        ("m.a:linear", "m.a", "linear"),
        ("m:add", "m", "add"),
        ("m.a:linear_1", "m.a", "linear"),
        ("m:note", "m", "add"),
    ]
    edges = [("x", "m.a:linear"), ("m.a:linear", "m:add"), ("m:add", "m.a:linear_1"), ("m.a:linear_1", "y")]
    edges += [("m:add", "m:note")]
    graph = build(
        ops,
        edges,
        {"": "Toy", "m": "Mixer", "m.a": "Linear"},
        **{
            "m.a:linear": {g.PARAMS: 6, g.PARAM_NAMES: ["m.a.weight"], g.REPEAT: 3},
            "m.a:linear_1": {g.PARAMS: 4, g.PARAM_NAMES: ["m.a.bias"], g.SHAPE: ["batch", 2], g.DTYPE: "float16"},
            "m:note": {g.SHAPE: ["batch", 9], g.DTYPE: "int64", g.REPEAT: 2},
        },
    )
    shown = views.collapse(graph, 1)
    assert list(shown) == ["x", "m", "y"]
    assert shown.nodes["m"] == {
        g.KIND: g.MODULE_NODE,
        g.MODULE: "m",
        g.MODULE_TYPE: "Mixer",
        g.SHAPE: ["batch", 2],
        g.DTYPE: "float16",
        g.PARAMS: 10,
        g.PARAM_NAMES: ["m.a.weight", "m.a.bias"],
        g.ORDER: 1,
        g.OPS: ["linear", "add"],
        g.REPEAT: 3,
    }


def test_a_module_missing_from_the_table_takes_its_first_ops_type_and_a_group_spanning_modules_is_own_ops() -> None:
    """``p`` is not in the table: its type is what its first op records. A key putting ops of two
    modules together names the first op's module (typed from the table) and marks it own ops."""
    ops = [("p:relu", "p", "relu"), ("q.r:linear", "q.r", "linear"), ("s:gelu", "s", "gelu")]
    edges = [("x", "p:relu"), ("p:relu", "q.r:linear"), ("q.r:linear", "s:gelu"), ("s:gelu", "y")]
    graph = build(ops, edges, {"": "Toy", "q.r": "Linear", "s": "GELU"})
    graph.nodes["p:relu"][g.MODULE_TYPE] = "ReLU"
    shown = views.merge_nodes(graph, lambda node, data: "p" if data[g.MODULE] == "p" else "q")
    assert list(shown) == ["x", "p", "q", "y"]
    assert (shown.nodes["p"][g.MODULE], shown.nodes["p"][g.MODULE_TYPE], g.OWN_OPS in shown.nodes["p"]) == (
        "p",
        "ReLU",
        False,
    )
    spanning = shown.nodes["q"]
    assert (spanning[g.MODULE], spanning[g.MODULE_TYPE], spanning[g.OWN_OPS]) == ("q.r", "Linear", True)
    assert (spanning[g.OPS], spanning[g.ORDER], g.REPEAT in spanning) == (["linear", "gelu"], 2, False)
    assert list(shown.edges) == [("x", "p"), ("p", "q"), ("q", "y")]
