"""What every suite shares: model sizes, command lines, caches, and the suite record itself.

A suite is one module in ``benchmarks/suites/`` that defines ``SUITE = Suite(...)``: its
name, title, the commands it runs (``commands(ctx)``, or a whole ``run(ctx)`` for suites
that measure in steps, like the sweep) and the targets it checks on the stored results.
``run.py`` finds every suite, runs the ones asked for and merges their results into
``results.json``; ``report.py`` writes ``RESULTS.md`` and the README's table from that file.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from measure import Series, alternate, run_measured

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
BERTGRAPH = str(BIN / "bertgraph") if (BIN / "bertgraph").exists() else "bertgraph"
PEER = [sys.executable, str(HERE / "peer.py")]

BERT_BASE = {"layers": 12, "hidden": 768, "heads": 12, "intermediate": 3072}
# --smoke: every suite runs once at this size, to check that the commands work.
SMOKE_SIZE = {"hidden": 64, "heads": 2, "intermediate": 128}


def size_args(size: dict[str, int]) -> list[str]:
    return [arg for key, value in size.items() for arg in (f"--{key}", str(value))]


@dataclass
class Command:
    """One command a suite measures; ``cold`` empties the graph cache before every run."""

    argv: list[str]
    cache: str | None = None  # "cold" (emptied before each run), "warm" (kept) or None (untouched)


class Context:
    """Where a suite runs and how: work folder, graph caches, run counts, smoke mode."""

    def __init__(self, work: Path, runs: int, warmup: int, smoke: bool) -> None:
        self.work = work
        self.runs = runs
        self.warmup = warmup
        self.smoke = smoke
        self.cold_cache = work / "cold-cache"
        self.warm_cache = work / "warm-cache"

    def size(self, full: dict[str, int]) -> dict[str, int]:
        """``full``, or a tiny model of as many layers (at most 4) in smoke mode."""
        if not self.smoke:
            return dict(full)
        return {"layers": min(full.get("layers", 12), 4), **SMOKE_SIZE}

    def bertgraph(
        self,
        command: str,
        size: dict[str, int],
        *extra: str,
        head: str = "sequence-classification",
        out: str | None = None,
        cache: str | None = "cold",
    ) -> Command:
        argv = [BERTGRAPH, command, "bert-base-uncased", *size_args(size), "--head", head, *extra]
        return Command(argv + (["-o", str(self.work / out)] if out else []), cache)

    def peer(self, task: str, size: dict[str, int], head: str = "sequence-classification") -> Command:
        return Command([*PEER, task, *size_args(size), "--head", head, "--out", str(self.work / f"{task}-out")])

    def measure(self, commands: dict[str, Command], runs: int | None = None) -> dict[str, Series]:
        """Every command ``warmup`` times unrecorded, then ``runs`` times in turn (A B A B …)."""
        envs = {name: self._env(c.cache) for name, c in commands.items() if c.cache}
        prepare = {name: self._empty_cold for name, c in commands.items() if c.cache == "cold"}
        argvs = {name: c.argv for name, c in commands.items()}
        for name, command in commands.items():
            if command.cache == "warm":  # filled before any run is recorded, warm-up or not
                run_measured(command.argv, envs[name])
        return alternate(argvs, runs or self.runs, warmup=self.warmup, envs=envs, prepare=prepare)

    def _env(self, cache: str | None) -> dict[str, str]:
        return {"BERTGRAPH_CACHE_DIR": str(self.warm_cache if cache == "warm" else self.cold_cache)}

    def _empty_cold(self) -> None:
        shutil.rmtree(self.cold_cache, ignore_errors=True)


@dataclass(frozen=True)
class Target:
    """A target, what was measured against it, and whether it is met."""

    text: str
    measured: str
    met: bool


@dataclass(frozen=True)
class Stored:
    """One command's stored figures (``results.json``): medians and every recorded run."""

    seconds: float
    peak_mb: float
    runs: list[float]
    span: float | None = None  # median of what the process printed: an in-process timing
    peak_runs: list[float] | None = None

    @property
    def spread(self) -> str:
        return f"{min(self.runs):.2f}–{max(self.runs):.2f}"

    @staticmethod
    def from_json(data: dict[str, Any]) -> Stored:
        return Stored(
            seconds=float(data["seconds"]),
            peak_mb=float(data["peak_mb"]),
            runs=[float(r) for r in data["runs"]],
            span=None if data.get("span") is None else float(data["span"]),
            peak_runs=None if data.get("peak_mb_runs") is None else [float(p) for p in data["peak_mb_runs"]],
        )


def ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs else float("inf")


@dataclass
class Suite:
    """A benchmark suite; define ``SUITE = Suite(...)`` in a module of ``benchmarks/suites/``.

    ``order`` places it in RESULTS.md; ``commands`` gives what to measure (or ``run``
    measures it itself); ``targets`` reads the stored figures; ``notes`` are printed under
    the table; ``figure`` draws a picture from the stored figures (the sweep's plot).
    ``facts`` reads what the processes printed besides times (FLOP counts) into the record,
    ``facts_markdown`` shows them in RESULTS.md and ``readme`` in the README, between
    ``<!-- benchmarks:NAME -->`` and ``<!-- /benchmarks:NAME -->``.
    """

    name: str
    title: str
    order: int
    commands: Callable[[Context], dict[str, Command]] | None = None
    run: Callable[[Context], dict[str, Series]] | None = None
    targets: Callable[[dict[str, Stored]], list[Target]] = field(default=lambda stored: [])
    notes: Sequence[str] = ()
    figure: Callable[[dict[str, Stored], Path], str] | None = None
    facts: Callable[[dict[str, Series]], dict[str, Any]] | None = None
    facts_markdown: Callable[[dict[str, Any]], list[str]] | None = None
    readme: Callable[[dict[str, Any]], list[str]] | None = None

    def measure(self, ctx: Context) -> dict[str, Series]:
        if self.run is not None:
            return self.run(ctx)
        assert self.commands is not None, f"suite {self.name} has neither commands nor run"
        return ctx.measure(self.commands(ctx))
