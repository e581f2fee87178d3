"""torch.export on example inputs → the annotated operator graph.

torch.export records, for every aten op, its output as a fake tensor (``meta["val"]``)
and the module call stack it ran in (``meta["nn_module_stack"]``). That is all the graph
needs: no hooks, no patched torch globals. Batch and sequence come out named
(``[batch, seq, 768]``), never as numbers that could be confused with a hidden size:
one export at sizes that stand apart from the model's own tells them apart, or where that is
ambiguous two exports at different example sizes do (:mod:`bertgraph.tracing.dims`), with one
dynamic-shape export as the last fallback.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import linecache
import math
import operator
import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import networkx as nx

from bertgraph.errors import TraceError, first_line
from bertgraph.graph import schema as g
from bertgraph.model import ModelSpec, build_model, example_inputs
from bertgraph.model.build import ordered_sets
from bertgraph.model.families import Stack
from bertgraph.model.stored import compare
from bertgraph.tracing import causes, collector
from bertgraph.tracing.dims import (
    DimsError,
    example_sizes,
    known_sizes,
    name_dims,
    name_dims_once,
    own_sizes,
    single_sizes,
)
from bertgraph.tracing.grow import (
    GrowError,
    StackPlan,
    check_parameters,
    grow_stacks,
    layer_pattern,
    traced_layers,
)

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram
    from torch.fx import Node

MAX_DYNAMIC = 4096  # the largest batch (and sequence, without a position limit) a dynamic export allows
# Ops that compute nothing a reader of the graph needs: shape queries and assertions.
_SKIPPED_TARGETS = re.compile(r"^aten\.(sym_size|sym_numel|sym_stride|_assert_\w+|sym_constrain_range\w*)\.")
# Ops that return their input itself when not training.
_RETURNS_INPUT_IN_EVAL = frozenset(
    f"aten.{name}.default" for name in ("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout")
)


class TensorFacts(NamedTuple):
    """What the graph records of one tensor."""

    shape: list[int | str]
    dtype: str


def trace(spec: ModelSpec, grow: bool = True) -> nx.DiGraph:
    """Build the spec's model on the meta device, export it and return its graph.

    A model whose stacks are deeper than :func:`~bertgraph.tracing.grow.traced_layers`
    needs is exported with fewer layers and grown to its full depth
    (:mod:`bertgraph.tracing.grow`), so tracing costs about the same at any depth; the
    result is checked against the full model and a full trace is the fallback.
    """
    with collector.paused() as settle:
        model = build_model(spec)
        settle()  # torch, transformers and the model live on: later collections need not walk them
        return _trace(spec, model, grow)


def _trace(spec: ModelSpec, model: torch.nn.Module, grow: bool) -> nx.DiGraph:
    stacks = stack_plans(spec, model) if grow else []
    plans = [plan for _, plan in stacks]
    if any(plan.layers > plan.traced for plan in plans):
        small = replace(spec, config=shrunk_config(spec, stacks), weights=None, pickle_weights=None, checkpoint=None)
        small_model = build_model(small)
        try:
            grown = grow_stacks(trace_module(small_model, small), plans)
            _, tied = _canonical_parameter_names(model)
            grown.graph.update(_graph_attributes(model, spec, "meta", tied))
            grown.graph[g.G_EXAMPLE] = traced_example(grown, spec)
            check_parameters(grown, {name: p.numel() for name, p in model.named_parameters()})
            return grown
        except GrowError:
            pass  # an unusual model: trace every layer
    return trace_module(model, spec, weights="meta")


def stack_plans(spec: ModelSpec, model: torch.nn.Module) -> list[tuple[Stack, StackPlan]]:
    """How each of the family's stacks in the model is traced and grown.

    Empty when some stack's layers do not repeat (then every layer is traced).
    """
    family = spec.family
    backbone = family.backbone(spec.head)
    modules = dict(model.named_modules())
    plans = []
    for stack in family.stacks:
        container = f"{backbone}.{stack.path}" if backbone else stack.path
        if container not in modules:
            continue  # a head without this stack (T5's token classifier has no decoder)
        layers = family.stack_layers(stack, spec.config)
        kinds = _layer_kinds(spec.config, model, stack.types)
        if kinds is not None and len(kinds) != layers:
            return []
        period = int(spec.config.get(stack.period) or 1) if stack.period else 1
        built = None if stack.shared else _built_kinds(modules, container, layers)
        if built is None and not stack.shared:
            return []
        # A layer's kind: what the config lists and what the built layer holds (a hybrid stack's
        # mixers, dense or expert feed-forward), so a period the config does not name is found.
        per_layer = [(kinds[i] if kinds else None, built[i] if built else None) for i in range(layers)]
        pattern = layer_pattern(per_layer, stack.special, period)
        if pattern is None:
            return []
        special, period = pattern
        traced = traced_layers(layers, special, period)
        plans.append((stack, StackPlan(container, layers, traced, special, period, stack.shared, kinds)))
    return plans


def _built_kinds(modules: dict[str, torch.nn.Module], container: str, layers: int) -> list[tuple[Any, ...]] | None:
    """Each built layer's make: its modules' classes and its parameters' shapes (None when the
    list does not hold ``layers`` layers)."""
    kinds = []
    for index in range(layers):
        layer = modules.get(f"{container}.{index}")
        if layer is None:
            return None
        parts = tuple((name, type(part).__name__) for name, part in layer.named_modules())
        shapes = tuple((name, tuple(parameter.shape)) for name, parameter in layer.named_parameters())
        kinds.append((parts, shapes))
    return kinds


def _layer_kinds(config: dict[str, Any], model: torch.nn.Module, types: str | None) -> tuple[str, ...] | None:
    """Each layer's kind as the built model has it: transformers derives ``layer_types`` from other
    fields (Qwen2's ``use_sliding_window`` and ``max_window_layers``), so the spec's config may not list it."""
    if types is None:
        return None
    kinds = config.get(types)
    if not isinstance(kinds, list):
        kinds = getattr(getattr(model, "config", None), types, None)
    return tuple(str(kind) for kind in kinds) if isinstance(kinds, (list, tuple)) else None


def shrunk_config(spec: ModelSpec, stacks: list[tuple[Stack, StackPlan]]) -> dict[str, Any]:
    """The spec's config with each stack cut to the layers tracing needs."""
    config = dict(spec.config)
    for stack, plan in stacks:
        config[spec.family.sizes[stack.size]] = plan.traced
        if stack.types and plan.kinds is not None:
            # Listed outright: the shrunk model must not derive its kinds again from its smaller depth.
            config[stack.types] = list(plan.kinds[: plan.traced])
        for name, value in spec.config.items():
            if name != stack.types and _per_layer(value, plan.layers):
                config[name] = value[: plan.traced]  # another per-layer list (feed-forward kinds) cut alike
    return config


def _per_layer(value: Any, layers: int) -> bool:
    """A list of one kind name per layer (``mlp_layer_types``)."""
    return isinstance(value, list) and len(value) == layers > 1 and all(isinstance(item, str) for item in value)


def skeleton(spec: ModelSpec) -> nx.DiGraph:
    """The graph-level facts of a model (modules, parameters) without tracing it.

    Parameter statistics need nothing more, so ``bertgraph params`` skips torch.export.
    """
    model = build_model(spec)
    _, tied = _canonical_parameter_names(model)
    return g.new_graph(**_graph_attributes(model, spec, "meta", tied))


def trace_module(model: torch.nn.Module, spec: ModelSpec, weights: str = "meta") -> nx.DiGraph:
    """Export ``model`` and build the annotated graph, batch and sequence named.

    One export at sizes that stand apart from the model's own names the dimensions where
    every size has a single reading; otherwise two exports at fixed example sizes do
    (:mod:`bertgraph.tracing.dims`), and where they cannot, one export with dynamic
    dimensions does.
    """
    own = own_sizes(spec.config, (parameter.shape for parameter in model.parameters()))
    sizes = single_sizes(spec.dim_names, spec.max_positions or MAX_DYNAMIC, own)
    if sizes is not None and not _shifts_the_sequence(model):
        shape = tuple(sizes[name] for name in spec.dim_names)
        graph = graph_from_program(export_program(model, spec, shape), model, spec, weights=weights)
        try:
            return name_dims_once(graph, sizes, known_sizes(own))
        except DimsError:
            pass
    return trace_module_twice(model, spec, weights)


def _shifts_the_sequence(model: torch.nn.Module) -> bool:
    """Whether a 1-d convolution's output is longer or shorter than its input: a causal
    convolution (Mamba's, a linear attention's) pads ``kernel - 1`` positions, so the single
    trace would hold ``seq + 3``, which reads as a constant too and sends tracing to the pair
    after a wasted export (a third of a hybrid model's trace)."""
    import torch

    for module in model.modules():
        if not isinstance(module, torch.nn.Conv1d) or module.padding == "same" or module.stride != (1,):
            continue
        padding = 0 if module.padding == "valid" else module.padding[0]
        if 2 * padding != module.dilation[0] * (module.kernel_size[0] - 1):
            return True
    return False


def trace_module_twice(model: torch.nn.Module, spec: ModelSpec, weights: str = "meta") -> nx.DiGraph:
    """:func:`trace_module` from two exports (or the dynamic one), never from a single export."""
    sizes = example_sizes(spec.dim_names, spec.max_positions or MAX_DYNAMIC)
    if sizes is not None:
        graphs = []
        for example in sizes:
            shape = tuple(example[name] for name in spec.dim_names)
            graphs.append(graph_from_program(export_program(model, spec, shape), model, spec, weights=weights))
        try:
            return name_dims(graphs[0], graphs[1], *sizes)
        except DimsError:
            pass
    graph = graph_from_program(export_program(model, spec), model, spec, weights=weights)
    graph.graph[g.G_EXAMPLE] = traced_example(graph, spec)
    return graph


def traced_example(graph: nx.DiGraph, spec: ModelSpec) -> dict[str, int]:
    """The example sizes ``graph`` states: the spec's where its inputs' dimensions are named, and
    where an export could name none (it fell back to fixed sizes: VITS), the size it was traced at,
    so the stated example is the one its shapes show."""
    example = dict(zip(spec.dim_names, spec.example_shape))
    for name, dims in spec.input_dims.items():
        shape = graph.nodes[name].get(g.SHAPE, []) if name in graph else []
        for dim, size in zip(dims, shape):
            if type(size) is int:
                example[dim] = size
    return example


def export_program(model: torch.nn.Module, spec: ModelSpec, shape: tuple[int, ...] | None = None) -> ExportedProgram:
    """torch.export at a fixed ``shape``, or with dynamic batch and sequence when it is None.

    A failure names the module it stopped in.
    """

    device = next(model.parameters()).device
    inputs = example_inputs(spec, device=device, shape=shape)
    try:
        # torch.export prints the partial graph of a failed export to stderr: the cause line says enough.
        with without_stack_traces(), ordered_sets(model), contextlib.redirect_stderr(io.StringIO()):
            return _export(model, spec, inputs, shape)
    except Exception as error:
        raise TraceError(*_trace_failure(error, model, spec)) from error


@contextmanager
def without_stack_traces() -> Iterator[None]:
    """torch.export records each op's Python stack (``meta["stack_trace"]``), which the graph never
    reads; capturing and symbolising it for every op is a tenth of an export."""
    import torch.fx.config

    previous = torch.fx.config.do_not_emit_stack_traces
    torch.fx.config.do_not_emit_stack_traces = True
    try:
        yield
    finally:
        torch.fx.config.do_not_emit_stack_traces = previous


def _export(
    model: torch.nn.Module, spec: ModelSpec, inputs: dict[str, torch.Tensor], shape: tuple[int, ...] | None
) -> ExportedProgram:
    import torch
    from torch.export import Dim

    if shape is not None:
        return torch.export.export(model, (), inputs, strict=False)
    limit = spec.max_positions or MAX_DYNAMIC
    dims = {
        name: Dim(name, min=1, max=max(limit, 2) if name in ("seq", "tgt") else MAX_DYNAMIC) for name in spec.dim_names
    }
    shapes = {name: {axis: dims[dim] for axis, dim in enumerate(names)} for name, names in spec.input_dims.items()}
    try:
        return torch.export.export(model, (), inputs, dynamic_shapes=shapes, strict=False)
    except torch._dynamo.exc.UserError:
        # A config that pins a dimension (tiny max_position_embeddings, say) still
        # traces with fixed sizes; its shapes are then shown as numbers.
        return torch.export.export(model, (), inputs, strict=False)


def _trace_failure(error: BaseException, model: torch.nn.Module, spec: ModelSpec) -> tuple[str, str, str]:
    """One line naming the cause (:mod:`bertgraph.tracing.causes`), the deepest module the failed
    trace was in and the line it stopped at; the cause's key; and the line's middle part.

    The line is the innermost frame outside torch itself: the model's (or a hook's) code.
    """
    import torch

    names = {id(module): name for name, module in model.named_modules()}
    torch_dir = str(Path(torch.__file__).parent)
    own_dir = str(Path(__file__).resolve().parent.parent)  # bertgraph's export call is no model line
    module_text = line_text = code = ""
    for frame, lineno in traceback.walk_tb(error.__traceback__):
        owner = frame.f_locals.get("self")
        if id(owner) in names:
            module_text = f" in module '{names[id(owner)] or '<root>'}' ({type(owner).__name__})"
        filename = frame.f_code.co_filename
        # Generated code (``<string>``) has no line to quote.
        if not filename.startswith((torch_dir, own_dir, "<")):
            code = linecache.getline(filename, lineno).strip()
            line_text = f" at {Path(filename).name}:{lineno} `{code}`"
    found = causes.classify(error, code)
    line, where = causes.trace_line(spec.name, spec.model_class, found, module_text + line_text, first_line(error))
    return line, found.kind, where


# --- ExportedProgram → graph ------------------------------------------------------------


def graph_from_program(
    program: ExportedProgram, model: torch.nn.Module, spec: ModelSpec, weights: str = "meta"
) -> nx.DiGraph:
    """The annotated graph of an exported program.

    Parameters reach ops as placeholders; each op records the ones it reads. A tied
    parameter (one tensor under two names) is counted at the first op that reads it
    and listed under ``shared_params`` at the others, so totals match
    ``sum(p.numel() for p in model.parameters())``.
    """
    signature = program.graph_signature
    canonical, tied = _canonical_parameter_names(model)
    numel = {name: p.numel() for name, p in model.named_parameters()}
    placeholder_params = {node: canonical[fqn] for node, fqn in signature.inputs_to_parameters.items()}
    symbols = _dim_symbols(program, spec)

    graph = g.new_graph(**_graph_attributes(model, spec, weights, tied))
    counted: set[str] = set()
    kept: dict[str, str] = {}  # fx node name → graph node id (getitem resolves to its source)
    edge_facts: dict[str, TensorFacts] = {}
    user_inputs = set(signature.user_inputs)

    for order, node in enumerate(program.graph.nodes):
        if node.op == "placeholder":
            if node.name in user_inputs:
                facts = _facts(node.meta.get("val"), symbols)
                graph.add_node(node.name, **g.io_attributes(g.INPUT, facts.shape, facts.dtype, order))
                kept[node.name] = node.name
                edge_facts[node.name] = facts
            continue
        if node.op == "output":
            _add_outputs(graph, program, node, kept, edge_facts, order)
            continue
        if node.op != "call_function":
            continue
        if node.target is operator.getitem and node.args[0].name in kept:
            source = node.args[0]
            kept[node.name] = kept[source.name]
            edge_facts[node.name] = _facts(node.meta.get("val"), symbols)
            continue
        target = str(node.target)
        value = node.meta.get("val")
        if _SKIPPED_TARGETS.match(target) or not _is_tensorish(value):
            continue
        facts = _facts(value, symbols)
        arguments = _tensor_arguments(node)
        aliased = _aliased_argument(node, value, arguments)
        module, module_type, call = _module_of(node)
        reads = [placeholder_params[a.name] for a in node.all_input_nodes if a.name in placeholder_params]
        own = [name for name in dict.fromkeys(reads) if name not in counted]
        counted.update(own)
        shared = [name for name in dict.fromkeys(reads) if name not in own]
        attrs: dict[str, Any] = {
            g.KIND: g.OPERATOR,
            g.OP: _op_name(node),
            g.TARGET: target,
            g.MODULE: module,
            g.MODULE_TYPE: module_type,
            g.SHAPE: facts.shape,
            g.DTYPE: facts.dtype,
            g.PARAMS: sum(numel[name] for name in own),
            g.PARAM_NAMES: own,
            g.ORDER: order,
            g.INPUTS: [_facts(argument.meta.get("val"), symbols).shape for argument in arguments],
        }
        literals = _literals(node, symbols)
        if target == _ATTENTION:
            literals.update(_training_dropout(model, module))
        if literals:
            attrs[g.LITERALS] = literals
        if shared:
            attrs[g.SHARED_PARAMS] = shared
        if call:
            attrs[g.CALL] = call
        if aliased is not None:
            attrs[g.ALIAS] = True
        graph.add_node(node.name, **attrs)
        kept[node.name] = node.name
        edge_facts[node.name] = facts
        for source in node.all_input_nodes:
            if source.name in kept and kept[source.name] != node.name:
                facts_in = edge_facts[source.name]
                edge: dict[str, Any] = {g.SHAPE: facts_in.shape, g.DTYPE: facts_in.dtype}
                positions = [i for i, argument in enumerate(arguments) if kept.get(argument.name) == kept[source.name]]
                if positions:
                    edge[g.ARGS] = positions
                if aliased is not None and kept.get(aliased.name) == kept[source.name]:
                    edge[g.ALIAS] = True
                graph.add_edge(kept[source.name], node.name, **edge)

    g.prune_dead(graph)
    unread = [name for name in numel if name not in counted]
    if unread:
        graph.graph["unread_parameters"] = unread
    return g.canonicalize(graph)


def _add_outputs(
    graph: nx.DiGraph,
    program: ExportedProgram,
    node: Node,
    kept: dict[str, str],
    edge_facts: dict[str, TensorFacts],
    order: int,
) -> None:
    names = _output_names(program)
    outputs = node.args[0]
    for index, source in enumerate(outputs if isinstance(outputs, (list, tuple)) else [outputs]):
        if source is None or getattr(source, "name", None) not in kept:
            continue
        name = names[index] if index < len(names) else f"output_{index}"
        node_id = name if name not in graph else f"{name}:output"
        facts = edge_facts[source.name]
        graph.add_node(node_id, **g.io_attributes(g.OUTPUT, facts.shape, facts.dtype, order + index))
        graph.add_edge(kept[source.name], node_id, **{g.SHAPE: facts.shape, g.DTYPE: facts.dtype})


def _output_names(program: ExportedProgram) -> list[str]:
    """Output names from the output pytree (``logits``, ``start_logits``, …)."""
    spec = program.call_spec.out_spec
    context = getattr(spec, "context", None)
    if isinstance(context, (list, tuple)) and all(isinstance(c, str) for c in context):
        return list(context)
    return []


def _canonical_parameter_names(model: torch.nn.Module) -> tuple[dict[str, str], dict[str, str]]:
    """Every parameter name → the name ``named_parameters()`` reports it under, and the aliases."""
    first: dict[int, str] = {}
    canonical: dict[str, str] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        canonical[name] = first.setdefault(id(parameter), name)
    tied = {alias: name for alias, name in canonical.items() if alias != name}
    return canonical, tied


def _dim_symbols(program: ExportedProgram, spec: ModelSpec) -> dict[Any, str]:
    """Sympy symbol of each dynamic input dimension → its name (``batch``, ``seq``, ``tgt``)."""
    symbols: dict[Any, str] = {}
    dims = spec.input_dims
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in dims:
            for size, name in zip(node.meta["val"].shape, dims[node.name]):
                expr = getattr(getattr(size, "node", None), "expr", None)
                if expr is not None and expr.free_symbols:
                    symbols[expr] = name
    return symbols


def _tensor_arguments(node: Node) -> list[Node]:
    """The arguments of an op that are tensors, in argument order (lists flattened, keywords last)."""
    found: list[Node] = []

    def visit(value: Any) -> None:
        if isinstance(value, (list, tuple)):
            for item in value:
                visit(item)
        elif hasattr(value, "meta") and _is_tensor(value.meta.get("val")):
            found.append(value)

    visit(node.args)
    visit(list(node.kwargs.values()))
    return found


def _literals(node: Node, symbols: dict[Any, str]) -> dict[str, int | float | bool | str]:
    """The op's number and flag arguments by position (``"1"``) or keyword, JSON-safe.

    A size is named like a shape's dimension: a dynamic export passes it as a symbolic
    number (``seq``), a static one as a plain number that :mod:`~bertgraph.tracing.dims`
    names. Tensors are edges, and lists, dtypes and devices are left out.
    """
    found: dict[str, int | float | bool | str] = {}
    items: list[tuple[str, Any]] = [(str(i), a) for i, a in enumerate(node.args)] + list(node.kwargs.items())
    for key, argument in items:
        value = argument.meta.get("val") if hasattr(argument, "meta") else argument
        if isinstance(value, int):  # bool included
            found[key] = value
        elif isinstance(value, float):
            found[key] = value if math.isfinite(value) else str(value)
        elif type(value).__name__ == "SymInt":
            found[key] = _dim(value, symbols)
    return found


_ATTENTION = "aten.scaled_dot_product_attention.default"
TRAINING_DROPOUT = "training_dropout"


def _training_dropout(model: torch.nn.Module, path: str) -> dict[str, float]:
    """The dropout probability an attention module passes to attention in training mode.

    The trace runs in eval mode, where transformers passes 0; in training it passes its
    ``attn_dropout.p`` (GPT-2), ``attention_dropout`` (LLaMA) or ``dropout`` (BERT's
    ``nn.Dropout``, T5's float). Nothing when the module has none of them.
    """
    from torch import nn

    try:
        module = model.get_submodule(path)
    except AttributeError:
        return {}
    for name in ("attn_dropout", "attention_dropout", "dropout"):
        value = getattr(module, name, None)
        if isinstance(value, nn.Dropout):
            return {TRAINING_DROPOUT: float(value.p)}
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return {TRAINING_DROPOUT: float(value)}
    return {}


def _aliased_argument(node: Node, value: Any, arguments: list[Node]) -> Node | None:
    """The argument whose storage the op's output shares (a view, an in-place op), if any.

    Eval-mode dropout returns its input itself (``at::dropout``) although the exported
    program records a fresh tensor, so it counts as an alias of its input.
    """
    if str(node.target) in _RETURNS_INPUT_IN_EVAL:
        train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train")
        if train is False and arguments:
            return arguments[0]
    output = next((v for v in (value if isinstance(value, (list, tuple)) else [value]) if _is_tensor(v)), None)
    key = _storage_key(output)
    if key is None:
        return None
    return next((a for a in arguments if _storage_key(a.meta.get("val")) == key), None)


def _storage_key(value: Any) -> int | None:
    try:
        return int(value.untyped_storage()._cdata)
    except (AttributeError, RuntimeError, NotImplementedError):
        return None  # no storage to share (a nested or sparse tensor, a symbolic number)


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, (list, tuple))


def _is_tensorish(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_is_tensorish(v) for v in value)
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _facts(value: Any, symbols: dict[Any, str]) -> TensorFacts:
    """Shape and dtype of a tensor (the first tensor of a tuple), dims named where dynamic."""
    if isinstance(value, (list, tuple)):
        value = next(v for v in value if _is_tensorish(v))
    return TensorFacts([_dim(size, symbols) for size in value.shape], str(value.dtype).removeprefix("torch."))


def _dim(size: Any, symbols: dict[Any, str]) -> int | str:
    expr = getattr(getattr(size, "node", None), "expr", None)
    if expr is None:
        return int(size)
    if not expr.free_symbols:
        return int(expr)
    if not expr.free_symbols <= symbols.keys():
        return "?"  # data-dependent (an unbacked size): no input dimension decides it
    import sympy

    named = expr.xreplace({symbol: sympy.Symbol(name) for symbol, name in symbols.items()})
    return str(named)


def _op_name(node: Node) -> str:
    """``aten.linear.default`` → ``linear``; ``aten.__and__.Tensor`` → ``and``."""
    target = node.target
    name = getattr(target, "__name__", None) or str(target)
    packet = name.split(".")[0] if "." in name else name
    return packet.strip("_") or packet


# The config's float dtypes (torch_dtype) a graph records as the weights' published dtype.
FLOAT_NAMES = ("float32", "float16", "bfloat16", "float64")

_CALL_SUFFIX = re.compile(r"@(\d+)$")


def _module_of(node: Node) -> tuple[str, str, int]:
    """The innermost module an op ran in: path, class name, and which call of a module
    called more than once (the outermost such module's; torch.export marks calls after
    the first with ``@1``, ``@2``, … on their stack keys)."""
    stack = node.meta.get("nn_module_stack") or {}
    call = 0
    for key in stack:
        match = _CALL_SUFFIX.search(str(key))
        if match:
            call = int(match.group(1))
            break
    for path, type_name in reversed(list(stack.values())):
        if isinstance(path, str) and not path.startswith("_empty_nn_module_stack"):
            kind = type_name if isinstance(type_name, str) else getattr(type_name, "__name__", str(type_name))
            return path, kind.rsplit(".", 1)[-1], call
    return "", "", call


# --- graph-level facts --------------------------------------------------------------------


def _graph_attributes(model: torch.nn.Module, spec: ModelSpec, weights: str, tied: dict[str, str]) -> dict[str, Any]:
    family = spec.family
    backbone = family.backbone(spec.head)
    modules = module_table(model)
    for path, role in family.roles_of(list(modules), backbone).items():
        modules[path][g.M_ROLE] = role
    stacks = {}
    for stack in family.stacks:
        container = f"{backbone}.{stack.path}" if backbone else stack.path
        if container in modules:
            stacks[container] = stack.kind
    # Only a record read off the module tree says so: other graphs keep exactly their keys.
    inferred = {g.G_ROLES_FROM: "module tree"} if family.inferred else {}
    parameters = parameter_table(model)
    return {
        **inferred,
        **_checkpoint_attributes(spec, parameters, tied, backbone or family.prefix),
        g.G_NAME: spec.name,
        g.G_MODEL_CLASS: type(model).__name__,
        g.G_HEAD: spec.head,
        g.G_SOURCE: "torch.export",
        g.G_FAMILY: family.name,
        g.G_MODEL_TYPE: spec.model_type,
        g.G_STRUCTURE: family.structure,
        g.G_BACKBONE: backbone,
        g.G_STACKS: stacks,
        g.G_CONFIG: spec.summary(),
        g.G_EXAMPLE: dict(zip(spec.dim_names, spec.example_shape)),
        g.G_MODULES: modules,
        g.G_PARAMETERS: parameters,
        g.G_TIED: tied,
        g.G_WEIGHTS: weights,
        g.G_VERSIONS: versions(),
    }


def _checkpoint_attributes(
    spec: ModelSpec, parameters: list[dict[str, Any]], tied: dict[str, str], prefix: str
) -> dict[str, Any]:
    """What the checkpoint stores, held to the model's parameters; the classes ``auto_map`` names and
    bertgraph did not run; the config's ``quantization_config`` and float dtype (what deployment plans
    weights from without headers). Only a model with one carries its key."""
    found: dict[str, Any] = {}
    if spec.checkpoint is not None:
        found[g.G_CHECKPOINT] = {
            **spec.checkpoint.summary(),
            "compared": compare(spec.checkpoint, parameters, tied, prefix),
        }
    if spec.remote_code:
        found[g.G_REMOTE_CODE] = list(spec.remote_code)
    quantization = spec.config.get("quantization_config")
    if isinstance(quantization, dict) and quantization:
        found[g.G_QUANTIZATION_CONFIG] = json.loads(json.dumps(quantization))  # plain JSON, as a graph holds
    stored = spec.config.get("torch_dtype", spec.config.get("dtype"))
    if stored in FLOAT_NAMES:
        found[g.G_STORED_DTYPE] = stored
    return found


def module_table(model: torch.nn.Module) -> dict[str, dict[str, str]]:
    """Every module path → its class name and key sizes (roles are added from the family)."""
    table = {}
    for path, module in model.named_modules():
        entry = {g.M_TYPE: type(module).__name__}
        sizes = describe_module(module)
        if sizes:
            entry[g.M_SIZES] = sizes
        table[path] = entry
    return table


def describe_module(module: torch.nn.Module) -> str:
    """The sizes that identify a module at a glance (``768 → 3072``, ``30522 × 768``)."""
    from torch import nn

    if isinstance(module, nn.Linear):
        return f"{module.in_features} → {module.out_features}"
    if isinstance(module, nn.Embedding):
        return f"{module.num_embeddings} × {module.embedding_dim}"
    if isinstance(module, nn.LayerNorm):
        return " × ".join(str(s) for s in module.normalized_shape)
    if isinstance(module, nn.Dropout):
        return f"p={module.p:g}"
    if isinstance(module, nn.ModuleList):
        return f"{len(module)}"
    heads = getattr(module, "num_attention_heads", None)
    head_size = getattr(module, "attention_head_size", None)
    if isinstance(heads, int) and isinstance(head_size, int):
        return f"{heads} heads × {head_size}"
    return ""


def parameter_table(model: torch.nn.Module) -> list[dict[str, Any]]:
    """One row per unique parameter, in ``named_parameters()`` order."""
    rows = []
    for name, parameter in model.named_parameters():
        rows.append(
            {
                "name": name,
                "shape": list(parameter.shape),
                "numel": parameter.numel(),
                "trainable": bool(parameter.requires_grad),
                "dtype": str(parameter.dtype).removeprefix("torch."),
                "module": name.rsplit(".", 1)[0] if "." in name else "",
            }
        )
    return rows


def versions() -> dict[str, str]:
    """Versions that change what a trace produces (also part of the graph cache key)."""
    return dict(_installed_versions())


@functools.cache  # installed versions do not change under a running process; each lookup reads the disk
def _installed_versions() -> tuple[tuple[str, str], ...]:
    from bertgraph.version import __version__

    found = {"bertgraph": __version__, "python": ".".join(map(str, sys.version_info[:2]))}
    for package in ("torch", "transformers"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "absent"
    return tuple(found.items())
