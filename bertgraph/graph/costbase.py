"""What every cost module builds on: item sizes, shape polynomials, cost attributes, sizes, evaluation.

The cost pass (:mod:`bertgraph.graph.cost`), the planning modules (:mod:`~bertgraph.graph.masked`,
:mod:`~bertgraph.graph.generation`, :mod:`~bertgraph.graph.memory`, :mod:`~bertgraph.graph.saved`,
:mod:`~bertgraph.graph.moe`) and the cost table on top of them (:mod:`bertgraph.graph.costtable`)
all import this module and nothing here imports them: it knows the bytes of a dtype
(:func:`itemsize`), a recorded shape as polynomials (:func:`shape_poly`), a node's cost
attributes as polynomials (:func:`node_poly`), the named sizes of a graph (:func:`sizes_for`)
and a polynomial's value at them (:func:`evaluate`), and the one error a cost raises
(:class:`CostError`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx

from bertgraph.errors import BertgraphError
from bertgraph.graph import schema as g
from bertgraph.graph.poly import Poly

# Bytes per element of each dtype name the graph records.
ITEMSIZE: dict[str, int] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "complex128": 16,
    "complex64": 8,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint64": 8,
    "uint32": 4,
    "uint16": 2,
    "uint8": 1,
    "bool": 1,
}


class CostError(BertgraphError):
    """A cost that cannot be evaluated at the sizes asked for."""


def shape_poly(shape: Sequence[int | str]) -> tuple[Poly, ...]:
    """A recorded shape as polynomials; raises :class:`PolyError` for ``?`` or ``seq//2``."""
    return tuple(Poly.of(size) for size in shape)


def itemsize(dtype: str) -> int | None:
    """Bytes per element of ``dtype`` (``bfloat16`` → 2), None for a dtype no table lists."""
    return ITEMSIZE.get(dtype)


# --- reading the polynomials ----------------------------------------------------------------------


def node_poly(data: Mapping[str, Any], key: str) -> Poly:
    """A cost attribute of a node as a polynomial (0 when absent)."""
    value = data.get(key)
    return Poly.parse(value) if isinstance(value, str) else Poly()


def node_flops(data: Mapping[str, Any]) -> Poly:
    return node_poly(data, g.MATMUL_FLOPS) + node_poly(data, g.OTHER_FLOPS)


def reads_weights(data: Mapping[str, Any]) -> bool:
    """Whether an op reads a parameter (its matrix product is a linear layer's, not attention's)."""
    return bool(data.get(g.PARAM_NAMES) or data.get(g.SHARED_PARAMS))


def has_weight_operand(graph: nx.DiGraph, node: str) -> bool:
    """Whether an op multiplies by a weight: it reads a parameter, or the result of an op that reads
    nothing but parameters (an ONNX file's ``Transpose`` of a weight before its ``MatMul``)."""
    if reads_weights(graph.nodes[node]):
        return True
    return any(
        reads_weights(graph.nodes[source])
        and graph.in_degree(source) == 0
        and graph.nodes[source].get(g.KIND) == g.OPERATOR
        for source in graph.predecessors(node)
    )


def from_onnx(graph: nx.DiGraph) -> bool:
    """Whether the graph was read from an ONNX file (not traced)."""
    return graph.graph.get(g.G_SOURCE) == "onnx"


# --- sizes ----------------------------------------------------------------------------------------


def sequence_name(graph: nx.DiGraph) -> str:
    """The name of the sequence dimension: ``seq``, or ``sequence`` in ONNX files bertgraph wrote."""
    example = graph.graph.get(g.G_EXAMPLE, {})
    return "sequence" if "sequence" in example and "seq" not in example else "seq"


DECODER = "tgt"  # an encoder-decoder's decoder length


def has_decoder_length(graph: nx.DiGraph) -> bool:
    """Whether the graph's costs depend on a decoder length of their own (T5, BART)."""
    return DECODER in graph.graph.get(g.G_EXAMPLE, {})


def sizes_for(
    graph: nx.DiGraph,
    seq: int | None = None,
    batch: int | None = None,
    decoder: int | None = None,
    example: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """The example sizes of ``graph`` (or ``example``) with ``seq``, ``batch`` and the decoder
    length replaced where given.

    An encoder-decoder's decoder is as long as its input unless ``decoder`` says otherwise,
    as in the example bertgraph traces.
    """
    given = graph.graph.get(g.G_EXAMPLE, {}) if example is None else example
    sizes = {str(k): int(v) for k, v in given.items()}
    if seq is not None:
        sizes[sequence_name(graph)] = seq
        if DECODER in sizes:
            sizes[DECODER] = seq
    if decoder is not None:
        if DECODER not in sizes:
            raise CostError(
                f"{graph.graph.get(g.G_NAME) or 'this model'} has no decoder length: "
                "a decoder length applies to encoder-decoder models (t5-small, bart-base, …)"
            )
        sizes[DECODER] = decoder
    if batch is not None:
        sizes["batch"] = batch
    return sizes


def at_length(sizes: Mapping[str, int], name: str, length: int) -> dict[str, int]:
    """``sizes`` with the length ``name`` set, and the decoder length with it: a length sweep
    of an encoder-decoder keeps its decoder as long as its input."""
    at = {**sizes, name: length}
    if DECODER in at:
        at[DECODER] = length
    return at


def evaluate(poly: Poly, sizes: Mapping[str, int]) -> int:
    """``poly`` at ``sizes``, with a clear error for a dimension that has no size."""
    missing = sorted(poly.dims() - set(sizes))
    if missing:
        raise CostError(
            f"the cost depends on the dimension {missing[0]!r}, which has no size here "
            f"(known: {', '.join(sorted(sizes)) or 'none'})"
        )
    return poly.evaluate(sizes)


def size_label(sizes: Mapping[str, int]) -> str:
    """``batch=1, seq=128``."""
    return ", ".join(f"{name}={value}" for name, value in sizes.items())
