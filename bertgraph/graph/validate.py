"""Is this data an annotated operator graph? Checks for graphs read back from disk (the cache).

:func:`node_link_problem` checks the plain JSON structure before networkx sees it;
:func:`graph_problem` checks the type of every attribute a view, table or renderer
reads, and the parameter invariant: the nodes count every parameter exactly once.
Each returns a short description of the first problem, or None.
"""

from __future__ import annotations

import re
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.poly import Poly, PolyError

_KINDS = frozenset({g.INPUT, g.OPERATOR, g.OUTPUT})


def _is_int(value: Any, minimum: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_shape(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(d, str) or _is_int(d) for d in value)


def _is_str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def node_link_problem(data: Any) -> str | None:
    """What keeps ``data`` from being node-link JSON of a directed graph, or None.

    >>> node_link_problem([]), node_link_problem({"directed": True, "multigraph": False, "graph": {},
    ...     "nodes": [{"id": "a"}], "edges": [{"source": "a", "target": "b"}]})
    ('not a JSON object', "edge 0 names a node that does not exist: 'b'")
    """
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("directed") is not True or data.get("multigraph") is not False:
        return "not a directed graph"
    if not isinstance(data.get("graph"), dict):
        return "no graph attributes"
    nodes, edges = data.get("nodes"), data.get("edges")
    if not isinstance(nodes, list) or not isinstance(edges, list):
        return "no node or edge list"
    ids = set()
    for index, node in enumerate(nodes):
        if not isinstance(node, dict) or not isinstance(node.get("id"), str):
            return f"node {index} has no string id"
        ids.add(node["id"])
    if len(ids) != len(nodes):
        return "two nodes share an id"
    for index, edge in enumerate(edges):
        if not isinstance(edge, dict):
            return f"edge {index} is not an object"
        for end in ("source", "target"):
            if not isinstance(edge.get(end), str) or edge[end] not in ids:
                return f"edge {index} names a node that does not exist: {edge.get(end)!r}"
    return None


def graph_problem(graph: nx.DiGraph) -> str | None:
    """What keeps ``graph`` from being a complete annotated operator graph, or None."""
    return (
        _graph_attribute_problem(graph.graph)
        or _node_problem(graph)
        or _edge_problem(graph)
        or _count_problem(graph)  # relies on the checks before it
    )


def _graph_attribute_problem(attrs: dict[str, Any]) -> str | None:
    for key in (g.G_NAME, g.G_MODEL_CLASS, g.G_HEAD, g.G_SOURCE, g.G_BACKBONE, g.G_WEIGHTS):
        if not isinstance(attrs.get(key), str):
            return f"graph attribute {key!r} is not a string"
    for key in (g.G_CONFIG, g.G_EXAMPLE, g.G_MODULES, g.G_TIED, g.G_VERSIONS):
        if not isinstance(attrs.get(key), dict):
            return f"graph attribute {key!r} is not a mapping"
    if not all(isinstance(k, str) and _is_int(v, 1) for k, v in attrs[g.G_EXAMPLE].items()):
        return "the example sizes are not positive whole numbers"
    if not _is_str_map(attrs[g.G_TIED]) or not _is_str_map(attrs[g.G_VERSIONS]):
        return "tied parameters or versions are not names"
    for path, info in attrs[g.G_MODULES].items():
        if not isinstance(path, str) or not isinstance(info, dict) or not isinstance(info.get(g.M_TYPE), str):
            return f"module {path!r} has no type"
        texts = {k: v for k, v in info.items() if k not in _MODULE_COUNTS}
        if not _is_str_map(texts) or not all(_is_int(v, 1) for k, v in info.items() if k in _MODULE_COUNTS):
            return f"module {path!r} has a malformed entry"
        found = _facts_problem(info)
        if found:
            return f"module {path!r} has {found}"
    found = _graph_facts_problem(attrs)
    if found:
        return found
    rows = attrs.get(g.G_PARAMETERS)
    if not isinstance(rows, list) or not rows:
        return "no parameter rows"
    for row in rows:
        if not (
            isinstance(row, dict)
            and isinstance(row.get("name"), str)
            and isinstance(row.get("module"), str)
            and isinstance(row.get("trainable"), bool)
            and _is_shape(row.get("shape"))
            and all(isinstance(d, int) for d in row["shape"])
            and _is_int(row.get("numel"))
        ):
            return f"parameter row {row!r:.80} is malformed"
        size = 1
        for dim in row["shape"]:
            size *= dim
        if size != row["numel"]:
            return f"parameter {row['name']!r} has {row['numel']} elements but shape {row['shape']}"
    return None


def _node_problem(graph: nx.DiGraph) -> str | None:
    kinds = set()
    for node, data in graph.nodes(data=True):
        kind = data.get(g.KIND)
        if not isinstance(kind, str) or kind not in _KINDS:
            return f"node {node!r} has kind {kind!r}"
        kinds.add(kind)
        if not all(isinstance(data.get(key), str) for key in (g.MODULE, g.MODULE_TYPE, g.DTYPE)):
            return f"node {node!r} lacks its module, module type or dtype"
        if kind == g.OPERATOR and not (isinstance(data.get(g.OP), str) and isinstance(data.get(g.TARGET), str)):
            return f"node {node!r} lacks its op"
        if not _is_shape(data.get(g.SHAPE)) or not _is_int(data.get(g.PARAMS)) or not _is_int(data.get(g.ORDER)):
            return f"node {node!r} has a malformed shape, parameter count or order"
        for key in (g.PARAM_NAMES, g.SHARED_PARAMS, g.COST_UNSUPPORTED):
            if key in data and not _is_str_list(data[key]):
                return f"node {node!r} has malformed {key}"
        found = _cost_problem(data) or _facts_problem(data)
        if found:
            return f"node {node!r} has {found}"
    if kinds != _KINDS:
        return "the graph lacks inputs, operators or outputs"
    if not nx.is_directed_acyclic_graph(graph):
        return "the graph has a cycle"
    return None


# Module-table keys holding counts; every other key of an entry is text.
_MODULE_COUNTS = frozenset({g.WINDOW, g.Q_HEADS, g.KV_HEADS, g.M_CALLS})


def _facts_problem(data: dict[str, Any]) -> str | None:
    """The attention facts of an op or a module entry, when present (graph/facts/)."""
    if g.ATTENTION in data and data[g.ATTENTION] not in g.ATTENTION_KINDS:
        return "an unknown attention kind"
    if g.PADDING_MASK in data and not isinstance(data[g.PADDING_MASK], str):
        return "a malformed padding mask"
    if any(key in data and not _is_int(data[key], 1) for key in (g.WINDOW, g.Q_HEADS, g.KV_HEADS)):
        return "a malformed window or head count"
    return None


_STACK_KINDS = ("encoder", "decoder")


def _graph_facts_problem(attrs: dict[str, Any]) -> str | None:
    """The graph-level summaries of the facts pass and the family record, when present."""
    for key in (g.G_FAMILY, g.G_MODEL_TYPE, g.G_STRUCTURE):
        if key in attrs and not isinstance(attrs[key], str):
            return f"graph attribute {key!r} is not a string"
    stacks = attrs.get(g.G_STACKS, {})
    if not (isinstance(stacks, dict) and all(isinstance(k, str) and v in _STACK_KINDS for k, v in stacks.items())):
        return "the stacks are not a mapping of layer lists to encoder or decoder"
    kinds = attrs.get(g.G_ATTENTION, {})
    if not (isinstance(kinds, dict) and all(isinstance(k, str) and isinstance(v, dict) for k, v in kinds.items())):
        return "the attention kinds are not a mapping of stacks"
    if not all(isinstance(k, str) and _is_int(n, 1) for found in kinds.values() for k, n in found.items()):
        return "the attention kinds are not counts"
    positions = attrs.get(g.G_POSITION, {})
    if not (isinstance(positions, dict) and all(isinstance(k, str) for k in positions)):
        return "the position kinds are not a mapping of stacks"
    if not all(isinstance(v, list) and all(p in g.POSITION_KINDS for p in v) for v in positions.values()):
        return "the position kinds are unknown"
    shared = attrs.get(g.G_SHARED, {})
    if not (isinstance(shared, dict) and all(isinstance(k, str) and _is_int(v, 2) for k, v in shared.items())):
        return "the shared modules are not call counts"
    return _checkpoint_problem(attrs)


def _checkpoint_problem(attrs: dict[str, Any]) -> str | None:
    """The checkpoint's summary and comparison, and the remote code not run, when present."""
    code = attrs.get(g.G_REMOTE_CODE, [])
    if not (isinstance(code, list) and all(isinstance(name, str) for name in code)):
        return "the remote code is not a list of class names"
    if not isinstance(attrs.get(g.G_QUANTIZATION_CONFIG, {}), dict):
        return "the quantization config is not a mapping"
    if not isinstance(attrs.get(g.G_STORED_DTYPE, ""), str):
        return "the stored dtype is not a dtype name"
    found = attrs.get(g.G_CHECKPOINT)
    if found is None:
        return None
    if not isinstance(found, dict) or not all(_is_int(found.get(key)) for key in ("files", "tensors", "bytes")):
        return "the checkpoint summary is malformed"
    dtypes, compared = found.get("dtypes"), found.get("compared")
    if not (isinstance(dtypes, dict) and all(isinstance(v, dict) and _is_int(v.get("bytes")) for v in dtypes.values())):
        return "the checkpoint's dtypes are malformed"
    if not (isinstance(compared, dict) and isinstance(compared.get("matches"), bool)):
        return "the checkpoint's comparison with the parameters is malformed"
    for side in ("not_in_model", "not_in_checkpoint"):
        part = compared.get(side)
        if not (isinstance(part, dict) and _is_int(part.get("tensors")) and isinstance(part.get("names"), list)):
            return f"the checkpoint's {side.replace('_', ' ')} is malformed"
    return None


def _cost_problem(data: dict[str, Any]) -> str | None:
    """The optional per-op facts the cost pass reads: argument shapes, aliasing, polynomials, bytes."""
    if g.INPUTS in data and not (isinstance(data[g.INPUTS], list) and all(_is_shape(s) for s in data[g.INPUTS])):
        return "malformed argument shapes"
    if g.ALIAS in data and not isinstance(data[g.ALIAS], bool):
        return "a malformed alias flag"
    literals = data.get(g.LITERALS, {})
    if not (isinstance(literals, dict) and all(isinstance(v, (int, float, str)) for v in literals.values())):
        return "malformed literal arguments"
    if g.PARAM_BYTES in data and not _is_int(data[g.PARAM_BYTES]):
        return "malformed parameter bytes"
    for key in g.POLY_ATTRS:
        if key in data and not _is_polynomial(data[key]):
            return f"a {key} that is not a polynomial"
    return None


# Canonical polynomial text never holds parentheses or large powers; anything else is refused
# before parsing, so a forged entry cannot make the parser expand (a + b)**1000000.
_UNSAFE_POLY = re.compile(r"[()]|\*\*\d{3,}")


def _is_polynomial(value: Any) -> bool:
    if not isinstance(value, str) or len(value) > 10_000 or _UNSAFE_POLY.search(value):
        return False
    try:
        return str(Poly.parse(value)) == value
    except PolyError:
        return False


def _edge_problem(graph: nx.DiGraph) -> str | None:
    for source, target, data in graph.edges(data=True):
        if not _is_shape(data.get(g.SHAPE)) or not isinstance(data.get(g.DTYPE), str):
            return f"edge {source!r} → {target!r} has a malformed shape or dtype"
        if g.ARGS in data and not (isinstance(data[g.ARGS], list) and all(_is_int(i) for i in data[g.ARGS])):
            return f"edge {source!r} → {target!r} has malformed argument positions"
    return None


def _count_problem(graph: nx.DiGraph) -> str | None:
    """The nodes own every parameter exactly once, with the row's size."""
    rows = {row["name"]: row["numel"] for row in graph.graph[g.G_PARAMETERS]}
    owned: dict[str, int] = {}
    for _, data in graph.nodes(data=True):
        names = data.get(g.PARAM_NAMES, [])
        if any(name in owned or name not in rows for name in names):
            return "a parameter is counted twice or is not in the parameter rows"
        owned.update({name: rows[name] for name in names})
        if data[g.PARAMS] != sum(rows[name] for name in names):
            return "a node's parameter count differs from the parameters it names"
    if set(owned) != set(rows):
        return "some parameters are read by no node"
    total = sum(rows.values())
    if total <= 0 or g.total_params(graph) != total:
        return "the parameter total is zero or differs from the parameter rows"
    return None
