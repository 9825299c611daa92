"""Issue 30 "Every stored text is capped": the two amplification answers, run for real.

A replay run (real ``caseledger`` process, real SQL worker, real ledger file) whose
first answer makes the engine print an error message of tens of MB:

- DuckDB, retail bank: ``SELECT error(string_agg(customer_name || phone, ',')) FROM
  customers, range(200000)`` (26.6 MB stored before issue 30);
- PostgreSQL (a real throwaway cluster, tests/pgcluster.py), sales-fixture bank:
  ``SELECT CAST(string_agg(repeat('9x', 1000), '') AS integer) FROM
  generate_series(1, 20000)`` (40 MB stored before).

Each run must complete; the SqlExecuted holds the first ``max_text_bytes`` (8192) of the
message and ``texts_cut`` its whole length, which the test computes on its own: by
formula from the data, and by running the same SQL straight in DuckDB / psycopg. No
stored event row is over 1 MiB, and the JSON report stays under a bound worked out below.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import duckdb
import psycopg
import pytest
from runkit import answer, cli, fresh_home, stream

from ledger import events

CAP = 8192  # the documented default max_text_bytes (docs/running.md "Limits")
MIB = 1024 * 1024
DUCKDB_SQL = "SELECT error(string_agg(customer_name || phone, ',')) FROM customers, range(200000)"
PG_SQL = "SELECT CAST(string_agg(repeat('9x', 1000), '') AS integer) FROM generate_series(1, 20000)"
# The PostgreSQL message by hand: the prefix, 20,000 x 1,000 x "9x", the closing quote.
PG_PREFIX = 'invalid input syntax for type integer: "'
PG_WHOLE = len(PG_PREFIX) + 20_000 * 1_000 * 2 + 1


def _replay(path: Path, cases: list[str], first: str) -> Path:
    """One answer per case: the amplification SQL for the first case, ``SELECT 1`` after."""
    lines = [
        {"case": case, "attempt": 1, "output": answer(first if i == 0 else "SELECT 1 AS x")}
        for i, case in enumerate(cases)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _largest_row(home: Path) -> int:
    """The largest stored event body of the ledger file, in bytes (read with sqlite3)."""
    con = sqlite3.connect(f"file:{home / 'ledger.db'}?mode=ro", uri=True)
    try:
        (largest,) = con.execute("SELECT max(length(body)) FROM events").fetchone()
    finally:
        con.close()
    return int(largest)


def _check_run(home: Path, run_id: str, case: str, whole: int, first: str) -> events.SqlExecuted:
    """The run completed, its hostile SqlExecuted is cut with its whole length recorded."""
    stored = [s.event() for s in stream(home, run_id)]
    finished = stored[-1]
    assert isinstance(finished, events.RunFinished)
    assert finished.status == "completed"
    executed = [e for e in stored if isinstance(e, events.SqlExecuted) and e.case_id == case]
    assert len(executed) == 1
    ex = executed[0]
    assert (ex.ok, ex.error_kind) == (False, "sql_runtime")
    assert ex.texts_cut == (events.TextCut(field="error_message", bytes=whole),)
    assert ex.error_message is not None
    # Cut to 8192 bytes as stored: a JSON string, escapes included (json.dumps, not msgspec).
    assert ex.error_message.startswith(first)
    assert len(json.dumps(ex.error_message, ensure_ascii=False).encode("utf-8")) - 2 == CAP
    scored = [e for e in stored if isinstance(e, events.ScoreComputed) and e.case_id == case]
    # An execution error: result_correct is null (nothing executed to compare), DESIGN.md.
    assert [(s.failure_kind, s.result_correct) for s in scored] == [("execution", None)]
    return ex


def _stored_prefix(text: str, cap: int) -> str:
    """The longest prefix of ``text`` whose JSON string form (escapes included, no quotes)
    takes at most ``cap`` UTF-8 bytes, character by character."""
    used = 0
    for i, char in enumerate(text):
        used += len(json.dumps(char, ensure_ascii=False).encode("utf-8")) - 2
        if used > cap:
            return text[:i]
    return text


def _has_customers(path: Path) -> bool:
    con = duckdb.connect(str(path), read_only=True)
    try:
        found = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'customers'"
        ).fetchone()
    finally:
        con.close()
    return bool(found and found[0])


def _report_bytes(home: Path) -> int:
    done = cli(home, "report", "--format", "json")
    assert done.returncode == 0, done.stderr
    return len(done.stdout.encode("utf-8"))


@pytest.mark.slow
def test_duckdb_error_of_26_mb_is_stored_cut(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    home = fresh_home(tmp_path_factory, tmp_path)
    done = cli(home, "bank", "show", "retail", "--json")
    assert done.returncode == 0, done.stderr
    cases = [c["id"] for c in json.loads(done.stdout)["cases"]]
    assert len(cases) == 18
    replay = _replay(tmp_path / "amp.jsonl", cases, DUCKDB_SQL)

    # The whole message, worked out independently on the built bank database: DuckDB's
    # "Invalid Input Error: " and the aggregate, whose length follows from the data.
    [db] = [p for p in (home / "banks").glob("*.duckdb") if _has_customers(p)]
    con = duckdb.connect(str(db), read_only=True)
    try:
        total, count = con.execute(
            "SELECT sum(strlen(customer_name || phone)), count(customer_name || phone) "
            "FROM customers"
        ).fetchone()
        with pytest.raises(duckdb.Error) as raised:
            con.execute(DUCKDB_SQL).fetchall()
    finally:
        con.close()
    by_formula = len("Invalid Input Error: ") + 200_000 * total + (200_000 * count - 1)
    message = str(raised.value)
    assert len(message.encode("utf-8")) == by_formula
    assert by_formula > 10_000_000  # tens of MB (the issue stored it as a 26.6 MB event)

    done = cli(home, "run", "--bank", "retail", "--adapter", "replay", "--replay-file",
               str(replay), "--run-id", "amp")  # fmt: skip
    assert done.returncode == 0, done.stderr
    ex = _check_run(home, "amp", cases[0], by_formula, "Invalid Input Error: ")
    assert ex.error_message == _stored_prefix(message, CAP)
    assert _largest_row(home) < MIB
    # The report bound: the same run with a one-character error message (error('x')) makes
    # a report R0; the cut message adds at most its 8192 bytes (plain ASCII: the report
    # stores it as the ledger does) each place the report shows an attempt's error, and
    # the report shows it at most twice (the CaseRun's execution and its failure line).
    control = _replay(tmp_path / "control.jsonl", cases, "SELECT error('x')")
    small = fresh_home(tmp_path_factory, tmp_path / "control")
    done = cli(small, "run", "--bank", "retail", "--adapter", "replay", "--replay-file",
               str(control), "--run-id", "amp")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _report_bytes(home) <= _report_bytes(small) + 2 * CAP


@pytest.mark.slow
def test_postgres_error_of_40_mb_is_stored_cut(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, pg_dsn: str
) -> None:
    env = {"CASELEDGER_PG_DSN": pg_dsn}
    home = tmp_path / "led"
    home.mkdir()
    for args in (["init"], ["bank", "publish", "sales-fixture", "--engine", "postgres"]):
        done = cli(home, *args, env=env)
        assert done.returncode == 0, done.stderr
    cases = [f"sf-0{n}" for n in range(1, 8)]
    replay = _replay(tmp_path / "amp.jsonl", cases, PG_SQL)

    # The same SQL straight through psycopg: the first line of the error, as the worker keeps.
    with psycopg.connect(pg_dsn) as con, pytest.raises(psycopg.Error) as raised:
        con.execute(PG_SQL)
    message = str(raised.value).strip().splitlines()[0]
    assert len(message.encode("utf-8")) == PG_WHOLE
    assert message.startswith(PG_PREFIX + "9x9x")

    done = cli(home, "run", "--bank", "sales-fixture", "--adapter", "replay", "--replay-file",
               str(replay), "--run-id", "amp", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    ex = _check_run(home, "amp", "sf-01", PG_WHOLE, PG_PREFIX + "9x9x")
    # 8191 characters: the prefix's one '"' takes two bytes as stored (\\").
    assert ex.error_message == message[: CAP - 1] == _stored_prefix(message, CAP)
    assert _largest_row(home) < MIB
    # Under 1 MiB with everything else of the run (seven short attempts).
    assert _report_bytes(home) < MIB
    done = cli(home, "verify", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
