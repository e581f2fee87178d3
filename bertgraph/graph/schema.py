"""The annotated graph every front end builds and every renderer reads.

Node and edge attribute names live here as constants, with the graph-level keys and
the small helpers every stage shares. Every attribute value is JSON-safe (str, int,
float, bool, list, dict), so a graph round-trips through plain networkx
(:mod:`bertgraph.graph.io`).

Node attributes:

=================  =====================================================================
``kind``           ``input``, ``op``, ``output`` (operator level) or ``module`` (views)
``op``             aten op (``linear``) or ONNX op type (``MatMul``)
``target``         the full op name (``aten.linear.default``)
``module``         dotted module path, ``""`` for the root
``module_type``    class name of that module (``Linear``)
``shape``          output shape; dynamic dims by name (``["batch", "seq", 768]``)
``dtype``          ``float32``, ``int64``, …
``params``         parameter elements this node owns (ops: weights read; modules: all below)
``param_names``    the parameter names counted in ``params``
``shared_params``  parameters this op reads that are counted at another node (tied weights)
``repeat``         for a folded node, how many identical siblings it stands for
``order``          position in execution order (a stable sort key)
``inputs``         (ops) shapes of the op's tensor arguments in argument order, parameters
                   included (``linear``: input, weight, bias), dims named like ``shape``
``alias``          (ops) the output shares storage with an input (a view, an in-place op,
                   or eval-mode dropout): the op allocates no new tensor
``matmul_flops``   FLOPs of matrix products (2 per multiply-add), a polynomial in the named
                   dims as text (``1179648*batch*seq``); :mod:`bertgraph.graph.cost`
``other_flops``    FLOPs by the per-element rule of :mod:`bertgraph.graph.formulas`
``activation_bytes`` bytes of the new tensors the node's ops write (0 for a view)
``param_bytes``    bytes of the parameters counted in ``params``, each at its own dtype
``cost_unsupported`` op names with no cost formula (their FLOPs are not in the sums)
``call``           (ops) which call of its module the op ran in, when the module runs more
                   than once (ALBERT's one shared layer: calls 1 … 11); absent for the first
``literals``       (ops) the op's number and flag arguments, by argument position (``"1"``)
                   or keyword: ``le.Scalar(x, 64)`` → ``{"1": 64}``; sizes named like
                   ``shape`` (``"seq"``), non-finite floats as ``"inf"``, ``"-inf"``, ``"nan"``
``attention``      (attention ops: ``scaled_dot_product_attention``, ``softmax``) what the
                   block attends to: ``bidirectional``, ``causal``, ``sliding-window``,
                   ``causal-sliding-window`` or ``cross``; :mod:`bertgraph.graph.facts`
``window``         (attention ops) the window ``w`` of a sliding-window kind: a query sees
                   keys at most ``w`` positions away (and none after it, when causal)
``padding_mask``   (attention ops) the model input whose padding the mask applies
                   (``attention_mask``); absent when no padding mask is applied
``q_heads``, ``kv_heads``  (attention ops) query heads and key/value heads (fewer when
                   grouped-query)
=================  =====================================================================

Views sum the four cost attributes over the ops a node stands for; a folded node counts
every repeat.

Edges carry ``shape`` and ``dtype`` of the tensor that flows, ``alias`` when the
target's output is that tensor's storage, and (operator level) ``args``: the positions in
the target's ``inputs`` the tensor fills (``[0, 1]`` for ``mul(x, x)``).

The facts pass (:mod:`bertgraph.graph.facts`) also writes the attention keys into the
module table entry of each attention block's module, ``calls`` into the entry of a module
that runs more than once (ALBERT's shared layer: 12), and the graph-level summaries
``attention_kinds``, ``position_kinds`` and ``shared_modules``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

import networkx as nx

# Node and edge attributes.
KIND = "kind"
OP = "op"
TARGET = "target"
MODULE = "module"
MODULE_TYPE = "module_type"
SHAPE = "shape"
DTYPE = "dtype"
PARAMS = "params"
PARAM_NAMES = "param_names"
SHARED_PARAMS = "shared_params"
REPEAT = "repeat"
ORDER = "order"
INPUTS = "inputs"  # shapes of an op's tensor arguments, in argument order
ALIAS = "alias"  # node: output shares an input's storage; edge: that input
# Cost (graph/cost.py): polynomials as canonical text (graph/poly.py), bytes of parameters as an int.
MATMUL_FLOPS = "matmul_flops"
OTHER_FLOPS = "other_flops"
ACTIVATION_BYTES = "activation_bytes"
PARAM_BYTES = "param_bytes"
COST_UNSUPPORTED = "cost_unsupported"
# Bytes autograd keeps for the backward pass (graph/saved.py), written only when a drawing asks for it.
SAVED_BYTES = "saved_bytes"
POLY_ATTRS = (MATMUL_FLOPS, OTHER_FLOPS, ACTIVATION_BYTES, SAVED_BYTES)
CALL = "call"  # op: the module's call it ran in, when the module is called more than once (0 is left out)
LITERALS = "literals"  # op: {argument position or keyword: number or flag}; sizes named, non-finite as text
ARGS = "args"  # edge: positions in the target's INPUTS the tensor fills
# Architecture facts (graph/facts/), on attention ops and on their module's table entry.
ATTENTION = "attention"  # one of ATTENTION_KINDS
WINDOW = "window"  # int: the window of a sliding-window kind
PADDING_MASK = "padding_mask"  # the input name whose padding the mask applies
Q_HEADS = "q_heads"
KV_HEADS = "kv_heads"
# View-only node attributes.
OWN_OPS = "own_ops"  # the node stands for ops its module runs itself, not in a child
OPS = "ops"  # op names a view node stands for, in execution order, without repeats
TENSORS = "tensors"  # edge: how many distinct tensors the edge stands for

# Values of ATTENTION.
BIDIRECTIONAL = "bidirectional"
CAUSAL = "causal"
SLIDING_WINDOW = "sliding-window"  # a query sees keys within the window on both sides
CAUSAL_SLIDING_WINDOW = "causal-sliding-window"  # … within the window and not after it
CROSS = "cross"  # keys and values come from another stack
ATTENTION_KINDS = (BIDIRECTIONAL, CAUSAL, SLIDING_WINDOW, CAUSAL_SLIDING_WINDOW, CROSS)

# Position kinds (graph-level POSITION).
ABSOLUTE = "absolute"  # a learned table indexed by positions, added to the embeddings
RELATIVE_BUCKETS = "relative-buckets"  # a learned bias per log-bucket of distance, added to the scores
RELATIVE = "relative"  # disentangled: queries and keys against relative-position projections, gathered
ROTARY = "rotary"  # queries and keys rotated by cos/sin of the position
POSITION_KINDS = (ABSOLUTE, RELATIVE_BUCKETS, RELATIVE, ROTARY)

# Values of KIND.
INPUT = "input"
OPERATOR = "op"
OUTPUT = "output"
MODULE_NODE = "module"

# Graph-level attributes (``G.graph[...]``).
G_NAME = "name"  # the model as the user named it
G_MODEL_CLASS = "model_class"  # BertForSequenceClassification
G_HEAD = "head"
G_SOURCE = "source"  # "torch.export" or "onnx"
G_BACKBONE = "backbone"  # module path of the base model inside a head ("bert"), "" for a base model
G_CONFIG = "config"  # {"layers": 12, "hidden": 768, ...}
G_EXAMPLE = "example"  # {"batch": 1, "seq": 128}
G_MODULES = "modules"  # {path: {"type": "Linear", "sizes": "768 → 3072", "role": "feed-forward"}}
G_PARAMETERS = "parameters"  # [{"name", "shape", "numel", "trainable", "module"}], tied ones once
G_TIED = "tied"  # {alias name: canonical name}
G_WEIGHTS = "weights"  # "meta", "checkpoint" or "random"
G_VERSIONS = "versions"  # {"bertgraph": ..., "torch": ..., "transformers": ...}
G_FAMILY = "family"  # "bert", "gpt2", "t5", … (bertgraph's family record)
G_MODEL_TYPE = "model_type"  # the config's model_type ("xlm-roberta")
G_STRUCTURE = "structure"  # "encoder-only", "decoder-only" or "encoder-decoder"
G_ROLES_FROM = "roles_from"  # "module tree" when roles were inferred (no hand-written record); absent otherwise
G_STACKS = "stacks"  # {layer-list path: "encoder" | "decoder"} ("bert.encoder.layer": "encoder")
# What the model's safetensors checkpoint stores (model/stored.py's summary: files, dtypes, quantized parts)
# and "compared", its tensors held to the parameters; only a model with a checkpoint known has it.
G_CHECKPOINT = "checkpoint"
G_REMOTE_CODE = "remote_code"  # [classes the config's auto_map names, not run]; only where there are some
# What the config says of the weights as published: its quantization_config (plain JSON, as the config has it)
# and the float dtype it names (torch_dtype, or dtype); each only where the config has it.
G_QUANTIZATION_CONFIG = "quantization_config"
G_STORED_DTYPE = "stored_dtype"  # "bfloat16"
# Architecture facts read off the ops (graph/facts/); a stack path "" holds what is outside every stack.
G_ATTENTION = "attention_kinds"  # {stack path: {attention label: count}} ({"layers": {"sliding-window(64)": 14, …}})
G_POSITION = "position_kinds"  # {stack path: [position kinds]}, [] for none
G_SHARED = "shared_modules"  # {module path: calls} for a module run more than once (ALBERT's layer: 12)

# Keys of a module-table entry (``G.graph[G_MODULES][path]``).
M_TYPE = "type"  # class name
M_SIZES = "sizes"  # "768 → 3072"
# What the module is for: model, embeddings, position, stack, layer, self-attention, cross-attention,
# feed-forward, norm, pooler or head (bertgraph.model.families.record.ROLES).
M_ROLE = "role"
# The attention keys (ATTENTION, WINDOW, PADDING_MASK, Q_HEADS, KV_HEADS) on an attention block's
# module, and how many times a shared module runs:
M_CALLS = "calls"

# Attributes stored as JSON text in GraphML, which has no lists or mappings.
JSON_ATTRS = frozenset(
    {
        SHAPE,
        INPUTS,
        COST_UNSUPPORTED,
        PARAM_NAMES,
        SHARED_PARAMS,
        OPS,
        G_CONFIG,
        G_EXAMPLE,
        G_MODULES,
        G_PARAMETERS,
        G_TIED,
        G_VERSIONS,
        G_STACKS,
        LITERALS,
        ARGS,
        G_ATTENTION,
        G_POSITION,
        G_SHARED,
        G_CHECKPOINT,
        G_REMOTE_CODE,
    }
)


def attention_label(data: dict[str, Any]) -> str:
    """The attention kind as readers see it: ``causal``, ``sliding-window(64)``; "" for none.

    ``data`` is an attention op's attributes or its module's table entry.
    """
    kind = data.get(ATTENTION)
    if not isinstance(kind, str):
        return ""
    window = data.get(WINDOW)
    return f"{kind}({window})" if isinstance(window, int) and kind in (SLIDING_WINDOW, CAUSAL_SLIDING_WINDOW) else kind


def new_graph(**graph_attrs: Any) -> nx.DiGraph:
    """An empty graph with the given graph-level attributes."""
    graph = nx.DiGraph()
    graph.graph.update(graph_attrs)
    return graph


def io_attributes(kind: str, shape: list[int | str], dtype: str, order: int) -> dict[str, Any]:
    """Attributes of a model input or output node (``kind`` is INPUT or OUTPUT)."""
    return {KIND: kind, SHAPE: shape, DTYPE: dtype, MODULE: "", MODULE_TYPE: "", PARAMS: 0, ORDER: order}


def total_params(graph: nx.DiGraph) -> int:
    """Parameters counted over all nodes; equals the model's unique parameter count."""
    return sum(int(data.get(PARAMS, 0)) for _, data in graph.nodes(data=True))


def parameter_rows(graph: nx.DiGraph) -> list[dict[str, Any]]:
    """The model's parameters (tied ones once) as recorded at trace time."""
    return list(graph.graph.get(G_PARAMETERS, []))


def module_info(graph: nx.DiGraph, path: str) -> dict[str, Any]:
    """``{"type": ..., "sizes": ...}`` for a module path, empty when unknown."""
    return dict(graph.graph.get(G_MODULES, {}).get(path, {}))


def sum_costs(members: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The cost attributes of a node standing for ``members`` (node attribute dicts): sums.

    Attributes no member has stay absent, so views of a graph without costs stay as they were.
    """
    from bertgraph.graph.poly import Poly

    members = list(members)
    result: dict[str, Any] = {}
    for key in POLY_ATTRS:
        values = Counter(data[key] for data in members if key in data)
        if values:
            # Each distinct text once, times how often it occurs: a layer's ops repeat a few texts.
            total = Poly()
            for value, count in sorted(values.items()):
                total = total + Poly.parse(value) * count
            result[key] = str(total)
    if any(PARAM_BYTES in data for data in members):
        result[PARAM_BYTES] = sum(int(data.get(PARAM_BYTES, 0)) for data in members)
    unsupported = sorted({name for data in members for name in data.get(COST_UNSUPPORTED, [])})
    if unsupported:
        result[COST_UNSUPPORTED] = unsupported
    return result


def ops_in_order(graph: nx.DiGraph) -> list[str]:
    """Node ids sorted by execution order, then id: a deterministic walk."""
    return sorted(graph.nodes, key=lambda n: (graph.nodes[n].get(ORDER, 0), str(n)))


def prune_dead(graph: nx.DiGraph) -> None:
    """Remove ops whose results reach no output (left-overs a tracer kept).

    Ops that read parameters stay, so the parameter total never changes.
    """
    live = {n for n, d in graph.nodes(data=True) if d.get(KIND) in (OUTPUT, INPUT) or d.get(PARAMS)}
    for node in list(live):
        if graph.nodes[node].get(KIND) == OUTPUT or graph.nodes[node].get(PARAMS):
            live |= nx.ancestors(graph, node)
    graph.remove_nodes_from([n for n in list(graph.nodes) if n not in live])


def canonicalize(graph: nx.DiGraph) -> nx.DiGraph:
    """Op nodes named after their module and op, ``order`` renumbered ``0..n-1``.

    ``bert.encoder.layer.3.attention.self.query:linear`` says where an op ran, and it is
    the same however the graph was produced (a full trace, or layers grown from two).
    A module's second op of one kind gets ``_1``, and so on.
    """
    seen: dict[str, int] = defaultdict(int)
    mapping = {}
    for node in ops_in_order(graph):
        data = graph.nodes[node]
        if data.get(KIND) != OPERATOR:
            mapping[node] = node
            continue
        base = f"{data.get(MODULE, '')}:{data.get(OP, '')}"
        mapping[node] = base if seen[base] == 0 else f"{base}_{seen[base]}"
        seen[base] += 1
    result = ordered_copy(nx.relabel_nodes(graph, mapping, copy=True))
    for index, node in enumerate(result.nodes):
        result.nodes[node][ORDER] = index
    return result


def ordered_copy(graph: nx.DiGraph) -> nx.DiGraph:
    """The same graph with nodes inserted in execution order and edges sorted by it."""
    nodes = ops_in_order(graph)
    position = {node: index for index, node in enumerate(nodes)}
    result = nx.DiGraph()
    result.graph.update(graph.graph)
    result.add_nodes_from((node, graph.nodes[node]) for node in nodes)
    edges = sorted(graph.edges(data=True), key=lambda e: (position[e[0]], position[e[1]]))
    result.add_edges_from(edges)
    return result
