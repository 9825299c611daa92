"""Result comparison: issue 5's exact verdicts, every comparison fine-print rule, properties."""

from __future__ import annotations

import itertools
import math
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ledger.events import Column
from ledger.harness.align import _floats_within, _values_within, column_info
from ledger.harness.compare import Comparison, compare, fraction_to_decimal, rounded, tidy
from ledger.harness.matching import max_matching, unique_perfect_matching

ZERO = Decimal(0)


def col(name: str, type_: str) -> Column:
    return Column(name=name, type=type_)


def cmp(
    gold_cols, gold_rows, actual_cols, actual_rows, *, abs_tol="0", rel_tol="0", order=False
) -> Comparison:
    return compare(
        tuple(gold_cols),
        gold_rows,
        tuple(actual_cols),
        actual_rows,
        abs_tolerance=Decimal(abs_tol),
        rel_tolerance=Decimal(rel_tol),
        order_significant=order,
    )


K = [col("k", "VARCHAR")]
N = [col("n", "INTEGER")]
D = [col("amount", "DOUBLE")]
MONEY = [col("amount", "DECIMAL(10,2)")]


# ---------------------------------------------------------------- issue 5, item 1


def test_duplicates_count_gold_aab_vs_abb():
    c = cmp(K, [("A",), ("A",), ("B",)], K, [("A",), ("B",), ("B",)])
    assert (c.matched, c.expected_rows, c.actual_rows) == (2, 3, 3)
    assert c.precision == Decimal("0.6666666667")  # 2/3, shown to 10 places
    assert c.recall == Decimal("0.6666666667")
    assert c.f1 == Decimal("0.6666666667")
    assert not c.order_ok


def test_reordered_rows_pass_when_order_does_not_matter():
    c = cmp(K, [("A",), ("B",), ("C",)], K, [("C",), ("A",), ("B",)])
    assert (c.matched, c.f1, c.order_ok) == (3, Decimal(1), True)


@pytest.mark.parametrize(
    ("cols", "gold", "actual", "expected_matched"),
    [
        (K, [("A",), ("B",)], [("A",)], 1),
        (K, [("A",), ("B",)], [("A",), ("B",), ("B",)], 2),
        (N, [(None,), (1,)], [(0,), (1,)], 1),
        (MONEY, [("100.00",)], [("100.01",)], 0),
    ],
    ids=["missing row", "extra duplicate row", "NULL replaced by 0", "100.00 vs 100.01, no tol"],
)
def test_each_of_these_fails(cols, gold, actual, expected_matched):
    c = cmp(cols, gold, cols, actual)
    assert c.matched == expected_matched
    assert c.f1 < 1
    assert not c.order_ok


def test_integer_column_12_equals_12_0():
    c = cmp(N, [(12,)], [col("n", "DOUBLE")], [("12.0",)])
    assert c.f1 == 1
    c = cmp(N, [(12,)], [col("n", "DECIMAL(5,1)")], [("12.0",)])
    assert c.f1 == 1


def test_integer_column_12_4_fails_even_with_money_tolerance():
    c = cmp(N, [(12,)], [col("n", "DOUBLE")], [("12.4",)], abs_tol="0.5")
    assert c.matched == 0
    c = cmp(N, [(12,)], [col("n", "DOUBLE")], [("12.4",)], rel_tol="0.5")
    assert c.matched == 0
    # the same value in a DOUBLE gold column passes with that tolerance
    assert cmp(D, [("12.0",)], D, [("12.4",)], abs_tol="0.5").f1 == 1


def test_column_permutation_with_distinct_names_passes_rows_fails_names():
    gold_cols = [col("region", "VARCHAR"), col("total", "BIGINT")]
    actual_cols = [col("total", "BIGINT"), col("region", "VARCHAR")]
    c = cmp(gold_cols, [("n", 3), ("s", 4)], actual_cols, [(4, "s"), (3, "n")])
    assert c.alignment == "names"
    assert c.column_mapping == (1, 0)
    assert c.f1 == 1
    assert c.column_count_ok
    assert not c.column_names_ok


def test_two_equal_numeric_columns_with_unknown_names_are_ambiguous():
    gold_cols = [col("revenue", "DOUBLE"), col("cost", "DOUBLE")]
    actual_cols = [col("x", "DOUBLE"), col("y", "DOUBLE")]
    rows = [("1.5", "1.5"), ("2.0", "2.0")]
    c = cmp(gold_cols, rows, actual_cols, rows)
    assert c.alignment == "ambiguous"
    assert c.column_mapping is None
    assert (c.precision, c.recall, c.f1) == (0, 0, 0)
    assert not c.column_names_ok
    assert not c.order_ok


def test_extra_duplicate_row_loses_order_when_order_does_not_matter():
    c = cmp(K, [("A",), ("B",), ("C",)], K, [("A",), ("B",), ("C",), ("C",)])
    assert c.matched == 3
    assert c.precision == Decimal("0.75")
    assert c.recall == 1
    assert c.f1 == Decimal("0.8571428571")  # 6/7
    assert not c.order_ok


# ---------------------------------------------------------------- cells


def test_null_is_its_own_value():
    assert cmp(N, [(None,)], N, [(None,)]).f1 == 1
    assert cmp(N, [(None,)], [col("n", "DOUBLE")], [(None,)]).f1 == 1
    assert cmp(K, [(None,)], K, [("",)]).f1 == 0
    assert cmp(D, [(None,)], D, [("0.0",)], abs_tol="1").f1 == 0


@pytest.mark.parametrize(
    ("gold", "actual", "abs_tol", "rel_tol", "passes"),
    [
        ("100.00", "100.01", "0.01", "0", True),  # inclusive <=
        ("100.00", "100.02", "0.01", "0", False),
        ("100", "101", "0", "0.01", True),  # 1 <= 0.01 * 101
        ("100", "102", "0", "0.01", False),  # 2 > 0.01 * 102
        ("-100", "-101", "0", "0.01", True),
        ("1.1", "1.0", "0.1", "0", True),  # in floats 1.1 - 1.0 > 0.1
        ("0.0", "-0.0", "0", "0", True),
    ],
)
def test_tolerance_rule(gold, actual, abs_tol, rel_tol, passes):
    c = cmp(D, [(gold,)], D, [(actual,)], abs_tol=abs_tol, rel_tol=rel_tol)
    assert (c.f1 == 1) is passes


def test_numbers_compare_by_value_across_numeric_types():
    cols_a = [col("v", "DECIMAL(12,2)")]
    assert cmp(D, [("1.0",)], cols_a, [("1.00",)]).f1 == 1
    assert cmp(cols_a, [("1.10",)], D, [("1.1",)]).f1 == 1
    big = [col("v", "HUGEINT")]
    assert (
        cmp(
            big, [("123456789012345678901234567890",)], big, [("123456789012345678901234567890",)]
        ).f1
        == 1
    )


def test_strings_are_nfc_and_never_trimmed():
    assert cmp(K, [("caf\u00e9",)], K, [("cafe\u0301",)]).f1 == 1
    assert cmp(K, [("a",)], K, [("a ",)]).f1 == 0
    assert cmp(K, [("a",)], K, [("A",)]).f1 == 0


def test_date_never_equals_string_or_timestamp():
    dates = [col("d", "DATE")]
    assert cmp(dates, [("2026-09-30",)], K, [("2026-09-30",)]).f1 == 0
    ts = [col("d", "TIMESTAMP")]
    assert cmp(dates, [("2026-09-30",)], ts, [("2026-09-30T00:00:00.000000",)]).f1 == 0


def test_boolean_never_equals_a_number():
    assert cmp([col("b", "BOOLEAN")], [(True,)], N, [(1,)]).f1 == 0


def test_naive_timestamp_is_read_as_utc():
    naive = [col("t", "TIMESTAMP")]
    aware = [col("t", "TIMESTAMP WITH TIME ZONE")]
    c = cmp(naive, [("2026-09-30T16:00:00.000000",)], aware, [("2026-09-30T16:00:00.000000Z",)])
    assert c.f1 == 1
    c = cmp(naive, [("2026-09-30T16:00:00.000000",)], aware, [("2026-09-30T15:00:00.000000Z",)])
    assert c.f1 == 0


def test_list_cells_compare_as_values():
    lists = [col("l", "INTEGER[]")]
    assert cmp(lists, [([1, 2],)], lists, [([1, 2],)]).f1 == 1
    assert cmp(lists, [([1, 2],)], lists, [([2, 1],)]).f1 == 0


# ---------------------------------------------------------------- non-finite


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("abs_tol", ["0", "0.5"], ids=["exact path", "tolerance path"])
def test_non_finite_cell_rejects_the_whole_result(bad, abs_tol):
    gold_cols = [col("k", "VARCHAR"), col("v", "DOUBLE")]
    gold = [("a", "1.0"), ("b", "2.0")]
    c = cmp(gold_cols, gold, gold_cols, [("a", "1.0"), ("b", bad)], abs_tol=abs_tol)
    assert c.non_finite
    assert (c.matched, c.precision, c.recall, c.f1, c.order_ok) == (0, 0, 0, 0, False)
    assert c.column_count_ok
    assert c.column_names_ok  # still judged
    # even when the matching rows alone would be a perfect answer to a one-row gold
    c = cmp(gold_cols, gold[:1], gold_cols, [("a", "1.0"), ("x", bad)], abs_tol=abs_tol)
    assert c.matched == 0


def test_non_finite_inside_a_list_of_doubles_rejects_the_result():
    lists = [col("l", "DOUBLE[]")]
    assert cmp(lists, [(["1.0"],)], lists, [(["NaN"],)]).non_finite


def test_nan_text_in_a_string_column_is_just_text():
    c = cmp(K, [("NaN",)], K, [("NaN",)])
    assert not c.non_finite
    assert c.f1 == 1


def test_non_finite_gold_is_refused():
    with pytest.raises(ValueError, match="non-finite"):
        cmp(D, [("NaN",)], D, [("1.0",)])


# ---------------------------------------------------------------- precision / recall edges


@pytest.mark.parametrize(
    ("gold", "actual", "p", "r", "f1"),
    [
        ([], [], 1, 1, 1),
        ([], [("A",)], 0, 0, 0),
        ([("A",)], [], 0, 0, 0),
        ([("A",)], [("B",)], 0, 0, 0),
    ],
    ids=["both empty", "gold empty", "actual empty", "nothing matches"],
)
def test_empty_sides(gold, actual, p, r, f1):
    c = cmp(K, gold, K, actual)
    assert (c.precision, c.recall, c.f1) == (p, r, f1)
    assert c.order_ok is (f1 == 1)


def test_ambiguous_scores_zero_even_when_both_sides_are_empty():
    gold_cols = [col("a", "INTEGER"), col("b", "INTEGER")]
    c = cmp(gold_cols, [], [col("x", "INTEGER"), col("y", "INTEGER")], [])
    assert c.alignment == "ambiguous"
    assert (c.precision, c.recall, c.f1, c.order_ok) == (0, 0, 0, False)


# ---------------------------------------------------------------- alignment


def test_column_count_mismatch_is_no_mapping():
    c = cmp(K, [("A",)], [*K, col("n", "INTEGER")], [("A", 1)])
    assert c.alignment == "count_mismatch"
    assert c.column_mapping is None
    assert not c.column_count_ok
    assert not c.column_names_ok
    assert (c.matched, c.f1, c.order_ok) == (0, 0, False)


def test_names_are_casefolded_without_quotes():
    c = cmp([col("Total", "BIGINT")], [(1,)], [col('"TOTAL"', "BIGINT")], [(1,)])
    assert c.alignment == "names"
    assert c.column_names_ok
    assert c.f1 == 1


def test_duplicate_names_pair_in_order_of_appearance():
    cols = [col("n", "INTEGER"), col("n", "INTEGER")]
    c = cmp(cols, [(1, 2)], cols, [(1, 2)])
    assert (c.alignment, c.column_mapping, c.f1) == ("names", (0, 1), 1)


def test_unique_fingerprint_maps_renamed_columns():
    gold_cols = [col("region", "VARCHAR"), col("orders", "BIGINT"), col("revenue", "DOUBLE")]
    actual_cols = [col("rev", "DOUBLE"), col("r", "VARCHAR"), col("cnt", "BIGINT")]
    gold = [("n", 3, "10.5"), ("s", 4, "7.25")]
    actual = [("7.25", "s", 4), ("10.5", "n", 3)]
    c = cmp(gold_cols, gold, actual_cols, actual)
    assert (c.alignment, c.column_mapping, c.f1) == ("fingerprint", (1, 2, 0), 1)
    assert not c.column_names_ok


def test_bipartite_alignment_within_tolerance():
    gold_cols = [col("a", "DOUBLE"), col("b", "DOUBLE")]
    actual_cols = [col("y", "DOUBLE"), col("x", "DOUBLE")]
    gold = [("1.0", "50.0"), ("2.0", "60.0")]
    actual = [("50.004", "1.001"), ("59.999", "2.0")]
    c = cmp(gold_cols, gold, actual_cols, actual, abs_tol="0.01")
    assert (c.alignment, c.column_mapping, c.f1) == ("bipartite", (1, 0), 1)


def test_bipartite_alignment_with_several_matchings_is_ambiguous():
    gold_cols = [col("a", "DOUBLE"), col("b", "DOUBLE")]
    actual_cols = [col("y", "DOUBLE"), col("x", "DOUBLE")]
    gold = [("1.000", "1.004")]
    actual = [("1.002", "1.003")]
    c = cmp(gold_cols, gold, actual_cols, actual, abs_tol="0.01")
    assert c.alignment == "ambiguous"
    assert c.f1 == 0


def test_renamed_columns_with_wrong_values_have_no_mapping():
    gold_cols = [col("a", "INTEGER"), col("b", "VARCHAR")]
    actual_cols = [col("x", "INTEGER"), col("y", "VARCHAR")]
    c = cmp(gold_cols, [(1, "p")], actual_cols, [(2, "p")])
    assert (c.alignment, c.column_mapping, c.f1) == ("none", None, 0)


def test_thirty_interchangeable_columns_are_ambiguous_without_enumeration():
    gold_cols = [col(f"g{i}", "DOUBLE") for i in range(30)]
    actual_cols = [col(f"a{i}", "DOUBLE") for i in range(30)]
    rows = [tuple(repr(float(r)) for _ in range(30)) for r in range(50)]
    assert cmp(gold_cols, rows, actual_cols, rows).alignment == "ambiguous"
    noisy = [tuple(repr(float(r) + 0.001) for _ in range(30)) for r in range(50)]
    assert cmp(gold_cols, rows, actual_cols, noisy, abs_tol="0.01").alignment == "ambiguous"


# ---------------------------------------------------------------- rows and order


def test_order_significant_needs_every_position():
    assert cmp(K, [("A",), ("B",)], K, [("A",), ("B",)], order=True).order_ok
    c = cmp(K, [("A",), ("B",)], K, [("B",), ("A",)], order=True)
    assert c.f1 == 1
    assert not c.order_ok
    c = cmp(D, [("1.0",), ("2.0",)], D, [("1.004",), ("1.999",)], abs_tol="0.01", order=True)
    assert c.order_ok
    c = cmp(D, [("1.0",), ("2.0",)], D, [("1.999",), ("1.004",)], abs_tol="0.01", order=True)
    assert (c.f1, c.order_ok) == (1, False)


def test_tolerance_matching_is_maximum_not_greedy():
    # Matching gold 1 with actual 1 first would strand gold 0.1 and actual 1.9.
    c = cmp(D, [("1",), ("0.1",)], D, [("1",), ("1.9",)], abs_tol="1")
    assert c.matched == 2
    wide = [col("k", "VARCHAR"), col("v", "DOUBLE"), col("w", "DOUBLE")]
    gold = [("x", "1", "5"), ("x", "0.1", "5")]
    actual = [("x", "1", "5.5"), ("x", "1.9", "5")]
    assert cmp(wide, gold, wide, actual, abs_tol="1").matched == 2
    # a relative tolerance goes through the checked window
    assert cmp(D, [("100",), ("10",)], D, [("100",), ("14",)], rel_tol="0.9").matched == 2


def test_relative_tolerance_of_one_or_more_has_no_window():
    # rel 1: |e - a| <= max(|e|, |a|) holds for any two numbers of the same sign
    assert cmp(D, [("100",)], D, [("1",)], rel_tol="1").matched == 1
    assert cmp(D, [("100",)], D, [("-1",)], rel_tol="1").matched == 0  # 101 > 100
    assert cmp(D, [("100",)], D, [("-1",)], rel_tol="2").matched == 1  # 101 <= 200


def test_tolerance_partitions_by_exact_cells_and_nulls():
    cols = [col("k", "VARCHAR"), col("v", "DOUBLE")]
    gold = [("a", "1.0"), ("b", "1.0"), ("c", None)]
    actual = [("b", "1.001"), ("a", "0.999"), ("c", None)]
    assert cmp(cols, gold, cols, actual, abs_tol="0.01").matched == 3
    actual = [("a", "1.001"), ("a", "0.999"), ("c", "0")]
    assert cmp(cols, gold, cols, actual, abs_tol="0.01").matched == 1


def test_row_of_wrong_width_is_refused():
    with pytest.raises(ValueError, match="2 cells"):
        cmp([*K, *N], [("A", 1)], [*K, *N], [("A",)])


# ---------------------------------------------------------------- matching module


def _brute_max(adj, n_right):
    best = 0
    n = len(adj)
    for perm in itertools.permutations(range(n_right), min(n, n_right)):
        for left in itertools.combinations(range(n), len(perm)):
            best = max(best, sum(1 for u, v in zip(left, perm, strict=True) if v in adj[u]))
    return best


graphs = st.integers(1, 4).flatmap(
    lambda n: st.tuples(
        st.lists(st.lists(st.integers(0, n - 1), unique=True, max_size=n), min_size=n, max_size=n),
        st.just(n),
    )
)


@given(graphs)
@settings(max_examples=150, deadline=None)
def test_hopcroft_karp_is_maximum(graph):
    adj, n = graph
    size, match_l = max_matching(adj, n)
    assert size == _brute_max(adj, n)
    used = [v for v in match_l if v != -1]
    assert len(used) == len(set(used)) == size
    assert all(v == -1 or v in adj[u] for u, v in enumerate(match_l))


@given(graphs)
@settings(max_examples=150, deadline=None)
def test_unique_perfect_matching_agrees_with_enumeration(graph):
    adj, n = graph
    perfect = [p for p in itertools.permutations(range(n)) if all(p[u] in adj[u] for u in range(n))]
    verdict, match = unique_perfect_matching(adj, n)
    expected = {0: "none", 1: "unique"}.get(len(perfect), "several")
    assert verdict == expected
    if verdict == "unique":
        assert tuple(match) == perfect[0]


# ---------------------------------------------------------------- properties (issue 5, item 2)

cells_ = st.one_of(st.none(), st.integers(0, 3))
row_lists = st.lists(st.tuples(cells_, st.sampled_from(["a", "b"])), max_size=8)
TWO = [col("n", "INTEGER"), col("s", "VARCHAR")]
AMOUNT = [col("k", "VARCHAR"), col("v", "DOUBLE")]
float_rows = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["1.0", "1.05", "1.1", "2.0", None])),
    max_size=8,
)


@given(row_lists, row_lists, st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_shuffling_rows_never_changes_the_verdict(gold, actual, rnd):
    shuffled = actual[:]
    rnd.shuffle(shuffled)
    assert cmp(TWO, gold, TWO, actual) == cmp(TWO, gold, TWO, shuffled)


@given(float_rows, float_rows, st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_shuffling_rows_never_changes_the_verdict_with_tolerance(gold, actual, rnd):
    shuffled = actual[:]
    rnd.shuffle(shuffled)
    assert cmp(AMOUNT, gold, AMOUNT, actual, abs_tol="0.05") == cmp(
        AMOUNT, gold, AMOUNT, shuffled, abs_tol="0.05"
    )


@given(
    st.lists(st.tuples(cells_, st.sampled_from(["a", "b"])), unique=True, max_size=8),
    row_lists.filter(bool),
    st.data(),
)
@settings(max_examples=200, deadline=None)
def test_duplicating_an_actual_row_never_raises_precision(gold, actual, data):
    i = data.draw(st.integers(0, len(actual) - 1))
    before = cmp(TWO, gold, TWO, actual)
    after = cmp(TWO, gold, TWO, [*actual, actual[i]])
    assert after.precision <= before.precision


@given(
    st.lists(st.sampled_from(["1.0", "1.2", "1.4", "2.0", None]), unique=True, max_size=5),
    st.lists(st.sampled_from(["1.0", "1.05", "1.1", "1.2", "2.0", None]), min_size=1, max_size=6),
    st.data(),
)
@settings(max_examples=200, deadline=None)
def test_duplicating_an_actual_row_never_raises_precision_with_tolerance(gold, actual, data):
    # gold rows lie further apart than the tolerance, so no gold row has a twin
    gold_rows = [("a", v) for v in gold]
    actual_rows = [("a", v) for v in actual]
    i = data.draw(st.integers(0, len(actual_rows) - 1))
    before = cmp(AMOUNT, gold_rows, AMOUNT, actual_rows, abs_tol="0.05")
    after = cmp(AMOUNT, gold_rows, AMOUNT, [*actual_rows, actual_rows[i]], abs_tol="0.05")
    assert after.precision <= before.precision


def test_duplicating_a_row_that_gold_also_repeats_is_a_correct_row():
    # The one case where precision rises: gold holds the row twice, the answer once.
    before = cmp(K, [("A",), ("A",)], K, [("A",), ("B",)])
    after = cmp(K, [("A",), ("A",)], K, [("A",), ("B",), ("A",)])
    assert (before.precision, after.precision) == (Decimal("0.5"), Decimal("0.6666666667"))


@given(row_lists, row_lists, st.lists(st.booleans(), min_size=2, max_size=2))
@settings(max_examples=200, deadline=None)
def test_changing_the_case_of_a_column_name_never_changes_f1(gold, actual, upper):
    renamed = [
        col(c.name.upper() if up else c.name.title(), c.type)
        for c, up in zip(TWO, upper, strict=True)
    ]
    assert cmp(TWO, gold, TWO, actual).f1 == cmp(TWO, gold, renamed, actual).f1


# ---------------------------------------------------- alignment: float decision (issue 5 speed)
# Bipartite alignment decides tolerance from floats when far from the boundary and from
# the cells' Decimal values near it. The reference below is the fine print, written out
# here: Decimal(repr(x)) per double, sorted, paired, |e-a| <= max(abs, rel * max(|e|,|a|)).

WIDE = Context(prec=2000, Emax=999999, Emin=-999999)


def reference_within(gold, actual, abs_tol, rel_tol):
    g = sorted(Decimal(repr(x)) for x in gold)
    a = sorted(Decimal(repr(x)) for x in actual)
    with localcontext(WIDE):
        return all(
            abs(e - x) <= max(abs_tol, rel_tol * max(abs(e), abs(x)))
            for e, x in zip(g, a, strict=True)
        )


def double_column(values):
    return column_info(col("v", "DOUBLE"), [(repr(x),) for x in values], 0)


def nudge(x, steps):
    """``x`` moved by ``steps`` ulps."""
    for _ in range(abs(steps)):
        x = math.nextafter(x, math.inf if steps > 0 else -math.inf)
    return x


tolerances = st.builds(
    lambda digits, exp: Decimal(digits).scaleb(exp), st.integers(0, 10**6), st.integers(-25, 3)
)
moderate = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False)


@st.composite
def boundary_pairs(draw):
    """A double, a tolerance, and a partner a few ulps around the tolerance boundary."""
    e = draw(moderate)
    abs_tol, rel_tol = draw(tolerances), draw(st.one_of(st.just(ZERO), tolerances))
    with localcontext(WIDE):
        ed = Decimal(repr(e))
        if draw(st.booleans()) or rel_tol == 0 or rel_tol >= 1:
            edge = ed + abs_tol if draw(st.booleans()) else ed - abs_tol
        else:  # |a - e| = rel * |a| for |a| > |e| on the same side
            edge = ed / (1 - rel_tol)
    a = nudge(float(edge), draw(st.integers(-3, 3)))
    assume(math.isfinite(a) and abs(a) <= 1e300)
    return e, a, abs_tol, rel_tol


def test_hundred_and_a_cent_is_within_a_cent():
    # In floats 100.01 - 100.0 = 0.010000000000005116 > 0.01; the Decimal values are exact.
    gold, actual = double_column([100.00]), double_column([100.01])
    assert _values_within(gold, actual, Decimal("0.01"), ZERO) is True
    assert _values_within(gold, actual, Decimal("0.0099999999999999"), ZERO) is False
    assert _values_within(double_column([99.0]), double_column([100.0]), ZERO, Decimal("0.01"))
    assert not _values_within(
        double_column([99.0]), double_column([100.0]), ZERO, Decimal("0.0099")
    )


def test_bipartite_alignment_at_the_exact_boundary():
    gold_cols = [col("a", "DOUBLE"), col("b", "DOUBLE")]
    actual_cols = [col("y", "DOUBLE"), col("x", "DOUBLE")]
    gold = [("100.0", "7.5"), ("200.0", "8.5")]
    actual = [("7.49", "100.01"), ("8.51", "200.01")]
    c = cmp(gold_cols, gold, actual_cols, actual, abs_tol="0.01")
    assert (c.alignment, c.column_mapping, c.f1) == ("bipartite", (1, 0), 1)
    c = cmp(gold_cols, gold, actual_cols, actual, abs_tol="0.00999")
    assert (c.alignment, c.f1) == ("none", 0)


def test_columns_far_from_the_boundary_never_convert_to_decimal():
    gold, near, far = (
        double_column([1.5, 2.5]),
        double_column([1.5001, 2.4999]),
        double_column([9.0, 2.5]),
    )
    assert _values_within(gold, near, Decimal("0.001"), ZERO) is True
    assert _values_within(gold, far, Decimal("0.001"), ZERO) is False
    for info in (gold, near, far):
        assert "sorted_raw" not in vars(info)
        assert "sorted_numbers" not in vars(info)


@given(boundary_pairs())
@settings(max_examples=1500, deadline=None)
def test_float_decision_equals_decimal_decision_at_the_boundary(pair):
    e, a, abs_tol, rel_tol = pair
    expected = reference_within([e], [a], abs_tol, rel_tol)
    fast = _floats_within(double_column([e]), double_column([a]), abs_tol, rel_tol)
    if max(abs(e), abs(a)) * max(1.0, float(rel_tol)) < 1e290 and "-0.0" not in (
        repr(e),
        repr(a),
    ):
        assert fast is expected  # decided by floats, or by Decimal for the close positions
    else:  # near the double range, or a -0.0 spelling: the Decimal path decides
        assert fast in (None, expected)
    assert _values_within(double_column([e]), double_column([a]), abs_tol, rel_tol) is expected


@given(
    st.lists(st.tuples(moderate, st.integers(-2, 2)), max_size=8),
    tolerances,
    st.one_of(st.just(ZERO), tolerances),
    st.randoms(use_true_random=False),
)
@settings(max_examples=500, deadline=None)
def test_float_decision_equals_decimal_decision_on_columns(cells, abs_tol, rel_tol, rnd):
    gold = [e for e, _ in cells]
    actual = [nudge(float(Decimal(repr(e)) + abs_tol), k) if k else e for e, k in cells]
    assume(all(math.isfinite(x) for x in actual))
    rnd.shuffle(actual)
    expected = reference_within(gold, actual, abs_tol, rel_tol)
    assert _values_within(double_column(gold), double_column(actual), abs_tol, rel_tol) is expected


@given(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(allow_nan=False, allow_infinity=False),
    tolerances,
    st.one_of(st.just(ZERO), tolerances),
)
@settings(max_examples=500, deadline=None)
def test_any_two_doubles_decide_as_their_decimal_values(e, a, abs_tol, rel_tol):
    # Includes subnormals and magnitudes near the double range (where floats defer to Decimal).
    expected = reference_within([e], [a], abs_tol, rel_tol)
    assert _values_within(double_column([e]), double_column([a]), abs_tol, rel_tol) is expected


# ------------------------------------------------ issue 31: numeric without a declared scale
UNSCALED = [col("total", "DECIMAL")]  # PostgreSQL's numeric of SUM(x), AVG(x) * COUNT(*)


def test_unscaled_decimal_compares_by_value_not_by_spelling():
    # PostgreSQL: SUM(x) over DECIMAL(12,2) -> 9600.00; AVG(x) * COUNT(*) -> numeric with 16
    # fractional digits. One value: right.
    c = cmp(UNSCALED, [["9600.00"]], UNSCALED, [["9600.0000000000000000"]])
    assert (c.matched, c.expected_rows, c.actual_rows) == (1, 1, 1)
    assert cmp(UNSCALED, [["9600.00"]], UNSCALED, [["9600.01"]]).matched == 0
    # Rows and order by value too: 1.5 then 9600 in both.
    c = cmp(UNSCALED, [["1.5"], ["9600.00"]], UNSCALED, [["1.50"], ["9600"]], order=True)
    assert (c.matched, c.order_ok) == (2, True)
    # Duplicates still count: 2 and 2.0 are the same value twice.
    c = cmp(UNSCALED, [["2"]], UNSCALED, [["2.0"], ["2.00"]])
    assert (c.matched, c.actual_rows) == (1, 2)
    # A declared scale keeps one spelling per value: unchanged.
    fixed = [col("total", "DECIMAL(12,2)")]
    assert cmp(fixed, [["9600.00"]], UNSCALED, [["9600.0000"]]).matched == 1


@given(
    st.decimals(min_value=-(10**9), max_value=10**9, places=4, allow_nan=False),
    st.integers(0, 20),
    st.integers(0, 20),
)
def test_unscaled_decimal_any_two_spellings_of_one_value_match(d, s1, s2):
    # 10 digits before the point and up to 20 after: more than the default context's
    # 28 digits of precision, so the spellings are made under a wider one.
    with localcontext(prec=40):
        a = d.quantize(Decimal(1).scaleb(-max(s1, 4)))
        b = d.quantize(Decimal(1).scaleb(-max(s2, 4)))
    assert a == b
    assert cmp(UNSCALED, [[str(a)]], UNSCALED, [[str(b)]]).matched == 1


# ------------------------------------------------- rounding an exact fraction (issue 34)


def test_fraction_to_decimal_by_hand() -> None:
    # 90/7 = 12.857...: 12.86; 1/200 = 0.005 rounds half away from zero: 0.01; -1/200: -0.01;
    # -1/1000 at two places is a negative zero, as DuckDB and Decimal write it; 5/2 at
    # exponent +1 (tens) is 0.25 tens: 0E+1; 25 at tens: 2.5 tens, half up: 3E+1.
    assert fraction_to_decimal(Fraction(90, 7), Decimal("0.01")) == Decimal("12.86")
    assert str(fraction_to_decimal(Fraction(1, 200), Decimal("0.01"))) == "0.01"
    assert str(fraction_to_decimal(Fraction(-1, 200), Decimal("0.01"))) == "-0.01"
    assert str(fraction_to_decimal(Fraction(-1, 1000), Decimal("0.01"))) == "-0.00"
    assert str(fraction_to_decimal(Fraction(5, 2), Decimal("1E+1"))) == "0E+1"
    assert str(fraction_to_decimal(Fraction(25), Decimal("1E+1"))) == "3E+1"
    assert str(fraction_to_decimal(Fraction(2, 3), Decimal("1E-10"))) == "0.6666666667"


@given(
    st.fractions(max_denominator=10**12).filter(lambda f: abs(f) < 10**15),
    st.integers(min_value=-12, max_value=3),
)
def test_fraction_to_decimal_is_half_up_rounding_of_the_exact_value(
    value: Fraction, exponent: int
) -> None:
    places = Decimal((0, (1,), exponent))
    # Oracle: Decimal division at 300 digits (exact wherever a tie is possible: a tie's
    # quotient has a finite decimal expansion), then the standard half-up quantize.
    with localcontext(Context(prec=300)):
        expected = (Decimal(value.numerator) / Decimal(value.denominator)).quantize(
            places, rounding=ROUND_HALF_UP
        )
    found = fraction_to_decimal(value, places)
    assert found == expected
    assert found.as_tuple() == expected.as_tuple()  # the same digits, sign and exponent


@given(
    st.fractions(max_denominator=10**12).filter(lambda f: abs(f) < 10**15),
    st.integers(min_value=-12, max_value=3),
)
def test_rounded_is_tidy_of_the_rounded_fraction(value: Fraction, exponent: int) -> None:
    # rounded() works on integers; it must give tidy(fraction_to_decimal(...)) exactly:
    # the same digits, sign and exponent (the bytes of every score item and ratio).
    places = Decimal((0, (1,), exponent))
    expected = tidy(fraction_to_decimal(value, places))
    assert rounded(value, places).as_tuple() == expected.as_tuple()


def test_rounded_by_hand() -> None:
    # 1/2 at ten places is 0.5000000000, tidied to 0.5; 25 at tens is 3E+1, written 30;
    # -1/1000 at two places is -0.00, tidied to -0; 2/3 at ten places keeps its digits.
    assert str(rounded(Fraction(1, 2), Decimal("1E-10"))) == "0.5"
    assert str(rounded(Fraction(25), Decimal("1E+1"))) == "30"
    assert str(rounded(Fraction(-1, 1000), Decimal("0.01"))) == "-0"
    assert str(rounded(Fraction(2, 3), Decimal("1E-10"))) == "0.6666666667"
    assert str(rounded(Fraction(7), Decimal("0.01"))) == "7"
