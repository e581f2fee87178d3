"""Test matrices that cover every row and every column without running every pair.

Models of one structure differ by sizes and head classes the same way, so a sweep over
models × heads needs each model once and each head at least once, not each pair.
``BERTGRAPH_FULL_MATRIX=1`` (``make test-full``) runs every pair.
"""

from __future__ import annotations

import os
from collections.abc import Sequence


def full_matrix() -> bool:
    return os.environ.get("BERTGRAPH_FULL_MATRIX") == "1"


def each_once(rows: Sequence[str], columns: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs in which every row and every column appear (every pair with ``BERTGRAPH_FULL_MATRIX=1``)."""
    return covering([(row, list(columns)) for row in rows])


def covering(rows: Sequence[tuple[str, Sequence[str]]]) -> list[tuple[str, str]]:
    """``(row, column)`` pairs from rows that each have their own columns: every row once, taking the
    next column it has in turn, then every column no row took, with the first row that has it.

    >>> covering([("a", ["x", "y", "z"]), ("b", ["x", "y"])])
    [('a', 'x'), ('b', 'y'), ('a', 'z')]
    """
    if full_matrix():
        return [(row, column) for row, columns in rows for column in columns]
    wanted = sorted({column for _, columns in rows for column in columns})
    chosen: list[tuple[str, str]] = []
    turn = 0
    for row, columns in rows:
        if not columns:
            continue
        column = next(c for c in wanted[turn:] + wanted[:turn] if c in columns)
        chosen.append((row, column))
        turn = (wanted.index(column) + 1) % len(wanted)
    taken = {column for _, column in chosen}
    for column in wanted:
        if column not in taken:
            chosen.append((next(row for row, columns in rows if column in columns), column))
    return list(dict.fromkeys(chosen))


def tiny_head_cases() -> list[tuple[str, str]]:
    """``(model_type, head)`` over the tiny configs: every model type once and every head of each
    structure at least once (the family record gives a structure's heads alike to its families)."""
    from bertgraph.model import family_of
    from tests.family_configs import TINY

    by_structure: dict[str, list[tuple[str, list[str]]]] = {}
    for model_type in TINY:
        family = family_of(model_type)
        assert family is not None
        by_structure.setdefault(family.structure, []).append((model_type, list(family.heads)))
    return [pair for rows in by_structure.values() for pair in covering(rows)]
