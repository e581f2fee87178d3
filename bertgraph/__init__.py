"""bertgraph: see inside a BERT model — one annotated graph, many views.

>>> import bertgraph
>>> bertgraph.__version__
'0.1.0'

Heavy dependencies (torch, transformers, onnx) load only when a function needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bertgraph.version import __version__

__all__ = ["Architecture", "BertgraphError", "__version__", "compare", "export_onnx", "read_onnx", "resolve", "trace"]

if TYPE_CHECKING:
    from bertgraph.api import Architecture, compare, read_onnx, trace
    from bertgraph.errors import BertgraphError
    from bertgraph.model import resolve
    from bertgraph.onnx.export import export_onnx

_LAZY = {
    "Architecture": "bertgraph.api",
    "trace": "bertgraph.api",
    "compare": "bertgraph.api",
    "BertgraphError": "bertgraph.errors",
    "resolve": "bertgraph.model.spec",
    "export_onnx": "bertgraph.onnx.export",
    "read_onnx": "bertgraph.api",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bertgraph' has no attribute {name!r}")
