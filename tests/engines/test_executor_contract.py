"""One executor contract, run on every engine (DuckDB, SQLite, PostgreSQL).

Every engine's executor is a ``ledger.engines.process.ProcessExecutor``: the engine
supplies its worker's open, run and classify, the base the process protocol. This
suite holds each executor to the same contract on a real database of each engine
(PostgreSQL on the session's throwaway cluster, tests/pgcluster.py): typed rows,
``max_rows``, the cell and result caps, a runtime error and a write classified, the
deadline inside the worker and the parent's kill past its grace (the worker
replaced), a crashed worker replaced, and no process left after ``close``.

The bank is three rows written here; every expected value is worked out by hand
from them (the engines differ only where the table says so: SQLite types an
INTEGER column BIGINT, PostgreSQL waits 2 s past the timeout before it kills).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import wait_dead

from ledger import codec, events
from ledger.engines import Engine, get_engine
from ledger.engines.postgres import PostgresEngine
from ledger.engines.process import ExecResult, ProcessExecutor
from ledger.errors import SandboxError
from ledger.events import Column

ENGINE_NAMES = ("duckdb", "sqlite", "postgres")

SCHEMA = (
    "CREATE TABLE item (id INTEGER PRIMARY KEY, name VARCHAR(20) NOT NULL, "
    "price DOUBLE PRECISION NOT NULL);"
)
SEED = "INSERT INTO item VALUES (1, 'pen', 1.5), (2, 'book', 12.0), (3, 'cup', 4.25);"

# SQLite types an integer column by its values, as the gold does: BIGINT.
ID_TYPE = {"duckdb": "INTEGER", "sqlite": "BIGINT", "postgres": "INTEGER"}
# A text of n 'x' characters: SQLite has no repeat().
X_TIMES = {
    "duckdb": "repeat('x', {n})",
    "sqlite": "printf('%.*c', {n}, 'x')",
    "postgres": "repeat('x', {n})",
}
# A query that runs far past any timeout, stopped inside the worker at its deadline.
RUNAWAY = {
    # 10^14 pairs: DuckDB counts a cross product of two 10^5 ranges (10^10) in under 1 s
    "duckdb": "SELECT count(*) FROM range(10000000) a, range(10000000) b",
    "sqlite": (
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c "
        "WHERE n < 1000000000000) SELECT count(*) FROM c"
    ),
    "postgres": "SELECT pg_sleep(100)",
}
# What each worker says when it stopped the query at a 1 s deadline.
INTERRUPTED = {
    "duckdb": "query interrupted after 1 s",
    "sqlite": "query interrupted after 1 s",
    "postgres": "query canceled after 1 s: canceling statement due to statement timeout",
}
# How long the parent waits past the timeout before it kills a worker, and what it says.
GRACE_S = {"duckdb": 1.0, "sqlite": 1.0, "postgres": 2.0}
KILLED = {
    "duckdb": "query did not stop within 1 s + 1 s grace; worker killed",
    "sqlite": "query did not stop within 1 s + 1 s grace; worker killed",
    "postgres": (
        "query did not stop within 1 s + 2 s grace; worker killed and its backend terminated"
    ),
}
# Slack on top of the exact waits above: PostgreSQL's kill also waits for the backend to
# leave pg_stat_activity.
SLACK_S = {"duckdb": 1.0, "sqlite": 1.0, "postgres": 2.5}


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", params=ENGINE_NAMES)
def engine(request: pytest.FixtureRequest) -> Engine:
    name: str = request.param
    if name == "postgres":
        dsn: str = request.getfixturevalue("pg_dsn")
        return PostgresEngine(dsn=dsn)
    return get_engine(name)


@pytest.fixture(scope="module")
def bank(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp(f"contract-{engine.name}") / "bank"
    engine.build(SCHEMA, SEED, target)
    return target


@pytest.fixture(scope="module")
def executor(engine: Engine, bank: Path) -> Iterator[ProcessExecutor]:
    with engine.executor(bank) as ex:
        assert isinstance(ex, ProcessExecutor)
        yield ex


@pytest.fixture
def quick(engine: Engine, bank: Path) -> Iterator[ProcessExecutor]:
    """An executor of its own with a 1 s timeout (the tests that kill or stop workers)."""
    with engine.executor(bank, timeout_s=1.0) as ex:
        assert isinstance(ex, ProcessExecutor)
        yield ex


def _children() -> set[int]:
    return {p.pid for p in multiprocessing.active_children() if p.pid is not None}


def _gone(pid: int, within_s: float) -> bool:
    """True once ``pid`` no longer exists (it was reaped, so no zombie either)."""
    end = time.monotonic() + within_s
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)


def _serves(ex: ProcessExecutor) -> None:
    result = ex.execute("SELECT count(*) AS n FROM item", max_rows=5)
    assert (result.ok, result.rows) == (True, ((3,),)), result.error_message


# ----------------------------------------------------------------------------- results


def test_typed_rows_of_a_simple_query(engine: Engine, executor: ProcessExecutor) -> None:
    result = executor.execute("SELECT id, name, price FROM item ORDER BY id", max_rows=10)
    assert result.columns == (
        Column(name="id", type=ID_TYPE[engine.name]),
        Column(name="name", type="VARCHAR"),
        Column(name="price", type="DOUBLE"),
    )
    # Doubles travel as their shortest decimal text, never as floats.
    assert result.rows == ((1, "pen", "1.5"), (2, "book", "12.0"), (3, "cup", "4.25"))
    assert (result.ok, result.row_count, result.truncated) == (True, 3, False)
    assert (result.error_kind, result.error_message) == (None, None)
    assert result.cells_truncated is msgspec.UNSET
    assert isinstance(result.sql_us, int)


def test_result_maps_onto_sql_executed(executor: ProcessExecutor) -> None:
    result = executor.execute("SELECT id, price FROM item ORDER BY id", max_rows=2)
    event = events.SqlExecuted(
        stream="run-1",
        stream_seq=3,
        stream_prev=None,
        at="2026-12-02T10:00:00.000000Z",
        case_id="c1",
        attempt=1,
        **msgspec.structs.asdict(result),
    )
    assert codec.decode(codec.encode(event)) == event  # refuses floats: none reached it


def test_max_rows_keeps_that_many_and_says_more_existed(executor: ProcessExecutor) -> None:
    sql = "SELECT id FROM item ORDER BY id"
    two = executor.execute(sql, max_rows=2)
    assert (two.rows, two.row_count, two.truncated) == (((1,), (2,)), 2, True)
    three = executor.execute(sql, max_rows=3)
    assert (three.rows, three.row_count, three.truncated) == (((1,), (2,), (3,)), 3, False)
    none = executor.execute(sql, max_rows=0)
    assert (none.rows, none.row_count, none.truncated) == ((), 0, True)
    with pytest.raises(ValueError, match="max_rows"):
        executor.execute(sql, max_rows=-1)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(n=st.integers(min_value=0, max_value=40), max_rows=st.integers(min_value=0, max_value=40))
def test_truncation_property(executor: ProcessExecutor, n: int, max_rows: int) -> None:
    forty = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 40)"
    sql = f"{forty} SELECT n FROM c WHERE n <= {n} ORDER BY n"  # noqa: S608 (n: a drawn int)
    result = executor.execute(sql, max_rows=max_rows)
    kept = min(n, max_rows)
    assert result.row_count == kept
    assert result.rows == tuple((i,) for i in range(1, kept + 1))
    assert result.truncated is (n > max_rows)


def test_a_cell_over_the_cap_is_cut(engine: Engine, executor: ProcessExecutor) -> None:
    text = X_TIMES[engine.name].format(n=2000)
    result = executor.execute(f"SELECT {text} AS s, 1 AS n", max_rows=1, max_cell_bytes=1024)
    assert result.ok, result.error_message
    # 1024 stored bytes: 1022 characters plus the two quotes of a JSON string.
    assert result.rows == (("x" * 1022, 1),)
    assert result.cells_truncated == 1


def test_a_result_over_the_cap_is_result_too_large(
    engine: Engine, executor: ProcessExecutor
) -> None:
    # 2,000 rows of 500 characters: about 1 MB, 250 times the cap, made in milliseconds
    # (100,000 rows took DuckDB past the 1 s deadline on a loaded machine: a timeout)
    text = X_TIMES[engine.name].format(n=500)
    rows = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 2000)"
    sql = f"{rows} SELECT {text} AS s FROM c"  # noqa: S608 (text is a constant of this file)
    result = executor.execute(sql, max_rows=1_000_000, max_result_bytes=4096)
    assert (result.ok, result.error_kind) == (False, "result_too_large")
    assert result.error_message is not None
    assert result.error_message.startswith("the result is over the 4096-byte cap (stopped ")
    assert (result.rows, result.columns, result.row_count) == ((), (), 0)
    _serves(executor)


# ---------------------------------------------------------------------- failures as data


def test_a_runtime_sql_error_is_classified(executor: ProcessExecutor) -> None:
    result = executor.execute("SELECT no_such_column FROM item", max_rows=5)
    assert (result.ok, result.error_kind) == (False, "sql_runtime")
    assert "no_such_column" in (result.error_message or "")
    assert (result.rows, result.columns, result.row_count, result.truncated) == ((), (), 0, False)
    _serves(executor)


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO item VALUES (4, 'ink', 0.5)",
        "UPDATE item SET price = 0",
        "DELETE FROM item",
        "DROP TABLE item",
    ],
)
def test_a_write_is_refused_and_changes_nothing(executor: ProcessExecutor, sql: str) -> None:
    result = executor.execute(sql, max_rows=5)
    assert (result.ok, result.error_kind, result.rows) == (False, "refused", ())
    check = executor.execute("SELECT sum(id) AS s, count(*) AS n FROM item", max_rows=1)
    assert check.rows == ((6, 3),)  # 1 + 2 + 3, three rows: nothing was written


def test_concurrent_callers_take_turns(executor: ProcessExecutor) -> None:
    got: list[Any] = []

    def run(i: int) -> None:
        for _ in range(5):
            sql = f"SELECT {i} AS i, count(*) AS c FROM item"  # noqa: S608 (i is an int)
            got.append(executor.execute(sql, max_rows=1).rows)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted([((i, 3),) for i in range(4)] * 5)


# ---------------------------------------------------------------------- deadline and crash


@pytest.mark.slow
def test_a_runaway_query_stops_at_its_deadline_in_the_same_worker(
    engine: Engine, quick: ProcessExecutor
) -> None:
    (pid,) = quick.pids()
    start = time.monotonic()
    result = quick.execute(RUNAWAY[engine.name], max_rows=1)
    took = time.monotonic() - start
    assert (result.ok, result.error_kind) == (False, "timeout")
    assert result.error_message == INTERRUPTED[engine.name]  # not the parent's kill
    assert 1.0 <= took < 1.0 + GRACE_S[engine.name]
    assert result.sql_us >= 1_000_000
    assert quick.pids() == (pid,)  # stopped in place: the same worker serves on
    _serves(quick)


@pytest.mark.slow
@pytest.mark.parametrize("state", ["idle", "busy"])
def test_a_worker_that_does_not_answer_is_killed_and_replaced(
    engine: Engine, quick: ProcessExecutor, state: str
) -> None:
    (pid,) = quick.pids()
    # A stopped worker stands for a query stuck where no interrupt reaches it: stopped
    # before the query arrives, or while it runs.
    sql = RUNAWAY[engine.name] if state == "busy" else "SELECT 1 AS one"
    timer = threading.Timer(0.3 if state == "busy" else 0.0, os.kill, (pid, signal.SIGSTOP))
    timer.start()
    if state == "idle":
        timer.join()
    start = time.monotonic()
    result = quick.execute(sql, max_rows=1)
    took = time.monotonic() - start
    timer.join()
    assert (result.ok, result.error_kind, result.rows) == (False, "timeout", ())
    assert result.error_message == KILLED[engine.name]
    grace = GRACE_S[engine.name]
    assert 1.0 + grace <= took < 1.0 + grace + SLACK_S[engine.name]
    assert _gone(pid, 2.0)  # killed and reaped
    _serves(quick)  # a fresh worker
    (new_pid,) = quick.pids()
    assert new_pid != pid


@pytest.mark.parametrize("state", ["idle", "busy"])
def test_a_crashed_worker_is_replaced(engine: Engine, quick: ProcessExecutor, state: str) -> None:
    (pid,) = quick.pids()
    box: list[ExecResult] = []
    if state == "busy":  # killed from outside while its query runs
        sql = RUNAWAY[engine.name]
        runner = threading.Thread(target=lambda: box.append(quick.execute(sql, max_rows=1)))
        runner.start()
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)
        runner.join(10)
    else:  # killed while idle: the next query finds it dead
        os.kill(pid, signal.SIGKILL)
        assert wait_dead(pid, 5.0)
        box.append(quick.execute("SELECT 1 AS one", max_rows=1))
    (result,) = box
    assert (result.ok, result.error_kind, result.rows) == (False, "worker_crash", ())
    assert result.error_message == (
        "worker process died while running the query (killed by signal 9)"
    )
    assert _gone(pid, 0.0)  # reaped
    _serves(quick)
    (new_pid,) = quick.pids()
    assert new_pid != pid


def test_ctrl_c_belongs_to_the_parent(quick: ProcessExecutor) -> None:
    (pid,) = quick.pids()
    os.kill(pid, signal.SIGINT)
    time.sleep(0.2)
    _serves(quick)
    assert quick.pids() == (pid,)


# ------------------------------------------------------------------------- nothing left


def test_pids_and_close_leave_no_process(engine: Engine, bank: Path) -> None:
    before = _children()
    ex = engine.executor(bank)
    assert isinstance(ex, ProcessExecutor)
    pids = ex.pids()
    assert len(pids) == 1
    assert set(pids) <= _children() - before
    _serves(ex)
    ex.close()
    ex.close()  # twice is fine
    assert not set(pids) & _children()
    assert all(_gone(pid, 0.0) for pid in pids)
    assert _children() <= before
    assert ex.pids() == ()
    with pytest.raises(SandboxError, match="closed"):
        ex.execute("SELECT 1", max_rows=1)
