"""The memory an export needs, estimated before it starts, against what the machine has.

The graph is exported from a fake-tensor model (a fixed cost, ``BASE``); the weights
are then held once, written tensor by tensor, and freed before the checker and
onnxruntime each load the file once more, one after the other. So the peak is the
base plus about one copy of the weights per stage — ``PER_WEIGHT_BYTE`` times their
size, with margin (measured: ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

from pathlib import Path

from bertgraph.errors import OnnxError

GB = 1e9
# Imports, the export of a fake-tensor model and the graph: about 0.47 GB for bert-base.
BASE = int(0.6 * GB)
# Peak bytes per byte of weights above the base, with margin: every stage holds about one
# copy (bert-base, verified: a 1009 MiB peak, about 1.25 × its 419 MiB of weights above the base).
PER_WEIGHT_BYTE = {True: 1.5, False: 1.25}


def estimate(weight_bytes: int, verify: bool) -> int:
    """Peak bytes an export of ``weight_bytes`` of weights needs."""
    return BASE + int(PER_WEIGHT_BYTE[verify] * weight_bytes)


def available(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """``MemAvailable`` in bytes, or ``None`` where the system does not say."""
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(weight_bytes: int, verify: bool, what: str) -> int:
    """Refuse in one line when the estimate exceeds the memory available; returns the estimate.

    Raises:
        OnnxError: the export would need more memory than the machine has free.
    """
    needed = estimate(weight_bytes, verify)
    free = available()
    if free is not None and needed > free:
        raise OnnxError(
            f"exporting {what} needs about {_size(needed)} of memory ({_size(weight_bytes)} of weights), "
            f"but only {_size(free)} is available; choose a smaller configuration or free memory"
        )
    return needed


def _size(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if count < 1000 or unit == "PB":
            return f"{count:.0f} {unit}" if unit in ("B", "KB") else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} PB"
