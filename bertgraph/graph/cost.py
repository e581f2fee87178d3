"""The cost pass: FLOPs and bytes of every op as exact polynomials in the named dimensions.

:func:`annotate` reads each op's argument and output shapes (``inputs``, ``shape``, whose
dimensions are numbers or names like ``batch*seq``), looks its formula up in
:mod:`bertgraph.graph.formulas` and stores ``matmul_flops``, ``other_flops`` and
``activation_bytes`` as canonical polynomial text, and ``param_bytes``. Views sum them
(:func:`bertgraph.graph.schema.sum_costs`); this module sums them over the model and per
module (:func:`model_totals`, :func:`module_costs`, :func:`cost_rows`) and finds where attention
overtakes the linear layers. What it builds on is in :mod:`bertgraph.graph.costbase`; the
``cost`` table that combines it with memory and planning is :mod:`bertgraph.graph.costtable`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.costbase import (
    CostError,
    at_length,
    evaluate,
    from_onnx,
    has_weight_operand,
    itemsize,
    node_flops,
    node_poly,
    sequence_name,
    shape_poly,
)
from bertgraph.graph.formulas import FORMULAS, MATRIX_PRODUCTS, Call, numel, op_key
from bertgraph.graph.poly import Poly, PolyError, total
from bertgraph.graph.stats import summary_rows

SHAPE_UNKNOWN = "shape unknown"

# Whole-model quantities, each a polynomial (see model_totals).
FLOPS = "flops"
LINEAR_FLOPS = "linear_matmul_flops"
ATTENTION_FLOPS = "attention_matmul_flops"


# --- the pass -----------------------------------------------------------------------------------


def annotate(graph: nx.DiGraph) -> nx.DiGraph:
    """Add the cost attributes to every op of ``graph`` (in place) and return it."""
    dtypes = {row["name"]: str(row.get("dtype", "float32")) for row in g.parameter_rows(graph)}
    numels = {row["name"]: int(row["numel"]) for row in g.parameter_rows(graph)}
    for _, data in graph.nodes(data=True):
        if data.get(g.KIND) == g.OPERATOR:
            data.update(op_cost(data, dtypes, numels))
    return graph


def op_cost(data: Mapping[str, Any], dtypes: Mapping[str, str], numels: Mapping[str, int]) -> dict[str, Any]:
    """The cost attributes of one op node."""
    target = str(data.get(g.TARGET) or data.get(g.OP, ""))
    result: dict[str, Any] = {
        g.PARAM_BYTES: sum(
            numels.get(name, 0) * (itemsize(dtypes.get(name, "float32")) or 4) for name in data.get(g.PARAM_NAMES, [])
        )
    }
    dtype = str(data.get(g.DTYPE, ""))
    try:
        out = shape_poly(data.get(g.SHAPE, []))
        inputs = [shape_poly(shape) for shape in data.get(g.INPUTS, [])]
    except PolyError:
        result[g.COST_UNSUPPORTED] = [f"{target} ({SHAPE_UNKNOWN})"]
        return result
    size = itemsize(dtype)
    if size is None:
        result[g.COST_UNSUPPORTED] = [f"{target} (dtype {dtype or 'unknown'})"]
        return result
    result[g.ACTIVATION_BYTES] = "0" if data.get(g.ALIAS) else str(numel(out) * size)
    function = FORMULAS.get(op_key(target))
    if function is None:
        result[g.COST_UNSUPPORTED] = [target]
        return result
    try:
        flops = function(Call(inputs, out, dtype))
    except IndexError:  # fewer recorded arguments than the formula reads
        result[g.COST_UNSUPPORTED] = [f"{target} ({SHAPE_UNKNOWN})"]
        return result
    result[g.MATMUL_FLOPS] = str(flops.matmul)
    result[g.OTHER_FLOPS] = str(flops.other)
    return result


def has_costs(graph: nx.DiGraph) -> bool:
    return any(g.PARAM_BYTES in data for _, data in graph.nodes(data=True))


def model_totals(graph: nx.DiGraph) -> dict[str, Poly]:
    """Whole-model polynomials: matmul, other and all FLOPs, matmul FLOPs of linear layers
    (an operand is a parameter) and of attention (both operands activations), activation bytes."""
    nodes = [node for node, data in graph.nodes(data=True) if data.get(g.KIND) == g.OPERATOR]
    ops = [graph.nodes[node] for node in nodes]
    matmul = [node_poly(data, g.MATMUL_FLOPS) for data in ops]
    weighted = [has_weight_operand(graph, node) for node in nodes]
    return {
        g.MATMUL_FLOPS: total(matmul),
        g.OTHER_FLOPS: total(node_poly(data, g.OTHER_FLOPS) for data in ops),
        FLOPS: total(node_flops(data) for data in ops),
        LINEAR_FLOPS: total(m for m, weight in zip(matmul, weighted) if weight),
        ATTENTION_FLOPS: total(m for m, weight in zip(matmul, weighted) if not weight),
        g.ACTIVATION_BYTES: total(node_poly(data, g.ACTIVATION_BYTES) for data in ops),
    }


def uncounted_products(graph: nx.DiGraph) -> dict[str, int]:
    """Ops that multiply matrices but have no cost (their shapes are unknown) → how many there are.

    Without them the matmul FLOPs would be short, so the ``cost`` command refuses such a graph.
    """
    found: Counter[str] = Counter()
    for _, data in graph.nodes(data=True):
        target = str(data.get(g.TARGET) or data.get(g.OP, ""))
        if data.get(g.KIND) == g.OPERATOR and data.get(g.COST_UNSUPPORTED) and op_key(target) in MATRIX_PRODUCTS:
            found[target] += 1
    return dict(sorted(found.items()))


def check_products_counted(graph: nx.DiGraph, name: str | None = None) -> None:
    """Raise :class:`CostError` (one line, saying why) when a matrix product has no cost."""
    missing = uncounted_products(graph)
    if not missing:
        return
    # An einsum's FLOPs depend on its equation, which no formula sees: say so, not that shapes are unknown.
    unformulated = {op: n for op, n in missing.items() if op_key(op) not in FORMULAS}
    if unformulated:
        missing = unformulated
    count = sum(missing.values())
    names = ", ".join(f"{n} × {op}" if n > 1 else op for op, n in missing.items())
    where = "ONNX shape inference" if from_onnx(graph) else "tracing"
    products = f"{count} matrix product{'s' if count > 1 else ''} ({names})"
    model = name or graph.graph.get(g.G_NAME) or "the model"
    if unformulated:
        raise CostError(
            f"{model}: {products} {'have' if count > 1 else 'has'} no FLOP formula in bertgraph, so the matmul "
            "FLOPs cannot be counted exactly; summary and params still count the model"
        )
    raise CostError(
        f"{model}: {products} {'have' if count > 1 else 'has'} shapes {where} could not work out, so the matmul "
        "FLOPs cannot be counted exactly; give the model's config, or an ONNX file whose shapes are known "
        "(bertgraph onnx writes one)"
    )


def unsupported(graph: nx.DiGraph) -> dict[str, int]:
    """Ops without a cost (no formula, or shapes that are not polynomials) → how many there are."""
    found: Counter[str] = Counter()
    for _, data in graph.nodes(data=True):
        if data.get(g.KIND) == g.OPERATOR:
            found.update(data.get(g.COST_UNSUPPORTED, []))
    return dict(sorted(found.items()))


# --- per module -------------------------------------------------------------------------------------


def _ancestors(path: str) -> list[str]:
    parts = path.split(".") if path else []
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def module_costs(graph: nx.DiGraph) -> dict[str, dict[str, Poly]]:
    """Every module path → its matmul, other and all FLOPs and activation bytes (ops below it)."""
    sums: dict[str, dict[str, list[Poly]]] = defaultdict(lambda: defaultdict(list))
    for _, data in graph.nodes(data=True):
        if data.get(g.KIND) != g.OPERATOR:
            continue
        values = {key: node_poly(data, key) for key in g.POLY_ATTRS}
        for path in _ancestors(str(data.get(g.MODULE, ""))):
            for key, value in values.items():
                sums[path][key].append(value)
    result = {}
    for path, keys in sums.items():
        entry = {key: total(keys.get(key, [])) for key in g.POLY_ATTRS}
        entry[FLOPS] = entry[g.MATMUL_FLOPS] + entry[g.OTHER_FLOPS]
        result[path] = entry
    return result


def cost_rows(graph: nx.DiGraph, depth: int | None = None, fold: bool = True) -> list[dict[str, Any]]:
    """The folded module tree (:func:`bertgraph.graph.stats.summary_rows`) with each row's polynomials.

    A folded row (``(0-11)``) sums every module it stands for; a row inside a folded group
    is one instance (``in_fold``), as in ``summary``.
    """
    costs = module_costs(graph)
    empty = {key: Poly() for key in (*g.POLY_ATTRS, FLOPS)}
    rows = []
    for row in summary_rows(graph, depth=depth, fold=fold):
        members = _members(row["path"], int(row.get("repeat", 1)))
        polys = {key: total(costs.get(m, empty)[key] for m in members) for key in empty}
        rows.append({**row, "polys": polys})
    return rows


def _members(path: str, repeat: int) -> list[str]:
    """The module paths a folded row stands for: ``…layer.0`` with repeat 12 → layers 0 … 11."""
    if repeat == 1 or "." not in path:
        return [path]
    parent, first = path.rsplit(".", 1)
    if not first.isdigit():
        return [path]
    return [f"{parent}.{int(first) + index}" for index in range(repeat)]


def crossover(linear: Poly, attention: Poly, sizes: Mapping[str, int], name: str, limit: int = 10**7) -> int | None:
    """The smallest length (dimension ``name``) at which ``attention`` reaches ``linear``, other sizes fixed
    (but an encoder-decoder's decoder length, which follows ``name``; see :func:`at_length`).

    None when it does not happen below ``limit`` (no quadratic term, say).
    """

    def ahead(length: int) -> bool:
        at = at_length(sizes, name, length)
        return evaluate(attention, at) >= evaluate(linear, at)

    if ahead(1):
        return 1
    high = 2
    while not ahead(high):
        high *= 2
        if high > limit:
            return None
    low = high // 2  # not ahead; high is
    while high - low > 1:
        middle = (low + high) // 2
        if ahead(middle):
            high = middle
        else:
            low = middle
    return high


def flops_curves(graph: nx.DiGraph, lengths: Iterable[int], sizes: Mapping[str, int]) -> dict[str, list[int]]:
    """Linear-layer and attention matmul FLOPs and other FLOPs at each length (for the report's plot)."""
    totals = model_totals(graph)
    name = sequence_name(graph)
    curves: dict[str, list[int]] = {LINEAR_FLOPS: [], ATTENTION_FLOPS: [], g.OTHER_FLOPS: []}
    for length in lengths:
        at = at_length(sizes, name, length)
        for key in curves:
            curves[key].append(evaluate(totals[key], at))
    return curves
