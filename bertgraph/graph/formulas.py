"""One formula per op: the FLOPs of a call, from the shapes of its arguments and output.

A formula takes a :class:`Call` — the shapes of the op's tensor arguments in argument
order (parameters included), the output shape and dtype, each dimension a
:class:`~bertgraph.graph.poly.Poly` — and returns :class:`Flops`, two polynomials kept apart:

**matmul FLOPs** count 2 per multiply-add of the matrix products (``linear``, ``matmul``,
``mm``/``addmm``/``bmm``/``baddbmm``, scaled dot-product attention's QKᵀ and AV, a mixture of
experts' grouped products (the rows each expert is routed, so the active experts' FLOPs),
convolutions), exactly as :class:`torch.utils.flop_counter.FlopCounterMode` counts them:
biases, scaling and masking are not matmul FLOPs. One deliberate difference: a
matrix–vector or vector–vector ``matmul`` counts 2·n·k here, where FlopCounterMode has no
formula for ``mv``/``dot`` and counts 0.

**other FLOPs** follow one per-element rule (output elements unless noted):

=============================================================  ==========================
floating-point arithmetic, math functions, activations          1 per element
(add, sub, mul, div, neg, pow, sqrt, rsqrt, exp, log, sin, cos,
tanh, erf, sigmoid, GELU, ReLU, SiLU, abs, clamp, min/max, …),
a bias added by linear/addmm/baddbmm/convolution, cumsum
softmax, log-softmax                                            3 per element
layer norm                                                      3 per element to normalise,
                                                                +1 for a weight, +1 for a
                                                                bias (5 with both)
group, batch, instance norm                                     5 per element (4 without
                                                                a weight)
RMS norm (``aten.rms_norm``)                                    4 per element (3 without)
mean, sum                                                       1 per *input* element
scaled dot-product attention (besides QKᵀ and AV)               per score B·H·Sq·Sk: 3
                                                                softmax + 1 scale + 1 with
                                                                a mask tensor
integer and boolean arithmetic (position ids, masks),           0
comparisons, logic, selection (where, masked_fill), indexing,
gather, embedding lookups, data movement (views, copies, cat),
tensor creation, eval-mode dropout
=============================================================  ==========================

What the families add falls under the same rule, op by op, as torch.export records it:
RMS norm written out (LLaMA, T5: square, mean, add ε, rsqrt, normalise, weight = 4 per
element + 2 per row); rotary tables (cos, sin, scaling: 1 per element) and ``rotate_half``
(slices and ``cat`` 0, ``neg`` 1, then a multiply and add); ``repeat_kv`` (``expand`` and
``reshape``: 0, and attention counts every query head); relative-position buckets of T5
and MPNet (integer arithmetic 0; ``log`` and the float divisions and scale 1 per element);
DeBERTa's disentangled attention (its ``bmm`` against the relative embeddings counted as
matrix products, ``gather`` 0); ModernBERT's sliding-window mask (boolean and integer: 0)
and GeGLU (``chunk`` 0, GELU and the product 1 each); cross-attention with queries of the
decoder's length and keys of the encoder's.

The per-element weights follow common practice: softmax 3 (exp, sum, divide) as in
Hoffmann et al. 2022, appendix F; layer norm 5 (mean, subtract, square-and-sum, normalise,
scale and shift) as fvcore and DeepSpeed's profiler count it; activations 1, as ptflops
and DeepSpeed do. With this rule, eager attention (matmul, scale, mask add, softmax,
matmul) and fused scaled dot-product attention cost the same.

An op whose key (``aten.linear``, ``onnx::MatMul``) has no formula is *unsupported*:
the cost pass lists it and never counts it as zero in silence. Adding an op is adding
one function with :func:`formula`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

from bertgraph.graph.poly import Poly, product

Shape = tuple[Poly, ...]

FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"})


class Call(NamedTuple):
    """What a formula sees of one op call."""

    inputs: list[Shape]  # tensor arguments in argument order
    out: Shape
    dtype: str  # of the output


class Flops(NamedTuple):
    matmul: Poly
    other: Poly


Formula = Callable[[Call], Flops]
FORMULAS: dict[str, Formula] = {}
# The ops whose formula counts matrix products: a graph where one of them has no cost undercounts.
MATRIX_PRODUCTS = frozenset(
    {
        "aten.linear",
        "aten.matmul",
        "aten.mm",
        "aten.addmm",
        "aten.bmm",
        "aten.baddbmm",
        "aten._grouped_mm",
        "transformers.grouped_mm_fallback",
        "aten.scaled_dot_product_attention",
        "aten.conv1d",
        "aten.conv2d",
        "aten.conv3d",
        "aten.einsum",
        "onnx::MatMul",
        "onnx::Gemm",
        "onnx::Einsum",
        "onnx::Conv",
    }
)

ZERO = Poly()


Rule = TypeVar("Rule")


def registrar(table: dict[str, Rule], what: str) -> Callable[..., Callable[[Rule], Rule]]:
    """A decorator factory that files a function under op keys in ``table``, each key once."""

    def keys_of(*keys: str) -> Callable[[Rule], Rule]:
        def register(function: Rule) -> Rule:
            for key in keys:
                if key in table:
                    raise ValueError(f"{key} already has {what}")
                table[key] = function
            return function

        return register

    return keys_of


# Register a function as the formula of the op keys (``aten.add``, ``onnx::Add``).
formula = registrar(FORMULAS, "a formula")


def op_key(target: str) -> str:
    """The registry key of an op's full name: the overload is dropped.

    >>> op_key("aten.linear.default"), op_key("aten.add_.Tensor"), op_key("onnx::MatMul")
    ('aten.linear', 'aten.add_', 'onnx::MatMul')
    """
    if "::" in target:
        return target
    parts = target.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else target


def numel(shape: Sequence[Poly]) -> Poly:
    return product(shape)


def _is_float(call: Call) -> bool:
    return call.dtype in FLOAT_DTYPES


# --- matrix products ------------------------------------------------------------------------


def _broadcast(a: Sequence[Poly], b: Sequence[Poly]) -> list[Poly]:
    """Broadcast two batch shapes: a dimension of 1 takes the other's size."""
    length = max(len(a), len(b))
    a = [Poly.const(1)] * (length - len(a)) + list(a)
    b = [Poly.const(1)] * (length - len(b)) + list(b)
    return [y if x == 1 else x for x, y in zip(a, b)]


def matmul_flops(a: Sequence[Poly], b: Sequence[Poly]) -> Poly:
    """``torch.matmul(a, b)`` with numpy's rules; 2 per multiply-add."""
    if len(a) == 1 and len(b) == 1:
        return 2 * a[0]
    if len(b) == 1:
        return 2 * numel(a)
    if len(a) == 1:
        return 2 * numel(b[:-2]) * a[0] * b[-1]
    n, k, m = a[-2], a[-1], b[-1]
    return 2 * numel(_broadcast(a[:-2], b[:-2])) * n * k * m


@formula("aten.linear")
def _linear(call: Call) -> Flops:
    x, weight = call.inputs[0], call.inputs[1]
    rows = numel(x[:-1])
    bias = numel(call.out) if len(call.inputs) > 2 else ZERO
    return Flops(2 * rows * weight[0] * weight[1], bias)


@formula("aten.matmul", "onnx::MatMul")
def _matmul(call: Call) -> Flops:
    return Flops(matmul_flops(call.inputs[0], call.inputs[1]), ZERO)


@formula("aten.mm")
def _mm(call: Call) -> Flops:
    a, b = call.inputs[0], call.inputs[1]
    return Flops(2 * a[0] * a[1] * b[1], ZERO)


@formula("aten.addmm")
def _addmm(call: Call) -> Flops:
    a, b = call.inputs[1], call.inputs[2]
    return Flops(2 * a[0] * a[1] * b[1], numel(call.out))


@formula("aten.bmm")
def _bmm(call: Call) -> Flops:
    a, b = call.inputs[0], call.inputs[1]
    return Flops(2 * a[0] * a[1] * a[2] * b[2], ZERO)


@formula("aten._grouped_mm", "transformers.grouped_mm_fallback")
def _grouped_mm(call: Call) -> Flops:
    """A mixture of experts' grouped product: each routed row (a token, once per expert it is sent to)
    through its own expert's matrix, so 2 per multiply-add of the experts a token runs, not of all."""
    x, out = call.inputs[0], call.out
    return Flops(2 * numel(x[:-1]) * x[-1] * out[-1], ZERO)


@formula("aten.baddbmm")
def _baddbmm(call: Call) -> Flops:
    a, b = call.inputs[1], call.inputs[2]
    return Flops(2 * a[0] * a[1] * a[2] * b[2], numel(call.out))


@formula("aten.scaled_dot_product_attention")
def _attention(call: Call) -> Flops:
    q, k, v = call.inputs[0], call.inputs[1], call.inputs[2]
    scores = numel(q[:-2]) * q[-2] * k[-2]
    per_score = 3 + 1 + (1 if len(call.inputs) > 3 else 0)  # softmax, scale, mask
    return Flops(2 * scores * q[-1] + 2 * scores * v[-1], per_score * scores)


@formula("aten.conv1d", "aten.conv2d", "aten.conv3d", "onnx::Conv")  # ONNX Conv: X, W, B in the same layout
def _convolution(call: Call) -> Flops:
    # weight [C_out, C_in / groups, *kernel]: each output element is C_in/groups · prod(kernel) multiply-adds.
    weight = call.inputs[1]
    bias = numel(call.out) if len(call.inputs) > 2 else ZERO
    return Flops(2 * numel(call.out) * numel(weight[1:]), bias)


@formula("onnx::Gemm")
def _gemm(call: Call) -> Flops:
    # Y [M, N] = A [M, K] (or [K, M] when transposed) · B, + C.
    a, out = call.inputs[0], call.out
    inner = a[1] if a[0] == out[0] else a[0]
    bias = numel(out) if len(call.inputs) > 2 else ZERO
    return Flops(2 * out[0] * out[1] * inner, bias)


# --- per-element rule -------------------------------------------------------------------------


def _per_element(weight: int) -> Formula:
    def count(call: Call) -> Flops:
        return Flops(ZERO, weight * numel(call.out) if _is_float(call) else ZERO)

    return count


def _per_input_element(call: Call) -> Flops:
    return Flops(ZERO, numel(call.inputs[0]) if _is_float(call) else ZERO)


def _normalisation(with_weight: int, without: int) -> Formula:
    def count(call: Call) -> Flops:
        weight = with_weight if len(call.inputs) > 1 else without
        return Flops(ZERO, weight * numel(call.out))

    return count


def _affine_normalisation(normalise: int) -> Formula:
    """``normalise`` per element, plus one per affine tensor present (weight, bias): a
    bias-free LayerNorm (ModernBERT) does one less than BERT's."""

    def count(call: Call) -> Flops:
        return Flops(ZERO, (normalise + min(len(call.inputs) - 1, 2)) * numel(call.out))

    return count


def _zero(call: Call) -> Flops:
    return Flops(ZERO, ZERO)


def _names(text: str) -> list[str]:
    return text.split()


_ATEN_ELEMENTWISE = _names(
    "add add_ sub sub_ rsub mul mul_ div div_ neg pow sqrt rsqrt exp exp2 expm1 log log1p log2 sin cos tan "
    "tanh erf erfc sigmoid reciprocal square abs sign ceil floor round trunc clamp clamp_ clamp_min clamp_max "
    "min max minimum maximum fmod remainder gelu gelu_ relu relu_ relu6 silu silu_ mish softplus elu "
    "leaky_relu hardtanh hardswish hardsigmoid logsigmoid cumsum diff lerp addcmul addcdiv "
)
_ATEN_SOFTMAX = ("softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax")
_ATEN_REDUCTIONS = ("mean", "sum")
_ATEN_FREE = _names(
    # views and layout
    "view _unsafe_view reshape transpose permute expand expand_as unsqueeze squeeze select slice narrow t "
    "alias detach detach_ flatten unflatten split split_with_sizes chunk unbind as_strided movedim "
    # copies and data movement
    "contiguous clone to _to_copy type_as cat concat stack repeat repeat_interleave tile roll flip pad "
    "constant_pad_nd copy_ lift_fresh_copy tril triu "
    # indexing and lookup
    "index index_select gather scatter embedding masked_select take nonzero unique unique_consecutive "
    "_unique2 bincount searchsorted bucketize "
    # selection, comparison, logic
    "where masked_fill masked_fill_ eq ne lt le gt ge logical_and logical_or logical_not logical_xor __and__ "
    "__or__ __xor__ __invert__ bitwise_and bitwise_or bitwise_not bitwise_xor isnan isinf any all argmax "
    "argmin topk sort "
    # creation
    "arange zeros ones full empty new_ones new_zeros new_full new_empty zeros_like ones_like full_like "
    "empty_like fill fill_ scalar_tensor "
    # eval-mode dropout returns its input
    "dropout feature_dropout alpha_dropout feature_alpha_dropout native_dropout "
)

for _name in _ATEN_ELEMENTWISE:
    formula(f"aten.{_name}")(_per_element(1))
for _name in _ATEN_SOFTMAX:
    formula(f"aten.{_name}")(_per_element(3))
for _name in _ATEN_REDUCTIONS:
    formula(f"aten.{_name}")(_per_input_element)
for _name in _ATEN_FREE:
    formula(f"aten.{_name}")(_zero)
formula("aten.layer_norm")(_affine_normalisation(3))
formula("aten.group_norm", "aten.batch_norm", "aten.instance_norm")(_normalisation(5, 4))
formula("aten.rms_norm")(_normalisation(4, 3))

_ONNX_ELEMENTWISE = _names(
    "Add Sub Mul Div Neg Pow Sqrt Reciprocal Exp Log Sin Cos Tanh Erf Sigmoid Relu Gelu FastGelu Elu "
    "LeakyRelu Softplus Abs Sign Ceil Floor Round Clip Min Max Mod CumSum HardSigmoid HardSwish Mish "
)
_ONNX_FREE = _names(
    "Reshape Transpose Unsqueeze Squeeze Flatten Identity Cast CastLike Expand Concat Slice Split Gather "
    "GatherElements GatherND ScatterND ScatterElements Tile Pad Where Equal Less LessOrEqual Greater "
    "GreaterOrEqual Not And Or Xor IsNaN IsInf Shape Size ConstantOfShape Range Trilu Dropout ArgMax ArgMin "
    "TopK NonZero OneHot "
)
for _name in _ONNX_ELEMENTWISE:
    formula(f"onnx::{_name}")(_per_element(1))
for _name in _ONNX_FREE:
    formula(f"onnx::{_name}")(_zero)
formula("onnx::Softmax", "onnx::LogSoftmax")(_per_element(3))
formula("onnx::ReduceMean", "onnx::ReduceSum")(_per_input_element)
formula("onnx::LayerNormalization")(_affine_normalisation(3))
formula("onnx::SimplifiedLayerNormalization", "onnx::RMSNormalization")(_normalisation(4, 3))
