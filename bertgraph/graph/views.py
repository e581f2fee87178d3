"""Pure functions from the operator graph to the graphs people look at.

Levels of detail (``level`` below, ``--depth`` on the command line):

0. the whole model as one node;
1. its parts: embeddings, the layer stacks (encoder, decoder), pooler, the attention-mask
   computation, head modules (BERT: embeddings → encoder → pooler);
2. their blocks: each layer, the embedding tables, the pooler's dense layer, …;
3. the anatomy of a block: every leaf module (Q, K, V, dense, LayerNorm, GELU, …) and the
   computations modules do themselves (scaled dot-product attention, residual adds),
   with pure layout ops (view, transpose, reshape, …) left out;
4. and deeper: every operator, each in its module.

Module depth counts *display* levels: the backbone prefix (``bert.`` in a model with a
head) and list containers (``layer`` in ``encoder.layer.3``) are not levels of their own,
so ``embeddings`` and a head's ``classifier`` are both at level 1 and each encoder layer
is at level 2.

Every view keeps the invariant ``sum(params) == model total``: a folded node counts all
the siblings it stands for.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g

OPERATOR_LEVEL = 4
ANATOMY_LEVEL = 3

# Ops that only reinterpret a tensor's layout; the anatomy view skips them.
LAYOUT_OPS = frozenset(
    {
        "view",
        "reshape",
        "transpose",
        "permute",
        "contiguous",
        "expand",
        "unsqueeze",
        "squeeze",
        "clone",
        "t",
        "alias",
        "flatten",
        "unflatten",
        "to",
        "_to_copy",
        "type_as",
        "detach",
        "lift_fresh_copy",
        "Reshape",
        "Transpose",
        "Unsqueeze",
        "Squeeze",
        "Identity",
        "Cast",
        "Expand",
    }
)

_INDEX = re.compile(r"^\d+$")
_INDEX_OR_RANGE = re.compile(r"^\d+(-\d+(/\d+)?)?$")  # "3"; "0-11" or "1-19/3" once siblings are folded


# --- module paths and display levels ----------------------------------------------------


def display_levels(path: str, backbone: str = "") -> tuple[str, ...]:
    """The module paths that are display levels on the way to ``path``.

    >>> display_levels("bert.encoder.layer.3.attention", "bert")
    ('bert.encoder', 'bert.encoder.layer.3', 'bert.encoder.layer.3.attention')
    >>> display_levels("classifier", "bert")
    ('classifier',)
    >>> display_levels("", "bert")
    ()
    """
    if not path:
        return ()
    parts = path.split(".")
    levels = []
    for index in range(len(parts)):
        prefix = ".".join(parts[: index + 1])
        if prefix == backbone:
            continue
        if index + 1 < len(parts) and _INDEX_OR_RANGE.match(parts[index + 1]):
            continue  # a list container: its items are the level
        levels.append(prefix)
    return tuple(levels)


def display_name(path: str, backbone: str = "") -> str:
    """``bert.encoder.layer.3`` → ``encoder.layer.3``: the path without the backbone prefix.

    >>> display_name("bert.pooler.dense", "bert"), display_name("classifier", "bert")
    ('pooler.dense', 'classifier')
    """
    if backbone and (path == backbone or path.startswith(backbone + ".")):
        return path[len(backbone) + 1 :]
    return path


def own_ops_id(path: str) -> str:
    """Id of the node standing for the ops module ``path`` runs itself."""
    return f"{path}:ops"


def in_backbone(path: str, backbone: str) -> bool:
    """Whether a module path belongs to the encoder-only backbone (not the task head)."""
    return not backbone or path == backbone or path.startswith(backbone + ".")


def is_within(path: str, ancestor: str) -> bool:
    return not ancestor or path == ancestor or path.startswith(ancestor + ".")


# --- level of detail ---------------------------------------------------------------------


class KeptViews:
    """The views of graphs drawn many times and never changed (a docs build's), each computed once.

    Only graphs :meth:`add`-ed are kept, and only inside :meth:`active`.
    """

    def __init__(self) -> None:
        # id → (the graph, held so that its id stays its own; what was computed of it)
        self._graphs: dict[int, tuple[nx.DiGraph, dict[Any, Any]]] = {}

    def add(self, graph: nx.DiGraph) -> None:
        self._graphs.setdefault(id(graph), (graph, {}))

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        token = _KEPT.set(self)
        try:
            yield
        finally:
            _KEPT.reset(token)

    def get(self, graph: nx.DiGraph, key: Any, compute: Callable[[], Any]) -> Any:
        entry = self._graphs.get(id(graph))
        if entry is None or entry[0] is not graph:
            return compute()
        if key not in entry[1]:
            entry[1][key] = compute()
        return entry[1][key]


_KEPT: contextvars.ContextVar[KeptViews | None] = contextvars.ContextVar("bertgraph_kept_views", default=None)


def _kept(graph: nx.DiGraph, key: Any, compute: Callable[[], Any]) -> Any:
    kept = _KEPT.get()
    return compute() if kept is None else kept.get(graph, key, compute)


def view(graph: nx.DiGraph, level: int = 2, fold: bool = True) -> nx.DiGraph:
    """The graph at a level of detail (see the module docstring), repeats folded."""
    if level < 0:
        raise ValueError(f"level must be 0 or more, got {level}")
    if _KEPT.get() is None:
        return _view(graph, level, fold)
    kept: nx.DiGraph = _kept(graph, ("view", level, fold), lambda: _view(graph, level, fold))
    return kept.copy()  # a copy: callers may change theirs


def _view(graph: nx.DiGraph, level: int, fold: bool) -> nx.DiGraph:
    source = fold_calls(graph) if fold else graph
    if level >= OPERATOR_LEVEL:
        result = read_where_made(source)
    elif level == ANATOMY_LEVEL:
        result = anatomy(source)  # bridges every layout op, the returning casts among them
    else:
        result = collapse(read_where_made(source), level)
    return fold_repeats(result, sibling_content(graph)) if fold else result


def fold_calls(graph: nx.DiGraph) -> nx.DiGraph:
    """The graph with every call of a shared layer drawn as its first (ALBERT: one layer, × 12).

    A shared layer's calls run the same ops on the same weights, so like identical siblings
    they fold: the ops of call ``k`` stand with the op of call 0 in the same module at the same
    place, which then carries the FLOPs and bytes of every call. Edges between calls
    disappear (the fold stands for the chain); edges from outside are kept once. A graph
    without shared layers, or whose calls do not match op for op, comes back as it is.
    """
    from bertgraph.graph import roles

    shared = roles.shared_modules(graph)
    if not shared:
        return graph
    counterpart: dict[str, str] = {}
    call_of: dict[str, int] = {}
    for layer in shared:
        by_call: dict[tuple[str, int], list[str]] = defaultdict(list)
        for node in g.ops_in_order(graph):
            data = graph.nodes[node]
            if data.get(g.KIND) == g.OPERATOR and is_within(data.get(g.MODULE, ""), layer):
                call = int(data.get(g.CALL, 0))
                by_call[data.get(g.MODULE, ""), call].append(node)
                call_of[node] = call
        for (module, call), nodes in by_call.items():
            first = by_call.get((module, 0), [])
            if call and len(first) != len(nodes):
                return graph  # the calls differ: drawn one after another
            if call:
                counterpart.update(zip(nodes, first))
    result = nx.DiGraph()
    result.graph.update(graph.graph)
    stands_for: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node, kept in counterpart.items():
        stands_for[kept].append(graph.nodes[node])
    for node in g.ops_in_order(graph):
        if node in counterpart:
            continue
        data = dict(graph.nodes[node])
        if node in stands_for:
            data.update(g.sum_costs([graph.nodes[node], *stands_for[node]]))
        result.add_node(node, **data)
    for source, target, data in sorted(graph.edges(data=True), key=lambda e: _edge_order(graph, e)):
        if source in call_of and target in call_of and call_of[source] != call_of[target]:
            continue  # from one call into the next: the fold stands for the chain
        a, b = counterpart.get(source, source), counterpart.get(target, target)
        if a != b and not result.has_edge(a, b):
            result.add_edge(a, b, **data)
    # Views take execution order for a topological order: a fold that would make an op outside the
    # layer feed one that ran before it (it read call 0 and fed call 1) stays unfolded, like a cycle.
    runs_forward = all(result.nodes[a][g.ORDER] <= result.nodes[b][g.ORDER] for a, b in result.edges)
    return result if runs_forward and nx.is_directed_acyclic_graph(result) else graph


# Ops that hand back their input itself when nothing needs converting (the export still records them).
_RETURNS_INPUT = frozenset(
    {"to", "_to_copy", "type_as", "contiguous", "alias", "detach", "lift_fresh_copy", "Identity"}
)


def made_by(graph: nx.DiGraph, node: str) -> str:
    """The op that made ``node``'s tensor: ``node`` itself, or the op a cast that returned its input read.

    LLaMA's RMSNorm starts with ``hidden_states.to(float32)``; on float32 that returns the very tensor
    it was given, and the export hands every later use of the tensor — the layer's residual add
    among them — to the cast's node.
    """
    while graph.nodes[node].get(g.ALIAS) and graph.nodes[node].get(g.OP) in _RETURNS_INPUT:
        data = graph.nodes[node]
        same = [
            p
            for p in graph.predecessors(node)
            if graph.nodes[p].get(g.SHAPE) == data.get(g.SHAPE) and graph.nodes[p].get(g.DTYPE) == data.get(g.DTYPE)
        ]
        if len(same) != 1:
            break
        node = same[0]
    return node


def read_where_made(graph: nx.DiGraph) -> nx.DiGraph:
    """``graph`` with each read of a tensor outside the module of a cast that returned it drawn from
    where the tensor was made (:func:`made_by`).

    The module's own ops still read the cast. Outside it the cast is a trace's artefact: drawn as
    it was, LLaMA's and Qwen's residuals started at the norm, as if the skip carried the
    normalised tensor. The new edge adds nothing a path did not already give, so views stay acyclic.
    """
    moved = []
    for source, target in graph.edges:
        data = graph.nodes[source]
        if data.get(g.OP) not in _RETURNS_INPUT or not data.get(g.ALIAS):
            continue
        if is_within(graph.nodes[target].get(g.MODULE, ""), data.get(g.MODULE, "")):
            continue
        origin = made_by(graph, source)
        if origin != source:
            moved.append((source, target, origin))
    if not moved:
        return graph
    result = graph.copy()
    for source, target, origin in moved:
        edge = result.edges[source, target]
        result.remove_edge(source, target)
        if not result.has_edge(origin, target):
            result.add_edge(origin, target, **edge)
    return result


def collapse(graph: nx.DiGraph, depth: int) -> nx.DiGraph:
    """Merge ops into the modules at display depth ``depth``.

    An op whose module is shallower than ``depth`` stays with that module; where the
    module also has children in the view, its own ops become a separate node
    (``own_ops``), e.g. the model's own attention-mask computation.
    """
    backbone = graph.graph.get(g.G_BACKBONE, "")

    def key(node: str, data: dict[str, Any]) -> str:
        levels = display_levels(data.get(g.MODULE, ""), backbone)
        if depth == 0 or not levels:
            return backbone if depth and backbone and is_within(data.get(g.MODULE, ""), backbone) else ""
        return levels[min(depth, len(levels)) - 1]

    return merge_nodes(graph, key)


def anatomy(graph: nx.DiGraph) -> nx.DiGraph:
    """Leaf modules as single nodes plus the computations modules do themselves.

    Layout ops are bridged over; the remaining own ops of one module that feed each
    other are merged (the embedding sums, the attention-mask computation).
    """
    modules = graph.graph.get(g.G_MODULES, {})
    parents = {path.rsplit(".", 1)[0] if "." in path else "" for path in modules if path}
    bridged = bridge_layout_ops(graph)

    def key(node: str, data: dict[str, Any]) -> str:
        module = data.get(g.MODULE, "")
        # A leaf module is one node; what a module with children does itself is its own ops.
        return module if module and module not in parents else own_ops_id(module)

    return merge_nodes(bridged, key, keep_ids=True)


def bridge_layout_ops(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy without layout ops; each one's inputs are wired to its consumers.

    A layout op that costs something (a copy writes a tensor) hands its cost on to the
    first op that reads it, or else to the op it reads, so the view's costs still add up.
    """
    result = graph.copy()
    repeats = _repeat_ops(graph)
    for node in g.ops_in_order(graph):
        data = result.nodes[node]
        if data.get(g.KIND) != g.OPERATOR or data.get(g.OP) not in LAYOUT_OPS or data.get(g.PARAMS):
            continue
        if not _hand_on_cost(result, node):
            continue
        sources = list(result.predecessors(node))
        for target in list(result.successors(node)):
            for source in sources:
                # A bridged repeat keeps the shape before it: grouped-query K and V both at the
                # key/value heads up to the op that reads the repeated tensor.
                edge = result.edges[source, node] if node in repeats else result.edges[node, target]
                if not result.has_edge(source, target):
                    result.add_edge(source, target, **edge)
        result.remove_node(node)
    return result


# A repeat of heads (transformers' ``repeat_kv``): unsqueeze, expand along the new axis, reshape it away.
_UNSQUEEZE = frozenset({"unsqueeze", "Unsqueeze"})
_EXPAND = frozenset({"expand", "Expand"})
_RESHAPE = frozenset({"reshape", "view", "Reshape"})


def _repeat_ops(graph: nx.DiGraph) -> set[str]:
    """The ops of every unsqueeze → expand → reshape chain, each link the only reader of the one before."""
    found: set[str] = set()
    for node in graph:
        if graph.nodes[node].get(g.OP) not in _EXPAND:
            continue
        before = [p for p in graph.predecessors(node) if graph.nodes[p].get(g.OP) in _UNSQUEEZE]
        after = [s for s in graph.successors(node) if graph.nodes[s].get(g.OP) in _RESHAPE]
        if len(before) == 1 and len(after) == 1 and graph.out_degree(before[0]) == graph.out_degree(node) == 1:
            found |= {before[0], node, after[0]}
    return found


def _hand_on_cost(graph: nx.DiGraph, node: str) -> bool:
    """Add ``node``'s cost to a neighbouring op; False when it costs something and has none."""
    data = graph.nodes[node]
    cost = g.sum_costs([data])
    if not any(value not in ("0", 0) for key, value in cost.items() if key != g.PARAM_BYTES):
        return True
    by_order = sorted(graph.successors(node), key=lambda n: (graph.nodes[n].get(g.ORDER, 0), n))
    by_order += sorted(graph.predecessors(node), key=lambda n: (-graph.nodes[n].get(g.ORDER, 0), n))
    for neighbour in by_order:
        if graph.nodes[neighbour].get(g.KIND) == g.OPERATOR:
            graph.nodes[neighbour].update(g.sum_costs([graph.nodes[neighbour], data]))
            return True
    return False


# --- merging nodes into groups ---------------------------------------------------------------


def merge_nodes(graph: nx.DiGraph, key: Callable[[str, dict[str, Any]], str], keep_ids: bool = False) -> nx.DiGraph:
    """Group operator nodes by ``key`` into module nodes; inputs and outputs stay.

    Group ids are module paths. A group is never two calls of one module: a module's ops run
    one call after another, so a call is a run of consecutive ops (in execution order), and a
    second call of a module (T5's stack dropout, after the embeddings and after the final
    norm) is a node of its own, ``path#2``. A group whose module is an ancestor of another
    group's module stands for the module's own ops (a key ending ``:ops`` says so outright);
    the runs of those that a child's call separates merge back wherever the view stays
    acyclic (GPT-2's two residual adds cannot: the second reads what the first fed through
    the feed-forward block), and the result becomes ``path:ops`` nodes, one per connected
    piece (``path:ops.1``, …), because ops that do not feed each other are separate steps
    (the position-id slice and the embedding sum). With ``keep_ids`` a group made of one op
    whose key is that op's id, or an own-ops piece of one op, keeps the op node as it is.

    Execution order is a topological order, so groups that are runs of it cannot form a
    cycle; merging runs is checked, so the view of a DAG is a DAG.
    """
    assignment: dict[str, str] = {}
    ops: list[str] = []
    keys: dict[str, str] = {}
    for node in g.ops_in_order(graph):
        data = graph.nodes[node]
        if data.get(g.KIND) in (g.INPUT, g.OUTPUT):
            assignment[node] = node
            continue
        ops.append(node)
        keys[node] = key(node, data)

    lone_ops = {k for n, k in keys.items() if keep_ids and k == n}
    module_keys = set(keys.values()) - lone_ops
    own_keys = {k for k in module_keys if k.endswith(_OWN_SUFFIX)}
    own_keys |= {k for k in module_keys if any(o != k and _is_module_ancestor(k, o) for o in module_keys)}
    # Own ops that do not feed each other are separate steps from the start; each such
    # piece is then cut where a child's call runs between its ops, and joined back where
    # the view stays acyclic.
    pieces: dict[str, str] = {}
    for own_key in own_keys:
        nodes = [n for n in ops if keys[n] == own_key]
        for number, piece in enumerate(_connected_pieces(graph, nodes)):
            pieces.update(dict.fromkeys(piece, f"{own_key}\n{number}"))
    piece_keys = {n: pieces.get(n, k) for n, k in keys.items()}
    groups = [(keys[nodes[0]], nodes) for _, nodes in _acyclic_groups(graph, ops, piece_keys, set(pieces.values()))]

    members: dict[str, list[str]] = {}
    module_of: dict[str, str] = {}  # group id → the module (or op id) its attributes come from
    own_groups: set[str] = set()
    numbered: dict[str, int] = defaultdict(int)
    # The anatomy (``keep_ids``) numbers a module's own-op nodes from ``.0`` when it has several.
    own_pieces: dict[str, list[list[str]]] = defaultdict(list)
    for group_key, nodes in groups:
        if group_key in own_keys:
            module = group_key[: -len(_OWN_SUFFIX)] if group_key.endswith(_OWN_SUFFIX) else group_key
            own_pieces[module] += [p for p in _connected_pieces(graph, nodes) if not (keep_ids and len(p) == 1)]
    from_zero = {m for m, found in own_pieces.items() if keep_ids and len(found) > 1}
    for group_key, nodes in groups:
        if group_key not in own_keys:
            call = numbered[group_key]
            numbered[group_key] += 1
            group_id = group_key if call == 0 else f"{group_key}{_CALL_MARK}{call + 1}"
            members[group_id] = nodes
            module_of[group_id] = group_key
            assignment.update(dict.fromkeys(nodes, group_id))
            continue
        module = group_key[: -len(_OWN_SUFFIX)] if group_key.endswith(_OWN_SUFFIX) else group_key
        for piece in _connected_pieces(graph, nodes):
            if keep_ids and len(piece) == 1:
                members[piece[0]] = piece
                module_of[piece[0]] = piece[0]
                assignment[piece[0]] = piece[0]
                continue
            number = numbered[module + _OWN_SUFFIX]
            numbered[module + _OWN_SUFFIX] += 1
            piece_id = own_ops_id(module) + (f".{number}" if number or module in from_zero else "")
            members[piece_id] = piece
            module_of[piece_id] = module
            own_groups.add(piece_id)
            assignment.update(dict.fromkeys(piece, piece_id))

    result = nx.DiGraph()
    result.graph.update(graph.graph)
    for node in g.ops_in_order(graph):
        group = assignment[node]
        if group in result:
            continue
        data = graph.nodes[node]
        if data.get(g.KIND) in (g.INPUT, g.OUTPUT) or (keep_ids and members[group] == [node] and group == node):
            result.add_node(group, **data)
            continue
        attrs = _group_attributes(graph, module_of[group], members[group], group in own_groups)
        result.add_node(group, **attrs)

    producers: dict[tuple[str, str], set[str]] = defaultdict(set)
    for source, target, data in sorted(graph.edges(data=True), key=lambda e: _edge_order(graph, e)):
        a, b = assignment[source], assignment[target]
        if a == b:
            continue
        if not result.has_edge(a, b):
            result.add_edge(a, b, **data)
        producers[a, b].add(source)
    for (a, b), sources in producers.items():
        if len(sources) > 1:
            result.edges[a, b][g.TENSORS] = len(sources)
    return result


_OWN_SUFFIX = ":ops"
_CALL_MARK = "#"  # ``encoder.dropout#2``: the module's second call


def _acyclic_groups(
    graph: nx.DiGraph, ops: list[str], keys: dict[str, str], mergeable: set[str]
) -> list[tuple[str, list[str]]]:
    """``ops`` (in execution order) as ``(key, members)`` groups whose quotient is acyclic.

    Each run of consecutive ops with one key starts as a group; runs of a ``mergeable`` key
    join an earlier group of that key unless some path leaves one and enters the other
    through a third group (which would make a cycle). Groups come out in execution order.
    """
    runs: list[list[str]] = []
    run_key: list[str] = []
    run_of: dict[str, int] = {}
    for node in ops:
        if not runs or run_key[-1] != keys[node]:
            runs.append([])
            run_key.append(keys[node])
        runs[-1].append(node)
        run_of[node] = len(runs) - 1
    successors: dict[int, set[int]] = defaultdict(set)
    predecessors: dict[int, set[int]] = defaultdict(set)
    for source, target in graph.edges:
        a, b = run_of.get(source), run_of.get(target)
        if a is not None and b is not None and a != b:
            successors[a].add(b)
            predecessors[b].add(a)

    def reaches_through_another(start: int, goal: int) -> bool:
        seen = set()
        stack = [n for n in successors[start] if n != goal]
        while stack:
            node = stack.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                stack.extend(successors[node])
        return False

    def join(keep: int, gone: int) -> None:
        for target in successors.pop(gone, set()):
            predecessors[target].discard(gone)
            if target != keep:
                successors[keep].add(target)
                predecessors[target].add(keep)
        for source in predecessors.pop(gone, set()):
            successors[source].discard(gone)
            if source != keep:
                predecessors[keep].add(source)
                successors[source].add(keep)
        runs[keep].extend(runs[gone])
        runs[gone] = []

    open_groups: dict[str, list[int]] = defaultdict(list)
    for index, group_key in enumerate(run_key):
        if group_key in mergeable:
            for earlier in open_groups[group_key]:
                if not reaches_through_another(earlier, index) and not reaches_through_another(index, earlier):
                    join(earlier, index)
                    break
            else:
                open_groups[group_key].append(index)
    return [
        (run_key[i], sorted(nodes, key=lambda n: (graph.nodes[n].get(g.ORDER, 0), n)))
        for i, nodes in enumerate(runs)
        if nodes
    ]


def _connected_pieces(graph: nx.DiGraph, nodes: list[str]) -> list[list[str]]:
    """``nodes`` split into weakly connected pieces, each and all in execution order."""
    pieces = [
        sorted(piece, key=lambda n: (graph.nodes[n].get(g.ORDER, 0), n))
        for piece in nx.weakly_connected_components(graph.subgraph(nodes))
    ]
    return sorted(pieces, key=lambda piece: (graph.nodes[piece[0]].get(g.ORDER, 0), piece[0]))


def _is_module_ancestor(group: str, other: str) -> bool:
    """Whether group (a module path or an op id) is a module strictly above ``other``."""
    return group == "" or other.startswith(group + ".")


def _edge_order(graph: nx.DiGraph, edge: tuple[str, str, dict[str, Any]]) -> tuple[int, int, str, str]:
    source, target, _ = edge
    return graph.nodes[source].get(g.ORDER, 0), graph.nodes[target].get(g.ORDER, 0), source, target


def _group_attributes(graph: nx.DiGraph, group: str, nodes: list[str], own_ops: bool) -> dict[str, Any]:
    """Attributes of the module node standing for ``nodes``."""
    first = graph.nodes[nodes[0]]
    is_module = group == "" or all(is_within(graph.nodes[n].get(g.MODULE, ""), group) for n in nodes)
    module = group if is_module else first.get(g.MODULE, "")
    info = g.module_info(graph, module)
    module_type = info.get("type") or (first.get(g.MODULE_TYPE, "") if module == first.get(g.MODULE) else "")
    if module == "" and not module_type:
        module_type = graph.graph.get(g.G_MODEL_CLASS, "")
    exit_node = _exit_node(graph, nodes)
    param_names = [name for n in nodes for name in graph.nodes[n].get(g.PARAM_NAMES, [])]
    attrs: dict[str, Any] = {
        g.KIND: g.MODULE_NODE,
        g.MODULE: module,
        g.MODULE_TYPE: module_type,
        g.SHAPE: graph.nodes[exit_node].get(g.SHAPE, []),
        g.DTYPE: graph.nodes[exit_node].get(g.DTYPE, ""),
        g.PARAMS: sum(int(graph.nodes[n].get(g.PARAMS, 0)) for n in nodes),
        g.PARAM_NAMES: param_names,
        g.ORDER: min(graph.nodes[n].get(g.ORDER, 0) for n in nodes),
        g.OPS: list(dict.fromkeys(graph.nodes[n].get(g.OP, "") for n in nodes)),
    }
    attrs.update(g.sum_costs(graph.nodes[n] for n in nodes))
    if own_ops or not is_module:
        attrs[g.OWN_OPS] = True
    repeat = max(int(graph.nodes[n].get(g.REPEAT, 1)) for n in nodes)
    if repeat > 1:
        attrs[g.REPEAT] = repeat
    return attrs


def _exit_node(graph: nx.DiGraph, nodes: list[str]) -> str:
    """The last node of a group whose output is used outside it: the group's output."""
    inside = set(nodes)
    leaving = [n for n in nodes if any(s not in inside for s in graph.successors(n))]
    return max(leaving or nodes, key=lambda n: graph.nodes[n].get(g.ORDER, 0))


# --- folding identical repeats ---------------------------------------------------------------
#
# Siblings fold only when identical, judged on their operator-level content: whatever the
# view's depth, a layer whose insides differ from its neighbours' (another activation, an
# extra op, other shapes or another mask) stays a box of its own. The digests come from the
# operator graph (``sibling_content``) and are checked again on the view, which also makes
# the siblings' view nodes match one to one.


def sibling_content(graph: nx.DiGraph) -> dict[str, str]:
    """A digest of every numbered sibling's content, keyed by its path (``…encoder.layer.3``).

    Computed on the operator graph, the digest covers every op below the sibling: op and
    full target, module type and path below the sibling, output shape and dtype, argument
    shapes, aliasing, parameter count and names, attention kind (where recorded), and the
    wiring — edges inside the sibling with their shapes, inputs from outside (a tensor that
    feeds only this sibling, like the hidden states passed down the stack, counts by its
    shape; a tensor several siblings read, like an attention mask, by where it comes from)
    and which ops are read outside.
    Two siblings with equal digests are interchangeable; their index and parameter names'
    prefix are left out.
    """
    return dict(_kept(graph, "sibling_content", lambda: _sibling_content(graph)))


def _sibling_content(graph: nx.DiGraph) -> dict[str, str]:
    content: dict[str, str] = {}
    for container in _list_containers(graph):
        for index, digest in _signatures(graph, container, _members(graph, container)).items():
            content[f"{container}.{index}"] = digest
    return content


def fold_repeats(graph: nx.DiGraph, content: dict[str, str] | None = None) -> nx.DiGraph:
    """Fold runs of identical siblings (``encoder.layer.0`` … ``.11``) into one.

    ``content`` is :func:`sibling_content` of the operator graph the view was made from;
    an operator graph supplies its own, a view cannot (its merged nodes no longer show
    what the siblings run), so folding a view without it is an error. Siblings are
    identical when their operator-level digests are equal and their nodes in ``graph``
    match one to one. The first sibling stands for the run: its module path becomes
    ``…layer.0-11``, its nodes carry ``repeat=12`` and the parameters of all twelve.
    Edges between siblings disappear, edges to and from the outside are kept once.
    """
    if content is None:
        if any(data.get(g.KIND) == g.MODULE_NODE for _, data in graph.nodes(data=True)):
            raise ValueError("fold a view with the sibling_content() of the operator graph it was made from")
        content = sibling_content(graph)
    result = graph
    parallel = parallel_lists(graph)
    interleaved = interleaved_lists(graph)
    for container in _list_containers(graph):
        if container not in parallel and container not in interleaved:
            result = _fold_container(result, container, content)
    return result


def interleaved_lists(graph: nx.DiGraph) -> frozenset[str]:
    """Numbered lists whose items hand data to each other through ops outside the list (VITS's
    flows, a flip between each two): folded, the list would feed those ops and they the list, a
    cycle, so neither the drawing nor ``summary`` folds them."""
    return frozenset(_kept(graph, "interleaved_lists", lambda: _interleaved_lists(graph)))


def _interleaved_lists(graph: nx.DiGraph) -> set[str]:
    found = set()
    for container in _list_containers(graph):
        members = _members(graph, container)
        if len(members) < 2:
            continue  # one item (a shared layer called again and again) has nothing to fold with
        inside = {node for nodes in members.values() for node in nodes}
        # from the list's outputs, walk only outside it: reaching the list again is a loop once folded
        seen: set[str] = set()
        todo = [b for a in inside for b in graph.successors(a) if b not in inside]
        while todo:
            node = todo.pop()
            if node in seen:
                continue
            seen.add(node)
            following = list(graph.successors(node))
            if any(b in inside for b in following):
                found.add(container)
                break
            todo += [b for b in following if b not in seen]
    return found


def parallel_lists(graph: nx.DiGraph) -> dict[str, tuple[str, ...]]:
    """Numbered lists of one parent that together make the layers (XLM's ``attentions``,
    ``layer_norm1``, ``ffns``, ``layer_norm2``): each list → the group, in path order.

    Lists are parallel when they have the same indices and run index by index — every op of
    index ``i`` of any of them before every op of index ``i + 1`` — so layer ``i`` is their
    ``i``-th items together. Folded one list at a time they would draw a cycle (the attentions box
    feeding the feed-forward box feeding the attentions box, through the parent's own adds between
    them), so neither the drawing nor ``summary`` folds them.
    """
    return dict(_kept(graph, "parallel_lists", lambda: _parallel_lists(graph)))


def _parallel_lists(graph: nx.DiGraph) -> dict[str, tuple[str, ...]]:
    by_parent: dict[str, list[str]] = defaultdict(list)
    for container in _list_containers(graph):
        by_parent[container.rsplit(".", 1)[0] if "." in container else ""].append(container)
    found: dict[str, tuple[str, ...]] = {}
    for containers in by_parent.values():
        indices = {container: frozenset(_members(graph, container)) for container in containers}
        for same in {frozenset(c for c in containers if indices[c] == index) for index in indices.values()}:
            group = tuple(sorted(same))
            if len(group) < 2 or len(indices[group[0]]) < 2:
                continue
            order: list[int] = []
            for node in g.ops_in_order(graph):
                module = str(graph.nodes[node].get(g.MODULE, ""))
                order += [i for i in (_member_of(module, c) for c in group) if i is not None]
            if order == sorted(order):  # index by index, not one list after another
                found.update(dict.fromkeys(group, group))
    return found


def _list_containers(graph: nx.DiGraph) -> list[str]:
    """Module paths whose children are numbered (``bert.encoder.layer``), outermost first."""
    found = set()
    for _, data in graph.nodes(data=True):
        parts = data.get(g.MODULE, "").split(".")
        for index in range(1, len(parts)):
            if _INDEX.match(parts[index]):
                found.add(".".join(parts[:index]))
    return sorted(found, key=lambda p: (p.count("."), p))


def _member_of(module: str, container: str) -> int | None:
    if not module.startswith(container + "."):
        return None
    head = module[len(container) + 1 :].split(".", 1)[0]
    return int(head) if _INDEX.match(head) else None


def _members(graph: nx.DiGraph, container: str) -> dict[int, list[str]]:
    """Index of each sibling in ``container`` → its nodes, in execution order."""
    members: dict[int, list[str]] = defaultdict(list)
    for node in g.ops_in_order(graph):
        index = _member_of(graph.nodes[node].get(g.MODULE, ""), container)
        if index is not None and graph.nodes[node].get(g.KIND) not in (g.INPUT, g.OUTPUT):
            members[index].append(node)
    return dict(members)


# Periods longer than this are not looked for: a stack's layer kinds repeat with a short period
# (ModernBERT: global attention every third layer).
MAX_PERIOD = 8


def fold_plan(keys: list[Any]) -> list[tuple[int, int, int]]:
    """How to fold a row of siblings: ``(start, period, count)`` segments covering every index.

    Siblings fold when they are identical (equal ``keys``). A run of one kind is a segment of
    period 1; kinds that alternate in a fixed pattern (``S S G S S G …``) make a segment whose
    period is the pattern's length, repeated ``count`` times. At each start the longest cover
    wins, the shorter period on a tie, so twelve identical layers are one run, never six pairs.

    >>> fold_plan(list("ABBBB"))
    [(0, 1, 1), (1, 1, 4)]
    >>> fold_plan(list("ASSGSSGSSG"))
    [(0, 1, 1), (1, 3, 3)]
    >>> fold_plan(list("ABAC"))
    [(0, 1, 1), (1, 1, 1), (2, 1, 1), (3, 1, 1)]
    """
    plan = []
    start = 0
    while start < len(keys):
        best = (1, 1)  # period, count
        for period in range(1, min(MAX_PERIOD, (len(keys) - start) // 2) + 1):
            count = 1
            while start + (count + 1) * period <= len(keys) and all(
                keys[start + count * period + offset] == keys[start + offset] for offset in range(period)
            ):
                count += 1
            if count > 1 and period * count > best[0] * best[1]:
                best = (period, count)
        plan.append((start, *best))
        start += best[0] * best[1]
    return plan


def _fold_container(graph: nx.DiGraph, container: str, content: dict[str, str]) -> nx.DiGraph:
    members = _members(graph, container)
    # A sibling whose content is unknown matches none.
    signatures = {
        index: (content.get(f"{container}.{index}", f"unknown {container}.{index}"), digest)
        for index, digest in _signatures(graph, container, members, outside=False).items()
    }
    counterpart: dict[str, str] = {}  # node of a folded sibling → node of the sibling standing for it
    rename: dict[str, int] = {}  # standing sibling's node → how many siblings it stands for
    ranges: dict[int, tuple[int, int, int]] = {}  # standing sibling → (first, last, step)
    segment: dict[str, tuple[int, int]] = {}  # folded node → (segment start, which period of it)
    indices = sorted(members)
    # Only consecutive indices fold together: a gap breaks the row.
    rows: list[list[int]] = []
    for index in indices:
        if rows and index == rows[-1][-1] + 1:
            rows[-1].append(index)
        else:
            rows.append([index])
    for row in rows:
        for start, period, count in fold_plan([signatures[i] for i in row]):
            if count == 1:
                continue
            for offset in range(period):
                first = row[start + offset]
                ranges[first] = (first, row[start + (count - 1) * period + offset], period)
                for repeat in range(count):
                    index = row[start + repeat * period + offset]
                    for node, rep in zip(members[index], members[first]):
                        counterpart[node] = rep
                        rename[rep] = count
                        segment[node] = (row[start], repeat)
    if not ranges:
        return graph

    member_index = {node: index for index, nodes in members.items() for node in nodes}
    result = nx.DiGraph()
    result.graph.update(graph.graph)
    new_id: dict[str, str] = {}
    params: dict[str, int] = defaultdict(int)
    names: dict[str, list[str]] = defaultdict(list)
    stands_for: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in counterpart:
        params[counterpart[node]] += int(graph.nodes[node].get(g.PARAMS, 0))
        names[counterpart[node]].extend(graph.nodes[node].get(g.PARAM_NAMES, []))
        stands_for[counterpart[node]].append(graph.nodes[node])
    for node in g.ops_in_order(graph):
        if node in counterpart and counterpart[node] != node:
            continue
        data = dict(graph.nodes[node])
        if node in rename:
            first, last, step = ranges[member_index[node]]
            old = f"{container}.{first}"
            new = f"{container}.{first}-{last}" + (f"/{step}" if step > 1 else "")
            data[g.MODULE] = new + data[g.MODULE][len(old) :]
            data[g.REPEAT] = int(data.get(g.REPEAT, 1)) * rename[node]
            data[g.PARAMS] = params[node]
            data[g.PARAM_NAMES] = names[node]
            data.update(g.sum_costs(stands_for[node]))
            new_id[node] = (
                new + node[len(old) :]
                if node.startswith(old) and node[len(old) : len(old) + 1] in ("", ".", ":")
                else node
            )
        else:
            new_id[node] = node
        result.add_node(new_id[node], **data)

    for source, target, data in sorted(graph.edges(data=True), key=lambda e: _edge_order(graph, e)):
        a, b = counterpart.get(source, source), counterpart.get(target, target)
        between_siblings = (
            source in segment
            and target in segment
            and segment[source][0] == segment[target][0]
            and segment[source][1] != segment[target][1]
        )
        if between_siblings:
            continue  # the fold itself stands for the chain of siblings (and of periods)
        a, b = new_id[a], new_id[b]
        if a != b and not result.has_edge(a, b):
            result.add_edge(a, b, **data)
    return result


def _signatures(
    graph: nx.DiGraph, container: str, members: dict[int, list[str]], outside: bool = True
) -> dict[int, str]:
    """Index → digest of each sibling in ``container`` (see ``sibling_content``).

    On a view (``outside=False``) the digest leaves out what comes in from outside the
    sibling: the operator graph's digest has judged that, and a view's merged edges would
    tell T5's block 1 (which reads block 0's output and its position bias as one edge) from
    blocks 2-5, which ``summary`` folds with it.
    """
    sibling_of = {node: index for index, nodes in members.items() for node in nodes}
    return {index: _signature(graph, container, index, members, sibling_of, outside) for index in members}


def _signature(
    graph: nx.DiGraph,
    container: str,
    index: int,
    members: dict[int, list[str]],
    sibling_of: dict[str, int],
    outside: bool = True,
) -> str:
    """A digest of sibling ``index``'s nodes and wiring that ignores its index."""
    prefix = f"{container}.{index}"
    nodes = members[index]
    position = {node: number for number, node in enumerate(nodes)}
    parts: list[Any] = []
    for node in nodes:
        data = graph.nodes[node]
        parts.append(
            (
                _relative(data.get(g.MODULE, ""), prefix),
                data.get(g.KIND),
                data.get(g.OP),
                data.get(g.TARGET),
                data.get(g.MODULE_TYPE),
                str(data.get(g.SHAPE)),
                data.get(g.DTYPE),
                str(data.get(g.INPUTS)),
                data.get(g.ALIAS, False),
                data.get(g.PARAMS),
                [_relative(name, prefix) for name in data.get(g.PARAM_NAMES, [])],
                [_relative(name, prefix) for name in data.get(g.SHARED_PARAMS, [])],
                data.get(g.REPEAT, 1),
                data.get(g.OWN_OPS, False),
                g.attention_label(data),  # layers attending differently never fold together
            )
        )
        inputs: list[tuple[Any, ...]] = []
        for source in graph.predecessors(node):
            edge = graph.edges[source, node]
            facts = (str(edge.get(g.SHAPE)), edge.get(g.DTYPE), edge.get(g.ALIAS, False), edge.get(g.TENSORS, 1))
            if source in position:
                inputs.append(("inside", position[source], facts))
            elif not outside:
                continue
            elif len({sibling_of.get(n) for n in graph.successors(source)} - {None, sibling_of.get(source)}) > 1:
                # Read by several siblings: an attention mask. The sibling a tensor comes from does
                # not count: a pre-norm layer's last add feeds its own next step and the next layer.
                inputs.append(("shared", source, facts))
            else:
                inputs.append(("passed in", facts))  # the hidden states from the sibling before
        parts.append(sorted(inputs, key=repr))
        parts.append(any(target not in position for target in graph.successors(node)))
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _relative(name: str, prefix: str) -> str:
    """``name`` with the sibling's own path cut off (``…layer.3.attention`` → ``.attention``)."""
    return name[len(prefix) :] if name == prefix or name.startswith(prefix + ".") else name
