"""The SQLite engine outside the worker: build, tables, the canonical digest, the gold's
reference query and its typed columns, the SQL text checks. Real SQLite files throughout;
every expected value below is worked out by hand."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.engines import get_engine
from ledger.engines.base import EngineQueryError
from ledger.engines.cells import encode_row
from ledger.engines.sqlite import SQLiteEngine, build_from_file, canonical_digest
from ledger.engines.sqlite_sandbox import (
    column_plan,
    first_keyword,
    parse_memory_limit,
    split_statements,
    statement_refusal,
)
from ledger.errors import BankError, UsageError
from ledger.events import Column, TableSchema

ENGINE = SQLiteEngine()

SCHEMA = """
-- a small bank: a typed table, an untyped one, a view and a trigger (never fired)
CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL, tag varchar(8));
CREATE TABLE mixed (k INTEGER, v, b BLOB);
CREATE VIEW cheap AS SELECT id, name FROM item WHERE price < 5;
CREATE TRIGGER item_guard BEFORE DELETE ON item BEGIN SELECT RAISE(ABORT, 'no; never'); END;
"""
SEED = """
INSERT INTO item VALUES (1, 'pen; blue', 1.5, 'a'), (2, 'book', 12, NULL), (3, 'cup', 4.25, 'b');
INSERT INTO mixed VALUES (1, 'a', X'00FF'), (2, 3, NULL), (3, 2.5, X'01');
"""


def _build(folder: Path, schema: str = SCHEMA, seed: str = SEED, name: str = "bank.sqlite") -> Path:
    target = folder / name
    ENGINE.build(schema, seed, target)
    return target


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("sqlite-bank"))


# ----------------------------------------------------------------------- the engine


def test_engine_identity() -> None:
    assert (ENGINE.name, ENGINE.dialect, ENGINE.version()) == (
        "sqlite",
        "sqlite",
        sqlite3.sqlite_version,
    )
    notes = ENGINE.dialect_notes()
    assert f"SQLite {sqlite3.sqlite_version}" in notes
    assert "integer division" in notes
    assert isinstance(get_engine("sqlite"), SQLiteEngine)


# ------------------------------------------------------------------------------ build


def test_build_runs_schema_and_seed(bank: Path) -> None:
    con = sqlite3.connect(bank)
    try:
        rows = con.execute("SELECT id, name, price, tag FROM item ORDER BY id").fetchall()
        triggers = con.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'").fetchall()
    finally:
        con.close()
    # REAL affinity stores the integer 12 as the real 12.0
    assert rows == [(1, "pen; blue", 1.5, "a"), (2, "book", 12.0, None), (3, "cup", 4.25, "b")]
    assert triggers == [("item_guard",)]


def test_tables_are_sorted_with_declared_types_upper_cased(bank: Path) -> None:
    assert ENGINE.tables(bank) == (
        TableSchema(name="cheap", columns=(Column(name="id", type="INTEGER"),
                                           Column(name="name", type="TEXT"))),
        TableSchema(name="item", columns=(
            Column(name="id", type="INTEGER"),
            Column(name="name", type="TEXT"),
            Column(name="price", type="REAL"),
            Column(name="tag", type="VARCHAR(8)"),
        )),
        TableSchema(name="mixed", columns=(
            Column(name="k", type="INTEGER"),
            Column(name="v", type=""),
            Column(name="b", type="BLOB"),
        )),
    )  # fmt: skip


def test_build_refuses_to_overwrite(bank: Path) -> None:
    before = canonical_digest(bank)
    with pytest.raises(BankError, match="refusing to overwrite"):
        ENGINE.build("CREATE TABLE other (x INTEGER);", "", bank)
    assert canonical_digest(bank) == before


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_schema_error_names_the_file_statement_line_and_sqlite_message(tmp_path: Path) -> None:
    schema = "CREATE TABLE t (a INTEGER);\n\n-- again\nCREATE TABLE t (b TEXT);\n"
    with pytest.raises(BankError) as caught:
        ENGINE.build(schema, "", tmp_path / "bank.sqlite")
    error = caught.value
    assert "schema.sql: statement 2 (line 4): SQLite error: table t already exists" in str(error)
    assert error.hint is not None
    assert f"SQLite {sqlite3.sqlite_version}" in error.hint
    assert _leftovers(tmp_path) == []  # neither the target nor a temporary file


def test_a_seed_error_names_seed_sql(tmp_path: Path) -> None:
    with pytest.raises(BankError, match=r"seed\.sql: statement 2 \(line 2\).*no such table: nope"):
        ENGINE.build(
            "CREATE TABLE t (a INTEGER);",
            "INSERT INTO t VALUES (1);\nINSERT INTO nope VALUES (2);",
            tmp_path / "bank.sqlite",
        )
    assert _leftovers(tmp_path) == []


# ----------------------------------------------------------------------- build_from_file


def test_build_from_file_copies_the_data(bank: Path, tmp_path: Path) -> None:
    target = tmp_path / "copy.sqlite"
    build_from_file(bank, target)
    assert canonical_digest(target) == canonical_digest(bank)
    assert ENGINE.tables(target) == ENGINE.tables(bank)
    with pytest.raises(BankError, match="refusing to overwrite"):
        build_from_file(bank, target)


def test_build_from_file_refuses_what_is_not_a_database(tmp_path: Path) -> None:
    source = tmp_path / "data.sqlite"
    source.write_text("id,name\n1,pen\n" * 100, encoding="utf-8")
    with pytest.raises(BankError, match="cannot read it as a SQLite database"):
        build_from_file(source, tmp_path / "out" / "bank.sqlite")
    assert not (tmp_path / "out" / "bank.sqlite").exists()
    with pytest.raises(BankError, match="not found"):
        build_from_file(tmp_path / "missing.sqlite", tmp_path / "bank2.sqlite")


# ---------------------------------------------------------------------- canonical digest

_ROWS = [(1, "pen", 1.5), (2, "book", 12.25), (3, None, 0.1), (4, "cup", None)]


def _digest_of(
    rows: list[tuple[object, ...]],
    *,
    page_size: int = 4096,
    vacuum: bool = False,
    churn: bool = False,
) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d.sqlite"
        con = sqlite3.connect(path)
        con.execute(f"PRAGMA page_size={page_size}")
        con.execute("CREATE TABLE t (id INTEGER, name TEXT, amount REAL)")
        con.execute("CREATE TABLE u (x)")
        if churn:  # rows inserted and deleted again move the live rows' pages and rowids
            con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(9, "gone" * 200, 1.0)] * 50)
        con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
        if churn:
            con.execute("DELETE FROM t WHERE id = 9")
        con.commit()
        if vacuum:
            con.execute("VACUUM")
        con.close()
        return canonical_digest(path)


def test_digest_ignores_insert_order_page_size_and_vacuum() -> None:
    first = _digest_of(_ROWS)
    assert first.startswith("sha256:")
    assert len(first) == len("sha256:") + 64
    assert _digest_of(list(reversed(_ROWS)), churn=True) == first
    assert _digest_of(_ROWS[2:] + _ROWS[:2], page_size=1024, vacuum=True) == first


def test_one_changed_cell_changes_the_digest() -> None:
    changed = [*_ROWS[:3], (4, "cup", 0.5)]
    assert _digest_of(changed) != _digest_of(_ROWS)
    assert _digest_of([*_ROWS, _ROWS[0]]) != _digest_of(_ROWS)  # a duplicate row counts


def test_digest_keeps_storage_classes_apart(tmp_path: Path) -> None:
    digests = set()
    # the integer 1, the real 1.0, the blob '1' and the text '1.0'
    seeds = ("VALUES (1)", "VALUES (1.0)", "VALUES (X'31')", "VALUES ('1.0')")
    for i, values in enumerate(seeds):
        path = tmp_path / f"v{i}.sqlite"
        ENGINE.build("CREATE TABLE u (x);", "INSERT INTO u " + values, path)
        digests.add(canonical_digest(path))
    assert len(digests) == 4


def test_digest_covers_the_schema(tmp_path: Path) -> None:
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    ENGINE.build("CREATE TABLE t (x INTEGER);", "", a)
    ENGINE.build("CREATE TABLE t (x TEXT);", "", b)
    assert canonical_digest(a) != canonical_digest(b)


@settings(max_examples=25, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(-(2**63), 2**63 - 1),
            st.none() | st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00")),
            st.none() | st.floats(allow_nan=False, allow_infinity=False),
        ),
        max_size=12,
    ),
    seed=st.randoms(use_true_random=False),
)
def test_digest_is_the_same_for_any_insert_order(rows: list[tuple[object, ...]], seed) -> None:
    shuffled = list(rows)
    seed.shuffle(shuffled)
    assert _digest_of(shuffled, vacuum=True) == _digest_of(rows)


# ------------------------------------------------------------------ reference and types


def test_reference_types_columns_from_their_values(bank: Path) -> None:
    columns, rows = ENGINE.reference(bank, "SELECT k, v, b, NULL AS blank FROM mixed ORDER BY k")
    assert columns == (
        Column(name="k", type="BIGINT"),
        Column(name="v", type="VARCHAR"),  # 'a', 3 and 2.5: text and numbers -> text
        Column(name="b", type="BLOB"),
        Column(name="blank", type="VARCHAR"),  # no value but NULL
    )
    assert rows == [(1, "a", b"\x00\xff", None), (2, "3", None, None), (3, "2.5", b"\x01", None)]
    assert [encode_row(r) for r in rows] == [
        [1, "a", "\\x00ff", None],
        [2, "3", None, None],
        [3, "2.5", "\\x01", None],
    ]


def test_integers_and_reals_in_one_column_are_doubles(bank: Path) -> None:
    columns, rows = ENGINE.reference(
        bank, "SELECT id, CASE WHEN id = 2 THEN 7 ELSE price END AS p FROM item ORDER BY id"
    )
    assert [c.type for c in columns] == ["BIGINT", "DOUBLE"]
    assert rows == [(1, 1.5), (2, 7.0), (3, 4.25)]
    assert type(rows[1][1]) is float


def test_sqlite_arithmetic_is_sqlites_own(bank: Path) -> None:
    columns, rows = ENGINE.reference(
        bank, "SELECT 7 * 100 / 9 AS pct, CAST(0.1 AS REAL) AS r, 7 / 2.0 AS half, -7 / 2 AS neg"
    )
    assert [c.type for c in columns] == ["BIGINT", "DOUBLE", "DOUBLE", "BIGINT"]
    assert rows == [(77, 0.1, 3.5, -3)]  # integer division truncates toward zero
    assert encode_row(rows[0]) == [77, "0.1", "3.5", -3]


def test_an_empty_result_has_varchar_columns(bank: Path) -> None:
    columns, rows = ENGINE.reference(bank, "SELECT id, price FROM item WHERE id > 99")
    assert columns == (Column(name="id", type="VARCHAR"), Column(name="price", type="VARCHAR"))
    assert rows == []


def test_reference_reads_views(bank: Path) -> None:
    columns, rows = ENGINE.reference(bank, "SELECT name FROM cheap ORDER BY id")
    assert rows == [("pen; blue",), ("cup",)]
    assert columns == (Column(name="name", type="VARCHAR"),)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT 1; SELECT 2", "must be exactly one statement, found 2"),
        ("", "must be exactly one statement, found 0"),
        ("PRAGMA table_info(item)", "only a query may run (SELECT, WITH or VALUES), not PRAGMA"),
        ("SELECT random()", "function random() is denied (non_reproducible: a random number)"),
        ("SELECT name FROM sqlite_master", "reading sqlite_master is not allowed"),
        ("SELECT nope FROM item", "no such column: nope"),
        ("SELECT list_value(1, 2)", "no such function: list_value"),
    ],
)
def test_reference_failures_are_engine_query_errors(bank: Path, sql: str, message: str) -> None:
    with pytest.raises(EngineQueryError) as caught:
        ENGINE.reference(bank, sql)
    assert message in str(caught.value)


def test_reference_of_a_missing_database_is_a_bank_error(tmp_path: Path) -> None:
    with pytest.raises(BankError, match="missing"):
        ENGINE.reference(tmp_path / "nope.sqlite", "SELECT 1")


def test_column_plan_rule_by_hand() -> None:
    rows = [(1, 1, 1.5, "a", b"x", None, "t"), (2, 2.5, 2.5, 4, None, None, b"y")]
    assert [t for t, _ in column_plan(rows, 7)] == [
        "BIGINT", "DOUBLE", "DOUBLE", "VARCHAR", "BLOB", "VARCHAR", "VARCHAR",
    ]  # fmt: skip
    assert [fn is None for _, fn in column_plan(rows, 7)] == [
        True, False, True, False, True, True, False,
    ]  # fmt: skip
    assert column_plan([], 2) == [("VARCHAR", None), ("VARCHAR", None)]


# ---------------------------------------------------------------------------- SQL text


@pytest.mark.parametrize(
    ("sql", "word"),
    [
        ("SELECT 1", "select"),
        ("  \n-- comment; with a semicolon\n  with x AS (SELECT 1) SELECT * FROM x", "with"),
        ("/* a /* b */ VALUES (1)", "values"),
        ("/* unterminated", None),
        ("", None),
        ("(SELECT 1)", None),
    ],
)
def test_first_keyword(sql: str, word: str | None) -> None:
    assert first_keyword(sql) == word


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("select 1", None),
        ("WITH t AS (SELECT 1) SELECT * FROM t", None),
        ("VALUES (1)", None),
        ("VACUUM INTO '/tmp/x'", "only a query may run (SELECT, WITH or VALUES), not VACUUM"),
        ("EXPLAIN SELECT 1", "only a query may run (SELECT, WITH or VALUES), not EXPLAIN"),
        ("-- nothing here", "there is no statement"),
    ],
)
def test_statement_refusal(sql: str, why: str | None) -> None:
    assert statement_refusal(sql) == why


def test_split_keeps_strings_names_comments_and_trigger_bodies_whole() -> None:
    script = (
        'CREATE TABLE "a;b" ([c;d] TEXT, `e;f` TEXT);\n'
        "INSERT INTO \"a;b\" VALUES ('x;''y', 'z'); -- trailing; comment\n"
        'CREATE TRIGGER tr AFTER INSERT ON "a;b" BEGIN\n'
        "  SELECT 1; SELECT 2;\n"
        "END;\n"
        "/* block; comment */ ;;\n"
        "SELECT 3"
    )
    parts = split_statements(script)
    assert [line for line, _ in parts] == [1, 2, 3, 7]
    assert [first_keyword(text) for _, text in parts] == ["create", "insert", "create", "select"]
    assert parts[2][1].rstrip().endswith("END;")
    assert all(sqlite3.complete_statement(text) for _, text in parts[:3])


def test_split_of_nothing() -> None:
    assert split_statements("") == []
    assert split_statements("  -- only a comment;\n ;") == []


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("512MB", 512_000_000),
        ("64MiB", 64 * 1024 * 1024),
        ("1 GB", 1_000_000_000),
        ("2gib", 2 * 1024**3),
        ("1048576", 1_048_576),
    ],
)
def test_memory_limits_read_as_duckdb_reads_them(text: str, size: int) -> None:
    assert parse_memory_limit(text) == size


@pytest.mark.parametrize("text", ["lots", "512 MQ", "-1MB", "1KB", ""])
def test_bad_memory_limits_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_memory_limit(text)


def test_no_temporary_file_is_left_after_a_build(tmp_path: Path) -> None:
    _build(tmp_path)
    assert _leftovers(tmp_path) == ["bank.sqlite"]
    assert os.access(tmp_path / "bank.sqlite", os.R_OK)
