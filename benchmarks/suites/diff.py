"""`bertgraph diff A B`: two presets cold and warm next to their two cold renders, and two 500 MB
checkpoints compared tensor by tensor.

Cold, a diff traces both models in one process, where rendering them is two processes that each
import torch and trace one: the target is at most 1.2 × the two renders' time together. Warm (both
graphs in the cache) it imports no torch: under a second. The checkpoints are roberta-base's
config with seeded random float32 weights (498.6 MB each), the second a copy with three tensors
changed; `diff` streams every tensor's bytes through a hash in a fixed buffer, so its peak memory
stays under 200 MB however large the files (graphs from the cache: what it holds is the
comparison's own).
"""

from __future__ import annotations

import json
import math
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

from harness import BERTGRAPH, Command, Context, Stored, Suite, Target, ratio

A, B = "bert-base-uncased", "roberta-base"
RENDER_A, RENDER_B = f"render {A} (cold)", f"render {B} (cold)"
COLD, WARM = f"diff {A} {B} (cold)", f"diff {A} {B} (warm)"
SUMMARY = f"summary {A} (warm)"  # one model from the cache: the floor a warm diff stands on
CHECKPOINTS = "diff of two 500 MB checkpoints (graphs warm)"
CHECKPOINT_MODEL = "roberta-base"
CHANGED = 3  # tensors the second checkpoint changes
LIMIT, WARM_SECONDS, MEMORY_MB = 1.2, 1.0, 200.0


def _tensors(model: str, layers: int | None) -> list[tuple[str, list[int]]]:
    """Every parameter's name and shape, read off bertgraph's graph of ``model`` (a process of its own)."""
    code = (
        "import json, sys, bertgraph\n"
        "kwargs = {'layers': int(sys.argv[2])} if sys.argv[2] != '0' else {}\n"
        "graph = bertgraph.trace(sys.argv[1], **kwargs).graph\n"
        "print(json.dumps([[row['name'], row['shape']] for row in graph.graph['parameters']]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, model, str(layers or 0)], capture_output=True, text=True, check=True
    )
    return [(name, list(shape)) for name, shape in json.loads(done.stdout)]


def _write_checkpoint(folder: Path, config: dict[str, object], tensors: list[tuple[str, list[int]]]) -> None:
    """config.json and a float32 model.safetensors of seeded random bytes, written tensor by tensor."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    header, offset = {}, 0
    for name, shape in tensors:
        size = 4 * max(1, math.prod(shape))
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    generator = random.Random(0)
    with (folder / "model.safetensors").open("wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw)
        for _, shape in tensors:
            left = 4 * max(1, math.prod(shape))
            while left:
                chunk = min(left, 1 << 22)
                handle.write(generator.randbytes(chunk))
                left -= chunk


def _changed_copy(source: Path, target: Path, count: int) -> None:
    """``source`` copied, with the first byte of ``count`` tensors flipped."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "config.json", target / "config.json")
    shutil.copyfile(source / "model.safetensors", target / "model.safetensors")
    with (target / "model.safetensors").open("r+b") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
        for name in sorted(header)[:count]:
            handle.seek(8 + length + header[name]["data_offsets"][0])
            first = handle.read(1)
            handle.seek(-1, 1)
            handle.write(bytes([first[0] ^ 0xFF]))


def commands(ctx: Context) -> dict[str, Command]:
    from bertgraph.model.presets import preset_config

    layers = 2 if ctx.smoke else None
    small = ["--layers", "2"] if ctx.smoke else []
    first, second = ctx.work / "checkpoint-a", ctx.work / "checkpoint-b"
    if not (second / "model.safetensors").exists():
        config = dict(preset_config(CHECKPOINT_MODEL) or {})
        if layers:
            config["num_hidden_layers"] = layers
        _write_checkpoint(first, config, _tensors(CHECKPOINT_MODEL, layers))
        _changed_copy(first, second, CHANGED)
    diff = [BERTGRAPH, "diff", A, B, *small]
    return {
        RENDER_A: Command([BERTGRAPH, "render", A, *small, "-o", str(ctx.work / "a.svg")], cache="cold"),
        RENDER_B: Command([BERTGRAPH, "render", B, *small, "-o", str(ctx.work / "b.svg")], cache="cold"),
        COLD: Command(diff, cache="cold"),
        WARM: Command(diff, cache="warm"),
        SUMMARY: Command([BERTGRAPH, "summary", A, *small], cache="warm"),
        CHECKPOINTS: Command([BERTGRAPH, "diff", str(first), str(second)], cache="warm"),
    }


def targets(stored: dict[str, Stored]) -> list[Target]:
    renders = stored[RENDER_A].seconds + stored[RENDER_B].seconds
    cold, warm, checkpoints = stored[COLD], stored[WARM], stored[CHECKPOINTS]
    time = ratio(cold.seconds, renders)
    return [
        Target(
            f"cold diff of two presets: ≤ {LIMIT} × their two cold renders",
            f"{time:.2f} × ({cold.seconds:.2f} s vs {stored[RENDER_A].seconds:.2f} s + "
            f"{stored[RENDER_B].seconds:.2f} s)",
            time <= LIMIT,
        ),
        Target(
            f"warm diff of two presets (graph cache): < {WARM_SECONDS:.0f} s",
            f"{warm.seconds:.2f} s, {warm.peak_mb:.0f} MB ({ratio(warm.seconds, stored[SUMMARY].seconds):.2f} × "
            f"a warm summary of one model, {stored[SUMMARY].seconds:.2f} s)",
            warm.seconds < WARM_SECONDS,
        ),
        Target(
            f"diff of two 500 MB checkpoints: ≤ {MEMORY_MB:.0f} MB peak",
            f"{checkpoints.peak_mb:.0f} MB in {checkpoints.seconds:.2f} s",
            checkpoints.peak_mb <= MEMORY_MB,
        ),
    ]


SUITE = Suite(
    name="diff",
    title="diff of two models: presets cold and warm next to their renders; two 500 MB checkpoints",
    order=27,
    commands=commands,
    targets=targets,
    notes=(
        "Cold runs empty the graph cache first; the renders draw one model each (base head), the diff "
        "traces both and prints its tables. The checkpoints (roberta-base's config, seeded random float32 "
        f"weights, the second with {CHANGED} tensors changed) are compared with both graphs in the cache: "
        "the peak is the comparison's, hashing every tensor through a 4 MiB buffer per checkpoint.",
    ),
)
