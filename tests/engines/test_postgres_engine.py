"""The PostgreSQL engine on a real throwaway server (tests/pgcluster.py): build, gold, sandbox.

Every expected value is worked out by hand from the bank files (schema.sql,
seed.sql) or from PostgreSQL's documented behaviour, never copied from the
engine's output. The hostile statements run with the guard bypassed: the
executor alone must stop them.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import signal
import stat
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlglot
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pgcluster import PgCluster, find_bin_dir

from ledger.engines.base import EngineQueryError
from ledger.engines.cells import encode_row, type_class
from ledger.engines.postgres import (
    FORMAT,
    PostgresEngine,
    PostgresExecutor,
    bank_names,
    catalog,
    column_type,
    from_environment,
    parse_memory_limit,
)
from ledger.errors import BankError, SandboxError, UsageError
from ledger.events import Column, TableSchema

REPO = Path(__file__).resolve().parents[2]
BANKS = REPO / "ledger" / "banks"
TIMEOUT_MARGIN_S = 2.5  # the timeout + this = the longest a runaway query may take


def transpile(text: str) -> str:
    """DuckDB bank SQL as PostgreSQL, statement by statement (what the lead's publish does)."""
    return ";\n".join(sqlglot.transpile(text, read="duckdb", write="postgres"))


def cases_of(bank: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load((BANKS / bank / "cases.yaml").read_text(encoding="utf-8"))
    return list(doc["cases"])


def build_bank(engine: PostgresEngine, bank: str, home: Path) -> Path:
    folder = BANKS / bank
    target = home / "banks" / f"{bank}0123abcd" / "pg.json"
    engine.build(
        transpile((folder / "schema.sql").read_text(encoding="utf-8")),
        transpile((folder / "seed.sql").read_text(encoding="utf-8")),
        target,
    )
    return target


def reader_backends(dsn: str, reader: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as con:
        row = con.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", [reader]
        ).fetchone()
    assert row is not None
    return int(row[0])


def bank_file(target: Path) -> dict[str, Any]:
    return dict(json.loads(target.read_text(encoding="utf-8")))


def server_has(dsn: str, names: list[str]) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as con:
        rows = con.execute(
            "SELECT datname::text FROM pg_database WHERE datname = ANY(%s) UNION ALL "
            "SELECT rolname::text FROM pg_roles WHERE rolname = ANY(%s)",
            [names, names],
        ).fetchall()
    return sorted(str(r[0]) for r in rows)


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def engine(pg_dsn: str) -> PostgresEngine:
    return PostgresEngine(dsn=pg_dsn)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pghome")


@pytest.fixture(scope="module")
def sales(engine: PostgresEngine, home: Path) -> Path:
    return build_bank(engine, "sales-fixture", home)


@pytest.fixture(scope="module")
def retail(engine: PostgresEngine, home: Path) -> Path:
    return build_bank(engine, "retail", home)


@pytest.fixture(scope="module")
def quiet(engine: PostgresEngine, home: Path) -> Path:
    """A bank no other test keeps a session on: its reader's backends can be counted."""
    target = home / "banks" / "9e1e7" / "pg.json"
    engine.build("CREATE TABLE t (x integer);", "INSERT INTO t VALUES (1), (2);", target)
    return target


@pytest.fixture(scope="module")
def executor(engine: PostgresEngine, sales: Path) -> Iterator[PostgresExecutor]:
    with engine.executor(sales) as ex:
        yield ex


# --------------------------------------------------------------------- the environment


def test_from_environment_needs_the_variable() -> None:
    with pytest.raises(UsageError) as info:
        from_environment({})
    assert "CASELEDGER_PG_DSN is not set" in info.value.message
    assert info.value.hint is not None
    assert "CREATEDB and CREATEROLE" in info.value.hint
    with pytest.raises(UsageError):
        from_environment({"CASELEDGER_PG_DSN": "   "})


def test_engine_uses_only_the_dsn_it_was_given(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CASELEDGER_PG_DSN", "host=/nonexistent user=nobody")
    monkeypatch.setenv("PGHOST", "/nonexistent")
    engine = PostgresEngine(dsn=pg_dsn)
    assert (engine.name, engine.dialect) == ("postgres", "postgres")
    # The version the Debian package's own binary prints: "postgres (PostgreSQL) 15.18 (...)".
    import subprocess

    printed = subprocess.run(
        [str(find_bin_dir() / "postgres"), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert engine.version() == printed.removeprefix("postgres (PostgreSQL) ")
    assert from_environment({"CASELEDGER_PG_DSN": pg_dsn}).version() == engine.version()


def test_unreachable_server_is_a_usage_error(tmp_path: Path) -> None:
    engine = PostgresEngine(dsn=f"host={tmp_path} port=1 user=nobody dbname=none")
    with pytest.raises(UsageError) as info:
        engine.version()
    assert "cannot connect to the PostgreSQL server of CASELEDGER_PG_DSN" in info.value.message


def test_dialect_notes_name_postgresql(engine: PostgresEngine) -> None:
    notes = engine.dialect_notes()
    assert notes.startswith("Write one PostgreSQL query")
    assert "Integer division truncates (7 / 2 = 3)" in notes


# ----------------------------------------------------------------------------- build


def test_bank_names_come_from_the_hash_folder_and_the_path() -> None:
    a = bank_names(Path("/h1/banks/0123456789abcdef0123456789abcdef99/pg.json"))
    b = bank_names(Path("/h2/banks/0123456789abcdef0123456789abcdef99/pg.json"))
    assert a.database.startswith("cl_0123456789abcdef01234567_")
    assert a.owner.startswith("cl_owner_0123456789abcdef01234567_")
    assert a.reader.startswith("cl_reader_0123456789abcdef01234567_")
    # 24 characters of the folder, "_", 10 hex digits of the path.
    assert len(a.database) == 3 + 24 + 1 + 10
    assert len(a.reader) == 10 + 24 + 1 + 10 <= 63
    assert a.database != b.database  # two homes, one server: never the same database


def test_build_writes_a_bank_file_without_a_secret(engine: PostgresEngine, sales: Path) -> None:
    body = bank_file(sales)
    names = bank_names(sales)
    assert body == {
        "format": FORMAT,
        "database": names.database,
        "schema": "public",
        "owner": names.owner,
        "reader": names.reader,
        "password_file": "pg.json.password",
        "server_version": engine.version(),
        "collate": "C",
        "ctype": "C.UTF-8",
    }
    secret = sales.with_name("pg.json.password")
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    password = secret.read_text(encoding="utf-8").strip()
    assert len(password) >= 40
    assert password not in sales.read_text(encoding="utf-8")


def test_tables_of_the_sales_fixture(engine: PostgresEngine, sales: Path) -> None:
    v, i, tz = "VARCHAR", "INTEGER", "TIMESTAMP WITH TIME ZONE"

    def table(name: str, *cols: tuple[str, str]) -> TableSchema:
        return TableSchema(name=name, columns=tuple(Column(name=n, type=t) for n, t in cols))

    assert engine.tables(sales) == (
        table("sale_tags", ("sale_id", v), ("tag", v)),
        table(
            "sales",
            ("sale_id", v),
            ("region", v),
            ("store_id", i),
            ("store_name", v),
            ("salesperson", v),
            ("deal_time", tz),
            ("created_at", tz),
            ("amount", "DECIMAL(12,2)"),
            ("valid", v),
        ),
        table("stores", ("store_id", i), ("store_name", v), ("region", v), ("status", v)),
    )


def test_tables_of_retail(engine: PostgresEngine, retail: Path) -> None:
    tables = {t.name: {c.name: c.type for c in t.columns} for t in engine.tables(retail)}
    assert list(tables) == [
        "categories", "customers", "order_items", "orders", "payments", "products",
        "returns", "stores",
    ]  # fmt: skip
    assert tables["customers"] == {
        "customer_id": "INTEGER", "customer_name": "VARCHAR", "city": "VARCHAR",
        "phone": "VARCHAR", "is_member": "BOOLEAN", "signup_date": "DATE",
    }  # fmt: skip
    assert tables["orders"]["order_ts"] == "TIMESTAMP"
    assert tables["products"]["list_price"] == "DECIMAL(10,2)"
    assert tables["returns"]["refund_amount"] == "DECIMAL(12,2)"


def test_reader_role_is_locked_down(pg_cluster: PgCluster, sales: Path, retail: Path) -> None:
    names, other = bank_names(sales), bank_names(retail)
    with psycopg.connect(pg_cluster.superuser_dsn, autocommit=True) as con:
        role = con.execute(
            "SELECT rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolinherit, "
            "rolconnlimit, rolconfig FROM pg_roles WHERE rolname = %s",
            [names.reader],
        ).fetchone()
        assert role is not None
        assert role[:6] == (True, False, False, False, False, 32)
        assert sorted(role[6]) == sorted(
            [
                "default_transaction_read_only=on", "statement_timeout=5s",
                "idle_in_transaction_session_timeout=10s", "work_mem=64MB",
                "temp_file_limit=256MB", "search_path=public", "TimeZone=UTC",
                "DateStyle=ISO", "client_connection_check_interval=1s",
                "cursor_tuple_fraction=1", "max_parallel_workers_per_gather=0",
                "IntervalStyle=postgres", "lc_monetary=C", "lc_numeric=C", "lc_time=C",
            ]
        )  # fmt: skip
        member_of = con.execute(
            "SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member "
            "WHERE r.rolname = %s",
            [names.reader],
        ).fetchone()
        assert member_of == (0,)
        owner = con.execute(
            "SELECT rolcanlogin, rolpassword IS NULL FROM pg_authid WHERE rolname = %s",
            [names.owner],
        ).fetchone()
        assert owner == (False, True)  # the owner logged in for the build only
        checks = con.execute(
            "SELECT has_database_privilege(%(r)s, %(db)s, 'CONNECT'), "
            "has_database_privilege(%(r)s, %(db)s, 'TEMPORARY'), "
            "has_database_privilege(%(r)s, %(other)s, 'CONNECT'), "
            "has_database_privilege('public', %(db)s, 'CONNECT')",
            {"r": names.reader, "db": names.database, "other": other.database},
        ).fetchone()
        assert checks == (True, False, False, False)
    with psycopg.connect(pg_cluster.dsn("cl_super", names.database), autocommit=True) as con:
        inside = con.execute(
            "SELECT has_schema_privilege(%(r)s, 'public', 'USAGE'), "
            "has_schema_privilege(%(r)s, 'public', 'CREATE'), "
            "has_table_privilege(%(r)s, 'public.sales', 'SELECT'), "
            "has_table_privilege(%(r)s, 'public.sales', 'INSERT,UPDATE,DELETE,TRUNCATE'), "
            "has_function_privilege(%(r)s, 'pg_read_file(text)', 'EXECUTE'), "
            "has_function_privilege(%(r)s, 'pg_read_binary_file(text)', 'EXECUTE'), "
            "has_function_privilege(%(r)s, 'pg_ls_dir(text)', 'EXECUTE'), "
            "has_function_privilege(%(r)s, 'pg_stat_file(text)', 'EXECUTE'), "
            "has_function_privilege(%(r)s, 'lo_import(text)', 'EXECUTE'), "
            "has_function_privilege(%(r)s, 'lo_export(oid, text)', 'EXECUTE'), "
            "has_function_privilege(%(r)s, 'set_config(text, text, boolean)', 'EXECUTE')",
            {"r": names.reader},
        ).fetchone()
        # The admin is no superuser: set_config stays executable (docs/engines.md).
        assert inside == (True, False, True, False, False, False, False, False, False, False, True)
        public = con.execute(
            "SELECT has_schema_privilege('public', 'public', 'USAGE'), "
            "has_schema_privilege('public', 'public', 'CREATE')"
        ).fetchone()
        assert public == (False, False)


def test_a_superuser_admin_also_revokes_set_config(pg_cluster: PgCluster, tmp_path: Path) -> None:
    engine = PostgresEngine(dsn=pg_cluster.superuser_dsn)
    target = build_bank(engine, "sales-fixture", tmp_path)
    names = bank_names(target)
    try:
        with psycopg.connect(pg_cluster.dsn("cl_super", names.database), autocommit=True) as con:
            row = con.execute(
                "SELECT has_function_privilege(%s, 'set_config(text, text, boolean)', 'EXECUTE')",
                [names.reader],
            ).fetchone()
        assert row == (False,)
        with engine.executor(target) as ex:
            result = ex.execute("SELECT set_config('work_mem', '1GB', false)", max_rows=1)
        assert (result.ok, result.error_kind) == (False, "refused")
        assert result.error_message == (
            "refused by PostgreSQL: permission denied for function set_config"
        )
    finally:
        engine.drop(target)


def test_build_refuses_to_overwrite(engine: PostgresEngine, sales: Path) -> None:
    with pytest.raises(BankError, match="refusing to overwrite"):
        engine.build("CREATE TABLE t (x int)", "", sales)


@pytest.mark.parametrize(
    ("schema", "seed", "expected"),
    [
        (
            "CREATE TABLE t (x integer);\nCREATE TABLE u (y nosuchtype);",
            "",
            'schema.sql line 2: PostgreSQL error: type "nosuchtype" does not exist',
        ),
        (
            "CREATE TABLE t (x integer PRIMARY KEY);",
            "INSERT INTO t VALUES (1);\nINSERT INTO t VALUES (1);",
            'seed.sql: PostgreSQL error: duplicate key value violates unique constraint "t_pkey"',
        ),
    ],
)
def test_a_failed_build_leaves_nothing(
    engine: PostgresEngine, pg_dsn: str, tmp_path: Path, schema: str, seed: str, expected: str
) -> None:
    target = tmp_path / "feedc0de" / "pg.json"
    with pytest.raises(BankError) as info:
        engine.build(schema, seed, target)
    assert info.value.message == expected
    names = bank_names(target)
    assert server_has(pg_dsn, [names.database, names.owner, names.reader]) == []
    assert not target.exists()
    assert not target.with_name("pg.json.password").exists()


def test_an_interrupted_build_leaves_nothing(
    engine: PostgresEngine, pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "feedc0de" / "pg.json"

    load = engine._load

    def interrupted(*args: Any) -> None:
        load(*args)
        raise KeyboardInterrupt

    # Ctrl-C after the database, the roles and the data exist, before the files.
    monkeypatch.setattr(engine, "_load", interrupted)
    with pytest.raises(KeyboardInterrupt):
        engine.build("CREATE TABLE t (x integer);", "INSERT INTO t VALUES (1);", target)
    names = bank_names(target)
    assert server_has(pg_dsn, [names.database, names.owner, names.reader]) == []
    assert list(target.parent.iterdir()) == []


def test_an_orphaned_database_is_named_not_dropped(
    engine: PostgresEngine, pg_dsn: str, tmp_path: Path
) -> None:
    target = tmp_path / "0ddba11" / "pg.json"
    names = bank_names(target)
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{names.database}"')
    try:
        with pytest.raises(BankError) as info:
            engine.build("CREATE TABLE t (x integer);", "", target)
        assert info.value.message.startswith(f"the server already has {names.database} ")
        assert server_has(pg_dsn, [names.database, names.owner, names.reader]) == [names.database]
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            con.execute(f'DROP DATABASE "{names.database}"')


def test_drop_removes_database_roles_and_files(
    engine: PostgresEngine, pg_dsn: str, tmp_path: Path
) -> None:
    target = tmp_path / "d0d0" / "pg.json"
    engine.build("CREATE TABLE t (x integer);", "INSERT INTO t VALUES (7);", target)
    names = bank_names(target)
    assert len(server_has(pg_dsn, [names.database, names.owner, names.reader])) == 3
    with engine.executor(target) as ex:  # an open session does not stop the drop
        assert ex.execute("SELECT x FROM t", max_rows=5).rows == ((7,),)
        engine.drop(target)
    assert server_has(pg_dsn, [names.database, names.owner, names.reader]) == []
    assert list(target.parent.iterdir()) == []


def test_enum_and_domain_columns(engine: PostgresEngine, tmp_path: Path) -> None:
    target = tmp_path / "e0e0" / "pg.json"
    engine.build(
        "CREATE TYPE mood AS ENUM ('sad', 'ok');\n"
        "CREATE DOMAIN money2 AS numeric(8, 2) CHECK (VALUE >= 0);\n"
        "CREATE TABLE m (feeling mood, price money2, feelings mood[]);",
        "INSERT INTO m VALUES ('ok', 12.5, ARRAY['sad', 'ok']::mood[]);",
        target,
    )
    try:
        columns = (
            Column(name="feeling", type="VARCHAR"),
            Column(name="price", type="DECIMAL(8,2)"),
            Column(name="feelings", type="MOOD[]"),
        )
        assert engine.tables(target) == (TableSchema(name="m", columns=columns),)
        # A query's domain column arrives as its base type (PostgreSQL resolves it).
        with engine.executor(target) as ex:
            result = ex.execute("SELECT feeling, price, feelings FROM m", max_rows=5)
        assert result.columns == columns
        # An array of an enum is PostgreSQL's text (psycopg knows no loader for it).
        assert result.rows == (("ok", "12.50", "{sad,ok}"),)
    finally:
        engine.drop(target)


# ------------------------------------------------------------------------------ gold


def test_sales_fixture_literal_numbers(engine: PostgresEngine, sales: Path) -> None:
    sql = {c["id"]: transpile(c["reference_sql"]) for c in cases_of("sales-fixture")}
    # S01 100 + S02 200 + S03 300: region 甲, valid, inside the Asia/Shanghai September.
    columns, rows = engine.reference(sales, sql["sf-01"])
    assert columns == (
        Column(name="order_count", type="BIGINT"),
        Column(name="amount", type="DECIMAL"),
    )
    assert rows == [(3, Decimal("600.00"))]
    # Per store, the closed store 3 has nothing: COALESCE(SUM(...), 0) is numeric 0, scale 0.
    _, rows = engine.reference(sales, sql["sf-07"] + " ORDER BY 1")
    assert rows == [
        (1, "门店A", "区域甲", Decimal("300.00")),
        (2, "门店B", "区域甲", Decimal("300.00")),
        (3, "门店C", "区域甲", Decimal("0")),
        (4, "门店C", "区域乙", Decimal("9000.00")),
    ]


def _all_cases() -> list[tuple[str, dict[str, Any]]]:
    return [(bank, case) for bank in ("sales-fixture", "retail") for case in cases_of(bank)]


@pytest.mark.parametrize(
    ("bank", "case"), _all_cases(), ids=lambda v: v if isinstance(v, str) else v["id"]
)
def test_reference_and_executor_agree(
    engine: PostgresEngine, sales: Path, retail: Path, bank: str, case: dict[str, Any]
) -> None:
    target = sales if bank == "sales-fixture" else retail
    sql = transpile(case["reference_sql"])
    columns, rows = engine.reference(target, sql)
    assert rows, "every built-in case has a non-empty gold"
    with engine.executor(target) as ex:
        result = ex.execute(sql, max_rows=int(case["max_rows"]))
    assert result.ok, result.error_message
    assert result.columns == columns
    assert result.rows == tuple(tuple(encode_row(r)) for r in rows)
    assert (result.row_count, result.truncated) == (len(rows), False)


def test_reference_refuses_what_is_not_one_query(engine: PostgresEngine, sales: Path) -> None:
    for sql, message in (
        ("SELECT 1; SELECT 2", "cannot insert multiple commands into a prepared statement"),
        ("DELETE FROM sales", 'syntax error at or near "DELETE"'),
        ("SELECT * FROM nope", 'relation "nope" does not exist'),
    ):
        with pytest.raises(EngineQueryError) as info:
            engine.reference(sales, sql)
        assert str(info.value) == message


def test_reference_of_a_missing_bank(engine: PostgresEngine, tmp_path: Path) -> None:
    with pytest.raises(BankError, match="is missing"):
        engine.reference(tmp_path / "none.json", "SELECT 1")


# ----------------------------------------------------------------------- typed cells

_TYPED = (
    "SELECT 1::int4 AS i, 2::int8 AS b, 3::int2 AS s, 1.50::numeric(5,2) AS d, "
    "2.5::float8 AS f, 0.5::real AS r, 'x'::text AS t, 'y'::varchar(3) AS v, true AS bo, "
    "DATE '2026-09-30' AS da, TIMESTAMP '2026-09-30 16:00:00' AS ts, "
    "TIMESTAMPTZ '2026-10-01 00:00:00+08:00' AS tz, '\\xdead'::bytea AS by, "
    "NULL::int AS n, ARRAY[1, 2] AS arr, 'infinity'::date AS inf, "
    "sum(7::numeric(4,1)) AS agg"
)


def test_types_and_cells(engine: PostgresEngine, sales: Path, executor: PostgresExecutor) -> None:
    expected_types = [
        "INTEGER", "BIGINT", "SMALLINT", "DECIMAL(5,2)", "DOUBLE", "FLOAT", "VARCHAR",
        "VARCHAR", "BOOLEAN", "DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "BLOB",
        "INTEGER", "INTEGER[]", "DATE", "DECIMAL",
    ]  # fmt: skip
    result = executor.execute(_TYPED, max_rows=5)
    assert result.ok, result.error_message
    assert [c.type for c in result.columns] == expected_types
    assert [type_class(t) for t in expected_types] == [
        "numeric", "numeric", "numeric", "numeric", "numeric", "numeric", "string", "string",
        "boolean", "date", "timestamp", "timestamp", "blob", "numeric", "other:INTEGER[]",
        "date", "numeric",
    ]  # fmt: skip
    assert result.rows == (
        (
            1, 2, 3, "1.50", "2.5", "0.5", "x", "y", True, "2026-09-30",
            "2026-09-30T16:00:00.000000", "2026-09-30T16:00:00.000000Z", "\\xdead", None,
            [1, 2], "infinity", "7.0",
        ),
    )  # fmt: skip
    columns, rows = engine.reference(sales, _TYPED)
    assert [c.type for c in columns] == expected_types
    assert rows == [
        (
            1, 2, 3, Decimal("1.50"), 2.5, 0.5, "x", "y", True, dt.date(2026, 9, 30),
            dt.datetime(2026, 9, 30, 16, 0),
            dt.datetime(2026, 9, 30, 16, 0, tzinfo=dt.UTC), b"\xde\xad", None, [1, 2],
            "infinity", Decimal("7.0"),
        )
    ]  # fmt: skip


@settings(max_examples=200)
@given(st.integers(1, 1000), st.data())
def test_numeric_typmods(precision: int, data: st.DataObject) -> None:
    scale = data.draw(st.integers(0, precision))
    name = column_type(1700, ((precision << 16) | scale) + 4)
    assert name == f"DECIMAL({precision},{scale})"
    assert type_class(name) == "numeric"


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 38), st.data())
def test_numeric_type_names_on_the_server(
    engine: PostgresEngine, sales: Path, precision: int, data: st.DataObject
) -> None:
    scale = data.draw(st.integers(0, precision))
    columns, rows = engine.reference(sales, f"SELECT 0::numeric({precision},{scale}) AS x")
    assert columns == (Column(name="x", type=f"DECIMAL({precision},{scale})"),)
    assert rows == [(Decimal(0).scaleb(-scale),)]


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(-(2**63), 2**63 - 1))
def test_bigint_cells(executor: PostgresExecutor, value: int) -> None:
    result = executor.execute(f"SELECT ({value})::int8 AS v", max_rows=1)
    # Cells keep ints below 2**53 as ints and write bigger ones as decimal strings.
    assert result.rows == ((value if abs(value) < 2**53 else str(value),),)


def test_memory_limits_parse() -> None:
    assert parse_memory_limit("512MB") == 512_000_000
    assert parse_memory_limit("1 GiB") == 1024**3
    assert parse_memory_limit("64kib") == 65536
    with pytest.raises(UsageError):
        parse_memory_limit("lots")


# -------------------------------------------------------------------------- caps


def test_max_rows_fetches_one_more(executor: PostgresExecutor) -> None:
    sql = "SELECT g FROM generate_series(1, 10) AS g ORDER BY g"
    three = executor.execute(sql, max_rows=3)
    assert (three.rows, three.row_count, three.truncated) == (((1,), (2,), (3,)), 3, True)
    ten = executor.execute(sql, max_rows=10)
    assert (ten.row_count, ten.truncated) == (10, False)
    none = executor.execute(sql, max_rows=0)
    assert (none.rows, none.truncated) == ((), True)
    # Over several FETCH chunks (64, then 256, ...).
    big = executor.execute("SELECT g FROM generate_series(1, 500) AS g ORDER BY g", max_rows=400)
    assert (big.row_count, big.truncated, big.rows[-1]) == (400, True, (400,))


def test_result_and_cell_caps(executor: PostgresExecutor) -> None:
    wide = executor.execute(
        "SELECT repeat('x', 1000) AS w FROM generate_series(1, 100)",
        max_rows=200,
        max_result_bytes=10_000,
    )
    assert (wide.ok, wide.error_kind) == (False, "result_too_large")
    # Columns: "w" + "VARCHAR" + 22 = 30 bytes; a row: 1002-byte cell + 2 = 1004 bytes; the
    # tenth row makes 10070 > 10000.
    assert wide.error_message == (
        "the result is over the 10000-byte cap (stopped reading after 10 rows of 1 columns)"
    )
    cut = executor.execute(
        "SELECT repeat('y', 50) AS w, 'short' AS s", max_rows=1, max_cell_bytes=12
    )
    assert cut.rows == (("yyyyyyyyyy", "short"),)  # 10 characters + 2 quotes = 12 bytes
    assert cut.cells_truncated == 1


# ------------------------------------------------------------ hostile, guard bypassed


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("COPY sales TO PROGRAM 'id'", 'syntax error at or near "COPY"'),
        ("COPY sales FROM '/etc/passwd'", 'syntax error at or near "COPY"'),
        ("SELECT pg_read_file('/etc/passwd')", "permission denied for function pg_read_file"),
        ("SELECT pg_ls_dir('/')", "permission denied for function pg_ls_dir"),
        ("SELECT lo_import('/etc/passwd')", "permission denied for function lo_import"),
        ("SELECT lo_export(1, '/tmp/x')", "permission denied for function lo_export"),
        ("CREATE EXTENSION dblink", 'syntax error at or near "CREATE"'),
        ("SELECT * FROM pg_catalog.pg_authid", "permission denied for table pg_authid"),
        ("SELECT * FROM pg_shadow", "permission denied for view pg_shadow"),
        ("INSERT INTO sales (sale_id) VALUES ('X')", 'syntax error at or near "INSERT"'),
        ("UPDATE sales SET amount = 0", 'syntax error at or near "UPDATE"'),
        ("DELETE FROM sales", 'syntax error at or near "DELETE"'),
        ("CREATE TABLE x (a int)", 'syntax error at or near "CREATE"'),
        ("DROP TABLE sales", 'syntax error at or near "DROP"'),
        ("SELECT 1; DROP TABLE sales", "cannot insert multiple commands into a prepared statement"),
        (
            "WITH d AS (DELETE FROM sales RETURNING *) SELECT * FROM d",
            "DECLARE CURSOR must not contain data-modifying statements in WITH",
        ),
        (
            "SELECT * FROM sales FOR UPDATE",
            "cannot execute SELECT FOR UPDATE in a read-only transaction",
        ),
        ("SELECT nextval('s')", 'relation "s" does not exist'),
    ],
)
def test_hostile_statements_are_stopped(executor: PostgresExecutor, sql: str, message: str) -> None:
    result = executor.execute(sql, max_rows=5)
    assert result.ok is False
    if message.startswith("relation"):
        assert (result.error_kind, result.error_message) == ("sql_runtime", message)
    else:
        assert (result.error_kind, result.error_message) == (
            "refused",
            f"refused by PostgreSQL: {message}",
        )
    after = executor.execute("SELECT count(*) AS n FROM sales", max_rows=1)
    assert after.rows == ((6,),)  # nothing was written, the session still works


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        # libpq takes C strings: the NUL would silently cut the statement.
        (
            "SELECT 1\x00; DROP TABLE sales",
            "cannot be sent to PostgreSQL: it contains a NUL character",
        ),
        (
            "SELECT '\ud800'",
            "cannot be sent to PostgreSQL: it is not valid UTF-8 (a lone surrogate)",
        ),
        (
            "SELECT $1",
            "refused by PostgreSQL: bind message supplies 0 parameters, but prepared statement "
            '"" requires 1',
        ),
        ("", "refused by PostgreSQL: syntax error at end of input"),
        ("-- only a comment", "refused by PostgreSQL: syntax error at end of input"),
        ("SHOW work_mem", 'refused by PostgreSQL: syntax error at or near "SHOW"'),
        ("EXPLAIN SELECT 1", 'refused by PostgreSQL: syntax error at or near "EXPLAIN"'),
    ],
)
def test_what_is_not_one_plain_query_is_refused(
    executor: PostgresExecutor, sql: str, message: str
) -> None:
    result = executor.execute(sql, max_rows=1)
    assert (result.error_kind, result.error_message) == ("refused", message)
    assert executor.execute("SELECT count(*) FROM sales", max_rows=1).rows == ((6,),)


def test_queries_a_cursor_takes(executor: PostgresExecutor) -> None:
    # Placeholders are not interpreted; VALUES, TABLE, parentheses, a trailing ; or comment.
    assert executor.execute("SELECT '%s' AS x", max_rows=1).rows == (("%s",),)
    assert executor.execute("VALUES (1), (2)", max_rows=5).rows == ((1,), (2,))
    assert executor.execute("TABLE stores", max_rows=5).row_count == 4
    assert executor.execute("(SELECT 1 AS a);", max_rows=1).rows == ((1,),)
    assert executor.execute("SELECT 1 AS a -- the end", max_rows=1).rows == ((1,),)
    empty = executor.execute("SELECT sale_id FROM sales WHERE false", max_rows=1)
    assert (empty.columns, empty.rows, empty.truncated) == (
        (Column(name="sale_id", type="VARCHAR"),),
        (),
        False,
    )


def test_dblink_is_not_there_and_cannot_be_created(
    engine: PostgresEngine, executor: PostgresExecutor, sales: Path
) -> None:
    missing = executor.execute("SELECT dblink_connect('host=/tmp')", max_rows=1)
    assert (missing.error_kind, missing.error_message) == (
        "sql_runtime",
        "function dblink_connect(unknown) does not exist",
    )
    # Straight on a reader session, outside the executor: read-only first, and with
    # read-only switched off the reader still may not create the (untrusted) extension.
    with psycopg.connect(engine.reader_conninfo(sales), autocommit=True) as con:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            con.execute("CREATE EXTENSION dblink")
        con.execute("SET default_transaction_read_only = off")
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as info:
            con.execute("CREATE EXTENSION dblink")
        assert str(info.value).startswith('permission denied to create extension "dblink"')
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            con.execute("CREATE TABLE public.x (a int)")


def test_set_config_does_not_escape_the_query(executor: PostgresExecutor) -> None:
    changed = executor.execute(
        "SELECT set_config('search_path', 'pg_catalog', false) AS p", max_rows=1
    )
    assert changed.rows == (("pg_catalog",),)
    assert executor.execute("SELECT count(*) FROM sales", max_rows=1).rows == ((6,),)
    shown = executor.execute("SELECT current_setting('search_path') AS p", max_rows=1)
    assert shown.rows == (("public",),)
    ro = executor.execute(
        "SELECT set_config('default_transaction_read_only', 'off', false) AS p", max_rows=1
    )
    assert ro.ok
    assert executor.execute(
        "SELECT current_setting('default_transaction_read_only') AS p", max_rows=1
    ).rows == (("on",),)


def test_another_banks_database_is_out_of_reach(
    engine: PostgresEngine, executor: PostgresExecutor, sales: Path, retail: Path
) -> None:
    other = bank_names(retail).database
    # The other bank's database name, made by bank_names (no outside input).
    cross = executor.execute(f"SELECT * FROM {other}.public.orders", max_rows=1)  # noqa: S608
    assert (cross.error_kind, cross.error_message) == (
        "sql_runtime",
        f'cross-database references are not implemented: "{other}.public.orders"',
    )
    # The sales reader's own credentials on the retail database: CONNECT refused.
    info = psycopg.conninfo.conninfo_to_dict(engine.reader_conninfo(sales))
    info["dbname"] = other
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(psycopg.conninfo.make_conninfo(**info))
    assert f'permission denied for database "{other}"' in str(refused.value)


# --------------------------------------------------------------- timeouts and cleanup


@pytest.mark.slow
def test_pg_sleep_is_a_timeout_and_leaves_no_backend(
    engine: PostgresEngine, quiet: Path, pg_dsn: str
) -> None:
    reader = bank_names(quiet).reader
    with engine.executor(quiet, timeout_s=2.0) as ex:
        start = time.monotonic()
        result = ex.execute("SELECT pg_sleep(100)", max_rows=1)
        took = time.monotonic() - start
        assert (result.ok, result.error_kind) == (False, "timeout")
        assert result.error_message == (
            "query canceled after 2 s: canceling statement due to statement timeout"
        )
        assert 2.0 <= took < 2.0 + TIMEOUT_MARGIN_S
        assert ex.backend_pids() == ()
        assert reader_backends(pg_dsn, reader) == 0
        # The next query gets a fresh session.
        assert ex.execute("SELECT 1 AS one", max_rows=1).rows == ((1,),)
    assert reader_backends(pg_dsn, reader) == 0


@pytest.mark.slow
def test_statement_timeout_switched_off_inside_the_query_still_times_out(
    engine: PostgresEngine, quiet: Path, pg_dsn: str
) -> None:
    # The first FETCH (64 rows) turns statement_timeout off for the session; the second
    # FETCH sleeps at row 101: only the worker's watchdog can stop it.
    sql = (
        "SELECT set_config('statement_timeout', '0', false) AS t, "
        "pg_sleep(CASE WHEN g > 100 THEN 100 ELSE 0 END) AS s "
        "FROM generate_series(1, 200) AS g"
    )
    with engine.executor(quiet, timeout_s=2.0) as ex:
        start = time.monotonic()
        result = ex.execute(sql, max_rows=1000)
        took = time.monotonic() - start
        assert result.error_kind == "timeout"
        assert result.error_message == (
            "query canceled after 2 s: canceling statement due to user request"
        )
        assert 2.25 <= took < 2.0 + TIMEOUT_MARGIN_S  # the watchdog's 0.25 s slack
        assert reader_backends(pg_dsn, bank_names(quiet).reader) == 0


@pytest.mark.slow
def test_a_stuck_worker_is_killed_and_its_backend_terminated(
    engine: PostgresEngine, quiet: Path, pg_dsn: str
) -> None:
    reader = bank_names(quiet).reader
    with engine.executor(quiet, timeout_s=2.0) as ex:
        pid = ex.worker_pid()
        assert pid is not None
        # A worker that never answers (stopped): the parent waits 2 s + 2 s grace.
        timer = threading.Timer(0.3, os.kill, (pid, signal.SIGSTOP))
        timer.start()
        start = time.monotonic()
        result = ex.execute("SELECT pg_sleep(100)", max_rows=1)
        took = time.monotonic() - start
        timer.join()
        assert result.error_kind == "timeout"
        assert result.error_message == (
            "query did not stop within 2 s + 2 s grace; worker killed and its backend terminated"
        )
        assert 4.0 <= took < 4.0 + TIMEOUT_MARGIN_S
        assert reader_backends(pg_dsn, reader) == 0
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped
        assert ex.execute("SELECT 2 AS two", max_rows=1).rows == ((2,),)
        assert ex.worker_pid() != pid


@pytest.mark.slow
def test_memory_failures(engine: PostgresEngine, sales: Path) -> None:
    # A generous timeout: building 200 MB takes the server seconds on a busy machine.
    with engine.executor(sales, memory_limit="128MB", timeout_s=60.0) as ex:
        # 200 MB in one cell does not fit the worker's 128 MB of headroom.
        big = ex.execute("SELECT repeat('x', 200000000) AS big", max_rows=1)
        assert big.error_kind == "memory"
        assert big.error_message == "cannot allocate memory for input buffer"
        # 30 million rows of a function scan spill past temp_file_limit (256 MB).
        spill = ex.execute("SELECT count(*) FROM generate_series(1, 30000000)", max_rows=1)
        assert (spill.error_kind, spill.error_message) == (
            "memory",
            "temporary file size exceeds temp_file_limit (262144kB)",
        )
        assert ex.execute("SELECT 3 AS three", max_rows=1).rows == ((3,),)


def test_close_leaves_no_process_and_no_backend(
    engine: PostgresEngine, quiet: Path, pg_dsn: str
) -> None:
    reader = bank_names(quiet).reader
    ex = engine.executor(quiet)
    pid = ex.worker_pid()
    assert pid is not None
    assert len(ex.backend_pids()) == 1
    assert ex.execute("SELECT 1 AS one", max_rows=1).ok
    ex.close()
    ex.close()  # twice is fine
    assert reader_backends(pg_dsn, reader) == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(SandboxError, match="closed"):
        ex.execute("SELECT 1", max_rows=1)


def test_threads_take_turns(executor: PostgresExecutor) -> None:
    results: dict[int, Any] = {}

    def run(n: int) -> None:
        query = f"SELECT {n} AS n, count(*) AS c FROM sales"  # noqa: S608 (n is an int)
        results[n] = executor.execute(query, max_rows=1)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {n: r.rows for n, r in results.items()} == {n: ((n, 6),) for n in range(6)}


def test_executor_needs_a_private_password_file(engine: PostgresEngine, tmp_path: Path) -> None:
    target = tmp_path / "5ec" / "pg.json"
    engine.build("CREATE TABLE t (x integer);", "", target)
    secret = target.with_name("pg.json.password")
    try:
        secret.chmod(0o644)
        with pytest.raises(BankError) as info:
            engine.executor(target)
        assert info.value.message.endswith("readable by others (mode 644)")
        assert info.value.hint == f"chmod 600 {secret}"
        secret.chmod(0o600)
        secret.write_text("wrong\n", encoding="utf-8")
        with pytest.raises(SandboxError) as failed:
            engine.executor(target)
        assert "password authentication failed" in failed.value.message
    finally:
        engine.drop(target)
    with pytest.raises(BankError, match="is missing"):
        engine.executor(target)


# ------------------------------------------------------------------------ allow-list


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location(
        "gen_pg", REPO / "tools" / "gen_postgres_allowlist.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_checked_in_allow_list_is_what_the_server_gives(pg_dsn: str) -> None:
    checked = json.loads((REPO / "ledger" / "engines" / "postgres_functions.json").read_text())
    fresh = _tool().generate(pg_dsn)
    # The Debian patch level may move; the major version and every verdict may not.
    assert fresh["server_version_num"] // 10000 == checked["server_version_num"] // 10000
    assert fresh["deny_rules"] == checked["deny_rules"]
    assert fresh["functions"] == checked["functions"]


def test_allow_list_verdicts() -> None:
    cat = catalog()
    for name in ("sum", "date_trunc", "coalesce", "greatest", "trim", "row_number", "round"):
        assert cat.call_refusal(name) is None, name
    assert sorted(cat.from_functions) == ["generate_series", "unnest"]
    denied = {
        "pg_read_file": "files", "pg_read_binary_file": "files", "pg_ls_dir": "files",
        "pg_stat_file": "files", "lo_import": "files", "lo_export": "files",
        "set_config": "settings", "current_setting": "settings", "pg_sleep": "non_reproducible",
        "now": "non_reproducible", "random": "non_reproducible", "query_to_xml": "sql_text",
        "ts_stat": "sql_text", "nextval": "side_effects", "pg_terminate_backend": "side_effects",
        "current_user": "session", "version": "environment", "pg_table_size": "catalog",
        "int4in": "internal", "regexp_matches": "table_function",
    }  # fmt: skip
    for name, category in denied.items():
        assert cat.denied.get(name, ("allowed",))[0] == category, name
    unknown = cat.call_refusal("dblink")
    assert unknown is not None
    assert unknown.startswith("is not a ")
    assert unknown.endswith("function the allow-list knows")
