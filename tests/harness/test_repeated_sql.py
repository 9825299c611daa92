"""A SQL text the run has already read or checked is not read or checked again (issue 34).

A run answers the same SQL many times (attempts, models). The run's SQL workers
(``ledger.run.sqlpool.SqlWorkers``) give a repeated read request its reading again
without a worker, unless that reading ran out of the judge budget; each DuckDB worker
remembers its own parse check (``Sandbox.refusal``) per text, and the run remembers the
texts that passed it on any worker (``CheckedTexts``): those are sent as checked. Real
workers, a real published bank; what is kept is observed from outside: a read that needs
a worker cannot finish while the only worker is held.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from test_pipeline import sales_fixture

from ledger.bank.registry import PublishedBank
from ledger.engines import executor_for
from ledger.engines.duckdb_sandbox import Sandbox, connect_sandboxed
from ledger.engines.process import CHECK_KEPT_CHARS, CHECKS_KEPT, CheckedTexts
from ledger.engines.reading import Reading, Readings, ReadRequest
from ledger.harness import limits
from ledger.harness.attempt import BankContext
from ledger.harness.reading import KeptReadings
from ledger.run.sqlpool import SqlWorkers

TABLES = ("customers", "order_items", "orders", "products", "sales", "stores", "visits")
SQL = "SELECT region, SUM(amount) AS total FROM sales GROUP BY region"


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> PublishedBank:
    return sales_fixture(tmp_path_factory)


def context_of(bank: PublishedBank) -> BankContext:
    """The published bank as the runner hands it to its SQL workers."""
    return BankContext(
        event=bank.event,
        db_path=bank.db_path,
        reference_sql=bank.references(),
        leak_check=lambda case_id, prompt: [],
        prompt_for=lambda case: "",
        prompt_contract_digest="",
    )


@pytest.fixture
def workers(bank: PublishedBank) -> Iterator[SqlWorkers]:
    with SqlWorkers(context_of(bank), 1, lambda event, path: executor_for(event, path)) as made:
        made.ready()
        yield made


def request(sql: str = SQL, *, reference: str | None = None, spent_ns: int = 0) -> ReadRequest:
    return ReadRequest(
        sql, TABLES, ("group_by",), reference, "duckdb", limits.DEFAULT_LIMITS, spent_ns
    )


def read_while_the_worker_is_held(workers: SqlWorkers, req: ReadRequest) -> Reading | None:
    """Read ``req`` with the one worker taken away: only a kept reading can come back."""
    held = workers.take()  # the only worker: a read that needs one waits for it
    found: list[Reading | None] = []
    reader = threading.Thread(target=lambda: found.append(workers.read(req)), daemon=True)
    reader.start()
    reader.join(60)  # a kept reading needs no worker; a read that needs one never ends
    finished_without_a_worker = not reader.is_alive()
    workers.give_back(held)
    reader.join(60)
    assert finished_without_a_worker, "the read waited for a worker"
    return found[0]


def test_a_repeated_read_request_is_answered_without_a_worker(workers: SqlWorkers) -> None:
    first = workers.read(request(spent_ns=1_000))
    assert first is not None
    assert first.passed is True
    # The same request, whatever CPU the output parse took before it: the kept reading.
    again = read_while_the_worker_is_held(workers, request(spent_ns=7_000))
    assert again == first


def test_another_request_for_the_same_text_goes_to_a_worker(workers: SqlWorkers) -> None:
    workers.read(request())
    other = request(reference="SELECT region FROM sales")
    held = workers.take()
    try:
        reader = threading.Thread(target=workers.read, args=(other,), daemon=True)
        reader.start()
        reader.join(2)
        # Another reference SQL is another request: it waits for a worker.
        assert reader.is_alive()
    finally:
        workers.give_back(held)
    reader.join(60)
    assert not reader.is_alive()
    found = workers.read(other)
    assert found is not None
    assert found.readings.match is False  # region alone is not the grouped total


def test_a_reading_over_the_judge_budget_is_not_kept(workers: SqlWorkers) -> None:
    budget_ns = limits.DEFAULT_LIMITS.judge_budget_ms * 1_000_000
    over = workers.read(request(spent_ns=budget_ns + 1))
    assert over is not None
    assert over.passed is False
    assert [v.check for v in over.violations] == ["too_complex"]
    assert limits.over_budget(over.violations)
    # The same text read again within the budget passes: the verdict above was not kept.
    again = workers.read(request(spent_ns=0))
    assert again is not None
    assert again.passed is True
    assert not limits.over_budget(again.violations)


def test_over_budget_names_only_the_budget_violation() -> None:
    ok = limits.judge_sql(
        SQL, TABLES, rules=(), reference_sql=None, limits=limits.DEFAULT_LIMITS,
        spent_ns=lambda: 0,
    )  # fmt: skip
    assert ok.passed
    deep = limits.judge_sql(
        "SELECT " + "(" * 40 + "1" + ")" * 40, TABLES, rules=(), reference_sql=None,
        limits=limits.DEFAULT_LIMITS, spent_ns=lambda: 0,
    )  # fmt: skip
    # Too deep is too_complex too, but it is the SQL's, not the machine's.
    assert [v.check for v in deep.violations] == ["too_complex"]
    assert not limits.over_budget(deep.violations)


def test_the_workers_parse_check_is_made_once_per_text(bank: PublishedBank) -> None:
    sandbox = Sandbox(connect_sandboxed(Path(bank.db_path)))
    try:
        assert sandbox.refusal(SQL) is None
        refused = "SELECT * FROM read_csv('x.csv')"
        first = sandbox.refusal(refused)
        assert first is not None
        assert first.startswith("refused by the worker's DuckDB parse check: ")
        # Asked again: the same answers, from what the worker remembers.
        assert sandbox.refusal(SQL) is None
        assert sandbox.refusal(refused) == first
        info = sandbox._kept.cache_info()
        assert (info.hits, info.misses) == (2, 2)
        # A text over the remembered length is checked each time, with the same answer.
        long_sql = SQL + " " * 70_000
        assert sandbox.refusal(long_sql) is None
        assert sandbox._kept.cache_info().misses == 2
    finally:
        sandbox.check.close()


def test_a_kept_reading_is_the_workers_own(workers: SqlWorkers) -> None:
    # What is kept is exactly what the worker answered (msgpack round trip and all).
    first = workers.read(request(reference=SQL))
    kept = workers.read(request(reference=SQL))
    assert first is not None
    assert kept is first
    assert msgspec.msgpack.encode(kept) == msgspec.msgpack.encode(first)
    assert kept.readings.match is True


CAPS = {"max_rows": 10, "max_result_bytes": 1 << 20, "max_cell_bytes": 1 << 16}


def test_a_text_that_passed_one_workers_check_is_not_checked_by_another(
    bank: PublishedBank,
) -> None:
    refused = "SELECT * FROM read_csv('x.csv')"
    with SqlWorkers(context_of(bank), 2, lambda event, path: executor_for(event, path)) as two:
        two.ready()
        x, y = two.take(), two.take()
        two.give_back(y)  # y is the only idle worker
        first = two.execute(SQL, **CAPS)  # on y: checked there
        assert two.execute(refused, **CAPS).error_kind == "refused"
        held = two.take()  # y again, the only idle one
        assert held is y
        two.give_back(x)
        again = two.execute(SQL, **CAPS)  # on x, which never saw it: sent as checked
        assert two.execute(refused, **CAPS).error_kind == "refused"  # checked again on x
        two.give_back(y)
        assert first.ok
        assert again.ok
        assert first.rows == again.rows
        # One memory for the run, shared by every worker's executor: the texts that
        # passed, never one that was refused.
        assert SQL in two._checks
        assert refused not in two._checks
        assert all(made._checks is two._checks for made in two._made)


def test_a_remembered_text_runs_without_the_workers_check_and_the_shadows_stand(
    bank: PublishedBank,
) -> None:
    # duckdb_tables() is refused by the worker's parse check (not a published table);
    # sent as already checked, it runs into the temporary macro that shadows it.
    text = "SELECT * FROM duckdb_tables()"
    with executor_for(bank.event, bank.db_path) as pool:
        assert pool.execute(text, **CAPS).error_kind == "refused"
        assert pool.execute(SQL, **CAPS).ok
        checks = CheckedTexts()
        pool.share_checks(checks)
        assert SQL not in checks  # the shared memory replaced the executor's own
        checks.add(text)
        skipped = pool.execute(text, **CAPS)
    assert skipped.error_kind == "sql_runtime"
    assert "duckdb_tables() is disabled in the SQL worker" in (skipped.error_message or "")


def test_the_remembered_checks_are_bounded() -> None:
    checks = CheckedTexts()
    for n in range(CHECKS_KEPT):
        checks.add(f"SELECT {n}")
    assert "SELECT 0" in checks  # now the most recently asked
    checks.add("SELECT -1")  # one over: the least recently used goes, SELECT 1
    assert "SELECT 1" not in checks
    assert "SELECT 0" in checks
    assert "SELECT -1" in checks
    long_sql = "SELECT 1" + " " * CHECK_KEPT_CHARS
    checks.add(long_sql)
    assert long_sql not in checks


def test_two_threads_asking_for_one_reading_read_it_once() -> None:
    """KeptReadings: while one thread reads a request, another asking for the same (with
    another CPU spent before it) waits for that reading instead of reading it again."""
    kept = KeptReadings()
    calls: list[ReadRequest] = []
    release = threading.Event()
    answer = Reading(True, (), "sha256:" + "1" * 64, Readings(SQL, "duckdb", None, (), None, None))

    def slow_read(req: ReadRequest) -> Reading:
        calls.append(req)
        release.wait(60)
        return answer

    found: list[Reading | None] = []
    threads = [
        threading.Thread(target=lambda n=n: found.append(kept.read(request(spent_ns=n), slow_read)))
        for n in (1, 2)
    ]
    for t in threads:
        t.start()
    while not calls:
        threading.Event().wait(0.01)
    threading.Event().wait(0.2)  # the second thread has had time to ask
    release.set()
    for t in threads:
        t.join(60)
    assert len(calls) == 1
    assert found == [answer, answer]
    # A text over the kept length is read every time.
    long_sql = SQL + " " * 70_000
    kept.read(request(long_sql), slow_read)
    kept.read(request(long_sql), slow_read)
    assert len(calls) == 3


def test_the_oracle_reads_a_text_once_for_all_its_databases(
    bank: PublishedBank, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Variant diagnostics judge each answer on every variant database: the SQL is read by
    one database's worker, executed on each; the verdicts are those of reading it on each."""
    from ledger.calibration.oracle import Oracle
    from ledger.engines.duckdb_worker import WorkerPool

    copies = {}
    for name in ("base", "v1", "v2"):
        copies[name] = tmp_path / f"{name}.duckdb"
        copies[name].write_bytes(Path(bank.db_path).read_bytes())
    case = next(c for c in bank.event.cases if c.id == "sf-01")
    gold = next(g for g in bank.event.gold if g.case_id == case.id)
    sent: list[str] = []
    real_read = WorkerPool.read

    def counted(self: WorkerPool, req: ReadRequest) -> Reading | None:
        sent.append(req.sql)
        return real_read(self, req)

    monkeypatch.setattr(WorkerPool, "read", counted)
    sql = bank.references()[case.id]
    with Oracle(copies, frozenset(TABLES)) as oracle:
        judged = [oracle.judge(case, sql, name, gold) for name in copies]
    assert sent == [sql]  # one reading for three databases
    with Oracle({"v2": copies["v2"]}, frozenset(TABLES)) as alone:
        own = alone.judge(case, sql, "v2", gold)
    assert len(sent) == 2  # that oracle read it on its own database
    assert [j.result_correct for j in judged] == [True, True, True]
    # The same verdict, digest and score as reading it there (an execution's time differs).
    fields = ("database", "result_correct", "error_kind", "message", "result_digest", "total")
    assert [getattr(judged[2], f) for f in fields] == [getattr(own, f) for f in fields]
