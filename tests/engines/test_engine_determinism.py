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
