"""Numbered lists, sibling digests, folding and layout ops of graph/views.py, checked exactly.

Hand-built graphs and the committed llama graph only: nothing is traced and no process starts.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

import networkx as nx
import pytest

from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.graph import views
from tests.graph_fixtures import FIXTURES, chain, interleaved_chain, op

EDGE = {g.SHAPE: ["batch", 4], g.DTYPE: "float32"}


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise TimeoutError in the block after ``seconds``: a plan or walk that never ends fails."""

    def stop(signum: int, frame: Any) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True)
def _each_test_ends() -> Iterator[None]:
    """Each test here takes well under a second; one that loops forever fails after thirty seconds."""
    with deadline(30.0):
        yield


def ops_graph(modules: list[tuple[str, str]], edges: list[tuple[str, str]] | None = None) -> nx.DiGraph:
    """``x`` → the ops (``(module, op)`` pairs, run in the order given) → ``y``.

    Each op is named ``module:op``; without ``edges`` the ops form one chain.
    """
    graph = g.new_graph(**{g.G_BACKBONE: ""})
    graph.add_node("x", **g.io_attributes(g.INPUT, ["batch", 4], "float32", 0))
    names = [f"{module}:{name}" for module, name in modules]
    for order, ((module, name), node) in enumerate(zip(modules, names), start=1):
        graph.add_node(node, **op(module, name, order))
    graph.add_node("y", **g.io_attributes(g.OUTPUT, ["batch", 4], "float32", len(modules) + 1))
    if edges is None:
        edges = list(zip(["x", *names], [*names, "y"]))
    for source, target in edges:
        graph.add_edge(source, target, **EDGE)
    return graph


def xlm(parent: str, lists: tuple[str, str], indices: range, interleave: bool = True) -> list[tuple[str, str]]:
    """The ops of two lists under ``parent``: index by index (XLM) or one list after the other."""
    first, second = (f"{parent}.{name}" if parent else name for name in lists)
    if interleave:
        return [pair for i in indices for pair in ((f"{first}.{i}", "a"), (parent, "add"), (f"{second}.{i}", "f"))]
    return [(f"{first}.{i}", "a") for i in indices] + [(f"{second}.{i}", "f") for i in indices]


# --- parallel lists ------------------------------------------------------------------------------


def test_two_lists_of_one_parent_run_index_by_index_are_parallel() -> None:
    group = ("enc.attentions", "enc.ffns")
    assert views.parallel_lists(ops_graph(xlm("enc", ("attentions", "ffns"), range(2)))) == dict.fromkeys(group, group)
    # three lists and three indices: all three are one group
    ops = [pair for i in range(3) for pair in ((f"m.attentions.{i}", "a"), (f"m.norms.{i}", "n"), (f"m.ffns.{i}", "f"))]
    three = ("m.attentions", "m.ffns", "m.norms")
    assert views.parallel_lists(ops_graph(ops)) == dict.fromkeys(three, three)


def test_top_level_lists_share_the_model_as_their_parent() -> None:
    group = ("attentions", "ffns")
    assert views.parallel_lists(ops_graph(xlm("", ("attentions", "ffns"), range(2)))) == dict.fromkeys(group, group)


def test_lists_run_one_after_another_are_not_parallel() -> None:
    assert views.parallel_lists(ops_graph(xlm("enc", ("attentions", "ffns"), range(3), interleave=False))) == {}
    # the last op alone is in order; the whole run is not
    assert views.parallel_lists(ops_graph(xlm("", ("attentions", "ffns"), range(2), interleave=False))) == {}


def test_lists_of_different_parents_are_not_parallel() -> None:
    """Same indices, index by index, but under ``model.enc`` and ``model.dec``, or ``model`` and the model."""
    ops = [pair for i in range(2) for pair in ((f"model.enc.attentions.{i}", "a"), (f"model.dec.ffns.{i}", "f"))]
    assert views.parallel_lists(ops_graph(ops)) == {}
    ops = [pair for i in range(2) for pair in ((f"XXXX.attentions.{i}", "a"), (f"ffns.{i}", "f"))]
    assert views.parallel_lists(ops_graph(ops)) == {}


def test_lists_with_other_indices_or_a_single_item_are_not_parallel() -> None:
    ops = [*xlm("enc", ("attentions", "ffns"), range(2)), ("enc.ffns.2", "f")]
    assert views.parallel_lists(ops_graph(ops)) == {}
    assert views.parallel_lists(ops_graph(xlm("enc", ("attentions", "ffns"), range(1)))) == {}


def test_a_skipped_group_does_not_hide_the_parallel_lists_of_its_parent() -> None:
    """Beside each pair, lists with one index each (groups of one, skipped). Groups come out of a
    set in an order set by string hashes; with eight parents of nine groups each, the pair
    found only when it comes first everywhere would be found by chance about once in 10^7 runs."""
    ops: list[tuple[str, str]] = []
    expected: dict[str, tuple[str, ...]] = {}
    for parent in (f"p{k}" for k in range(8)):
        ops += xlm(parent, ("attentions", "ffns"), range(2))
        ops += [(f"{parent}.extra{j}.{j + 2}", "e") for j in range(8)]
        group = (f"{parent}.attentions", f"{parent}.ffns")
        expected.update(dict.fromkeys(group, group))
    assert views.parallel_lists(ops_graph(ops)) == expected


# --- interleaved lists ---------------------------------------------------------------------------


def test_a_list_of_one_item_does_not_end_the_search_for_interleaved_lists() -> None:
    graph = interleaved_chain(3)
    graph.add_node("a.layer.0:B", **op("a.layer.0", "B", 1))  # "a.layer" is looked at before "stack.layer"
    graph.add_edge("x", "a.layer.0:B", **EDGE)
    graph.add_edge("a.layer.0:B", "y", **EDGE)
    assert views._list_containers(graph) == ["a.layer", "stack.layer"]
    assert views.interleaved_lists(graph) == frozenset({"stack.layer"})


def test_a_list_reached_again_through_two_ops_outside_it_is_interleaved() -> None:
    ops = [("stack.layer.0", "A"), ("stack", "flip"), ("stack", "scale"), ("stack.layer.1", "A")]
    assert views.interleaved_lists(ops_graph(ops)) == frozenset({"stack.layer"})
    # the same ops, the second item reading the input instead: no loop
    nodes = [f"{m}:{n}" for m, n in ops]
    edges = [("x", nodes[0]), (nodes[0], nodes[1]), (nodes[1], nodes[2]), (nodes[2], "y"), ("x", nodes[3])]
    assert views.interleaved_lists(ops_graph(ops, [*edges, (nodes[3], nodes[1])])) == frozenset()


def test_an_outside_node_reached_twice_does_not_end_the_walk() -> None:
    """``stack:r`` is put on the walk twice (from ``q`` and from ``t``) before ``stack:s``, which
    leads back into the list; meeting ``r`` again skips it, the walk goes on and finds the loop."""
    ops = [("stack.layer.0", "a"), ("stack", "p"), ("stack", "q"), ("stack", "t"), ("stack", "r")]
    ops += [("stack", "s"), ("stack.layer.1", "a")]
    a0, p, q, t, r, s, a1 = (f"{m}:{n}" for m, n in ops)
    edges = [("x", a0), (a0, p), (p, s), (p, q), (q, r), (q, t), (t, r), (r, "y"), (s, a1), (a1, "y")]
    assert views.interleaved_lists(ops_graph(ops, edges)) == frozenset({"stack.layer"})
    # without the way back from s there is no loop
    edges = [edge for edge in edges if edge != (s, a1)] + [("x", a1), (s, "y")]
    assert views.interleaved_lists(ops_graph(ops, edges)) == frozenset()


# --- list containers and members -----------------------------------------------------------------


def test_a_numbered_top_level_module_is_not_an_item_of_a_list() -> None:
    graph = ops_graph([("0.attn", "a"), ("enc.layer.0", "b"), ("enc.layer.0.sub.1", "c")])
    assert views._list_containers(graph) == ["enc.layer", "enc.layer.0.sub"]


def test_inputs_and_outputs_recorded_in_an_item_are_not_its_members() -> None:
    graph = chain(["A", "A"])
    graph.nodes["y"][g.MODULE] = "stack.layer.1"
    graph.nodes["x"][g.MODULE] = "stack.layer.0"
    assert views._members(graph, "stack.layer") == {0: ["stack.layer.0:A"], 1: ["stack.layer.1:A"]}


# --- sibling digests -----------------------------------------------------------------------------


def test_a_fact_at_its_default_value_counts_as_absent() -> None:
    """Alias False, repeat 1, own ops False on an op, alias False and one tensor on an edge: the
    digest equals that of a sibling which leaves them out."""
    graph = chain(["A", "A", "A"])
    graph.nodes["stack.layer.0:A"].update({g.ALIAS: False, g.REPEAT: 1, g.OWN_OPS: False})
    graph.edges["x", "stack.layer.0:A"].update({g.ALIAS: False, g.TENSORS: 1})
    content = views.sibling_content(graph)
    assert content["stack.layer.0"] == content["stack.layer.1"] == content["stack.layer.2"]
    # each fact one at a time
    for fact in ({g.ALIAS: False}, {g.REPEAT: 1}, {g.OWN_OPS: False}):
        graph = chain(["A", "A"])
        graph.nodes["stack.layer.1:A"].update(fact)
        content = views.sibling_content(graph)
        assert content["stack.layer.0"] == content["stack.layer.1"], fact
    for fact in ({g.ALIAS: False}, {g.TENSORS: 1}):
        graph = chain(["A", "A"])
        graph.edges["stack.layer.0:A", "stack.layer.1:A"].update(fact)
        content = views.sibling_content(graph)
        assert content["stack.layer.0"] == content["stack.layer.1"], fact


@pytest.mark.parametrize(
    ("fact", "on_edge"),
    [
        ({g.ALIAS: True}, False),
        ({g.REPEAT: 2}, False),
        ({g.OWN_OPS: True}, False),
        ({g.ALIAS: True}, True),
        ({g.TENSORS: 2}, True),
    ],
)
def test_a_fact_away_from_its_default_tells_siblings_apart(fact: dict[str, Any], on_edge: bool) -> None:
    graph = chain(["A", "A"])
    target = graph.edges["stack.layer.0:A", "stack.layer.1:A"] if on_edge else graph.nodes["stack.layer.1:A"]
    target.update(fact)
    content = views.sibling_content(graph)
    assert content["stack.layer.0"] != content["stack.layer.1"]


def two_op_siblings(count: int, inner_shape: list[Any]) -> nx.DiGraph:
    """``count`` siblings of ops A → B; each B reads a mask from outside (that edge first) and A;
    the last sibling's A → B edge has ``inner_shape``."""
    graph = chain(["A"] * count)
    graph.add_node("mask", **op("", "mask", 0, module_type="Toy"))
    graph.add_edge("x", "mask", **EDGE)
    for index in range(count):
        a, b = f"stack.layer.{index}:A", f"stack.layer.{index}:B"
        successors = list(graph.successors(a))
        graph.add_node(b, **op(f"stack.layer.{index}", "B", graph.nodes[a][g.ORDER], module_type="Block"))
        graph.add_edge("mask", b, **EDGE)  # the outside input comes first
        shape = inner_shape if index == count - 1 else ["batch", 4]
        graph.add_edge(a, b, **{g.SHAPE: shape, g.DTYPE: "float32"})
        for successor in successors:
            graph.remove_edge(a, successor)
            graph.add_edge(b, successor, **EDGE)
    for number, node in enumerate(nx.topological_sort(graph)):
        graph.nodes[node][g.ORDER] = number
    return graph


def test_on_a_view_the_digest_still_covers_inputs_from_inside_after_one_from_outside() -> None:
    """Folding a view leaves out what comes from outside, not what follows it."""
    graph = two_op_siblings(2, ["batch", 8])
    members = views._members(graph, "stack.layer")
    assert members == {0: ["stack.layer.0:A", "stack.layer.0:B"], 1: ["stack.layer.1:A", "stack.layer.1:B"]}
    inner = views._signatures(graph, "stack.layer", members, outside=False)
    assert inner[0] != inner[1]
    same = {"stack.layer.0": "same", "stack.layer.1": "same"}
    assert views.fold_repeats(graph, same) is graph  # told apart: nothing folds
    alike = two_op_siblings(2, ["batch", 4])
    inner = views._signatures(alike, "stack.layer", views._members(alike, "stack.layer"), outside=False)
    assert inner[0] == inner[1]
    assert sorted(views.fold_repeats(alike, same)) == ["mask", "stack.layer.0-1:A", "stack.layer.0-1:B", "x", "y"]


def test_a_view_folds_siblings_that_differ_only_in_what_comes_from_outside() -> None:
    """T5's block 1 reads block 0's output and the position bias as one merged edge; blocks 2-5 do
    not. The operator graph's content has judged the outside, so the view folds all of them."""
    graph = chain(["A", "A", "A"])
    graph.edges["x", "stack.layer.0:A"][g.SHAPE] = ["batch", 8]
    members = views._members(graph, "stack.layer")
    assert len(set(views._signatures(graph, "stack.layer", members).values())) == 2
    assert len(set(views._signatures(graph, "stack.layer", members, outside=False).values())) == 1
    content = {f"stack.layer.{i}": "same" for i in range(3)}
    folded = views.fold_repeats(graph, content)
    assert sorted(folded) == ["stack.layer.0-2:A", "x", "y"]
    assert folded.nodes["stack.layer.0-2:A"][g.REPEAT] == 3


# --- repeats of heads and layout ops -------------------------------------------------------------


def repeat_graph(*chains: str, second_reader: str = "") -> nx.DiGraph:
    """For each name in ``chains``: ``x → name:proj → unsqueeze → expand → reshape → attn → y``, the
    shapes of grouped-query attention (2 key/value heads repeated to 4). ``second_reader`` names a
    link of the first chain that ``attn`` reads as well."""
    graph = g.new_graph(**{g.G_BACKBONE: ""})
    graph.add_node("attn", **op("attn", "sdpa", 50))  # added first: not an expand
    graph.add_node("x", **g.io_attributes(g.INPUT, ["batch", "seq", 8], "float32", 0))
    graph.add_node("y", **g.io_attributes(g.OUTPUT, ["batch", 4, "seq", 8], "float32", 60))
    shapes = [["batch", 2, "seq", 8], ["batch", 2, 1, "seq", 8], ["batch", 2, 2, "seq", 8], ["batch", 4, "seq", 8]]
    for number, name in enumerate(chains):
        links = [f"{name}:proj", f"{name}:unsqueeze", f"{name}:expand", f"{name}:reshape"]
        for step, (link, shape) in enumerate(zip(links, shapes)):
            graph.add_node(link, **op("attn", link.split(":")[1], 10 * number + step + 1, shape=shape))
        graph.add_edge("x", links[0], **{g.SHAPE: ["batch", "seq", 8], g.DTYPE: "float32"})
        for source, target, shape in zip(links, [*links[1:], "attn"], shapes):
            graph.add_edge(source, target, **{g.SHAPE: shape, g.DTYPE: "float32"})
        if second_reader and number == 0:
            graph.add_edge(f"{name}:{second_reader}", "attn", **EDGE)
    graph.add_edge("attn", "y", **{g.SHAPE: ["batch", 4, "seq", 8], g.DTYPE: "float32"})
    return graph


def test_repeat_ops_are_the_unsqueeze_expand_reshape_of_each_repeat() -> None:
    assert views._repeat_ops(repeat_graph("k")) == {"k:unsqueeze", "k:expand", "k:reshape"}
    both = {f"{n}:{s}" for n in "kv" for s in ("unsqueeze", "expand", "reshape")}
    assert views._repeat_ops(repeat_graph("k", "v")) == both


def test_the_committed_llama_graph_repeats_key_and_value_in_every_layer() -> None:
    graph = graph_io.read_json(FIXTURES / "planning" / "llama.json")
    found = views._repeat_ops(graph)
    links = ("unsqueeze_2", "expand", "reshape", "unsqueeze_3", "expand_1", "reshape_1")
    assert found == {f"model.layers.{i}.self_attn:{link}" for i in range(3) for link in links}


@pytest.mark.parametrize("link", ["unsqueeze", "expand"])
def test_a_link_with_a_second_reader_is_not_a_repeat(link: str) -> None:
    assert views._repeat_ops(repeat_graph("k", second_reader=link)) == set()
    assert views._repeat_ops(repeat_graph("k", "v", second_reader=link)) == {
        "v:unsqueeze",
        "v:expand",
        "v:reshape",
    }


def test_an_expand_with_two_unsqueezes_or_two_reshapes_is_not_a_repeat() -> None:
    graph = repeat_graph("k")
    graph.add_node("k:unsqueeze_1", **op("attn", "unsqueeze", 2))
    graph.add_edge("k:unsqueeze_1", "k:expand", **EDGE)
    graph.add_edge("x", "k:unsqueeze_1", **EDGE)
    assert views._repeat_ops(graph) == set()
    graph = repeat_graph("k")
    graph.add_node("k:view", **op("attn", "view", 4))
    graph.add_edge("k:expand", "k:view", **EDGE)
    graph.add_edge("k:view", "attn", **EDGE)
    assert views._repeat_ops(graph) == set()


def test_an_expand_without_an_unsqueeze_before_or_a_reshape_after_is_not_a_repeat() -> None:
    graph = repeat_graph("k")
    graph.nodes["k:unsqueeze"][g.OP] = "transpose"
    assert views._repeat_ops(graph) == set()
    graph = repeat_graph("k")
    graph.nodes["k:reshape"][g.OP] = "contiguous"
    assert views._repeat_ops(graph) == set()


def test_a_bridged_repeat_keeps_the_shape_before_it() -> None:
    bridged = views.bridge_layout_ops(repeat_graph("k", "v"))
    assert sorted(bridged) == ["attn", "k:proj", "v:proj", "x", "y"]
    for name in "kv":
        assert bridged.edges[f"{name}:proj", "attn"] == {g.SHAPE: ["batch", 2, "seq", 8], g.DTYPE: "float32"}


def test_a_bridged_layout_op_outside_a_repeat_keeps_the_shape_after_it() -> None:
    graph = repeat_graph("k")
    graph.nodes["k:unsqueeze"][g.OP] = "transpose"  # no longer a repeat: each edge keeps what it reads
    bridged = views.bridge_layout_ops(graph)
    assert sorted(bridged) == ["attn", "k:proj", "x", "y"]
    assert bridged.edges["k:proj", "attn"] == {g.SHAPE: ["batch", 4, "seq", 8], g.DTYPE: "float32"}


# --- fold plans ----------------------------------------------------------------------------------


def test_fold_plans_end_and_cover_every_index() -> None:
    with deadline(10.0):
        assert views.fold_plan(list("AB")) == [(0, 1, 1), (1, 1, 1)]
        assert views.fold_plan(list("AAAA")) == [(0, 1, 4)]
        assert views.fold_plan(list("A")) == [(0, 1, 1)]
        assert views.fold_plan([]) == []
        assert views.fold_plan(list("ABABC")) == [(0, 2, 2), (4, 1, 1)]


# --- walks and kept results ----------------------------------------------------------------------


def test_a_node_pushed_twice_on_the_walk_does_not_end_it_before_the_loop_is_found() -> None:
    """``q`` feeds ``u``, ``t`` and ``r``, and ``r`` feeds ``t`` too: ``t`` is on the walk twice and
    comes off it (twice) before ``u``, the op that leads back into the list."""
    ops = [
        ("stack.layer.0", "a"),
        ("stack", "q"),
        ("stack", "r"),
        ("stack", "t"),
        ("stack", "u"),
        ("stack.layer.1", "a"),
    ]
    a0, q, r, t, u, a1 = (f"{m}:{n}" for m, n in ops)
    edges = [("x", a0), (a0, q), (q, u), (q, t), (q, r), (r, t), (t, "y"), (u, a1), (a1, "y")]
    assert list(ops_graph(ops, edges).successors(q)) == [u, t, r]
    assert views.interleaved_lists(ops_graph(ops, edges)) == frozenset({"stack.layer"})
    # without the way back through ``u`` the same walk finds no loop
    edges = [e for e in edges if e != (u, a1)] + [("x", a1)]
    assert views.interleaved_lists(ops_graph(ops, edges)) == frozenset()


def test_the_walk_outside_a_list_visits_each_op_once() -> None:
    """Twenty-four diamonds after the first item: 2^24 paths to the output, 73 ops. A walk that
    went down every path would not end within the ten seconds it is given."""
    ops: list[tuple[str, str]] = [("stack.layer.0", "a"), ("stack.layer.1", "a")]
    a0, a1 = "stack.layer.0:a", "stack.layer.1:a"
    edges = [("x", a0), ("x", a1), (a1, "y")]
    last = a0
    for level in range(24):
        left, right, join = (f"stack:{side}{level}" for side in ("l", "r", "j"))
        ops += [("stack", f"l{level}"), ("stack", f"r{level}"), ("stack", f"j{level}")]
        edges += [(last, left), (last, right), (left, join), (right, join)]
        last = join
    edges.append((last, "y"))
    graph = ops_graph(ops, edges)
    with deadline(10.0):
        assert views.interleaved_lists(graph) == frozenset()


def test_inside_kept_views_the_lists_of_a_kept_graph_are_computed_once() -> None:
    """A kept graph is never changed, so its lists are worked out once: changed anyway, it still
    shows the first answer; outside ``active()``, or for a graph not added, each call computes."""
    graph = ops_graph(xlm("enc", ("attentions", "ffns"), range(2)))
    group = ("enc.attentions", "enc.ffns")
    kept = views.KeptViews()
    kept.add(graph)
    with kept.active():
        assert views.parallel_lists(graph) == dict.fromkeys(group, group)
        for node in ("enc.ffns.0:f", "enc.ffns.1:f"):
            graph.nodes[node][g.MODULE] = "enc.ffn"  # no longer a list
        assert views.parallel_lists(graph) == dict.fromkeys(group, group)
        other = ops_graph(xlm("enc", ("attentions", "ffns"), range(2)))
        assert views.parallel_lists(other) == dict.fromkeys(group, group)
        other.nodes["enc.ffns.1:f"][g.MODULE] = "enc.ffn"
        assert views.parallel_lists(other) == {}
    assert views.parallel_lists(graph) == {}

    ops = [("stack.layer.0", "A"), ("stack", "flip"), ("stack.layer.1", "A")]
    flip, a1 = "stack:flip", "stack.layer.1:A"
    graph = ops_graph(ops)
    kept = views.KeptViews()
    kept.add(graph)
    with kept.active():
        assert views.interleaved_lists(graph) == frozenset({"stack.layer"})
        graph.remove_edge(flip, a1)  # the loop through the flip is gone
        graph.add_edge("x", a1, **EDGE)
        assert views.interleaved_lists(graph) == frozenset({"stack.layer"})
    assert views.interleaved_lists(graph) == frozenset()
