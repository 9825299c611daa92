"""projections/statistics.py against an independent implementation (scipy) and by hand.

The worked example is the one in docs/statistics.md, computed there by hand.
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sp

from projections.numbers import show
from projections.statistics import (
    estimate,
    normal_p,
    paired,
    rank_groups,
    shown_p,
    sign_flip_p,
    weighted_estimate,
)

F = Fraction

# ----------------------------------------------------------------- the worked example

# docs/statistics.md "A worked example": six cases, one attempt each.
A = [F(1), F(1), F(1), F(1), F(0), F(1)]
B = [F(1), F(0), F(0), F(1), F(0), F(0)]


def test_the_worked_example_of_the_docs() -> None:
    a, b = estimate(A), estimate(B)
    assert a is not None
    assert b is not None
    # A: 5/6; sd^2 = (5 (1/6)^2 + (5/6)^2) / 5 = 1/6; SE = sqrt(1/6 / 6) = 1/6.
    assert (show(a.mean, 4), show(a.se, 4), show(a.low, 4), show(a.high, 4)) == (
        "0.8333", "0.1667", "0.5067", "1.0000",
    )  # fmt: skip
    # B: 1/3; sd^2 = (2 (2/3)^2 + 4 (1/3)^2) / 5 = 4/15; SE = sqrt(2/45) = 0.21082.
    assert (show(b.mean, 4), show(b.se, 4), show(b.low, 4), show(b.high, 4)) == (
        "0.3333", "0.2108", "0.0000", "0.7465",
    )  # fmt: skip
    r = paired(A, B)
    # d = 0 1 1 0 0 1: mean 1/2; sd^2 = 6 (1/2)^2 / 5 = 3/10; SE = sqrt(1/20) = 0.22361.
    assert show(r.difference, 4) == "0.5000"
    assert show(r.se, 4) == "0.2236"
    assert (show(r.low, 4), show(r.high, 4)) == ("0.0617", "0.9383")
    # 3 non-zero d_i, all +1: of the 8 sign assignments only +++ and --- reach |sum| 3.
    assert r.test == "exact_sign_flip"
    assert r.p == F(1, 4)
    assert not r.significant
    assert (r.nonzero, r.a_better, r.b_better) == (3, 3, 0)
    # MDD = (1.96 + 0.8416) * 0.223607 = 0.62646.
    assert show(r.mdd, 4) == "0.6265"


def test_weighted_score_by_hand() -> None:
    # Weights 1, 1, 2; case means 100, 50, 0: mean = 150 / 4 = 37.5.
    # sum w^2 (x - m)^2 = 62.5^2 + 12.5^2 + 4 * 37.5^2 = 3906.25 + 156.25 + 5625 = 9687.5;
    # SE^2 = 3/2 * 9687.5 / 16 = 908.203125; SE = 30.1364.
    e = weighted_estimate([(F(1), F(100)), (F(1), F(50)), (F(2), F(0))])
    assert e is not None
    assert (show(e.mean, 2), show(e.se, 2)) == ("37.50", "30.14")
    assert (show(e.low, 2), show(e.high, 2)) == ("0.00", "96.57")


def test_equal_weights_give_the_plain_standard_error() -> None:
    xs = [F(100), F(50), F(0), F(75), F(25)]
    plain, weighted = estimate(xs, 0, 100), weighted_estimate([(F(3), x) for x in xs])
    assert plain is not None
    assert weighted is not None
    assert (plain.mean, show(plain.se, 10)) == (weighted.mean, show(weighted.se, 10))
    assert show(plain.se, 6) == show(Decimal(repr(float(sp.sem([100, 50, 0, 75, 25])))), 6)


def test_fewer_than_two_cases_have_no_interval_and_none_have_no_estimate() -> None:
    assert estimate([]) is None
    one = estimate([F(1)])
    assert one is not None
    assert (one.se, one.low, one.high) == (None, None, None)
    assert weighted_estimate([]) is None
    r = paired([], [])
    assert (r.n, r.p, r.test) == (0, 1, "none")
    with pytest.raises(ValueError, match="same cases: 2 against 1"):
        paired([F(1), F(0)], [F(1)])


# ----------------------------------------------------------------- scipy

# Hand-made runs: per-case rates with 1, 2 or 3 attempts per case.
HAND = [
    ([1, 1, 0, 1, 1, 0, 1, 1, 1, 0], [0, 1, 0, 1, 0, 0, 1, 0, 1, 0], 1),
    ([2, 1, 0, 2, 2, 1, 0, 2, 1], [1, 1, 1, 0, 2, 0, 0, 1, 0], 2),
    ([3, 2, 3, 0, 1, 3, 3, 2], [3, 3, 1, 0, 0, 2, 1, 3], 3),
    ([1, 0, 1, 1, 0, 1, 1], [1, 0, 1, 1, 0, 1, 1], 1),
]


IDS = ["1-attempt", "2-attempts", "3-attempts", "same"]


def _rates(counts: list[int], attempts: int) -> list[Fraction]:
    return [F(c, attempts) for c in counts]


@pytest.mark.parametrize(("a", "b", "k"), HAND, ids=IDS)
def test_standard_errors_agree_with_scipy(a: list[int], b: list[int], k: int) -> None:
    ya, yb = _rates(a, k), _rates(b, k)
    for ys in (ya, yb):
        e = estimate(ys)
        assert e is not None
        assert show(e.se, 8) == show(Decimal(repr(float(sp.sem([float(y) for y in ys])))), 8)
    r = paired(ya, yb)
    d = np.array([float(x - y) for x, y in zip(ya, yb, strict=True)])
    assert show(r.se, 8) == show(Decimal(repr(float(sp.sem(d)))), 8)


@pytest.mark.parametrize(("a", "b", "k"), HAND, ids=IDS)
def test_exact_permutation_p_agrees_with_scipy(a: list[int], b: list[int], k: int) -> None:
    ya, yb = _rates(a, k), _rates(b, k)
    r = paired(ya, yb)
    assert r.test in ("exact_sign_flip", "none")
    # permutation_type="samples" swaps A and B within each case: the sign flips of d_i.
    found = sp.permutation_test(
        (np.array([float(y) for y in ya]), np.array([float(y) for y in yb])),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        n_resamples=math.inf,
        alternative="two-sided",
        vectorized=True,
    )
    assert shown_p(r.p) == show(Decimal(repr(float(found.pvalue))), 4)


def _brute_force_p(d: list[Fraction]) -> Fraction:
    """Every sign assignment of every d_i (zeros included: they double both counts)."""
    observed = abs(sum(d))
    hits = sum(
        1
        for signs in itertools.product((1, -1), repeat=len(d))
        if abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed
    )
    return F(hits, 2 ** len(d))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from([F(0), F(1), F(-1), F(1, 2), F(-1, 2), F(1, 3), F(-2, 3)]), max_size=11
    )
)
def test_sign_flip_p_equals_a_brute_force_enumeration(d: list[Fraction]) -> None:
    assert sign_flip_p(d) == _brute_force_p(d)


def test_normal_p_agrees_with_scipy_and_is_used_past_twenty_nonzero_differences() -> None:
    for z in ("0.5", "1.2345", "1.96", "2.5758", "3.3"):
        expected = 2 * sp.norm.sf(float(z))
        assert show(normal_p(Decimal(z)), 10) == show(Decimal(repr(float(expected))), 10)
    # 30 cases: A right on 18, B right on 9 of them; 21 non-zero d_i -> the normal test.
    a = [F(1)] * 18 + [F(0)] * 12
    b = [F(1)] * 6 + [F(0)] * 12 + [F(1)] * 3 + [F(0)] * 9
    r = paired(a, b)
    assert (r.nonzero, r.a_better, r.b_better, r.test) == (15, 12, 3, "exact_sign_flip")
    b2 = [F(0)] * 18 + [F(1)] * 3 + [F(0)] * 9
    r2 = paired(a, b2)
    assert (r2.nonzero, r2.a_better, r2.b_better, r2.test) == (21, 18, 3, "normal")
    d = np.array([float(x - y) for x, y in zip(a, b2, strict=True)])
    z = d.mean() / sp.sem(d)
    assert shown_p(r2.p) == show(Decimal(repr(float(2 * sp.norm.sf(z)))), 4)
    assert r2.significant


def test_all_differences_equal_past_twenty_give_p_zero() -> None:
    r = paired([F(1)] * 25, [F(0)] * 25)
    assert (r.test, r.p, r.se, r.significant) == ("normal", 0, 0, True)


# ----------------------------------------------------------------- properties

_rate = st.sampled_from([F(0), F(1, 3), F(1, 2), F(2, 3), F(1)])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_rate, _rate), max_size=30))
def test_swapping_a_and_b_negates_the_difference_and_keeps_p(cases: list[tuple]) -> None:
    a = [x for x, _ in cases]
    b = [y for _, y in cases]
    ab, ba = paired(a, b), paired(b, a)
    assert ba.difference == -ab.difference
    assert ba.p == ab.p
    assert ba.test == ab.test
    assert ba.se == ab.se
    assert (ba.a_better, ba.b_better) == (ab.b_better, ab.a_better)
    if ab.low is not None:
        assert (ba.low, ba.high) == (ab.high.copy_negate(), ab.low.copy_negate())


@settings(max_examples=40, deadline=None)
@given(st.lists(_rate, min_size=1, max_size=30))
def test_identical_runs_give_difference_zero_and_p_one(a: list[Fraction]) -> None:
    r = paired(a, list(a))
    assert (r.difference, r.p, r.nonzero, r.a_better, r.b_better) == (0, 1, 0, 0, 0)
    assert shown_p(r.p) == "1.0000"
    assert not r.significant


def test_rank_groups_by_hand() -> None:
    apart = {("a", "b"), ("a", "c"), ("a", "d"), ("b", "d")}
    assert rank_groups(["a", "b", "c", "d"], lambda x, y: (x, y) in apart) == {
        "a": "1", "b": "2=", "c": "2=", "d": "4",
    }  # fmt: skip
    assert rank_groups(["a", "b"], lambda x, y: False) == {"a": "1=", "b": "1="}
    assert rank_groups(["a"], lambda x, y: True) == {"a": "1"}
