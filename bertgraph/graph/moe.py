"""Mixture of experts: total parameters and the parameters one token actually runs through.

A token's hidden state goes to ``k`` of a block's ``N`` routed experts (the config's top-k);
the router and any shared experts run for every token, as does everything outside the
experts. Routed experts come in two forms, both read off the graph's module and parameter
tables: one module holding fused tensors whose first dimension is the expert
(``gate_up_proj: [N, 2·I, H]``), or a list of ``N`` expert modules (``experts.0`` … ``experts.N-1``).
A routed expert's share of a fused tensor is ``1/N`` of it, so a token's is ``k/N``.
"""

from __future__ import annotations

import re
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.costbase import node_poly
from bertgraph.graph.formulas import op_key
from bertgraph.graph.poly import Poly, total

# Sizes of the config summary (``G_CONFIG``) that a mixture-of-experts model has.
EXPERTS = "experts"
EXPERTS_PER_TOKEN = "experts_per_token"
_SHARED = re.compile(r"shared", re.I)
_EXPERT_LIST = re.compile(r"(?:^|\.)experts\.(\d+)(?:\.|$)")


def expert_parameters(graph: nx.DiGraph) -> dict[str, int]:
    """Parameter name → elements, for every parameter of a routed expert (shared experts excluded)."""
    experts = int(graph.graph.get(g.G_CONFIG, {}).get(EXPERTS) or 0)
    if experts < 2:
        return {}
    modules = graph.graph.get(g.G_MODULES, {})
    found = {}
    for row in g.parameter_rows(graph):
        module, name = str(row["module"]), str(row["name"])
        if _SHARED.search(name):
            continue
        kind = str(modules.get(module, {}).get(g.M_TYPE, ""))
        fused = "Expert" in kind and bool(row["shape"]) and int(row["shape"][0]) == experts
        listed = _EXPERT_LIST.search(module) is not None
        if fused or listed:
            found[name] = int(row["numel"])
    return found


def active_parameters(graph: nx.DiGraph) -> dict[str, Any] | None:
    """``{"active", "experts", "experts_per_token", "expert_parameters"}``, or None without experts.

    ``active`` is the total less the routed experts' parameters plus ``k/N`` of them:
    what one token's forward pass multiplies by.
    """
    config = graph.graph.get(g.G_CONFIG, {})
    experts = int(config.get(EXPERTS) or 0)
    per_token = int(config.get(EXPERTS_PER_TOKEN) or 0)
    routed = expert_parameters(graph)
    if not routed or not 0 < per_token <= experts:
        return None
    whole = sum(int(row["numel"]) for row in g.parameter_rows(graph))
    in_experts = sum(routed.values())
    # Every routed expert of a block has the same size, so a block's routed parameters divide by N.
    active = whole - in_experts + in_experts * per_token // experts
    return {
        "active": active,
        "experts": experts,
        "experts_per_token": per_token,
        "expert_parameters": in_experts,
    }


GROUPED_PRODUCTS = ("aten._grouped_mm", "transformers.grouped_mm_fallback")


def all_experts_matmul_flops(graph: nx.DiGraph, matmul: Poly) -> Poly | None:
    """The matmul FLOPs were every routed expert to run for every token (a dense count beside the
    active one): the grouped products' FLOPs, which count the k experts a token is sent to, scaled
    to all N. None without experts or grouped products."""
    found = active_parameters(graph)
    if found is None:
        return None
    grouped = total(
        node_poly(data, g.MATMUL_FLOPS)
        for _, data in graph.nodes(data=True)
        if op_key(str(data.get(g.TARGET, ""))) in GROUPED_PRODUCTS
    )
    experts, per_token = found["experts"], found["experts_per_token"]
    if not grouped or any(coefficient * experts % per_token for _, coefficient in grouped.terms()):
        return None
    return matmul - grouped + Poly({m: c * experts // per_token for m, c in grouped.terms()})


def expert_modules(graph: nx.DiGraph) -> set[str]:
    """The modules holding a block's routed experts: the one with fused expert tensors, or the list
    ``experts`` whose items are the experts."""
    found = set()
    module_of: dict[str, str] = {}  # one pass over the rows: an expert list can hold thousands of parameters
    for row in g.parameter_rows(graph):
        module_of.setdefault(row["name"], str(row["module"]))
    for name in expert_parameters(graph):
        module = module_of.get(name, "")
        listed = _EXPERT_LIST.search(module)
        found.add(module[: listed.start() + len(listed.group(0).rstrip(".").rsplit(".", 1)[0])] if listed else module)
    return found


def experts_line(graph: nx.DiGraph) -> str:
    """``8 experts, 2 active per token`` for a mixture of experts, else ``""``."""
    found = active_parameters(graph)
    return f"{found['experts']} experts, {found['experts_per_token']} active per token" if found else ""
