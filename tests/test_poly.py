"""Exact polynomials: the shapes the graph records parse exactly, text round-trips, arithmetic is exact."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bertgraph.graph.poly import Poly, PolyError, power_sum, product, summed, total

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


def test_capped_dimensions_parse_evaluate_and_name_their_dimension() -> None:
    window = Poly.parse("2*min(seq, 15) + seq")
    assert window == Poly.capped("seq", 15) * 2 + Poly.var("seq")
    assert str(Poly.capped("seq", 15)) == "min(seq, 15)"
    assert [window.evaluate({"seq": n}) for n in (4, 15, 100)] == [12, 45, 130]
    assert window.evaluate({"seq": 100, "min(seq, 15)": 3}) == 106  # a size given for the capped name wins
    assert window.dims() == {"seq"} and window.names() == {"seq", "min(seq, 15)"}
    for text in ("min(seq 15)", "min(seq, x)", "min(seq, 15", "min(1, 15)", "min(seq, 15, 2)", "(1"):
        with pytest.raises(PolyError, match="not a polynomial"):
            Poly.parse(text)
    assert Poly.parse("min + 1") == Poly.var("min") + 1  # a dimension may be called min
    assert Poly.parse("_x") == Poly.var("_x") and Poly.parse("min(_x, 2)") == Poly.capped("_x", 2)


def test_substitution_replaces_only_the_named_dimensions() -> None:
    poly = Poly.parse("3*batch*seq**2 + seq + 7")
    assert poly.substitute({"seq": Poly.parse("seq + 1")}) == Poly.parse("3*batch*(seq + 1)**2 + seq + 8")
    assert poly.substitute({"seq": 2}) == Poly.parse("12*batch + 9")
    assert poly.substitute({}) == poly and Poly().substitute({"seq": 1}) == Poly()
    assert poly.substitute({"batch": 0}) == Poly.parse("seq + 7")


def test_reading_degree_constant_powers_and_hashing() -> None:
    poly = Poly.parse("batch*seq**3 + seq")
    assert (poly.degree("seq"), poly.degree("batch"), poly.degree("tgt"), Poly().degree("seq")) == (3, 1, 0, 0)
    assert (Poly.const(5).constant(), Poly().constant(), poly.constant()) == (5, 0, None)
    assert Poly.var("seq") ** 0 == Poly.const(1) and Poly.var("seq") ** 3 == Poly.parse("seq**3")
    assert (Poly.parse("seq + 1") ** 2).evaluate({"seq": 4}) == 25
    with pytest.raises(PolyError, match="negative powers"):
        Poly.var("seq") ** -1
    assert hash(Poly.parse("seq + batch")) == hash(Poly.parse("batch + seq"))
    assert len({Poly.parse("seq + 1"), Poly.parse("1 + seq"), Poly.parse("seq")}) == 2
    assert Poly.const(3) == 3 and Poly.const(3) != "3" and not Poly() and bool(Poly.const(-1))
    assert repr(Poly.parse("seq - 1")) == "Poly('seq - 1')" and str(Poly.parse("-seq")) == "-seq"
    assert Poly.of(Poly.var("seq")) == Poly.var("seq") and Poly.of("seq + 1") == Poly.var("seq") + 1
    with pytest.raises(PolyError, match="not a size"):
        Poly.of(True)


def test_readable_forms_take_out_the_common_factor() -> None:
    assert Poly.parse("6*batch*seq + 4*batch").readable() == "batch·(6·seq + 4)"
    assert Poly.parse("batch*seq**2 - batch").readable() == "batch·(seq² − 1)"
    assert Poly.parse("seq + 1").readable() == "seq + 1"
    assert Poly.parse("-2*seq").readable() == "−2·seq"
    assert Poly.parse("1234*min(seq, 15)").readable() == "1,234·min(seq, 15)"


def test_terms_of_one_degree_keep_one_order_and_errors_quote_the_text() -> None:
    assert str(Poly.parse("batch*seq**2 + batch**2*seq")) == "batch**2*seq + batch*seq**2"
    assert Poly.parse("b") == Poly.var("b") and Poly.parse(" seq + 1 ") == Poly.var("seq") + 1
    with pytest.raises(PolyError, match=r"^not a polynomial: 'seq//2'$"):
        Poly.parse("seq//2")
    with pytest.raises(PolyError, match=r"^not a polynomial: 'min\(seq, 15\('$"):
        Poly.parse("min(seq, 15(")
    with pytest.raises(PolyError, match=r"^negative powers are not polynomials$"):
        Poly.var("seq") ** -2


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from([None, 0, 3, 15]), st.integers(-50, 50)), max_size=5),
    st.integers(-5, 40),
    st.integers(-3, 45),
)
def test_a_sum_over_a_dimension_in_closed_form_is_the_sum_term_by_term(
    terms: list[tuple[int, int | None, int]], first: int, count: int
) -> None:
    """``summed`` equals adding ``poly`` at every length, capped dimensions split where their cap is
    reached (before the range, inside it or after it), other dimensions kept; an empty range is 0."""
    seq, batch = Poly.var("seq"), Poly.var("batch")
    poly = total(
        c * seq**power * (Poly.capped("seq", cap) if cap is not None else batch) for power, cap, c in terms
    ) + 7 * Poly.capped("tgt", 2)
    last = first + count - 1
    found = summed(poly, "seq", first, last)
    assert "seq" not in found.dims()
    for at in ({"batch": 3, "tgt": 1}, {"batch": -2, "tgt": 9}):
        by_term = sum(poly.evaluate({**at, "seq": n}) for n in range(first, last + 1))
        assert found.evaluate(at) == by_term


def test_power_sums_are_faulhabers_for_every_whole_number() -> None:
    for power in range(6):
        for n in range(-8, 30):
            # the polynomial in n: its differences are n**power everywhere, and it is 0 at 0
            assert power_sum(power, n) - power_sum(power, n - 1) == n**power, (power, n)
        assert power_sum(power, 0) == 0
    assert power_sum(3, 10**8) == (10**8 * (10**8 + 1) // 2) ** 2
