"""Reading the SQL in the SQL worker (issue 21): the same verdict as reading it here.

The runner sends each answer's SQL to a worker process to be read (parse, guard, AST
rules, structural match: ``ledger.harness.reading``) before it is executed, so that
two cores read two answers at once. These tests hold the worker's reading to the
functions it calls, run in this process: over every SQL text of the corpus of
tests/harness/test_sqlparse_copy.py (every built-in bank's SQL, the traps, the guard
corpora, the throughput workload), in each engine's dialect; through the judge
(``pipeline.judge`` with a pool that reads, and with one that cannot); and on every
way a worker can fail to read (it died, it overran, it hit a bug): then there is no
reading and the judge reads the text itself.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from test_pipeline import bench, parsed_of, sales_fixture, strict
from test_sqlparse_copy import CORPUS

from ledger import events
from ledger.bank.registry import PublishedBank
from ledger.engines.duckdb_worker import ExecResult, ProcessWorker, WorkerPool, _worker_main
from ledger.engines.reading import Reading, ReadRequest
from ledger.engines.sqlite_worker import SQLiteExecutor
from ledger.harness import ast_rules, limits, pipeline

RULES = tuple(sorted(ast_rules.KNOWN_RULES))
TABLES = ("customers", "order_items", "orders", "products", "sales", "stores", "visits")


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> PublishedBank:
    return sales_fixture(tmp_path_factory)


@pytest.fixture(scope="module")
def pool(bank: PublishedBank) -> Iterator[WorkerPool]:
    with WorkerPool(bank.db_path) as workers:
        yield workers


def request(sql: str, reference: str | None, engine: str = "duckdb", **kw: Any) -> Any:
    return ReadRequest(
        sql, TABLES, RULES, reference, engine, kw.pop("limits", limits.DEFAULT_LIMITS), **kw
    )


def here(req: ReadRequest) -> tuple[Any, ...]:
    """What this process reads: the guard stage of ``judge_sql`` and the scorer's two calls."""
    judged = limits.judge_sql(
        req.sql,
        req.tables,
        rules=req.rules,
        reference_sql=req.reference_sql,
        limits=req.limits,
        spent_ns=lambda: req.spent_ns,
        engine=req.engine,
    )
    dialect = {"duckdb": "duckdb", "sqlite": "sqlite", "postgres": "postgres"}[req.engine]
    match: bool | None = None
    rules: tuple[events.AstRule, ...] | None = None
    try:
        if req.reference_sql is not None:
            match = ast_rules.structural_match(req.sql, req.reference_sql, dialect)
    except RecursionError:
        pass
    try:
        if judged.passed:
            rules = ast_rules.check_rules(req.sql, req.rules, dialect)
    except RecursionError:
        pass
    return (judged.passed, tuple(judged.violations), judged.ast_digest, match, rules)


def there(found: Reading | None) -> tuple[Any, ...]:
    assert found is not None
    r = found.readings
    return (found.passed, found.violations, found.ast_digest, r.match, r.rules)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["duckdb", "sqlite", "postgres"])
def test_the_worker_reads_the_whole_corpus_as_this_process_does(
    pool: WorkerPool, engine: str
) -> None:
    # Each text against the one before it (a mismatch, mostly) and, one in three, against
    # itself with its keywords upper-cased and extra spaces (a match when it parses).
    compared = passed = matched = 0
    for n, sql in enumerate(CORPUS):
        reference = CORPUS[n - 1] if n % 3 else "  " + sql.replace("select", "SELECT") + "  "
        req = request(sql, reference, engine)
        expected = here(req)  # read once in this process (issue 33: it was read thrice)
        assert there(pool.read(req)) == expected, sql
        compared += 1
        passed += expected[0]
        matched += bool(expected[3])
    # Both sides of every branch were compared (not a corpus that all fails to parse).
    assert compared == len(CORPUS) > 300
    assert 0 < passed < compared
    assert 0 < matched < compared


def test_the_budget_counts_what_was_spent_before_the_request(pool: WorkerPool) -> None:
    sql = "SELECT store, sum(amount) AS total FROM sales GROUP BY store"
    fresh = pool.read(request(sql, None))
    assert fresh is not None
    assert fresh.passed
    assert fresh.violations == ()
    # 5,000 ms is the default budget: the output parse already took 5,001 ms of it.
    over = pool.read(request(sql, None, spent_ns=5_001 * 10**6))
    assert over is not None
    assert not over.passed
    assert over.violations == (
        events.Violation(
            check="too_complex",
            message="parsing, guarding and checking the SQL took over the 5000 ms CPU budget",
        ),
    )
    assert over.ast_digest == fresh.ast_digest


def test_a_worker_that_died_reads_nothing_and_is_replaced(pool: WorkerPool) -> None:
    sql = "SELECT 1 AS x FROM sales"
    before = set(pool.pids())
    for pid in before:
        os.kill(pid, signal.SIGKILL)
    assert pool.read(request(sql, None)) is None
    after = set(pool.pids())
    assert after  # a fresh worker, which reads again
    assert not after & before
    assert there(pool.read(request(sql, None))) == here(request(sql, None))


def test_a_bug_while_reading_is_no_reading_and_the_worker_stays(pool: WorkerPool) -> None:
    before = pool.pids()
    # No guard rules exist for this engine: judge_sql raises in the worker (a fault).
    assert pool.read(request("SELECT 1", None, engine="no-such-engine")) is None
    assert pool.pids() == before
    assert there(pool.read(request("SELECT 1", None))) == here(request("SELECT 1", None))


def test_a_reading_over_its_time_kills_the_worker(bank: PublishedBank) -> None:
    ctx = multiprocessing.get_context("spawn")
    worker = ProcessWorker(
        ctx, _worker_main, (str(bank.db_path), "512MB", os.getpid()),
        database=bank.db_path, name="test-reader",
    )  # fmt: skip
    try:
        assert worker.wait_ready(60.0) is None
        # 3,000 terms take the worker far longer to read than no time at all.
        sql = "SELECT " + " + ".join(f"amount * {n}" for n in range(3000)) + " FROM sales"  # noqa: S608
        assert worker.read(request(sql, None), 0.0) == (None, False)
        worker.process.join(5.0)
        assert not worker.process.is_alive()
    finally:
        worker.stop()


class Unreading:
    """A real pool seen through the plain Executor contract: it can execute, not read."""

    def __init__(self, inner: WorkerPool) -> None:
        self.inner = inner

    def execute(self, sql: str, **kw: Any) -> ExecResult:
        return self.inner.execute(sql, **kw)


def _same(judged: pipeline.Judgement) -> tuple[Any, ...]:
    runs = [msgspec.structs.replace(r, sql_us=0) for r in judged.executions]
    return (judged.guard, runs, judged.score, judged.refusal)


@pytest.mark.parametrize(
    ("case_id", "sql"),
    [
        ("sf-02", None),  # the reference answer
        ("sf-02", "SELECT store, count(*) AS n FROM sales GROUP BY store"),
        ("sf-01", "SELECT no_such_column FROM sales"),
        ("sf-02", "DROP TABLE sales"),
        ("sf-01", "SELECT * FROM read_csv('/etc/passwd')"),
        ("sf-02", "SELECT 1; SELECT 2"),
    ],
)
def test_judging_through_a_reading_pool_equals_judging_here(
    bank: PublishedBank, pool: WorkerPool, case_id: str, sql: str | None
) -> None:
    text = bank.references()[case_id] if sql is None else sql
    parsed = parsed_of(case_id, strict(text))
    read_there = pipeline.judge(bench(bank, case_id), parsed=parsed, pool=pool)
    read_here = pipeline.judge(bench(bank, case_id), parsed=parsed, pool=Unreading(pool))  # type: ignore[arg-type]
    assert _same(read_there) == _same(read_here)
    assert read_there.score is not None


def test_the_sqlite_executor_reads_in_its_worker(tmp_path: Path) -> None:
    database = tmp_path / "bank.sqlite"
    with sqlite3.connect(database) as con:
        con.execute("CREATE TABLE sales (store TEXT, amount INTEGER)")
    texts = [
        "SELECT store, SUM(amount) AS total FROM sales GROUP BY store",
        "SELECT strftime('%Y', 'now') AS y FROM sales",  # the clock: refused on SQLite
        "DELETE FROM sales",
    ]
    with SQLiteExecutor(database) as executor:
        for sql in texts:
            req = request(sql, texts[0], engine="sqlite")
            assert there(executor.read(req)) == here(req)
        # the verdicts are the ones expected, not merely equal on both sides
        verdicts = [executor.read(request(s, None, engine="sqlite")) for s in texts]
        assert [v.passed for v in verdicts if v is not None] == [True, False, False]
