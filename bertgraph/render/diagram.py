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
from dataclasses import replace
from typing import Any

import networkx as nx

from bertgraph.graph import kinds, moe, roles, stats
from bertgraph.graph import schema as g
from bertgraph.graph.facts.position import position_uses
from bertgraph.graph.views import LAYOUT_OPS, OPERATOR_LEVEL, display_levels, display_name, in_backbone, is_within, view
from bertgraph.render import compact as compacting
from bertgraph.render import figures, style
from bertgraph.render.caption import caption_lines
from bertgraph.render.records import Cluster, Diagram, Edge, Node
from bertgraph.render.style import KIND_NAMES, is_mask_computation, node_kind

BACKBONE = "backbone"
HEAD = "head"
_FOLDED = roles.FOLDED


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
        "position ids",
        "padding positions zeroed",
        "relative position buckets",
        "relative position bias",
        "reshape",
        "start and end logits",
        "last non-padding token",
        "EOS token",
        "[CLS]",
        "first token",
        "last token",
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
    if ops == ["add"] or (set(ops) & style.DROPOUT_OPS and [o for o in ops if o not in style.DROPOUT_OPS] == ["add"]):
        return "add"  # an add, or BART's dropout (no-op when not training) and add
    if ops == ["select"]:
        # BERT's first token is [CLS]; other families name it otherwise (<s>, …).
        return "[CLS]" if family == "bert" else "first token"
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
        # where absolute positions are read (the position table's module); the other kinds act in attention
        self.absolute = {module for kind, module in position_uses(graph) if kind == g.ABSOLUTE}
        self.norms: dict[str, list[str]] = {}
        # a mixture of experts: each block holding routed experts says how many and how many a token runs
        self.experts_line = moe.experts_line(graph)
        self.expert_modules = moe.expert_modules(graph) if self.experts_line else set()

    def adds_embeddings(self, node_id: str) -> bool:
        """Whether every input of a view node comes from an embedding table."""
        sources = [self.shown.nodes[s].get(g.MODULE, "") for s in self.shown.predecessors(node_id)]
        kinds = {roles.role_of(self.graph, source) for source in sources}
        return len(sources) > 1 and kinds <= {roles.EMBEDDINGS, roles.POSITION}

    def attention_line(self, module: str, labels: list[str]) -> str:
        """``causal attention · rotary positions``: the kinds, and the positions that act inside attention."""
        if not labels:
            return ""
        line = f"{' + '.join(kinds.attention_words(label) for label in labels)} attention"
        if all(label == g.CROSS for label in labels):
            return line  # cross-attention reads no positions (T5's cross bias is the padding mask alone)
        positions = kinds.stack_positions(self.graph, lookup_path(module))
        return " · ".join([line, *(kinds.POSITION_WORDS[k] for k in positions if k in kinds.IN_ATTENTION)])

    def reads_absolute_positions(self, module: str, own: bool) -> bool:
        """Whether ``module`` (only its own ops when ``own``) reads the absolute position table."""
        path = lookup_path(module)
        return any(u == path or (not own and (not path or u.startswith(path + "."))) for u in self.absolute)

    def norm_line(self, module: str) -> str:
        """``norms: RMSNorm`` for a stack or the whole model, read off its norms' ops."""
        key = lookup_path(module)
        if key not in self.norms:
            self.norms[key] = kinds.norm_kinds(self.graph, key)
        return f"norms: {', '.join(self.norms[key])}" if self.norms[key] else ""

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

    def pooling_title(self, node_id: str, data: dict[str, Any]) -> str:
        """What a classifier's own ops pick from each sequence ("last non-padding token", "EOS token",
        "first token"), or ``""``: float vectors out of a sequence of them read in, by an index or a select.

        GPT-2's sequence classifier picks the last token that is not padding (``argmax`` over the
        positions where the ids differ from the pad id), BART's the last EOS token (``eq`` the EOS id,
        then an index). Both compare token ids, which made the mask test call them attention masks.
        """
        ops = {o for o in [*data.get(g.OPS, []), data.get(g.OP, "")] if o}
        shape = [str(d) for d in data.get(g.SHAPE, [])]
        if not ops & {"index", "select", "argmax"} or not str(data.get(g.DTYPE, "")).startswith(("float", "bfloat")):
            return ""
        read = [
            [str(d) for d in self.shown.edges[s, node_id].get(g.SHAPE, [])] for s in self.shown.predecessors(node_id)
        ]
        sequence = {"seq", "tgt"}
        if sequence & set(shape) or not any(len(r) == 3 and sequence & set(r) for r in read):
            return ""
        if "argmax" in ops:
            return "last non-padding token"
        if "eq" in ops:
            return "EOS token"
        picked = data.get(g.LITERALS, {}).get("2") if ops == {"select"} else None
        if picked == 0:
            return "[CLS]" if self.family == "bert" else "first token"
        return "last token" if picked == -1 else ""

    def is_sum_of_embeddings(self, node_id: str, data: dict[str, Any]) -> bool:
        ops = {o for o in data.get(g.OPS, [data.get(g.OP, "")]) if o}
        return bool(ops) and ops <= {"add", "to", "_to_copy"} and "add" in ops and self.adds_embeddings(node_id)

    def node(self, node_id: str, data: dict[str, Any], residual_target: bool) -> Node:
        """The node drawn for view node ``node_id``, with its module's role."""
        node = self._describe(node_id, data, residual_target)
        if data.get(g.KIND) in (g.INPUT, g.OUTPUT):
            return node
        return replace(node, role=roles.role_of(self.graph, data.get(g.MODULE, "")))

    def _describe(self, node_id: str, data: dict[str, Any], residual_target: bool) -> Node:
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
        # what the node's attention is and the positions that act where it does
        facts = [self.attention_line(module, labels)]
        if data.get(g.KIND) != g.OPERATOR and self.reads_absolute_positions(module, bool(data.get(g.OWN_OPS))):
            facts.append(kinds.POSITION_WORDS[g.ABSOLUTE])
        if data.get(g.KIND) == g.MODULE_NODE and not data.get(g.OWN_OPS) and role in (roles.MODEL, roles.STACK):
            facts.append(self.norm_line(module))
        facts = [line for line in facts if line]
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
            pooled = self.pooling_title(node_id, data)
            if pooled:
                title, kind = pooled, "pooling"
            if data.get(g.OP) == "slice" and role in (roles.EMBEDDINGS, roles.POSITION):
                title, kind = "position ids", "other"
            if residual_target and data.get(g.OP) == "add":
                title = "add (residual)"
            elif self.is_sum_of_embeddings(node_id, data):
                title = "sum of embeddings"
            lines = [shape_text] + ([_params_line(params, repeat)] if params else [])
            lines += facts
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
            pooled = self.pooling_title(node_id, data)
            if pooled:
                title, kind = pooled, "pooling"  # a step of the classifier, not a mask beside it
            if title == "attention mask" or kind == "mask":
                kind = "mask" if title == "attention mask" else "other"  # the colour says what the title says
            if title == "position ids":
                kind = "other"  # an index computation, in the embeddings (BERT) or the model (LLaMA) alike
            lines = [shape_text] if title in _DESCRIPTIVE_TITLES else [" · ".join(ops), shape_text]
            lines += facts
            tooltip = (
                f"operations of {display_name(module, self.backbone) or 'the model'}"
                + (f" ({data[g.MODULE_TYPE]})" if data.get(g.MODULE_TYPE) else "")
                + f": {', '.join(ops)}\noutput {shape_text}"
            )
            return Node(node_id, title, tuple(lines), tooltip + fold_note, kind, "op", base=base_kind)
        info = self.info(module)
        module_type = data.get(g.MODULE_TYPE) or info.get("type", "")
        if role == roles.NORM:
            # what the norm does, read off its ops, not its class (T5LayerNorm scales only: an RMSNorm)
            module_type = kinds.norm_kind(data.get(g.OPS, [])) or module_type
        elif role in (roles.EMBEDDINGS, roles.POSITION) and str(module_type).endswith("Embedding"):
            module_type = "Embedding"  # a table, whatever the family calls its class (BartScaledWordEmbedding)
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
        module_lines += facts
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
            title += f" · {figures.short(params // repeat)} params each"  # the pattern's frame says × N
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
    own = [o for o in data.get(g.OPS, []) if o and o not in style.DROPOUT_OPS]  # BART drops out, then adds
    is_add = data.get(g.OP) == "add" or (data.get(g.OWN_OPS) and own == ["add"])
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


_PERIODIC = re.compile(r"^(?P<container>.*)\.(?P<first>\d+)-(?P<last>\d+)/(?P<step>\d+)$")


def _frame_periods(
    diagram: Diagram, shown: nx.DiGraph, prefix: str, cluster_params: dict[str, int], backbone: str
) -> None:
    """The layers of a repeating pattern in one frame, in the order they run: ``layers.1–21 · 3 layers × 7``.

    A periodic fold draws each position of the period as its own fold (``layers.1-19/3``,
    ``layers.2-20/3``, ``layers.3-21/3``); one after another they read as seven of one kind, seven
    of the next, seven of the last. In one frame, chained in run order, they read as what runs:
    the pattern, seven times. The frame's id is no fold's path (``layers.1-21~3``).
    """
    members: dict[tuple[str | None, str, int, int], list[tuple[int, int, str, bool]]] = defaultdict(list)
    clusters = {c.id: c for c in diagram.clusters}
    candidates = [(c.id, c.parent, True) for c in diagram.clusters]
    candidates += [(n.id, diagram.membership.get(n.id), False) for n in diagram.nodes if n.id not in clusters]
    for ident, parent, is_cluster in candidates:
        match = _PERIODIC.match(ident[len(prefix) :])
        if match is None:
            continue
        first, last, step = (int(match.group(k)) for k in ("first", "last", "step"))
        members[parent, match.group("container"), step, (last - first) // step + 1].append(
            (first, last, ident, is_cluster)
        )
    for (parent, container, step, count), found in sorted(members.items(), key=lambda item: str(item[0])):
        found.sort()
        if [member[0] for member in found] != list(range(found[0][0], found[0][0] + step)):
            continue  # not a whole period side by side: drawn as it is
        start, end = found[0][0], found[-1][1]
        frame = f"{prefix}{container}.{start}-{end}~{step}"  # no fold's path: a frame, not a module
        params = sum(
            cluster_params.get(ident, 0) if is_cluster else int(shown.nodes[ident[len(prefix) :]].get(g.PARAMS, 0))
            for *_, ident, is_cluster in found
        )
        name = display_name(container, backbone).rsplit(".", 1)[-1]
        title = f"{name}.{start}–{end} · {step} layers × {count} · {figures.short(params // count)} params each"
        diagram.clusters.append(Cluster(frame, title, parent, "repeat"))
        for *_, ident, is_cluster in found:
            if is_cluster:
                diagram.clusters = [replace(c, parent=frame) if c.id == ident else c for c in diagram.clusters]
            else:
                diagram.membership[ident] = frame


def _mask_sources(graph: nx.DiGraph, shown: nx.DiGraph, nodes: list[Node], prefix: str) -> set[str]:
    """The view nodes whose edges carry an attention mask: the inputs the facts pass found masking
    attention (``attention_mask``) and the nodes that compute a mask (a boolean edge is one too).

    Their edges are mask lines at every depth: T5's ``attention_mask`` ran solid into the encoder at
    depth 1, where no boolean is drawn, and dotted at depth 2.
    """
    inputs = {str(d[g.PADDING_MASK]) for _, d in graph.nodes(data=True) if d.get(g.PADDING_MASK)}
    computed = {node.id[len(prefix) :] for node in nodes if node.kind == "mask"}
    return {n for n in shown if n in inputs and shown.nodes[n].get(g.KIND) == g.INPUT} | computed


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

    _frame_periods(diagram, shown, prefix, cluster_params, backbone)
    position = {node_id: index for index, node_id in enumerate(order)}
    side = {node: roles.stack_side(graph, shown.nodes[node].get(g.MODULE, "")) for node in order}
    layer_names = {roles.ENCODER_ONLY: "encoder layer", "decoder-only": "decoder layer"}
    diagram.kind_names["block"] = layer_names.get(roles.structure(graph), "layer")
    diagram.kind_names["attention-sliding"] = kinds.window_directions(roles.attention_labels(graph, ""))
    masks = _mask_sources(graph, shown, diagram.nodes, prefix)
    # what a mask line may end at: never an output, a head or a pooling (VITS's sequence lengths are
    # counted from the padding mask, but are no mask of attention)
    unmasked = {node.id[len(prefix) :] for node in diagram.nodes if node.kind in ("io", "head", "pooling")}
    for source, target, data in sorted(shown.edges(data=True), key=lambda e: (position[e[0]], position[e[1]])):
        label = edge_label(shown, source, target, edge_labels)
        masked = (source in masks or data.get(g.DTYPE) == "bool") and target not in unmasked
        style = "residual" if _is_residual(shown, source, target) else "mask" if masked else "data"
        if side.get(source) == roles.ENCODER and side.get(target) == roles.DECODER:
            # Without labels the colour and the legend say what a cross edge is.
            style, label = "cross", (f"cross-attention {label}" if label else "")
        diagram.edges.append(Edge(f"{prefix}{source}", f"{prefix}{target}", label, style, _shape_label(data)))

    if roles.structure(graph) == roles.ENCODER_DECODER:
        diagram.sides = _sides(shown, side, prefix)
    beside = _encoder_beside_decoder(shown, order, side)
    if beside is not None:
        diagram.same_rank.append((f"{prefix}{beside[0]}", f"{prefix}{beside[1]}"))
        diagram.left_of.append((f"{prefix}{beside[0]}", f"{prefix}{beside[1]}"))
    if compact and depth > 0:
        compacting.compact(diagram, depth)
    _relabel(diagram, edge_labels)  # "changes" is judged on the edges drawn, which compacting rewired
    if not prefix:
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


def _sides(shown: nx.DiGraph, side: dict[str, str | None], prefix: str) -> dict[str, str]:
    """Each drawn node's stack side: its module's; an input's, the first stack that reads it (the encoder's
    attention mask is the encoder's though the decoder's cross-attention reads it too); an output's, its maker's."""
    found = {
        node: kind for node, kind in side.items() if kind and shown.nodes[node].get(g.KIND) not in (g.INPUT, g.OUTPUT)
    }
    for node in g.ops_in_order(shown)[::-1]:
        # a step of no stack whose output only one stack reads (the decoder's inputs shifted right) is that stack's
        stacks = {found.get(r) for r in shown.successors(node)}
        if node not in found and shown.nodes[node].get(g.KIND) == g.MODULE_NODE and len(stacks) == 1:
            only = stacks.pop()
            if only:
                found[node] = only
    for node in shown:
        kind = shown.nodes[node].get(g.KIND)
        if kind == g.INPUT:
            readers = [found[r] for r in shown.successors(node) if r in found]
            if readers:
                found[node] = roles.ENCODER if roles.ENCODER in readers else readers[0]
        elif kind == g.OUTPUT:
            makers = [found[m] for m in shown.predecessors(node) if m in found]
            if makers:
                found[node] = makers[0]
    return {f"{prefix}{node}": kind for node, kind in found.items()}


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
