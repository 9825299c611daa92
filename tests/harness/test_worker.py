"""The sandboxed DuckDB worker: typed results, hostile SQL, limits, pools, cleanup.

What every engine's executor keeps (max_rows, caps, errors as data, the kill past the
grace, crashes, close) is tests/engines/test_executor_contract.py; here is what only the
DuckDB worker has."""

from __future__ import annotations

import hashlib
import importlib
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from support import alive, wait_dead

from ledger import events
from ledger.engines.duckdb_worker import (
    KILL_GRACE_S,
    ExecResult,
    WorkerPool,
    connect_sandboxed,
    duckdb_refusals,
    execute_once,
    shadow_denied_functions,
)
from ledger.errors import SandboxError

REPO = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------- fixtures and helpers


def _load_guard_corpora() -> Any:
    """tests/harness/test_guard.py, for its corpora (HOSTILE, ADJACENT, LEGIT, LEGIT_RETAIL)."""
    return importlib.import_module("test_guard")


def _build_bank(path: Path) -> None:
    """A tiny bank with the types the encoding must keep (built by hand, values known)."""
    con = duckdb.connect(str(path))
    con.execute("SET TimeZone='UTC'")
    con.execute(
        """
        CREATE TABLE customer (id INTEGER PRIMARY KEY, name VARCHAR, city VARCHAR);
        INSERT INTO customer VALUES (1, 'Ana', 'Porto'), (2, 'Ben', NULL), (3, 'Chloé', 'Lyon');
        CREATE TABLE account (
            id INTEGER, customer_id INTEGER, balance DECIMAL(12,2),
            opened DATE, updated TIMESTAMP, settled TIMESTAMPTZ
        );
        INSERT INTO account VALUES
            (10, 1, 12.40, DATE '2026-09-30', TIMESTAMP '2026-09-30 16:00:00',
             TIMESTAMPTZ '2026-09-30 18:00:00+02:00'),
            (11, 1, -3.05, DATE '2026-01-02', TIMESTAMP '2026-01-02 00:00:00.5',
             TIMESTAMPTZ '2026-01-02 00:30:00-01:00'),
            (12, 3, NULL, NULL, NULL, NULL);
        """
    )
    con.close()


@pytest.fixture(scope="module")
def bank_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bank") / "bank.duckdb"
    _build_bank(path)
    return path


@pytest.fixture(scope="module")
def pool(bank_db: Path) -> Iterator[WorkerPool]:
    with WorkerPool(bank_db) as p:
        yield p


def _worker_children() -> set[int]:
    """Live children of this process that are SQL workers (not multiprocessing's tracker)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        mine = int(fields[1]) == os.getpid() and fields[0] not in ("Z", "X")
        if mine and b"resource_tracker" not in cmdline:
            found.add(int(entry.name))
    return found


def _run_script(script: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Write ``text`` to ``script`` and run it in a fresh interpreter from the repository."""
    script.write_text(text)
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
    )


def _timed(pool: WorkerPool, sql: str, max_rows: int = 10) -> tuple[ExecResult, float]:
    start = time.monotonic()
    result = pool.execute(sql, max_rows=max_rows)
    return result, time.monotonic() - start


def _assert_still_serves(pool: WorkerPool) -> None:
    result = pool.execute("SELECT count(*) AS n FROM customer", max_rows=5)
    assert result.ok, result.error_message
    assert result.rows == ((3,),)


# ---------------------------------------------------------------- results


def test_typed_cells_keep_types(pool: WorkerPool) -> None:
    result = pool.execute(
        "SELECT balance, opened, updated, settled FROM account ORDER BY id", max_rows=10
    )
    assert result.ok
    assert result.columns == (
        events.Column(name="balance", type="DECIMAL(12,2)"),
        events.Column(name="opened", type="DATE"),
        events.Column(name="updated", type="TIMESTAMP"),
        events.Column(name="settled", type="TIMESTAMP WITH TIME ZONE"),
    )
    assert result.rows == (
        ("12.40", "2026-09-30", "2026-09-30T16:00:00.000000", "2026-09-30T16:00:00.000000Z"),
        ("-3.05", "2026-01-02", "2026-01-02T00:00:00.500000", "2026-01-02T01:30:00.000000Z"),
        (None, None, None, None),
    )
    assert result.row_count == 3
    assert result.truncated is False
    assert result.error_kind is None
    assert result.error_message is None


def test_non_finite_doubles_travel_as_strings(pool: WorkerPool) -> None:
    # DuckDB 1.5.5 divides to inf rather than raising; 0.0/0 is NaN.
    result = pool.execute(
        "SELECT 1.0/0 AS pos, -1.0/0 AS neg, 0.0/0 AS nan, 1/0 AS int_div, "
        "CAST(1.5 AS DECIMAL(3,1)) AS x",
        max_rows=1,
    )
    assert result.ok
    assert [c.type for c in result.columns] == [
        "DOUBLE",
        "DOUBLE",
        "DOUBLE",
        "DOUBLE",
        "DECIMAL(3,1)",
    ]
    assert result.rows == (("Infinity", "-Infinity", "NaN", "Infinity", "1.5"),)


def test_null_and_unicode_strings(pool: WorkerPool) -> None:
    result = pool.execute("SELECT name, city FROM customer ORDER BY id", max_rows=10)
    assert result.rows == (("Ana", "Porto"), ("Ben", None), ("Chloé", "Lyon"))
    assert [c.type for c in result.columns] == ["VARCHAR", "VARCHAR"]


def test_truncation_stops_early_on_an_endless_stream(pool: WorkerPool) -> None:
    # Only max_rows + 1 rows are fetched, so ten billion rows cost nothing.
    result, took = _timed(pool, "SELECT i FROM range(10000000000) r(i)", max_rows=2)
    assert result.rows == ((0,), (1,))
    assert result.truncated is True
    assert took < 2.0


def test_temp_objects_cannot_be_made(pool: WorkerPool) -> None:
    # Only one SELECT runs, so no query leaves a temp object for the next one.
    made = pool.execute("CREATE TEMP TABLE scratch AS SELECT 1 AS a", max_rows=5)
    assert made.error_kind == "refused"
    later = pool.execute("SELECT * FROM scratch", max_rows=5)
    assert later.error_kind == "refused"
    assert later.error_message == (
        "refused by the worker's DuckDB parse check: table 'scratch' is not a published "
        "table or a CTE in scope"
    )


def test_concurrent_callers_share_a_pool(bank_db: Path) -> None:
    results: list[ExecResult] = []
    with WorkerPool(bank_db, size=2) as two:

        def work() -> None:
            for _ in range(5):
                results.append(two.execute("SELECT sum(id) FROM customer", max_rows=1))

        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(results) == 15
    assert all(r.rows == ((6,),) for r in results)


# ---------------------------------------------------------------- defence in depth (no guard)

HOSTILE = [
    ("read_csv", "SELECT * FROM read_csv('/etc/passwd')", "disabled by configuration"),
    ("read_csv_auto", "SELECT * FROM read_csv_auto('/etc/passwd')", "disabled by configuration"),
    ("path_in_from", "FROM '/etc/passwd'", "/etc/passwd"),
    ("select_path", "SELECT * FROM '/etc/passwd'", "/etc/passwd"),
    ("read_text", "SELECT content FROM read_text('/etc/passwd')", "disabled by configuration"),
    ("read_blob", "SELECT content FROM read_blob('/etc/passwd')", "disabled by configuration"),
    ("glob", "SELECT * FROM glob('/etc/*')", "disabled by configuration"),
    ("insert", "INSERT INTO customer VALUES (9, 'Eve', 'Nowhere')", "read-only"),
    ("update", "UPDATE account SET balance = 0", "read-only"),
    ("delete", "DELETE FROM customer", "read-only"),
    ("create", "CREATE TABLE stolen AS SELECT * FROM customer", "read-only"),
    ("drop", "DROP TABLE customer", "read-only"),
    ("copy_to", "COPY customer TO '{out}/leak.csv'", "disabled by configuration"),
    ("export", "EXPORT DATABASE '{out}/dump'", "disabled by configuration"),
    ("attach_file", "ATTACH '{out}/other.duckdb' AS other", "disabled by configuration"),
    ("attach_memory", "ATTACH ':memory:' AS scratch", "read-only"),
    ("install", "INSTALL httpfs", "disabled by configuration"),
    ("load", "LOAD httpfs", "disabled through configuration"),
    ("set_memory", "SET memory_limit='64GB'", "configuration has been locked"),
    ("set_access", "SET enable_external_access=true", "configuration has been locked"),
    ("unlock", "SET lock_configuration=false", "configuration has been locked"),
    ("reset", "RESET threads", "configuration has been locked"),
    ("pragma", "PRAGMA threads=8", "configuration has been locked"),
    ("stacked", "SELECT 1; INSERT INTO customer VALUES (9, 'Eve', NULL)", "read-only"),
]


@pytest.mark.parametrize(("sql", "fragment"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_sql_ends_as_error(
    pool: WorkerPool, bank_db: Path, tmp_path: Path, sql: str, fragment: str
) -> None:
    before = hashlib.sha256(bank_db.read_bytes()).hexdigest()
    result = pool.execute(sql.format(out=tmp_path), max_rows=100)
    assert result.ok is False
    # The worker's parse check refuses every one before DuckDB's settings are reached.
    assert result.error_kind == "refused"
    assert (result.error_message or "").startswith("refused by the worker's DuckDB parse check: ")
    assert result.rows == ()
    assert "root:" not in (result.error_message or "")
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing created
    assert hashlib.sha256(bank_db.read_bytes()).hexdigest() == before


@pytest.mark.parametrize(("sql", "fragment"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_duckdb_settings_alone_refuse_hostile_sql(
    bank_db: Path, tmp_path: Path, sql: str, fragment: str
) -> None:
    # The same refusals come from DuckDB's own settings, not from anything the worker adds.
    con = connect_sandboxed(bank_db)
    try:
        with pytest.raises(duckdb.Error, match=re.escape(fragment)):
            con.execute(sql.format(out=tmp_path)).fetchall()
    finally:
        con.close()
    assert list(tmp_path.iterdir()) == []


def test_settings_really_are_in_force(bank_db: Path) -> None:
    # current_setting() is denied to queries; read the settings the worker opens with here.
    con = connect_sandboxed(bank_db)
    try:
        rows = con.execute(
            "SELECT current_setting('access_mode'), current_setting('enable_external_access'), "
            "current_setting('threads'), current_setting('memory_limit'), "
            "current_setting('TimeZone'), current_setting('lock_configuration'), "
            "current_setting('autoload_known_extensions'), current_setting('temp_directory'), "
            "current_setting('secret_directory')"
        ).fetchall()
    finally:
        con.close()
    # DuckDB reports 512MB as 488.2 MiB (512 * 10^6 bytes); the secret directory no longer
    # names the home directory.
    assert rows == [
        ("read_only", False, 1, "488.2 MiB", "UTC", True, False, "", "/nonexistent/caseledger")
    ]


# ---------------------------------------------------------------- runaway queries


#: The memory tests give the query far more time than it needs to exhaust 512 MB, so
#: a loaded machine (CI beside other jobs) cannot turn "memory" into "timeout"; the
#: limit, not the clock, must end it.
_GENEROUS_TIMEOUT_S = 120.0


@pytest.fixture
def patient_pool(bank_db: Path) -> Iterator[WorkerPool]:
    with WorkerPool(bank_db, timeout_s=_GENEROUS_TIMEOUT_S) as p:
        yield p


@pytest.mark.slow
def test_memory_hog_ends_as_memory_not_timeout(patient_pool: WorkerPool) -> None:
    pool = patient_pool
    # ~20M rows x 100-byte strings must all be sorted in memory (no LIMIT, so no top-N):
    # far beyond 512 MB, and with no temp directory there is nowhere to spill.
    sql = (
        "SELECT i, repeat('x', 100) || i::VARCHAR AS s FROM range(20000000) r(i) "
        "ORDER BY s DESC, i DESC"
    )
    result, took = _timed(pool, sql)
    assert result.error_kind == "memory", result.error_message
    assert "Out of Memory" in (result.error_message or "")
    assert took < _GENEROUS_TIMEOUT_S  # it hit the limit, not the clock
    _assert_still_serves(pool)


@pytest.mark.slow
def test_list_aggregate_of_a_big_range_ends_as_memory(patient_pool: WorkerPool) -> None:
    pool = patient_pool
    result, took = _timed(pool, "SELECT list(i) FROM range(200000000) r(i)")
    assert result.error_kind == "memory", result.error_message
    assert took < _GENEROUS_TIMEOUT_S
    _assert_still_serves(pool)


# Run in a fresh interpreter so that RUSAGE_CHILDREN's peak covers only this pool's
# workers: the kernel's record of the largest resident size any of them reached, read
# after they were reaped (a worker that stopped itself can no longer be asked).
_HUGE_VALUE_SCRIPT = """
import json, re, resource, sys
from pathlib import Path
from ledger.engines.duckdb_worker import WorkerPool

def resident(pid):
    status = Path(f"/proc/{pid}/status").read_text("ascii")
    return int(re.search(r"^VmRSS:\\s+(\\d+) kB", status, re.MULTILINE).group(1)) * 1024

if __name__ == "__main__":
    with WorkerPool(Path(sys.argv[1]), timeout_s=120.0) as pool:
        warm = pool.execute("SELECT 1 AS one", max_rows=1)
        (pid,) = pool.pids()
        ready = resident(pid)
        result = pool.execute(sys.argv[2], max_rows=10)
        replaced = pool.pids() != (pid,)
        after = pool.execute("SELECT count(*) AS n FROM customer", max_rows=5)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps({
        "warm": warm.rows, "ready": ready, "kind": result.error_kind,
        "message": result.error_message, "replaced": replaced, "after": after.rows,
        "peak": peak,
    }))
"""

HUGE_VALUES = [
    # issue 30: one 1.5 GB printf value grew a worker to 1.69 GB; DuckDB only sees an
    # interrupt once the value is built (2.9 GB resident, measured)
    ("printf_width", "SELECT printf('%1500000000d', 1) AS x"),
    # the demo's harbor-coder-14b time-01 attempt 2: an endless month series that holds
    # 1.3 GB resident whatever memory_limit says (256MB, 512MB and 1GB measured alike)
    (
        "recursive_months",
        "WITH RECURSIVE months(m) AS (SELECT DATE '2025-11-01' UNION ALL "
        "SELECT CAST(m + INTERVAL 1 MONTH AS DATE) FROM months WHERE m <> DATE '2026-02-15') "
        "SELECT m AS month, 0 AS revenue FROM months",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("sql", [h[1] for h in HUGE_VALUES], ids=[h[0] for h in HUGE_VALUES])
def test_one_huge_value_ends_as_memory_with_the_worker_bounded(
    bank_db: Path, tmp_path: Path, sql: str
) -> None:
    """Memory DuckDB's memory_limit leaves out is bounded by the worker's resident size:
    past its size at its first query + 512 MB + 128 MiB the worker stops itself, the
    query is ``memory`` and the pool serves on with a new worker. The bound checked is
    the kernel's peak of every worker the pool had, with 128 MiB more for the few
    milliseconds between two readings. The query has 120 s: memory decides, not the
    clock."""
    proc = _run_script(tmp_path / "huge.py", _HUGE_VALUE_SCRIPT, str(bank_db), sql)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["warm"] == [[1]]
    assert seen["kind"] == "memory", seen["message"]
    assert seen["message"].startswith("out of memory: the query took the SQL worker's")
    assert seen["replaced"] is True  # the worker stopped itself; a new one serves
    assert seen["after"] == [[3]]
    assert seen["peak"] < seen["ready"] + 512_000_000 + 256 * 2**20


RUNAWAY = [
    ("cross_join_bomb", "SELECT count(*) FROM range(100000) a, range(100000) b, range(100000) c"),
    (
        "endless_recursive_cte",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("sql", [r[1] for r in RUNAWAY], ids=[r[0] for r in RUNAWAY])
def test_runaway_query_ends_as_timeout(pool: WorkerPool, sql: str) -> None:
    pids = pool.pids()
    result, took = _timed(pool, sql)
    assert result.error_kind == "timeout", result.error_message
    assert 5.0 <= took <= 5.0 + KILL_GRACE_S + 1.0
    assert result.sql_us >= 5_000_000
    _assert_still_serves(pool)
    assert pool.pids() == pids  # interrupted in place: no respawn needed
    assert _worker_children() >= set(pids)


@pytest.mark.slow
def test_a_runaway_query_right_after_others_ends_at_its_deadline(bank_db: Path) -> None:
    # Queries one after another: the watchdog is still waking every few milliseconds
    # from the last one, so the next is armed without waking it (issue 34). The runaway
    # query that follows at once must still be interrupted at its own deadline.
    with WorkerPool(bank_db, timeout_s=1.0) as quick:
        for _ in range(20):
            _assert_still_serves(quick)
        result, took = _timed(quick, RUNAWAY[0][1])
        assert result.error_kind == "timeout", result.error_message
        assert result.error_message == "query interrupted after 1 s"
        assert 1.0 <= took <= 1.0 + KILL_GRACE_S + 1.0
        assert result.sql_us >= 1_000_000
        _assert_still_serves(quick)


def test_no_worker_outlives_its_pool(bank_db: Path) -> None:
    with WorkerPool(bank_db, size=2) as p:
        pids = p.pids()
        assert len(pids) == 2
        assert all(alive(pid) for pid in pids)
        assert set(pids) <= _worker_children()
        _assert_still_serves(p)
    assert not any(alive(pid) for pid in pids)
    assert not set(pids) & _worker_children()
    assert not {c.pid for c in multiprocessing.active_children()} & set(pids)
    with pytest.raises(SandboxError, match="closed"):
        p.execute("SELECT 1", max_rows=1)


def test_a_worker_whose_pool_closes_ends_by_itself(bank_db: Path) -> None:
    # exit_now(): on EOF the worker closes its database and leaves without the
    # interpreter's teardown; exit code 0 means it was not killed (the pool kills a
    # worker that has not ended 2 s after its pipe closed).
    p = WorkerPool(bank_db, size=2)
    _assert_still_serves(p)
    workers = list(p._all)
    p.close()
    assert [w.process.exitcode for w in workers] == [0, 0]


def test_execute_once_leaves_nothing(bank_db: Path) -> None:
    before = _worker_children()
    result = execute_once(bank_db, "SELECT name FROM customer WHERE id = 3", max_rows=1)
    assert result.rows == (("Chloé",),)
    assert _worker_children() <= before


_ORPHAN_SCRIPT = """
import os, signal, sys, threading, time
from pathlib import Path
from ledger.engines.duckdb_worker import WorkerPool

if __name__ == "__main__":
    pool = WorkerPool(Path(sys.argv[1]))
    print(pool.pids()[0], flush=True)
    if sys.argv[2] == "busy":
        sql = "SELECT count(*) FROM range(100000) a, range(100000) b, range(100000) c"
        threading.Thread(target=pool.execute, args=(sql,), kwargs={"max_rows": 1}).start()
        time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)  # no close(), no atexit: the harness just dies
"""


@pytest.mark.parametrize("state", ["idle", "busy"])
def test_worker_exits_when_its_parent_dies(bank_db: Path, tmp_path: Path, state: str) -> None:
    proc = _run_script(tmp_path / "orphan.py", _ORPHAN_SCRIPT, str(bank_db), state)
    assert proc.returncode == -signal.SIGKILL
    worker_pid = int(proc.stdout.split()[0])
    # Idle: EOF on the pipe. Busy: the watchdog notices the new parent (well before 5 s).
    assert wait_dead(worker_pid, 3.0)


# ---------------------------------------------------------------- harness faults


def test_missing_database_is_a_sandbox_error(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not found"):
        WorkerPool(tmp_path / "absent.duckdb")


def test_unreadable_database_is_a_sandbox_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"this is not a duckdb file" * 1000)
    before = _worker_children()
    with pytest.raises(SandboxError, match="cannot open the bank database read-only") as info:
        WorkerPool(junk)
    assert info.value.hint
    assert _worker_children() <= before


# ---------------------------------------------------------------- the worker's DuckDB parse check

CORPUS = _load_guard_corpora()
RETAIL = REPO / "ledger" / "banks" / "retail"


@pytest.fixture(scope="module")
def corpus_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerPool]:
    """A worker over the guard corpora's tables (empty), as tests/harness/test_guard.py has them."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.duckdb"
    with duckdb.connect(str(path)) as build:
        build.execute(CORPUS.SCHEMA)
    with WorkerPool(path) as p:
        yield p


@pytest.fixture(scope="module")
def retail_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in retail bank, built the way `bank publish` builds it."""
    from ledger.bank.build import build_database
    from ledger.bank.model import load_bank

    path = tmp_path_factory.mktemp("retail") / "retail.duckdb"
    build_database(load_bank(RETAIL), path)
    return path


GUARD_ONLY: dict[str, tuple[tuple[Any, ...], ...]] = {
    "three adjacent literals in the select list": (("abc",),),
    "a string literal in FROM is a file read even when it names a table": (),
    "a string literal in a comma join": (),
}


def test_hostile_corpus_never_runs_with_the_guard_bypassed(
    corpus_pool: WorkerPool, tmp_path: Path
) -> None:
    # Every hostile statement, sent straight to the worker: the parse check refuses it or
    # DuckDB fails it; nothing runs, no row comes back, no path shows in a message.
    entries = [*CORPUS.HOSTILE, *CORPUS.ADJACENT]
    kinds: dict[str, int] = {}
    for entry in entries:
        result = corpus_pool.execute(entry.sql.replace("{out}", str(tmp_path)), max_rows=50)
        if entry.title in GUARD_ONLY:
            # The guard refuses these for being read differently; DuckDB reads a published
            # (here empty) table or one literal, which is harmless.
            assert (result.ok, result.rows) == (True, GUARD_ONLY[entry.title]), entry.title
            continue
        assert result.ok is False, entry.title
        assert result.error_kind in ("refused", "sql_runtime"), (entry.title, result)
        assert result.rows == (), entry.title
        assert result.columns == (), entry.title
        message = result.error_message or ""
        assert str(Path.home()) + "/" not in message, entry.title
        assert tempfile.gettempdir() + "/" not in message, entry.title
        kinds[result.error_kind] = kinds.get(result.error_kind, 0) + 1
    assert kinds == {"refused": len(entries) - len(GUARD_ONLY)}
    assert len(entries) > 380


def test_escape_examples_are_refused_by_the_worker(corpus_pool: WorkerPool) -> None:
    cases = {
        "SELECT json_serialize_plan('SELECT current_setting(''home_directory'')')": (
            "function json_serialize_plan() is denied (sql_text: plans and runs the binder "
            "on SQL text)"
        ),
        "SELECT * FROM 'orders'\r\n'.csv'": (
            "table 'orders.csv' is not a published table or a CTE in scope"
        ),
        "SELECT path FROM duckdb_databases()": (
            "table function duckdb_databases() is not allowed in FROM"
        ),
        "SELECT system.main.current_setting('home_directory')": (
            "function current_setting() is qualified with a catalog or schema"
        ),
        "SELECT current_schema": "bare current_schema is DuckDB's current_schema() function",
        "PIVOT orders ON status USING count(*)": (
            "DuckDB cannot serialize it: Only SELECT statements can be serialized to json!"
        ),
        "SELECT 1; SELECT 2": "DuckDB parses 2 statements, expected exactly one SELECT",
        "SELECT ?": "expression PARAMETER is not allowed (parameters and unknown constructs)",
        "DESCRIBE orders": (
            "table reference SHOW_REF is not allowed (DESCRIBE, SHOW, SUMMARIZE, ...)"
        ),
        "SELECT * FROM orders AT (VERSION => 1)": "time travel (AT ...) is not allowed",
    }
    for sql, why in cases.items():
        result = corpus_pool.execute(sql, max_rows=5)
        assert (result.error_kind, result.error_message) == (
            "refused",
            f"refused by the worker's DuckDB parse check: {why}",
        ), sql


@pytest.mark.parametrize(
    ("sql", "ok"),
    [
        ("WITH a AS (SELECT 1 AS x), b AS (SELECT * FROM a) SELECT * FROM b", True),
        ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
         "SELECT * FROM r", True),
        ("WITH orders AS (SELECT * FROM orders) SELECT * FROM orders", True),
        ("WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a", False),
        ('WITH "x.csv" AS (SELECT * FROM "x.csv") SELECT * FROM "x.csv"', False),
        ("WITH RECURSIVE a AS (SELECT * FROM a) SELECT * FROM a", False),
        ("SELECT * FROM (WITH a AS (SELECT 1) SELECT * FROM a) JOIN a ON TRUE", False),
        ("WITH a AS (SELECT 1) SELECT * FROM main.a", False),
    ],
)  # fmt: skip
def test_worker_scopes_ctes_like_duckdb(sql: str, ok: bool) -> None:
    with duckdb.connect() as con:
        raw = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    assert raw is not None
    tables = frozenset(CORPUS.TABLES)
    assert (duckdb_refusals(json.loads(raw[0]), tables) == []) is ok


def test_parse_check_walks_deep_trees_without_recursion() -> None:
    # A deeply nested tree is walked with an explicit stack, not Python recursion.
    tree: dict[str, object] = {"class": "CONSTANT", "type": "VALUE_CONSTANT"}
    for _ in range(5000):
        tree = {"class": "FUNCTION", "function_name": "abs", "schema": "", "children": [tree]}
    node = {"type": "SELECT_NODE", "modifiers": [], "select_list": [tree],
            "from_table": {"type": "EMPTY", "alias": "", "sample": None}}  # fmt: skip
    assert duckdb_refusals({"error": False, "statements": [{"node": node}]}, frozenset()) == []


@pytest.mark.slow
def test_legit_corpora_pass_the_worker_check_and_execute(
    corpus_pool: WorkerPool, retail_db: Path
) -> None:
    # 0 refused: the retail corpus executes on the real retail bank, the synthetic one on
    # its (empty) tables.
    failed = []
    with WorkerPool(retail_db) as retail:
        for entry in CORPUS.LEGIT_RETAIL:
            result = retail.execute(entry.sql, max_rows=1000)
            if not result.ok:
                failed.append((entry.title, result.error_kind, result.error_message))
    for entry in CORPUS.LEGIT:
        result = corpus_pool.execute(entry.sql, max_rows=1000)
        if not result.ok:
            failed.append((entry.title, result.error_kind, result.error_message))
    assert failed == []
    assert len(CORPUS.LEGIT_RETAIL) >= 120


def test_limit_percent_executes(retail_db: Path) -> None:
    with WorkerPool(retail_db) as retail:
        total = retail.execute("SELECT count(*) FROM orders", max_rows=1)
        tenth = retail.execute("SELECT * FROM orders LIMIT 10%", max_rows=1000)
        percent = retail.execute("SELECT * FROM orders LIMIT 10 PERCENT", max_rows=1000)
    assert total.ok
    assert tenth.ok
    assert percent.ok
    (n,) = total.rows[0]
    assert tenth.row_count == percent.row_count == int(n) // 10


def test_denied_functions_fail_on_the_query_connection_even_unchecked(bank_db: Path) -> None:
    # Both checks bypassed: the shadows still stop unqualified and main-qualified calls.
    con = connect_sandboxed(bank_db)
    try:
        query = con.cursor()
        assert shadow_denied_functions(query) > 150
        for sql in (
            "SELECT current_setting('home_directory')",
            "SELECT main.current_setting('home_directory')",
            "SELECT * FROM duckdb_databases()",
            "SELECT * FROM pragma_database_size()",
            "SELECT json_serialize_plan('SELECT 1')",
            "SELECT current_database()",
            "SELECT now()",
            "SELECT current_date",
            "SELECT user",
            "SELECT * FROM duckdb_settings()",
            "SELECT version()",
        ):
            with pytest.raises(duckdb.Error, match=r"is disabled in the SQL worker"):
                query.execute(sql).fetchall()
        # The documented limit: DuckDB cannot disable a built-in, and a system-qualified call
        # reaches it (both checks refuse it); the path it shows is the canonical one.
        rows = query.execute(
            "SELECT path FROM system.main.duckdb_databases() WHERE path IS NOT NULL"
        ).fetchall()
        assert rows == [(str(bank_db.resolve()),)]
        # Allowed functions are untouched.
        assert query.execute("SELECT lower('A'), range(2)").fetchall() == [("a", [0, 1])]
    finally:
        con.close()


def test_a_worker_refusal_is_scored_as_a_guard_failure() -> None:
    # The worker's refusal is recorded as SqlExecuted(error_kind="refused"): the scorer
    # counts it in the guard stage (protocol points only), never as an execution error.
    from test_score import make_case, make_executed, run

    refused = run(executed=make_executed(error_kind="refused"))
    assert refused["failure_kind"] == "guard"
    assert refused["result_correct"] is None
    items = refused["items"]
    assert (items.protocol, items.guard, items.executed, items.ast) == (5, 0, 0, 0)
    assert refused["total"] == 5
    runtime = run(case=make_case(), executed=make_executed(error_kind="sql_runtime"))
    assert runtime["failure_kind"] == "execution"
    assert runtime["total"] == 5 + 5 + 15  # protocol, guard, AST kept after a runtime error
