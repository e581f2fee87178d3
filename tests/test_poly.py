"""Exact polynomials: the shapes the graph records parse exactly, text round-trips, arithmetic is exact."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bertgraph.graph.poly import Poly, PolyError, product, total

NAMES = ("batch", "choices", "seq")


@pytest.mark.parametrize(
    ("text", "sizes", "value"),
    [
        ("768", {}, 768),
        ("batch*seq", {"batch": 3, "seq": 13}, 39),
        ("seq + 1", {"seq": 7}, 8),
        ("seq - 3", {"seq": 7}, 4),
        ("12*batch", {"batch": 2}, 24),
        ("batch*choices*seq", {"batch": 2, "choices": 4, "seq": 7}, 56),
        ("seq**2", {"seq": 13}, 169),
        ("2*(seq - 1)**2", {"seq": 4}, 18),
        ("-seq + 10", {"seq": 4}, 6),
    ],
)
def test_shape_dimensions_parse_exactly(text: str, sizes: dict[str, int], value: int) -> None:
    poly = Poly.parse(text)
    assert poly.evaluate(sizes) == value
    assert Poly.parse(str(poly)) == poly


@pytest.mark.parametrize("text", ["?", "seq//2", "seq/2", "Max(1, seq)", "seq**-1", "", "2*", "(seq", "seq)", "1.5"])
def test_what_is_not_a_polynomial_is_refused(text: str) -> None:
    with pytest.raises(PolyError):
        Poly.parse(text)


def test_text_forms() -> None:
    seq, batch = Poly.var("seq"), Poly.var("batch")
    flops = batch * (36864 * seq * seq + 169869312 * seq + 1179648)
    assert str(flops) == "36864*batch*seq**2 + 169869312*batch*seq + 1179648*batch"
    assert flops.readable() == "batch·(36,864·seq² + 169,869,312·seq + 1,179,648)"
    assert str(Poly()) == "0" and Poly().readable() == "0"
    assert str(seq - 1) == "seq - 1" and (1 - seq).readable() == "−seq + 1"
    assert str(Poly.const(-5)) == "-5"


def test_sums_and_products() -> None:
    seq = Poly.var("seq")
    assert total([seq, seq, Poly.const(2)]) == 2 * seq + 2
    assert product([seq, 3, seq]) == 3 * seq**2
    assert (seq + 1) * (seq - 1) == seq**2 - 1
    assert (seq - seq) == Poly() and not (seq - seq)
    assert seq.degree("seq") == 1 and (seq**3).degree("seq") == 3 and seq.degree("batch") == 0
    assert Poly.const(7).constant() == 7 and seq.constant() is None


monomials = st.dictionaries(st.sampled_from(NAMES), st.integers(1, 3), max_size=3)
polys = st.lists(st.tuples(monomials, st.integers(-(10**12), 10**12)), max_size=6).map(
    lambda terms: total(Poly({tuple(sorted(m.items())): c}) for m, c in terms)
)
sizes = st.fixed_dictionaries({name: st.integers(0, 1000) for name in NAMES})


@settings(max_examples=200, deadline=None)
@given(polys, polys, sizes)
def test_text_round_trips_and_arithmetic_is_exact(a: Poly, b: Poly, at: dict[str, int]) -> None:
    assert Poly.parse(str(a)) == a
    assert (a + b).evaluate(at) == a.evaluate(at) + b.evaluate(at)
    assert (a - b).evaluate(at) == a.evaluate(at) - b.evaluate(at)
    assert (a * b).evaluate(at) == a.evaluate(at) * b.evaluate(at)
    assert Poly.parse(str(a * b)) == a * b
    # The readable form states the same polynomial once its typography is undone.
    plain = a.readable().replace(",", "").replace("·", "*").replace("−", "-")
    for digit, raised in zip("23", "²³"):
        plain = plain.replace(raised, f"**{digit}")
    assert Poly.parse(plain) == a
