"""Name the batch and sequence dimensions of static traces: one where it is unambiguous, else two.

Exporting with dynamic shapes makes torch.export reason symbolically about every op,
which costs more than two plain exports. So bertgraph exports with fixed example sizes.

One trace is enough when its sizes cannot be confused with the model's own: each
dimension gets a prime that divides no whole number of the config or of a parameter's
shape and lies more than ``MAX_OFFSET`` from every one of them, from their quotients and
from the other dimensions (:func:`single_sizes`). A size of that trace is then read as
exactly one of: a product of the dimensions whose coefficient is a size the model knows,
or such a size itself (:func:`known_sizes`: the config's numbers and parameter
dimensions, their pairwise products and quotients). A size with no reading or with two,
or within ``MAX_OFFSET`` of a dimension (a rotary half head next to ``seq`` reads as
``seq + 3`` as well as a constant), sends tracing to the pair.

The pair: two exports at sizes that are distinct primes (batch 2 and sequence 7, then
batch 3 and sequence 13), each dimension read off the pair: a size that is 7 in one
trace and 13 in the other is ``seq``; 14 and 39 is ``batch*seq``; 768 in both is 768. An encoder-decoder's decoder
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import networkx as nx

from bertgraph.graph import schema as g

# Example sizes per dimension name, for the first and the second trace. Within one trace
# the sizes are distinct primes, so a product of dimensions factors one way only.
EXAMPLES: dict[str, tuple[int, int]] = {"batch": (2, 3), "choices": (3, 5), "seq": (7, 13), "tgt": (5, 17)}
SEQUENCE_FALLBACKS = (7, 13, 11, 5, 3, 2)
MAX_OFFSET = 8
# Where a single trace's sizes are looked for. The constrained lengths are picked first,
# the smallest prime that fits, so a trace stays as short as the pair's where it can.
SINGLE_ORDER = ("seq", "tgt", "batch", "choices")
SINGLE_LIMIT = 1000


class DimsError(Exception):
    """The traces cannot be read as one graph with named dimensions."""


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
    fits = formulas((a, b), (first, second))
    if len(fits) != 1:
        raise DimsError(f"a dimension of size {a} and {b} in the two traces fits {len(fits)} formulas")
    return fits[0]


def formulas(values: Sequence[int], traces: Sequence[dict[str, int]]) -> list[str]:
    """Every formula that gives ``values[i]`` with the dimension sizes of ``traces[i]``, for all i.

    A product of the dimensions (powers up to 2) with a whole coefficient, or one
    dimension plus or minus at most ``MAX_OFFSET``.

    >>> formulas((24, 36), ({"batch": 2, "seq": 7}, {"batch": 3, "seq": 13}))
    ['12*batch']
    >>> formulas((24,), ({"batch": 2, "seq": 7},))  # one trace alone reads less
    ['12*batch', '6*batch**2']
    """
    return [text for text, _ in _fits(values, traces)]


def _fits(values: Sequence[int], traces: Sequence[dict[str, int]]) -> list[tuple[str, int | None]]:
    """:func:`formulas`, each with its coefficient (None for a dimension plus or minus a constant)."""
    names = list(traces[0])
    fits: list[tuple[str, int | None]] = []
    for powers in itertools.product(range(3), repeat=len(names)):
        if not any(powers):
            continue
        coefficients = set()
        for value, sizes in zip(values, traces):
            base = 1
            for name, power in zip(names, powers):
                base *= sizes[name] ** power
            coefficients.add(value // base if value % base == 0 else 0)
        if len(coefficients) == 1 and 0 not in coefficients:
            factors = [name if power == 1 else f"{name}**{power}" for name, power in zip(names, powers) if power]
            coefficient = coefficients.pop()
            fits.append(("*".join(([str(coefficient)] if coefficient != 1 else []) + factors), coefficient))
    for name in names:
        offsets = {value - sizes[name] for value, sizes in zip(values, traces)}
        offset = offsets.pop()
        if not offsets and offset and abs(offset) <= MAX_OFFSET:
            fits.append((f"{name} {'+' if offset > 0 else '-'} {abs(offset)}", None))
    return fits


def own_sizes(config: Mapping[str, Any], parameter_shapes: Iterable[Sequence[int]]) -> frozenset[int]:
    """The sizes a model names itself: every whole number of its config (nested too) and
    every dimension of a parameter, with 0, 1 and 2.

    >>> sorted(own_sizes({"hidden_size": 8, "num_attention_heads": 2, "act": "gelu"}, [(4, 8)]))
    [0, 1, 2, 4, 8]
    """
    found = {0, 1, 2}

    def collect(value: Any) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int):
            found.add(abs(value))
        elif isinstance(value, Mapping):
            for item in value.values():
                collect(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                collect(item)

    collect(config)
    for shape in parameter_shapes:
        found.update(int(size) for size in shape)
    return frozenset(found)


def known_sizes(own: Iterable[int]) -> frozenset[int]:
    """The sizes a model may use with no input dimension in them: its own sizes, their
    pairwise products and :func:`quotients` (a fused projection is three hidden sizes, a
    head size a hidden size over a head count).

    >>> sorted(known_sizes({2, 8}))
    [1, 2, 4, 8, 16, 64]
    """
    own = set(own)
    return frozenset(own | {a * b for a in own for b in own} | quotients(own))


def quotients(own: Iterable[int]) -> set[int]:
    """The exact quotients of two of the sizes, and the halves of the even ones (a rotary
    embedding turns half of a head).

    >>> sorted(quotients({768, 12}))
    [1, 32, 64]
    """
    sizes = [size for size in own if size > 0]
    found = {a // b for a in sizes for b in sizes if a % b == 0}
    return found | {size // 2 for size in found if size % 2 == 0}


def single_sizes(names: Sequence[str], max_positions: int, own: Iterable[int]) -> dict[str, int] | None:
    """Sizes for one trace whose every dimension stands apart from the model's ``own`` sizes, or None.

    A dimension's size is a prime that divides none of them (so neither does a product or
    quotient of them) and is more than ``MAX_OFFSET`` from each of them, from their
    :func:`quotients` (a head size) and from the other dimensions' sizes; ``seq`` and
    ``tgt`` fit in ``max_positions``.

    >>> single_sizes(("batch", "seq"), 512, {0, 1, 2, 12, 768})
    {'batch': 41, 'seq': 23}
    """
    base = sorted(size for size in own if size > 0)
    near = sorted(set(base) | quotients(base))
    chosen: dict[str, int] = {}
    for name in sorted(names, key=SINGLE_ORDER.index):
        limit = min(max_positions, SINGLE_LIMIT) if name in ("seq", "tgt") else SINGLE_LIMIT
        for prime in _PRIMES:
            if prime > limit:
                return None
            if any(abs(prime - size) <= MAX_OFFSET for size in (*near, *chosen.values())):
                continue
            if any(size % prime == 0 for size in base):
                continue
            chosen[name] = prime
            break
        else:
            return None
    return {name: chosen[name] for name in names}


def name_dims_once(graph: nx.DiGraph, sizes: dict[str, int], known: frozenset[int]) -> nx.DiGraph:
    """``graph`` (traced at ``sizes`` from :func:`single_sizes`) with every shape named.

    Raises:
        DimsError: a size reads as no formula and no known size, or as more than one.
    """
    cache: dict[int, int | str] = {}

    def reading(size: int) -> int | str:
        fits: list[int | str] = []
        for text, coefficient in _fits((size,), (sizes,)):
            if coefficient is None:  # a dimension plus or minus a little, or a size near it: two traces tell
                raise DimsError(f"a dimension of size {size} in the one trace is close to {text.split()[0]}")
            # The coefficient must be a size the model knows, which no dimension's size divides:
            # so ``batch*seq`` at seq 47 is not also ``47*batch``.
            if coefficient in known:
                fits.append(text)
        if size in known:
            fits.append(size)
        if len(fits) != 1:
            raise DimsError(f"a dimension of size {size} in the one trace has {len(fits)} readings")
        return fits[0]

    def named(shape: list[int | str]) -> list[int | str]:
        result: list[int | str] = []
        for size in shape:
            if isinstance(size, str):
                result.append(size)  # a size only the data decides ("?")
                continue
            if size not in cache:
                cache[size] = reading(int(size))
            result.append(cache[size])
        return result

    def literal(value: Any) -> Any:
        # An argument that reads as a dimension is named; any other number (a dim index, a window) stays.
        if type(value) is not int:
            return value
        try:
            found = reading(value)
        except DimsError:
            return value
        return found if isinstance(found, str) else value

    for _, data in graph.nodes(data=True):
        data[g.SHAPE] = named(data.get(g.SHAPE, []))
        if g.INPUTS in data:
            data[g.INPUTS] = [named(shape) for shape in data[g.INPUTS]]
        if g.LITERALS in data:
            data[g.LITERALS] = {key: literal(value) for key, value in data[g.LITERALS].items()}
    for _, _, data in graph.edges(data=True):
        data[g.SHAPE] = named(data.get(g.SHAPE, []))
    return graph


def _primes(limit: int) -> tuple[int, ...]:
    """The primes from 5 up to ``limit`` (2 and 3 divide too many model sizes to be of use)."""
    sieve = [True] * (limit + 1)
    for n in range(2, int(limit**0.5) + 1):
        if sieve[n]:
            sieve[n * n :: n] = [False] * len(sieve[n * n :: n])
    return tuple(n for n in range(5, limit + 1) if sieve[n])


_PRIMES = _primes(SINGLE_LIMIT)


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
        if g.LITERALS in data or g.LITERALS in other:
            data[g.LITERALS] = _named_literals(node, data.get(g.LITERALS, {}), other.get(g.LITERALS, {}), named)
    for source, target, data in one.edges(data=True):
        other_edge = two.edges[source, target]
        if data.get(g.ARGS) != other_edge.get(g.ARGS):
            raise DimsError(f"{source} fills other arguments of {target} in the two traces")
        data[g.SHAPE] = named(data.get(g.SHAPE, []), other_edge.get(g.SHAPE, []))
    return one


def _named_literals(
    node: str,
    one: dict[str, Any],
    two: dict[str, Any],
    named: Callable[[list[int], list[int]], list[int | str]],
) -> dict[str, Any]:
    """An op's literal arguments with the sizes among them named (``arange(7)``, ``arange(13)`` → ``seq``)."""
    if one.keys() != two.keys():
        raise DimsError(f"{node} takes other arguments in the two traces")
    result = {}
    for key, value in one.items():
        other = two[key]
        if type(value) is int and type(other) is int:
            result[key] = named([value], [other])[0]
        elif type(value) is not type(other) or value != other:
            raise DimsError(f"{node} has argument {key} {value!r} in one trace and {other!r} in the other")
        else:
            result[key] = value
    return result
