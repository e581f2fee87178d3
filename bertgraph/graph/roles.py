"""What each module of a graph is for, in the family vocabulary every view speaks.

Tracing records a role per module (``G_MODULES[path]["role"]``, from the family record):
``model``, ``embeddings``, ``position``, ``stack``, ``layer``, ``self-attention``,
``cross-attention``, ``feed-forward``, ``norm``, ``pooler`` or ``head``. Views, diagrams
and tables ask this module instead of looking at class names. A graph that records no
roles (one read from an ONNX file) gets them from the words of its module paths.
"""

from __future__ import annotations

import re

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.facts.sharing import shared_layers
from bertgraph.model.families.record import (
    CROSS_ATTENTION,
    DECODER,
    DECODER_ONLY,
    EMBEDDINGS,
    ENCODER,
    ENCODER_DECODER,
    ENCODER_ONLY,
    FEED_FORWARD,
    HEAD,
    LAYER,
    MODEL,
    NORM,
    POOLER,
    POSITION,
    SELF_ATTENTION,
    STACK,
    UNTOLD,
)

__all__ = [
    "CROSS_ATTENTION",
    "DECODER",
    "EMBEDDINGS",
    "ENCODER",
    "FEED_FORWARD",
    "HEAD",
    "LAYER",
    "MODEL",
    "NORM",
    "POOLER",
    "POSITION",
    "SELF_ATTENTION",
    "STACK",
    "lookup_path",
    "module_title",
    "role_of",
    "stack_kinds",
    "structure",
]

# ``layer.0-11`` (a run of identical siblings) or ``layers.1-19/3`` (every third: a periodic fold).
FOLDED = re.compile(r"\.(\d+)-(\d+)(?:/(\d+))?(?=\.|:|$)")
_INDEX = re.compile(r"^\d+$")


def lookup_path(path: str) -> str:
    """The module-table path of a possibly folded path: the first sibling it stands for.

    >>> lookup_path("bert.encoder.layer.0-11.attention"), lookup_path("model.layers.1-19/3.mlp")
    ('bert.encoder.layer.0.attention', 'model.layers.1.mlp')
    """
    return FOLDED.sub(lambda m: f".{m.group(1)}", path)


def role_of(graph: nx.DiGraph, path: str) -> str:
    """The role of module ``path`` (folded paths included); the root is ``model``."""
    path = lookup_path(path)
    info = graph.graph.get(g.G_MODULES, {}).get(path)
    if info and info.get(g.M_ROLE):
        return str(info[g.M_ROLE])
    return role_from_words(path, graph.graph.get(g.G_BACKBONE, ""))


def module_title(graph: nx.DiGraph, path: str) -> str:
    """What the family record calls module ``path`` when its name does not say it; ``""`` for none."""
    from bertgraph.model.families import BY_NAME  # the registry imports every family record

    family = BY_NAME.get(str(graph.graph.get(g.G_FAMILY, "")))
    backbone = graph.graph.get(g.G_BACKBONE, "")
    path = lookup_path(path)
    relative = path[len(backbone) + 1 :] if backbone and path.startswith(backbone + ".") else path
    for pattern, title in family.titles if family else ():
        if re.fullmatch(pattern, relative):
            return title
    return ""


def role_from_words(path: str, backbone: str = "") -> str:
    """A role read off the words of a module path, for graphs that record none (ONNX files).

    >>> [role_from_words(p, "bert") for p in ("bert", "bert.encoder.layer.3.attention.self.query",
    ...  "bert.encoder.layer.3.output.dense", "bert.encoder.layer.3", "bert.pooler.dense", "classifier")]
    ['model', 'self-attention', 'feed-forward', 'layer', 'pooler', 'head']
    """
    if path in ("", backbone):
        return MODEL
    if backbone and not path.startswith(backbone + "."):
        return HEAD
    parts = path.split(".")
    words = set(parts)
    if parts[-1] in ("LayerNorm", "layer_norm", "norm") or parts[-1].endswith(("_norm", "_layernorm")):
        return NORM
    if "embeddings" in words:
        return POSITION if "position_embeddings" in words else EMBEDDINGS
    if words & {"attention", "attn", "self_attn", "SelfAttention"}:
        return SELF_ATTENTION
    if words & {"crossattention", "encoder_attn", "EncDecAttention"}:
        return CROSS_ATTENTION
    if words & {"intermediate", "mlp", "ffn"} or any(
        parts[i] == "output" and _INDEX.match(parts[i - 1]) for i in range(1, len(parts))
    ):
        return FEED_FORWARD
    if "pooler" in words:
        return POOLER
    if _INDEX.match(parts[-1]):
        return LAYER
    return STACK if words & {"encoder", "decoder", "layer", "layers", "h", "block"} else MODEL


def stack_kinds(graph: nx.DiGraph) -> dict[str, str]:
    """Layer-list path → ``encoder`` or ``decoder``, as traced (``{}`` when the graph does not say)."""
    return dict(graph.graph.get(g.G_STACKS, {}))


def structure(graph: nx.DiGraph) -> str:
    """``encoder-only``, ``decoder-only`` or ``encoder-decoder``: the stacks the graph has.

    Read off the stacks the trace recorded; a graph without them (an ONNX file) is taken as
    what bertgraph exports to ONNX, an encoder. A generic record that could not tell
    (:data:`UNTOLD`) claims ``decoder-only`` only where every attention op is causal, else none.
    """
    kinds = set(stack_kinds(graph).values())
    if graph.graph.get(g.G_STRUCTURE) == UNTOLD:
        # Nothing about the type said; only the ops may: stacks whose every attention is causal decode.
        labels = [label for found in dict(graph.graph.get(g.G_ATTENTION, {})).values() for label in found]
        causal = bool(labels) and all(label.startswith(g.CAUSAL) for label in labels)
        return DECODER_ONLY if kinds and causal else UNTOLD
    if kinds == {ENCODER, DECODER}:
        return ENCODER_DECODER
    if kinds == {DECODER}:
        return DECODER_ONLY
    return str(graph.graph.get(g.G_STRUCTURE) or ENCODER_ONLY)


def stack_of(graph: nx.DiGraph, path: str) -> str | None:
    """The layer-list path ``path`` lies in (``bert.encoder.layer``), or None."""
    path = lookup_path(path)
    for stack in sorted(stack_kinds(graph), key=len, reverse=True):
        if path == stack or path.startswith(stack + "."):
            return stack
    return None


def stack_side(graph: nx.DiGraph, path: str) -> str | None:
    """``encoder`` or ``decoder``: which stack's part of the model ``path`` is in, or None.

    A stack's part is its layer list and, when the list sits in a module of its own
    (``encoder.block`` in ``encoder``), everything in that module (its final norm, say).
    """
    path = lookup_path(path)
    for stack, kind in sorted(stack_kinds(graph).items(), key=lambda item: -len(item[0])):
        owner = stack.rsplit(".", 1)[0] if "." in stack else stack
        backbone = graph.graph.get(g.G_BACKBONE, "")
        if owner == backbone:
            owner = stack
        if path == owner or path.startswith(owner + "."):
            return kind
    return None


def attention_labels(graph: nx.DiGraph, path: str) -> list[str]:
    """The attention kinds of the blocks at or below module ``path`` (``["causal", "cross"]``).

    Read from the module table, where the facts pass records each attention block's kind;
    ``[]`` when the graph records none.
    """
    path = lookup_path(path)
    found = []
    for module, info in graph.graph.get(g.G_MODULES, {}).items():
        if (not path or module == path or module.startswith(path + ".")) and g.attention_label(info):
            found.append(g.attention_label(info))
    return sorted(set(found), key=kind_order)


def kind_order(label: str) -> tuple[int, str]:
    """Sort key of attention labels: in the order of ``schema.ATTENTION_KINDS``."""
    kind = label.split("(", 1)[0]
    order = g.ATTENTION_KINDS.index(kind) if kind in g.ATTENTION_KINDS else len(g.ATTENTION_KINDS)
    return order, label


def shared_modules(graph: nx.DiGraph) -> dict[str, int]:
    """The layers that run more than once, with their calls (ALBERT: the layer group, 12).

    The facts pass records them (``shared_modules``); for a graph stored without that
    record, the same pass reads them off the ops' ``call`` indices now.
    """
    shared = graph.graph.get(g.G_SHARED)
    if isinstance(shared, dict):
        found = {str(m): int(n) for m, n in shared.items() if int(n) > 1}
    elif g.G_ATTENTION in graph.graph:
        found = {}  # the facts pass ran and found no shared layer
    else:
        found = shared_layers(graph)
    return {m: n for m, n in found.items() if not any(m.startswith(o + ".") for o in found if o != m)}
