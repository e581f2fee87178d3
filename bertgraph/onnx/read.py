"""ONNX file → the annotated graph (the schema of :mod:`bertgraph.graph`).

Any ONNX model can be read, ours or not; the more its producer recorded, the more
the graph knows:

* **module paths** come from the torch.onnx (dynamo) exporter's node metadata
  (``pkg.torch.onnx.name_scopes`` with ``pkg.torch.onnx.class_hierarchy`` for class
  names), else from scoped node names (``/bert/encoder/layer.0/…/MatMul`` of the
  TorchScript exporter, ``bert.encoder.layer.0…/node`` of bertgraph), else ``""``;
* **shapes** come from ``onnx.shape_inference``, dynamic dimensions by their names
  (``batch``, ``sequence``), unknown ones as ``"?"``;
* **graph-level facts** (head, config, tied parameters, weights) come from the
  metadata bertgraph writes, when the producer is bertgraph.

``Constant`` nodes are data, like initializers, and the shape queries and runtime
assertions torch.export inserts are bookkeeping; neither becomes a node, just as the
torch.export front end (:mod:`bertgraph.tracing`) leaves them out.

Which initializers are parameters: an initializer counts when it holds floating-point
numbers, has at least one dimension, and is not declared a buffer or constant by the
torch.export graph signature the exporter stores in the file. Integer and boolean
initializers are shape constants, indices and buffers (``position_ids``); float
scalars are constants the exporter lifted out of the graph (epsilon, scale factors).
For files bertgraph wrote this is exact: the parameters are the model's, under their
PyTorch names. Each is counted once, at the first node that reads it, so tied weights
(a masked-LM decoder reading the word embeddings) count once.
"""

from __future__ import annotations

import ast
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import networkx as nx

from bertgraph.errors import BertgraphError, OnnxError, first_line
from bertgraph.files import expand_user, path_kind
from bertgraph.graph import schema as g

if TYPE_CHECKING:
    import onnx

PRODUCER = "bertgraph"
NAME_SCOPES_KEY = "pkg.torch.onnx.name_scopes"
CLASS_HIERARCHY_KEY = "pkg.torch.onnx.class_hierarchy"
NAMESPACE_KEY = "namespace"
GRAPH_SIGNATURE_KEY = "pkg.torch.export.ExportedProgram.graph_signature"

_FLOAT_TYPES = frozenset({"float32", "float64", "float16", "bfloat16"})
# ONNX type names that differ from the torch/numpy names the graph uses.
_DTYPE_NAMES = {"float": "float32", "double": "float64", "undefined": ""}
# A module path: dotted identifiers and list indices.
_MODULE_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[\w]+)*$")
_SIGNATURE_LINE = re.compile(r"^\s*\w+: (PARAMETER|BUFFER|CONSTANT_TENSOR)\b.*target='([^']+)'")
# Shape queries and runtime assertions torch.export adds; the torch.export front end
# leaves the same ops out (bertgraph.tracing), so both graphs show the same computation.
_SKIPPED_ATEN = re.compile(r"^aten\.(sym_size|sym_numel|sym_stride|_assert_\w+|sym_constrain_range\w*)\.")
# Initializers at most this many elements keep their values for shape inference.
_SMALL_TENSOR = 4096


class TensorFacts(NamedTuple):
    """What the graph records of one tensor."""

    shape: list[int | str]
    dtype: str


# --- entry points --------------------------------------------------------------------------


def read_onnx_graph(path: str | Path) -> nx.DiGraph:
    """The annotated operator graph of an ONNX file (weights are not read).

    Raises:
        OnnxError: a missing, unreadable or non-ONNX file (one line).
    """
    from bertgraph.onnx import packages

    packages.require(packages.READ, "reading an ONNX file")
    try:
        file = expand_user(path)
    except BertgraphError as error:
        raise OnnxError(str(error)) from error
    return graph_from_onnx(load_model(file), name=file.stem)


def load_model(path: Path) -> onnx.ModelProto:
    """The model without its external weights (only their shapes are needed)."""
    import onnx
    from google.protobuf.message import DecodeError

    found = path_kind(path)
    if found.kind == "missing":
        raise OnnxError(f"no such ONNX file: {path}")
    if found.kind != "file":
        raise OnnxError(f"cannot read {path}: it is {found.description}; give an .onnx file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, ValueError, RuntimeError) as error:
        raise OnnxError(f"{path} is not an ONNX model (it cannot be parsed: {first_line(error)})") from error
    except OSError as error:
        raise OnnxError(f"cannot read {path}: {error.strerror or error}") from error
    if model.ir_version < 1 or not model.opset_import or not model.graph.output:
        raise OnnxError(f"{path} is not an ONNX model (no IR version, opset or graph outputs)")
    damaged = _undecodable_text(model)
    if damaged:
        raise OnnxError(f"{path} is damaged: {damaged} is not UTF-8 text; export the model again")
    return model


def _undecodable_text(message: Any, where: str = "the model") -> str | None:
    """The first text field protobuf could not decode as UTF-8 (ONNX's proto2 strings are not
    checked on parsing; a damaged name comes back as bytes), or None."""
    from google.protobuf.descriptor import FieldDescriptor

    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_STRING:
            values = value if field.is_repeated else [value]
            if any(not isinstance(item, str) for item in values):
                return f"{where}'s {field.name}"
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            items = value if field.is_repeated else [value]
            for item in items:
                found = _undecodable_text(item, field.name)
                if found:
                    return found
    return None


def graph_from_onnx(model: onnx.ModelProto, name: str = "") -> nx.DiGraph:
    """Build the annotated graph of an ONNX model (see the module docstring)."""
    builder = _Builder(model)
    inputs = [v for v in model.graph.input if v.name not in builder.initializers]
    for order, value in enumerate(inputs):
        builder.add_input(value.name, order)
    for index, node in enumerate(model.graph.node):
        builder.add_node(node, len(inputs) + index)
    builder.add_outputs(len(inputs) + len(model.graph.node))
    graph = builder.graph
    g.prune_dead(graph)

    meta = ours(model)
    modules = module_table(builder.types, builder.params, builder.first_reader, meta)
    rows = parameter_rows(builder.params, modules, builder.first_reader)
    graph.graph.update(_graph_attributes(model, meta, name, modules, rows, builder.types))
    unread = [n for n in builder.params if n not in builder.first_reader]
    if unread:
        graph.graph["unread_parameters"] = unread
    return graph


class _Builder:
    """The graph under construction, and what is known so far about tensors and modules."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.graph = g.new_graph()
        self.facts = tensor_facts(model)
        self.initializers = {t.name: t for t in model.graph.initializer}
        self.params = parameter_initializers(model)
        self.produced: dict[str, str] = {}  # tensor → node id of its producer
        self.first_reader: dict[str, str] = {}  # parameter → module of the node that counts it
        self.types: dict[str, str] = {}  # module path → class name

    def tensor(self, name: str) -> TensorFacts:
        return self.facts.get(name, TensorFacts([], ""))

    def add_input(self, name: str, order: int) -> None:
        self.graph.add_node(name, **_io_attrs(g.INPUT, self.tensor(name), order))
        self.produced[name] = name

    def add_node(self, node: Any, order: int) -> None:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            return  # data, like an initializer: not a step of the computation
        props = {p.key: p.value for p in node.metadata_props}
        if _is_shape_query(props):
            return
        module, module_type = module_of_node(props, node.name)
        self.types.update(_module_types(props))
        node_id = _unique(self.graph, node.name or f"{node.op_type}_{order}")
        reads = list(dict.fromkeys(n for n in _node_inputs(node) if n in self.params))
        own = [n for n in reads if n not in self.first_reader]
        self.first_reader.update({n: module for n in own})
        out = self.tensor(next((o for o in node.output if o), ""))
        attrs: dict[str, Any] = {
            g.KIND: g.OPERATOR,
            g.OP: node.op_type,
            g.TARGET: f"{node.domain or 'onnx'}::{node.op_type}",
            g.MODULE: module,
            g.MODULE_TYPE: module_type,
            g.SHAPE: out.shape,
            g.DTYPE: out.dtype,
            g.PARAMS: sum(_numel(self.params[n]) for n in own),
            g.PARAM_NAMES: own,
            g.ORDER: order,
            g.INPUTS: [self.tensor(name).shape for name in node.input if name],
        }
        shared = [n for n in reads if n not in own]
        if shared:
            attrs[g.SHARED_PARAMS] = shared
        self.graph.add_node(node_id, **attrs)
        for tensor in node.input:
            self._connect(tensor, node_id)
        self.produced.update({o: node_id for o in node.output if o})

    def add_outputs(self, order: int) -> None:
        for index, value in enumerate(self.model.graph.output):
            known = value.name in self.produced or value.name in self.initializers
            if not known and value.name not in _constant_outputs(self.model.graph.node):
                continue
            node_id = _unique(self.graph, value.name if value.name not in self.graph else f"{value.name}:output")
            self.graph.add_node(node_id, **_io_attrs(g.OUTPUT, self.tensor(value.name), order + index))
            self._connect(value.name, node_id)

    def _connect(self, tensor: str, node_id: str) -> None:
        source = self.produced.get(tensor)
        if source is not None and source != node_id and not self.graph.has_edge(source, node_id):
            facts = self.tensor(tensor)
            self.graph.add_edge(source, node_id, **{g.SHAPE: facts.shape, g.DTYPE: facts.dtype})


# --- metadata -----------------------------------------------------------------------------------


def ours(model: onnx.ModelProto) -> dict[str, str]:
    """The model metadata when bertgraph wrote the file, else ``{}``.

    Another producer may use the same keys for something else, so they are only
    believed in files whose producer is bertgraph.
    """
    if model.producer_name != PRODUCER:
        return {}
    return {p.key: p.value for p in model.metadata_props}


def _json(meta: dict[str, str], key: str, default: Any) -> Any:
    try:
        value = json.loads(meta[key])
    except (KeyError, ValueError, RecursionError):
        return default
    return value if isinstance(value, type(default)) else default


def _json_map(meta: dict[str, str], key: str, values: str) -> dict[str, Any]:
    """A metadata object of ``values`` (``count``: whole numbers ≥ 0, ``size``: > 0; ``name``: strings).

    Damaged metadata is ignored entry by entry: a list where a name should be, a string
    where a number should be, is not a fact about the model.
    """
    found = _json(meta, key, {})
    if values in ("count", "size"):
        least = 1 if values == "size" else 0
        return {k: v for k, v in found.items() if isinstance(v, int) and not isinstance(v, bool) and v >= least}
    return {k: v for k, v in found.items() if isinstance(v, str)}


DEFAULT_BATCH, DEFAULT_SEQUENCE = 1, 128  # bertgraph's own example size


def sized_example(graph: nx.DiGraph, batch: int | None = None, seq: int | None = None) -> dict[str, int]:
    """The example sizes of an ONNX graph with every symbolic input dimension given one.

    Another exporter names its dimensions as it likes (``batch_size``, ``sequence``); the
    first dimension of an input is its batch, a later one its sequence. ``batch`` and ``seq``
    (``--batch``, ``--seq-len``) size them; without them the recorded example, else 1 and 128.
    """
    example = dict(graph.graph.get(g.G_EXAMPLE, {}))
    for _, data in sorted(graph.nodes(data=True), key=lambda item: item[1].get(g.ORDER, 0)):
        if data.get(g.KIND) != g.INPUT:
            continue
        for index, dim in enumerate(data.get(g.SHAPE) or []):
            if not isinstance(dim, str) or not dim:
                continue
            given, default = (batch, DEFAULT_BATCH) if index == 0 else (seq, DEFAULT_SEQUENCE)
            if given is not None:
                example[dim] = given
            else:
                example.setdefault(dim, default)
    return example


def module_of_node(props: dict[str, str], name: str) -> tuple[str, str]:
    """(module path, module class name) of a node from its metadata, else from its name.

    >>> module_of_node({NAME_SCOPES_KEY: "['', 'bert', 'bert.pooler', 'bert.pooler.dense', 'linear']",
    ...   CLASS_HIERARCHY_KEY: "['M', 'x.BertModel', 'x.BertPooler', 'torch.nn.Linear', 'aten.linear.default']"}, "")
    ('bert.pooler.dense', 'Linear')
    >>> module_of_node({}, "/bert/encoder/layer.0/attention/self/query/MatMul")
    ('bert.encoder.layer.0.attention.self.query', '')
    >>> module_of_node({}, "bert.pooler.dense/node_linear"), module_of_node({}, "MatMul_3")
    (('bert.pooler.dense', ''), ('', ''))
    """
    scopes = _literal_list(props.get(NAME_SCOPES_KEY))
    if scopes:
        if scopes[0].startswith("_empty_nn_module_stack"):
            return "", ""
        modules = scopes[:-1]  # the last entry names the traced op itself
        if not modules:
            return "", ""
        classes = _literal_list(props.get(CLASS_HIERARCHY_KEY))
        kind = _short_class(classes[len(modules) - 1]) if len(classes) >= len(modules) else ""
        return _clean_path(modules[-1]), kind
    if name.startswith("/") and name.count("/") >= 2:
        return ".".join(part for part in name.strip("/").split("/")[:-1]), ""
    if "/" in name:
        prefix = name.rsplit("/", 1)[0]
        if _MODULE_PATH.match(prefix):
            return prefix, ""
    return "", ""


def _is_shape_query(props: dict[str, str]) -> bool:
    """Whether the exporter made this node from an aten shape query or assertion."""
    classes = _literal_list(props.get(CLASS_HIERARCHY_KEY))
    return bool(classes) and bool(_SKIPPED_ATEN.match(classes[-1]))


def _module_types(props: dict[str, str]) -> dict[str, str]:
    """Every module path on a node's scope → its class name."""
    scopes = _literal_list(props.get(NAME_SCOPES_KEY))
    classes = _literal_list(props.get(CLASS_HIERARCHY_KEY))
    if not scopes or scopes[0].startswith("_empty_nn_module_stack") or len(classes) < len(scopes):
        return {}
    return {_clean_path(path): _short_class(kind) for path, kind in zip(scopes[:-1], classes)}


def _literal_list(text: str | None) -> list[str]:
    """``"['', 'bert']"`` → ``['', 'bert']``; anything else → ``[]`` (never evaluated as code)."""
    if not text:
        return []
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def _short_class(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


def _clean_path(path: str) -> str:
    """Drop the ``@1`` suffix torch.export gives a module called more than once."""
    return re.sub(r"@\d+", "", path)


# --- tensors and parameters -----------------------------------------------------------------------


def dtype_name(elem_type: int) -> str:
    """ONNX element type → ``float32``, ``int64``, ``bool``, …"""
    import onnx

    try:
        name = onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return ""
    return _DTYPE_NAMES.get(name, name)


def _dims(shape: Any, known: set[str] | None = None) -> list[int | str]:
    """The dimensions of ``shape``: numbers, named ones, and ``?`` for what inference could not tell
    (``unk__3``; with ``known``, any name or expression over names that no input has: an inferred
    ``Flatten_86_o0__d0`` has no size a user could give)."""
    dims: list[int | str] = []
    for dim in shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param") and not dim.dim_param.startswith("unk__") and _sizable(dim.dim_param, known):
            dims.append(dim.dim_param)
        else:
            dims.append("?")
    return dims


def _sizable(param: str, known: set[str] | None) -> bool:
    if known is None:
        return True
    return all(name in known for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", param))


def tensor_facts(model: onnx.ModelProto) -> dict[str, TensorFacts]:
    """Shape and dtype of every tensor the file or shape inference knows."""

    facts: dict[str, TensorFacts] = {}
    for tensor in model.graph.initializer:
        facts[tensor.name] = TensorFacts([int(d) for d in tensor.dims], dtype_name(tensor.data_type))
    known = _input_dim_names(model.graph)
    inferred = _inferred_graph(model, known)
    for value in [*inferred.input, *inferred.value_info, *inferred.output]:
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type" or (value.name in facts and facts[value.name].shape):
            continue
        tensor = value.type.tensor_type
        shape = _dims(tensor.shape, known) if tensor.HasField("shape") else []
        facts[value.name] = TensorFacts(shape, dtype_name(tensor.elem_type))
    return facts


def _inferred_graph(model: onnx.ModelProto, known: set[str]) -> onnx.GraphProto:
    """The graph with every tensor's shape that inference can work out.

    ONNX's own inference loses the input dimensions at the first reshape computed from a
    shape (the TorchScript exporter's files: ``unk__3`` from the embeddings on); where it
    leaves such dimensions, onnxruntime's symbolic inference, which carries ``batch`` and
    ``sequence`` through shape arithmetic, is asked too, and the one knowing more is used.
    """
    import onnx

    light = _light_copy(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(light, strict_mode=False, data_prop=True).graph
    except (onnx.shape_inference.InferenceError, ValueError, RuntimeError):
        return model.graph  # what the file records is still worth showing
    unknown = _unknown_dims(inferred, known)
    if not unknown:
        return inferred
    symbolic = _symbolic_inference(light)
    return symbolic if symbolic is not None and _unknown_dims(symbolic, known) < unknown else inferred


def _input_dim_names(graph: onnx.GraphProto) -> set[str]:
    return {dim.dim_param for value in graph.input for dim in value.type.tensor_type.shape.dim if dim.dim_param}


def _unknown_dims(graph: onnx.GraphProto, known: set[str]) -> int:
    """How many dimensions of the graph's tensors are neither numbers nor the inputs' named dimensions."""
    return sum(
        1
        for value in [*graph.value_info, *graph.output]
        for dim in value.type.tensor_type.shape.dim
        if not dim.HasField("dim_value") and dim.dim_param not in known
    )


def _symbolic_inference(model: onnx.ModelProto) -> onnx.GraphProto | None:
    """onnxruntime's symbolic shape inference of ``model``, or None where it fails (any way: it is a tool)."""
    import logging

    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    except ImportError:
        return None
    quiet = logging.getLogger("onnxruntime.tools.symbolic_shape_infer")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        found = SymbolicShapeInference.infer_shapes(model, auto_merge=True, guess_output_rank=False, verbose=0)
    except Exception:
        return None
    finally:
        quiet.setLevel(level)
    return found.graph if found is not None else None


def _light_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with large initializers reduced to their shapes, for shape inference.

    Shape inference needs the values of small constants (the targets of Reshape) but
    never those of weights; leaving them out keeps a large model's memory use small.
    """
    import onnx

    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    graph = light.graph
    graph.node.extend(model.graph.node)
    graph.input.extend(model.graph.input)
    graph.output.extend(model.graph.output)
    graph.value_info.extend(model.graph.value_info)
    for tensor in model.graph.initializer:
        if _numel(tensor) <= _SMALL_TENSOR and tensor.data_location != onnx.TensorProto.EXTERNAL:
            graph.initializer.append(tensor)
        else:
            graph.initializer.append(onnx.TensorProto(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims))
    return light


def _numel(tensor: Any) -> int:
    count = 1
    for dim in tensor.dims:
        count *= int(dim)
    return count


def parameter_initializers(model: onnx.ModelProto) -> dict[str, Any]:
    """Initializers that are parameters (rule in the module docstring), in file order."""
    not_parameters = _declared_non_parameters(model)
    return {
        t.name: t
        for t in model.graph.initializer
        if dtype_name(t.data_type) in _FLOAT_TYPES and len(t.dims) >= 1 and t.name not in not_parameters
    }


def _declared_non_parameters(model: onnx.ModelProto) -> set[str]:
    """Buffers and constants named by the torch.export graph signature stored in the file."""
    signature = next((p.value for p in model.graph.metadata_props if p.key == GRAPH_SIGNATURE_KEY), "")
    names = set()
    for line in signature.splitlines():
        match = _SIGNATURE_LINE.match(line)
        if match and match.group(1) != "PARAMETER":
            names.add(match.group(2))
    return names


def _constant_outputs(nodes: Iterable[Any]) -> set[str]:
    return {o for n in nodes if n.op_type == "Constant" and n.domain in ("", "ai.onnx") for o in n.output}


def _node_inputs(node: Any) -> Iterator[str]:
    """A node's inputs, including tensors its subgraphs (If, Loop, Scan) read from outside."""
    yield from (name for name in node.input if name)
    for attribute in node.attribute:
        for subgraph in [attribute.g, *attribute.graphs] if attribute.HasField("g") else attribute.graphs:
            for inner in subgraph.node:
                yield from _node_inputs(inner)


def _unique(graph: nx.DiGraph, name: str) -> str:
    candidate, index = name, 1
    while candidate in graph:
        candidate = f"{name}:{index}"
        index += 1
    return candidate


def _io_attrs(kind: str, facts: TensorFacts | None, order: int) -> dict[str, Any]:
    facts = facts or TensorFacts([], "")
    return g.io_attributes(kind, facts.shape, facts.dtype, order)


# --- modules and parameter rows ---------------------------------------------------------------------


def module_table(
    types: dict[str, str], params: dict[str, Any], first_reader: dict[str, str], meta: dict[str, str]
) -> dict[str, dict[str, str]]:
    """Every module path (ancestors included) → ``{"type": ..., "sizes": ...}``."""
    paths = set(types) | set(first_reader.values())
    paths |= {name.rsplit(".", 1)[0] for name in params if "." in name and _MODULE_PATH.match(name)}
    every = {""}
    for path in paths:
        parts = path.split(".") if path else []
        every |= {".".join(parts[: i + 1]) for i in range(len(parts))}
    children: dict[str, list[str]] = defaultdict(list)
    for path in every:
        if path:
            children[path.rsplit(".", 1)[0] if "." in path else ""].append(path)
    config = _json_map(meta, "config", "count")
    tied = _json_map(meta, "tied_parameters", "name")
    table: dict[str, dict[str, str]] = {}
    for path in sorted(every, key=_path_key):
        kind = types.get(path, "")
        kids = children[path]
        if not kind and kids and all(k.rsplit(".", 1)[-1].isdigit() for k in kids):
            kind = "ModuleList"  # only list containers have numbered children
        entry = {"type": kind}
        name = f"{path}.weight" if path else "weight"
        weight = params.get(tied.get(name, name))
        sizes = _sizes(kind, [int(d) for d in weight.dims] if weight is not None else [], len(kids), config)
        if sizes:
            entry["sizes"] = sizes
        table[path] = entry
    if meta.get("model_class"):
        table[""]["type"] = meta["model_class"]
    return table


def _path_key(path: str) -> list[tuple[int, int | str]]:
    """Sort module paths as PyTorch lists them: numbered children in numeric order."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in path.split(".")] if path else []


def _sizes(kind: str, dims: list[int], children: int, config: dict[str, Any]) -> str:
    """The key sizes of a module from its weight's shape, as ``describe_module`` in tracing gives them."""
    if kind == "Linear" and len(dims) == 2:
        return f"{dims[1]} → {dims[0]}"
    if kind == "Embedding" and len(dims) == 2:
        return f"{dims[0]} × {dims[1]}"
    if kind == "LayerNorm" and dims:
        return " × ".join(str(d) for d in dims)
    if kind in ("ModuleList", "ModuleDict"):
        return str(children)
    heads, hidden = config.get("heads"), config.get("hidden")
    if kind.endswith("SelfAttention") and isinstance(heads, int) and isinstance(hidden, int) and heads:
        return f"{heads} heads × {hidden // heads}"
    return ""


def parameter_rows(
    params: dict[str, Any], modules: dict[str, dict[str, str]], first_reader: dict[str, str]
) -> list[dict[str, Any]]:
    """One row per parameter; its module from its PyTorch name, else from the node that reads it."""
    rows = []
    for name, tensor in params.items():
        owner = name.rsplit(".", 1)[0] if "." in name else ""
        if owner not in modules or not owner:
            owner = first_reader.get(name, "")
        rows.append(
            {
                "name": name,
                "shape": [int(d) for d in tensor.dims],
                "numel": _numel(tensor),
                "trainable": True,
                "dtype": dtype_name(tensor.data_type),
                "module": owner,
            }
        )
    return rows


def _graph_attributes(
    model: onnx.ModelProto,
    meta: dict[str, str],
    name: str,
    modules: dict[str, dict[str, str]],
    rows: list[dict[str, Any]],
    types: dict[str, str],
) -> dict[str, Any]:
    import onnx

    from bertgraph.version import __version__

    producer = f"{model.producer_name} {model.producer_version}".strip()
    model_class = meta.get("model_class") or types.get("") or model.graph.name or "ONNX model"
    return {
        g.G_NAME: meta.get("model") or name or model.graph.name,
        g.G_MODEL_CLASS: model_class,
        g.G_HEAD: meta.get("head", ""),
        g.G_SOURCE: "onnx",
        **_family_attributes(meta, modules),
        g.G_CONFIG: _json_map(meta, "config", "count"),
        g.G_EXAMPLE: _json_map(meta, "example", "size"),
        g.G_MODULES: modules,
        g.G_PARAMETERS: rows,
        g.G_TIED: _json_map(meta, "tied_parameters", "name"),
        g.G_WEIGHTS: meta.get("weights", "onnx"),
        g.G_VERSIONS: {"bertgraph": __version__, "onnx": onnx.__version__, "producer": producer},
    }


def _family_attributes(meta: dict[str, str], modules: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Family, structure, backbone and stacks as bertgraph recorded them, with each module's role.

    Files of other producers (and of bertgraph before it recorded families) give none of
    these; their backbone is read off the module paths as BERT's (``bert``) or none.
    """
    from bertgraph.model.families import family_of
    from bertgraph.model.families.record import DECODER, ENCODER

    backbone = meta.get("backbone")
    if backbone is None or backbone not in modules:
        backbone = "bert" if any(p == "bert" or p.startswith("bert.") for p in modules) else ""
    found: dict[str, Any] = {g.G_BACKBONE: backbone}
    family = family_of(meta.get("model_type", ""))
    if family is None or meta.get("family") != family.name:
        return found
    stacks = _json_map(meta, "stacks", "name")
    found.update(
        {
            g.G_FAMILY: family.name,
            g.G_MODEL_TYPE: meta["model_type"],
            g.G_STRUCTURE: family.structure,
            g.G_STACKS: {path: kind for path, kind in stacks.items() if path in modules and kind in (ENCODER, DECODER)},
        }
    )
    for path, role in family.roles_of(list(modules), backbone).items():
        modules[path][g.M_ROLE] = role
    return found
