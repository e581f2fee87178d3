"""Layers that run more than once: ALBERT's one layer, called once per layer.

torch.export tells the calls of one module apart; tracing keeps the call index on each op
(``call``, absent for the first), so a module whose weight-reading ops carry call ``k``
runs ``k + 1`` times. Modules called equally often are grouped up to the largest module
in which every weight-reading module runs that often; the module the group lies in is the
shared one. Only a group that holds an attention op is a shared *layer*: DeBERTa runs its
query and key projections twice per layer (on the hidden states and on the relative
positions), which shares weights inside a layer, not a layer.
"""

from __future__ import annotations

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.facts.attention import attention_operators


def annotate_sharing(graph: nx.DiGraph) -> dict[str, int]:
    """Store (as ``shared_modules``) and return ``{module path: calls}``; ``calls`` also goes into
    the module's table entry, so views can draw ``AlbertLayer × 12 · shared weights``."""
    shared = shared_layers(graph)
    modules = graph.graph.get(g.G_MODULES, {})
    for path, count in shared.items():
        if isinstance(modules.get(path), dict):
            modules[path][g.M_CALLS] = count
    if shared:
        graph.graph[g.G_SHARED] = dict(sorted(shared.items()))
    return shared


def shared_layers(graph: nx.DiGraph) -> dict[str, int]:
    """``{layer path: calls}`` for every layer that runs more than once, read off the ops alone
    (the graph is not changed: views of a graph stored without this record ask here too)."""
    calls = module_calls(graph)
    attention = {str(graph.nodes[n].get(g.MODULE, "")) for n in attention_operators(graph)}
    shared: dict[str, int] = {}
    for module, count in sorted(calls.items()):
        if count < 2:
            continue
        top = module
        while top and all(c == count for path, c in calls.items() if _inside(path, _parent(top))):
            top = _parent(top)
        group = [path for path in calls if _inside(path, top)]
        common = _common_module(group)
        if any(_inside(found, common) for found in attention):
            shared[_stack_layer(graph, common)] = count
    return shared


def module_calls(graph: nx.DiGraph) -> dict[str, int]:
    """How many times each module that reads weights runs (1 + its ops' highest call index)."""
    calls: dict[str, int] = {}
    for _, data in graph.nodes(data=True):
        if data.get(g.KIND) != g.OPERATOR or not (data.get(g.PARAM_NAMES) or data.get(g.SHARED_PARAMS)):
            continue
        call = data.get(g.CALL, 0)
        module = str(data.get(g.MODULE, ""))
        calls[module] = max(calls.get(module, 1), (call if isinstance(call, int) else 0) + 1)
    return calls


def _stack_layer(graph: nx.DiGraph, path: str) -> str:
    """The layer of a stack that ``path`` lies in (``….albert_layer_groups.0``), else ``path``."""
    for container in graph.graph.get(g.G_STACKS, {}):
        if path.startswith(container + "."):
            return container + "." + path[len(container) + 1 :].split(".")[0]
    return path


def _parent(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ""


def _inside(path: str, module: str) -> bool:
    return not module or path == module or path.startswith(module + ".")


def _common_module(paths: list[str]) -> str:
    """The deepest module every path is in (``a.b.c`` and ``a.b.d`` → ``a.b``)."""
    parts = [path.split(".") if path else [] for path in paths]
    common: list[str] = []
    for level in zip(*parts):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return ".".join(common)
