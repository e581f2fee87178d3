"""Checkpoint headers, read without torch: tensor shapes, and whether they fit the config."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from bertgraph.errors import CheckpointError


def safetensors_shapes(path: Path) -> dict[str, list[int]]:
    """Tensor name → shape from a safetensors file or index, reading headers only."""
    if path.name.endswith(".index.json"):
        index = json.loads(path.read_text(encoding="utf-8"))
        shapes: dict[str, list[int]] = {}
        for shard in sorted(set(index.get("weight_map", {}).values())):
            shapes.update(safetensors_shapes(path.parent / shard))
        return shapes
    try:
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            if length > 100_000_000:
                raise ValueError("header too large")
            header = json.loads(handle.read(length))
    except (OSError, ValueError, struct.error) as error:
        raise CheckpointError(f"{path} is not a readable safetensors file ({error})") from error
    return {
        name: list(entry["shape"])
        for name, entry in header.items()
        if name != "__metadata__" and isinstance(entry, dict)
    }


def check_checkpoint(expected: dict[str, list[int]], found: dict[str, list[int]], path: Path, prefix: str) -> None:
    """Every checkpoint tensor the model uses must have the shape the config gives it.

    ``prefix`` is the base-model prefix (``bert``): checkpoints of a bare BertModel and of
    a model with a head name the same tensors with and without it.
    """

    def normal(name: str) -> str:
        return name[len(prefix) + 1 :] if name.startswith(prefix + ".") else name

    wanted = {normal(name): shape for name, shape in expected.items()}
    matched = 0
    for name, shape in sorted(found.items()):
        key = normal(name)
        if key not in wanted:
            continue
        matched += 1
        if list(wanted[key]) != list(shape):
            raise CheckpointError(
                f"{path}: tensor {name!r} has shape {list(shape)} but the config needs "
                f"{list(wanted[key])}; use the config.json saved with these weights "
                "(and no size overrides)"
            )
    if not matched:
        raise CheckpointError(f"{path} holds none of the model's tensors; is it a BERT checkpoint for this config?")
