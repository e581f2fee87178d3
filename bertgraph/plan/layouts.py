"""The tensors each quantization library stores for one linear layer: names, dtypes, shapes, bytes.

One function per library and format, each the library's own allocation written as arithmetic on
the layer's ``in_features`` and ``out_features`` (the file that allocates them is named above each).
A tensor is a :class:`~bertgraph.model.stored.StoredTensor` with the part
(:func:`~bertgraph.model.stored.part_of`) a checkpoint's header would give it, so a planned model and
a stored one are summed by the same rules. Dtypes are safetensors' names (``I32``, ``F16``, ``U8``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import NamedTuple

from bertgraph.errors import BertgraphError
from bertgraph.model.checkpoint import DTYPE_BITS
from bertgraph.model.stored import DTYPE_NAMES, StoredTensor, part_of

# torch's dtype names → safetensors' (``bfloat16`` → ``BF16``).
SAFETENSORS_NAMES = {torch_name: name for name, torch_name in DTYPE_NAMES.items()}


class PlanError(BertgraphError):
    """A deployment that cannot be planned as asked (a layout a library does not allow, a GPU not known)."""


class Linear(NamedTuple):
    """A linear layer as the graph's tables give it: its path, sizes and whether it has a bias."""

    path: str
    in_features: int
    out_features: int
    bias: bool


def tensor(name: str, dtype: str, shape: Sequence[int]) -> StoredTensor:
    """A planned tensor: its bytes as safetensors stores ``dtype`` (``F4`` packs two to a byte)."""
    elements = math.prod(shape)
    return StoredTensor(name, dtype, tuple(shape), -(-elements * DTYPE_BITS[dtype] // 8), "", part_of(name, dtype))


def safetensors_dtype(torch_name: str) -> str:
    """``bfloat16`` → ``BF16``."""
    try:
        return SAFETENSORS_NAMES[torch_name]
    except KeyError:
        raise PlanError(f"no safetensors dtype is named for {torch_name!r}") from None


def _bias(layer: Linear, dtype: str) -> list[StoredTensor]:
    return [tensor(f"{layer.path}.bias", dtype, (layer.out_features,))] if layer.bias else []


# --- GPTQ ----------------------------------------------------------------------------------------
# AutoGPTQ auto_gptq/nn_modules/qlinear/qlinear_cuda.py (QuantLinear.__init__) and GPTQModel
# gptqmodel/nn_modules/qlinear/__init__.py (GPTQQuantLinear._register_gptq_buffers), which transformers
# loads through optimum/gptq/quantizer.py: qweight int32 [in // 32 · bits, out], qzeros int32
# [⌈in / g⌉, out // 32 · bits], scales float16 [⌈in / g⌉, out], g_idx int32 [in] — registered whatever
# desc_act says (act-order changes its values, not its presence) — and a float16 bias.


def gptq(layer: Linear, bits: int, group_size: int) -> list[StoredTensor]:
    if bits not in (2, 3, 4, 8):
        raise PlanError(f"GPTQ stores 2, 3, 4 or 8 bits, not {bits}")
    group = layer.in_features if group_size == -1 else group_size
    groups = -(-layer.in_features // group)
    return [
        tensor(f"{layer.path}.qweight", "I32", (layer.in_features // 32 * bits, layer.out_features)),
        tensor(f"{layer.path}.qzeros", "I32", (groups, layer.out_features // 32 * bits)),
        tensor(f"{layer.path}.scales", "F16", (groups, layer.out_features)),
        tensor(f"{layer.path}.g_idx", "I32", (layer.in_features,)),
        *_bias(layer, "F16"),
    ]


# --- AWQ (GEMM) -----------------------------------------------------------------------------------
# AutoAWQ awq/modules/linear/gemm.py (WQLinear_GEMM) and GPTQModel gptqmodel/nn_modules/qlinear/__init__.py
# (AWQuantLinear, register_buffers), which transformers/integrations/awq.py builds: qweight int32
# [in, out // (32 / bits)], qzeros int32 [in // g, out // (32 / bits)], scales float16 [in // g, out],
# a float16 bias; no group index.


def awq(layer: Linear, bits: int, group_size: int) -> list[StoredTensor]:
    if bits != 4:
        raise PlanError(f"AWQ's GEMM layout stores 4 bits, not {bits}")
    group = layer.in_features if group_size == -1 else group_size
    if layer.in_features % group:
        raise PlanError(
            f"{layer.path}: AWQ needs in_features ({layer.in_features}) divisible by the group size ({group}); "
            "choose another --group-size"
        )
    packed = layer.out_features // (32 // bits)
    return [
        tensor(f"{layer.path}.qweight", "I32", (layer.in_features, packed)),
        tensor(f"{layer.path}.qzeros", "I32", (layer.in_features // group, packed)),
        tensor(f"{layer.path}.scales", "F16", (layer.in_features // group, layer.out_features)),
        *_bias(layer, "F16"),
    ]


# --- bitsandbytes ---------------------------------------------------------------------------------
# 4-bit: bitsandbytes/_ops.py (quantize_4bit's fake: ⌈n/2⌉ bytes as [(n + 1) // (2 · storage size), 1]
# and float32 absmax per block of 64), bitsandbytes/functional.py (QuantState.as_dict(packed=True):
# quant_map float32 [16]; with double quant the absmax as uint8 plus nested_absmax float32 per 256 of
# them and the nested quant map float32 [256]; the rest packed as JSON into a uint8 tensor
# quant_state.bitsandbytes__<type> by bitsandbytes/utils.py pack_dict_to_tensor), saved under
# ``weight.`` by bitsandbytes/nn/modules.py (Linear4bit._save_to_state_dict). 8-bit: Linear8bitLt
# saves weight int8 [out, in], SCB float32 [out] and weight_format uint8 [] (0: row-major).
BNB_BLOCK = 64  # transformers' Linear4bit keeps bitsandbytes' default blocksize
BNB_NESTED_BLOCK = 256
# The quant-state JSON prints the nested offset (a float32 mean, as Python prints the double): its digits
# are in no config, so a typical 19-character one stands in (a few bytes a layer at most; headers are exact).
NESTED_OFFSET = 0.02812088280916214


def quant_state_json(
    shape: tuple[int, int], quant_type: str, dtype: str, nested: bool, offset: float = NESTED_OFFSET
) -> bytes:
    """The JSON bitsandbytes packs beside a 4-bit weight (``dtype``: the weight's float dtype before quantizing)."""
    state: dict[str, object] = {"quant_type": quant_type, "blocksize": BNB_BLOCK, "dtype": dtype, "shape": list(shape)}
    if nested:
        state |= {"nested_blocksize": BNB_NESTED_BLOCK, "nested_dtype": "float32", "nested_offset": offset}
    return json.dumps(state).encode()


def bnb_4bit(layer: Linear, quant_type: str, double_quant: bool, storage: str, float_dtype: str) -> list[StoredTensor]:
    if quant_type not in ("nf4", "fp4"):
        raise PlanError(f"bitsandbytes stores 4-bit weights as nf4 or fp4, not {quant_type!r}")
    n = layer.in_features * layer.out_features
    blocks = -(-n // BNB_BLOCK)
    storage_bytes = DTYPE_BITS[storage] // 8
    weight = f"{layer.path}.weight"
    found = [tensor(weight, storage, ((n + 1) // (storage_bytes * 2), 1))]
    if double_quant:
        found += [
            tensor(f"{weight}.absmax", "U8", (blocks,)),
            tensor(f"{weight}.nested_absmax", "F32", (-(-blocks // BNB_NESTED_BLOCK),)),
            tensor(f"{weight}.nested_quant_map", "F32", (256,)),
        ]
    else:
        found.append(tensor(f"{weight}.absmax", "F32", (blocks,)))
    state = quant_state_json((layer.out_features, layer.in_features), quant_type, float_dtype, double_quant)
    found += [
        tensor(f"{weight}.quant_map", "F32", (16,)),
        tensor(f"{weight}.quant_state.bitsandbytes__{quant_type}", "U8", (len(state),)),
    ]
    return found + _bias(layer, safetensors_dtype(float_dtype))


def bnb_8bit(layer: Linear, float_dtype: str) -> list[StoredTensor]:
    return [
        tensor(f"{layer.path}.weight", "I8", (layer.out_features, layer.in_features)),
        tensor(f"{layer.path}.SCB", "F32", (layer.out_features,)),
        tensor(f"{layer.path}.weight_format", "U8", ()),
        *_bias(layer, safetensors_dtype(float_dtype)),
    ]


# --- FP8, fine-grained ----------------------------------------------------------------------------
# transformers/integrations/finegrained_fp8.py (FP8Linear.__init__): weight float8_e4m3fn [out, in];
# weight_scale_inv float32 [⌈out / b₀⌉, ⌈in / b₁⌉] for weight_block_size [b₀, b₁] (a scalar without one;
# float8_e8m0 with scale_fmt "ue8m0"); activation_scale float32 [] when activation_scheme is "static".


def fp8(
    layer: Linear, block: Sequence[int] | None, static_activations: bool, ue8m0: bool, float_dtype: str
) -> list[StoredTensor]:
    shape = () if block is None else (-(-layer.out_features // int(block[0])), -(-layer.in_features // int(block[1])))
    found = [
        tensor(f"{layer.path}.weight", "F8_E4M3", (layer.out_features, layer.in_features)),
        tensor(f"{layer.path}.weight_scale_inv", "F8_E8M0" if ue8m0 and block else "F32", shape),
    ]
    if static_activations:
        found.append(tensor(f"{layer.path}.activation_scale", "F32", ()))
    return found + _bias(layer, safetensors_dtype(float_dtype))


# --- compressed-tensors ---------------------------------------------------------------------------
# compressed_tensors/quantization/lifecycle/initialize.py (initialize_qparams: the scale's shape per
# strategy — tensor [1], channel [out, 1], group [out, ⌈in / g⌉], block [⌈out / b₀⌉, ⌈in / b₁⌉] — in the
# weight's float dtype, and weight_g_idx int32 [in] for group act-order); compressors/quantized_compressors/
# base.py (zero points dropped when symmetric or packed into the weight's format);
# pack_quantized.py (weight_packed int32 [out, ⌈in / (32 / bits)⌉], weight_shape int64 [2], an asymmetric
# group or channel zero point int32 [⌈out / (32 / bits)⌉, in // g]); naive_quantized.py (int- and
# float-quantized: the weight itself in the quantized dtype, int8 or float8_e4m3fn).
CT_FORMATS = ("pack-quantized", "float-quantized", "int-quantized", "naive-quantized")


def _ct_scale_shape(layer: Linear, args: dict[str, object]) -> tuple[int, ...]:
    strategy = str(args.get("strategy") or "tensor")
    if strategy == "tensor":
        return (1,)
    if strategy == "channel":
        return (layer.out_features, 1)
    if strategy == "group":
        return (layer.out_features, -(-layer.in_features // _int(args, "group_size")))
    if strategy == "block":
        block = args.get("block_structure")
        if not (isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block)):
            raise PlanError(f"compressed-tensors' block strategy needs block_structure [rows, columns], not {block!r}")
        return (-(-layer.out_features // block[0]), -(-layer.in_features // block[1]))
    raise PlanError(f"compressed-tensors' weight strategy {strategy!r} is not one bertgraph lays out")


def _int(args: dict[str, object], key: str) -> int:
    value = args.get(key)
    if not isinstance(value, int) or value < 1:
        raise PlanError(f"compressed-tensors' weights need a whole {key}, not {value!r}")
    return value


def compressed_tensors(
    layer: Linear, weights: dict[str, object], input_activations: dict[str, object] | None, fmt: str, float_dtype: str
) -> list[StoredTensor]:
    bits = _int(weights, "num_bits")
    kind = str(weights.get("type") or "int")
    strategy = str(weights.get("strategy") or "tensor")
    symmetric = bool(weights.get("symmetric", True))
    scale_dtype = safetensors_dtype(float_dtype)
    scale = _ct_scale_shape(layer, weights)
    path = layer.path
    if fmt == "pack-quantized":
        if kind != "int" or bits > 8:
            raise PlanError(f"compressed-tensors packs integer weights of up to 8 bits, not {kind} {bits}")
        per_word = 32 // bits
        found = [
            tensor(f"{path}.weight_packed", "I32", (layer.out_features, -(-layer.in_features // per_word))),
            tensor(f"{path}.weight_shape", "I64", (2,)),
        ]
        if not symmetric and strategy in ("group", "channel"):
            factor = _int(weights, "group_size") if strategy == "group" else layer.in_features
            zeros = (-(-layer.out_features // per_word), layer.in_features // factor)
            found.append(tensor(f"{path}.weight_zero_point", "I32", zeros))
        elif not symmetric:
            found.append(tensor(f"{path}.weight_zero_point", "I8", scale))
    elif fmt in CT_FORMATS:
        stored = "F8_E4M3" if kind == "float" else "I8"
        if bits != 8 and kind == "float":
            raise PlanError(f"compressed-tensors' {fmt} floats are 8-bit, not {bits}")
        found = [tensor(f"{path}.weight", stored, (layer.out_features, layer.in_features))]
        if not symmetric:
            found.append(tensor(f"{path}.weight_zero_point", stored, scale))
    else:
        raise PlanError(f"compressed-tensors' format {fmt!r} is not one bertgraph lays out ({', '.join(CT_FORMATS)})")
    found.insert(1, tensor(f"{path}.weight_scale", scale_dtype, scale))
    if strategy == "group" and weights.get("actorder") == "group":
        found.append(tensor(f"{path}.weight_g_idx", "I32", (layer.in_features,)))
    if input_activations and not input_activations.get("dynamic", False):
        found.append(tensor(f"{path}.input_scale", scale_dtype, (1,)))
    return found + _bias(layer, scale_dtype)
