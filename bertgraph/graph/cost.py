"""The cost pass: FLOPs and bytes of every op as exact polynomials in the named dimensions.

:func:`annotate` reads each op's argument and output shapes (``inputs``, ``shape``, whose
dimensions are numbers or names like ``batch*seq``), looks its formula up in
:mod:`bertgraph.graph.formulas` and stores ``matmul_flops``, ``other_flops`` and
``activation_bytes`` as canonical polynomial text, and ``param_bytes``. Views sum them
(:func:`bertgraph.graph.schema.sum_costs`); the tables here sum them per module and
evaluate them at the sizes asked for.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import networkx as nx

from bertgraph.errors import BertgraphError
from bertgraph.graph import schema as g
from bertgraph.graph.formulas import FORMULAS, MATRIX_PRODUCTS, Call, numel, op_key
from bertgraph.graph.poly import Poly, PolyError, total

# Bytes per element of each dtype name the graph records.
ITEMSIZE: dict[str, int] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "complex128": 16,
    "complex64": 8,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint64": 8,
    "uint32": 4,
    "uint16": 2,
    "uint8": 1,
    "bool": 1,
}
SHAPE_UNKNOWN = "shape unknown"

# Whole-model quantities, each a polynomial (see model_totals).
FLOPS = "flops"
LINEAR_FLOPS = "linear_matmul_flops"
ATTENTION_FLOPS = "attention_matmul_flops"


class CostError(BertgraphError):
    """A cost that cannot be evaluated at the sizes asked for."""


def shape_poly(shape: Sequence[int | str]) -> tuple[Poly, ...]:
    """A recorded shape as polynomials; raises :class:`PolyError` for ``?`` or ``seq//2``."""
    return tuple(Poly.of(size) for size in shape)


def itemsize(dtype: str) -> int | None:
    return ITEMSIZE.get(dtype)


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


# --- reading the polynomials ----------------------------------------------------------------------


def node_poly(data: Mapping[str, Any], key: str) -> Poly:
    """A cost attribute of a node as a polynomial (0 when absent)."""
    value = data.get(key)
    return Poly.parse(value) if isinstance(value, str) else Poly()


def node_flops(data: Mapping[str, Any]) -> Poly:
    return node_poly(data, g.MATMUL_FLOPS) + node_poly(data, g.OTHER_FLOPS)


def reads_weights(data: Mapping[str, Any]) -> bool:
    """Whether an op reads a parameter (its matrix product is a linear layer's, not attention's)."""
    return bool(data.get(g.PARAM_NAMES) or data.get(g.SHARED_PARAMS))


def has_weight_operand(graph: nx.DiGraph, node: str) -> bool:
    """Whether an op multiplies by a weight: it reads a parameter, or the result of an op that reads
    nothing but parameters (an ONNX file's ``Transpose`` of a weight before its ``MatMul``)."""
    if reads_weights(graph.nodes[node]):
        return True
    return any(
        reads_weights(graph.nodes[source])
        and graph.in_degree(source) == 0
        and graph.nodes[source].get(g.KIND) == g.OPERATOR
        for source in graph.predecessors(node)
    )


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
    where = "ONNX shape inference" if graph.graph.get(g.G_SOURCE) == "onnx" else "tracing"
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


# --- sizes ----------------------------------------------------------------------------------------


def sequence_name(graph: nx.DiGraph) -> str:
    """The name of the sequence dimension: ``seq``, or ``sequence`` in ONNX files bertgraph wrote."""
    example = graph.graph.get(g.G_EXAMPLE, {})
    return "sequence" if "sequence" in example and "seq" not in example else "seq"


DECODER = "tgt"  # an encoder-decoder's decoder length


def has_decoder_length(graph: nx.DiGraph) -> bool:
    """Whether the graph's costs depend on a decoder length of their own (T5, BART)."""
    return DECODER in graph.graph.get(g.G_EXAMPLE, {})


def sizes_for(
    graph: nx.DiGraph,
    seq: int | None = None,
    batch: int | None = None,
    decoder: int | None = None,
    example: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """The example sizes of ``graph`` (or ``example``) with ``seq``, ``batch`` and the decoder
    length replaced where given.

    An encoder-decoder's decoder is as long as its input unless ``decoder`` says otherwise,
    as in the example bertgraph traces.
    """
    given = graph.graph.get(g.G_EXAMPLE, {}) if example is None else example
    sizes = {str(k): int(v) for k, v in given.items()}
    if seq is not None:
        sizes[sequence_name(graph)] = seq
        if DECODER in sizes:
            sizes[DECODER] = seq
    if decoder is not None:
        if DECODER not in sizes:
            raise CostError(
                f"{graph.graph.get(g.G_NAME) or 'this model'} has no decoder length: "
                "a decoder length applies to encoder-decoder models (t5-small, bart-base, …)"
            )
        sizes[DECODER] = decoder
    if batch is not None:
        sizes["batch"] = batch
    return sizes


def at_length(sizes: Mapping[str, int], name: str, length: int) -> dict[str, int]:
    """``sizes`` with the length ``name`` set, and the decoder length with it: a length sweep
    of an encoder-decoder keeps its decoder as long as its input."""
    at = {**sizes, name: length}
    if DECODER in at:
        at[DECODER] = length
    return at


def evaluate(poly: Poly, sizes: Mapping[str, int]) -> int:
    """``poly`` at ``sizes``, with a clear error for a dimension that has no size."""
    missing = sorted(poly.dims() - set(sizes))
    if missing:
        raise CostError(
            f"the cost depends on the dimension {missing[0]!r}, which has no size here "
            f"(known: {', '.join(sorted(sizes)) or 'none'})"
        )
    return poly.evaluate(sizes)


def size_label(sizes: Mapping[str, int]) -> str:
    """``batch=1, seq=128``."""
    return ", ".join(f"{name}={value}" for name, value in sizes.items())


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
    from bertgraph.graph.stats import summary_rows

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


# --- the cost table ---------------------------------------------------------------------------------


def _figure(poly: Poly, sizes_list: Sequence[Mapping[str, int]]) -> dict[str, Any]:
    return {"formula": str(poly), "readable": poly.readable(), "values": [evaluate(poly, s) for s in sizes_list]}


def attention_implementation(graph: nx.DiGraph) -> str:
    """The attention the graph runs, read off its ops: ``sdpa`` (one fused op holding no score
    matrix), ``eager`` (scores and a softmax, every score matrix held), or ``none``."""
    from bertgraph.graph.facts.walk import op

    ops = {op(graph, node) for node in graph}
    if "scaled_dot_product_attention" in ops:
        return "sdpa"
    return "eager" if "softmax" in ops or "Softmax" in ops else "none"


KV_CACHE = "kv_cache_bytes"
ONNX_ATTENTION_NOTE = (
    "an ONNX file records no attention kinds: the mask-aware attention FLOPs, the KV cache and the decode step "
    "are left out; run bertgraph cost on the model itself (a preset, a config folder or a hub id) for them"
)
ONNX_TRAINING_NOTE = (
    "an ONNX file is an inference graph: the activations autograd keeps for training are not counted; "
    "run bertgraph cost on the model itself for them"
)


def from_onnx(graph: nx.DiGraph) -> bool:
    """Whether the graph was read from an ONNX file (not traced)."""
    return graph.graph.get(g.G_SOURCE) == "onnx"


DECODE_FLOPS = "decode_flops_per_token"
KV_CACHE_NOTE = "no KV cache or decode step"
MASKED_ATTENTION_FLOPS = "attention_matmul_flops_masked"
# A mixture of experts' matmul FLOPs were every routed expert to run (the totals count the k a token runs).
ALL_EXPERTS_FLOPS = "all_experts_matmul_flops"


def planning_totals(graph: nx.DiGraph, dtype: str) -> tuple[dict[str, Poly], list[str]]:
    """Mask-aware attention FLOPs, and for a decoder its KV cache in ``dtype`` and one decode step's
    matmul FLOPs; with a note for each figure the graph cannot give (then it is left out, never guessed)."""
    from bertgraph.graph import generation, masked, moe

    found: dict[str, Poly] = {}
    notes: list[str] = []
    if from_onnx(graph):
        # ONNX keeps no attention facts (the mask is ops like any other), so a causal model's attention
        # would be counted as bidirectional and a decoder would seem to cache nothing: say so instead.
        notes.append(ONNX_ATTENTION_NOTE)
        return found, notes
    try:
        found[MASKED_ATTENTION_FLOPS] = masked.masked_attention_flops(graph)
    except CostError as error:
        notes.append(f"no mask-aware attention FLOPs: {error}")
    dense = moe.all_experts_matmul_flops(graph, model_totals(graph)[g.MATMUL_FLOPS])
    if dense is not None:  # a mixture of experts: the matmul FLOPs above are the experts a token runs
        found[ALL_EXPERTS_FLOPS] = dense
    if generation.is_generative(graph):
        try:  # both or neither, as the note says
            cache, step = generation.kv_cache_bytes(graph, dtype), generation.decode_step_flops(graph)
        except CostError as error:
            notes.append(f"{KV_CACHE_NOTE}: {error}")
        else:
            found[KV_CACHE], found[DECODE_FLOPS] = cache, step
    return found, notes


def cost_report(
    graph: nx.DiGraph,
    sizes_list: Sequence[Mapping[str, int]],
    depth: int | None = None,
    fold: bool = True,
    dtype: str | None = None,
    generate: int | None = None,
    frozen: Collection[str] = (),
) -> dict[str, Any]:
    """The ``cost --format json`` object: totals, the module tree, memory and training arithmetic.

    ``generate``: tokens to generate after a prefill at each size (a decoder's ``generate`` entry).
    ``frozen``: parameter names trained without gradients (no gradient, no optimizer state, no saved inputs).
    """
    from bertgraph.graph import generation, memory, saved

    if not has_costs(graph):
        annotate(graph)
    totals = model_totals(graph)
    all_flops = [evaluate(totals[FLOPS], s) for s in sizes_list]
    # what autograd keeps, charged to the ops that made it, so each module's row has its share
    kept = None if from_onnx(graph) else saved.saved_activation_bytes(graph, memory.frozen_names(graph, frozen))
    shown = graph if kept is None else saved.annotate_saved(graph, kept=kept)
    rows = []
    for row in cost_rows(shown, depth=depth, fold=fold):
        polys = row["polys"]
        values = [evaluate(polys[FLOPS], s) for s in sizes_list]
        rows.append(
            {
                **{k: row[k] for k in ("path", "name", "type", "level", "depth", "in_fold")},
                # a shared module (ALBERT's layer) sums every call; the label says how many
                **{k: row[k] for k in ("calls",) if k in row},
                "repeat": int(row.get("repeat", 1)),
                "matmul_flops": _figure(polys[g.MATMUL_FLOPS], sizes_list),
                "other_flops": _figure(polys[g.OTHER_FLOPS], sizes_list),
                "flops": _figure(polys[FLOPS], sizes_list),
                "share": [value / whole if whole else 0.0 for value, whole in zip(values, all_flops)],
                "activation_bytes": _figure(polys[g.ACTIVATION_BYTES], sizes_list),
                **({"saved_bytes": _figure(polys[g.SAVED_BYTES], sizes_list)} if kept is not None else {}),
            }
        )
    chosen = dtype or memory.traced_float_dtype(graph)
    training = memory.training_memory(graph, chosen, frozen)
    saved_values: list[int] | None = None
    if kept is not None:
        activations = _figure(kept.bytes, sizes_list)
        training["activations"] = {
            **activations,
            "dtype": memory.traced_float_dtype(graph),
            "unsupported": kept.unsupported,
        }
        saved_values = activations["values"]
        training["total_with_activations"] = [training["total"] + value for value in saved_values]
    peaks = [memory.peak_activation(graph, s, dtype) for s in sizes_list]
    planning, notes = planning_totals(graph, chosen)
    if saved_values is None:
        notes.append(ONNX_TRAINING_NOTE)
    extra: dict[str, Any] = {}
    if generate is not None and DECODE_FLOPS in planning:
        extra["generate"] = [
            generation.generate(graph, s, generate, totals[g.MATMUL_FLOPS], chosen) for s in sizes_list
        ]
    elif generate is not None and from_onnx(graph):
        raise CostError("--generate needs the attention facts an ONNX file does not record; run it on the model itself")
    elif generate is not None and generation.is_generative(graph):  # a decoder whose cache could not be counted
        why = next(note for note in notes if note.startswith(KV_CACHE_NOTE))
        raise CostError(f"{graph.graph.get(g.G_NAME) or 'this model'}: --generate cannot be planned, {why}")
    elif generate is not None:
        raise CostError(
            f"{graph.graph.get(g.G_NAME) or 'this model'} does not generate (no causal or cross-attention "
            "that caches keys); --generate applies to decoders such as gpt2 or t5-small"
        )
    return {
        "model": graph.graph.get(g.G_NAME, ""),
        "head": graph.graph.get(g.G_HEAD, ""),
        "model_class": graph.graph.get(g.G_MODEL_CLASS, ""),
        "sizes": [dict(s) for s in sizes_list],
        "total": {key: _figure(poly, sizes_list) for key, poly in {**totals, **planning}.items()},
        "assumptions": {
            "attention": attention_implementation(graph),
            "dtype": chosen,
            "flops": "matmul FLOPs count 2 per multiply-add, as torch.utils.flop_counter does; "
            f"{MASKED_ATTENTION_FLOPS} counts only the pairs the mask allows, which FlopCounterMode does not",
        },
        "notes": notes,
        **extra,
        "rows": rows,
        "memory": {
            "dtype": chosen,
            "parameter_bytes": memory.parameter_bytes(graph, dtype),
            "input_bytes": [memory.input_bytes(graph, s) for s in sizes_list],
            "peak_activation_bytes": [peak.bytes for peak in peaks],
            "peak_at": [peak.node for peak in peaks],
            "training_activation_bytes": saved_values,
        },
        "training": training,
        "unsupported": unsupported(graph),
    }


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
