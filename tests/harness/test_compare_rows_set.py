"""The ``rows: set`` row contract of the comparator (issue 16): duplicate rows do not count.

Every expected number is worked out by hand in the comment beside it.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.events import Column
from ledger.harness.compare import Comparison, MalformedResult, compare


def col(name: str, type_: str) -> Column:
    return Column(name=name, type=type_)


def cmp(gold_cols, gold_rows, actual_cols, actual_rows, *, rows, abs_tol="0", rel_tol="0"):
    return compare(
        tuple(gold_cols),
        gold_rows,
        tuple(actual_cols),
        actual_rows,
        abs_tolerance=Decimal(abs_tol),
        rel_tolerance=Decimal(rel_tol),
        order_significant=False,
        rows=rows,
    )


NS = [col("n", "INTEGER"), col("s", "VARCHAR")]
D = [col("amount", "DOUBLE")]


def counts(c: Comparison) -> tuple[int, int, int, Decimal, Decimal, Decimal, bool]:
    return c.matched, c.expected_rows, c.actual_rows, c.precision, c.recall, c.f1, c.order_ok


def test_gold_with_a_duplicate_against_the_distinct_rows() -> None:
    gold = [(1, "a"), (1, "a"), (2, "b")]
    actual = [(1, "a"), (2, "b")]
    # multiset: matched 2; P = 2/2, R = 2/3, F1 = 2*(1*2/3)/(1+2/3) = (4/3)/(5/3) = 0.8
    multi = cmp(NS, gold, NS, actual, rows="multiset")
    assert counts(multi) == (2, 3, 2, Decimal(1), Decimal("0.6666666667"), Decimal("0.8"), False)
    # set: gold has 2 distinct rows, both found: P = R = F1 = 1
    as_set = cmp(NS, gold, NS, actual, rows="set")
    assert counts(as_set) == (2, 2, 2, Decimal(1), Decimal(1), Decimal(1), True)
    # the default contract is multiset, unchanged
    default = compare(
        tuple(NS),
        gold,
        tuple(NS),
        actual,
        abs_tolerance=Decimal(0),
        rel_tolerance=Decimal(0),
        order_significant=False,
    )
    assert default == multi


def test_an_answer_repeating_a_row_gold_has_once() -> None:
    gold = [(1, "a"), (2, "b")]
    actual = [(1, "a"), (1, "a"), (2, "b")]
    # multiset: matched 2 of 3 answer rows: P = 2/3, R = 1, F1 = 2*2/(2+3) = 0.8
    multi = cmp(NS, gold, NS, actual, rows="multiset")
    assert counts(multi) == (2, 2, 3, Decimal("0.6666666667"), Decimal(1), Decimal("0.8"), False)
    # set: the answer has 2 distinct rows: P = 1
    assert counts(cmp(NS, gold, NS, actual, rows="set")) == (
        2,
        2,
        2,
        Decimal(1),
        Decimal(1),
        Decimal(1),
        True,
    )


def test_a_missing_and_an_extra_distinct_row_still_count() -> None:
    gold = [(1, "a"), (2, "b"), (3, "c"), (3, "c")]
    actual = [(1, "a"), (1, "a"), (4, "d")]
    # set: gold {1a, 2b, 3c} (3), answer {1a, 4d} (2), matched 1:
    # P = 1/2, R = 1/3, F1 = 2*1/(3+2) = 0.4
    c = cmp(NS, gold, NS, actual, rows="set")
    assert counts(c) == (1, 3, 2, Decimal("0.5"), Decimal("0.3333333333"), Decimal("0.4"), False)


def test_rows_equal_after_normalisation_are_one_row() -> None:
    s = [col("s", "VARCHAR")]
    nfc, nfd = "\u00e9", "e\u0301"  # the same letter, composed and decomposed
    # set: NFC and NFD are one string, so the answer has one distinct row
    assert counts(cmp(s, [(nfc,)], s, [(nfc,), (nfd,)], rows="set"))[:3] == (1, 1, 1)
    # multiset: both answer rows equal gold's one row after NFC: matched 1 of 2
    assert counts(cmp(s, [(nfc,)], s, [(nfc,), (nfd,)], rows="multiset"))[:3] == (1, 1, 2)
    # -0.0 and 0.0 are one number (on the gold side too)
    assert counts(cmp(D, [("0.0",), ("-0.0",)], D, [("0.0",)], rows="set"))[:3] == (1, 1, 1)
    assert counts(cmp(D, [("0.0",)], D, [("-0.0",), ("0.0",)], rows="set"))[:3] == (1, 1, 1)
    assert counts(cmp(D, [("0.0",)], D, [("-0.0",), ("0.0",)], rows="multiset"))[:3] == (1, 1, 2)


def test_duplicates_with_reordered_unnamed_columns_still_align() -> None:
    gold_cols = [col("name", "VARCHAR"), col("n", "INTEGER")]
    actual_cols = [col("x", "INTEGER"), col("y", "VARCHAR")]
    gold = [("a", 1), ("b", 2)]
    actual = [(1, "a"), (1, "a"), (2, "b")]
    # multiset: the answer's columns hold {a, a, b} and {1, 1, 2}, gold's {a, b} and {1, 2}:
    # no column of the answer has gold's values as a multiset, so nothing aligns
    multi = cmp(gold_cols, gold, actual_cols, actual, rows="multiset")
    assert (multi.alignment, multi.column_mapping, multi.f1) == ("none", None, Decimal(0))
    # set: after dropping the duplicate the columns are gold's, reordered
    as_set = cmp(gold_cols, gold, actual_cols, actual, rows="set")
    assert (as_set.alignment, as_set.column_mapping) == ("fingerprint", (1, 0))
    assert counts(as_set) == (2, 2, 2, Decimal(1), Decimal(1), Decimal(1), True)


def test_unaligned_results_count_distinct_rows() -> None:
    other = [col("n", "INTEGER"), col("s", "VARCHAR"), col("extra", "INTEGER")]
    c = cmp(NS, [(1, "a"), (1, "a")], other, [(1, "a", 0), (1, "a", 0), (2, "b", 0)], rows="set")
    # count_mismatch: nothing matches; 1 distinct gold row, 2 distinct answer rows
    assert (c.alignment, c.matched, c.expected_rows, c.actual_rows) == ("count_mismatch", 0, 1, 2)
    assert c.f1 == 0


def test_rows_within_tolerance_of_each_other_are_one_row() -> None:
    gold = [("1.0",), ("3.0",)]
    actual = [("1.004",), ("1.0",), ("3.0",), ("3.0",)]
    # abs 0.01. set: answer groups {1.004, 1.0} and {3.0}: 2 rows, both match gold: F1 = 1
    as_set = cmp(D, gold, D, actual, rows="set", abs_tol="0.01")
    assert counts(as_set) == (2, 2, 2, Decimal(1), Decimal(1), Decimal(1), True)
    # multiset: 2 of 4 answer rows match: F1 = 2*2/(2+4) = 2/3
    multi = cmp(D, gold, D, actual, rows="multiset", abs_tol="0.01")
    assert counts(multi)[:3] == (2, 2, 4)
    assert multi.f1 == Decimal("0.6666666667")


def test_a_chain_of_near_equal_rows_is_one_row() -> None:
    # 1.0 ~ 1.008 ~ 1.016 (steps of 0.008 <= 0.01) though |1.0 - 1.016| > 0.01
    c = cmp(D, [("1.0",)], D, [("1.0",), ("1.008",), ("1.016",)], rows="set", abs_tol="0.01")
    assert counts(c)[:3] == (1, 1, 1)
    # gold rows within tolerance of each other count as one gold row too
    g = cmp(D, [("1.0",), ("1.005",)], D, [("1.002",)], rows="set", abs_tol="0.01")
    assert counts(g)[:3] == (1, 1, 1)
    # two gold rows far apart stay two: matched 1 of 2 gold, F1 = 2*1/(2+1) = 2/3
    two = cmp(D, [("1.0",), ("2.0",)], D, [("1.0",), ("1.001",)], rows="set", abs_tol="0.01")
    assert counts(two)[:3] == (1, 2, 1)
    assert two.f1 == Decimal("0.6666666667")


def test_relative_tolerance_groups_and_nulls() -> None:
    kd = [col("k", "VARCHAR"), col("v", "DOUBLE")]
    gold = [("a", "100.0"), ("a", None), ("a", None), ("b", "5.0")]
    actual = [("a", "100.5"), ("a", "99.6"), ("a", None), ("b", "5.0"), ("b", "9.0")]
    # rel 0.01: 100.5 ~ 99.6 (|0.9| <= 1.005) are one group matching 100.0; NULL equals NULL
    # once; gold rows: {a 100, a NULL, b 5} = 3; answer: {a ~100, a NULL, b 5, b 9} = 4;
    # matched 3: F1 = 2*3/(3+4) = 6/7
    c = cmp(kd, gold, kd, actual, rows="set", rel_tol="0.01")
    assert counts(c)[:3] == (3, 3, 4)
    assert c.f1 == Decimal("0.8571428571")


def test_set_refuses_significant_order_and_unknown_contracts() -> None:
    with pytest.raises(MalformedResult, match="row order cannot be significant"):
        compare(
            tuple(NS),
            [(1, "a")],
            tuple(NS),
            [(1, "a")],
            abs_tolerance=Decimal(0),
            rel_tolerance=Decimal(0),
            order_significant=True,
            rows="set",
        )
    with pytest.raises(MalformedResult, match="unknown row contract 'bag'"):
        cmp(NS, [(1, "a")], NS, [(1, "a")], rows="bag")


def test_the_empty_sides() -> None:
    # both empty: F1 = 1; one side empty: 0
    assert cmp(NS, [], NS, [], rows="set").f1 == 1
    assert counts(cmp(NS, [(1, "a"), (1, "a")], NS, [], rows="set"))[:3] == (0, 1, 0)
    assert cmp(D, [], D, [("1.0",), ("1.0",)], rows="set", abs_tol="0.1").actual_rows == 1


# ---------------------------------------------------------------- properties

ROW = st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", "c"]))


@settings(max_examples=200, deadline=None)
@given(
    gold=st.lists(ROW, max_size=6),
    actual=st.lists(ROW, max_size=6),
    copies=st.lists(st.integers(1, 3), min_size=6, max_size=6),
    data=st.data(),
)
def test_permuting_and_duplicating_answer_rows_never_changes_a_set_verdict(
    gold, actual, copies, data
) -> None:
    base = cmp(NS, gold, NS, actual, rows="set")
    more = [row for row, k in zip(actual, copies, strict=False) for _ in range(k)]
    shuffled = data.draw(st.permutations(more))
    assert cmp(NS, gold, NS, shuffled, rows="set") == base
    # and the verdict is BIRD's: F1 = 1 exactly when the row sets are equal
    assert (base.f1 == 1) == (set(gold) == set(actual))
    assert (base.matched, base.expected_rows, base.actual_rows) == (
        len(set(gold) & set(actual)),
        len(set(gold)),
        len(set(actual)),
    )


# DOUBLE cells as the cell encoding spells them: the shortest repr of a float
AMOUNTS = st.integers(0, 500).map(lambda n: repr(n / 100))


@settings(max_examples=150, deadline=None)
@given(
    gold=st.lists(AMOUNTS, max_size=5),
    actual=st.lists(AMOUNTS, max_size=5),
    copies=st.lists(st.integers(1, 3), min_size=5, max_size=5),
    data=st.data(),
)
def test_duplicating_and_permuting_within_tolerance_never_changes_a_set_verdict(
    gold, actual, copies, data
) -> None:
    g = [(v,) for v in gold]
    a = [(v,) for v in actual]
    base = cmp(D, g, D, a, rows="set", abs_tol="0.1")
    more = [row for row, k in zip(a, copies, strict=False) for _ in range(k)]
    shuffled = data.draw(st.permutations(more))
    assert cmp(D, g, D, shuffled, rows="set", abs_tol="0.1") == base
