"""bertgraph next to torchview, torchinfo and bare torch.export / torch.onnx.export.

Every tool runs as its own whole process, as a user runs it, on the same model and task;
commands alternate (A B A B …) after a warm-up, and the medians of wall time and peak RSS
(the process's own, from ``wait4``) go into ``benchmarks/RESULTS.md`` with the ratios the
targets are stated in, and a plot of time and memory against layer count into
``benchmarks/scaling.png``. Not part of the test run::

    make bench                      # installs the peers (the bench extra) and runs everything
    .venv/bin/python benchmarks/run.py --suites svg,table --runs 5
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

from measure import Series, alternate

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
BERTGRAPH = str(BIN / "bertgraph") if (BIN / "bertgraph").exists() else "bertgraph"
PEER = [sys.executable, str(HERE / "peer.py")]

BERT_BASE = {"layers": 12, "hidden": 768, "heads": 12, "intermediate": 3072}
SWEEP = {"hidden": 1024, "heads": 16, "intermediate": 4096}
SWEEP_LAYERS = (2, 12, 24, 48, 96, 192)
HUGE = {"layers": 48, "hidden": 4096, "heads": 32, "intermediate": 16384}
SUITES = ("help", "svg", "table", "trace", "onnx", "sweep", "huge")


def size_args(size: dict[str, int]) -> list[str]:
    return [arg for key, value in size.items() for arg in (f"--{key}", str(value))]


def bertgraph(
    command: str,
    size: dict[str, int],
    work: Path,
    *extra: str,
    head: str = "sequence-classification",
    out: str | None = None,
) -> list[str]:
    argv = [BERTGRAPH, command, "bert-base-uncased", *size_args(size), "--head", head, *extra]
    return argv + (["-o", str(work / out)] if out else [])


def peer(task: str, size: dict[str, int], work: Path, head: str = "sequence-classification") -> list[str]:
    return [*PEER, task, *size_args(size), "--head", head, "--out", str(work / f"{task}-out")]


class Caches:
    """A cold cache (emptied before every run) and a warm one (filled by the warm-up)."""

    def __init__(self, work: Path) -> None:
        self.cold = work / "cold-cache"
        self.warm = work / "warm-cache"

    def empty_cold(self) -> None:
        shutil.rmtree(self.cold, ignore_errors=True)

    def env(self, warm: bool) -> dict[str, str]:
        return {"BERTGRAPH_CACHE_DIR": str(self.warm if warm else self.cold)}


# --- suites ---------------------------------------------------------------------------------


def suite_help(work: Path, runs: int, caches: Caches) -> dict[str, Series]:
    return alternate(
        {"python -c pass": [sys.executable, "-c", "pass"], "bertgraph --help": [BERTGRAPH, "--help"]}, runs
    )


def suite_svg(work: Path, runs: int, caches: Caches) -> dict[str, Series]:
    render = bertgraph("render", BERT_BASE, work, out="bert.svg")
    return alternate(
        {
            "bertgraph render (cold)": render,
            "bertgraph render (warm cache)": render,
            "torchview (real weights)": peer("torchview-real", BERT_BASE, work),
            "torchview (meta device)": peer("torchview-meta", BERT_BASE, work),
        },
        runs,
        envs={"bertgraph render (cold)": caches.env(False), "bertgraph render (warm cache)": caches.env(True)},
        prepare={"bertgraph render (cold)": caches.empty_cold},
    )


def suite_table(work: Path, runs: int, caches: Caches) -> dict[str, Series]:
    cold = caches.env(False)
    return alternate(
        {
            "bertgraph params": bertgraph("params", BERT_BASE, work),
            "bertgraph summary (cold)": bertgraph("summary", BERT_BASE, work),
            "bertgraph summary (warm cache)": bertgraph("summary", BERT_BASE, work),
            "torchinfo (meta device)": peer("torchinfo-meta", BERT_BASE, work),
        },
        runs,
        envs={
            "bertgraph params": cold,
            "bertgraph summary (cold)": cold,
            "bertgraph summary (warm cache)": caches.env(True),
        },
        prepare={"bertgraph params": caches.empty_cold, "bertgraph summary (cold)": caches.empty_cold},
    )


def suite_trace(work: Path, runs: int, caches: Caches) -> dict[str, Series]:
    return alternate(
        {
            "bertgraph trace + graph (in process)": peer("trace-call", BERT_BASE, work),
            "bare torch.export (in process)": peer("export-call", BERT_BASE, work),
        },
        runs,
    )


def suite_onnx(work: Path, runs: int, caches: Caches) -> dict[str, Series]:
    return alternate(
        {
            "bertgraph onnx (verified)": bertgraph("onnx", BERT_BASE, work, out="bert.onnx"),
            "bertgraph onnx --no-verify": bertgraph("onnx", BERT_BASE, work, "--no-verify", out="bert2.onnx"),
            "bare torch.onnx.export + save": peer("onnx-bare", BERT_BASE, work),
        },
        max(1, runs - 1),
    )


def suite_sweep(work: Path, runs: int, caches: Caches) -> dict[str, Series]:
    results: dict[str, Series] = {}
    for layers in SWEEP_LAYERS:
        size = {"layers": layers, **SWEEP}
        commands = {
            "bertgraph render": bertgraph("render", size, work, out="sweep.svg"),
            "bertgraph params": bertgraph("params", size, work),
            "torchview (real weights)": peer("torchview-real", size, work),
            "torchview (meta device)": peer("torchview-meta", size, work),
            "torchinfo (meta device)": peer("torchinfo-meta", size, work),
            "bare torch.export": peer("export-process", size, work),
        }
        envs = {name: caches.env(False) for name in commands if name.startswith("bertgraph")}
        prepare = dict.fromkeys(envs, caches.empty_cold)
        measured = alternate(commands, 1, warmup=0, envs=envs, prepare=prepare)
        for name, series in measured.items():
            results[f"{name} @ {layers}"] = series
    return results


def suite_huge(work: Path, runs: int, caches: Caches) -> dict[str, Series]:
    cold = caches.env(False)
    return alternate(
        {
            "bertgraph summary": bertgraph("summary", HUGE, work),
            "bertgraph render": bertgraph("render", HUGE, work, out="huge.svg"),
            "torchinfo (meta device)": peer("torchinfo-meta", HUGE, work),
            "torchview (meta device)": peer("torchview-meta", HUGE, work),
        },
        max(1, runs - 1),
        envs={"bertgraph summary": cold, "bertgraph render": cold},
        prepare={"bertgraph summary": caches.empty_cold, "bertgraph render": caches.empty_cold},
    )


RUNNERS: dict[str, Callable[[Path, int, Caches], dict[str, Series]]] = {
    "help": suite_help,
    "svg": suite_svg,
    "table": suite_table,
    "trace": suite_trace,
    "onnx": suite_onnx,
    "sweep": suite_sweep,
    "huge": suite_huge,
}


# --- reporting ------------------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        memory = int(Path("/proc/meminfo").read_text().split()[1]) / 1024 / 1024
    except OSError:
        memory = 0.0
    versions = []
    for package in ("bertgraph", "torch", "transformers", "torchview", "torchinfo", "onnx", "onnxruntime"):
        try:
            versions.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package} absent")
    dot = subprocess.run(["dot", "-V"], capture_output=True, text=True, check=False).stderr.strip()
    return (
        f"{cpu}, {os.cpu_count()} cores, {memory:.0f} GiB RAM; Python {platform.python_version()}; "
        f"{'; '.join(versions)}; {dot}"
    )


def table(series: dict[str, Series]) -> list[str]:
    lines = ["| command | wall time (median) | range | peak RSS (median) | runs |", "|---|---:|---:|---:|---:|"]
    for name, item in series.items():
        lines.append(f"| {name} | {item.seconds:.2f} s | {item.spread} s | {item.peak_mb:.0f} MB | {len(item.runs)} |")
    return lines


def targets(results: dict[str, dict[str, Series]]) -> list[tuple[str, str, bool]]:
    """(target, measured, met) for every target the measured suites cover."""
    rows: list[tuple[str, str, bool]] = []
    svg = results.get("svg")
    if svg:
        cold, warm = svg["bertgraph render (cold)"], svg["bertgraph render (warm cache)"]
        real = svg["torchview (real weights)"]
        rows.append(
            (
                "render bert-base SVG, cold: ≤ 0.8 × torchview wall time",
                f"{cold.seconds / real.seconds:.2f} × ({cold.seconds:.2f} s vs {real.seconds:.2f} s)",
                cold.seconds <= 0.8 * real.seconds,
            )
        )
        rows.append(
            (
                "render bert-base SVG, cold: ≤ 0.6 × torchview peak memory",
                f"{cold.peak_mb / real.peak_mb:.2f} × ({cold.peak_mb:.0f} MB vs {real.peak_mb:.0f} MB)",
                cold.peak_mb <= 0.6 * real.peak_mb,
            )
        )
        rows.append(
            (
                "render bert-base SVG, warm cache: ≤ 0.2 × torchview wall time",
                f"{warm.seconds / real.seconds:.2f} × ({warm.seconds:.2f} s)",
                warm.seconds <= 0.2 * real.seconds,
            )
        )
    trace = results.get("trace")
    if trace:
        ours, bare = (
            trace["bertgraph trace + graph (in process)"].value(),
            trace["bare torch.export (in process)"].value(),
        )
        rows.append(
            (
                "trace + graph ≤ 1.25 × bare torch.export of the same model",
                f"{ours / bare:.2f} × ({ours:.2f} s vs {bare:.2f} s)",
                ours <= 1.25 * bare,
            )
        )
    sweep = results.get("sweep")
    if sweep and "bertgraph render @ 96" in sweep and "bertgraph render @ 12" in sweep:
        deep, base = sweep["bertgraph render @ 96"].seconds, sweep["bertgraph render @ 12"].seconds
        rows.append(
            (
                "render, cold, 96 layers ≤ 2.5 × 12 layers",
                f"{deep / base:.2f} × ({deep:.2f} s vs {base:.2f} s)",
                deep <= 2.5 * base,
            )
        )
    huge = results.get("huge")
    if huge:
        for name in ("bertgraph summary", "bertgraph render"):
            item = huge[name]
            rows.append(
                (
                    f"48 layers × hidden 4096 (9.8 B): {name.split()[1]} < 15 s and < 1.5 GB",
                    f"{item.seconds:.2f} s, {item.peak_mb:.0f} MB",
                    item.seconds < 15 and item.peak_mb < 1536,
                )
            )
    table_suite = results.get("table")
    if table_suite:
        ours, theirs = table_suite["bertgraph params"], table_suite["torchinfo (meta device)"]
        rows.append(
            (
                "params ≤ torchinfo (meta device) whole-process time",
                f"{ours.seconds / theirs.seconds:.2f} × ({ours.seconds:.2f} s vs {theirs.seconds:.2f} s)",
                ours.seconds <= theirs.seconds,
            )
        )
    help_suite = results.get("help")
    if help_suite:
        gap = help_suite["bertgraph --help"].seconds - help_suite["python -c pass"].seconds
        rows.append(("--help within 0.3 s of a bare interpreter start", f"+{gap:.2f} s", gap <= 0.3))
    return rows


def plot(sweep: dict[str, tuple[float, float]], path: Path) -> None:
    """Time and memory against layer count; ``sweep`` maps "tool @ layers" to (seconds, peak MB)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    tools: dict[str, list[tuple[int, float, float]]] = {}
    for key, (seconds, peak_mb) in sweep.items():
        name, layers = key.rsplit(" @ ", 1)
        tools.setdefault(name, []).append((int(layers), seconds, peak_mb / 1024))
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    for name, points in sorted(tools.items()):
        points.sort()
        ours = name.startswith("bertgraph")
        layers = [p[0] for p in points]
        left.plot(layers, [p[1] for p in points], "-o" if ours else "--s", label=name, linewidth=2 if ours else 1)
        right.plot(layers, [p[2] for p in points], "-o" if ours else "--s", label=name, linewidth=2 if ours else 1)
    for axis, label in ((left, "wall time (s)"), (right, "peak memory (GiB)")):
        axis.set_xscale("log", base=2)
        axis.set_xticks(SWEEP_LAYERS, [str(n) for n in SWEEP_LAYERS])
        axis.set_yscale("log")
        axis.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        axis.yaxis.set_minor_formatter(NullFormatter())
        axis.set_xlabel("encoder layers (hidden 1024)")
        axis.set_ylabel(label)
        axis.grid(True, which="both", alpha=0.3)
    left.set_yticks([3, 5, 10, 20, 50])
    right.set_yticks([0.25, 0.5, 1, 2, 5, 10])
    left.legend(fontsize=8)
    figure.suptitle("Whole-process cost against depth (sequence-classification head)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def write_results(results: dict[str, dict[str, Series]], runs: int, path: Path) -> None:
    lines = ["# bertgraph benchmarks", ""]
    lines.append(f"Measured {datetime.date.today().isoformat()} on {machine()}.")
    lines.append("")
    lines.append(
        f"Every command is a separate whole process (imports included); commands alternate after a warm-up "
        f"run, {runs} recorded runs each unless the table says otherwise (the sweep and the ONNX export run "
        f"fewer to bound time). Peak RSS is the process's own (`wait4`). Regenerate with `make bench`."
    )
    lines += ["", "## Targets", "", "| target | measured | met |", "|---|---|---|"]
    for target, measured, met in targets(results):
        lines.append(f"| {target} | {measured} | {'yes' if met else '**no**'} |")
    titles = {
        "help": "Start-up: `bertgraph --help`",
        "svg": "SVG of bert-base with the sequence-classification head",
        "table": "Parameter table of bert-base with the sequence-classification head",
        "trace": "Trace + graph vs bare torch.export (time of the call, in a fresh process)",
        "onnx": "ONNX export of bert-base with the sequence-classification head",
        "sweep": "Depth sweep (hidden 1024, one cold run each)",
        "huge": "48 layers × hidden 4096 (≈ 9.8 B parameters)",
    }
    for suite, series in results.items():
        lines += ["", f"## {titles[suite]}", ""]
        if suite == "trace":
            lines += ["| call | seconds (median) |", "|---|---:|"]
            lines += [f"| {name} | {item.value():.3f} |" for name, item in series.items()]
        else:
            lines += table(series)
    if "sweep" in results:
        lines += ["", "![time and memory against layer count](scaling.png)"]
    if "huge" in results:
        lines += ["", "torchview with real weights is not run at this size: the weights alone need 39 GB."]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", default=",".join(SUITES), help=f"comma-separated: {', '.join(SUITES)}")
    parser.add_argument("--runs", type=int, default=3, help="recorded runs per command (default 3)")
    parser.add_argument("--output", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--replot", action="store_true", help="redraw scaling.png from results.json only")
    args = parser.parse_args(argv)
    if args.replot:
        saved = json.loads((args.output.parent / "results.json").read_text())["sweep"]
        plot({k: (v["seconds"], v["peak_mb"]) for k, v in saved.items()}, args.output.parent / "scaling.png")
        return 0
    chosen = [name.strip() for name in args.suites.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in RUNNERS]
    if unknown:
        parser.error(f"unknown suites: {', '.join(unknown)}")
    results: dict[str, dict[str, Series]] = {}
    with tempfile.TemporaryDirectory(prefix="bertgraph-bench-") as folder:
        work = Path(folder)
        caches = Caches(work)
        for name in chosen:
            print(f"[bench] {name} …", file=sys.stderr, flush=True)
            results[name] = RUNNERS[name](work, args.runs, caches)
            for line in table(results[name]) if name != "trace" else []:
                print(line, file=sys.stderr)
    write_results(results, args.runs, args.output)
    if "sweep" in results:
        plot({k: (v.seconds, v.peak_mb) for k, v in results["sweep"].items()}, args.output.parent / "scaling.png")
    (args.output.parent / "results.json").write_text(
        json.dumps(
            {
                suite: {
                    name: {"seconds": s.seconds, "peak_mb": s.peak_mb, "runs": [r.seconds for r in s.runs]}
                    for name, s in series.items()
                }
                for suite, series in results.items()
            },
            indent=1,
        )
        + "\n"
    )
    for target, measured, met in targets(results):
        print(f"{'met ' if met else 'MISS'}  {target}: {measured}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
