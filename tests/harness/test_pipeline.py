"""The one judge (issue 14 item 1): guard -> execute (a worker crash retried once) -> score,
on a real published bank with a real sandboxed worker. Totals are worked out by hand from
the 100-point table (DESIGN.md "Score")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger import events
from ledger.bank.publish import publish
from ledger.bank.registry import BUILTIN_DIR, PublishedBank
from ledger.engines.duckdb_worker import ExecResult, WorkerPool
from ledger.harness import pipeline, protocol
from ledger.keys import Signer
from ledger.store import Ledger

AT = "2026-12-02T10:00:00.000000Z"
ENV: dict[str, Any] = {"stream": "p", "stream_seq": 0, "stream_prev": None, "at": AT}


def strict(sql: str) -> str:
    plan = {k: [] for k in ("sources", "joins", "filters", "metrics", "steps", "risks")}
    return json.dumps(
        {"plan": {"grain": "g", **plan}, "sql": sql, "summary": "", "assumptions": []}
    )


def parsed_of(case_id: str, raw: str) -> events.OutputParsed:
    verdict = protocol.parse_output(raw)
    return events.OutputParsed(**ENV, case_id=case_id, attempt=1, **msgspec.structs.asdict(verdict))


def sales_fixture(tmp_path_factory: pytest.TempPathFactory) -> PublishedBank:
    """The built-in sales-fixture bank published in a fresh ledger (also test_reading's)."""
    home = tmp_path_factory.mktemp("home")
    signer = Signer.from_seed("test-operator", b"\x07" * 32)
    with Ledger.create(home / "ledger.db", signer, clock=lambda: AT) as ledger:
        return publish(ledger, signer, BUILTIN_DIR / "sales-fixture", home, cwd=home).published


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> PublishedBank:
    return sales_fixture(tmp_path_factory)


@pytest.fixture(scope="module")
def pool(bank: PublishedBank) -> Iterator[WorkerPool]:
    with WorkerPool(bank.db_path) as workers:
        yield workers


def bench(bank: PublishedBank, case_id: str) -> pipeline.Bench:
    return pipeline.Bench.of(bank.event, case_id, bank.references())


CRASH = ExecResult(
    ok=False,
    error_kind="worker_crash",
    error_message="worker died",
    columns=(),
    rows=(),
    row_count=0,
    truncated=False,
    sql_us=0,
)


class Crashing:
    """A real pool whose first ``crashes`` executions report a worker crash."""

    def __init__(self, inner: WorkerPool, crashes: int) -> None:
        self.inner, self.crashes, self.calls = inner, crashes, 0

    def execute(self, sql: str, **kw: Any) -> ExecResult:
        self.calls += 1
        if self.calls <= self.crashes:
            return CRASH
        return self.inner.execute(sql, **kw)


@pytest.mark.parametrize(
    ("case_id", "sql", "total", "failure", "runs"),
    [
        # the reference answer, strict: every item
        ("sf-02", None, "100.00", "none", 1),
        # executed, one column of two, no GROUP BY: protocol 5 + guard 5 + executed 10
        ("sf-02", "SELECT 1 AS x", "20.00", "none", 1),
        # the guard rejects it: protocol points only, nothing runs
        ("sf-02", "DROP TABLE sales", "5.00", "guard", 0),
        # a runtime error, no AST rules: protocol 5 + guard 5 + AST 15
        ("sf-01", "SELECT no_such_column FROM sales", "25.00", "execution", 1),
    ],
)
def test_fresh_answers_score_by_hand(
    bank: PublishedBank,
    pool: WorkerPool,
    case_id: str,
    sql: str | None,
    total: str,
    failure: str,
    runs: int,
) -> None:
    text = bank.references()[case_id] if sql is None else sql
    judged = pipeline.judge(
        bench(bank, case_id), parsed=parsed_of(case_id, strict(text)), pool=pool
    )
    assert judged.score is not None
    assert judged.cancelled is None
    assert judged.score["total"] == Decimal(total)
    assert judged.score["failure_kind"] == failure
    assert len(judged.executions) == runs
    assert judged.guard is not None
    assert judged.guard.passed == (failure != "guard")


def test_a_crash_is_retried_once_and_both_are_kept(bank: PublishedBank, pool: WorkerPool) -> None:
    ref = bank.references()["sf-01"]
    once = Crashing(pool, 1)
    judged = pipeline.judge(bench(bank, "sf-01"), parsed=parsed_of("sf-01", strict(ref)), pool=once)  # type: ignore[arg-type]
    assert once.calls == 2
    assert [r.error_kind for r in judged.executions] == ["worker_crash", None]
    assert judged.score is not None
    assert judged.score["total"] == Decimal("100.00")

    twice = Crashing(pool, 2)
    judged = pipeline.judge(
        bench(bank, "sf-01"), parsed=parsed_of("sf-01", strict(ref)), pool=twice
    )  # type: ignore[arg-type]
    assert twice.calls == 2  # never a third try
    assert judged.score is None
    assert judged.crashed_twice
    assert judged.cancelled == "the SQL worker crashed twice"


def test_a_provider_failure_scores_zero_and_runs_nothing(bank: PublishedBank) -> None:
    inv = events.Invocation(
        harness_kind="x", response_mode="text", single_call=True, tools="off", retries=0,
        prompt_contract_digest="sha256:0", system_prompt_digest=None, wire_protocol="x",
        client_version="x",
    )  # fmt: skip
    failure = events.ProviderFailed(
        **ENV, case_id="sf-01", attempt=2, kind="timeout", message="m", invocation=inv
    )
    judged = pipeline.judge(bench(bank, "sf-01"), failure=failure)
    assert judged.guard is None
    assert judged.executions == ()
    assert judged.score is not None
    assert (judged.score["total"], judged.score["failure_kind"]) == (Decimal("0.00"), "provider")


def test_the_judge_budget_rejects_as_too_complex(bank: PublishedBank, pool: WorkerPool) -> None:
    over = 10**12  # 1000 s of CPU, over the 5000 ms default budget
    judged = pipeline.judge(
        bench(bank, "sf-01"),
        parsed=parsed_of("sf-01", strict(bank.references()["sf-01"])),
        pool=pool,
        spent_ns=lambda: over,
    )
    assert judged.guard is not None
    assert not judged.guard.passed
    assert judged.guard.violations[-1].check == "too_complex"
    assert judged.executions == ()
    assert judged.score is not None
    assert judged.score["total"] == Decimal("5.00")
    assert judged.score["failure_detail"] == "too_complex"


def test_recorded_evidence_is_never_repaired(bank: PublishedBank, pool: WorkerPool) -> None:
    # SQL with no recorded guard verdict: the judge does not guard it now, the scorer refuses.
    parsed = parsed_of("sf-01", strict(bank.references()["sf-01"]))
    judged = pipeline.judge(
        bench(bank, "sf-01"), parsed=parsed, pool=pool, recorded=pipeline.Recorded()
    )
    assert judged.guard is None
    assert judged.executions == ()
    assert judged.score is None
    assert judged.refusal is not None
    assert judged.cancelled == (
        "scoring failed: case sf-01: cannot score: SQL was extracted but has no guard verdict"
    )
    # A recorded refusal of SQL that passes the guard today stays a refusal: not guarded
    # again, not executed even with a pool at hand, scored as refused (protocol 5 only).
    refused = events.SqlGuarded(
        **ENV,
        case_id="sf-01",
        attempt=1,
        passed=False,
        violations=(events.Violation(check="read_only_root", message="recorded refusal"),),
        ast_digest=None,
    )
    judged = pipeline.judge(
        bench(bank, "sf-01"),
        parsed=parsed,
        pool=pool,
        recorded=pipeline.Recorded(guarded=refused),
    )
    assert judged.guard is not None
    assert judged.guard.passed is False
    assert [v.message for v in judged.guard.violations] == ["recorded refusal"]
    assert judged.executions == ()
    assert judged.score is not None
    assert judged.score["total"] == Decimal("5.00")
    assert judged.score["failure_kind"] == "guard"


def test_an_unknown_case_is_a_named_refusal(bank: PublishedBank) -> None:
    with pytest.raises(pipeline.score_mod.ScoringError, match="bank sales-fixture has no case 'x'"):
        pipeline.Bench.of(bank.event, "x", {})


# ------------------------------------------------------------------ execution_differences

CELLS = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(max_size=5))


def executed_of(result: ExecResult) -> events.SqlExecuted:
    fields = {name: getattr(result, name) for name in result.__struct_fields__}
    return events.SqlExecuted(**ENV, case_id="c", attempt=1, **fields)


@given(
    rows=st.lists(st.tuples(CELLS, CELLS), max_size=4),
    field=st.sampled_from(pipeline.COMPARED_FIELDS),
    sql_us=st.integers(0, 10**7),
    message=st.one_of(st.none(), st.text(max_size=8)),
)
def test_exactly_the_changed_field_is_named(
    rows: list[tuple[Any, Any]], field: str, sql_us: int, message: str | None
) -> None:
    columns = (events.Column(name="a", type="INTEGER"), events.Column(name="b", type="VARCHAR"))
    base = ExecResult(
        ok=True, error_kind=None, error_message=None, columns=columns, rows=tuple(rows),
        row_count=len(rows), truncated=False, sql_us=5,
    )  # fmt: skip
    recorded = executed_of(base)
    # time and message never count
    same = msgspec.structs.replace(base, sql_us=sql_us, error_message=message)
    assert pipeline.execution_differences(recorded, same) == []
    changed: dict[str, Any] = {
        "ok": False,
        "error_kind": "sql_runtime",
        "columns": columns[:1],
        "rows": (*rows, (1, "x")),
        "row_count": len(rows) + 1,
        "truncated": True,
        "cells_truncated": 1,
    }
    other = msgspec.structs.replace(base, **{field: changed[field]})
    assert pipeline.execution_differences(recorded, other) == [field]


def test_a_sqlite_syntax_error_recorded_as_sql_runtime_equals_its_refusal_now() -> None:
    # Issue 31: SQLite's parse failures became ``refused``; a run recorded before keeps
    # ``sql_runtime`` with SQLite's bare message, and its re-execution is the same failure.
    old = ExecResult(ok=False, error_kind="sql_runtime", error_message='near "WHERE": syntax error',
                     columns=(), rows=(), row_count=0, truncated=False, sql_us=5)  # fmt: skip
    recorded = executed_of(old)
    now = msgspec.structs.replace(
        old, error_kind="refused", error_message='refused by SQLite: near "WHERE": syntax error'
    )
    assert pipeline.execution_differences(recorded, now) == []
    # Another refusal (DuckDB's parse check, another message) is a real difference.
    other = msgspec.structs.replace(now, error_message="refused by SQLite: incomplete input")
    assert pipeline.execution_differences(recorded, other) == ["error_kind"]
    duck = msgspec.structs.replace(now, error_message="refused by the worker's DuckDB parse check")
    assert pipeline.execution_differences(recorded, duck) == ["error_kind"]
    # Never the other way round.
    assert pipeline.execution_differences(executed_of(now), old) == ["error_kind"]
