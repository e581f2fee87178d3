"""What transformers itself builds from a config.json's fields: the count generic totals are held to.

Made with transformers' own entry points only (``AutoConfig.for_model`` and the class its auto
table names for the type), never through bertgraph, so a total bertgraph reports is checked
against an independent build of the same dict.
"""

from __future__ import annotations

from typing import Any


def transformers_model(config: dict[str, Any], device: str = "meta") -> Any:
    """The base model transformers makes of ``config`` (a config.json's fields, ``model_type`` among them)."""
    import torch
    import transformers
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    fields = {name: value for name, value in config.items() if name != "model_type"}
    made = AutoConfig.for_model(config["model_type"], **fields)
    name = MODEL_MAPPING_NAMES[config["model_type"]]
    with torch.device(device):
        return getattr(transformers, name[0] if isinstance(name, (list, tuple)) else name)(made)


def transformers_total(config: dict[str, Any]) -> int:
    """``sum(p.numel())`` over the parameters of :func:`transformers_model` built on meta (each tensor once)."""
    return sum(parameter.numel() for parameter in transformers_model(config).parameters())
