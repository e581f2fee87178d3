"""The cost table: what ``bertgraph cost`` reports, combining every cost module at the sizes asked for.

Totals and the folded module tree from the cost pass (:mod:`bertgraph.graph.cost`), peak and
training memory (:mod:`~bertgraph.graph.memory`, :mod:`~bertgraph.graph.saved`), and the planning
figures — attention over the pairs its mask allows (:mod:`~bertgraph.graph.masked`), a mixture of
experts' dense count (:mod:`~bertgraph.graph.moe`), a decoder's KV cache and decode step
(:mod:`~bertgraph.graph.generation`) — each evaluated with :func:`bertgraph.graph.costbase.evaluate`.
Nothing below imports this module.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import networkx as nx

from bertgraph.graph import generation, masked, memory, moe, saved
from bertgraph.graph import schema as g
from bertgraph.graph.cost import FLOPS, annotate, cost_rows, has_costs, model_totals, unsupported
from bertgraph.graph.costbase import CostError, evaluate, from_onnx
from bertgraph.graph.facts.walk import op
from bertgraph.graph.poly import Poly

KV_CACHE = "kv_cache_bytes"
ONNX_ATTENTION_NOTE = (
    "an ONNX file records no attention kinds: the mask-aware attention FLOPs, the KV cache and the decode step "
    "are left out; run bertgraph cost on the model itself (a preset, a config folder or a hub id) for them"
)
ONNX_TRAINING_NOTE = (
    "an ONNX file is an inference graph: the activations autograd keeps for training are not counted; "
    "run bertgraph cost on the model itself for them"
)
# A latent cache's (MLA) keys and values per head, decompressed: what attention reads, what a cache keeping them holds.
KV_CACHE_DECOMPRESSED = "kv_cache_bytes_decompressed"
DECODE_FLOPS = "decode_flops_per_token"
KV_CACHE_NOTE = "no KV cache or decode step"
MASKED_ATTENTION_FLOPS = "attention_matmul_flops_masked"
# A mixture of experts' matmul FLOPs were every routed expert to run (the totals count the k a token runs).
ALL_EXPERTS_FLOPS = "all_experts_matmul_flops"


def _figure(poly: Poly, sizes_list: Sequence[Mapping[str, int]]) -> dict[str, Any]:
    return {"formula": str(poly), "readable": poly.readable(), "values": [evaluate(poly, s) for s in sizes_list]}


def attention_implementation(graph: nx.DiGraph) -> str:
    """The attention the graph runs, read off its ops: ``sdpa`` (one fused op holding no score
    matrix), ``eager`` (scores and a softmax, every score matrix held), or ``none``."""
    ops = {op(graph, node) for node in graph}
    if "scaled_dot_product_attention" in ops:
        return "sdpa"
    return "eager" if "softmax" in ops or "Softmax" in ops else "none"


def planning_totals(graph: nx.DiGraph, dtype: str) -> tuple[dict[str, Poly], list[str]]:
    """Mask-aware attention FLOPs, and for a decoder its KV cache in ``dtype`` and one decode step's
    matmul FLOPs; with a note for each figure the graph cannot give (then it is left out, never guessed)."""
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
            decompressed = generation.decompressed_kv_cache_bytes(graph, dtype)
            if decompressed is not None:
                found[KV_CACHE_DECOMPRESSED] = decompressed
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
