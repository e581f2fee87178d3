"""The packages ONNX export and reading need, checked up front with a one-line error.

They are part of bertgraph's base install; an environment can still lack one (a
partial install, a package removed by hand), and then the user is told which to install
rather than shown a traceback or a silent fall-back to another exporter.
"""

from __future__ import annotations

import importlib

from bertgraph.errors import OnnxError

# Module → the distribution that provides it (what ``pip install`` needs).
EXPORT = {
    "numpy": "numpy",
    "onnx": "onnx",
    "onnx_ir": "onnx-ir",
    "onnxscript": "onnxscript",
    "onnxruntime": "onnxruntime",
}
READ = {"onnx": "onnx"}


def require(modules: dict[str, str], task: str) -> None:
    """Import each module; the first one missing becomes a one-line :class:`OnnxError`."""
    for module, distribution in modules.items():
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise OnnxError(
                f"{task} needs the Python package {distribution!r}, which is missing or broken "
                f"({error}); install it with: pip install {distribution}"
            ) from error
