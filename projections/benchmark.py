"""The benchmark's own verdict (EX) beside caseledger's, for a bank imported from BIRD or
Spider (issues 16, 31). Pure: computed from recorded events only.

Each benchmark's rule is the one its own evaluator applies (docs/benchmarks.md cites
both). BIRD (``evaluation_ex.py``): correct when the set of the prediction's rows
equals the set of the gold's, each row a tuple of values in the order the query
returns its columns: ``set(predicted_res) == set(ground_truth_res)``. Spider
(test-suite-sql-eval ``exec_eval.py``, ``result_eq`` and ``eval_exec_match``), see
:func:`spider_rows_match` and :func:`spider_verdict`: rows as a multiset (duplicates
count), any permutation of the columns, row order kept only when the gold's text
holds "order by", DISTINCT deleted from both queries before they run. Values are rebuilt
from the recorded typed cells as SQLite returned them (``BIGINT`` -> int,
``DOUBLE`` -> float, text, ``NULL`` -> None), so ``1`` and ``1.0`` are equal as
they are in Python. A column mixing text and numbers is recorded as text
(docs/engines.md "SQLite"), where the benchmark would keep ``1`` and ``'1'``
apart: that case is reported as undetermined, never guessed.

Where the two verdicts differ, :func:`reason` names why, from the same evidence.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from ledger.codec import sha256_hex
from ledger.events import (
    BankPublished,
    BenchmarkCase,
    BenchmarkSource,
    CaseSpec,
    Column,
    GoldResult,
    SqlExecuted,
    SqlGuarded,
    Violation,
)
from ledger.harness.benchmark_sql import spider_distinct, spider_rewritten
from projections.caseruns import Attempt
from projections.report import schema as S

__all__ = [
    "RULES",
    "benchmark_ex",
    "reason",
    "spider_rows_match",
    "spider_verdict",
    "summarize",
    "verdict",
]

#: The published rule of each benchmark, as reports show it.
RULES = {
    "bird": "set(pred) == set(gold) on SQLite (BIRD evaluation_ex.py)",
    "spider": (
        "rows as a multiset, any column permutation, row order only when the gold has "
        "ORDER BY, DISTINCT removed from both, on SQLite (Spider test-suite-sql-eval "
        "exec_eval.py result_eq)"
    ),
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


# ------------------------------------------------------------------ Spider's own rule


def _unordered(row: tuple[Any, ...]) -> tuple[Any, ...]:
    # Spider sorts each row's values by their text followed by their Python type's text
    # (exec_eval.py unorder_row), so 1 and 1.0 can land in different places.
    return tuple(sorted(row, key=lambda v: str(v) + str(type(v))))


def _assignments(allowed: Sequence[Sequence[int]]) -> Iterator[tuple[int, ...]]:
    """Every way to give each gold column a distinct prediction column from ``allowed``."""
    chosen: list[int] = []

    def extend(i: int) -> Iterator[tuple[int, ...]]:
        if i == len(allowed):
            yield tuple(chosen)
            return
        for j in allowed[i]:
            if j not in chosen:
                chosen.append(j)
                yield from extend(i + 1)
                chosen.pop()

    return extend(0)


def spider_rows_match(
    gold: Sequence[tuple[Any, ...]], pred: Sequence[tuple[Any, ...]], ordered: bool
) -> bool:
    """Spider's denotation match (test-suite-sql-eval ``exec_eval.py`` ``result_eq``).

    True when some permutation of the prediction's columns makes its rows equal to
    the gold's: as a multiset (duplicates count), or as a list when ``ordered`` (the
    gold's text holds "order by"). Two empty results are equal whatever their columns;
    otherwise the row counts and the first rows' widths must agree. Values compare as
    Python compares them (``1 == 1.0``, ``1 != '1'``). Spider first rejects results whose
    rows, each with its values sorted by ``str(v) + str(type(v))``, differ (as a set, or
    as a list when ordered); that check is kept, since it decides some pairs. Spider
    narrows the column permutations with 20 random rows; here every row narrows them,
    which removes only permutations that cannot match, so the verdict is the same.

    >>> spider_rows_match([(1, "a"), (1, "a")], [("a", 1), ("a", 1)], False)
    True
    >>> spider_rows_match([(1,), (1,)], [(1,)], False)
    False
    >>> spider_rows_match([(2,), (1,)], [(1,), (2,)], True)
    False
    """
    if not gold and not pred:
        return True
    if len(gold) != len(pred):
        return False
    width = len(gold[0])
    if len(pred[0]) != width:
        return False
    gold_unordered = [_unordered(r) for r in gold]
    pred_unordered = [_unordered(r) for r in pred]
    if ordered and gold_unordered != pred_unordered:
        return False
    if not ordered and set(gold_unordered) != set(pred_unordered):
        return False
    values = [{row[i] for row in gold} for i in range(width)]
    # Prediction column j may stand at gold column i only if all its values are there.
    allowed = [[j for j in range(width) if all(r[j] in values[i] for r in pred)]
               for i in range(width)]  # fmt: skip
    gold_bag = Counter(gold)
    for perm in _assignments(allowed):
        moved = [tuple(r[j] for j in perm) for r in pred]
        if ordered:
            if moved == list(gold):
                return True
        elif Counter(moved) == gold_bag:
            return True
    return False


def _sets_can_match(gold: Sequence[tuple[Any, ...]], pred: Sequence[tuple[Any, ...]]) -> bool:
    """False when no column permutation makes the two results' row *sets* equal (a
    necessary condition of Spider's match, kept when DISTINCT goes)."""
    if not gold or not pred:
        return not gold and not pred
    width = len(gold[0])
    if len(pred[0]) != width:
        return False
    want = set(gold)
    for perm in itertools.permutations(range(width)):
        if {tuple(r[j] for j in perm) for r in pred} == want:
            return True
    return False


_DISTINCT_GONE = (
    "Spider's evaluator deletes DISTINCT from both queries before running them "
    "(keep_distinct=False); the rows without it were not recorded"
)


def spider_verdict(
    case: CaseSpec, gold: GoldResult, attempt: Attempt
) -> tuple[bool | None, str | None]:
    """Spider's execution match for one attempt (``exec_eval.py`` ``eval_exec_match``,
    ``plug_value=False``, ``keep_distinct=False``: its ``evaluation.py`` defaults), and
    when it cannot be decided from the record, None with the reason.

    The record holds the rows of the prediction and of the gold as written. Spider
    runs other texts when it rewrites "> =" or YEAR(CURDATE()) (undecided) or deletes
    DISTINCT: when the prediction is the gold's own text both sides change alike and
    the record decides; otherwise, with DISTINCT only as an outermost SELECT DISTINCT
    (deleting it keeps each side's set of rows and can only add rows), results whose
    row sets cannot match, or whose row counts cannot meet, are wrong, and the rest is
    undecided. A prediction that fails or is not one statement is wrong, as in Spider.
    """
    ref = case.benchmark
    facts = ref if isinstance(ref, BenchmarkCase) else BenchmarkCase(index=-1)
    sql = attempt.parsed.sql if attempt.parsed is not None else None
    same = sql is not None and sha256_hex(sql.strip().encode("utf-8")) == (
        case.reference_sql_sha256
    )
    pred_distinct = None if sql is None or same else spider_distinct(sql)
    gold_distinct = None if same or not isinstance(facts.distinct, str) else facts.distinct
    if not same and (facts.rewritten is True or (sql is not None and spider_rewritten(sql))):
        return None, (
            "Spider's evaluator rewrites the SQL before running it ('> =' to '>=', "
            "YEAR(CURDATE()) to 2020); the rewritten text was not run"
        )
    e = attempt.execution
    if e is None or not e.ok:
        ex = benchmark_ex(gold, e, attempt.guarded)
        if ex is False and pred_distinct is not None:
            return None, _DISTINCT_GONE + " (the text as written did not run)"
        return ex, None
    try:
        want = _rows(gold.columns, gold.rows)
        got = _rows(e.columns, e.rows)
    except (_Mixed, ValueError):
        return None, None
    ordered = facts.order_by is True
    if e.truncated:
        if pred_distinct is None and gold_distinct is None and len(got) >= len(want):
            return False, None  # more rows than the gold: the counts differ
        return None, None
    if pred_distinct is None and gold_distinct is None:
        return spider_rows_match(want, got, ordered), None
    if "other" in (pred_distinct, gold_distinct):
        return None, _DISTINCT_GONE + " (DISTINCT inside the query changes its values)"
    # Only outermost SELECT DISTINCTs: deleting one keeps the set and adds rows only.
    if not _sets_can_match(want, got):
        return False, None
    if gold_distinct is None and len(want) < len(got):
        return False, None  # the gold's rows stay as they are; the prediction only grows
    if pred_distinct is None and len(got) < len(want):
        return False, None
    return None, _DISTINCT_GONE


def verdict(
    name: str, case: CaseSpec, gold: GoldResult, attempt: Attempt
) -> tuple[bool | None, str | None]:
    """The benchmark ``name``'s verdict on one attempt, and a reason when it is None
    and the reason is the rule's own (else None: :func:`reason` names it)."""
    if name == "spider":
        return spider_verdict(case, gold, attempt)
    return benchmark_ex(gold, attempt.execution, attempt.guarded), None


def reason(
    case: CaseSpec, gold: GoldResult, attempt: Attempt, ex: bool | None, name: str = "bird"
) -> str:
    """Why the benchmark's verdict and caseledger's differ (or why EX is undetermined);
    ``name``: the benchmark, whose rule the reason speaks of."""
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
        if name != "spider" and Counter(got) != Counter(want):
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
    if name == "spider":
        facts = case.benchmark
        ordered = isinstance(facts, BenchmarkCase) and facts.order_by is True
        if ordered and spider_rows_match(want, got, False):
            return (
                "row order: the gold's text has ORDER BY, so Spider compares rows in "
                "order; the case does not ask caseledger to"
            )
    elif mapping is not None and list(mapping) != sorted(mapping):
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
    differ = (
        "the multisets differ under every column permutation"
        if name == "spider"
        else "the sets differ"
    )
    return (
        f"caseledger matched {s.matched} of {s.expected_rows} rows by its rules "
        f"(alignment {s.alignment}); {differ}"
    )


def summarize(
    bank: BankPublished, cases: Sequence[CaseSpec], attempts: Sequence[Attempt]
) -> S.BenchmarkBlock | None:
    """The benchmark block of one run: EX per attempt, totals, and every disagreement
    with its reason. None for a bank not imported from a benchmark."""
    source = bank.benchmark
    if not isinstance(source, BenchmarkSource):
        return None
    gold = {g.case_id: g for g in bank.gold}
    specs = {c.id: c for c in cases}
    verdicts: list[S.BenchmarkVerdict] = []
    disagreements: list[S.BenchmarkDisagreement] = []
    correct = judged = caseledger = agree = 0
    for a in attempts:
        case = specs.get(a.case_id)
        if case is None:
            continue
        ex, why = verdict(source.name, case, gold[a.case_id], a)
        ours = a.score.result_correct if a.score is not None else None
        ours_bool = ours is True
        verdicts.append(
            S.BenchmarkVerdict(case=a.case_id, attempt=a.attempt, ex=ex, caseledger=ours)
        )
        if ex is not None:
            judged += 1
            correct += ex
        caseledger += ours_bool
        if ex is not None and ex == ours_bool:
            agree += 1
            continue
        disagreements.append(
            S.BenchmarkDisagreement(
                case=a.case_id,
                attempt=a.attempt,
                ex=ex,
                caseledger=ours,
                reason=why or reason(case, gold[a.case_id], a, ex, source.name),
            )
        )
    return S.BenchmarkBlock(
        name=source.name,
        rule=RULES.get(source.name, source.name),
        rows=source.rows,
        attempts=len(verdicts),
        ex_correct=correct,
        ex_judged=judged,
        caseledger_correct=caseledger,
        agree=agree,
        verdicts=verdicts,
        disagreements=disagreements,
    )
