"""Attention's matmul FLOPs counted only over the (query, key) pairs its mask allows.

FlopCounterMode, and ``total.attention_matmul_flops``, count every pair: a kernel computes
the whole score matrix and masks it afterwards. A kernel that skips masked blocks needs only
the allowed pairs: with ``n`` queries and keys, causal ``n(n + 1)/2``; a causal window of
``w`` (``q - w < k ≤ q``) ``m(m + 1)/2 + w(n - m)`` with ``m = min(n, w)``; a two-sided window
(``|q - k| ≤ w``) ``n² - t(t + 1)`` with ``t = n - min(n, w + 1)``; bidirectional and cross
attention every pair. Padding is not counted out (every token is real). Each attention
product's cost per pair is its dense cost divided by ``queries × keys``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.costbase import CostError, has_weight_operand, node_poly
from bertgraph.graph.poly import Monomial, Poly


def attention_facts_of(graph: nx.DiGraph, data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The attention facts of an attention product: its own (fused attention) or its module's."""
    if data.get(g.ATTENTION):
        return data
    entry = graph.graph.get(g.G_MODULES, {}).get(str(data.get(g.MODULE, "")), {})
    return entry if isinstance(entry, dict) else {}


def divide(poly: Poly, by: Monomial) -> Poly:
    """``poly / by`` where every monomial holds ``by``; raises :class:`CostError` otherwise."""
    terms: dict[Monomial, int] = {}
    for monomial, coefficient in poly.terms():
        powers = dict(monomial)
        for name, power in by:
            if powers.get(name, 0) < power:
                raise CostError(f"an attention product's cost {poly} is not per query and key")
            powers[name] -= power
        terms[tuple(sorted((n, p) for n, p in powers.items() if p))] = coefficient
    return Poly(terms)


def _halve(poly: Poly) -> Poly:
    if any(coefficient % 2 for _, coefficient in poly.terms()):
        raise CostError(f"{poly} is not a whole number of FLOPs when halved")
    return Poly({monomial: coefficient // 2 for monomial, coefficient in poly.terms()})


def twice_allowed_pairs(kind: str, window: int | None, length: str) -> Poly:
    """Twice the allowed (query, key) pairs of self-attention over ``length`` tokens (whole coefficients)."""
    n = Poly.var(length)
    if kind == g.CAUSAL:
        return n * n + n
    if kind == g.CAUSAL_SLIDING_WINDOW and window is not None:
        m = Poly.capped(length, window)
        return m * m + m + 2 * window * (n - m)
    if kind == g.SLIDING_WINDOW and window is not None:
        t = n - Poly.capped(length, window + 1)
        return 2 * (n * n - t * t - t)
    return 2 * n * n


def product_pairs(poly: Poly) -> Monomial:
    """The queries × keys monomial of a self- or cross-attention product: its lengths' degree-2 part."""
    lengths = sorted(name for name in poly.names() if name != "batch" and name != "choices")
    if len(lengths) == 1:
        return ((lengths[0], 2),)
    if len(lengths) == 2:
        return ((lengths[0], 1), (lengths[1], 1))
    raise CostError(f"an attention product's cost {poly} has no query and key lengths")


def masked_attention_flops(graph: nx.DiGraph) -> Poly:
    """Attention's matmul FLOPs over the allowed pairs only (see the module doc)."""
    result = Poly()
    for node, data in graph.nodes(data=True):
        if data.get(g.KIND) != g.OPERATOR:
            continue
        poly = node_poly(data, g.MATMUL_FLOPS)
        if not poly or has_weight_operand(graph, node):
            continue
        facts = attention_facts_of(graph, data)
        kind = str(facts.get(g.ATTENTION, g.BIDIRECTIONAL))
        if kind in (g.BIDIRECTIONAL, g.CROSS):
            result = result + poly  # every pair is allowed (DeBERTa's position products too)
            continue
        pairs = product_pairs(poly)
        if len(pairs) == 2:
            result = result + poly
            continue
        window = facts.get(g.WINDOW)
        per_pair = divide(poly, pairs)
        result = result + _halve(
            per_pair * twice_allowed_pairs(kind, window if isinstance(window, int) else None, pairs[0][0])
        )
    return result
