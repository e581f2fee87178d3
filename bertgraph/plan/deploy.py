"""A deployment as arithmetic on the cost polynomials: memory per part, fits, the limits, the bounds.

At each size (``batch``, ``seq``) a GPU holds

    weights (as stored)  +  KV cache (in its dtype)  +  peak activations  +  overhead

The weights come from :mod:`~bertgraph.plan.weights`; the KV cache is
:func:`~bertgraph.graph.generation.kv_cache_elements` (grouped heads, sliding windows, a latent cache)
times the item size of ``--kv-dtype`` (fp8: 1 byte, exactly half of bfloat16); the activations are
the peak of one forward pass over the prompt (:func:`~bertgraph.graph.memory.peak_activation`, in the
compute dtype); the overhead is a stated number (CUDA context, the allocator's reserve).

**Limits.** The live activations after each op are polynomials (every storage alive then), so the
memory a size needs is the largest of a few polynomials plus the weights, the KV cache and the overhead;
each is non-decreasing in the length and in the batch. The longest context that fits at the batch
(and the largest batch at the context) is the largest whole number each polynomial allows, the smallest
of them — found by bisection on exact integer values — then checked by evaluation: the peak walked
again at that size fits, and one more token (or sequence) does not.

**Bounds.** Prefill cannot run faster than the GPU's dense tensor-core FLOP/s over the matmul FLOPs
of a token, nor decode faster than ``batch × bandwidth`` over the bytes each step must read: every
weight (a mixture of experts: the experts one token runs, in proportion) and the whole KV cache.
Both are upper bounds, not speeds: kernels, launches, other FLOPs and other traffic only slow a run down.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import networkx as nx

from bertgraph.graph import generation, memory, moe
from bertgraph.graph import schema as g
from bertgraph.graph.cost import model_totals
from bertgraph.graph.costbase import CostError, at_length, evaluate, from_onnx, itemsize, sequence_name
from bertgraph.graph.formulas import FLOAT_DTYPES
from bertgraph.graph.poly import Poly
from bertgraph.plan.gpus import DEFAULT_OVERHEAD, GIB, GPU
from bertgraph.plan.layouts import PlanError
from bertgraph.plan.weights import DEFAULT_GROUP, Weights, weights_for

# --kv-dtype names → the dtype the cache is held in.
KV_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16", "fp8": "float8_e4m3fn"}
# Searches stop here: past 2⁴⁰ tokens or sequences nothing is a plan.
SEARCH_LIMIT = 2**40
ONNX_NOTE = (
    "an ONNX file records no attention kinds, so no KV cache can be planned: no deployment; run bertgraph cost "
    "on the model itself for one"
)


class Request(NamedTuple):
    """What ``cost``'s deployment options ask for."""

    weights: str | None = None  # --weights: a float dtype, fp8, int8 or int4
    scheme: str | None = None  # --scheme: int4's layout (gptq, awq, nf4)
    group_size: int = DEFAULT_GROUP
    kv_dtype: str | None = None  # --kv-dtype
    dtype: str | None = None  # --dtype: the compute dtype
    gpu: GPU | None = None
    overhead_bytes: int = DEFAULT_OVERHEAD


def _bytes_per_element(dtype: str, compute: str) -> int:
    return itemsize(compute if dtype in FLOAT_DTYPES else dtype) or 0


def live_bytes(graph: nx.DiGraph, compute: str) -> list[Poly]:
    """The bytes alive right after each op, as polynomials (the storages :func:`memory.allocations` gives,
    floats at ``compute``, and what the op holds while it runs): the peak at a size is their largest value."""
    found, _ = memory.allocations(graph)
    starts: dict[int, Poly] = defaultdict(Poly)
    ends: dict[int, Poly] = defaultdict(Poly)
    for allocation in found:
        size = allocation.numel * _bytes_per_element(allocation.dtype, compute)
        starts[allocation.start] = starts[allocation.start] + size
        ends[allocation.end] = ends[allocation.end] + size
    current, result = Poly(), []
    for index, node in enumerate(g.ops_in_order(graph)):
        current = current + starts.get(index, Poly())
        floats, rows = memory.transient(graph, node)
        held = floats * _bytes_per_element(str(graph.nodes[node].get(g.DTYPE, "")), compute)
        result.append(current + held + rows * memory.LOGSUMEXP_BYTES)
        current = current - ends.get(index, Poly())
    return result


def envelope(polys: Sequence[Poly]) -> list[Poly]:
    """The polynomials no other one bounds term by term (with whole, non-negative coefficients, a term-wise
    bound holds at every size): the largest of these is the largest of all."""
    distinct = sorted(set(polys), key=str)

    def dominated(low: Poly, high: Poly) -> bool:
        terms = dict(high.terms())
        return all(c >= 0 for _, c in high.terms()) and all(0 <= c <= terms.get(m, 0) for m, c in low.terms())

    return [p for p in distinct if not any(q != p and dominated(p, q) for q in distinct)]


def largest(fits: Callable[[int], bool], limit: int = SEARCH_LIMIT) -> int | None:
    """The largest whole ``n`` ≥ 1 with ``fits(n)`` for a ``fits`` that holds up to some ``n`` and not after
    (None: not even 1; ``limit`` when it never stops holding)."""
    if not fits(1):
        return None
    low, high = 1, 2
    while high <= limit and fits(high):
        low, high = high, high * 2
    if high > limit:
        return limit
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


class _Memory:
    """The memory a deployment needs at any size: fixed bytes, the KV cache and the activation peak."""

    def __init__(self, graph: nx.DiGraph, fixed: int, kv: Poly, compute: str) -> None:
        self.graph, self.fixed, self.kv, self.compute = graph, fixed, kv, compute
        self.candidates = envelope(live_bytes(graph, compute)) or [Poly()]

    def activations(self, sizes: Mapping[str, int]) -> int:
        return memory.peak_activation(self.graph, sizes, self.compute).bytes

    def total(self, sizes: Mapping[str, int]) -> int:
        """Evaluated: the peak walked op by op (the check)."""
        return self.fixed + evaluate(self.kv, sizes) + self.activations(sizes)

    def solve(self, at: Callable[[int], dict[str, int]], capacity: int) -> int | None:
        """The largest ``n`` whose sizes ``at(n)`` fit ``capacity``, on the polynomials: each candidate's own
        largest ``n``, the smallest of them (None: not even ``n`` = 1 fits)."""

        def solved(poly: Poly) -> int | None:
            return largest(lambda n: self.fixed + evaluate(self.kv + poly, at(n)) <= capacity)

        answers = [solved(poly) for poly in self.candidates]
        return None if None in answers else min(a for a in answers if a is not None)

    def limit(self, at: Callable[[int], dict[str, int]], capacity: int) -> int | None:
        """:meth:`solve`, checked by evaluation: it fits, one more does not (else the evaluated search's answer)."""
        found = self.solve(at, capacity)

        def fits(n: int) -> bool:
            return self.total(at(n)) <= capacity

        exact = (found is None and not fits(1)) or (
            found is not None and fits(found) and (found == SEARCH_LIMIT or not fits(found + 1))
        )
        return found if exact else largest(fits)


def _kv_poly(graph: nx.DiGraph, dtype: str, notes: list[str]) -> Poly | None:
    if not generation.is_generative(graph):
        return Poly()
    try:
        return generation.kv_cache_elements(graph) * (itemsize(dtype) or 0)
    except CostError as error:
        notes.append(f"no KV cache can be planned ({error}): no memory limit or decode bound")
        return None


def _read_per_step(graph: nx.DiGraph, weights: Weights) -> tuple[int, str]:
    """Weight bytes one decode step must read, and how it is counted."""
    found = moe.active_parameters(graph)
    if found is None:
        return weights.bytes, "every weight"
    whole = sum(int(row["numel"]) for row in g.parameter_rows(graph))
    share = weights.bytes * found["active"] // whole
    return share, (
        f"the weights one token runs: {found['experts_per_token']} of {found['experts']} experts, the bytes in "
        "proportion to the parameters (experts stored like the rest)"
    )


def deployment(
    graph: nx.DiGraph, sizes_list: Sequence[Mapping[str, int]], request: Request | None = None
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The ``deployment`` object of ``cost --format json``, what it assumes, and notes.

    Raises:
        PlanError: a scheme, layout or GPU that cannot be planned (one line).
    """
    if from_onnx(graph):
        raise PlanError(ONNX_NOTE)
    request = request or Request()
    notes: list[str] = []
    weights = weights_for(graph, request.weights, request.scheme, request.group_size, request.dtype)
    notes += weights.notes
    compute = request.dtype or weights.float_dtype
    kv_dtype = KV_DTYPES.get(request.kv_dtype or compute, request.kv_dtype or compute)
    if itemsize(kv_dtype) is None:
        raise PlanError(f"--kv-dtype takes {', '.join(KV_DTYPES)}, not {request.kv_dtype!r}")
    kv = _kv_poly(graph, kv_dtype, notes)
    fixed = weights.bytes + request.overhead_bytes
    sizes_list = [dict(s) for s in sizes_list]
    kv_values = [evaluate(kv, s) for s in sizes_list] if kv is not None else None
    plan = _Memory(graph, fixed, kv or Poly(), compute)
    peaks = [plan.activations(s) for s in sizes_list]
    totals = [fixed + (kv_values[i] if kv_values else 0) + peaks[i] for i in range(len(sizes_list))]
    gpu = request.gpu
    name = sequence_name(graph)
    longest = max(sizes_list, key=lambda s: s.get(name, 0))
    found: dict[str, Any] = {
        "weights": {"scheme": weights.scheme, "bytes": weights.bytes},
        "kv_cache": {"dtype": kv_dtype, "bytes": kv_values},
        "peak_activation_bytes": peaks,
        "total_bytes": totals,
        "gpu": gpu.data() if gpu else None,
        "fits": None,
        "max_seq_len": None,
        "max_batch": None,
        "prefill_tokens_per_s_bound": None,
        "decode_tokens_per_s_bound": None,
    }
    read, read_words = _read_per_step(graph, weights)
    if gpu is not None:
        found["fits"] = [total <= gpu.memory_bytes for total in totals]
        if kv is not None:
            first = sizes_list[0]
            found["max_seq_len"] = plan.limit(lambda n: at_length(first, name, n), gpu.memory_bytes)
            found["max_batch"] = plan.limit(lambda b: {**longest, "batch": b}, gpu.memory_bytes)
        found["prefill_tokens_per_s_bound"] = _prefill(graph, sizes_list, gpu, name)
        if kv_values is not None and generation.is_generative(graph):
            found["decode_tokens_per_s_bound"] = [
                s.get("batch", 1) * gpu.bandwidth_bytes_per_s / (read + kv_values[i]) for i, s in enumerate(sizes_list)
            ]
    limit = graph.graph.get(g.G_CONFIG, {}).get("max_position")
    if isinstance(found["max_seq_len"], int) and isinstance(limit, int) and found["max_seq_len"] > limit:
        notes.append(
            f"the longest context that fits ({found['max_seq_len']:,} tokens) is past the model's {limit:,} positions"
        )
    assumed = _assumptions(graph, weights, compute, kv_dtype, request, read, read_words, longest)
    return found, assumed, notes


def _prefill(
    graph: nx.DiGraph, sizes_list: Sequence[Mapping[str, int]], gpu: GPU, name: str
) -> list[float | None] | None:
    if gpu.flops_per_s is None:
        return None
    matmul = model_totals(graph)[g.MATMUL_FLOPS]
    bounds: list[float | None] = []
    for sizes in sizes_list:
        flops = evaluate(matmul, sizes)
        tokens = sizes.get("batch", 1) * sizes.get(name, 1)
        bounds.append(gpu.flops_per_s * tokens / flops if flops else None)  # no products: no bound to state
    return bounds


def _assumptions(
    graph: nx.DiGraph,
    weights: Weights,
    compute: str,
    kv_dtype: str,
    request: Request,
    read: int,
    read_words: str,
    longest: Mapping[str, int],
) -> dict[str, Any]:
    """Every number a deployment rests on, named, so a run on a real GPU can be held to it."""
    found: dict[str, Any] = {
        "weights": {
            "source": weights.source,
            "parts": weights.parts,
            "float_dtype": weights.float_dtype,
            "quantized_layers": weights.quantized_layers,
            "kept_in_float": list(weights.kept_layers),
        },
        "compute_dtype": compute,
        "kv_cache": f"keys and values of every caching attention block at the context (sliding windows keep "
        f"w - 1 tokens), in {kv_dtype}",
        "activations": f"the peak of one forward pass over the prompt in {compute} (SDPA as traced), not kept "
        "between requests",
        "overhead_bytes": request.overhead_bytes,
        "overhead": f"{request.overhead_bytes / GIB:g} GiB for the CUDA context and the caching allocator's reserve "
        "(set with --gpu-overhead)",
        "max_batch_at": dict(longest),
        "decode_reads_bytes": read,
        "decode_reads": f"each decode step reads {read_words} and the whole KV cache once",
    }
    if request.gpu is not None:
        gpu = request.gpu
        found["gpu"] = {
            "source": gpu.source,
            "memory": "the datasheet's capacity in GiB (2^30 bytes); the driver reports a little less",
            "flops_dtype": gpu.flops_dtype,
            "flops": f"dense tensor-core peak in {gpu.flops_dtype}, matmul FLOPs only",
        }
    return found


def add_deployment(
    report: dict[str, Any], graph: nx.DiGraph, sizes_list: Sequence[Mapping[str, int]], request: Request | None = None
) -> dict[str, Any]:
    """``report`` (:func:`~bertgraph.graph.costtable.cost_report`'s) with its ``deployment``, what that assumes
    (``assumptions.deployment``) and its notes; an ONNX file's report as it is (no attention facts, no cache)."""
    if from_onnx(graph):
        return report
    found, assumed, notes = deployment(graph, sizes_list, request)
    report["deployment"] = found
    report.setdefault("assumptions", {})["deployment"] = assumed
    report.setdefault("notes", []).extend(notes)
    return report


PLOT_POINTS = 64
SHORTEST = 16


def memory_curve(graph: nx.DiGraph, sizes: Mapping[str, int], request: Request | None = None) -> dict[str, Any]:
    """Memory per part against the context length at ``sizes``' batch, for the figure: geometric lengths from
    16 to past the longest context that fits (or the model's positions), each part's bytes at each."""
    request = request or Request()
    found, assumed, _ = deployment(graph, [sizes], request)
    compute = assumed["compute_dtype"]
    kv_dtype = found["kv_cache"]["dtype"]
    kv = _kv_poly(graph, kv_dtype, []) or Poly()
    name = sequence_name(graph)
    positions = graph.graph.get(g.G_CONFIG, {}).get("max_position")
    reach = max(found["max_seq_len"] or 0, positions if isinstance(positions, int) else 0, sizes.get(name, 0), 64)
    longest = min(reach * 2, SEARCH_LIMIT)
    ratio = (longest / SHORTEST) ** (1 / (PLOT_POINTS - 1))
    lengths = sorted({round(SHORTEST * ratio**index) for index in range(PLOT_POINTS)})
    at = [at_length(sizes, name, n) for n in lengths]
    return {
        "name": name,
        "batch": sizes.get("batch", 1),
        "lengths": lengths,
        "parts": {
            f"weights ({found['weights']['scheme']})": [found["weights"]["bytes"]] * len(lengths),
            f"KV cache ({kv_dtype})": [evaluate(kv, s) for s in at],
            f"activations ({compute})": [memory.peak_activation(graph, s, compute).bytes for s in at],
            "overhead": [request.overhead_bytes] * len(lengths),
        },
        "gpu": found["gpu"],
        "max_seq_len": found["max_seq_len"],
        "positions": positions if isinstance(positions, int) else None,
    }
