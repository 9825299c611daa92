"""Issue 15, "what it must show" 2 (the guard half): hostile statements of each engine's
own features are refused by the guard in that engine's dialect, with its allow-list.

The worker half (the same statements with the guard bypassed) is in
test_sqlite_engine.py and test_postgres_engine.py.
"""

from __future__ import annotations

import pytest

from ledger.harness.guard import guard

TABLES = {"sales", "stores"}

# (engine, SQL, the check that must refuse it)
HOSTILE = [
    ("sqlite", "ATTACH DATABASE '/tmp/x.db' AS x", "read_only_root"),
    ("sqlite", "SELECT load_extension('/tmp/evil.so')", "function_allowlist"),
    ("sqlite", "PRAGMA writable_schema = 1", "read_only_root"),
    ("sqlite", "PRAGMA table_info(sales)", "read_only_root"),
    ("sqlite", "SELECT name FROM sqlite_master", "table_references"),
    ("sqlite", "SELECT sql FROM sqlite_schema", "table_references"),
    ("sqlite", "SELECT readfile('/etc/passwd')", "function_allowlist"),
    ("sqlite", "SELECT writefile('/tmp/x', 'y')", "function_allowlist"),
    ("sqlite", "SELECT random()", "deterministic"),
    ("sqlite", "INSERT INTO sales VALUES (1)", "read_only_root"),
    ("sqlite", "DELETE FROM sales", "read_only_root"),
    ("sqlite", "DROP TABLE sales", "read_only_root"),
    ("sqlite", "SELECT 1 FROM sales; SELECT 2", "single_statement"),
    ("postgres", "COPY sales TO '/tmp/x'", "read_only_root"),
    ("postgres", "COPY (SELECT 1) TO PROGRAM 'id'", "read_only_root"),
    ("postgres", "SELECT pg_read_file('/etc/passwd')", "function_allowlist"),
    ("postgres", "SELECT pg_ls_dir('.')", "function_allowlist"),
    ("postgres", "SELECT * FROM dblink('host=x', 'select 1') AS t(a int)", "table_functions"),
    ("postgres", "SELECT lo_import('/etc/passwd')", "function_allowlist"),
    ("postgres", "SELECT set_config('search_path', 'x', false)", "function_allowlist"),
    ("postgres", "SELECT current_setting('data_directory')", "function_allowlist"),
    ("postgres", "SELECT pg_sleep(100)", "function_allowlist"),
    ("postgres", "SELECT * FROM pg_catalog.pg_authid", "table_references"),
    ("postgres", "SELECT usename FROM pg_shadow", "table_references"),
    ("postgres", "SELECT table_name FROM information_schema.tables", "table_references"),
    ("postgres", "CREATE EXTENSION dblink", "read_only_root"),
    ("postgres", "UPDATE sales SET amount = 0", "read_only_root"),
    ("postgres", "SELECT 1 FROM sales; SELECT 2", "single_statement"),
]


@pytest.mark.parametrize(("engine", "sql", "check"), HOSTILE)
def test_hostile_statement_is_refused_in_its_engine(engine: str, sql: str, check: str) -> None:
    verdict = guard(sql, TABLES, engine)
    assert not verdict.passed
    assert check in [v.check for v in verdict.violations]


@pytest.mark.parametrize("engine", ["duckdb", "sqlite", "postgres"])
def test_a_plain_query_passes_on_every_engine(engine: str) -> None:
    sql = "SELECT s.region, count(*) AS n FROM sales AS s GROUP BY s.region ORDER BY n DESC"
    assert guard(sql, TABLES, engine).passed


def test_the_dialect_decides_what_parses() -> None:
    # DuckDB's integer division operator is no operator in PostgreSQL's grammar.
    assert guard("SELECT 7 // 2 AS q FROM sales", TABLES, "duckdb").passed
    assert not guard("SELECT 7 // 2 AS q FROM sales", TABLES, "postgres").passed


def test_sqlite_strftime_passes_and_the_clock_through_an_argument_does_not() -> None:
    # sqlglot reads strftime('%Y', d) as TimeToStr(TsOrDsToTimestamp(d)); SQLite writes the
    # inner node as d alone, so there is no call to refuse.
    assert guard("SELECT strftime('%Y', s.d) AS y FROM sales AS s", TABLES, "sqlite").passed
    for sql, word, where in (
        ("SELECT date('now') AS today FROM sales", "now", "(line 1, col 13)"),
        ("SELECT datetime(s.d, 'localtime') AS t FROM sales AS s", "localtime", "(line 1, col 22)"),
    ):
        verdict = guard(sql, TABLES, "sqlite")
        assert [(v.check, v.message) for v in verdict.violations] == [
            (
                "deterministic",
                f"the argument '{word}' {where} reads the clock or the host's time zone; "
                "results would differ on re-execution",
            )
        ]
    # A comparison with the same word is data, not a clock.
    assert guard("SELECT count(*) AS n FROM sales WHERE zone = 'UTC'", TABLES, "sqlite").passed
