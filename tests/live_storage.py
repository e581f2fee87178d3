"""The peak bytes of live tensors during a real forward pass, measured with a TorchDispatchMode.

Every aten op's outputs pass through the mode. A storage no op made inside the mode
(parameters, buffers, inputs, lifted constants) is external and never counted, nor are
views of it; every other storage is counted once, when an op first returns it, and uncounted
by a weak-reference callback when it is freed. The peak is sampled right after each op,
while its inputs are still alive — what :func:`bertgraph.graph.memory.peak_activation` models.
Scratch memory inside kernels is invisible to both.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LiveStorage(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.external: set[int] = set()
        self.made: set[int] = set()
        self.live: dict[int, tuple[int, Any]] = {}
        self.current = 0
        self.peak = 0
        self.peak_op = ""

    def _freed(self, key: int) -> None:
        size, _ = self.live.pop(key, (0, None))
        self.current -= size

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        for tensor in tree_flatten((args, kwargs or {}))[0]:
            if isinstance(tensor, torch.Tensor):
                key = tensor.untyped_storage()._cdata
                if key not in self.made:
                    self.external.add(key)
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            key = storage._cdata
            if key in self.external or key in self.live:
                continue  # a view or an in-place result of a storage already known
            self.made.add(key)
            self.live[key] = (storage.nbytes(), weakref.ref(storage, lambda _, key=key: self._freed(key)))
            self.current += storage.nbytes()
        if self.current > self.peak:
            self.peak, self.peak_op = self.current, str(func)
        return out


def peak_bytes(module: Any, inputs: dict[str, Any]) -> tuple[int, str]:
    """Peak live bytes of one forward pass of ``module`` under ``torch.no_grad``, and the op at the peak."""
    with torch.no_grad():
        mode = LiveStorage()
        with mode:
            output = module(**inputs)
        del output
    return mode.peak, mode.peak_op
