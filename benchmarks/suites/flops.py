"""FLOPs of bert-base at sequence 128: bertgraph next to the counters people use; what cost adds to a render.

Each counter runs as its own process (``benchmarks/counters.py``) on the same model, as its
documentation shows, with transformers' default attention (sdpa) and with eager attention.
What it returns is stored as measured, with its unit (the record's ``facts``); the table
sets it beside bertgraph's exact count and says what it misses, from the measured gaps.

The second pair of commands is a cold render of bert-base (trace, SVG) with and without
the cost pass, whole processes alternating; the first also prints how long the pass took.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from typing import Any

from harness import HERE, Command, Context, Stored, Suite, Target, ratio
from measure import Series

COUNTERS = str(HERE / "counters.py")
TOOLS = ("bertgraph", "FlopCounterMode", "torchinfo", "ptflops (pytorch)", "ptflops (aten)", "calflops", "fvcore")
PACKAGES = {
    "bertgraph": "bertgraph",
    "FlopCounterMode": "torch",
    "torchinfo": "torchinfo",
    "ptflops (pytorch)": "ptflops",
    "ptflops (aten)": "ptflops",
    "calflops": "calflops",
    "fvcore": "fvcore",
}
# What each tool's number counts, read from its source; the "misses" column is measured.
COUNTS = {
    "bertgraph": "every op: matrix products exactly (2 per multiply-add), the rest by a per-element rule",
    "FlopCounterMode": "the mm, addmm, bmm and attention kernels it has formulas for, 2 per multiply-add",
    "torchinfo": "each module's parameters × its output's first dimension (the batch), as mult-adds",
    "ptflops (pytorch)": "patched modules and torch functions (Linear with bias, LayerNorm, softmax, matmul)",
    "ptflops (aten)": "the aten mm, addmm, bmm and convolutions it sees dispatched, as MACs",
    "calflops": "patched torch functions: linear and matmul at 2 per MAC, layer norm, softmax",
    "fvcore": "the ops of a TorchScript trace it has handles for (linear, matmul, layer norm), 1 per multiply-add",
}
MAC_UNITS = frozenset({"MACs", "mult-adds"})
WITH_COST, WITHOUT_COST = "render: trace + cost + SVG", "render: trace + SVG, no cost pass"

RENDER = """
import sys, time
from pathlib import Path
from bertgraph.model import resolve
from bertgraph.render import write_diagram
from bertgraph.tracing import trace
overrides = {"layers": 2, "hidden": 64, "heads": 2, "intermediate": 128} if sys.argv[3] == "smoke" else {}
graph = trace(resolve("bert-base-uncased", "sequence-classification", overrides=overrides))
seconds = 0.0
if sys.argv[1] == "cost":
    from bertgraph.graph.cost import annotate
    start = time.perf_counter()
    annotate(graph)
    seconds = time.perf_counter() - start
write_diagram(graph, Path(sys.argv[2]))
print(seconds)
"""


def counter_name(tool: str, attention: str) -> str:
    return f"{tool} ({attention})"


def run(ctx: Context) -> dict[str, Series]:
    smoke = ["--smoke"] if ctx.smoke else []
    counters = {
        counter_name(tool, attention): Command([sys.executable, COUNTERS, tool, attention, *smoke])
        for tool in TOOLS
        for attention in ("sdpa", "eager")
    }
    size = "smoke" if ctx.smoke else "full"
    renders = {
        WITH_COST: Command([sys.executable, "-c", RENDER, "cost", str(ctx.work / "cost.svg"), size]),
        WITHOUT_COST: Command([sys.executable, "-c", RENDER, "plain", str(ctx.work / "plain.svg"), size]),
    }
    return {**ctx.measure(counters, runs=1), **ctx.measure(renders)}


def facts(series: dict[str, Series]) -> dict[str, Any]:
    """Each counter's count as it printed it, by tool and attention, with the tool's version."""
    tools: dict[str, Any] = {}
    for tool in TOOLS:
        try:
            version = metadata.version(PACKAGES[tool])
        except metadata.PackageNotFoundError:
            version = "absent"
        entry: dict[str, Any] = {"version": version}
        for attention in ("sdpa", "eager"):
            measured = series[counter_name(tool, attention)].runs[-1].stdout.strip().splitlines()
            entry[attention] = json.loads(measured[-1])
        tools[tool] = entry
    with_cost, without = series[WITH_COST], series[WITHOUT_COST]
    render = {
        "with_cost_seconds": with_cost.seconds,
        "without_cost_seconds": without.seconds,
        "cost_pass_seconds": with_cost.span(),
    }
    return {"batch": 1, "seq": 128, "tools": tools, "render": render}


def in_flops(result: dict[str, Any]) -> int:
    """The count in FLOPs: a tool reporting MACs or mult-adds counts one per multiply-add, so ×2."""
    return int(result["value"]) * (2 if result["unit"] in MAC_UNITS else 1)


def misses(tool: str, results: dict[str, Any], reference: dict[str, Any]) -> str:
    """What the tool's count lacks next to bertgraph's matmul FLOPs, from the measured numbers."""
    if tool == "bertgraph":
        unsupported = reference.get("unsupported") or {}
        return "nothing: every op has a formula" if not unsupported else f"ops without a formula: {unsupported}"
    sdpa, eager = in_flops(results["sdpa"]), in_flops(results["eager"])
    attention, matmul = reference["attention_matmul_flops"], reference["matmul_flops"]
    notes = []
    if eager != sdpa:
        exact = ", exactly attention's matrix products" if eager - sdpa == attention else ""
        notes.append(f"with the default sdpa attention {eager - sdpa:,} FLOPs fewer than with eager{exact}")
    gap = eager - matmul
    if gap == -attention:
        notes.append("attention's matrix products even with eager attention")
    elif gap < 0:
        notes.append(f"even with eager attention {-gap:,} of the {matmul:,} matmul FLOPs ({-gap / matmul:.1%})")
    elif gap > 0:
        notes.append(f"adds {gap:,} FLOPs of other ops to the matrix products, by its own rule")
    return "; ".join(notes) or "nothing among the matrix products"


def facts_markdown(data: dict[str, Any]) -> list[str]:
    reference = data["tools"]["bertgraph"]["sdpa"]["detail"]
    lines = [
        f"FLOP counts of one forward pass, batch {data['batch']}, sequence {data['seq']} (`BertModel`, "
        "bert-base-uncased config, seeded random weights, CPU, `input_ids` only), as each tool reports them; "
        "MACs and mult-adds count one per multiply-add, ×2 gives FLOPs. bertgraph's exact figures: "
        f"{reference['matmul_flops']:,} matmul FLOPs ({reference['linear_matmul_flops']:,} in linear layers, "
        f"{reference['attention_matmul_flops']:,} in attention) and {reference['other_flops']:,} other FLOPs.",
        "",
        "| tool | reports (sdpa) | reports (eager) | unit | in FLOPs (eager) | counts | what it misses or adds |",
        "|---|---:|---:|---|---:|---|---|",
    ]
    for tool, results in data["tools"].items():
        sdpa, eager = results["sdpa"], results["eager"]
        lines.append(
            f"| {tool} {results['version']} | {sdpa['value']:,} | {eager['value']:,} | {eager['unit']} | "
            f"{in_flops(eager):,} | {COUNTS[tool]} | {misses(tool, results, reference)} |"
        )
    return lines


def readme_lines(data: dict[str, Any]) -> list[str]:
    """The README's table of FLOP counters (the Cost section)."""
    reference = data["tools"]["bertgraph"]["sdpa"]["detail"]
    lines = [
        "| tool | reports, transformers' default (sdpa) attention | in FLOPs | what it misses or adds |",
        "|---|---|---:|---|",
    ]
    for tool, results in data["tools"].items():
        sdpa = results["sdpa"]
        name = f"{tool} {results['version']}"
        reports = f"{sdpa['value']:,} {sdpa['unit']}"
        if tool == "bertgraph":
            reports += f" (+ {reference['other_flops']:,} other FLOPs)"
        lines.append(f"| {name} | {reports} | {in_flops(sdpa):,} | {misses(tool, results, reference)} |")
    render = data.get("render", {})
    if render.get("cost_pass_seconds") is not None:
        share = render["cost_pass_seconds"] / render["with_cost_seconds"]
        lines += [
            "",
            f"Computing cost took {render['cost_pass_seconds'] * 1000:.0f} ms of a cold `render` of bert-base "
            f"({share:.1%} of it).",
        ]
    return lines


def targets(stored: dict[str, Stored]) -> list[Target]:
    with_cost, without = stored.get(WITH_COST), stored.get(WITHOUT_COST)
    if with_cost is None or without is None or with_cost.span is None:
        return []
    share = with_cost.span / with_cost.seconds
    whole = ratio(with_cost.seconds, without.seconds)
    # The two processes differ by the cost pass alone, so its own span is what computing cost adds;
    # the whole-process ratio carries the machine's noise and is shown beside it.
    return [
        Target(
            "computing cost adds ≤ 10% to a cold render of bert-base",
            f"the cost pass {with_cost.span * 1000:.0f} ms = {share:.1%} of the render (whole processes "
            f"{with_cost.seconds:.2f} s with it, {without.seconds:.2f} s without: {whole:.2f} ×)",
            share <= 0.10,
        )
    ]


SUITE = Suite(
    name="flops",
    title="FLOP counters on bert-base; the cost pass in a cold render",
    order=80,
    run=run,
    targets=targets,
    notes=(
        "Counter processes are timed once each after the warm-up round (their counts do not vary); the two "
        "renders alternate for every recorded run. Span: the cost pass inside the process.",
    ),
    facts=facts,
    facts_markdown=facts_markdown,
    readme=readme_lines,
)
