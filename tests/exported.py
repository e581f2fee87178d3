"""Graphs of models bertgraph does not build itself (other families, single ops), for the cost tests.

Each model is exported twice with torch.export at prime example sizes and the two graphs are
named with bertgraph's own :func:`~bertgraph.tracing.dims.name_dims`, exactly as tracing does,
so shapes read ``[batch, seq, 64]`` and costs are polynomials. FlopCounterMode gives the
reference count of a real forward pass at any size.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import networkx as nx

from bertgraph.graph.cost import annotate
from bertgraph.tracing.dims import name_dims
from bertgraph.tracing.export import graph_from_program

SIZES = ({"batch": 2, "seq": 7}, {"batch": 3, "seq": 13})
Inputs = Callable[[int, int, str], dict[str, Any]]


def exported_graph(model: Any, inputs: Inputs, name: str = "model") -> nx.DiGraph:
    """The named, cost-annotated graph of ``model`` (on the meta device) fed by ``inputs(batch, seq, device)``."""
    import torch

    from bertgraph.model import family_of

    spec = SimpleNamespace(
        name=name,
        head="base",
        family=family_of("bert"),  # roles and stacks follow BERT's rules; costs need none of them
        model_type="bert",
        dim_names=("batch", "seq"),
        input_dims={},  # static exports: the dims are named from the pair of graphs, not from symbols
        example_shape=(SIZES[0]["batch"], SIZES[0]["seq"]),
        summary=dict,
        checkpoint=None,  # no checkpoint, no auto_map classes, no quantization: a bare module's graph
        remote_code=(),
        config={},
    )
    graphs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for size in SIZES:
            program = torch.export.export(model, (), inputs(size["batch"], size["seq"], "meta"), strict=False)
            graphs.append(graph_from_program(program, model, spec))  # type: ignore[arg-type]
    return annotate(name_dims(graphs[0], graphs[1], *SIZES))


def _cpu_flash_attention(q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    from torch.utils.flop_counter import sdpa_flop_count

    return int(sdpa_flop_count(q, k, v))  # FlopCounterMode hands formulas shapes, not tensors


def flop_counter(model: Any, inputs: dict[str, Any]) -> int:
    """FlopCounterMode's total for one forward pass of ``model``.

    On the CPU, scaled dot-product attention runs a fused kernel FlopCounterMode has no
    formula for (it would count 0); the custom mapping counts it with torch's own sdpa formula.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    # FlopCounterMode's module tracker hooks the autograd graph of module inputs; a parameter passed
    # to a module as its input (DeBERTa's relative embeddings) trips it unless nothing needs gradients.
    model.requires_grad_(False)
    mapping = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_attention}
    with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        model(**inputs)
    return int(counter.get_total_flops())
