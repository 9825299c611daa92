"""Issue 16: the benchmark's own EX (projections/benchmark.py), worked out by hand.

BIRD's rule is ``set(pred) == set(gold)`` over the rows SQLite returns, and a
prediction that raises counts 0. Examples: gold rows (1,), (1,), (2,) as a set
are {1, 2}; a prediction (2,), (1,) is the same set (EX 1) though caseledger,
counting rows, finds one row missing.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ledger.events import Column, GoldResult, SqlExecuted, SqlGuarded, Violation
from projections.benchmark import benchmark_ex

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
