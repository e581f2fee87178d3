"""GPUs as data: memory, memory bandwidth and dense tensor-core FLOP/s, each row from its datasheet.

Memory is the capacity a datasheet prints ("80 GB") read as GiB, 2³⁰ bytes: what the memory chips
hold (HBM stacks and GDDR chips come in powers of two; NVIDIA's "80 GB" H100 has 80 GiB). The driver
reports a little less (ECC, reserved pages: a T4 with ECC on shows 15 GiB), which is one reason the
plan keeps an overhead (:data:`DEFAULT_OVERHEAD`). Bandwidth and FLOP/s are decimal, as datasheets
print them (3.35 TB/s = 3.35·10¹² bytes per second). FLOP/s are dense (without 2:4 sparsity, which
datasheets print doubled and mark with an asterisk) in bfloat16 with float32 accumulation — float16
on the T4, which has no bfloat16 tensor cores.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from bertgraph.plan.layouts import PlanError

GIB = 2**30
GB_PER_S = 10**9
TFLOPS = 10**12
# CUDA context (0.3–0.6 GiB by GPU and driver) and the caching allocator's reserve and fragmentation.
DEFAULT_OVERHEAD = GIB


class GPU(NamedTuple):
    name: str
    memory_bytes: int
    bandwidth_bytes_per_s: int
    flops_per_s: int | None  # dense tensor-core peak in flops_dtype; None when not given
    flops_dtype: str
    source: str  # where the numbers are printed

    def data(self) -> dict[str, object]:
        """The ``gpu`` object of ``cost --format json``."""
        return {
            "name": self.name,
            "memory_bytes": self.memory_bytes,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "flops_per_s": self.flops_per_s,
        }


def _gpu(name: str, gib: int, gb_per_s: float, tflops: float, source: str, dtype: str = "bfloat16") -> GPU:
    return GPU(name, gib * GIB, round(gb_per_s * GB_PER_S), round(tflops * TFLOPS), dtype, source)


GPUS: tuple[GPU, ...] = (
    # NVIDIA H100 Tensor Core GPU datasheet (SXM column): 80 GB HBM3, 3.35 TB/s, BF16 1,979 TFLOPS with sparsity.
    _gpu("H100 SXM 80GB", 80, 3350, 989.4, "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM"),
    # NVIDIA H200 Tensor Core GPU datasheet (SXM column): 141 GB HBM3e, 4.8 TB/s, BF16 1,979 TFLOPS with sparsity.
    _gpu("H200 SXM 141GB", 141, 4800, 989.4, "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM"),
    # NVIDIA A100 Tensor Core GPU datasheet: A100 40GB SXM 1,555 GB/s, 80GB SXM 2,039 GB/s; BF16 312 TFLOPS dense.
    _gpu("A100 SXM 40GB", 40, 1555, 312, "NVIDIA A100 Tensor Core GPU datasheet, A100 40GB SXM"),
    _gpu("A100 SXM 80GB", 80, 2039, 312, "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM"),
    # NVIDIA L4 Tensor Core GPU datasheet: 24 GB GDDR6, 300 GB/s, BF16 242 TFLOPS with sparsity (121 dense).
    _gpu("L4 24GB", 24, 300, 121, "NVIDIA L4 Tensor Core GPU datasheet"),
    # NVIDIA L40S GPU datasheet: 48 GB GDDR6, 864 GB/s, BF16 362.05 | 733 TFLOPS (dense | sparse).
    _gpu("L40S 48GB", 48, 864, 362.05, "NVIDIA L40S GPU datasheet"),
    # NVIDIA Ada GPU architecture whitepaper, appendix (GeForce RTX 4090): 24 GB GDDR6X, 1,008 GB/s,
    # peak BF16 tensor TFLOPS with FP32 accumulate 165.2 (330.4 with sparsity).
    _gpu("RTX 4090 24GB", 24, 1008, 165.2, "NVIDIA Ada GPU architecture whitepaper, GeForce RTX 4090"),
    # NVIDIA Ampere GA102 GPU architecture whitepaper (GeForce RTX 3090): 24 GB GDDR6X, 936 GB/s,
    # peak BF16 tensor TFLOPS with FP32 accumulate 71 (142 with sparsity).
    _gpu("RTX 3090 24GB", 24, 936, 71, "NVIDIA Ampere GA102 GPU architecture whitepaper, GeForce RTX 3090"),
    # NVIDIA T4 Tensor Core GPU datasheet: 16 GB GDDR6, 320 GB/s, mixed-precision (FP16/FP32) 65 TFLOPS; no BF16.
    _gpu("T4 16GB", 16, 320, 65, "NVIDIA T4 Tensor Core GPU datasheet", dtype="float16"),
)


def _key(name: str) -> str:
    """``H100 SXM 80GB`` → ``h100sxm80gb``: names compared without case, spaces, dashes or underscores."""
    return re.sub(r"[\s_\-]+", "", name.lower())


def gpu_named(name: str) -> GPU:
    """The GPU a name means: its full name, or some of its words in order that pick one row (``h100``,
    ``a100-80gb``, ``4090``); a name that picks none or several is refused, with the names to choose from."""
    wanted = _key(name)
    exact = [gpu for gpu in GPUS if _key(gpu.name) == wanted]
    found = exact or [gpu for gpu in GPUS if wanted and _fits(wanted, gpu.name)]
    if len(found) == 1:
        return found[0]
    names = ", ".join(gpu.name for gpu in (found or GPUS))
    reason = "could be any of" if found else "is none of"
    raise PlanError(
        f"--gpu {name!r} {reason} {names}; name one, or give --gpu-memory and --gpu-bandwidth for another GPU"
    )


def _fits(wanted: str, name: str) -> bool:
    """Whether every word of the table's name that ``wanted`` mentions is there in order (``a10080gb``)."""
    words = [_key(word) for word in name.split()]
    position = 0
    for word in words:
        if wanted.startswith(word, position):
            position += len(word)
    return 0 < position == len(wanted)


def custom_gpu(memory_gib: float, bandwidth_gb_per_s: float, tflops: float | None) -> GPU:
    """A GPU given by its numbers (``--gpu-memory``, ``--gpu-bandwidth``, ``--gpu-flops``)."""
    given = ((memory_gib, "--gpu-memory"), (bandwidth_gb_per_s, "--gpu-bandwidth"), (tflops, "--gpu-flops"))
    for value, option in given:
        if value is not None and not value > 0:
            raise PlanError(f"{option} is a positive number, not {value}")
    return GPU(
        f"{memory_gib:g} GiB, {bandwidth_gb_per_s:g} GB/s",
        round(memory_gib * GIB),
        round(bandwidth_gb_per_s * GB_PER_S),
        None if tflops is None else round(tflops * TFLOPS),
        "bfloat16",
        "numbers given on the command line",
    )
