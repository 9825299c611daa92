"""Issue 16: the benchmark's own EX (projections/benchmark.py), worked out by hand.

BIRD's rule is ``set(pred) == set(gold)`` over the rows SQLite returns, and a
prediction that raises counts 0. Examples: gold rows (1,), (1,), (2,) as a set
are {1, 2}; a prediction (2,), (1,) is the same set (EX 1) though caseledger,
counting rows, finds one row missing.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET

from ledger.codec import sha256_hex
from ledger.events import (
    BenchmarkCase,
    CaseSpec,
    Column,
    GoldResult,
    OutputParsed,
    ScoreComputed,
    ScoreItems,
    SqlExecuted,
    SqlGuarded,
    Violation,
)
from projections import quality
from projections.benchmark import benchmark_ex, reason, spider_rows_match, spider_verdict
from projections.caseruns import Attempt
from projections.quality import imported_only

INT = (Column(name="n", type="BIGINT"),)
REAL = (Column(name="x", type="DOUBLE"),)
TEXT = (Column(name="s", type="VARCHAR"),)
_ENV: dict[str, Any] = {"stream": "r", "stream_seq": 0, "stream_prev": None, "at": "t"}


def _gold(columns: tuple[Column, ...], rows: list[tuple[Any, ...]]) -> GoldResult:
    return GoldResult(case_id="c", columns=columns, rows=tuple(rows), digest="d")


def _ran(
    columns: tuple[Column, ...],
    rows: list[tuple[Any, ...]],
    *,
    ok: bool = True,
    error_kind: str | None = None,
    truncated: bool = False,
) -> SqlExecuted:
    return SqlExecuted(
        **_ENV, case_id="c", attempt=1, ok=ok, error_kind=error_kind,
        error_message=None if ok else "boom", columns=columns, rows=tuple(rows),
        row_count=len(rows), truncated=truncated, sql_us=1,
    )  # fmt: skip


def _guarded(*checks: str) -> SqlGuarded:
    violations = tuple(Violation(check=c, message="m") for c in checks)
    return SqlGuarded(**_ENV, case_id="c", attempt=1, passed=False, violations=violations,
                      ast_digest=None)  # fmt: skip


def test_sets_equal_though_duplicates_differ() -> None:
    gold = _gold(INT, [(1,), (1,), (2,)])
    assert benchmark_ex(gold, _ran(INT, [(2,), (1,)])) is True
    assert benchmark_ex(gold, _ran(INT, [(2,)])) is False


def test_integer_equals_real_as_in_python() -> None:
    # SQLite returns 1 for an INTEGER column and 1.0 for a REAL one: Python's 1 == 1.0.
    assert benchmark_ex(_gold(INT, [(1,)]), _ran(REAL, [("1.0",)])) is True
    assert benchmark_ex(_gold(INT, [(1,)]), _ran(REAL, [("1.5",)])) is False
    # Text '1' is not the number 1.
    assert benchmark_ex(_gold(INT, [(1,)]), _ran(TEXT, [("1",)])) is False


def test_column_order_matters_to_the_benchmark() -> None:
    two = (Column(name="a", type="BIGINT"), Column(name="b", type="VARCHAR"))
    swapped = (Column(name="b", type="VARCHAR"), Column(name="a", type="BIGINT"))
    gold = _gold(two, [(1, "x")])
    assert benchmark_ex(gold, _ran(two, [(1, "x")])) is True
    assert benchmark_ex(gold, _ran(swapped, [("x", 1)])) is False


def test_failures_count_wrong_and_safety_refusals_are_undecided() -> None:
    gold = _gold(INT, [(1,)])
    assert benchmark_ex(gold, _ran(INT, [], ok=False, error_kind="sql_runtime")) is False
    assert benchmark_ex(gold, _ran(INT, [], ok=False, error_kind="timeout")) is False
    assert benchmark_ex(gold, _ran(INT, [], ok=False, error_kind="refused")) is False
    assert benchmark_ex(gold, _ran(INT, [], ok=False, error_kind="worker_crash")) is None
    assert benchmark_ex(gold, None, _guarded("parse")) is False
    assert benchmark_ex(gold, None, _guarded("single_statement")) is False
    assert benchmark_ex(gold, None, _guarded("parse", "function_allowlist")) is None
    assert benchmark_ex(gold, None, None) is None


def test_truncated_result_is_decided_only_by_a_row_outside_the_gold() -> None:
    gold = _gold(INT, [(1,), (2,)])
    assert benchmark_ex(gold, _ran(INT, [(1,), (1,)], truncated=True)) is None
    assert benchmark_ex(gold, _ran(INT, [(1,), (3,)], truncated=True)) is False


def test_null_is_a_value() -> None:
    gold = _gold(TEXT, [(None,), ("a",)])
    assert benchmark_ex(gold, _ran(TEXT, [("a",), (None,), (None,)])) is True
    assert benchmark_ex(gold, _ran(TEXT, [("a",)])) is False


@given(
    st.lists(st.tuples(st.integers(-3, 3)), max_size=8),
    st.lists(st.tuples(st.integers(-3, 3)), max_size=8),
    st.randoms(use_true_random=False),
)
def test_ex_is_set_equality_whatever_the_order(
    gold_rows: list[tuple[int]], pred_rows: list[tuple[int]], rnd: Any
) -> None:
    shuffled = list(pred_rows)
    rnd.shuffle(shuffled)
    want = set(gold_rows) == set(pred_rows)
    assert benchmark_ex(_gold(INT, gold_rows), _ran(INT, shuffled)) is want


def _refused_by_guard(sql: str) -> SqlGuarded:
    from ledger.harness.guard import guard

    verdict = guard(sql, {"item"}, engine="sqlite")
    assert not verdict.passed
    return SqlGuarded(**_ENV, case_id="c", attempt=1, passed=False,
                      violations=verdict.violations, ast_digest=None)  # fmt: skip


def test_sql_the_engine_itself_would_reject_counts_wrong() -> None:
    # BIRD's evaluator runs these on SQLite, which raises: 0. The guard's own words
    # (function not in SQLite's list, table not in the database, not a statement).
    gold = _gold(INT, [(1,)])
    for sql in (
        "SELECT MULTIPLY(2, 3) FROM item",  # SQLite has no such function
        "SELECT 1 FROM dual",  # no such table
        "```SQLite\nSELECT 1 FROM item",  # not SQL
    ):
        assert benchmark_ex(gold, None, _refused_by_guard(sql)) is False, sql
    # Refused for safety: SQLite would run it, so the record cannot decide.
    for sql in ("SELECT load_extension('x') FROM item", "SELECT name FROM sqlite_master",
                "DELETE FROM item"):  # fmt: skip
        assert benchmark_ex(gold, None, _refused_by_guard(sql)) is None, sql


# ------------------------------------------------------------ Spider's rule (issue 31)
# test-suite-sql-eval exec_eval.py result_eq / eval_exec_match, worked out by hand.


def test_spider_counts_duplicates_where_bird_does_not() -> None:
    # gold UNION ALL gold: the same set, twice the rows. BIRD: correct; Spider: wrong.
    gold = [(1,), (2,)]
    assert spider_rows_match(gold, [(1,), (2,), (1,), (2,)], False) is False
    assert benchmark_ex(_gold(INT, gold), _ran(INT, [(1,), (2,), (1,), (2,)])) is True
    assert spider_rows_match([(1,), (1,), (2,)], [(2,), (1,), (1,)], False) is True
    assert spider_rows_match([(1,), (1,), (2,)], [(2,), (2,), (1,)], False) is False


def test_spider_accepts_any_column_permutation() -> None:
    assert spider_rows_match([(1, "x"), (2, "y")], [("y", 2), ("x", 1)], False) is True
    # A permutation must be one for all rows: column values cannot be re-paired.
    assert spider_rows_match([(1, "x"), (2, "y")], [("x", 2), ("y", 1)], False) is False
    # Five columns (Spider narrows permutations by sampling rows beyond three).
    gold = [(1, 2, 3, 4, 5), (6, 7, 8, 9, 10)]
    assert spider_rows_match(gold, [(5, 4, 3, 2, 1), (10, 9, 8, 7, 6)], False) is True
    assert spider_rows_match(gold, [(5, 4, 3, 2, 1), (10, 9, 8, 6, 7)], False) is False


def test_spider_keeps_row_order_only_under_order_by() -> None:
    assert spider_rows_match([(2,), (1,)], [(1,), (2,)], True) is False
    assert spider_rows_match([(2,), (1,)], [(1,), (2,)], False) is True
    assert spider_rows_match([(2, "b"), (1, "a")], [("b", 2), ("a", 1)], True) is True


def test_spider_values_and_edges() -> None:
    assert spider_rows_match([(1,)], [(1.0,)], False) is True  # Python: 1 == 1.0
    assert spider_rows_match([(1,)], [("1",)], False) is False
    assert spider_rows_match([(None,)], [(None,)], False) is True
    # Two empty results are equal whatever their columns; one empty one not, never.
    assert spider_rows_match([], [], False) is True
    assert spider_rows_match([], [(1,)], False) is False
    assert spider_rows_match([(1,)], [(1, 2)], False) is False
    # Spider's quick check sorts each row's values by str(v) + str(type(v)): (1, '1.5')
    # sorts as ('1.5', 1) ('1.5<' < '1<'), (1.0, '1.5') as (1.0, '1.5'); the sorted
    # rows differ, so Spider says wrong though the rows are equal value by value.
    assert spider_rows_match([(1, "1.5")], [(1.0, "1.5")], False) is False


@given(
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from("ab"), st.integers(5, 6)),
             min_size=1, max_size=6),
    st.permutations([0, 1, 2]),
    st.randoms(use_true_random=False),
)  # fmt: skip
def test_spider_property_shuffled_rows_and_columns_match(
    rows: list[tuple[Any, ...]], perm: list[int], rnd: Any
) -> None:
    moved = [tuple(r[j] for j in perm) for r in rows]
    rnd.shuffle(moved)
    assert spider_rows_match(rows, moved, False) is True
    assert spider_rows_match(rows, [*moved, moved[0]], False) is False
    assert spider_rows_match(rows, [tuple(r[j] for j in perm) for r in rows], True) is True


def _case(**bench: Any) -> CaseSpec:
    return CaseSpec(
        id="c", dimension="d", difficulty="easy", weight=Decimal(1), question="q",
        max_rows=10, reference_sql_sha256=sha256_hex(GOLD_SQL.encode("utf-8")),
        benchmark=BenchmarkCase(index=0, **bench),
    )  # fmt: skip


GOLD_SQL = "SELECT DISTINCT country FROM singer"


def _attempt(sql: str, execution: SqlExecuted | None) -> Attempt:
    parsed = OutputParsed(**_ENV, case_id="c", attempt=1, protocol_strict=False,
                          recovered_from_fence=False, plan=None, sql=sql, summary=None,
                          assumptions=None, error=None, imported=True)  # fmt: skip
    runs = () if execution is None else (execution,)
    return Attempt(run_id="r", case_id="c", attempt=1, outcome="scored", parsed=parsed,
                   executions=runs)  # fmt: skip


def test_spider_verdict_distinct_is_deleted_before_running() -> None:
    case = _case(distinct="select")
    gold = _gold(TEXT, [("France",), ("Netherlands",)])
    # The gold's own text: both sides lose DISTINCT alike, the record decides.
    same = _attempt(GOLD_SQL, _ran(TEXT, [("Netherlands",), ("France",)]))
    assert spider_verdict(case, gold, same) == (True, None)
    # No rows where the gold has some: still none without DISTINCT -> wrong.
    empty = _attempt("SELECT country FROM singer WHERE 0", _ran(TEXT, []))
    assert spider_verdict(case, gold, empty) == (False, None)
    # Another set of rows: wrong whatever DISTINCT adds.
    other = _attempt("SELECT country FROM singer WHERE 1", _ran(TEXT, [("France",)]))
    assert spider_verdict(case, gold, other) == (False, None)
    # The same set, three rows: the gold without DISTINCT has two or more, unknown.
    more = _attempt("SELECT country FROM singer",
                    _ran(TEXT, [("France",), ("France",), ("Netherlands",)]))  # fmt: skip
    ex, why = spider_verdict(case, gold, more)
    assert ex is None
    assert why is not None
    assert "keep_distinct=False" in why
    # DISTINCT inside an aggregate changes values when it goes: undecided.
    count = _attempt("SELECT count(DISTINCT country) FROM singer", _ran(INT, [(2,)]))
    assert spider_verdict(_case(), _gold(INT, [(2,)]), count)[0] is None
    # Neither side has DISTINCT: decided, multiset.
    plain = _attempt("SELECT country FROM singer", _ran(TEXT, [("France",), ("France",)]))
    assert spider_verdict(_case(), _gold(TEXT, [("France",)]), plain) == (False, None)


def test_spider_verdict_rewrites_and_order() -> None:
    gold = _gold(INT, [(2,), (1,)])
    # Spider turns "> =" into ">=" before running: the record ran another text.
    spaced = _attempt(
        "SELECT n FROM t WHERE n > = 1", _ran(INT, [], ok=False, error_kind="sql_runtime")
    )
    ex, why = spider_verdict(_case(), gold, spaced)
    assert ex is None
    assert why is not None
    assert "'> ='" in why
    flipped = _attempt("SELECT n FROM t ORDER BY n", _ran(INT, [(1,), (2,)]))
    assert spider_verdict(_case(order_by=True), gold, flipped) == (False, None)
    assert spider_verdict(_case(), gold, flipped) == (True, None)
    failed = _attempt("SELECT nope", _ran(INT, [], ok=False, error_kind="sql_runtime"))
    assert spider_verdict(_case(), gold, failed) == (False, None)


def test_format_ok_does_not_apply_to_benchmark_predictions_only() -> None:
    imported = _attempt("SELECT 1", None)
    own = msgspec.structs.replace(
        imported, parsed=msgspec.structs.replace(imported.parsed, imported=UNSET)
    )
    assert imported_only([imported, imported]) is True
    assert imported_only([imported, own]) is False  # a model's own answer: format-ok counts
    assert imported_only([]) is False
    assert quality.summarize([imported]).format_ok_rate is None
    assert quality.summarize([own]).format_ok_rate == "0.0000"


def test_spider_reasons_speak_of_spiders_rule() -> None:
    items = ScoreItems(protocol=Decimal(0), guard=Decimal(5), executed=Decimal(10),
                       column_count=Decimal(5), column_names=Decimal(5), rows=Decimal(45),
                       order=Decimal(10), ast=Decimal(15))  # fmt: skip
    sample = ScoreComputed(
        **_ENV, case_id="c", attempt=1, scorer_version="2.0.0", evidence=(), gold_digest="d",
        alignment="names", column_mapping=(0,), matched=2, expected_rows=2, actual_rows=2,
        precision=Decimal(1), recall=Decimal(1), f1=Decimal(1), order_ok=True,
        non_finite=False, ast_rules=(), items=items, total=Decimal(95), result_correct=True,
        format_ok=False, failure_kind="none", sql_structural_match=None,
    )  # fmt: skip
    # caseledger accepts rows in any order; Spider keeps the gold's ORDER BY order.
    accepted = msgspec.structs.replace(sample, case_id="c", result_correct=True,
                                       column_mapping=(0,))  # fmt: skip
    gold = _gold(INT, [(2,), (1,)])
    flipped = msgspec.structs.replace(
        _attempt("SELECT n FROM t ORDER BY n", _ran(INT, [(1,), (2,)])), score=accepted
    )
    case = _case(order_by=True)
    assert spider_verdict(case, gold, flipped) == (False, None)
    assert reason(case, gold, flipped, False, "spider") == (
        "row order: the gold's text has ORDER BY, so Spider compares rows in order; the case "
        "does not ask caseledger to"
    )
    # Spider accepts what caseledger refuses: never "duplicates" for a column permutation.
    two = (Column(name="a", type="BIGINT"), Column(name="b", type="VARCHAR"))
    swapped = (Column(name="b", type="VARCHAR"), Column(name="a", type="BIGINT"))
    refused = msgspec.structs.replace(sample, case_id="c", result_correct=False)
    moved = msgspec.structs.replace(
        _attempt("SELECT b, a FROM t", _ran(swapped, [("x", 1)])), score=refused
    )
    gold2 = _gold(two, [(1, "x")])
    assert spider_verdict(_case(), gold2, moved) == (True, None)
    assert reason(_case(), gold2, moved, True, "spider").startswith("caseledger: none,")
