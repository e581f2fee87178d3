"""Test matrices that cover every row and every column without running every pair.

Models of one structure differ by sizes and head classes the same way, so a sweep over
presets × heads needs each preset once and each head at least once, not each pair.
``BERTGRAPH_FULL_MATRIX=1`` (``make test-full``) runs every pair.
"""

from __future__ import annotations

import os
from collections.abc import Sequence


def full_matrix() -> bool:
    return os.environ.get("BERTGRAPH_FULL_MATRIX") == "1"


def each_once(rows: Sequence[str], columns: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs in which every row and every column appear: the rows take the columns in turn
    (and, when there are more columns than rows, the first row takes the rest)."""
    if full_matrix():
        return [(row, column) for row in rows for column in columns]
    pairs = [(row, columns[index % len(columns)]) for index, row in enumerate(rows)]
    pairs += [(rows[0], column) for column in columns[len(rows) :]]
    return pairs
