"""What kind of thing a node is, and the one look each theme gives that kind.

Kinds are decided from the role of a node's module (:mod:`bertgraph.graph.roles`) and its
ops, never from class names. :data:`LOOKS` is the single table of looks per kind — fill,
outline, text colour, shape, line style — that every writer reads, so the same role is drawn
alike in every format, every family and every run.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from bertgraph.graph import roles
from bertgraph.graph import schema as g


class Palette(NamedTuple):
    fill: str
    border: str
    text: str


class Look(NamedTuple):
    """How one role is drawn, in every format: fill, outline (or line) colour, text colour, shape and line style.

    ``shape`` is ``box`` (rounded), ``ellipse``, ``io`` (a rounded box with a dashed outline: an
    input or output), ``circle`` (a residual "+"), ``cell`` (a square of a mask grid), ``cluster``
    (a frame around a group) or ``edge``; ``line`` is ``solid``, ``dashed``, ``dotted`` or ``bold``.
    """

    fill: str
    stroke: str
    text: str
    shape: str = "box"
    line: str = "solid"


# Order here is the legend's order. Fills are told apart by a stated rule: CIEDE2000 ΔE ≥ 10
# between any two kinds' fills, in each theme (tests/test_drawing_invariants.py checks it).
KIND_NAMES: dict[str, str] = {
    "io": "input / output",
    "embedding": "embedding",
    "attention": "attention",
    "attention-bidirectional": "bidirectional attention",
    "attention-causal": "causal attention",
    "attention-sliding": "sliding-window attention",
    "attention-cross": "cross-attention",
    "feed-forward": "feed-forward",
    "normalisation": "normalisation",
    "block": "encoder layer",
    "pooling": "pooling",
    "mask": "attention mask",
    "other": "other",
    "head": "task head",
}

# The lines between boxes: what an edge of each style carries (render/records.py ``Edge.style``).
EDGE_KINDS: dict[str, str] = {
    "data": "data",
    "residual": "residual (skip connection)",
    "mask": "attention mask",
    "cross": "encoder output into cross-attention",
}

# Parameter-free steps are ellipses; everything with a role of its own a box.
_ELLIPSES = frozenset({"other", "mask"})


def _node_looks(kinds: dict[str, Palette]) -> dict[str, Look]:
    return {
        kind: Look(
            p.fill,
            p.border,
            p.text,
            "io" if kind == "io" else "ellipse" if kind in _ELLIPSES else "box",
            "dashed" if kind == "io" else "solid",
        )
        for kind, p in kinds.items()
    }


# The single table of looks, per theme: node kinds (the legend's), edges, the schematic's residual
# "+", the mask grid's cells and the frames around groups. Every writer — DOT, Mermaid, the
# interactive page (Graphviz's SVG), the families schematic, the masks figure — draws a role with
# its entry here, so a role looks the same in every family and every format.
LOOKS: dict[str, dict[str, Look]] = {
    "light": {
        **_node_looks(
            {
                "io": Palette("#ffffff", "#6e7781", "#1f2328"),
                "embedding": Palette("#62b6dc", "#0969da", "#0a3069"),
                "attention": Palette("#b6a5d5", "#8250df", "#3e1f79"),
                "attention-bidirectional": Palette("#b9d1fb", "#6f42c1", "#2e1065"),
                "attention-causal": Palette("#b6939b", "#cf222e", "#5c0011"),
                "attention-sliding": Palette("#ecbeac", "#d4760a", "#4a2600"),
                "attention-cross": Palette("#b9eef4", "#0a7ea4", "#003a4d"),
                "feed-forward": Palette("#d0fdcd", "#1a7f37", "#044f1e"),
                "normalisation": Palette("#fff6c1", "#9a6700", "#4d2d00"),
                "block": Palette("#9b9b9b", "#424a53", "#1f2328"),
                "pooling": Palette("#9dcdbb", "#0f766e", "#134e4a"),
                "mask": Palette("#eec9e3", "#8c959f", "#424a53"),
                "other": Palette("#c7c7c7", "#8c959f", "#1f2328"),
                "head": Palette("#e18d81", "#bc4c00", "#471700"),
            }
        ),
        "data-edge": Look("none", "#57606a", "#57606a", "edge", "solid"),
        "residual-edge": Look("none", "#57606a", "#57606a", "edge", "dashed"),
        "mask-edge": Look("none", "#57606a", "#57606a", "edge", "dotted"),
        "cross-edge": Look("none", "#0a7ea4", "#57606a", "edge", "bold"),
        "residual": Look("#ffffff", "#57606a", "#1f2328", "circle", "solid"),
        "mask-allowed": Look("#2b6cb0", "#ffffff", "#ffffff", "cell", "solid"),
        "mask-masked": Look("#cbd5e0", "#ffffff", "#1f2328", "cell", "solid"),
        "mask-padding": Look("#f6ad55", "#ffffff", "#1f2328", "cell", "solid"),
        "cluster-module": Look("#f6f8fa", "#d0d7de", "#1f2328", "cluster", "solid"),
        "cluster-backbone": Look("#f6f8fa", "#d0d7de", "#1f2328", "cluster", "solid"),
        "cluster-head": Look("#fff1e5", "#bc4c00", "#953800", "cluster", "solid"),
        "cluster-variant": Look("white", "#d0d7de", "#1f2328", "cluster", "solid"),
        "cluster-repeat": Look("#ffffff", "#6e7781", "#1f2328", "cluster", "dashed"),
    },
    "dark": {
        **_node_looks(
            {
                "io": Palette("#0d1117", "#8d96a0", "#e6edf3"),
                "embedding": Palette("#35607b", "#4493f8", "#cae8ff"),
                "attention": Palette("#4e3662", "#ab7df8", "#ecdeff"),
                "attention-bidirectional": Palette("#0e2e52", "#a371f7", "#efe5ff"),
                "attention-causal": Palette("#854750", "#f85149", "#ffdcd7"),
                "attention-sliding": Palette("#573416", "#e3922f", "#ffe9c7"),
                "attention-cross": Palette("#146062", "#39c5f0", "#d3f4ff"),
                "feed-forward": Palette("#336436", "#3fb950", "#d2fedb"),
                "normalisation": Palette("#383710", "#d29922", "#fff8c5"),
                "block": Palette("#383838", "#8d96a0", "#e6edf3"),
                "pooling": Palette("#10241f", "#2dd4bf", "#ccfbf1"),
                "mask": Palette("#3b0c31", "#6e7681", "#c9d1d9"),
                "other": Palette("#5e5e5e", "#6e7681", "#e6edf3"),
                "head": Palette("#341915", "#f0883e", "#ffdfb6"),
            }
        ),
        "data-edge": Look("none", "#8d96a0", "#8d96a0", "edge", "solid"),
        "residual-edge": Look("none", "#8d96a0", "#8d96a0", "edge", "dashed"),
        "mask-edge": Look("none", "#8d96a0", "#8d96a0", "edge", "dotted"),
        "cross-edge": Look("none", "#39c5f0", "#8d96a0", "edge", "bold"),
        "residual": Look("#0d1117", "#8d96a0", "#e6edf3", "circle", "solid"),
        "mask-allowed": Look("#4493f8", "#0d1117", "#0d1117", "cell", "solid"),
        "mask-masked": Look("#30363d", "#0d1117", "#e6edf3", "cell", "solid"),
        "mask-padding": Look("#bb8009", "#0d1117", "#0d1117", "cell", "solid"),
        "cluster-module": Look("#161b22", "#30363d", "#e6edf3", "cluster", "solid"),
        "cluster-backbone": Look("#161b22", "#30363d", "#e6edf3", "cluster", "solid"),
        "cluster-head": Look("#2d1a0e", "#f0883e", "#f0883e", "cluster", "solid"),
        "cluster-variant": Look("#0d1117", "#30363d", "#e6edf3", "cluster", "solid"),
        "cluster-repeat": Look("#0d1117", "#8d96a0", "#e6edf3", "cluster", "dashed"),
    },
}


def look(kind: str, theme: str = "light") -> Look:
    """The look of ``kind`` in ``theme``: a node kind (:data:`KIND_NAMES`), an edge (``data-edge``,
    ``residual-edge``, ``mask-edge``, ``cross-edge``), the schematic's ``residual`` "+", a mask cell
    (``mask-allowed``, ``mask-masked``, ``mask-padding``) or a frame (``cluster-module``, ``cluster-backbone``,
    ``cluster-head``, ``cluster-variant``, ``cluster-repeat``).

    >>> look("feed-forward")
    Look(fill='#d0fdcd', stroke='#1a7f37', text='#044f1e', shape='box', line='solid')
    >>> look("residual-edge", "dark").line, look("other").shape, look("io").line
    ('dashed', 'ellipse', 'dashed')
    """
    looks = LOOKS.get(theme)
    if looks is None:
        raise ValueError(f"unknown theme {theme!r}; choose one of: {', '.join(LOOKS)}")
    if kind not in looks:
        raise ValueError(f"no look for {kind!r}; known: {', '.join(looks)}")
    return looks[kind]


def edge_look(edge_style: str, theme: str = "light") -> Look:
    """The look of an edge of ``edge_style`` (``data``, ``residual``, ``mask``, ``cross``)."""
    return look(f"{edge_style}-edge", theme)


THEMES: dict[str, dict[str, Any]] = {
    "light": {
        "background": "white",
        "text": "#1f2328",
        "muted": "#57606a",
        "edge": "#57606a",
        "added": "#bc4c00",
        # A sequential scale for annotated diagrams, from small to large share (ColorBrewer YlOrRd).
        "heat": (
            Palette("#ffffcc", "#b7a94d", "#1f2328"),
            Palette("#ffeda0", "#b59a2e", "#1f2328"),
            Palette("#fed976", "#b58a1b", "#1f2328"),
            Palette("#feb24c", "#b5701b", "#1f2328"),
            Palette("#fd8d3c", "#b3501a", "#1f2328"),
            Palette("#e31a1c", "#8e0d10", "#ffffff"),
            Palette("#800026", "#4d0017", "#ffffff"),
        ),
    },
    "dark": {
        "background": "#0d1117",
        "text": "#e6edf3",
        "muted": "#8d96a0",
        "edge": "#8d96a0",
        "added": "#f0883e",
        # Dark to bright on a dark background (matplotlib's inferno, sampled).
        "heat": (
            Palette("#1b0c41", "#4a3a7a", "#e6edf3"),
            Palette("#4a0c6b", "#7a3c9b", "#e6edf3"),
            Palette("#781c6d", "#a84c9d", "#e6edf3"),
            Palette("#a52c60", "#d55c90", "#ffffff"),
            Palette("#cf4446", "#ff7476", "#ffffff"),
            Palette("#ed6925", "#ff9955", "#0d1117"),
            Palette("#fbb61a", "#ffe64a", "#0d1117"),
        ),
    },
}


# Each theme's node looks as (fill, border, text) palettes, for the writers that paint only those (the
# families schematic, the masks figure, the diff figure's legend): derived from LOOKS, never a second table.
for _name, _theme in THEMES.items():
    _theme["kinds"] = {kind: Palette(*LOOKS[_name][kind][:3]) for kind in KIND_NAMES}


def theme(name: str) -> dict[str, Any]:
    if name not in THEMES:
        raise ValueError(f"unknown theme {name!r}; choose one of: {', '.join(THEMES)}")
    return THEMES[name]


def cluster_look(role: str, highlight: bool, theme_name: str) -> tuple[Look, float]:
    """The look of a frame (``backbone``, ``head``, ``variant``, ``module`` or ``repeat``) and its outline's width."""
    frame = look(f"cluster-{role}", theme_name)
    width = 2.0 if role == "head" else 1.0
    if highlight:
        frame, width = frame._replace(stroke=theme(theme_name)["added"]), 2.0
    return frame, width


# The colour kind of each attention kind (graph/schema.py ATTENTION_KINDS): a causal window is a window.
ATTENTION_COLOURS = {
    g.BIDIRECTIONAL: "attention-bidirectional",
    g.CAUSAL: "attention-causal",
    g.SLIDING_WINDOW: "attention-sliding",
    g.CAUSAL_SLIDING_WINDOW: "attention-sliding",
    g.CROSS: "attention-cross",
}


def attention_kind(kind: str, labels: list[str]) -> str:
    """``kind`` refined by the attention kinds a node has (labels like ``sliding-window(64)``).

    An attention block takes its kind's colour; a layer takes the colour of its self-attention
    (its cross-attention shows as the edges from the encoder). Without labels nothing changes.

    >>> attention_kind("attention", ["cross"]), attention_kind("block", ["causal", "cross"])
    ('attention-cross', 'attention-causal')
    >>> attention_kind("block", []), attention_kind("feed-forward", ["causal"])
    ('block', 'feed-forward')
    """
    if kind not in ("attention", "block") or not labels:
        return kind
    kinds = [label.split("(", 1)[0] for label in labels]
    own = [k for k in kinds if k != g.CROSS] or kinds
    return ATTENTION_COLOURS.get(own[0], kind)


def node_kind(data: dict[str, Any], role: str) -> str:
    """The colour kind of a view node whose module plays ``role`` (see :mod:`bertgraph.graph.roles`).

    >>> node_kind({"kind": "module", "module": "classifier", "module_type": "Linear"}, "head")
    'head'
    >>> node_kind({"kind": "module", "module": "h.0-11.ln_1", "module_type": "LayerNorm"}, "norm")
    'normalisation'
    >>> node_kind({"kind": "op", "module": "encoder.layer.0.output", "op": "add"}, "feed-forward")
    'feed-forward'
    """
    if data.get(g.KIND) in (g.INPUT, g.OUTPUT):
        return "io"
    ops = (set(data.get(g.OPS, [])) | {data.get(g.OP, "")}) - {""}
    if ops and ops <= DROPOUT_OPS:
        return "other"  # a dropout is a parameter-free step wherever it sits (embeddings, layer, head)
    if role == roles.HEAD:
        return "head"
    if role == roles.POSITION:  # a position table, even one a LayerNorm computes (DeBERTa's relative one)
        return "embedding"
    if role == roles.NORM or (ops and ops <= NORM_OPS):
        return "normalisation"
    computes = data.get(g.KIND) == g.OPERATOR or bool(data.get(g.OWN_OPS))
    if role in (roles.EMBEDDINGS, roles.POSITION):
        return "embedding"
    if role in (roles.SELF_ATTENTION, roles.CROSS_ATTENTION) or (computes and "scaled_dot_product_attention" in ops):
        return "attention"
    if role in (roles.STACK, roles.LAYER):
        return "mask" if computes and is_mask_computation(ops) else "block"
    if role == roles.FEED_FORWARD:
        return "feed-forward"
    if role == roles.POOLER:
        return "pooling"
    if computes and role == roles.MODEL:
        # What a model computes itself is often its attention mask; its ops say so (ALBERT's
        # root also selects the first token, ModernBERT's makes position ids).
        return "mask" if is_mask_computation(ops) else "other"
    return "other"


# Ops of a dropout: a module's, or a functional one a layer runs itself (BART's).
DROPOUT_OPS = frozenset({"dropout", "native_dropout", "feature_dropout", "alpha_dropout", "Dropout"})
# Ops that normalise (a norm module of its own, or one computed in place).
NORM_OPS = frozenset({"layer_norm", "LayerNormalization", "rms_norm", "SimplifiedLayerNormalization"})
# Ops only a mask computation runs (comparisons and boolean logic on index tensors, the expanded
# padding mask); a model's own ops that include any of them build the attention mask.
_MASK_OPS = frozenset(
    {"index", "expand", "ge", "le", "lt", "gt", "new_ones", "and", "or", "bitwise_and", "bitwise_or"}
    # the same in an ONNX file
    | {"GreaterOrEqual", "LessOrEqual", "Greater", "Less", "And", "Or", "GatherND"}
)


def is_mask_computation(ops: set[str] | list[str]) -> bool:
    """Whether the ops a model or stack runs itself build an attention mask.

    >>> is_mask_computation(["slice", "unsqueeze", "to", "rsub", "mul"]), is_mask_computation(["add"])
    (False, False)
    >>> is_mask_computation(["arange", "le", "index"]), is_mask_computation(["Range", "GreaterOrEqual", "And"])
    (True, True)
    """
    return bool(_MASK_OPS & set(ops))


# Which SVG paint each theme colour becomes in Graphviz's output: fills of shapes, strokes
# of outlines and edges, fills of text.
_PAINTS: dict[str, tuple[str, ...]] = {
    "background": ("fill",),
    "text": ("text",),
    "muted": ("text",),
    "edge": ("stroke", "fill"),  # edge lines, and arrowheads filled with the same colour
    "added": ("stroke", "text"),
}
# The looks a diagram draws (the mask grid's cells are the masks figure's own, drawn in one theme).
_DRAWN = (
    *KIND_NAMES,
    *(f"{edge}-edge" for edge in EDGE_KINDS),
    "residual",
    "cluster-module",
    "cluster-backbone",
    "cluster-head",
    "cluster-variant",
    "cluster-repeat",
)


def _look_paints(kind: str) -> dict[str, tuple[str, ...]]:
    """Look field → the SVG paints it becomes (an edge's arrowhead is filled with its line's colour)."""
    if kind.endswith("-edge"):
        return {"stroke": ("stroke", "fill"), "text": ("text",)}
    return {"fill": ("fill",), "stroke": ("stroke",), "text": ("text",)}


def recolouring(source: str = "light", target: str = "dark") -> dict[tuple[str, str], str]:
    """How to turn a diagram drawn in ``source`` colours into ``target`` colours.

    Keys are ``(paint, colour)`` with paint ``fill``, ``stroke`` or ``text``; a viewer
    restyles an SVG with these instead of laying it out twice. Raises ValueError when one
    colour would need two different replacements (then CSS could not tell them apart).

    >>> recolouring()[("fill", "white")]
    '#0d1117'
    """
    old, new = theme(source), theme(target)
    pairs: list[tuple[str, str, str]] = []
    for key, paints in _PAINTS.items():
        pairs += [(paint, old[key], new[key]) for paint in paints]
    for kind in _DRAWN:
        was, becomes = look(kind, source), look(kind, target)
        for field, paints in _look_paints(kind).items():
            pairs += [(paint, getattr(was, field), getattr(becomes, field)) for paint in paints]
    mapping: dict[tuple[str, str], str] = {}
    for paint, before, after in pairs:
        if mapping.setdefault((paint, before), after) != after:
            raise ValueError(f"{source} {paint} {before} maps to both {mapping[(paint, before)]} and {after}")
    return mapping
