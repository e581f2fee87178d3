"""The deployment in words: a table of memory per part at each size, then what fits, the bounds and what
they assume — the same rows and sentences for the terminal, Markdown and the report."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bertgraph.render import figures


def _bytes(value: int) -> str:
    return f"{figures.count(value)} B ({figures.size(value)})"


def _rate(value: float | None) -> str:
    """Tokens per second, whole (a bound: rounded down, so the printed figure is a bound too)."""
    return "—" if value is None else f"≤ {figures.count(int(value))} tokens/s"


def _labels(report: dict[str, Any]) -> list[str]:
    return [", ".join(f"{k}={v}" for k, v in s.items()) for s in report["sizes"]]


def deployment_table(report: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """Header and rows: weights, KV cache, activations, overhead and total at each size; with a GPU, whether
    it fits and the two bounds. None when the report has no deployment (an ONNX file's)."""
    found = report.get("deployment")
    if found is None:
        return None
    assumed = report["assumptions"]["deployment"]
    count = len(report["sizes"])
    kv = found["kv_cache"]
    rows = [
        [f"weights: {found['weights']['scheme']}", *[_bytes(found["weights"]["bytes"])] * count],
        [f"KV cache ({kv['dtype']})", *([_bytes(v) for v in kv["bytes"]] if kv["bytes"] else ["not known"] * count)],
        [f"peak activations ({assumed['compute_dtype']})", *map(_bytes, found["peak_activation_bytes"])],
        ["overhead", *[_bytes(assumed["overhead_bytes"])] * count],
        ["total", *map(_bytes, found["total_bytes"])],
    ]
    gpu = found["gpu"]
    if gpu is not None:
        rows.append(
            [
                f"fits {gpu['name']} ({figures.size(gpu['memory_bytes'])})",
                *("yes" if f else "no" for f in found["fits"]),
            ]
        )
        for name, key in (
            ("prefill bound", "prefill_tokens_per_s_bound"),
            ("decode bound", "decode_tokens_per_s_bound"),
        ):
            if found[key] is not None:
                rows.append([name, *map(_rate, found[key])])
    return ["deployment", *_labels(report)], rows


def deployment_sentences(report: dict[str, Any]) -> Iterable[str]:
    """What the table rests on, every assumption by name, and the limits on the GPU."""
    found = report.get("deployment")
    if found is None:
        return
    assumed = report["assumptions"]["deployment"]
    weights = assumed["weights"]
    parts = ", ".join(f"{part} {figures.size(value)}" for part, value in weights["parts"].items())
    kept = weights["kept_in_float"]
    held = (
        f"; {weights['quantized_layers']} linear layers quantized, {len(kept)} kept in {weights['float_dtype']}"
        + (f" ({', '.join(kept[:4])}{', …' if len(kept) > 4 else ''})" if kept else "")
        if weights["quantized_layers"]
        else ""
    )
    yield f"weights from {weights['source']}: {figures.size(found['weights']['bytes'])} ({parts}){held}"
    yield f"KV cache: {assumed['kv_cache']}; activations: {assumed['activations']}; overhead: {assumed['overhead']}"
    gpu = found["gpu"]
    if gpu is None:
        yield "no GPU named: give --gpu NAME (or --gpu-memory and --gpu-bandwidth) for fits, limits and bounds"
        return
    about = assumed["gpu"]
    yield f"{gpu['name']}: {about['source']}; memory {about['memory']}; FLOP/s: {about['flops']}"
    batch = report["sizes"][0].get("batch", 1)
    if found["max_seq_len"] is not None:
        yield (
            f"longest context that fits at batch {batch}: {figures.count(found['max_seq_len'])} tokens "
            f"({figures.count(found['max_seq_len'] + 1)} do not)"
        )
    elif found["kv_cache"]["bytes"] is not None:
        yield f"nothing fits at batch {batch}: the weights, overhead and one token's memory exceed the GPU's"
    if found["max_batch"] is not None:
        at = ", ".join(f"{k}={v}" for k, v in assumed["max_batch_at"].items() if k != "batch")
        yield (
            f"largest batch that fits at {at}: {figures.count(found['max_batch'])} "
            f"({figures.count(found['max_batch'] + 1)} does not)"
        )
    yield (
        "bounds, not speeds: prefill tokens/s ≤ FLOP/s ÷ matmul FLOPs per prompt token; decode tokens/s ≤ batch × "
        f"bandwidth ÷ bytes read per step ({assumed['decode_reads']}: "
        f"{figures.size(assumed['decode_reads_bytes'])} of weights); kernels, launches and other traffic only slow it"
    )
