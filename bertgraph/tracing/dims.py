"""Name the batch and sequence dimensions of two static traces.

Exporting with dynamic shapes makes torch.export reason symbolically about every op,
which costs more than two plain exports. So bertgraph exports twice with fixed example
sizes that are distinct primes (batch 2 and sequence 7, then batch 3 and sequence 13)
and reads each dimension off the pair: a size that is 7 in one trace and 13 in the other
is ``seq``; 14 and 39 is ``batch*seq``; 768 in both is 768. An encoder-decoder's decoder
length is a dimension of its own, ``tgt`` (5, then 17), so cross-attention shows
``[batch, 8, tgt, seq]``; the primes are chosen so that no dimension is another plus or
minus a small constant in both traces. A size only the data decides (the number of
``<eos>`` tokens an encoder-decoder classifier pools) is ``?``. A dimension is named only
when exactly one simple formula fits both traces — a product of the named dimensions
with a whole coefficient, or one of them plus or minus a small constant — otherwise
:class:`DimsError` sends tracing back to a dynamic export.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import networkx as nx

from bertgraph.graph import schema as g

# Example sizes per dimension name, for the first and the second trace. Within one trace
# the sizes are distinct primes, so a product of dimensions factors one way only.
EXAMPLES: dict[str, tuple[int, int]] = {"batch": (2, 3), "choices": (3, 5), "seq": (7, 13), "tgt": (5, 17)}
SEQUENCE_FALLBACKS = (7, 13, 11, 5, 3, 2)
MAX_OFFSET = 8


class DimsError(Exception):
    """The two traces cannot be read as one graph with named dimensions."""


def example_sizes(names: Sequence[str], max_positions: int) -> tuple[dict[str, int], dict[str, int]] | None:
    """Sizes for the two traces, or None when the model leaves no room for two sequence lengths.

    >>> example_sizes(("batch", "seq"), 512)
    ({'batch': 2, 'seq': 7}, {'batch': 3, 'seq': 13})
    >>> example_sizes(("batch", "seq"), 8)
    ({'batch': 2, 'seq': 7}, {'batch': 3, 'seq': 5})
    """
    first = {name: EXAMPLES[name][0] for name in names}
    second = {name: EXAMPLES[name][1] for name in names}
    if "tgt" in names and second["tgt"] > max_positions:
        return None
    if "seq" in names:
        lengths = [n for n in SEQUENCE_FALLBACKS if n <= max_positions]
        if len(lengths) < 2:
            return None
        first["seq"], second["seq"] = lengths[0], lengths[1]
    for sizes in (first, second):
        if len(set(sizes.values())) < len(sizes):
            return None  # a size shared by two dimensions could not be told apart
    return first, second


def name_dim(a: int, b: int, first: dict[str, int], second: dict[str, int]) -> int | str:
    """The name of a dimension that is ``a`` in the first trace and ``b`` in the second.

    >>> sizes = ({"batch": 2, "seq": 7}, {"batch": 3, "seq": 13})
    >>> [name_dim(a, b, *sizes) for a, b in ((768, 768), (2, 3), (7, 13), (14, 39), (24, 36), (8, 14))]
    [768, 'batch', 'seq', 'batch*seq', '12*batch', 'seq + 1']
    """
    if a == b:
        return a
    names = list(first)
    fits: list[str] = []
    for powers in itertools.product(range(3), repeat=len(names)):
        if not any(powers):
            continue
        base_a = base_b = 1
        for name, power in zip(names, powers):
            base_a *= first[name] ** power
            base_b *= second[name] ** power
        if a % base_a == 0 and b % base_b == 0 and a // base_a == b // base_b:
            factors = [name if power == 1 else f"{name}**{power}" for name, power in zip(names, powers) if power]
            coefficient = a // base_a
            fits.append("*".join(([str(coefficient)] if coefficient != 1 else []) + factors))
    for name in names:
        offset = a - first[name]
        if offset and abs(offset) <= MAX_OFFSET and b - second[name] == offset:
            fits.append(f"{name} {'+' if offset > 0 else '-'} {abs(offset)}")
    if len(fits) != 1:
        raise DimsError(f"a dimension of size {a} and {b} in the two traces fits {len(fits)} formulas")
    return fits[0]


def name_dims(one: nx.DiGraph, two: nx.DiGraph, first: dict[str, int], second: dict[str, int]) -> nx.DiGraph:
    """``one`` with every shape named by comparing it with ``two`` (the same graph, other sizes).

    Raises:
        DimsError: the graphs differ in nodes, ops or wiring, or a size has no single reading.
    """
    if list(one.nodes) != list(two.nodes) or list(one.edges) != list(two.edges):
        raise DimsError("the two traces differ in structure")
    cache: dict[tuple[int, int], int | str] = {}

    def named(shape_a: list[int], shape_b: list[int]) -> list[int | str]:
        if len(shape_a) != len(shape_b):
            raise DimsError("a tensor has another rank in the second trace")
        result = []
        for a, b in zip(shape_a, shape_b):
            if isinstance(a, str) or isinstance(b, str):
                if a != b:  # a size only the data decides ("?") in one trace and not the other
                    raise DimsError(f"a dimension is {a} in one trace and {b} in the other")
                result.append(a)
                continue
            if (a, b) not in cache:
                cache[a, b] = name_dim(int(a), int(b), first, second)
            result.append(cache[a, b])
        return result

    for node, data in one.nodes(data=True):
        other = two.nodes[node]
        if (data.get(g.OP), data.get(g.MODULE), data.get(g.PARAMS)) != (
            other.get(g.OP),
            other.get(g.MODULE),
            other.get(g.PARAMS),
        ):
            raise DimsError(f"{node} differs between the two traces")
        data[g.SHAPE] = named(data.get(g.SHAPE, []), other.get(g.SHAPE, []))
        inputs, other_inputs = data.get(g.INPUTS, []), other.get(g.INPUTS, [])
        if len(inputs) != len(other_inputs) or data.get(g.ALIAS) != other.get(g.ALIAS):
            raise DimsError(f"{node} reads other tensors in the two traces")
        if g.INPUTS in data:
            data[g.INPUTS] = [named(a, b) for a, b in zip(inputs, other_inputs)]
    for source, target, data in one.edges(data=True):
        data[g.SHAPE] = named(data.get(g.SHAPE, []), two.edges[source, target].get(g.SHAPE, []))
    return one
