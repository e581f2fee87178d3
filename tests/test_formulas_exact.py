"""Every formula of the cost registry, at concrete shapes, against what it must count.

Matrix products are compared with :class:`torch.utils.flop_counter.FlopCounterMode` running
the same op on real tensors of those shapes; the per-element rule with the table in
:mod:`bertgraph.graph.formulas` (1, 3 or 5 per element, computed here from the shapes).
Nothing is traced: each check calls one formula in-process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from bertgraph.graph import formulas as f
from bertgraph.graph.poly import Poly


def shape(*sizes: int | str) -> tuple[Poly, ...]:
    return tuple(Poly.of(size) for size in sizes)


def call(key: str, inputs: Sequence[Sequence[int | str]], out: Sequence[int | str], dtype: str = "float32") -> f.Flops:
    return f.FORMULAS[key](f.Call([shape(*s) for s in inputs], shape(*out), dtype))


def counted(function: Callable[..., Any], *shapes: Sequence[int], **kwargs: Any) -> int:
    tensors = [torch.randn(*s) for s in shapes]
    with FlopCounterMode(display=False) as counter:
        function(*tensors, **kwargs)
    return int(counter.get_total_flops())


def value(poly: Poly) -> int:
    found = poly.constant()
    assert found is not None, poly
    return found


def test_op_keys_drop_the_overload_and_keep_onnx_names() -> None:
    assert f.op_key("aten.linear.default") == "aten.linear"
    assert f.op_key("aten.add_.Tensor") == "aten.add_"
    assert f.op_key("aten.mm") == "aten.mm"
    assert f.op_key("onnx::MatMul") == "onnx::MatMul"
    assert f.op_key("com.microsoft::FusedMatMul") == "com.microsoft::FusedMatMul"  # a domain has dots
    assert f.op_key("linear") == "linear"


# (function, argument shapes, formula key, the shapes the graph records as inputs, output shape)
PRODUCTS: list[tuple[Callable[..., Any], list[list[int]], str, list[list[int]], list[int]]] = [
    (torch.nn.functional.linear, [[2, 3, 5], [7, 5]], "aten.linear", [[2, 3, 5], [7, 5]], [2, 3, 7]),
    (torch.nn.functional.linear, [[2, 3, 5], [7, 5], [7]], "aten.linear", [[2, 3, 5], [7, 5], [7]], [2, 3, 7]),
    (torch.mm, [[3, 5], [5, 7]], "aten.mm", [[3, 5], [5, 7]], [3, 7]),
    (torch.addmm, [[7], [3, 5], [5, 7]], "aten.addmm", [[7], [3, 5], [5, 7]], [3, 7]),
    (torch.bmm, [[2, 3, 5], [2, 5, 7]], "aten.bmm", [[2, 3, 5], [2, 5, 7]], [2, 3, 7]),
    (torch.baddbmm, [[2, 3, 7], [2, 3, 5], [2, 5, 7]], "aten.baddbmm", [[2, 3, 7], [2, 3, 5], [2, 5, 7]], [2, 3, 7]),
    (torch.matmul, [[3, 5], [5, 7]], "aten.matmul", [[3, 5], [5, 7]], [3, 7]),
    (torch.matmul, [[4, 1, 3, 5], [6, 5, 7]], "aten.matmul", [[4, 1, 3, 5], [6, 5, 7]], [4, 6, 3, 7]),
    (torch.matmul, [[6, 3, 5], [4, 1, 5, 7]], "aten.matmul", [[6, 3, 5], [4, 1, 5, 7]], [4, 6, 3, 7]),
    (torch.matmul, [[1, 6, 3, 5], [6, 5, 7]], "aten.matmul", [[1, 6, 3, 5], [6, 5, 7]], [1, 6, 3, 7]),
    (torch.matmul, [[2, 6, 3, 5], [5, 7]], "onnx::MatMul", [[2, 6, 3, 5], [5, 7]], [2, 6, 3, 7]),
]


@pytest.mark.parametrize(("function", "shapes", "key", "recorded", "out"), PRODUCTS)
def test_matrix_products_count_what_flop_counter_mode_counts(
    function: Callable[..., Any], shapes: list[list[int]], key: str, recorded: list[list[int]], out: list[int]
) -> None:
    flops = call(key, recorded, out)
    assert value(flops.matmul) == counted(function, *shapes)
    assert key in f.MATRIX_PRODUCTS


def test_biases_of_products_are_other_flops_one_per_output_element() -> None:
    assert value(call("aten.linear", [[2, 3, 5], [7, 5], [7]], [2, 3, 7]).other) == 2 * 3 * 7
    assert call("aten.linear", [[2, 3, 5], [7, 5]], [2, 3, 7]).other == Poly()
    assert value(call("aten.addmm", [[7], [3, 5], [5, 7]], [3, 7]).other) == 21
    assert value(call("aten.baddbmm", [[2, 3, 7], [2, 3, 5], [2, 5, 7]], [2, 3, 7]).other) == 42
    for key in ("aten.mm", "aten.bmm", "aten.matmul"):
        three = [[2, 3, 5], [2, 5, 7]] if key != "aten.mm" else [[3, 5], [5, 7]]
        assert call(key, three, [2, 3, 7]).other == Poly()


def test_vector_products_count_two_per_multiply_add() -> None:
    # FlopCounterMode has no formula for mv and dot; 2 per multiply-add is 2·n·k.
    assert value(call("aten.matmul", [[5], [5]], []).matmul) == 2 * 5
    assert value(call("aten.matmul", [[2, 3, 5], [5]], [2, 3]).matmul) == 2 * 2 * 3 * 5
    assert value(call("aten.matmul", [[3, 5], [5]], [3]).matmul) == 2 * 3 * 5
    assert value(call("aten.matmul", [[5], [4, 5, 7]], [4, 7]).matmul) == 2 * 4 * 5 * 7
    assert value(call("aten.matmul", [[5], [5, 7]], [7]).matmul) == 2 * 5 * 7


def test_products_stay_polynomials_in_the_named_dimensions() -> None:
    flops = call("aten.linear", [["batch", "seq", 128], [512, 128], [512]], ["batch", "seq", 512])
    assert str(flops.matmul) == "131072*batch*seq"
    assert str(flops.other) == "512*batch*seq"
    scores = call("aten.matmul", [["batch", 2, "seq", 64], ["batch", 2, 64, "seq"]], ["batch", 2, "seq", "seq"])
    assert str(scores.matmul) == "256*batch*seq**2"


@pytest.mark.parametrize("masked", [False, True])
def test_fused_attention_counts_both_products_and_five_or_four_per_score(masked: bool) -> None:
    q, k, v = [2, 3, 4, 8], [2, 3, 6, 8], [2, 3, 6, 5]
    mask = [[2, 1, 4, 6]] if masked else []
    expected = counted(torch.nn.functional.scaled_dot_product_attention, q, k, v)
    flops = call("aten.scaled_dot_product_attention", [q, k, v, *mask], [2, 3, 4, 5])
    assert value(flops.matmul) == expected == 2 * 2 * 3 * 4 * 6 * 8 + 2 * 2 * 3 * 4 * 6 * 5
    scores = 2 * 3 * 4 * 6
    assert value(flops.other) == (3 + 1 + masked) * scores  # softmax, scale, the mask's add


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize(
    ("key", "x", "weight", "groups"),
    [
        ("aten.conv1d", [2, 4, 9], [6, 4, 3], 1),
        ("aten.conv2d", [2, 4, 7, 8], [6, 2, 3, 2], 2),
        ("aten.conv3d", [1, 2, 5, 5, 5], [4, 2, 2, 2, 2], 1),
        # ONNX's Conv takes X, W and B in torch's layout: counted as the torch convolution of its rank
        ("onnx::Conv", [2, 4, 9], [6, 2, 3], 2),
        ("onnx::Conv", [1, 2, 5, 6], [4, 2, 2, 3], 1),
    ],
)
def test_convolutions_count_what_flop_counter_mode_counts(
    key: str, x: list[int], weight: list[int], groups: int, bias: bool
) -> None:
    conv = getattr(torch.nn.functional, f"conv{len(x) - 2}d")
    arguments = [x, weight, *([[weight[0]]] if bias else [])]
    tensors = [torch.randn(*s) for s in arguments]
    out = list(conv(*tensors, groups=groups).shape)
    with FlopCounterMode(display=False) as counter:
        conv(*tensors, groups=groups)
    flops = call(key, arguments, out)
    assert value(flops.matmul) == counter.get_total_flops()
    elements = 1
    for size in out:
        elements *= size
    assert value(flops.other) == (elements if bias else 0)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_onnx_gemm_reads_a_transposed_first_operand(transposed: bool, bias: bool) -> None:
    # Y [3, 7] = A [3, 5] (or [5, 3]) · B [5, 7] (+ C [7]): 2·3·7·5 multiply-adds.
    a = [5, 3] if transposed else [3, 5]
    flops = call("onnx::Gemm", [a, [5, 7], *([[7]] if bias else [])], [3, 7])
    assert value(flops.matmul) == 2 * 3 * 7 * 5
    assert value(flops.other) == (21 if bias else 0)


def test_grouped_expert_products_count_the_rows_routed() -> None:
    # 10 routed rows of width 6 into experts of 4 outputs: 2·10·6·4, whatever the expert count.
    for key in ("aten._grouped_mm", "transformers.grouped_mm_fallback"):
        flops = call(key, [[10, 6], [8, 6, 4], [8]], [10, 4])
        assert value(flops.matmul) == 2 * 10 * 6 * 4
        assert flops.other == Poly()
    assert value(call("aten._grouped_mm", [[2, 5, 6], [8, 6, 4]], [2, 5, 4]).matmul) == 2 * 2 * 5 * 6 * 4


ELEMENTS = 2 * 3 * 4


@pytest.mark.parametrize(
    ("key", "per_element"),
    [
        ("aten.add", 1),
        ("aten.mul_", 1),
        ("aten.gelu", 1),
        ("aten.exp", 1),
        ("aten.tanh", 1),
        ("aten.cumsum", 1),
        ("aten.softmax", 3),
        ("aten._softmax", 3),
        ("aten._safe_softmax", 3),
        ("aten.log_softmax", 3),
        ("onnx::Add", 1),
        ("onnx::Erf", 1),
        ("onnx::Softmax", 3),
        ("onnx::LogSoftmax", 3),
        ("aten.view", 0),
        ("aten.embedding", 0),
        ("aten.where", 0),
        ("aten.dropout", 0),
        ("aten.eq", 0),
        ("aten.arange", 0),
        ("onnx::Reshape", 0),
        ("onnx::Where", 0),
    ],
)
def test_the_per_element_rule(key: str, per_element: int) -> None:
    flops = call(key, [[2, 3, 4], [2, 3, 4]], [2, 3, 4])
    assert flops.matmul == Poly()
    assert value(flops.other) == per_element * ELEMENTS


@pytest.mark.parametrize("key", ["aten.add", "aten.softmax", "onnx::Mul", "aten.mean", "onnx::ReduceSum"])
def test_integer_and_boolean_arithmetic_is_free(key: str) -> None:
    for dtype in ("int64", "bool", "int32"):
        assert call(key, [[2, 3, 4]], [2, 3, 4], dtype) == (Poly(), Poly())
    for dtype in sorted(f.FLOAT_DTYPES):
        assert call(key, [[2, 3, 4]], [2, 3, 4], dtype).other != Poly()


@pytest.mark.parametrize("key", ["aten.mean", "aten.sum", "onnx::ReduceMean", "onnx::ReduceSum"])
def test_reductions_count_their_input_elements(key: str) -> None:
    assert value(call(key, [[2, 3, 4]], [2, 1, 1]).other) == ELEMENTS


@pytest.mark.parametrize("key", ["aten.layer_norm", "onnx::LayerNormalization"])
def test_layer_norm_is_three_per_element_and_one_per_affine_tensor(key: str) -> None:
    x = [2, 3, 4]
    assert value(call(key, [x], x).other) == 3 * ELEMENTS
    assert value(call(key, [x, [4]], x).other) == 4 * ELEMENTS
    assert value(call(key, [x, [4], [4]], x).other) == 5 * ELEMENTS
    assert value(call(key, [x, [4], [4], [1]], x).other) == 5 * ELEMENTS  # at most weight and bias


@pytest.mark.parametrize(
    ("key", "with_weight", "without"),
    [
        ("aten.group_norm", 5, 4),
        ("aten.batch_norm", 5, 4),
        ("aten.instance_norm", 5, 4),
        ("aten.rms_norm", 4, 3),
        ("onnx::RMSNormalization", 4, 3),
        ("onnx::SimplifiedLayerNormalization", 4, 3),
    ],
)
def test_other_norms(key: str, with_weight: int, without: int) -> None:
    x = [2, 3, 4]
    assert value(call(key, [x, [4]], x).other) == with_weight * ELEMENTS
    assert value(call(key, [x], x).other) == without * ELEMENTS
    assert call(key, [x, [4]], x).matmul == Poly()


def test_keys_are_registered_once() -> None:
    with pytest.raises(ValueError, match=r"^aten\.add already has a formula$"):
        f.formula("aten.add")(f._zero)
    assert f.FORMULAS["aten.add"] is not f._zero
    table: dict[str, object] = {}
    rule = f.registrar(table, "a rule")
    kept = rule("x", "y")(len)
    assert kept is len and table == {"x": len, "y": len}
    with pytest.raises(ValueError, match=r"^y already has a rule$"):
        rule("z", "y")(abs)
    assert table["z"] is abs and table["y"] is len  # keys before the clash are filed


def test_the_rule_factories_build_their_formulas() -> None:
    # The registry's formulas are built once at import; built again here, each rule is checked anew.
    x = f.Call([shape(2, 3, 4), shape(4)], shape(2, 3, 4), "float32")
    ints = x._replace(dtype="int64")
    for weight in (1, 3):
        assert f._per_element(weight)(x) == (Poly(), Poly.const(weight * ELEMENTS))
        assert f._per_element(weight)(ints) == (Poly(), Poly())
    assert f._per_input_element(x._replace(out=shape(2))) == (Poly(), Poly.const(ELEMENTS))
    assert f._normalisation(5, 4)(x) == (Poly(), Poly.const(5 * ELEMENTS))
    assert f._normalisation(5, 4)(x._replace(inputs=x.inputs[:1])) == (Poly(), Poly.const(4 * ELEMENTS))
    assert f._affine_normalisation(3)(x) == (Poly(), Poly.const(4 * ELEMENTS))
    assert f._affine_normalisation(3)(x._replace(inputs=x.inputs[:1])) == (Poly(), Poly.const(3 * ELEMENTS))
    both = x._replace(inputs=[*x.inputs, shape(4), shape(1)])
    assert f._affine_normalisation(2)(both) == (Poly(), Poly.const(4 * ELEMENTS))
    assert f._zero(x) == (Poly(), Poly())
    assert f._names(" a  b\nc ") == ["a", "b", "c"]
    assert f.numel([]) == Poly.const(1) and f.numel(shape(2, "seq")) == Poly.parse("2*seq")
    assert f._broadcast(shape(3, 1), shape(5)) == [Poly.const(3), Poly.const(5)]
    assert f._broadcast(shape(1), shape(2, 5)) == [Poly.const(2), Poly.const(5)]
