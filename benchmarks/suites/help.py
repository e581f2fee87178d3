"""Start-up: ``bertgraph --help`` next to a bare interpreter."""

from __future__ import annotations

import sys

from harness import BERTGRAPH, Command, Context, Stored, Suite, Target

BARE, HELP = "python -c pass", "bertgraph --help"


def commands(ctx: Context) -> dict[str, Command]:
    return {BARE: Command([sys.executable, "-c", "pass"]), HELP: Command([BERTGRAPH, "--help"])}


def targets(stored: dict[str, Stored]) -> list[Target]:
    gap = stored[HELP].seconds - stored[BARE].seconds
    return [Target("`--help` within 0.3 s of a bare interpreter start", f"+{gap:.2f} s", gap <= 0.3)]


SUITE = Suite(name="help", title="Start-up: `bertgraph --help`", order=10, commands=commands, targets=targets)
