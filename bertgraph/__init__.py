"""bertgraph: see inside a BERT model — one annotated graph, many views.

>>> import bertgraph
>>> bertgraph.__version__
'0.1.0'

Heavy dependencies (torch, transformers, onnx) load only when a function needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["Architecture", "BertgraphError", "export_onnx", "read_onnx", "resolve", "trace"]

if TYPE_CHECKING:
    from bertgraph.api import Architecture, trace
    from bertgraph.errors import BertgraphError
    from bertgraph.load import resolve
    from bertgraph.onnx_export import export_onnx
    from bertgraph.onnx_read import read_onnx

_LAZY = {
    "Architecture": "bertgraph.api",
    "trace": "bertgraph.api",
    "BertgraphError": "bertgraph.errors",
    "resolve": "bertgraph.load",
    "export_onnx": "bertgraph.onnx_export",
    "read_onnx": "bertgraph.onnx_read",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bertgraph' has no attribute {name!r}")
