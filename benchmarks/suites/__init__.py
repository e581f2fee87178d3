"""The benchmark suites: one module each, defining ``SUITE``; ``run.py`` finds them all.

Add a suite by adding a module here (see ``harness.Suite``); nothing else needs to change.
"""

from __future__ import annotations

import importlib
import pkgutil

from harness import Suite


def discover() -> dict[str, Suite]:
    """Every suite in this package by name, in report order."""
    found: list[Suite] = []
    for module in pkgutil.iter_modules(__path__):
        suite = getattr(importlib.import_module(f"{__name__}.{module.name}"), "SUITE", None)
        if isinstance(suite, Suite):
            found.append(suite)
    return {suite.name: suite for suite in sorted(found, key=lambda s: (s.order, s.name))}
