"""What autograd saves for the backward pass of one real training-mode forward on the CPU."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def saved_bytes(model: torch.nn.Module, inputs: Mapping[str, Any]) -> int:
    """Bytes of the distinct storages autograd saves (by storage address), parameters and inputs left out."""
    excluded = {p.untyped_storage().data_ptr() for p in model.parameters()}
    excluded |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    excluded |= {t.untyped_storage().data_ptr() for t in inputs.values() if isinstance(t, torch.Tensor)}
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in excluded:
            seen[storage.data_ptr()] = max(seen.get(storage.data_ptr(), 0), storage.nbytes())
        return tensor

    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(**inputs)
    return sum(seen.values())
