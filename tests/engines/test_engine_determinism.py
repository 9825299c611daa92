"""Issue 30 on a real PostgreSQL cluster: every form of
``tests/data/guard/nondeterministic_postgres.sql`` is one PostgreSQL runs (so the guard's
``deterministic`` refusal, tested in tests/harness/test_determinism.py, stops a real
answer, not a syntax error), and the special inputs really read the clock.
"""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest
from test_guard import TABLES, load

from ledger.engines.postgres import SESSION_PINS, PostgresEngine
from ledger.harness.guard import guard

CORPUS = load("nondeterministic_postgres.sql")

# The columns the corpus names, typed as a bank would type them (empty tables suffice to
# show PostgreSQL accepts each statement).
TEMP_TABLES = """
CREATE TEMP TABLE sales (sale_id integer, store_id integer, product_id integer,
    sale_date date, quantity integer, revenue numeric(12, 2), quarter text, region text);
CREATE TEMP TABLE orders (order_id integer, customer_id integer, store_id integer,
    ordered_at timestamp, status text, total numeric(12, 2), channel text);
"""


def test_every_postgres_form_runs_on_postgresql(pg_dsn: str) -> None:
    failed = []
    with psycopg.connect(pg_dsn) as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(TEMP_TABLES)
        for entry in CORPUS:
            assert not guard(entry.sql, TABLES, "postgres").passed
            try:
                with con.transaction():
                    con.execute(entry.sql).fetchall()
            except psycopg.Error as exc:
                failed.append((entry.title, str(exc).splitlines()[0]))
    assert failed == []
    assert len(CORPUS) == 46


def test_the_special_inputs_read_the_clock(pg_dsn: str) -> None:
    # What the issue saw, worked out independently: 'today' is the server's current date,
    # 'tomorrow' the day after; two 'now' in two transactions differ.
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        row = con.execute("SELECT 'today'::date, 'tomorrow'::date, current_date").fetchone()
        assert row is not None
        today, tomorrow, current = row
        assert today == current
        assert tomorrow - today == dt.timedelta(days=1)
        first = con.execute("SELECT 'now'::timestamptz").fetchone()
        second = con.execute("SELECT 'now'::timestamptz").fetchone()
        assert first is not None
        assert second is not None
        assert first[0] < second[0]


@pytest.mark.parametrize("sql", ["SELECT 'epoch'::date", "SELECT 'allballs'::time"])
def test_fixed_special_inputs_are_allowed_and_fixed(pg_dsn: str, sql: str) -> None:
    assert guard(sql, TABLES, "postgres").passed
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        row = con.execute(sql).fetchone()
    assert row is not None
    assert row[0] in (dt.date(1970, 1, 1), dt.time(0, 0))


def test_reader_sessions_pin_the_settings_rows_and_text_depend_on(
    pg_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # No parallel plan (a Gather's row order), the locale (money, to_char's TM, L, D, G)
    # and IntervalStyle: fixed in every reader session, from the role and the connection,
    # also after the executor's DISCARD ALL.
    engine = PostgresEngine(dsn=pg_dsn)
    target = tmp_path_factory.mktemp("pins") / "0a1b2c3d4e5f" / "pg.json"
    engine.build("CREATE TABLE t (x numeric(6, 2));", "INSERT INTO t VALUES (1.50);", target)
    wanted = {
        "max_parallel_workers_per_gather": "0",
        "IntervalStyle": "postgres",
        "lc_monetary": "C",
        "lc_numeric": "C",
        "lc_time": "C",
    }
    try:
        assert dict(SESSION_PINS) == wanted
        with psycopg.connect(engine.reader_conninfo(target), autocommit=True) as con:
            for when in ("at login", "after DISCARD ALL"):
                shown = {k: str(con.execute(f"SHOW {k}").fetchone()[0]) for k in wanted}  # type: ignore[index]
                assert shown == wanted, when
                con.execute("DISCARD ALL")
            # The text these settings decide, worked out for the C locale and 'postgres'.
            row = con.execute("SELECT to_char(x, '9D99'), INTERVAL '1 day 2 hours'::text FROM t")
            assert row.fetchone() == (" 1.50", "1 day 02:00:00")
    finally:
        engine.drop(target)
