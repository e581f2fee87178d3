"""bertgraph next to torchview, torchinfo and bare torch.export / torch.onnx.export.

Every tool runs as its own whole process, as a user runs it, on the same model and task;
the commands of a suite alternate (A B A B …) after a warm-up round. Each suite is a
module of ``benchmarks/suites/``. Results are merged into ``benchmarks/results.json`` (a
run of some suites keeps the others' results), and ``RESULTS.md`` and the README's
comparison table are regenerated from that file. Not part of the test run::

    make bench                                      # installs the peers and runs every suite
    .venv/bin/python benchmarks/run.py --suites svg,table --runs 5
    .venv/bin/python benchmarks/run.py --smoke      # every suite once, tiny models, results elsewhere
    .venv/bin/python benchmarks/run.py --report     # only regenerate RESULTS.md and the README table
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import report
from harness import HERE, Context, Suite
from measure import Series
from suites import discover

README = HERE.parent / "README.md"


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


def commit() -> str | None:
    found = subprocess.run(
        ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "-C", str(HERE), "status", "--porcelain", "--", "../bertgraph"],
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def record(ctx: Context, series: dict[str, Series]) -> dict[str, Any]:
    """A suite's results as stored in results.json: medians and every run."""
    commands = {}
    for name, item in series.items():
        entry: dict[str, Any] = {
            "seconds": item.seconds,
            "peak_mb": item.peak_mb,
            "runs": [run.seconds for run in item.runs],
            "peak_mb_runs": [run.peak_mb for run in item.runs],
        }
        span = item.span()
        if span is not None:
            entry["span"] = span
        commands[name] = entry
    return {
        "date": datetime.date.today().isoformat(),
        "commit": commit(),
        "machine": machine(),
        "runs": ctx.runs,
        "warmup": ctx.warmup,
        "commands": commands,
    }


def write_reports(suites: dict[str, Suite], results: dict[str, Any], folder: Path, readme: Path | None) -> None:
    for name, suite in suites.items():
        if suite.figure is not None and name in results:
            results[name]["figure"] = suite.figure(report.stored(results[name]), folder)
    (folder / "results.json").write_text(report.dump(results), encoding="utf-8")
    (folder / "RESULTS.md").write_text(report.results_markdown(suites, results), encoding="utf-8")
    if readme is not None:
        text = report.with_readme_block(readme.read_text(encoding="utf-8"), results)
        readme.write_text(report.with_suite_blocks(text, suites, results), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    suites = discover()
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--suites", default=",".join(suites), help=f"comma-separated: {', '.join(suites)}")
    parser.add_argument("--runs", type=int, default=3, help="recorded runs per command (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="unrecorded rounds first (default 1)")
    parser.add_argument("--output", type=Path, default=HERE, help="folder of results.json and RESULTS.md")
    parser.add_argument("--smoke", action="store_true", help="tiny models, one run, no warm-up, into a temp folder")
    parser.add_argument("--report", action="store_true", help="only regenerate the reports from results.json")
    parser.add_argument("--check", action="store_true", help="fail if the reports differ from results.json")
    args = parser.parse_args(argv)
    if args.check:
        return check(suites, args.output)
    results = report.load(args.output / "results.json")
    if args.report:
        write_reports(suites, results, args.output, README if args.output == HERE else None)
        return 0
    chosen = [name.strip() for name in args.suites.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in suites]
    if unknown:
        parser.error(f"unknown suites: {', '.join(unknown)} (known: {', '.join(suites)})")
    if args.smoke:
        args.runs, args.warmup = 1, 0
        args.output = Path(tempfile.mkdtemp(prefix="bertgraph-bench-smoke-"))
        results = {}
    # bertgraph's modules compiled, as installing its wheel compiles them and as pip compiled every peer's:
    # an editable checkout run under PYTHONDONTWRITEBYTECODE (as on the benchmark machine) would otherwise
    # compile them from source on every run, 0.1-0.2 s no user pays.
    compileall.compile_dir(HERE.parent / "bertgraph", quiet=1)
    with tempfile.TemporaryDirectory(prefix="bertgraph-bench-") as folder:
        ctx = Context(Path(folder), args.runs, args.warmup, args.smoke)
        for name in chosen:
            print(f"[bench] {name} …", file=sys.stderr, flush=True)
            series = suites[name].measure(ctx)
            results[name] = record(ctx, series)
            if suites[name].facts is not None:
                results[name]["facts"] = suites[name].facts(series)
            for line in report.table(report.stored(results[name])):
                print(line, file=sys.stderr)
    write_reports(suites, results, args.output, README if args.output == HERE else None)
    for name, target in report.targets_of(suites, results):
        print(f"{'met ' if target.met else 'MISS'}  [{name}] {target.text}: {target.measured}", file=sys.stderr)
    print(f"[bench] results in {args.output}", file=sys.stderr)
    return 0


def check(suites: dict[str, Suite], folder: Path) -> int:
    """Whether RESULTS.md and the README's table are what results.json gives."""
    results = report.load(folder / "results.json")
    stale = []
    if (folder / "RESULTS.md").read_text(encoding="utf-8") != report.results_markdown(suites, results):
        stale.append(str(folder / "RESULTS.md"))
    text = README.read_text(encoding="utf-8")
    if report.with_suite_blocks(report.with_readme_block(text, results), suites, results) != text:
        stale.append(str(README))
    for path in stale:
        print(f"{path} does not match results.json: run benchmarks/run.py --report", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
