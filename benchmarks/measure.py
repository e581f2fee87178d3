"""Whole-process measurements: wall time and the process's own peak resident memory."""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass
class Run:
    seconds: float
    peak_mb: float
    stdout: str


@dataclass
class Series:
    """Repeated runs of one command; medians are what the results report."""

    name: str
    runs: list[Run] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    @property
    def peak_mb(self) -> float:
        return statistics.median(r.peak_mb for r in self.runs)

    @property
    def spread(self) -> str:
        times = [r.seconds for r in self.runs]
        return f"{min(times):.2f}–{max(times):.2f}"

    def span(self) -> float | None:
        """The median of the seconds each run printed last (an in-process timing), if it did."""
        try:
            return statistics.median(float(r.stdout.strip().splitlines()[-1]) for r in self.runs)
        except (ValueError, IndexError):
            return None


def run_measured(command: Sequence[str], env: dict[str, str] | None = None) -> Run:
    """Run ``command`` to completion: its wall time, stdout, and its own peak RSS (``os.wait4``)."""
    start = time.perf_counter()
    with open(os.devnull, "w") as devnull:
        process = subprocess.Popen(
            list(command), stdout=subprocess.PIPE, stderr=devnull, text=True, env={**os.environ, **(env or {})}
        )
        assert process.stdout is not None
        stdout = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        failed = subprocess.run(list(command), capture_output=True, text=True, env={**os.environ, **(env or {})})
        raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}):\n{failed.stderr[-3000:]}")
    return Run(seconds, usage.ru_maxrss / 1024, stdout)  # ru_maxrss is KiB on Linux


def alternate(
    commands: dict[str, Sequence[str]],
    runs: int,
    warmup: int = 1,
    envs: dict[str, dict[str, str]] | None = None,
    prepare: dict[str, Callable[[], None]] | None = None,
) -> dict[str, Series]:
    """Run every command ``warmup`` times unrecorded, then ``runs`` times in turn (A B A B …).

    ``prepare[name]`` is called before each run of that command (to empty a cache, say).
    """
    series = {name: Series(name) for name in commands}
    for round_index in range(warmup + runs):
        for name, command in commands.items():
            if prepare and name in prepare:
                prepare[name]()
            run = run_measured(command, (envs or {}).get(name))
            if round_index >= warmup:
                series[name].runs.append(run)
    return series
