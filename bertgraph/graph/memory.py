"""Memory: the peak of one inference from tensor liveness, and the arithmetic of training.

**Peak activation memory.** Ops run in the graph's execution order. An op that is not an
``alias`` (a view, an in-place op, eval-mode dropout) writes a new tensor; that storage
lives until the last op that reads it — or a view of it — has run, and to the end when it
is a model output. The peak is the largest sum of live storages right after an op has
run, while its inputs are still live. This is what an executor that frees every tensor
after its last use holds — the code torch.fx generates for an exported program does
exactly that — and it leaves out model inputs and parameters, which are counted apart,
and scratch memory inside kernels. One op holds more than its output while it runs
(:func:`transient`): scaled dot-product attention on the CPU first turns a boolean mask
into a float one and its kernel writes the log-sum-exp of every query row beside the
output; both are freed when the op returns. Each storage is a polynomial in the named dimensions;
which op is the peak depends on the sizes (the feed-forward layer at short sequences,
attention scores at long ones), so the peak is computed per size.

**Training memory** is arithmetic on the parameter count — weights, gradients and Adam's
two moments, each in its dtype (:data:`TRAINING_STATES`); frozen parameters keep their weights
only — plus the activations autograd keeps for the backward pass (:mod:`bertgraph.graph.saved`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from contextlib import suppress
from fnmatch import fnmatchcase
from typing import Any, NamedTuple

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.costbase import evaluate, itemsize, shape_poly
from bertgraph.graph.formulas import FLOAT_DTYPES, numel
from bertgraph.graph.poly import Poly, PolyError

DTYPES = ("float32", "float16", "bfloat16")

# What each trainable parameter costs while training with Adam, and in which dtype. Half precision is
# mixed-precision training as in Micikevicius et al. 2018 and ZeRO (Rajbhandari et al. 2020, section 3.1):
# half-precision weights and gradients, plus float32 master weights and moments.
TRAINING_STATES: dict[str, tuple[tuple[str, str], ...]] = {
    "float32": (
        ("weights", "float32"),
        ("gradients", "float32"),
        ("Adam first moment", "float32"),
        ("Adam second moment", "float32"),
    ),
    **{
        half: (
            ("weights", half),
            ("gradients", half),
            ("master weights", "float32"),
            ("Adam first moment", "float32"),
            ("Adam second moment", "float32"),
        )
        for half in ("float16", "bfloat16")
    },
}


class Allocation(NamedTuple):
    """A tensor an op writes: its size, and the span of execution positions it is live for."""

    node: str
    numel: Poly
    dtype: str
    start: int
    end: int  # the last position that reads it; len(order) for a model output


class Peak(NamedTuple):
    bytes: int
    node: str  # the op right after which the peak is reached ("" without activations)
    unknown: list[str]  # ops whose output size is not a polynomial (left out)


def _bytes_per_element(dtype: str, override: str | None) -> int:
    chosen = override if override is not None and dtype in FLOAT_DTYPES else dtype
    return itemsize(chosen) or 0


def allocations(graph: nx.DiGraph) -> tuple[list[Allocation], list[str]]:
    """Every storage an op writes with its live span, and the ops whose size is unknown."""
    order = g.ops_in_order(graph)
    position = {node: index for index, node in enumerate(order)}
    end_of_run = len(order)
    root: dict[str, str | None] = {}
    sizes: dict[str, Poly] = {}
    unknown: list[str] = []
    for node in order:
        data = graph.nodes[node]
        if data.get(g.KIND) != g.OPERATOR:
            continue
        if data.get(g.ALIAS):
            shared = [s for s in graph.predecessors(node) if graph.edges[s, node].get(g.ALIAS)]
            root[node] = root.get(shared[0]) if shared else None  # None: a parameter's or an input's storage
            continue
        try:
            sizes[node] = numel(shape_poly(data.get(g.SHAPE, [])))
        except PolyError:
            unknown.append(node)
            continue
        root[node] = node
    last: dict[str, int] = {owner: position[owner] for owner in sizes}
    for node, owner in root.items():
        if owner is None or owner not in last:
            continue
        for target in graph.successors(node):
            at = end_of_run if graph.nodes[target].get(g.KIND) == g.OUTPUT else position[target]
            last[owner] = max(last[owner], at)
    found = [
        Allocation(owner, sizes[owner], str(graph.nodes[owner].get(g.DTYPE, "")), position[owner], last[owner])
        for owner in sizes
    ]
    return sorted(found, key=lambda a: (a.start, a.node)), unknown


# Bytes per element of the log-sum-exp the CPU attention kernel keeps per query row (float32 at any input dtype).
LOGSUMEXP_BYTES = 4
ATTENTION_TARGETS = ("aten.scaled_dot_product_attention.default",)


def transient(graph: nx.DiGraph, node: str) -> tuple[Poly, Poly]:
    """Elements an op holds only while it runs, beyond its output: (float-typed, float32).

    ``torch.nn.functional.scaled_dot_product_attention`` on the CPU converts a boolean mask
    into a float mask of the query's dtype before its fused kernel runs, and the kernel
    returns, besides the output, the log-sum-exp of each query row ([batch, heads, query
    length], float32). Every other op: nothing.
    """
    data = graph.nodes[node]
    if data.get(g.TARGET) not in ATTENTION_TARGETS:
        return Poly(), Poly()
    try:
        query = shape_poly(data[g.INPUTS][0])
    except (PolyError, IndexError, KeyError):
        return Poly(), Poly()
    mask = Poly()
    for source in graph.predecessors(node):
        edge = graph.edges[source, node]
        if edge.get(g.DTYPE) == "bool":
            with suppress(PolyError):
                mask = numel(shape_poly(edge.get(g.SHAPE, [])))
    return mask, numel(query[:-1])


def peak_activation(graph: nx.DiGraph, sizes: Mapping[str, int], dtype: str | None = None) -> Peak:
    """The peak bytes of live activations of one inference at ``sizes``.

    ``dtype`` (``float16``, …) counts floating-point tensors at that width instead of the traced one.
    """
    found, unknown = allocations(graph)
    starts: dict[int, int] = defaultdict(int)
    ends: dict[int, int] = defaultdict(int)
    for allocation in found:
        size = evaluate(allocation.numel, sizes) * _bytes_per_element(allocation.dtype, dtype)
        starts[allocation.start] += size
        ends[allocation.end] += size
    order = g.ops_in_order(graph)
    current = peak = 0
    peak_node = ""
    for index, node in enumerate(order):
        current += starts.get(index, 0)
        floats, lse = transient(graph, node)
        held = evaluate(floats, sizes) * _bytes_per_element(str(graph.nodes[node].get(g.DTYPE, "")), dtype)
        held += evaluate(lse, sizes) * LOGSUMEXP_BYTES
        if current + held > peak:
            peak, peak_node = current + held, node
        current -= ends.get(index, 0)
    return Peak(peak, peak_node, unknown)


def input_bytes(graph: nx.DiGraph, sizes: Mapping[str, int]) -> int:
    """Bytes of the model inputs at ``sizes`` (not part of the activation peak)."""
    result = 0
    for _, data in graph.nodes(data=True):
        if data.get(g.KIND) == g.INPUT:
            try:
                result += evaluate(numel(shape_poly(data.get(g.SHAPE, []))), sizes) * (
                    itemsize(str(data.get(g.DTYPE, ""))) or 0
                )
            except PolyError:
                continue
    return result


def traced_float_dtype(graph: nx.DiGraph) -> str:
    """The dtype most parameters have (``float32`` for a model built from its config)."""
    counts = Counter(str(row.get("dtype", "float32")) for row in g.parameter_rows(graph))
    return counts.most_common(1)[0][0] if counts else "float32"


def parameter_bytes(graph: nx.DiGraph, dtype: str | None = None) -> int:
    """Bytes of the parameters (tied ones once), each at its dtype or at ``dtype`` when given."""
    return sum(
        int(row["numel"]) * _bytes_per_element(str(row.get("dtype", "float32")), dtype)
        for row in g.parameter_rows(graph)
    )


def training_memory(graph: nx.DiGraph, dtype: str = "float32", frozen: Collection[str] = ()) -> dict[str, Any]:
    """Weights, gradients and Adam states of training in ``dtype`` (see :data:`TRAINING_STATES`).

    Frozen parameters — ``trainable`` false in the graph, or named in ``frozen`` — count their weights only.
    """
    if dtype not in TRAINING_STATES:
        raise ValueError(f"training memory is known for {', '.join(TRAINING_STATES)}, not {dtype}")
    rows = g.parameter_rows(graph)
    unknown = sorted(set(frozen) - {str(r["name"]) for r in rows})
    if unknown:
        raise ValueError(f"no parameter named {unknown[0]!r} to freeze; names are as in model.named_parameters()")

    def is_trainable(row: Mapping[str, Any]) -> bool:
        return bool(row.get("trainable", True)) and row["name"] not in frozen

    trainable = sum(int(r["numel"]) for r in rows if is_trainable(r))
    fixed = sum(int(r["numel"]) for r in rows if not is_trainable(r))
    parts = []
    for index, (what, kind) in enumerate(TRAINING_STATES[dtype]):
        size = itemsize(kind) or 0
        count = trainable + (fixed if index == 0 else 0)
        parts.append({"what": f"{what} ({kind})", "dtype": kind, "bytes_per_parameter": size, "bytes": count * size})
    return {
        "dtype": dtype,
        "trainable_parameters": trainable,
        "frozen_parameters": fixed,
        "rows": parts,
        "total": sum(part["bytes"] for part in parts),
        "bytes_per_parameter": sum(part["bytes_per_parameter"] for part in parts),
    }


def freeze_patterns(graph: nx.DiGraph, patterns: Sequence[str]) -> list[str]:
    """The parameter names ``patterns`` choose: a parameter's name, a module path (every parameter
    below it) or a glob over names (``encoder.layer.[0-5].*``). A pattern that chooses nothing is
    refused, so a typo never counts the whole model as trainable."""
    names = [str(row["name"]) for row in g.parameter_rows(graph)]
    chosen: dict[str, None] = {}
    for pattern in patterns:
        found = [n for n in names if n == pattern or n.startswith(pattern + ".") or fnmatchcase(n, pattern)]
        if not found:
            example = names[0] if names else "embeddings.word_embeddings.weight"
            raise ValueError(
                f"--freeze {pattern!r} matches no parameter; give a parameter name, a module path or a glob "
                f"as in model.named_parameters() (e.g. {example!r})"
            )
        chosen.update(dict.fromkeys(found))
    return list(chosen)


def frozen_names(graph: nx.DiGraph, frozen: Collection[str] = ()) -> frozenset[str]:
    """Parameters that get no gradient: those the graph marks not trainable, and ``frozen``."""
    return frozenset(frozen) | {str(r["name"]) for r in g.parameter_rows(graph) if not r.get("trainable", True)}
