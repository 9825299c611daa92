"""The benchmark's own verdict (EX) beside caseledger's, for a bank imported from BIRD or
Spider (issue 16). Pure: computed from recorded events only.

The rule is the benchmarks' published one: a prediction is correct when the set
of its result rows equals the set of the gold's rows, each row a tuple of
values in the order the query returns its columns (BIRD's ``evaluation_ex.py``:
``set(predicted_res) == set(ground_truth_res)``; Spider's execution match on
SQLite compares the same way for queries without ORDER BY). Values are rebuilt
from the recorded typed cells as SQLite returned them (``BIGINT`` -> int,
``DOUBLE`` -> float, text, ``NULL`` -> None), so ``1`` and ``1.0`` are equal as
they are in Python. A column mixing text and numbers is recorded as text
(docs/engines.md "SQLite"), where the benchmark would keep ``1`` and ``'1'``
apart: that case is reported as undetermined, never guessed.

Where the two verdicts differ, :func:`reason` names why, from the same evidence.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ledger.events import (
    BankPublished,
    BenchmarkSource,
    CaseSpec,
    Column,
    GoldResult,
    SqlExecuted,
    SqlGuarded,
    Violation,
)
from projections.caseruns import Attempt

__all__ = ["RULES", "benchmark_ex", "reason", "summarize"]

#: The published rule of each benchmark, as reports show it.
RULES = {
    "bird": "set(pred) == set(gold) on SQLite (BIRD evaluation_ex.py)",
    "spider": "set(pred) == set(gold) on SQLite (Spider execution match)",
}


class _Mixed(Exception):
    """A column whose recorded cells do not carry the values the benchmark compares."""


def _value(cell: Any, type_name: str) -> Any:
    if cell is None:
        return None
    if type_name == "BIGINT":
        return int(cell)
    if type_name == "DOUBLE":
        return float(cell)
    if type_name == "BLOB":
        return bytes.fromhex(str(cell).removeprefix("\\x"))
    if type_name == "VARCHAR" and not isinstance(cell, str):
        raise _Mixed
    if isinstance(cell, bool) or not isinstance(cell, str | int):
        return str(cell)
    return cell


def _rows(columns: Sequence[Column], rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    types = [c.type for c in columns]
    return [tuple(_value(c, t) for c, t in zip(row, types, strict=True)) for row in rows]


#: Guard checks that mean "not one SQL statement": the benchmark's engine rejects such
#: text too, so the benchmark counts it wrong.
NOT_ONE_STATEMENT = frozenset({"parse", "single_statement"})
# The guard's words for a function the engine does not have at all (its allow-list
# is generated from the engine's own function list) and for a table the database
# does not have: the engine raises on both, so the benchmark counts them wrong.
_NO_SUCH_FUNCTION = re.compile(r"is not a \S+ [0-9.]+ function the allow-list knows")
_NO_SUCH_TABLE = re.compile(r"^table '(?!sqlite_)[^']*' .*is not a published table")
# A root that is a bare expression (sqlglot's class name, e.g. "statement is Column"),
# not a statement of any kind (those are named in capitals: INSERT, PRAGMA, ...):
# text like "```SQLite SELECT ..." that no SQL engine runs.
_NOT_A_STATEMENT = re.compile(r"^statement is [A-Z][a-z]\w*,")


def _engine_rejects(v: Violation) -> bool:
    """True when the benchmark's engine itself would refuse the SQL this violation
    names (so the benchmark's verdict is 0), False for a refusal on safety grounds."""
    if v.check in NOT_ONE_STATEMENT:
        return True
    if v.check == "function_allowlist":
        return bool(_NO_SUCH_FUNCTION.search(v.message))
    if v.check == "table_references":
        return bool(_NO_SUCH_TABLE.search(v.message))
    if v.check == "read_only_root":
        return bool(_NOT_A_STATEMENT.search(v.message))
    return False


#: Execution failures the benchmark also counts wrong (its engine raises, or its
#: timeout ends the query; ``refused``: the worker's own parse found no single query).
FAILED = frozenset({"sql_runtime", "timeout", "memory", "refused"})


def benchmark_ex(
    gold: GoldResult, execution: SqlExecuted | None, guarded: SqlGuarded | None = None
) -> bool | None:
    """The benchmark's EX for one attempt: True / False, or None when the evidence
    cannot decide it (SQL the guard refused for safety, which caseledger never runs,
    unless the engine itself would refuse it too: not one statement, a function the
    engine does not have, a table the database does not have;
    a truncated result whose kept rows are all gold rows; a cell the record does not
    carry as the benchmark would compare it).

    A prediction that is not one SQL statement, or fails to execute, is wrong (0),
    as in the benchmark.
    """
    if execution is None:
        if (
            guarded is not None
            and not guarded.passed
            and guarded.violations
            and all(_engine_rejects(v) for v in guarded.violations)
        ):
            return False
        return None
    if not execution.ok:
        return False if execution.error_kind in FAILED else None
    try:
        want = set(_rows(gold.columns, gold.rows))
        got = set(_rows(execution.columns, execution.rows))
    except (_Mixed, ValueError):
        return None
    if execution.truncated:
        return False if not got <= want else None
    return got == want


def reason(case: CaseSpec, gold: GoldResult, attempt: Attempt, ex: bool | None) -> str:
    """Why the benchmark's verdict and caseledger's differ (or why EX is undetermined)."""
    e, s = attempt.execution, attempt.score
    if ex is None:
        if e is None:
            stage = s.failure_kind if s is not None else attempt.outcome
            return f"not executed ({stage}): the benchmark would have run it on SQLite"
        if not e.ok:
            return f"execution ended as {e.error_kind}, which the benchmark does not have"
        if e.truncated:
            return f"result cut at max_rows={case.max_rows}; its kept rows are all gold rows"
        return "a result column mixes text and numbers; the record keeps both as text"
    if e is None or not e.ok:
        if ex:
            return "no score"  # unreachable: EX is True only for an executed result
        shown = e.error_kind if e is not None else "refused: the engine would reject it too"
        return f"both wrong as far as the benchmark goes ({shown})"
    if s is None:
        return "no score"
    got = _rows(e.columns, e.rows)
    want = _rows(gold.columns, gold.rows)
    if ex:  # the benchmark accepts, caseledger does not
        if Counter(got) != Counter(want):
            if len(got) < len(want):
                return (
                    f"duplicates: gold has {len(want)} rows, {len(set(want))} distinct; the "
                    f"prediction returns {len(got)} (DISTINCT merges rows the gold keeps, e.g. "
                    "two entities with the same name); caseledger counts each row"
                )
            return (
                f"duplicates: the prediction returns {len(got)} rows for the gold's "
                f"{len(want)} ({len(set(got))} distinct); caseledger counts each row"
            )
        if case.row_order_significant and not s.order_ok:
            return "row order: the case asks for an order the prediction does not keep"
        return (
            f"caseledger: {s.failure_kind}, columns aligned by {s.alignment}, matched "
            f"{s.matched} of {s.expected_rows} rows ({s.actual_rows} returned)"
        )
    # caseledger accepts, the benchmark does not
    mapping = s.column_mapping
    if mapping is not None and list(mapping) != sorted(mapping):
        return (
            "column order: the same columns in another order; caseledger aligns them by "
            "name, the benchmark compares rows position by position"
        )
    if mapping is not None and len(e.columns) != len(gold.columns):
        return "extra columns: caseledger ignores columns it can align away, the benchmark not"
    if case.abs_tolerance or case.rel_tolerance:
        return (
            f"numbers within the case's tolerance (abs {case.abs_tolerance}, rel "
            f"{case.rel_tolerance}); the benchmark compares exactly"
        )
    return (
        f"caseledger matched {s.matched} of {s.expected_rows} rows by its rules "
        f"(alignment {s.alignment}); the sets differ"
    )


def summarize(
    bank: BankPublished, cases: Sequence[CaseSpec], attempts: Sequence[Attempt]
) -> dict[str, Any] | None:
    """The benchmark block of one run: EX per attempt, totals, and every disagreement
    with its reason. None for a bank not imported from a benchmark."""
    source = bank.benchmark
    if not isinstance(source, BenchmarkSource):
        return None
    gold = {g.case_id: g for g in bank.gold}
    specs = {c.id: c for c in cases}
    verdicts = []
    disagreements = []
    correct = judged = caseledger = agree = 0
    for a in attempts:
        case = specs.get(a.case_id)
        if case is None:
            continue
        ex = benchmark_ex(gold[a.case_id], a.execution, a.guarded)
        ours = a.score.result_correct if a.score is not None else None
        ours_bool = ours is True
        verdicts.append({"case": a.case_id, "attempt": a.attempt, "ex": ex, "caseledger": ours})
        if ex is not None:
            judged += 1
            correct += ex
        caseledger += ours_bool
        if ex is not None and ex == ours_bool:
            agree += 1
            continue
        disagreements.append(
            {
                "case": a.case_id,
                "attempt": a.attempt,
                "ex": ex,
                "caseledger": ours,
                "reason": reason(case, gold[a.case_id], a, ex),
            }
        )
    return {
        "name": source.name,
        "rule": RULES.get(source.name, source.name),
        "rows": source.rows,
        "attempts": len(verdicts),
        "ex_correct": correct,
        "ex_judged": judged,
        "caseledger_correct": caseledger,
        "agree": agree,
        "verdicts": verdicts,
        "disagreements": disagreements,
    }
