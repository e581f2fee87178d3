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


def _three_digits(value: float) -> str:
    return f"{value:.{2 if value < 10 else 1 if value < 100 else 0}f}"


def flops(n: int) -> str:
    """FLOPs with a decimal prefix and three significant digits.

    >>> [flops(n) for n in (0, 768, 41977344, 22348431360, 96637943808, 2_600_000_000_000)]
    ['0 FLOP', '768 FLOP', '42.0 MFLOP', '22.3 GFLOP', '96.6 GFLOP', '2.60 TFLOP']
    """
    for size, prefix in ((10**15, "P"), (10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k")):
        if n >= size:
            return f"{_three_digits(n / size)} {prefix}FLOP"
    return f"{n} FLOP"


def size(n: int) -> str:
    """Bytes with a binary prefix.

    >>> [size(n) for n in (0, 3072, 3555328, 437929000, 1751715840)]
    ['0 B', '3.00 KiB', '3.39 MiB', '418 MiB', '1.63 GiB']
    """
    for factor, prefix in ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if n >= factor:
            return f"{_three_digits(n / factor)} {prefix}B"
    return f"{n} B"
