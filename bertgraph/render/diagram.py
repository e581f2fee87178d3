"""What a diagram shows, decided once for every format.

:func:`build_diagram` turns a view of the graph into plain records — nodes with their
label lines, edges with shapes, nested clusters, rank hints, the legend's kinds — and
the DOT and Mermaid writers only serialise them. So both formats show the same
content and the same highlighting.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx

from bertgraph.graph import moe, roles, stats
from bertgraph.graph import schema as g
from bertgraph.graph.views import LAYOUT_OPS, OPERATOR_LEVEL, display_levels, display_name, in_backbone, is_within, view
from bertgraph.render import figures, style
from bertgraph.render.style import KIND_NAMES, is_mask_computation, node_kind

BACKBONE = "backbone"
HEAD = "head"
_FOLDED = roles.FOLDED


@dataclass(frozen=True)
class Node:
    id: str
    title: str
    lines: tuple[str, ...]
    tooltip: str
    kind: str
    shape: str  # "module", "op" or "io"
    highlight: bool = False
    heat: int | None = None  # the bin of the annotated figure's share (annotated diagrams only)
    base: str = ""  # the kind before attention refined it (a layer coloured as its self-attention: "block")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str
    style: str = "data"  # "data", "residual", "mask" or "cross" (the encoder's output into the decoder)
    shape: str = ""  # the shape it carries, whether or not ``label`` shows it


@dataclass(frozen=True)
class Cluster:
    id: str
    title: str
    parent: str | None
    role: str  # "backbone", "head", "module" or "variant"
    highlight: bool = False


@dataclass
class Diagram:
    title: str
    subtitle: str
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    clusters: list[Cluster] = field(default_factory=list)
    membership: dict[str, str | None] = field(default_factory=dict)  # node id → innermost cluster id
    same_rank: list[tuple[str, ...]] = field(default_factory=list)
    left_of: list[tuple[str, str]] = field(default_factory=list)  # (a, b): a is drawn left of b, on its rank
    kinds: list[str] = field(default_factory=list)
    compare: bool = False
    scale: str | None = None  # the heat legend's title (annotated diagrams only)
    kind_names: dict[str, str] = field(default_factory=dict)  # legend names that differ from KIND_NAMES
    caption: list[str] = field(default_factory=list)  # the facts under the title (layers, hidden size, heads, …)
    bottom: list[str] = field(default_factory=list)  # nodes drawn on the last rank (the model's outputs)
    below: list[tuple[str, str]] = field(default_factory=list)  # (a, b): b drawn on a rank below a's, no edge drawn

    def kind_name(self, kind: str) -> str:
        """The legend's name of a kind (a decoder's layers are decoder layers)."""
        return self.kind_names.get(kind, KIND_NAMES[kind])

    def add_variant(self, prefix: str, title: str, part: Diagram) -> None:
        """Draw ``part`` (built with ids starting ``prefix``) beside the rest, in a box titled ``title``."""
        self.clusters.append(Cluster(f"{prefix}variant", title, None, "variant"))
        self.nodes += part.nodes
        self.edges += part.edges
        self.clusters += part.clusters
        self.membership.update(part.membership)
        self.same_rank += part.same_rank
        self.left_of += part.left_of
        self.bottom += part.bottom
        self.below += part.below

    @property
    def cross(self) -> bool:
        """Whether edges carry an encoder's output into a decoder's cross-attention."""
        return any(edge.style == "cross" for edge in self.edges)

    def nodes_by_cluster(self) -> dict[str | None, list[Node]]:
        """Nodes grouped by the innermost cluster they sit in (``None``: outside every cluster)."""
        grouped: dict[str | None, list[Node]] = defaultdict(list)
        for node in self.nodes:
            grouped[self.membership.get(node.id)].append(node)
        return grouped

    def clusters_by_parent(self) -> dict[str | None, list[Cluster]]:
        grouped: dict[str | None, list[Cluster]] = defaultdict(list)
        for cluster in self.clusters:
            grouped[cluster.parent].append(cluster)
        return grouped


lookup_path = roles.lookup_path


def _parent(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ""


def folded_here(path: str) -> bool:
    """Whether the last component of ``path`` is a folded range (``layer.0-11``).

    >>> folded_here("bert.encoder.layer.0-11"), folded_here("bert.encoder.layer.0-11.attention")
    (True, False)
    >>> folded_here("model.layers.1-19/3")
    True
    """
    return bool(re.search(r"\.\d+-\d+(/\d+)?$", path))


def repeat_of(path: str) -> int:
    """How many siblings a folded path stands for (1 when not folded).

    >>> repeat_of("bert.encoder.layer.0-11"), repeat_of("bert.pooler"), repeat_of("model.layers.1-19/3")
    (12, 1, 7)
    """
    count = 1
    for match in _FOLDED.finditer(path):
        count *= (int(match.group(2)) - int(match.group(1))) // int(match.group(3) or 1) + 1
    return count


def readable_range(path: str) -> str:
    """A folded path as a reader says it: ``layers.1-19/3`` → ``layers.1, 4, …, 19``.

    >>> readable_range("layers.1-19/3"), readable_range("layers.1-4/3"), readable_range("layer.0-11")
    ('layers.1, 4, …, 19', 'layers.1, 4', 'layer.0-11')
    """

    def spell(match: re.Match[str]) -> str:
        if not match.group(3):
            return match.group(0)
        first, last, step = (int(match.group(i)) for i in (1, 2, 3))
        every = list(range(first, last + 1, step))
        shown = every if len(every) <= 3 else [every[0], every[1], "…", every[-1]]
        return "." + ", ".join(str(i) for i in shown)

    return _FOLDED.sub(spell, path)


def _period_of(path: str) -> tuple[int, int, int] | None:
    """(step, first, last) of the sibling range a periodic fold's path ends in; None for a plain run.

    >>> _period_of("layers.1-19/3"), _period_of("layer.0-11")
    ((3, 1, 19), None)
    """
    match = re.search(r"\.(\d+)-(\d+)/(\d+)$", path)
    return (int(match.group(3)), int(match.group(1)), int(match.group(2))) if match else None


# --- labels -----------------------------------------------------------------------------


_OP_TITLES = {
    "scaled_dot_product_attention": "scaled dot-product attention",
    "layer_norm": "layer norm",
    "embedding": "embedding lookup",
    "linear": "linear",
    "gelu": "GELU",
    "tanh": "tanh",
    "select": "select [CLS]",
    "split": "split",
    "add": "add",
}


def _params_line(params: int, repeat: int) -> str:
    if not params:
        return "no parameters"
    if repeat > 1:
        return f"{figures.short(params // repeat)} params each · {figures.short(params)} in all"
    return f"{figures.count(params) if params < 10_000 else figures.short(params)} params"


_DESCRIPTIVE_TITLES = frozenset(
    {
        "scaled dot-product attention",
        "attention mask",
        "sum of embeddings",
        "add",
        "add (residual)",
        "select [CLS]",
        "select first token",
        "position ids",
        "padding positions zeroed",
        "relative position buckets",
        "relative position bias",
        "reshape",
        "start and end logits",
    }
)


# Ops that shape a padding mask into what it multiplies (DeBERTa's embeddings and attention).
_MASK_SHAPING = frozenset({"unsqueeze", "squeeze", "to", "_to_copy", "mul", "expand"})

# Ops that make index tensors: a model's own position ids are built from these alone.
_INDEX_OPS = frozenset({"arange", "add", "unsqueeze", "expand", "view", "slice"})


def _own_ops_title(data: dict[str, Any], role: str, family: str) -> str:
    """A name for the computation a module does itself, from its role and the ops it runs."""
    ops = [op for op in data.get(g.OPS, []) if op]
    if "scaled_dot_product_attention" in ops:
        return "scaled dot-product attention"
    if "log" in ops and str(data.get(g.DTYPE, "")).startswith("int"):
        return "relative position buckets"  # T5's and MPNet's: log-spaced bins of key - query
    if role in (roles.MODEL, roles.STACK) and is_mask_computation(ops):
        return "attention mask"
    if ops == ["add"] and role == roles.EMBEDDINGS:
        return "sum of embeddings"
    if ops == ["add"]:
        return "add"
    if ops == ["select"]:
        # BERT's first token is [CLS]; other families name it otherwise (<s>, …).
        return "select [CLS]" if family == "bert" else "select first token"
    if ops and set(ops) <= {"slice"} and role in (roles.EMBEDDINGS, roles.POSITION, roles.MODEL):
        return "position ids"
    if "arange" in ops and set(ops) <= _INDEX_OPS and data.get(g.DTYPE) == "int64" and role == roles.MODEL:
        return "position ids"  # 0 … seq-1 (plus the cache offset) for rotary or learned positions
    if "cumsum" in ops and role in (roles.EMBEDDINGS, roles.POSITION) and str(data.get(g.DTYPE, "")).startswith("int"):
        return "position ids"  # RoBERTa's: counted over the tokens that are not padding
    shape = data.get(g.SHAPE, [])
    if role in (roles.MODEL, roles.STACK) and len(shape) == 4 and shape[1] == 1 and set(ops) <= _MASK_SHAPING:
        return "attention mask"  # DeBERTa's: the padding mask times its transpose
    if role == roles.EMBEDDINGS and set(ops) <= _MASK_SHAPING and "mul" in ops:
        return "padding positions zeroed"  # DeBERTa multiplies the embeddings by the padding mask
    if "split" in ops and set(ops) <= LAYOUT_OPS | {"split", "select"}:
        return "start and end logits"  # a question-answering head splits its two logit columns
    if ops and set(ops) <= LAYOUT_OPS:
        return "reshape"
    if set(ops) - LAYOUT_OPS == {"add"}:
        return "add"  # a cast, then an add (BART's final logits bias)
    if {"new_zeros", "masked_fill"} <= set(ops):
        # T5's and BART's heads make the decoder's inputs from the input ids, one step to the right
        return "decoder inputs shifted right"
    return ", ".join(ops[:3]) + (" …" if len(ops) > 3 else "")


class _Labeller:
    """Titles, label lines and tooltips for the nodes of one view."""

    def __init__(self, graph: nx.DiGraph, shown: nx.DiGraph) -> None:
        self.graph = graph
        self.shown = shown
        self.backbone = graph.graph.get(g.G_BACKBONE, "")
        self.modules = stats.module_table(graph)
        self.family = str(graph.graph.get(g.G_FAMILY, ""))
        self.shared = roles.shared_modules(graph)
        self.attention: dict[str, list[str]] = {}
        # a mixture of experts: each block holding routed experts says how many and how many a token runs
        self.experts_line = moe.experts_line(graph)
        self.expert_modules = moe.expert_modules(graph) if self.experts_line else set()

    def adds_embeddings(self, node_id: str) -> bool:
        """Whether every input of a view node comes from an embedding table."""
        sources = [self.shown.nodes[s].get(g.MODULE, "") for s in self.shown.predecessors(node_id)]
        kinds = {roles.role_of(self.graph, source) for source in sources}
        return len(sources) > 1 and kinds <= {roles.EMBEDDINGS, roles.POSITION}

    def holds_experts(self, module: str) -> bool:
        """Whether ``module`` is, or contains, a block's routed experts."""
        path = lookup_path(module)
        return any(m == path or m.startswith(path + ".") or not path for m in self.expert_modules)

    def attention_of(self, module: str) -> list[str]:
        """Attention kinds at or below ``module`` (memoised: the module table is walked once per path)."""
        key = lookup_path(module)
        if key not in self.attention:
            self.attention[key] = roles.attention_labels(self.graph, key)
        return self.attention[key]

    def tied_to(self, module: str) -> str:
        """The modules whose weights ``module``'s tied weights are (``embeddings.word_embeddings``)."""
        owners = [
            display_name(canonical.rsplit(".", 1)[0], self.backbone)
            for alias, canonical in sorted(dict(self.graph.graph.get(g.G_TIED, {})).items())
            if module
            and is_within(alias, lookup_path(module))
            # not a second name of a weight inside the module or around it (BERT's decoder bias)
            and not is_within(lookup_path(module), canonical.rsplit(".", 1)[0])
            and not is_within(canonical, lookup_path(module))
        ]
        return ", ".join(dict.fromkeys(owners))

    def info(self, path: str) -> dict[str, Any]:
        return dict(self.modules.get(lookup_path(path), {}))

    def short_name(self, path: str) -> str:
        """The module's name within its parent level (``query``, ``layer.0-11``)."""
        levels = display_levels(path, self.backbone)
        if not levels:
            return self.graph.graph.get(g.G_MODEL_CLASS, "model") if not path else display_name(path, self.backbone)
        parent = display_name(levels[-2], self.backbone) if len(levels) > 1 else ""
        name = display_name(path, self.backbone)
        short = name[len(parent) + 1 :] if parent and name.startswith(parent + ".") else name
        return readable_range(short)

    def reads_position_only(self, node_id: str) -> bool:
        """Whether every input of a view node comes from a position module."""
        sources = [self.shown.nodes[s].get(g.MODULE, "") for s in self.shown.predecessors(node_id)]
        return bool(sources) and all(roles.role_of(self.graph, s) == roles.POSITION for s in sources)

    def is_sum_of_embeddings(self, node_id: str, data: dict[str, Any]) -> bool:
        ops = {o for o in data.get(g.OPS, [data.get(g.OP, "")]) if o}
        return bool(ops) and ops <= {"add", "to", "_to_copy"} and "add" in ops and self.adds_embeddings(node_id)

    def node(self, node_id: str, data: dict[str, Any], residual_target: bool) -> Node:
        module = data.get(g.MODULE, "")
        role = roles.role_of(self.graph, module)
        computes = data.get(g.KIND) == g.OPERATOR or bool(data.get(g.OWN_OPS))
        if role in (roles.STACK, roles.LAYER) and (computes or role == roles.role_of(self.graph, _parent(module))):
            # Not the stack or layer itself: its own ops (residual adds, a mask) or a child that
            # only inherits the role (BART's stack dropout) — no layer colour, no attention kind.
            role = roles.MODEL if computes and role == roles.STACK else ""
        base_kind = node_kind(data, role)
        if residual_target or (computes and base_kind == "block"):
            base_kind = "other"
        if computes and self.is_sum_of_embeddings(node_id, data):
            base_kind = "embedding"
        labels = (
            self.attention_of(module) if base_kind == "attention" or (base_kind == "block" and not computes) else []
        )
        if data.get(g.KIND) == g.OPERATOR and g.attention_label(data):
            labels = [g.attention_label(data)]
        attention = f"{' + '.join(labels)} attention" if labels else ""
        kind = style.attention_kind(base_kind, labels)
        shape_text = figures.shape(data.get(g.SHAPE, []))
        repeat = int(data.get(g.REPEAT, 1))
        params = int(data.get(g.PARAMS, 0))
        is_fold_root = data.get(g.KIND) == g.MODULE_NODE and not data.get(g.OWN_OPS) and folded_here(module)
        fold_note = ""
        if repeat > 1 and not is_fold_root:
            # Inside a folded layer the cluster says "× 12"; a node shows one instance.
            fold_note = f"\none instance of {repeat} folded layers ({figures.count(params)} parameters in all)"
            params, repeat = params // repeat, 1
        if data.get(g.KIND) in (g.INPUT, g.OUTPUT):
            role = "input" if data.get(g.KIND) == g.INPUT else "output"
            return Node(
                node_id,
                node_id,
                (f"{shape_text} {data.get(g.DTYPE, '')}".strip(),),
                f"{role} {node_id}: {shape_text} {data.get(g.DTYPE, '')}",
                kind,
                "io",
                base=base_kind,
            )
        if data.get(g.KIND) == g.OPERATOR:
            title = _OP_TITLES.get(data.get(g.OP, ""), data.get(g.OP, ""))
            if data.get(g.OP) == "select" and self.family != "bert":
                title = "select"  # BERT's pooler picks [CLS]; elsewhere a select is only a select
            if data.get(g.OP) == "slice" and role in (roles.EMBEDDINGS, roles.POSITION):
                title = "position ids"
            if residual_target and data.get(g.OP) == "add":
                title = "add (residual)"
            elif self.is_sum_of_embeddings(node_id, data):
                title = "sum of embeddings"
            lines = [shape_text] + ([_params_line(params, repeat)] if params else [])
            lines += [attention] if attention else []
            tooltip = f"{data.get(g.TARGET, data.get(g.OP, ''))} in {display_name(module, self.backbone) or 'model'}"
            tooltip += f"\noutput {shape_text} {data.get(g.DTYPE, '')}"
            if params:
                tooltip += f"\n{figures.count(params)} parameters: {', '.join(data.get(g.PARAM_NAMES, [])[:4])}"
            return Node(node_id, title, tuple(lines), tooltip + fold_note, kind, "op", base=base_kind)
        if data.get(g.OWN_OPS):
            ops = [o for o in data.get(g.OPS, []) if o]
            title = _own_ops_title(data, role, self.family)
            if set(ops) <= LAYOUT_OPS and self.reads_position_only(node_id):
                title = "relative position bias"  # a position table's rows, laid out per head
            if self.is_sum_of_embeddings(node_id, data):
                title = "sum of embeddings"  # GPT-2's token and position embeddings, added by the model
            if residual_target and title == "add":
                title = "add (residual)"
            if title == "attention mask" or kind == "mask":
                kind = "mask" if title == "attention mask" else "other"  # the colour says what the title says
            lines = [shape_text] if title in _DESCRIPTIVE_TITLES else [" · ".join(ops), shape_text]
            lines += [attention] if attention else []
            tooltip = (
                f"operations of {display_name(module, self.backbone) or 'the model'}"
                + (f" ({data[g.MODULE_TYPE]})" if data.get(g.MODULE_TYPE) else "")
                + f": {', '.join(ops)}\noutput {shape_text}"
            )
            return Node(node_id, title, tuple(lines), tooltip + fold_note, kind, "op", base=base_kind)
        info = self.info(module)
        module_type = data.get(g.MODULE_TYPE) or info.get("type", "")
        # A file may not name its module types (TorchScript-exported ONNX): then the line says the rest, or nothing.
        type_line = (module_type + (f" × {repeat}" if repeat > 1 else "")).strip()
        calls = self.shared.get(lookup_path(module), 1)
        if calls > 1:
            type_line = f"{module_type} × {calls} · shared weights"
        if info.get("sizes") and info.get("type") not in ("ModuleList",):
            type_line += f" {info['sizes']}"
        params_line = _params_line(params, repeat) + (f", run {calls} times" if calls > 1 and params else "")
        tied_to = self.tied_to(module)
        if tied_to:
            params_line += f" · tied to {tied_to}"  # those weights are counted where they live
        module_lines = [type_line, params_line, shape_text]
        period = _period_of(module) if is_fold_root else None
        if period:
            module_lines.insert(1, f"a pattern of {period[0]} layers, repeated")
        module_lines += [attention] if attention else []
        if self.holds_experts(module):
            module_lines.append(self.experts_line)
        tooltip = f"{display_name(module, self.backbone) or 'model'}" + (f" ({module_type})" if module_type else "")
        if calls > 1:
            tooltip += f"\none module run {calls} times: its parameters are counted once"
        if repeat > 1 and period:
            tooltip += f"\n{repeat} identical layers, one in every {period[0]}, folded into one"
        elif repeat > 1:
            tooltip += f"\n{repeat} identical layers folded into one"
            tooltip += f"\n{figures.count(params // repeat)} parameters each, {figures.count(params)} in all"
        else:
            tooltip += f"\n{figures.count(params)} parameters"
        tooltip += f"\noutput {shape_text} {data.get(g.DTYPE, '')}"
        shown = tuple(line for line in module_lines if line)  # an empty line is an empty <font>, which DOT refuses
        title = roles.module_title(self.graph, module) or self.short_name(module)
        return Node(node_id, title, shown, tooltip + fold_note, kind, "module", base=base_kind)

    def cluster_title(self, path: str, params: int) -> str:
        info = self.info(path)
        repeat = repeat_of(path)
        title = " · ".join(part for part in (self.short_name(path), info.get("type", "")) if part)
        calls = self.shared.get(lookup_path(path), 1)
        if calls > 1:
            title += f" × {calls} · shared weights"
        period = _period_of(path) if folded_here(path) else None
        if period:
            title += f" × {repeat} (a pattern of {period[0]} layers, repeated)"
            title += f" · {figures.short(params // repeat)} params each"
        elif folded_here(path):
            title += f" × {repeat} · {figures.short(params // repeat)} params each"
        elif params:
            title += f" · {figures.short(params // repeat)} params"
        return title


# --- annotations: a figure on every node, coloured by its share --------------------------------

ANNOTATIONS = ("params", "flops", "memory")
# Upper bounds of the heat bins (shares of the model total); the labels are the legend's.
HEAT_BOUNDS = (0.001, 0.01, 0.05, 0.10, 0.25, 0.50)
HEAT_LABELS = ("below 0.1%", "0.1% to 1%", "1% to 5%", "5% to 10%", "10% to 25%", "25% to 50%", "50% and more")


def heat_bin(share: float) -> int:
    """The heat bin of a share of the model total.

    >>> [heat_bin(s) for s in (0.0, 0.0009, 0.001, 0.03, 0.2, 0.5, 1.0)]
    [0, 0, 1, 2, 4, 6, 6]
    """
    return bisect.bisect_right(HEAT_BOUNDS, share)


# --- edge labels: every shape, only where it changes, or none ------------------------------

EDGE_LABELS = ("shapes", "changes", "none")


def _check_edge_labels(edge_labels: str) -> None:
    if edge_labels not in EDGE_LABELS:
        raise ValueError(f"unknown edge labels {edge_labels!r}; choose one of: {', '.join(EDGE_LABELS)}")


def _shape_label(data: dict[str, Any]) -> str:
    """The shape an edge carries, with the tensor count when it carries several."""
    label = figures.shape(data.get(g.SHAPE, []))
    if int(data.get(g.TENSORS, 1)) > 1:
        label += f" ×{data[g.TENSORS]}"
    return label


def _shape_changes(shown: nx.DiGraph, source: str, target: str) -> bool:
    """Whether edge ``source → target`` carries a shape none of the edges into ``source`` carries.

    Nothing enters an input, so its edges always count: they are where a reader first learns the shapes.
    """
    entering = {_shape_label(data) for _, _, data in shown.in_edges(source, data=True)}
    return _shape_label(shown.edges[source, target]) not in entering


def residual_label(label: str) -> str:
    """A skip connection's label: the word, then the shape when the edge shows one."""
    return f"residual {label}" if label else "residual"


def edge_label(shown: nx.DiGraph, source: str, target: str, edge_labels: str = "changes") -> str:
    """The shape text edge ``source → target`` is labelled with ("" for none) under ``edge_labels``."""
    if edge_labels == "none" or (edge_labels == "changes" and not _shape_changes(shown, source, target)):
        return ""
    return _shape_label(shown.edges[source, target])


def _with_costs(graph: nx.DiGraph, annotate: str) -> nx.DiGraph:
    """``graph``, or an annotated copy when it lacks the costs the annotation shows (a graph read from a file)."""
    from bertgraph.graph import cost, costbase

    if annotate not in ANNOTATIONS:
        raise ValueError(f"unknown annotation {annotate!r}; choose one of: {', '.join(ANNOTATIONS)}")
    if annotate == "params":
        return graph
    costed = graph if cost.has_costs(graph) else cost.annotate(graph.copy())
    if annotate == "memory" and not costbase.from_onnx(costed):
        from bertgraph.graph import saved

        return saved.annotate_saved(costed)  # beside the bytes written, what training keeps of them
    return costed


class _Annotator:
    """The annotated figure of each view node: parameters, FLOPs or bytes written, at the example size."""

    def __init__(self, graph: nx.DiGraph, what: str) -> None:
        from bertgraph.graph import costbase

        self.what = what
        self.sizes = costbase.sizes_for(graph)
        ops = [data for _, data in graph.nodes(data=True) if data.get(g.KIND) == g.OPERATOR]
        self.total = (
            stats.parameter_stats(graph)["total"] if what == "params" else sum(self.value(data) for data in ops)
        )

    def value(self, data: dict[str, Any]) -> int:
        from bertgraph.graph import costbase

        if self.what == "params":
            return int(data.get(g.PARAMS, 0))
        poly = costbase.node_flops(data) if self.what == "flops" else costbase.node_poly(data, g.ACTIVATION_BYTES)
        return costbase.evaluate(poly, self.sizes)

    def figure(self, value: int) -> str:
        if self.what == "flops":
            return figures.flops(value)
        if self.what == "memory":
            return figures.size(value)
        return f"{figures.short(value)} params"

    def scale_title(self) -> str:
        noun = {"params": "parameters", "flops": "FLOPs", "memory": "activation bytes written"}[self.what]
        at = "" if self.what == "params" else f" at {', '.join(f'{k}={v}' for k, v in self.sizes.items())}"
        kept = "; “kept for backward”: what a training step saves" if self.what == "memory" else ""
        return f"share of {noun}{at}{kept}"

    def annotate(self, node: Node, data: dict[str, Any], in_fold: bool) -> Node:
        """``node`` with the figure as its last line and the heat bin of its share."""
        value = self.value(data)
        share = value / self.total if self.total else 0.0
        repeat = int(data.get(g.REPEAT, 1))
        percent = figures.percent(share, 1)
        if repeat > 1 and in_fold:
            line = f"{self.figure(value // repeat)} each · {percent} in all {repeat}"
        elif repeat > 1:
            line = f"{self.figure(value // repeat)} each · {self.figure(value)} · {percent}"
        else:
            line = f"{self.figure(value)} · {percent}"
        if self.what == "params":
            line = f"{percent} of parameters" + (f" (all {repeat})" if repeat > 1 else "")
        lines = (*node.lines, line)
        kept = self.kept(data) if self.what == "memory" else 0
        if kept:
            each = " each" if repeat > 1 else ""
            lines = (*lines, f"{self.figure(kept // repeat)}{each} kept for backward")
        return replace(node, lines=lines, heat=heat_bin(share))

    def kept(self, data: dict[str, Any]) -> int:
        """The bytes autograd keeps of this node's work for the backward pass (0 where not computed)."""
        from bertgraph.graph import costbase

        return costbase.evaluate(costbase.node_poly(data, g.SAVED_BYTES), self.sizes)


# --- building -----------------------------------------------------------------------------


def _is_residual(shown: nx.DiGraph, source: str, target: str) -> bool:
    """An edge into an add whose source lives outside the add's module: a skip connection."""
    data = shown.nodes[target]
    is_add = data.get(g.OP) == "add" or (data.get(g.OWN_OPS) and [o for o in data.get(g.OPS, []) if o] == ["add"])
    if not is_add or shown.nodes[source].get(g.KIND) == g.INPUT:
        return False
    target_role = roles.role_of(shown, data.get(g.MODULE, ""))
    if target_role == roles.EMBEDDINGS:
        return False  # the embeddings' sum adds tables, not a skip connection
    if target_role == roles.LAYER:
        # A pre-norm layer adds a sub-block's output to what bypassed it: the edge that does
        # not come from attention or the feed-forward block is the skip connection — whether
        # the add is the layer's own ops (depth 2) or an operator (depth 3: GPT-2's second add
        # reads the first, which lives in the layer itself).
        source_role = roles.role_of(shown, shown.nodes[source].get(g.MODULE, ""))
        return source_role not in (roles.SELF_ATTENTION, roles.CROSS_ATTENTION, roles.FEED_FORWARD)
    return not is_within(shown.nodes[source].get(g.MODULE, ""), data.get(g.MODULE, ""))


def _cluster_chain(data: dict[str, Any], backbone: str) -> list[str]:
    """Module paths of the clusters a view node sits in, outermost first."""
    module = data.get(g.MODULE, "")
    levels = list(display_levels(module, backbone))
    if data.get(g.KIND) == g.MODULE_NODE and not data.get(g.OWN_OPS):
        levels = levels[:-1]
    return levels


def build_diagram(
    graph: nx.DiGraph,
    depth: int = 2,
    fold: bool = True,
    prefix: str = "",
    changed: set[str] | None = None,
    annotate: str | None = None,
    edge_labels: str = "changes",
    compact: bool = True,
) -> Diagram:
    """The diagram of ``graph`` at ``depth``.

    ``prefix`` namespaces ids (for side-by-side comparisons); ``changed`` lists display
    paths of modules that differ from the compared model, which are highlighted.
    ``annotate`` (``params``, ``flops`` or ``memory``) puts that figure on every node and
    colours nodes by their share of the model total instead of by kind. ``edge_labels``
    (:data:`EDGE_LABELS`) puts the shape on every edge (``shapes``), only on edges whose
    shape differs from what enters their source and on the inputs' edges (``changes``),
    or on none (``none``; a residual edge is still called one). A depth above
    :data:`~bertgraph.graph.views.OPERATOR_LEVEL` draws, and is titled, as that level.
    ``compact`` (the default) draws the compact layout of :mod:`bertgraph.render.compact`.
    """
    _check_edge_labels(edge_labels)
    depth = min(depth, OPERATOR_LEVEL)
    annotator = None
    if annotate:
        graph = _with_costs(graph, annotate)
        annotator = _Annotator(graph, annotate)
    shown = view(graph, depth, fold=fold)
    labeller = _Labeller(graph, shown)
    backbone = labeller.backbone
    order = g.ops_in_order(shown)
    total = stats.parameter_stats(graph)["total"]
    example = ", ".join(f"{k}={v}" for k, v in graph.graph.get(g.G_EXAMPLE, {}).items())
    diagram = Diagram(
        title=f"{graph.graph.get(g.G_NAME, '')} · {graph.graph.get(g.G_MODEL_CLASS, '')} · "
        f"{figures.count(total)} parameters",
        subtitle=f"head: {graph.graph.get(g.G_HEAD, '')} · depth {depth} · "
        f"{'repeats folded' if fold else 'every layer drawn'} · example input {example}",
    )
    residual_targets = {t for s, t in shown.edges if _is_residual(shown, s, t)}
    has_head = bool(backbone)
    cluster_params: dict[str, int] = {}
    clusters: dict[str, Cluster] = {}

    def cluster_id(key: str) -> str:
        return f"{prefix}{key}"

    def ensure_top(role: str) -> str:
        key = cluster_id(role)
        if key not in clusters:
            clusters[key] = Cluster(key, "", cluster_id("variant") if prefix else None, role)
        return key

    for node_id in order:
        data = shown.nodes[node_id]
        module = data.get(g.MODULE, "")
        highlight_node = False
        if changed is not None:
            shown_path = display_name(module, backbone)
            highlight_node = data.get(g.KIND) not in (g.INPUT, g.OUTPUT) and any(
                is_within(lookup_path(shown_path), c) for c in changed
            )
        elif has_head and data.get(g.KIND) not in (g.INPUT, g.OUTPUT):
            highlight_node = not in_backbone(module, backbone)
        node = labeller.node(node_id, data, node_id in residual_targets)
        node = replace(node, id=f"{prefix}{node.id}", highlight=highlight_node)
        if annotator is not None and data.get(g.KIND) not in (g.INPUT, g.OUTPUT):
            in_fold = not (data.get(g.KIND) == g.MODULE_NODE and not data.get(g.OWN_OPS) and folded_here(module))
            node = annotator.annotate(node, data, in_fold)
        diagram.nodes.append(node)
        if data.get(g.KIND) in (g.INPUT, g.OUTPUT) or depth == 0:
            diagram.membership[node.id] = cluster_id("variant") if prefix else None
            continue
        parent = ensure_top(HEAD if has_head and not in_backbone(module, backbone) else BACKBONE)
        cluster_params[parent] = cluster_params.get(parent, 0) + int(data.get(g.PARAMS, 0))
        for path in _cluster_chain(data, backbone):
            key = cluster_id(path)
            cluster_params[key] = cluster_params.get(key, 0) + int(data.get(g.PARAMS, 0))
            if key not in clusters:
                shown_path = display_name(path, backbone)
                marked = changed is not None and any(is_within(lookup_path(shown_path), c) for c in changed)
                clusters[key] = Cluster(key, "", parent, "module", marked)
            parent = key
        diagram.membership[node.id] = parent

    model_class = graph.graph.get(g.G_MODEL_CLASS, "")
    backbone_type = stats.module_table(graph).get(backbone, {}).get("type", model_class) if backbone else model_class
    for key, cluster in clusters.items():
        params = cluster_params.get(key, 0)
        if cluster.role == BACKBONE:
            name = f"{backbone} ({backbone_type})" if backbone and backbone_type else backbone or backbone_type
            # A structure nothing told (roles.UNTOLD) is not claimed: just "backbone".
            said = " ".join(word for word in (roles.structure(graph), "backbone") if word)
            title = f"{said} · {name} · {figures.short(params)} params"
        elif cluster.role == HEAD:
            parts = ("task head", graph.graph.get(g.G_HEAD, ""), _params_line(params, 1))
            title = " · ".join(part for part in parts if part)
        else:
            title = labeller.cluster_title(key[len(prefix) :], params)
        diagram.clusters.append(
            Cluster(
                key,
                title,
                cluster.parent,
                cluster.role,
                cluster.highlight or (cluster.role == HEAD and changed is None),
            )
        )

    position = {node_id: index for index, node_id in enumerate(order)}
    side = {node: roles.stack_side(graph, shown.nodes[node].get(g.MODULE, "")) for node in order}
    layer_names = {roles.ENCODER_ONLY: "encoder layer", "decoder-only": "decoder layer"}
    diagram.kind_names["block"] = layer_names.get(roles.structure(graph), "layer")
    for source, target, data in sorted(shown.edges(data=True), key=lambda e: (position[e[0]], position[e[1]])):
        label = edge_label(shown, source, target, edge_labels)
        style = "residual" if _is_residual(shown, source, target) else "mask" if data.get(g.DTYPE) == "bool" else "data"
        if side.get(source) == roles.ENCODER and side.get(target) == roles.DECODER:
            # Without labels the colour and the legend say what a cross edge is.
            style, label = "cross", (f"cross-attention {label}" if label else "")
        diagram.edges.append(Edge(f"{prefix}{source}", f"{prefix}{target}", label, style, _shape_label(data)))

    beside = _encoder_beside_decoder(shown, order, side)
    if beside is not None:
        diagram.same_rank.append((f"{prefix}{beside[0]}", f"{prefix}{beside[1]}"))
        diagram.left_of.append((f"{prefix}{beside[0]}", f"{prefix}{beside[1]}"))
    if compact and depth > 0:
        from bertgraph.render.compact import compact as make_compact  # it builds on this module's records

        make_compact(diagram, depth)
    _relabel(diagram, edge_labels)  # "changes" is judged on the edges drawn, which compacting rewired
    if not prefix:
        from bertgraph.render.caption import caption_lines

        diagram.caption = caption_lines(graph, total)
    present = {node.kind for node in diagram.nodes if node.heat is None}
    diagram.kinds = [kind for kind in KIND_NAMES if kind in present]
    if annotator is not None:
        diagram.scale = annotator.scale_title()
    return diagram


def _relabel(diagram: Diagram, edge_labels: str) -> None:
    """Each edge's label from its shape under ``edge_labels``, with the shapes entering its source as drawn.

    Under ``changes`` a node's new shape is said once, on the first of its edges that carries it:
    the same words again on a sibling edge tell the reader nothing, and each label is a box
    Graphviz makes room for — beside a layer, where an input or a position bias runs down to
    the folded layers, as wide as the label (T5 at depth 3: six such labels, 76 points).
    """
    entering: dict[str, set[str]] = defaultdict(set)
    for edge in diagram.edges:
        entering[edge.target].add(edge.shape)
    relabelled = []
    said: set[tuple[str, str]] = set()
    for edge in diagram.edges:
        new = edge.shape not in entering[edge.source] and (edge.source, edge.shape) not in said
        shown = edge_labels == "shapes" or (edge_labels == "changes" and new)
        if shown and edge.style != "residual":
            said.add((edge.source, edge.shape))
        label = edge.shape if shown else ""
        if edge.style == "cross":
            label = f"cross-attention {label}" if label else ""
        relabelled.append(replace(edge, label=label))
    diagram.edges = relabelled


def _encoder_beside_decoder(shown: nx.DiGraph, order: list[str], side: dict[str, str | None]) -> tuple[str, str] | None:
    """The first nodes of the encoder and of the decoder, when they can share a rank.

    Drawn on one rank (and the decoder's cluster written first, see ``dot.generate_lines``),
    they put the encoder's column left of the decoder's; no data edge is involved, so none
    is bent upward. None when either stack is missing or one node's
    output reaches the other (a decoder drawn as one node below the encoder's).
    """
    firsts = {}
    for node in order:
        if shown.nodes[node].get(g.KIND) not in (g.INPUT, g.OUTPUT) and side.get(node) not in firsts:
            firsts[side.get(node)] = node
    encoder, decoder = firsts.get(roles.ENCODER), firsts.get(roles.DECODER)
    if (
        encoder is None
        or decoder is None
        or nx.has_path(shown, encoder, decoder)
        or nx.has_path(shown, decoder, encoder)
    ):
        return None
    return encoder, decoder


def build(
    graph: nx.DiGraph,
    depth: int = 2,
    fold: bool = True,
    compare: nx.DiGraph | None = None,
    annotate: str | None = None,
    edge_labels: str = "changes",
) -> Diagram:
    """The diagram of ``graph``, or of both graphs side by side when ``compare`` is given."""
    if compare is not None:
        return build_comparison(graph, compare, depth, fold, annotate=annotate, edge_labels=edge_labels)
    return build_diagram(graph, depth, fold, annotate=annotate, edge_labels=edge_labels)


def build_comparison(
    first: nx.DiGraph,
    second: nx.DiGraph,
    depth: int = 2,
    fold: bool = True,
    annotate: str | None = None,
    edge_labels: str = "changes",
) -> Diagram:
    """Two variants side by side; modules only one of them has are highlighted."""
    depth = min(depth, OPERATOR_LEVEL)
    difference = stats.diff(first, second)
    only_first = {m["module"] for m in difference["removed"]} | {m["module"] for m in difference["changed"]}
    only_second = {m["module"] for m in difference["added"]} | {m["module"] for m in difference["changed"]}
    left = build_diagram(first, depth, fold, "a:", only_first, annotate, edge_labels)
    right = build_diagram(second, depth, fold, "b:", only_second, annotate, edge_labels)
    name = first.graph.get(g.G_NAME, "")
    combined = Diagram(
        title=f"{name} · {first.graph.get(g.G_HEAD, '')} vs {second.graph.get(g.G_HEAD, '')}",
        subtitle=f"shared backbone drawn alike; what differs is highlighted · depth {depth} · "
        f"{'repeats folded' if fold else 'every layer drawn'} · parameters {difference['delta']:+,}",
        compare=True,
    )
    for side, graph, diagram in (("a:", first, left), ("b:", second, right)):
        total = stats.parameter_stats(graph)["total"]
        combined.add_variant(
            side,
            f"{graph.graph.get(g.G_HEAD, '')} · {graph.graph.get(g.G_MODEL_CLASS, '')} · {figures.count(total)} params",
            diagram,
        )
    inputs = [n.id for n in combined.nodes if n.shape == "io" and n.id.endswith(":input_ids")]
    if len(inputs) == 2:
        combined.same_rank.append(tuple(inputs))
    present = {node.kind for node in combined.nodes if node.heat is None}
    combined.kinds = [kind for kind in KIND_NAMES if kind in present]
    combined.scale = left.scale
    combined.kind_names = dict(left.kind_names)
    return combined
