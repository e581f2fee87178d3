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


def saved_bytes_by_module(model: torch.nn.Module, inputs: Mapping[str, Any]) -> dict[str, int]:
    """:func:`saved_bytes` per module: each saved storage charged to the innermost module running when it
    was created (read by a dispatch mode that sees every op's outputs), "" for the model's own code."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    names = {module: name for name, module in model.named_modules()}
    running: list[str] = []
    creator: dict[int, str] = {}

    class Creators(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            # A view's output shares an operand's storage: only a storage the op made is charged to it.
            operands = {
                t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)
            }
            for tensor in tree_leaves(out):
                if isinstance(tensor, torch.Tensor) and tensor.untyped_storage().data_ptr() not in operands:
                    creator[tensor.untyped_storage().data_ptr()] = running[-1] if running else ""
            return out

    def enter(module: torch.nn.Module, _: Any) -> None:
        running.append(names.get(module, running[-1] if running else ""))

    def leave(module: torch.nn.Module, _: Any, __: Any) -> None:
        running.pop()

    handles = [m.register_forward_pre_hook(enter) for m in model.modules() if m is not model]
    handles += [m.register_forward_hook(leave) for m in model.modules() if m is not model]
    excluded = {p.untyped_storage().data_ptr() for p in model.parameters()}
    excluded |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    excluded |= {t.untyped_storage().data_ptr() for t in inputs.values() if isinstance(t, torch.Tensor)}
    seen: dict[int, tuple[str, int]] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        address = storage.data_ptr()
        if address not in excluded:
            size = max(seen.get(address, ("", 0))[1], storage.nbytes())
            seen[address] = (creator.get(address, "?"), size)
        return tensor

    model.train()
    try:
        with Creators(), torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    found: dict[str, int] = {}
    for module, size in seen.values():
        found[module] = found.get(module, 0) + size
    return dict(sorted(found.items()))
