"""Exact polynomials in the named dimensions (``batch``, ``seq``, ``choices``) with integer coefficients.

Costs are sums and products of tensor sizes, and sizes are the named dimensions of the
traced shapes (``"batch*seq"``, ``"seq + 1"``, ``"12*batch"``), so every cost is such a
polynomial. A :class:`Poly` is a small immutable mapping from monomials to whole numbers.

Its text form (``str``) is canonical and parses back exactly — it is what the graph
stores — and it is valid Python and sympy syntax::

    36864*batch*seq**2 + 169869312*batch*seq + 1179648*batch

:meth:`Poly.readable` is the form for people: ``batch·(36,864·seq² + 169,869,312·seq + 1,179,648)``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from functools import reduce

# A monomial: (dimension name, power) pairs sorted by name; () is the constant term.
Monomial = tuple[tuple[str, int], ...]

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(\*\*|[-+*(),]))")
# A dimension capped at a whole number (a sliding window's cache keeps at most ``w - 1`` tokens):
# one name of its own, ``min(seq, 15)``, valid Python and sympy like the rest of the text.
_CAPPED = re.compile(r"^min\(([A-Za-z_][A-Za-z0-9_]*), (\d+)\)$")
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


class PolyError(ValueError):
    """Text that is not a polynomial with whole coefficients (a size like ``seq//2`` or ``?``)."""


def _times(a: Monomial, b: Monomial) -> Monomial:
    powers = dict(a)
    for name, power in b:
        powers[name] = powers.get(name, 0) + power
    return tuple(sorted(powers.items()))


class Poly:
    """An exact polynomial with integer coefficients.

    >>> seq, batch = Poly.var("seq"), Poly.var("batch")
    >>> cost = batch * (36864 * seq * seq + 169869312 * seq + 1179648)
    >>> str(cost)
    '36864*batch*seq**2 + 169869312*batch*seq + 1179648*batch'
    >>> cost.evaluate({"batch": 1, "seq": 128})
    22348431360
    >>> Poly.parse(str(cost)) == cost
    True
    """

    __slots__ = ("_terms",)

    def __init__(self, terms: Mapping[Monomial, int] | None = None) -> None:
        self._terms: dict[Monomial, int] = {m: int(c) for m, c in (terms or {}).items() if c}

    # --- construction ----------------------------------------------------------------------

    @classmethod
    def const(cls, value: int) -> Poly:
        return cls({(): value})

    @classmethod
    def var(cls, name: str) -> Poly:
        return cls({((name, 1),): 1})

    @classmethod
    def capped(cls, name: str, cap: int) -> Poly:
        """``min(name, cap)`` as a variable of its own, evaluated from ``name``'s size.

        >>> window = Poly.capped("seq", 15) * 2 + Poly.var("seq")
        >>> str(window), window.evaluate({"seq": 4}), window.evaluate({"seq": 100})
        ('2*min(seq, 15) + seq', 12, 130)
        >>> Poly.parse(str(window)) == window, window.dims()
        (True, {'seq'})
        """
        return cls.var(f"min({name}, {int(cap)})")

    @classmethod
    def of(cls, value: int | str | Poly) -> Poly:
        """A dimension as the graph records it (``768``, ``"batch*seq"``) as a polynomial."""
        if isinstance(value, Poly):
            return value
        if isinstance(value, bool):
            raise PolyError(f"not a size: {value!r}")
        if isinstance(value, int):
            return cls.const(value)
        return cls.parse(value)

    @classmethod
    def parse(cls, text: str) -> Poly:
        """Parse sums, differences, products, whole powers and parentheses of integers and names.

        >>> Poly.parse("seq + 1"), Poly.parse("12*batch"), Poly.parse("2*(seq - 1)**2")
        (Poly('seq + 1'), Poly('12*batch'), Poly('2*seq**2 - 4*seq + 2'))
        >>> Poly.parse("seq//2")
        Traceback (most recent call last):
        ...
        bertgraph.graph.poly.PolyError: not a polynomial: 'seq//2'
        """
        return _parse(text)

    # --- arithmetic --------------------------------------------------------------------------

    def __add__(self, other: Poly | int) -> Poly:
        other = Poly.of(other)
        terms = dict(self._terms)
        for monomial, coefficient in other._terms.items():
            terms[monomial] = terms.get(monomial, 0) + coefficient
        return Poly(terms)

    __radd__ = __add__

    def __neg__(self) -> Poly:
        return Poly({m: -c for m, c in self._terms.items()})

    def __sub__(self, other: Poly | int) -> Poly:
        return self + (-Poly.of(other))

    def __rsub__(self, other: Poly | int) -> Poly:
        return Poly.of(other) - self

    def __mul__(self, other: Poly | int) -> Poly:
        if isinstance(other, int):
            return Poly({m: c * other for m, c in self._terms.items()})
        terms: dict[Monomial, int] = {}
        for m1, c1 in self._terms.items():
            for m2, c2 in other._terms.items():
                key = _times(m1, m2)
                terms[key] = terms.get(key, 0) + c1 * c2
        return Poly(terms)

    __rmul__ = __mul__

    def __pow__(self, power: int) -> Poly:
        if power < 0:
            raise PolyError("negative powers are not polynomials")
        return reduce(lambda a, b: a * b, [self] * power, Poly.const(1))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):
            other = Poly.const(other)
        return isinstance(other, Poly) and self._terms == other._terms

    def __hash__(self) -> int:
        return hash(frozenset(self._terms.items()))

    def __bool__(self) -> bool:
        return bool(self._terms)

    # --- reading ---------------------------------------------------------------------------

    def terms(self) -> Iterator[tuple[Monomial, int]]:
        """(monomial, coefficient) pairs, highest degree first, in a fixed order."""
        for monomial in sorted(self._terms, key=_term_order):
            yield monomial, self._terms[monomial]

    def names(self) -> set[str]:
        """The dimension names that occur."""
        return {name for monomial in self._terms for name, _ in monomial}

    def dims(self) -> set[str]:
        """The dimensions whose sizes evaluation needs (``seq`` for ``min(seq, 15)``)."""
        return {_base(name) for name in self.names()}

    def substitute(self, values: Mapping[str, Poly | int]) -> Poly:
        """The polynomial with each dimension in ``values`` replaced (``seq`` → ``1``, ``seq + 1``).

        >>> Poly.parse("3*batch*seq**2 + seq").substitute({"seq": Poly.parse("seq + 1")})
        Poly('3*batch*seq**2 + 6*batch*seq + 3*batch + seq + 1')
        """
        result = Poly()
        for monomial, coefficient in self._terms.items():
            term = Poly.const(coefficient)
            for name, power in monomial:
                term = term * (Poly.of(values[name]) if name in values else Poly.var(name)) ** power
            result = result + term
        return result

    def degree(self, name: str) -> int:
        """The highest power of ``name`` (0 when absent)."""
        return max((dict(m).get(name, 0) for m in self._terms), default=0)

    def evaluate(self, sizes: Mapping[str, int]) -> int:
        """The value at concrete sizes.

        Raises:
            KeyError: a dimension of the polynomial has no size in ``sizes``.
        """
        total = 0
        for monomial, coefficient in self._terms.items():
            value = coefficient
            for name, power in monomial:
                value *= _size(name, sizes) ** power
            total += value
        return total

    def constant(self) -> int | None:
        """The value when the polynomial has no dimensions, else None."""
        if self.names():
            return None
        return self._terms.get((), 0)

    def __str__(self) -> str:
        if not self._terms:
            return "0"
        text = ""
        for monomial, coefficient in self.terms():
            factors = [f"{name}**{power}" if power > 1 else name for name, power in monomial]
            magnitude = abs(coefficient)
            body = "*".join(([str(magnitude)] if magnitude != 1 or not factors else []) + factors)
            if not text:
                text = body if coefficient > 0 else f"-{body}"
            else:
                text += f" {'+' if coefficient > 0 else '-'} {body}"
        return text

    def __repr__(self) -> str:
        return f"Poly({str(self)!r})"

    def readable(self) -> str:
        """The polynomial for people: common factor outside, thousands separated, powers raised.

        >>> Poly.parse("36864*batch*seq**2 + 169869312*batch*seq + 1179648*batch").readable()
        'batch·(36,864·seq² + 169,869,312·seq + 1,179,648)'
        >>> Poly.parse("4718592*batch*seq").readable(), Poly.parse("0").readable()
        ('4,718,592·batch·seq', '0')
        """
        if not self._terms:
            return "0"
        common = _common_monomial(list(self._terms))
        if len(self._terms) == 1 or not common:
            return _readable_sum(self.terms())
        rest = [(_divide(m, common), c) for m, c in self.terms()]
        return f"{_readable_monomial(common)}·({_readable_sum(rest)})"


def _base(name: str) -> str:
    capped = _CAPPED.match(name)
    return capped.group(1) if capped else name


def _size(name: str, sizes: Mapping[str, int]) -> int:
    capped = _CAPPED.match(name)
    if capped and name not in sizes:
        return min(sizes[capped.group(1)], int(capped.group(2)))
    return sizes[name]


def total(polys: Iterable[Poly]) -> Poly:
    """The sum of ``polys`` (0 for none)."""
    result = Poly()
    for poly in polys:
        result = result + poly
    return result


def product(polys: Iterable[Poly | int]) -> Poly:
    """The product of ``polys`` (1 for none)."""
    result = Poly.const(1)
    for poly in polys:
        result = result * poly
    return result


def summed(poly: Poly, name: str, first: int, last: int) -> Poly:
    """``poly`` summed over ``name`` = ``first``, …, ``last`` (0 when ``last < first``), in closed form.

    Each power of ``name`` becomes a sum of powers (Faulhaber: :func:`power_sum`), so the cost of a
    hundred million decode steps takes as long as that of one. A capped dimension ``min(name, c)``
    is ``name`` up to ``c`` and ``c`` after: the range is split where each cap is reached. Other
    dimensions stay in the result, whole coefficients and all.

    >>> step = Poly.parse("4*batch*seq + 2*min(seq, 3)")
    >>> summed(step, "seq", 2, 5), sum(step.evaluate({"batch": 1, "seq": n}) for n in range(2, 6))
    (Poly('56*batch + 22'), 78)
    """
    caps = sorted(
        {int(capped.group(2)) for other in poly.names() if (capped := _CAPPED.match(other)) and capped.group(1) == name}
    )
    starts = [first] + [cap + 1 for cap in caps if first < cap + 1 <= last]
    result = Poly()
    for low, high in zip(starts, [start - 1 for start in starts[1:]] + [last]):
        if high < low:
            continue
        # inside [low, high] every cap is either not yet reached (min is the length) or passed (min is the cap)
        piece = poly.substitute({f"min({name}, {cap})": Poly.var(name) if high <= cap else cap for cap in caps})
        for monomial, coefficient in piece.terms():
            powers = dict(monomial)
            power = powers.pop(name, 0)
            rest = Poly({tuple(sorted(powers.items())): coefficient})
            result = result + rest * (power_sum(power, high) - power_sum(power, low - 1))
    return result


def power_sum(power: int, n: int) -> int:
    """``1**power + 2**power + … + n**power`` exactly, for any whole ``n`` (the polynomial in ``n``
    Faulhaber's formula gives, so ``power_sum(p, b) - power_sum(p, a - 1)`` sums ``a … b``).

    >>> power_sum(2, 10), power_sum(0, 7), power_sum(3, 0), power_sum(1, -3)
    (385, 7, 0, 3)
    """
    # (n + 1)^(p + 1) - 1 = sum over j ≤ p of C(p + 1, j) · power_sum(j, n): solve for j = p, lowest first.
    sums: list[int] = []
    for p in range(power + 1):
        rest = sum(math.comb(p + 1, j) * sums[j] for j in range(p))
        sums.append(((n + 1) ** (p + 1) - 1 - rest) // (p + 1))
    return sums[power]


# --- text -------------------------------------------------------------------------------------


def _term_order(monomial: Monomial) -> tuple[int, list[tuple[str, int]]]:
    # Highest total degree first; then by the powers of each name, alphabetically.
    return -sum(p for _, p in monomial), [(name, -power) for name, power in monomial]


def _common_monomial(monomials: list[Monomial]) -> Monomial:
    shared = set.intersection(*(set(dict(m)) for m in monomials))
    return tuple(sorted((name, min(dict(m)[name] for m in monomials)) for name in shared))


def _divide(monomial: Monomial, by: Monomial) -> Monomial:
    powers = dict(monomial)
    for name, power in by:
        powers[name] -= power
    return tuple(sorted((n, p) for n, p in powers.items() if p))


def _readable_monomial(monomial: Monomial) -> str:
    return "·".join(name + (str(power).translate(_SUPERSCRIPT) if power > 1 else "") for name, power in monomial)


def _readable_sum(terms: Iterable[tuple[Monomial, int]]) -> str:
    text = ""
    for monomial, coefficient in terms:
        magnitude = abs(coefficient)
        parts = ([f"{magnitude:,}"] if magnitude != 1 or not monomial else []) + (
            [_readable_monomial(monomial)] if monomial else []
        )
        body = "·".join(parts)
        if not text:
            text = body if coefficient > 0 else f"−{body}"
        else:
            text += f" {'+' if coefficient > 0 else '−'} {body}"
    return text


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Poly:
    # Graphs repeat a few texts thousands of times (every layer's ops have the same sizes);
    # a Poly never changes, so one parse per text can be shared.
    return _Parser(text).parse()


class _Parser:
    """Recursive descent: sum := term (('+'|'-') term)*; term := factor ('*' factor)*;
    factor := ('-' factor) | atom ('**' integer)?; atom := integer | name | '(' sum ')'."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        position = 0
        stripped = text.rstrip()
        while position < len(stripped):
            match = _TOKEN.match(stripped, position)
            if not match:
                raise PolyError(f"not a polynomial: {text!r}")
            self.tokens.append(match.group(match.lastindex or 0))
            position = match.end()
        self.position = 0

    def fail(self) -> PolyError:
        return PolyError(f"not a polynomial: {self.text!r}")

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise self.fail()
        self.position += 1
        return token

    def parse(self) -> Poly:
        if not self.tokens:
            raise self.fail()
        result = self.sum()
        if self.peek() is not None:
            raise self.fail()
        return result

    def sum(self) -> Poly:
        result = self.term()
        while self.peek() in ("+", "-"):
            sign = self.take()
            result = result + self.term() if sign == "+" else result - self.term()
        return result

    def term(self) -> Poly:
        result = self.factor()
        while self.peek() == "*":
            self.take()
            result = result * self.factor()
        return result

    def factor(self) -> Poly:
        if self.peek() == "-":
            self.take()
            return -self.factor()
        base = self.atom()
        if self.peek() == "**":
            self.take()
            exponent = self.take()
            if not exponent.isdigit():
                raise self.fail()
            return base ** int(exponent)
        return base

    def atom(self) -> Poly:
        token = self.take()
        if token.isdigit():
            return Poly.const(int(token))
        if token == "(":
            inner = self.sum()
            if self.take() != ")":
                raise self.fail()
            return inner
        if token == "min" and self.peek() == "(":
            self.take()
            name, comma, cap, close = self.take(), self.take(), self.take(), self.take()
            if comma != "," or close != ")" or not cap.isdigit() or not (name[0].isalpha() or name[0] == "_"):
                raise self.fail()
            return Poly.capped(name, int(cap))
        if token[0].isalpha() or token[0] == "_":
            return Poly.var(token)
        raise self.fail()
