"""Two models compared, aligned by role: config, architecture, parameters per part, cost at a size.

A comparison is a view over two graphs. Parts are aligned by what they are for, not by their
names: the embeddings with the embeddings, a stack with the stack of its kind (a model of one
stack with the other's one stack: BERT's ``encoder.layer`` with GPT-2's ``h``), layer i with
layer i and, inside it, attention, cross-attention, feed-forward and norms; then final norms,
pooler and head. The parts partition each model's parameters, so they add up to its total.
Everything here is plain data; :mod:`bertgraph.render.diff` writes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from bertgraph.graph import aspects, roles
from bertgraph.graph import schema as g
from bertgraph.graph.cost import FLOPS, model_totals, uncounted_products
from bertgraph.graph.costbase import CostError, evaluate, sizes_for
from bertgraph.graph.generation import is_generative, kv_cache_bytes
from bertgraph.graph.memory import peak_activation, traced_float_dtype
from bertgraph.model.fields import COMMON_DEFAULTS

# Config keys that say how a file was written (and by which class), not what the model is.
BOOKKEEPING = frozenset(
    {"transformers_version", "_name_or_path", "_commit_hash", "_attn_implementation_autoset", "architectures"}
)
LAYER_PARTS = ("attention", "cross-attention", "feed-forward", "norms", "other")
_SUBLAYER_OF = {
    roles.SELF_ATTENTION: "attention",
    roles.CROSS_ATTENTION: "cross-attention",
    roles.FEED_FORWARD: "feed-forward",
}


@dataclass(frozen=True)
class Side:
    """One model of a comparison.

    Attributes:
        name: what the outputs call it (its name, with its head when not the base model).
        graph: its traced graph.
        config: its complete ``config.json`` (defaults filled in), as resolved.
        fields: its family's size roles → the config field holding each (``layers`` → ``n_layer``).
    """

    name: str
    graph: nx.DiGraph
    config: Mapping[str, Any]
    fields: Mapping[str, str]


@dataclass
class Comparison:
    """What differs between two models; :meth:`contract` is the JSON every writer agrees on."""

    models: list[str]
    totals: list[int]
    config: list[dict[str, Any]]
    architecture: list[dict[str, Any]]
    parts: list[dict[str, Any]]
    cost: dict[str, Any]
    # what the figure draws: each model's graph and its aspects in words (the schematic's columns)
    graphs: tuple[nx.DiGraph, nx.DiGraph] = field(repr=False)
    words: tuple[aspects.ModelWords, aspects.ModelWords] = field(repr=False)
    tensors: dict[str, Any] | None = None

    def contract(self) -> dict[str, Any]:
        """``{"models", "totals", "config", "architecture", "parts", "cost"}``, and ``"tensors"`` when
        both models have checkpoints. ``cost`` is :func:`cost_at`'s: the size (``batch``, ``seq``), each
        side's dtype, FLOPs, KV-cache bytes per token and peak activation bytes, and its notes."""
        found: dict[str, Any] = {
            "models": self.models,
            "totals": self.totals,
            "config": self.config,
            "architecture": self.architecture,
            "parts": self.parts,
            "cost": self.cost,
        }
        if self.tensors is not None:
            found["tensors"] = self.tensors
        return found


def compare(a: Side, b: Side, seq: int, batch: int = 1) -> Comparison:
    """Compare two models; the cost is evaluated at ``batch`` × ``seq`` tokens (an encoder-decoder's
    decoder as long as its input)."""
    words = (aspects.describe(a.graph), aspects.describe(b.graph))
    parts = part_rows(a.graph, b.graph, words)
    return Comparison(
        models=[a.name, b.name],
        totals=[_total(a.graph), _total(b.graph)],
        config=config_rows(a, b),
        architecture=aspects.differences(*words),
        parts=parts,
        cost=cost_at(a.graph, b.graph, seq, batch),
        graphs=(a.graph, b.graph),
        words=words,
    )


def _total(graph: nx.DiGraph) -> int:
    return sum(int(row["numel"]) for row in g.parameter_rows(graph))


# --- config ----------------------------------------------------------------------------------


def _same(x: Any, y: Any) -> bool:
    """Equal as config.json writes them (``1`` and ``true`` differ; key order does not count)."""
    return json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True)


def _read(config: Mapping[str, Any], key: str) -> tuple[Any, bool]:
    """A field's value as transformers reads it, and whether that is known: set, or left out with a
    default every config class shares (:data:`~bertgraph.model.fields.COMMON_DEFAULTS`); ``null`` is unset."""
    if config.get(key) is not None:
        return config[key], True
    return COMMON_DEFAULTS.get(key), key in COMMON_DEFAULTS or key in config


def config_rows(a: Side, b: Side) -> list[dict[str, Any]]:
    """Config fields whose values differ: the sizes first, aligned by what they size (GPT-2's
    ``n_layer`` with BERT's ``num_hidden_layers``: ``num_hidden_layers / n_layer``), then every other
    field in the order the configs list them, ``None`` where a config does not set it.

    A field one config leaves out is read as transformers' shared default where there is one. Left
    to its class's own default, it is compared only between configs of two types (whose classes
    have other fields); between configs of one type that default is the other's, as far as can be
    told without transformers, and nothing is claimed.
    """
    rows = []
    sized = set()
    for size in dict.fromkeys([*a.fields, *b.fields]):
        name_a, name_b = a.fields.get(size), b.fields.get(size)
        sized |= {name for name in (name_a, name_b) if name}
        left = a.config.get(name_a) if name_a else None
        right = b.config.get(name_b) if name_b else None
        if not _same(left, right):
            names = list(dict.fromkeys(name for name in (name_a, name_b) if name))
            rows.append({"field": " / ".join(names), "values": [left, right]})
    # torch_dtype is dtype's old name
    configs = [{("dtype" if k == "torch_dtype" else k): v for k, v in side.config.items()} for side in (a, b)]
    one_type = configs[0].get("model_type") == configs[1].get("model_type")
    for key in dict.fromkeys([*configs[0], *configs[1]]):
        if key in sized or key in BOOKKEEPING:
            continue
        (left, known_a), (right, known_b) = _read(configs[0], key), _read(configs[1], key)
        if (known_a != known_b and one_type) or _same(left, right):
            continue
        rows.append({"field": key, "values": [configs[0].get(key), configs[1].get(key)]})
    return rows


# --- parts -----------------------------------------------------------------------------------


def _layer_part(graph: nx.DiGraph, module: str, layer: str) -> str:
    """What a parameter's module is for inside a layer: a norm, or the sublayer it lies in."""
    if roles.role_of(graph, module) == roles.NORM:
        return "norms"
    path = module
    while path and path != layer:
        found = _SUBLAYER_OF.get(roles.role_of(graph, path))
        if found:
            return found
        path = path.rsplit(".", 1)[0] if "." in path else ""
    return "other"


def _outer_part(graph: nx.DiGraph, module: str) -> str:
    """The part of a parameter outside the layers: embeddings, pooler, head, a final norm or other."""
    backbone = graph.graph.get(g.G_BACKBONE, "")
    if backbone and module != backbone and not module.startswith(backbone + "."):
        return "head"
    parts = module.split(".")
    chain = [roles.role_of(graph, ".".join(parts[: n + 1])) for n in range(len(parts))]
    if roles.EMBEDDINGS in chain or roles.POSITION in chain:
        return "embeddings"
    if roles.POOLER in chain:
        return "pooler"
    if roles.HEAD in chain:
        return "head"
    return "final norm" if chain and chain[-1] == roles.NORM else "other"


def _assign(graph: nx.DiGraph, words: aspects.ModelWords) -> dict[tuple[Any, ...], int]:
    """Every parameter counted into one key: ``("layer", stack number, layer, part)``,
    ``("stack", stack number, part)`` for a final norm or other stack parameters, or ``(part,)``."""
    stacks = [stack.path for stack in words.stacks]
    found: dict[tuple[Any, ...], int] = {}
    for row in g.parameter_rows(graph):
        module, numel = str(row["module"]), int(row["numel"])
        key: tuple[Any, ...] | None = None
        for number, stack in sorted(enumerate(stacks), key=lambda item: -len(item[1])):
            index = module[len(stack) + 1 :].split(".", 1)[0] if module.startswith(stack + ".") else ""
            if index.isdigit():
                key = ("layer", number, int(index), _layer_part(graph, module, f"{stack}.{index}"))
                break
        if key is None:
            part = _outer_part(graph, module)
            side = roles.stack_side(graph, module) if part in ("final norm", "other") else None
            numbers = [n for n, s in enumerate(words.stacks) if s.kind == side] or ([0] if len(stacks) == 1 else [])
            key = ("stack", numbers[0], part) if part in ("final norm", "other") and numbers else (part,)
        found[key] = found.get(key, 0) + numel
    return found


def _span(first: int, last: int) -> str:
    return f"layer {first}" if first == last else f"layers {first}–{last}"


def part_rows(
    a: nx.DiGraph, b: nx.DiGraph, words: tuple[aspects.ModelWords, aspects.ModelWords]
) -> list[dict[str, Any]]:
    """Parameters per aligned part, ``None`` where a model has no such part: embeddings; per stack
    pair its layers (consecutive layers whose parts hold the same counts on both sides folded into
    one row each, summed: ``layers 0–11 · attention``), its final norm and other parameters; then
    pooler, head and anything else. Each model's column adds up to its total."""
    left, right = _assign(a, words[0]), _assign(b, words[1])
    kinds = ([s.kind for s in words[0].stacks], [s.kind for s in words[1].stacks])
    single = len(kinds[0]) == 1 and len(kinds[1]) == 1
    rows: list[dict[str, Any]] = []

    def row(part: str, x: int | None, y: int | None) -> None:
        if x is not None or y is not None:
            rows.append({"part": part, "params": [x, y]})

    row("embeddings", left.get(("embeddings",)), right.get(("embeddings",)))
    for i, j in aspects.pair_stacks(*kinds):
        title = aspects.stack_title(
            (kinds[0][i] if i is not None else None, kinds[1][j] if j is not None else None), single
        )
        prefix = f"{title} " if title else ""
        layers = [_layers_of(left, i), _layers_of(right, j)]
        count = max([*layers[0], *layers[1], -1]) + 1
        per_layer = [
            tuple((part, left.get(("layer", i, n, part)), right.get(("layer", j, n, part))) for part in LAYER_PARTS)
            for n in range(count)
        ]
        start = 0
        for n in range(1, count + 1):
            if n < count and per_layer[n] == per_layer[start]:
                continue
            span = n - start
            for part, x, y in per_layer[start]:
                row(
                    f"{prefix}{_span(start, n - 1)} · {part}",
                    None if x is None else x * span,
                    None if y is None else y * span,
                )
            start = n
        for part in ("final norm", "other"):
            row(f"{prefix}{part}", left.get(("stack", i, part)), right.get(("stack", j, part)))
    for part in ("pooler", "head", "final norm", "other"):
        row(part, left.get((part,)), right.get((part,)))
    return rows


def _layers_of(found: Mapping[tuple[Any, ...], int], stack: int | None) -> set[int]:
    return {key[2] for key in found if key[0] == "layer" and key[1] == stack} if stack is not None else set()


# --- cost ------------------------------------------------------------------------------------


def cost_at(a: nx.DiGraph, b: nx.DiGraph, seq: int, batch: int) -> dict[str, Any]:
    """FLOPs per token, KV-cache bytes per token (``None``: the model caches nothing) and peak
    activation bytes of one forward pass at ``batch`` × ``seq``, each model in the dtype it was traced
    in. A figure the graph cannot give is ``None`` with a note saying why, never a guess."""
    values: dict[str, list[Any]] = {"flops_per_token": [], "kv_cache_bytes_per_token": [], "peak_activation_bytes": []}
    notes: list[str] = []
    tokens = batch * seq
    for graph in (a, b):
        name = graph.graph.get(g.G_NAME) or "a model"
        sizes = sizes_for(graph, seq=seq, batch=batch)
        missing = uncounted_products(graph)
        if missing:
            notes.append(f"{name}: no FLOPs, {sum(missing.values())} matrix products have no cost")
        values["flops_per_token"].append(None if missing else evaluate(model_totals(graph)[FLOPS], sizes) / tokens)
        kv = None
        if is_generative(graph):
            try:
                kv = evaluate(kv_cache_bytes(graph), sizes) / tokens
            except CostError as error:
                notes.append(f"{name}: no KV cache, {error}")
        values["kv_cache_bytes_per_token"].append(kv)
        values["peak_activation_bytes"].append(peak_activation(graph, sizes).bytes)
    return {
        "batch": batch,
        "seq": seq,
        "dtypes": [traced_float_dtype(a), traced_float_dtype(b)],
        **values,
        "notes": notes,
    }
