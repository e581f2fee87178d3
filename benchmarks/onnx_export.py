"""How long ``bertgraph onnx`` takes, and how much memory, next to a bare ``torch.onnx.export``.

Each measurement is a whole process (imports included), as a user runs it:

* ``bertgraph onnx MODEL --head HEAD -o X.onnx`` (export, checker, onnxruntime parity);
* the same with ``--no-verify``;
* a bare script that builds the same model with random weights and calls
  ``torch.onnx.export(model, ..., dynamo=True)`` and ``save`` — the floor any exporter
  built on torch.onnx pays.

Wall time is the median of ``--runs`` runs; peak RSS is that of the process (read with
``os.wait4``), also the median. Not part of the test run::

    .venv/bin/python benchmarks/onnx_export.py [--runs 3] [--model bert-base-uncased] [--head sequence-classification]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# The bare export: transformers' own BERT classes, random weights, dynamic batch and sequence.
BARE_SCRIPT = """
import sys
import torch
import transformers

from bertgraph.load import resolve

spec = resolve(sys.argv[1], sys.argv[2])
config = transformers.BertConfig(**{k: v for k, v in spec.config.items() if k != "model_type"})
torch.manual_seed(0)
model = getattr(transformers, spec.model_class)(config).eval()
shape = (2, 4, 128) if spec.head == "multiple-choice" else (2, 128)
inputs = {name: torch.zeros(shape, dtype=torch.long) for name in ("input_ids", "attention_mask", "token_type_ids")}
batch = torch.export.Dim("batch", min=1, max=4096)
sequence = torch.export.Dim("sequence", min=1, max=config.max_position_embeddings)
axes = {0: batch, len(shape) - 1: sequence}
program = torch.onnx.export(
    model, (), kwargs=inputs, dynamo=True, dynamic_shapes={name: axes for name in inputs}, verbose=False
)
program.save(sys.argv[3])
"""


@dataclass
class Run:
    seconds: float
    peak_rss_mb: float
    stderr: str


def run_once(command: list[str]) -> Run:
    """Run a command to completion; its wall time and its own peak resident memory."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    stderr = process.stderr.read()  # read before waiting, so a full pipe cannot block the child
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{stderr}")
    return Run(seconds, usage.ru_maxrss / 1024, stderr)  # ru_maxrss is in KiB on Linux


@dataclass
class Row:
    name: str
    seconds: float  # median wall time
    fastest: float
    slowest: float
    rss_mb: float  # median peak resident memory
    size: int  # the .onnx file, plus its .data file if any
    stderr: str  # of the last run


def measure(name: str, command: list[str], output: Path, runs: int) -> Row:
    results = []
    for index in range(runs):
        output.unlink(missing_ok=True)
        results.append(run_once(command))
        print(f"  {name}: run {index + 1}/{runs} {results[-1].seconds:.1f} s", file=sys.stderr)
    size = output.stat().st_size + sum(p.stat().st_size for p in output.parent.glob(output.name + ".data"))
    times = [r.seconds for r in results]
    return Row(
        name=name,
        seconds=statistics.median(times),
        fastest=min(times),
        slowest=max(times),
        rss_mb=statistics.median(r.peak_rss_mb for r in results),
        size=size,
        stderr=results[-1].stderr,
    )


def parity_lines(stderr: str) -> list[str]:
    """The verification figures bertgraph reports (sizes and max abs differences)."""
    return [line.strip() for line in stderr.splitlines() if re.search(r"max \|onnxruntime", line)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="bert-base-uncased")
    parser.add_argument("--head", default="sequence-classification")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)

    bertgraph = [sys.executable, "-m", "bertgraph", "onnx", args.model, "--head", args.head]
    with tempfile.TemporaryDirectory(prefix="bertgraph-bench-") as folder:
        work = Path(folder)
        bare_script = work / "bare_export.py"
        bare_script.write_text(BARE_SCRIPT, encoding="utf-8")
        verified, plain = work / "verified.onnx", work / "plain.onnx"
        cases = [
            ("bertgraph onnx (verified)", [*bertgraph, "-o", str(verified)], verified),
            ("bertgraph onnx --no-verify", [*bertgraph, "--no-verify", "-o", str(plain)], plain),
            (
                "bare torch.onnx.export + save",
                [sys.executable, str(bare_script), args.model, args.head, str(work / "bare.onnx")],
                work / "bare.onnx",
            ),
        ]
        print(f"measuring {args.model} ({args.head}), {args.runs} runs each", file=sys.stderr)
        rows = [measure(name, command, output, args.runs) for name, command, output in cases]

    print(f"\n{args.model}, head {args.head}: median of {args.runs} runs, whole processes\n")
    print(f"{'command':<32} {'wall s':>8} {'(min–max)':>13} {'peak RSS MB':>12} {'file MB':>9}")
    for row in rows:
        spread = f"({row.fastest:.1f}–{row.slowest:.1f})"
        print(f"{row.name:<32} {row.seconds:>8.1f} {spread:>13} {row.rss_mb:>12.0f} {row.size / 1e6:>9.1f}")
    lines = parity_lines(rows[0].stderr)
    if lines:
        print("\nverification (onnxruntime vs PyTorch eager):")
        for line in lines:
            print("  " + line.removeprefix("parity").strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
