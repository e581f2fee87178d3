"""Weights as stored: from a checkpoint's headers, a config's ``quantization_config``, or a scheme asked for.

Three sources, in this order of truth:

1. **Headers.** A checkpoint bertgraph read (a local folder's safetensors, a hub id's fetched
   headers) says every tensor's dtype and shape; the graph keeps the sum per dtype and per part
   (:mod:`bertgraph.model.stored`), and that is what a GPU holds.
2. **The config's ``quantization_config``** without headers: the tensors the library stores for
   every linear layer it converts (:mod:`~bertgraph.plan.layouts`), the layers it leaves alone and
   every other parameter in the config's float dtype.
3. **A scheme** (``--weights``): a float dtype for every parameter, or a quantizer's layout —
   ``fp8`` transformers' fine-grained FP8 (128 × 128 blocks), ``int8`` bitsandbytes' LLM.int8()
   (what ``load_in_8bit`` stores: an int8 weight and a float32 scale per row), ``int4`` GPTQ's
   (``--scheme awq``: AWQ's GEMM layout, ``nf4``: bitsandbytes' 4-bit) with ``--group-size``.

Which layers a library converts is its own rule, as the code that converts them reads it:
optimum's GPTQ quantizer takes the ``Linear``/``Conv1D`` layers inside the blocks
(``block_name_to_quantize``, or the first of its block patterns any module has; bertgraph's own
layer stacks where none matches), the others every ``Linear`` but transformers' default skips
(tied weights, the model's last parameter, the output embeddings) and the config's
``modules_to_not_convert`` (bitsandbytes: ``llm_int8_skip_modules`` instead of the defaults;
compressed-tensors: its ``targets`` and ``ignore``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g
from bertgraph.graph.costbase import itemsize
from bertgraph.graph.formulas import FLOAT_DTYPES
from bertgraph.graph.memory import traced_float_dtype
from bertgraph.model.stored import DTYPE_NAMES, PARTS, WEIGHT, StoredTensor
from bertgraph.plan import layouts
from bertgraph.plan.layouts import Linear, PlanError, safetensors_dtype, tensor

FLOAT_SCHEMES = ("float32", "bfloat16", "float16")
SCHEMES = (*FLOAT_SCHEMES, "fp8", "int8", "int4")
INT4_LAYOUTS = ("gptq", "awq", "nf4")
DEFAULT_GROUP = 128
KNOWN_METHODS = ("gptq", "awq", "bitsandbytes", "fp8", "compressed-tensors")
# The dtype a library keeps what it does not quantize in when the config names none: GPTQ's and AWQ's
# kernels take float16 (their scales are float16), the others the bfloat16 checkpoints are published in.
METHOD_FLOAT = {"gptq": "float16", "awq": "float16"}
# optimum/gptq/constants.py: where optimum looks for a model's blocks.
GPTQ_BLOCK_PATTERNS = ("transformer.h", "model.decoder.layers", "gpt_neox.layers", "model.layers")


@dataclass(frozen=True)
class Weights:
    """The weights a deployment holds: bytes in all and per part, and where the numbers come from."""

    scheme: str  # "bfloat16", "gptq (4-bit, group 128)", "int4 (AWQ GEMM, group 128)"
    source: str  # "the checkpoint's safetensors headers", "the config's quantization_config", "--weights int4", …
    bytes: int
    parts: dict[str, int]  # part (model/stored.py's PARTS) → bytes
    float_dtype: str  # what stays unquantized is in it, and what the model computes in
    quantized_layers: int = 0
    kept_layers: tuple[str, ...] = ()  # linear layers the library leaves in float_dtype
    tensors: tuple[StoredTensor, ...] = field(default=(), repr=False)  # planned ones (none for headers)
    notes: tuple[str, ...] = ()


def _summed(tensors: Iterable[StoredTensor]) -> dict[str, int]:
    parts: dict[str, int] = {}
    for found in tensors:
        parts[found.part] = parts.get(found.part, 0) + found.bytes
    return {part: parts[part] for part in PARTS if part in parts}


# --- the layers a library converts ---------------------------------------------------------------


def linear_layers(graph: nx.DiGraph) -> dict[str, tuple[Linear, str]]:
    """Module path → (its sizes, its class: ``Linear`` or ``Conv1D``) for every linear layer whose weight the
    graph counts under its own name (a weight tied to another parameter is that parameter's)."""
    modules = graph.graph.get(g.G_MODULES, {})
    rows = {str(row["name"]): row for row in g.parameter_rows(graph)}
    found = {}
    for path, info in modules.items():
        kind = str(info.get(g.M_TYPE, ""))
        weight = rows.get(f"{path}.weight")
        if kind not in ("Linear", "Conv1D") or weight is None or len(weight["shape"]) != 2:
            continue
        rows_, columns = (int(size) for size in weight["shape"])
        inputs, outputs = (rows_, columns) if kind == "Conv1D" else (columns, rows_)
        found[path] = (Linear(path, inputs, outputs, f"{path}.bias" in rows), kind)
    return found


def should_convert(name: str, patterns: Iterable[str] | None) -> bool:
    """transformers/quantizers/quantizers_utils.py ``should_convert_module``: a pattern skips a module that it
    names up to a module boundary, matches as a regular expression with that boundary, or ends."""
    if patterns is None:
        return True
    boundary = r"(?:(?<=\.)|(?=\.|$))"
    return not any(re.match(rf"(?:{key}){boundary}", name) or name.endswith(key) for key in patterns)


def default_skips(graph: nx.DiGraph) -> list[str]:
    """transformers/quantizers/base.py ``get_keys_to_not_convert``: tied weights (both names), the model's
    last parameter and the output embeddings (here: a head's linear layer as wide as the vocabulary)."""
    names = {str(name) for pair in graph.graph.get(g.G_TIED, {}).items() for name in pair}
    rows = g.parameter_rows(graph)
    if rows:
        names.add(str(rows[-1]["name"]))
    vocab = graph.graph.get(g.G_CONFIG, {}).get("vocab")
    modules = graph.graph.get(g.G_MODULES, {})
    for path, (layer, _) in linear_layers(graph).items():
        if modules.get(path, {}).get(g.M_ROLE) == "head" and layer.out_features == vocab:
            names.add(f"{path}.weight")
    return sorted({name.removesuffix(".weight") for name in names})


def _names(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise PlanError(f"a quantization_config lists module names, not {value!r}")


def _gptq_blocks(graph: nx.DiGraph, config: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """The block prefixes GPTQ quantizes inside, and a note when bertgraph's stacks stand in for optimum's patterns."""
    named = _names(config.get("block_name_to_quantize"))
    if named:
        return [name for item in named for name in item.split(",")], None
    modules = list(graph.graph.get(g.G_MODULES, {}))
    for pattern in GPTQ_BLOCK_PATTERNS:
        if any(pattern in module for module in modules):
            return [pattern], None
    stacks = sorted(graph.graph.get(g.G_STACKS, {}))
    return stacks, (
        f"GPTQ's block patterns match no module here (optimum needs block_name_to_quantize): the layers inside "
        f"{', '.join(stacks) or 'no stack'} are taken as quantized"
    )


def _ct_match(name: str, kind: str, target: str) -> bool:
    """compressed-tensors' target rule: a class name, ``re:`` and a regular expression, or a module's name."""
    if target.startswith("re:"):
        return re.match(target[3:], name) is not None
    return target in (kind, name)


# --- a config's layout -----------------------------------------------------------------------------


def method_of(config: Mapping[str, Any]) -> str:
    method = str(config.get("quant_method") or "")
    if method not in KNOWN_METHODS:
        raise PlanError(
            f"quant_method {method or 'none'!r}: its stored layout is not one bertgraph knows "
            f"({', '.join(KNOWN_METHODS)}); give the checkpoint (its safetensors headers say every tensor) "
            "or plan with --weights"
        )
    return method


def _layouts(graph: nx.DiGraph, config: Mapping[str, Any], float_dtype: str) -> tuple[dict[str, Any], list[str]]:
    """Module path → a function making its stored tensors, for every layer the config's library converts."""
    method = method_of(config)
    notes: list[str] = []
    layers = linear_layers(graph)
    chosen: dict[str, Any] = {}
    if method == "gptq":
        if str(config.get("checkpoint_format", config.get("format")) or "gptq") not in ("gptq", "gptq_v2"):
            raise PlanError("GPTQ's repacked formats (marlin, …) are not laid out by bertgraph; give its checkpoint")
        blocks, note = _gptq_blocks(graph, config)
        notes += [note] if note else []
        # optimum quantizes, inside the blocks, only the layers these lists end with, when it has them
        listed = [name for group in config.get("modules_in_block_to_quantize") or [] for name in _names(group) or []]
        bits, group = int(config.get("bits", 4)), int(config.get("group_size", DEFAULT_GROUP))
        for path, (layer, _) in layers.items():
            inside = any(path.startswith(block) for block in blocks)
            if inside and (not listed or any(path.endswith(name) for name in listed)):
                chosen[path] = lambda layer=layer: layouts.gptq(layer, bits, group)
        return chosen, notes
    if method == "compressed-tensors":
        return _compressed_tensors(graph, config, float_dtype, layers), notes
    exact = {path: layer for path, (layer, kind) in layers.items() if kind == "Linear"}
    if method == "awq":
        if str(config.get("version", config.get("format")) or "gemm").lower() != "gemm":
            raise PlanError("AWQ's layouts other than GEMM are not laid out by bertgraph; give the checkpoint")
        skips = default_skips(graph) + (_names(config.get("modules_to_not_convert")) or [])
        bits, group = int(config.get("bits", config.get("w_bit", 4))), int(config.get("group_size", DEFAULT_GROUP))
        return {
            path: (lambda layer=layer: layouts.awq(layer, bits, group))
            for path, layer in exact.items()
            if should_convert(path, skips)
        }, notes
    if method == "fp8":
        given = _names(config.get("modules_to_not_convert"))
        skips = default_skips(graph) if given is None else given
        block = config.get("weight_block_size", [128, 128])
        static = str(config.get("activation_scheme", "dynamic")) == "static"
        ue8m0 = config.get("scale_fmt") == "ue8m0"
        notes.append("fused experts (a module's [experts, …] tensors) are kept in the float dtype, not FP8's layout")
        return {
            path: (lambda layer=layer: layouts.fp8(layer, block, static, ue8m0, float_dtype))
            for path, layer in exact.items()
            if should_convert(path, skips)
        }, notes
    return _bitsandbytes(graph, config, float_dtype, layers), notes


def _bitsandbytes(
    graph: nx.DiGraph, config: Mapping[str, Any], float_dtype: str, layers: Mapping[str, tuple[Linear, str]]
) -> dict[str, Any]:
    given = _names(config.get("llm_int8_skip_modules"))
    skips = default_skips(graph) if given is None else given
    eight = bool(config.get("load_in_8bit") or config.get("_load_in_8bit"))
    four = bool(config.get("load_in_4bit") or config.get("_load_in_4bit"))
    if eight == four:
        raise PlanError("a bitsandbytes quantization_config loads in 8 bits or in 4 bits: set one of them")
    kind = str(config.get("bnb_4bit_quant_type", "fp4"))
    nested = bool(config.get("bnb_4bit_use_double_quant", False))
    storage = safetensors_dtype(str(config.get("bnb_4bit_quant_storage", "uint8")))
    chosen = {}
    for path, (layer, _) in layers.items():
        if should_convert(path, skips):
            chosen[path] = (
                (lambda layer=layer: layouts.bnb_8bit(layer, float_dtype))
                if eight
                else (lambda layer=layer: layouts.bnb_4bit(layer, kind, nested, storage, float_dtype))
            )
    return chosen


def _compressed_tensors(
    graph: nx.DiGraph, config: Mapping[str, Any], float_dtype: str, layers: Mapping[str, tuple[Linear, str]]
) -> dict[str, Any]:
    ignore = _names(config.get("ignore")) or []
    groups = config.get("config_groups") or {}
    if not isinstance(groups, dict) or not groups:
        raise PlanError("a compressed-tensors quantization_config needs config_groups to lay weights out")
    chosen = {}
    for path, (layer, kind) in layers.items():
        if any(_ct_match(path, kind, target) for target in ignore):
            continue
        for scheme in groups.values():
            targets = _names(scheme.get("targets")) or []
            weights = scheme.get("weights")
            if not isinstance(weights, dict) or not any(_ct_match(path, kind, t) for t in targets):
                continue
            fmt = str(scheme.get("format") or config.get("format") or "naive-quantized")
            inputs = scheme.get("input_activations")
            chosen[path] = lambda layer=layer, weights=weights, inputs=inputs, fmt=fmt: layouts.compressed_tensors(
                layer, weights, inputs if isinstance(inputs, dict) else None, fmt, float_dtype
            )
            break
    return chosen


def planned_tensors(
    graph: nx.DiGraph, config: Mapping[str, Any] | None, float_dtype: str
) -> tuple[list[StoredTensor], list[str], list[str]]:
    """Every tensor a checkpoint of the model stores: the converted layers' layouts, every other parameter in
    ``float_dtype`` (floats) or its own dtype. Returns the tensors, the linear layers kept in float, notes."""
    chosen, notes = _layouts(graph, config, float_dtype) if config is not None else ({}, [])
    made: dict[str, list[StoredTensor]] = {path: make() for path, make in chosen.items()}
    found: list[StoredTensor] = []
    for row in g.parameter_rows(graph):
        name, module = str(row["name"]), str(row["module"])
        if module in made:
            found += made.pop(module)
            continue
        if module in chosen:
            continue  # a converted layer's bias: its layout has it
        dtype = float_dtype if str(row.get("dtype")) in FLOAT_DTYPES else str(row.get("dtype"))
        found.append(tensor(name, safetensors_dtype(dtype), [int(size) for size in row["shape"]]))
    kept = sorted(path for path in linear_layers(graph) if path not in chosen)
    return sorted(found), kept, notes


# --- the three sources ------------------------------------------------------------------------------


def from_checkpoint(graph: nx.DiGraph) -> Weights | None:
    """The weights a checkpoint's headers say (the graph's summary of them), or None without one."""
    found = graph.graph.get(g.G_CHECKPOINT)
    if not isinstance(found, dict):
        return None
    parts = {name: int(part["bytes"]) for name, part in found.get("parts", {}).items()}
    total = int(found["bytes"])
    parts = {WEIGHT: total - sum(parts.values()), **parts} if total > sum(parts.values()) else parts
    floats = [DTYPE_NAMES.get(name, name) for name in found.get("dtypes", {})]
    float_dtype = next((name for name in floats if name in FLOAT_SCHEMES), _config_float(graph, None))
    scheme = str(found.get("quantization") or (floats[0] if floats else "unknown"))
    notes = []
    extra = found.get("compared", {}).get("not_in_model", {})
    if extra.get("tensors"):
        notes.append(
            f"the checkpoint stores {extra['tensors']} tensors this model does not have "
            f"({', '.join(extra['names'])}, …): counted, as the files hold them"
        )
    return Weights(
        scheme,
        "the checkpoint's safetensors headers",
        total,
        {p: parts[p] for p in PARTS if p in parts},
        float_dtype,
        notes=tuple(notes),
    )


def _config_float(graph: nx.DiGraph, method: str | None) -> str:
    """The float dtype the weights are published in: the config's, else the quantizer's (float16 for GPTQ and
    AWQ, bfloat16 for the others), else the dtype the model was traced in (float32 unless ``--dtype``)."""
    stored = graph.graph.get(g.G_STORED_DTYPE)
    if isinstance(stored, str) and stored in FLOAT_SCHEMES:
        return stored
    if method is None:
        return traced_float_dtype(graph)
    return METHOD_FLOAT.get(method, "bfloat16")


def scheme_config(scheme: str, layout: str | None, group_size: int) -> dict[str, Any] | None:
    """The ``quantization_config`` a scheme stands for (None for a float dtype)."""
    if scheme in FLOAT_SCHEMES:
        if layout is not None:
            raise PlanError(f"--scheme applies to --weights int4, not {scheme}")
        return None
    if layout is not None and scheme != "int4":
        raise PlanError(f"--scheme chooses int4's layout ({', '.join(INT4_LAYOUTS)}); --weights {scheme} has one")
    if scheme == "fp8":
        return {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}
    if scheme == "int8":
        return {"quant_method": "bitsandbytes", "load_in_8bit": True}
    if scheme == "int4":
        chosen = layout or "gptq"
        if chosen == "nf4":
            return {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
        if chosen == "awq":
            return {"quant_method": "awq", "bits": 4, "group_size": group_size, "version": "gemm", "zero_point": True}
        return {"quant_method": "gptq", "bits": 4, "group_size": group_size, "desc_act": False, "sym": True}
    raise PlanError(f"--weights takes {', '.join(SCHEMES)}, not {scheme!r}")


def _describe(config: Mapping[str, Any]) -> str:
    method = method_of(config)
    if method in ("gptq", "awq"):
        group = int(config.get("group_size", DEFAULT_GROUP))
        layout = "GEMM, " if method == "awq" else ""
        return f"{method} ({layout}{int(config.get('bits', 4))}-bit, group {'per row' if group == -1 else group})"
    if method == "bitsandbytes":
        if config.get("load_in_8bit") or config.get("_load_in_8bit"):
            return "bitsandbytes (LLM.int8(): int8 weights, a float32 scale per row)"
        nested = ", double quant" if config.get("bnb_4bit_use_double_quant") else ""
        return f"bitsandbytes ({config.get('bnb_4bit_quant_type', 'fp4')}{nested})"
    if method == "fp8":
        block = config.get("weight_block_size", [128, 128])
        return f"fp8 (float8_e4m3fn, {'per tensor' if block is None else '×'.join(map(str, block)) + ' blocks'})"
    return f"compressed-tensors ({config.get('format') or 'per group'})"


def weights_for(
    graph: nx.DiGraph,
    scheme: str | None = None,
    layout: str | None = None,
    group_size: int = DEFAULT_GROUP,
    float_dtype: str | None = None,
) -> Weights:
    """The weights a deployment holds: ``scheme`` (``--weights``) when given, else the checkpoint's headers,
    else the config's ``quantization_config``, else every parameter in the config's float dtype.

    ``float_dtype`` (cost's ``--dtype``) is what stays unquantized and what the model computes in; by
    default the scheme's own float, the config's ``torch_dtype``, or the library's (float16 for GPTQ/AWQ).
    """
    if group_size < 1 and group_size != -1:
        raise PlanError(f"--group-size is a whole number of input channels (or -1: one group), not {group_size}")
    if scheme is None and layout is not None:
        raise PlanError("--scheme chooses the layout of --weights int4; give --weights int4 too")
    if scheme is None:
        stored = from_checkpoint(graph)
        if stored is not None:
            return stored
    asked = scheme_config(scheme, layout, group_size) if scheme is not None else None
    config = asked if scheme is not None else graph.graph.get(g.G_QUANTIZATION_CONFIG)
    if scheme in FLOAT_SCHEMES:
        chosen = str(scheme)
    else:
        chosen = float_dtype or _config_float(graph, method_of(config) if config else None)
    if itemsize(chosen) is None:
        raise PlanError(f"no item size is known for {chosen!r}")
    tensors, kept, notes = planned_tensors(graph, config, chosen)
    if scheme is not None:
        source = f"--weights {scheme}"
    elif config:
        source = "the config's quantization_config"
    else:
        stored = graph.graph.get(g.G_STORED_DTYPE)
        why = "the config's torch_dtype" if stored else "as traced"
        source = f"every parameter in {chosen} ({why})"
    if config is None:
        described = chosen
    elif scheme is not None:
        described = f"{scheme}: {_describe(config)}"
    else:
        described = _describe(config)
    return Weights(
        described,
        source,
        sum(t.bytes for t in tensors),
        _summed(tensors),
        chosen,
        quantized_layers=len(linear_layers(graph)) - len(kept) if config else 0,
        kept_layers=tuple(kept) if config else (),
        tensors=tuple(tensors),
        notes=tuple(notes),
    )
