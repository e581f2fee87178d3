"""``results.json`` → ``RESULTS.md`` and the README's comparison table.

Every figure either page shows is read from ``results.json``; nothing is typed in by hand.
Each suite's record says when, where, at which commit and how often it was measured, so a
file merged from runs on different days still says what each table is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness import Stored, Suite, Target

README_START = "<!-- benchmarks: generated from benchmarks/results.json by benchmarks/run.py -->"
README_END = "<!-- /benchmarks -->"


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def dump(results: dict[str, Any]) -> str:
    return json.dumps(results, indent=1, ensure_ascii=False) + "\n"


def stored(record: dict[str, Any]) -> dict[str, Stored]:
    return {name: Stored.from_json(data) for name, data in record["commands"].items()}


def targets_of(suites: dict[str, Suite], results: dict[str, Any]) -> list[tuple[str, Target]]:
    return [
        (name, target)
        for name, suite in suites.items()
        if name in results
        for target in suite.targets(stored(results[name]))
    ]


def table(items: dict[str, Stored]) -> list[str]:
    spans = any(item.span is not None for item in items.values())
    header = "| command | wall time (median) | range | peak RSS (median) | runs |"
    rule = "|---|---:|---:|---:|---:|"
    if spans:
        header, rule = header + " span in process (median) |", rule + "---:|"
    lines = [header, rule]
    for name, item in items.items():
        line = f"| {name} | {item.seconds:.2f} s | {item.spread} s | {item.peak_mb:.0f} MB | {len(item.runs)} |"
        if spans:
            line += f" {item.span:.2f} s |" if item.span is not None else " — |"
        lines.append(line)
    return lines


def _measured(record: dict[str, Any], machine: bool) -> str:
    warmup = record.get("warmup", 0)
    runs = record.get("runs", 1)
    how = f"{runs} recorded run{'s' if runs != 1 else ''} per command"
    how += f" after {warmup} warm-up round{'s' if warmup != 1 else ''}" if warmup else ", no warm-up"
    at = f" at commit {record['commit']}" if record.get("commit") else ""
    where = f" on {record['machine']}" if machine else ""
    return f"Measured {record['date']}{at}{where}; {how}, commands alternating."


def results_markdown(suites: dict[str, Suite], results: dict[str, Any]) -> str:
    lines = ["# bertgraph benchmarks", ""]
    lines.append(
        "Every command is a separate whole process (imports included), run as its users run it; the "
        "commands of a suite alternate (A B A B …) in one run, so each table compares like with like "
        "measured side by side. Peak RSS is the process's own (`wait4`). Figures are medians; every "
        "recorded run is in [results.json](results.json). Regenerate with `make bench` (all suites) or "
        "`.venv/bin/python benchmarks/run.py --suites svg,table` (the others are kept)."
    )
    machines = {record.get("machine") for record in results.values()}
    if len(machines) == 1:
        lines += ["", f"Machine: {machines.pop()}."]
    lines += ["", "## Targets", "", "| suite | target | measured | met |", "|---|---|---|---|"]
    for name, target in targets_of(suites, results):
        lines.append(f"| {name} | {target.text} | {target.measured} | {'yes' if target.met else '**no**'} |")
    for name, suite in suites.items():
        if name not in results:
            continue
        record = results[name]
        lines += ["", f"## {suite.title}", "", _measured(record, machine=len(machines) > 1), ""]
        lines += table(stored(record))
        if suite.figure is not None and record.get("figure"):
            lines += ["", f"![{suite.title}]({record['figure']})"]
        if suite.facts_markdown is not None and record.get("facts"):
            lines += ["", *suite.facts_markdown(record["facts"])]
        for note in suite.notes:
            lines += ["", note]
    unknown = sorted(set(results) - set(suites))
    if unknown:
        lines += ["", f"Stored results of suites that no longer exist: {', '.join(unknown)}."]
    return "\n".join(lines) + "\n"


def _fig(item: Stored, memory: bool = True) -> str:
    return f"{item.seconds:.2f} s, {item.peak_mb:.0f} MB" if memory else f"{item.seconds:.2f} s"


def _span(item: Stored) -> str:
    return "" if item.span is None else f" ({item.span:.2f} s from model build to result)"


def readme_table(results: dict[str, Any]) -> str:
    """The README's "How it compares" table: each bertgraph command against its fairest peer."""
    rows = [
        "| task (bert-base + classification head) | bertgraph | peer at its best | second line |",
        "|---|---|---|---|",
    ]
    if "svg" in results:
        s = stored(results["svg"])
        rows.append(
            f"| SVG diagram | `render`: {_fig(s['bertgraph render (cold)'])} "
            f"({s['bertgraph render (warm cache)'].seconds:.2f} s from the graph cache) "
            f"| torchview on the meta device: {_fig(s['torchview (meta device)'])} "
            f"| torchview with real weights: {_fig(s['torchview (real weights)'])} |"
        )
    if "table" in results:
        t = stored(results["table"])
        rows.append(
            f"| module table with output shapes | `summary`: {_fig(t['bertgraph summary (cold)'])} "
            f"({t['bertgraph summary (warm cache)'].seconds:.2f} s from the graph cache) "
            f"| torchinfo `summary` on the meta device: {_fig(t['torchinfo summary (meta device)'])} "
            f"| `params` (no trace): {_fig(t['bertgraph params (no trace)'])} |"
        )
    if "trace" in results:
        r = stored(results["trace"])
        ours, bare = r["bertgraph trace + graph"], r["bare torch.export"]
        rows.append(
            f"| trace + annotated graph | {_fig(ours)}{_span(ours)} "
            f"| bare `torch.export` of the same model: {_fig(bare)}{_span(bare)} | — |"
        )
    if "onnx-memory" in results:
        o = stored(results["onnx-memory"])
        ours, bare = o["bertgraph onnx CHECKPOINT (verified)"], o["bare torch.onnx.export + save of CHECKPOINT"]
        rows.append(
            f"| ONNX export of a saved checkpoint, verified | `onnx`: {_fig(ours)} "
            f"| bare `torch.onnx.export` + save, unverified: {_fig(bare)} | — |"
        )
    if "huge" in results:
        h = stored(results["huge"])
        rows.append(
            f"| 48 layers × hidden 4096 (9.8 B parameters) | `summary` {_fig(h['bertgraph summary'])}; "
            f"`render` {_fig(h['bertgraph render'])} "
            f"| torchinfo on meta {_fig(h['torchinfo summary (meta device)'])}; "
            f"torchview on meta {_fig(h['torchview (meta device)'])} "
            f"| torchview with real weights: not run (39 GB of weights) |"
        )
    lines = ["\n".join(rows)]
    if "sweep" in results:
        w = stored(results["sweep"])
        deep, base = w.get("bertgraph render @ 96"), w.get("bertgraph render @ 12")
        if deep is not None and base is not None:
            runs = f"{len(deep.runs)} run{'s' if len(deep.runs) != 1 else ''}"
            lines.append(
                f"\nA cold `render` of 96 layers (hidden 1024) took {deep.seconds / base.seconds:.2f}× the time of "
                f"12 layers ({deep.seconds:.2f} s vs {base.seconds:.2f} s, median of {runs})."
            )
    return "\n".join(lines)


def readme_block(results: dict[str, Any]) -> str:
    return f"{README_START}\n{readme_table(results)}\n{README_END}"


def with_readme_block(readme: str, results: dict[str, Any]) -> str:
    """``readme`` with its generated block replaced by one made from ``results``."""
    pattern = re.compile(re.escape(README_START) + ".*?" + re.escape(README_END), re.DOTALL)
    if not pattern.search(readme):
        raise ValueError(f"README.md has no {README_START} … {README_END} block")
    return pattern.sub(lambda _: readme_block(results), readme)


def with_suite_blocks(readme: str, suites: dict[str, Suite], results: dict[str, Any]) -> str:
    """``readme`` with each ``<!-- benchmarks:NAME -->`` block made from that suite's stored facts."""
    for name, suite in suites.items():
        start, end = f"<!-- benchmarks:{name} -->", f"<!-- /benchmarks:{name} -->"
        if suite.readme is None or not results.get(name, {}).get("facts") or start not in readme:
            continue
        block = "\n".join([start, *suite.readme(results[name]["facts"]), end])
        pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
        readme = pattern.sub(lambda _, text=block: text, readme)
    return readme
