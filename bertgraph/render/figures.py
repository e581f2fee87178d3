"""How numbers and shapes read in every output format."""

from __future__ import annotations

from collections.abc import Sequence


def count(n: int) -> str:
    """Exact count with thousands separators.

    >>> count(109482240)
    '109,482,240'
    """
    return f"{n:,}"


def short(n: int) -> str:
    """Compact count for diagram labels.

    >>> [short(n) for n in (0, 1538, 590592, 7087872, 85054464, 9_800_000_000)]
    ['0', '1.5K', '591K', '7.09M', '85.1M', '9.80B']
    """
    for size, suffix in ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "K")):
        if n >= size:
            value = n / size
            digits = 2 if value < 10 else 1 if value < 100 else 0
            if suffix == "K" and value < 10:
                digits = 1
            return f"{value:.{digits}f}{suffix}"
    return str(n)


def percent(part: int | float, whole: int | float) -> str:
    """Share with two decimals.

    >>> percent(23837184, 109482240)
    '21.77%'
    """
    return f"{100 * part / whole:.2f}%" if whole else "0.00%"


def shape(dims: Sequence[int | str]) -> str:
    """``["batch", "seq", 768]`` → ``[batch, seq, 768]``.

    >>> shape(["batch", "seq", 768]), shape([])
    ('[batch, seq, 768]', '[]')
    """
    return "[" + ", ".join(str(d) for d in dims) + "]"


def shapes(many: Sequence[Sequence[int | str]]) -> str:
    """Several output shapes joined, ``—`` when there are none."""
    return ", ".join(shape(s) for s in many) if many else "—"
