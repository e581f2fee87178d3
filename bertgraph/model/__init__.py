"""What a model is before it runs: presets, references resolved to specs, checkpoints, building.

:mod:`~bertgraph.model.spec` and :mod:`~bertgraph.model.checkpoint` read only JSON and
file headers; :mod:`~bertgraph.model.build` is the one place that imports transformers
model classes (inside its functions, so importing this package stays cheap).
"""

from bertgraph.model.build import build_model, example_inputs
from bertgraph.model.checkpoint import check_checkpoint, safetensors_shapes
from bertgraph.model.families import FAMILIES, HEAD_NAMES, MODEL_TYPES, Family, family_of
from bertgraph.model.spec import HEADS, INPUT_NAMES, ModelSpec, resolve

__all__ = [
    "FAMILIES",
    "HEADS",
    "HEAD_NAMES",
    "INPUT_NAMES",
    "MODEL_TYPES",
    "Family",
    "ModelSpec",
    "build_model",
    "check_checkpoint",
    "example_inputs",
    "family_of",
    "resolve",
    "safetensors_shapes",
]
