"""Tables computed from the graph: parameter statistics, the folded module tree, head diffs.

Everything returned here is plain data (dicts, lists, ints, strings), ready for
``json.dumps`` and for the text and Markdown renderers.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any

import networkx as nx

from bertgraph.graph import roles
from bertgraph.graph import schema as g
from bertgraph.graph.facts.summary import architecture
from bertgraph.graph.views import (
    display_levels,
    display_name,
    fold_plan,
    interleaved_lists,
    parallel_lists,
    sibling_content,
)

_CONTAINER_TYPES = frozenset({"ModuleList", "ModuleDict"})


def _ancestors(path: str) -> list[str]:
    """``a.b.c`` → ``["", "a", "a.b", "a.b.c"]``."""
    parts = path.split(".") if path else []
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def module_params(graph: nx.DiGraph) -> dict[str, int]:
    """Parameters below every module path (tied parameters counted once, at their owner)."""
    totals: dict[str, int] = defaultdict(int)
    for row in g.parameter_rows(graph):
        for path in _ancestors(row["module"]):
            totals[path] += int(row["numel"])
    return dict(totals)


def module_table(graph: nx.DiGraph) -> dict[str, dict[str, Any]]:
    """The recorded module table, or one derived from node attributes when absent."""
    table = graph.graph.get(g.G_MODULES)
    if table:
        return table
    derived: dict[str, dict[str, Any]] = {"": {"type": graph.graph.get(g.G_MODEL_CLASS, "")}}
    for _, data in sorted(graph.nodes(data=True), key=lambda item: item[1].get(g.ORDER, 0)):
        module = data.get(g.MODULE, "")
        for path in _ancestors(module)[1:]:
            derived.setdefault(path, {"type": data.get(g.MODULE_TYPE, "") if path == module else ""})
    return derived


# --- parameters -------------------------------------------------------------------------------


def parameter_stats(graph: nx.DiGraph) -> dict[str, Any]:
    """Totals, groups by top-level module and one row per parameter.

    Returns the ``params --format json`` object::

        {"model", "head", "model_class", "total", "trainable", ("checkpoint", "remote_code"),
         "groups": {"embeddings": int, "encoder": int, "pooler": int, ...head modules...},
         "parameters": [{"name", "shape", "numel", "trainable"}]}
    """
    rows = g.parameter_rows(graph)
    backbone = graph.graph.get(g.G_BACKBONE, "")
    totals = module_params(graph)
    groups: dict[str, int] = {}
    chosen: set[str] = set()
    for path in module_table(graph):
        levels = display_levels(path, backbone)
        # A top-level list (GPT-2's ``h``) is one group; its items are not groups beside it.
        inside_group = any(ancestor in chosen for ancestor in _ancestors(path)[1:-1])
        if len(levels) == 1 and levels[0] == path and not inside_group:
            chosen.add(path)
            groups[display_name(path, backbone)] = totals.get(path, 0)
    root_own = sum(int(r["numel"]) for r in rows if not display_levels(r["module"], backbone))
    if root_own:
        groups["(model)"] = root_own
    found = {
        "model": graph.graph.get(g.G_NAME, ""),
        "head": graph.graph.get(g.G_HEAD, ""),
        "model_class": graph.graph.get(g.G_MODEL_CLASS, ""),
        "total": sum(int(r["numel"]) for r in rows),
        "trainable": sum(int(r["numel"]) for r in rows if r.get("trainable", True)),
        **_moe_keys(graph),
        **stored_keys(graph),
        "groups": groups,
        "parameters": [
            {
                "name": r["name"],
                "shape": list(r["shape"]),
                "numel": int(r["numel"]),
                "trainable": bool(r.get("trainable", True)),
            }
            for r in rows
        ],
    }
    return found


def stored_keys(graph: nx.DiGraph) -> dict[str, Any]:
    """``checkpoint`` (what the safetensors headers say, held to the parameters) and ``remote_code``
    (the ``auto_map`` classes not run), where the graph has them."""
    return {key: graph.graph[key] for key in (g.G_CHECKPOINT, g.G_REMOTE_CODE) if key in graph.graph}


def _moe_keys(graph: nx.DiGraph) -> dict[str, Any]:
    """``active``, ``experts``, ``experts_per_token`` of a mixture-of-experts model; none otherwise."""
    from bertgraph.graph.moe import active_parameters

    found = active_parameters(graph)
    return {} if found is None else {key: found[key] for key in ("active", "experts", "experts_per_token")}


# --- the module tree ---------------------------------------------------------------------------


def output_shapes(graph: nx.DiGraph) -> dict[str, list[list[int | str]]]:
    """Module path → shapes of the tensors that leave it, in execution order."""
    exits: dict[str, dict[str, int]] = defaultdict(dict)
    for source, target in graph.edges:
        s, t = graph.nodes[source], graph.nodes[target]
        if s.get(g.KIND) == g.INPUT:
            continue
        inside = set(_ancestors(s.get(g.MODULE, "")))
        outside = set(_ancestors(t.get(g.MODULE, ""))) if t.get(g.KIND) != g.OUTPUT else set()
        for path in inside - outside:
            exits[path][source] = s.get(g.ORDER, 0)
    shapes: dict[str, list[list[int | str]]] = {}
    for path, nodes in exits.items():
        seen: list[list[int | str]] = []
        for node in sorted(nodes, key=lambda n: (nodes[n], n)):
            shape = list(graph.nodes[node].get(g.SHAPE, []))
            if shape not in seen:
                seen.append(shape)
        shapes[path] = seen
    return shapes


def modules_used(graph: nx.DiGraph) -> set[str] | None:
    """The module paths some traced op runs in or reads a parameter of (with their ancestors: a
    tied table runs under another path, DeBERTa's position table is read, not called); None for
    a graph with no ops (a module tree without a trace, where nothing can be said of what runs)."""
    used: set[str] = set()
    for _, data in graph.nodes(data=True):
        if data.get(g.KIND) != g.OPERATOR:
            continue
        used.update(_ancestors(data.get(g.MODULE, "")))
        for name in data.get(g.PARAM_NAMES, []) + data.get(g.SHARED_PARAMS, []):
            used.update(_ancestors(name.rpartition(".")[0]))
    return used or None


def summary_rows(graph: nx.DiGraph, depth: int | None = None, fold: bool = True) -> list[dict[str, Any]]:
    """The module tree as rows, like ``print(model)`` with numbers, repeats folded.

    Each row: ``path``, ``name`` (``bert``, ``(0-11)``, ``query``), ``type``, ``sizes``,
    ``level`` (indent), ``params`` (all below; a folded row counts every repeat),
    ``each`` and ``repeat`` (folded rows; ``period`` when they are every period-th sibling
    of a repeating pattern, named ``(1, 4, …, 19)``), ``attention`` (an attention block's kind,
    where the graph records it), ``calls`` (a module run more than once, like ALBERT's shared
    layer), ``share`` (of the model total; rows inside a
    folded group count one instance, ``in_fold``), ``shapes`` (outputs) and ``depth``
    (display depth, what ``depth`` filters on). A module with parameters that no traced op runs
    in or reads (VITS's flows used only in training) has ``runs`` False: counted, never drawn.
    """
    table = module_table(graph)
    used = modules_used(graph)
    backbone = graph.graph.get(g.G_BACKBONE, "")
    totals = module_params(graph)
    total = totals.get("", 0) or sum(int(r["numel"]) for r in g.parameter_rows(graph))
    shapes = output_shapes(graph)
    children: dict[str, list[str]] = defaultdict(list)
    for path in table:
        if path:
            children[path.rsplit(".", 1)[0] if "." in path else ""].append(path)

    for kids in children.values():
        # Numbered siblings in index order, whatever order the table came in (a JSON file's is sorted).
        if kids and all(kid.rsplit(".", 1)[-1].isdigit() for kid in kids):
            kids.sort(key=lambda kid: int(kid.rsplit(".", 1)[-1]))
    content = sibling_content(graph)  # what each layer runs: the table alone misses a swapped op
    parallel = parallel_lists(graph)  # not the stack, and not folded: the drawing does not fold them
    unfolded = parallel.keys() | interleaved_lists(graph)  # nor lists whose items pass data through others
    shared = roles.shared_modules(graph)
    signature_cache: dict[str, str] = {}

    def signature(path: str) -> str:
        if path not in signature_cache:
            info = table.get(path, {})
            parts = [info.get("type"), info.get("sizes"), totals.get(path, 0), str(shapes.get(path)), content.get(path)]
            parts += [(child.rsplit(".", 1)[-1], signature(child)) for child in children[path]]
            signature_cache[path] = hashlib.sha256(repr(parts).encode()).hexdigest()
        return signature_cache[path]

    rows: list[dict[str, Any]] = []

    def visit(path: str, name: str, level: int, repeat: int, in_fold: bool, period: int = 1) -> None:
        info = table.get(path, {})
        params = totals.get(path, 0)
        row: dict[str, Any] = {
            "path": path,
            "name": name,
            "type": info.get("type", ""),
            "sizes": info.get("sizes", ""),
            "level": level,
            "depth": len(display_levels(path, backbone)),
            "params": params * repeat,
            "share": (params / total) if total else 0.0,
            "shapes": shapes.get(path, []),
            "in_fold": in_fold,
        }
        if used is not None and params and path not in used:
            row["runs"] = False
        if repeat > 1:
            row.update(each=params, repeat=repeat, share=params * repeat / total if total else 0.0)
        if period > 1:
            row["period"] = period  # one of the layers of a repeating pattern: every period-th sibling
        if shared.get(path, 1) > 1:
            row["calls"] = shared[path]  # one module run this often: its parameters counted once
        attention = g.attention_label(info)
        if attention:
            row["attention"] = attention
        rows.append(row)
        kids = children[path]
        container = info.get("type") in _CONTAINER_TYPES and path not in unfolded
        plan = (
            fold_plan([signature(kid) for kid in kids]) if fold and container else [(i, 1, 1) for i in range(len(kids))]
        )
        for start, period, count in plan:
            for offset in range(period):
                members = [kids[start + offset + period * n].rsplit(".", 1)[-1] for n in range(count)]
                if count == 1:
                    label = f"({members[0]})" if container else members[0]
                elif period == 1:
                    label = f"({members[0]}-{members[-1]})"
                else:
                    label = "(" + ", ".join(members if count <= 3 else [*members[:2], "…", members[-1]]) + ")"
                visit(kids[start + offset], label, level + 1, count, in_fold or repeat > 1, period)

    visit("", graph.graph.get(g.G_MODEL_CLASS, ""), 0, 1, False)
    if depth is None:
        return rows
    return [row for row in rows if row["depth"] <= depth]


def summary(graph: nx.DiGraph, depth: int | None = None, fold: bool = True) -> dict[str, Any]:
    """The ``summary --format json`` object: the model, its totals and the folded module tree."""
    totals = parameter_stats(graph)
    return {
        "model": graph.graph.get(g.G_NAME, ""),
        "head": graph.graph.get(g.G_HEAD, ""),
        "model_class": graph.graph.get(g.G_MODEL_CLASS, ""),
        "total": totals["total"],
        "trainable": totals["trainable"],
        **{key: totals[key] for key in ("active", "experts", "experts_per_token") if key in totals},
        **stored_keys(graph),
        **({"roles_inferred": True} if graph.graph.get(g.G_ROLES_FROM) else {}),
        "example": dict(graph.graph.get(g.G_EXAMPLE, {})),
        "rows": summary_rows(graph, depth=depth, fold=fold),
        "architecture": architecture(graph),
    }


# --- diff of two heads -----------------------------------------------------------------------


def _modules_by_display(graph: nx.DiGraph) -> dict[str, dict[str, Any]]:
    backbone = graph.graph.get(g.G_BACKBONE, "")
    table = module_table(graph)
    totals = module_params(graph)
    own: dict[str, int] = defaultdict(int)
    for row in g.parameter_rows(graph):
        own[row["module"]] += int(row["numel"])
    result = {}
    for path, info in table.items():
        if path == "" or path == backbone:
            continue
        result[display_name(path, backbone)] = {
            "path": path,
            "type": info.get("type", ""),
            "sizes": info.get("sizes", ""),
            "params": totals.get(path, 0),
            "own": own.get(path, 0),
        }
    return result


def _outputs(graph: nx.DiGraph) -> list[dict[str, Any]]:
    return [
        {"name": node, "shape": data.get(g.SHAPE, [])}
        for node, data in sorted(graph.nodes(data=True), key=lambda item: item[1].get(g.ORDER, 0))
        if data.get(g.KIND) == g.OUTPUT
    ]


def diff(a: nx.DiGraph, b: nx.DiGraph) -> dict[str, Any]:
    """What turns model ``a`` into model ``b``: modules added, removed and changed.

    Modules are matched by their path without the backbone prefix, so ``pooler`` of a
    BertModel matches ``bert.pooler`` of a model with a head. Only the top-most added
    or removed module of a subtree is listed; a changed module (other type, sizes or own
    parameters) counts the parameters it holds itself, so that added − removed + changed
    adds up to ``delta``.
    """
    ma, mb = _modules_by_display(a), _modules_by_display(b)

    def top_only(names: set[str]) -> list[str]:
        return sorted(
            (n for n in names if not any(n.startswith(o + ".") for o in names if o != n)),
            key=lambda n: list(mb if n in mb else ma).index(n),
        )

    added = [{"module": n, **{k: mb[n][k] for k in ("type", "sizes", "params")}} for n in top_only(set(mb) - set(ma))]
    removed = [{"module": n, **{k: ma[n][k] for k in ("type", "sizes", "params")}} for n in top_only(set(ma) - set(mb))]
    changed = []
    for name in [n for n in mb if n in ma]:
        x, y = ma[name], mb[name]
        if (x["type"], x["sizes"], x["own"]) != (y["type"], y["sizes"], y["own"]):
            # A changed module counts only the parameters it holds itself: its children's
            # changes are entries of their own.
            changed.append(
                {
                    "module": name,
                    "a": {"type": x["type"], "sizes": x["sizes"], "params": x["own"]},
                    "b": {"type": y["type"], "sizes": y["sizes"], "params": y["own"]},
                }
            )
    total_a = parameter_stats(a)["total"]
    total_b = parameter_stats(b)["total"]
    return {
        "a": _side(a, total_a),
        "b": _side(b, total_b),
        "added": added,
        "removed": removed,
        "changed": changed,
        "delta": total_b - total_a,
    }


def _side(graph: nx.DiGraph, total: int) -> dict[str, Any]:
    return {
        "model": graph.graph.get(g.G_NAME, ""),
        "head": graph.graph.get(g.G_HEAD, ""),
        "model_class": graph.graph.get(g.G_MODEL_CLASS, ""),
        "total": total,
        "outputs": _outputs(graph),
    }
