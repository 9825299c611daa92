"""Issue 16: a bank's rows as data files (data.sqlite, data/<table>.csv or .parquet).

Expected values are worked out by hand from the rows written here, and from the
tiny example bank (docs/examples/tiny-bank: customer 3 has no city; completed
September orders in Shanghai time: 80.50 + 45.00 + 210.00 = 335.50).
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from banktest import edit
from support import CUSTOMERS, ORDERS, TINY

from ledger.bank.model import load_bank
from ledger.bank.publish import validate_bank
from ledger.bank.source import read_source
from ledger.engines.sqlite import canonical_digest
from ledger.errors import BankError


def _csv_bank(tmp_path: Path) -> Path:
    folder = tmp_path / "csv-bank"
    shutil.copytree(TINY, folder)
    (folder / "seed.sql").unlink()
    (folder / "data").mkdir()
    (folder / "data" / "customers.csv").write_text(CUSTOMERS, encoding="utf-8")
    (folder / "data" / "orders.csv").write_text(ORDERS, encoding="utf-8")
    return folder


def _gold(checked: object) -> dict[str, list[list[object]]]:
    fields = checked.fields  # type: ignore[attr-defined]
    return {g.case_id: [list(r) for r in g.rows] for g in fields["gold"]}


def test_csv_bank_gives_the_same_gold_as_its_seed_sql(tmp_path: Path) -> None:
    checked = validate_bank(_csv_bank(tmp_path))
    gold = _gold(checked)
    assert gold["tiny-01"] == [[3, "Chen"]]
    assert gold["tiny-02"] == [["335.50"]]
    assert checked.fields["gold_digest"] == validate_bank(TINY).fields["gold_digest"]
    assert checked.fields["build"].data_source == "csv"


def test_csv_bank_hash_is_the_manifest_of_its_files(tmp_path: Path) -> None:
    folder = _csv_bank(tmp_path)
    src = read_source(folder)
    lines = ["caseledger/bank-manifest/v1\n"]
    entries = {
        "data/customers.csv": "sha256:" + hashlib.sha256(CUSTOMERS.encode()).hexdigest(),
        "data/orders.csv": "sha256:" + hashlib.sha256(ORDERS.encode()).hexdigest(),
    }
    for name in ("cases.yaml", "prompt.md", "schema.sql", "semantic.json"):
        entries[name] = src.file_hashes[name]
    assert "seed.sql" not in src.file_hashes
    lines += [f"{n} {entries[n]}\n" for n in sorted(entries)]
    want = "sha256:" + hashlib.sha256("".join(lines).encode()).hexdigest()
    assert src.content_sha256 == want
    # One changed cell changes the hash.
    edit(folder, "data/orders.csv", "80.50", "80.51")
    assert read_source(folder).content_sha256 != want


def test_csv_header_must_name_the_columns_in_order(tmp_path: Path) -> None:
    folder = _csv_bank(tmp_path)
    edit(folder, "data/customers.csv", "customer_id,name,city", "customer_id,city,name")
    with pytest.raises(BankError) as err:
        validate_bank(folder)
    assert "data/customers.csv: line 1: columns customer_id, city, name do not match" in str(
        err.value.message
    )


def test_csv_line_with_too_few_fields_is_named(tmp_path: Path) -> None:
    folder = _csv_bank(tmp_path)
    edit(folder, "data/customers.csv", "4,Dara,Shanghai\n", "4,Dara\n")
    with pytest.raises(BankError) as err:
        validate_bank(folder, engine="sqlite", accept_engine_differences=True)
    assert "data/customers.csv: line 5: 2 fields, the header has 3" in err.value.message


def test_a_file_for_no_table_is_refused(tmp_path: Path) -> None:
    folder = _csv_bank(tmp_path)
    (folder / "data" / "refunds.csv").write_text("id\n1\n", encoding="utf-8")
    with pytest.raises(BankError) as err:
        validate_bank(folder)
    assert "data/refunds.csv: schema.sql creates no table 'refunds'" in err.value.message


def test_data_given_twice_or_not_at_all_is_refused(tmp_path: Path) -> None:
    folder = _csv_bank(tmp_path)
    shutil.copy(TINY / "seed.sql", folder / "seed.sql")
    with pytest.raises(BankError) as err:
        load_bank(folder)
    assert "gives its data in more than one way (seed.sql, data/)" in err.value.message
    (folder / "seed.sql").unlink()
    shutil.rmtree(folder / "data")
    with pytest.raises(BankError) as err:
        load_bank(folder)
    assert "seed.sql: missing" in err.value.message


def test_parquet_bank_loads_on_duckdb_and_sqlite(tmp_path: Path) -> None:
    folder = _csv_bank(tmp_path)
    con = duckdb.connect()
    for table in ("customers", "orders"):
        src = folder / "data" / f"{table}.csv"
        out = folder / "data" / f"{table}.parquet"
        con.execute(
            f"COPY (SELECT * FROM read_csv('{src}', all_varchar=true)) TO '{out}' (FORMAT parquet)"  # noqa: S608  # test paths
        )
        src.unlink()
    con.close()
    checked = validate_bank(folder)
    assert _gold(checked)["tiny-02"] == [["335.50"]]
    assert checked.fields["build"].data_source == "parquet"


# ---------------------------------------------------------------- data.sqlite

SCHEMA = (
    "CREATE TABLE item (\n  id INTEGER PRIMARY KEY,\n  name TEXT,\n  price REAL,\n  note TEXT\n);\n"
)
ROWS = [(1, "apple", 1.5, None), (2, "pear", 2.0, ""), (3, "plum", None, "x")]
CASES = """\
bank: items
version: v1
engine: sqlite
cases:
  - id: nulls
    question: How many items have no note?
    reference_sql: SELECT count(*) AS n FROM item WHERE note IS NULL
  - id: empties
    question: How many items have an empty note?
    reference_sql: SELECT count(*) AS n FROM item WHERE note = ''
  - id: dear
    dimension: basic
    difficulty: easy
    weight: 2
    max_rows: 7
    question: Which items cost more than 1.7?
    reference_sql: SELECT name FROM item WHERE price > 1.7
"""


def _sqlite_file(path: Path, rows: list[tuple[object, ...]]) -> None:
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO item VALUES (?, ?, ?, ?)", rows)
    con.commit()
    con.close()


def _sqlite_bank(tmp_path: Path, rows: list[tuple[object, ...]] = ROWS) -> Path:
    folder = tmp_path / "items"
    folder.mkdir(parents=True)
    shutil.copy(TINY / "prompt.md", folder / "prompt.md")
    shutil.copy(TINY / "semantic.json", folder / "semantic.json")
    (folder / "schema.sql").write_text(SCHEMA, encoding="utf-8")
    (folder / "cases.yaml").write_text(CASES, encoding="utf-8")
    _sqlite_file(folder / "data.sqlite", rows)
    return folder


def test_sqlite_file_bank_on_sqlite_and_converted_to_duckdb(tmp_path: Path) -> None:
    folder = _sqlite_bank(tmp_path)
    on_sqlite = validate_bank(folder)
    assert _gold(on_sqlite) == {"nulls": [[1]], "empties": [[1]], "dear": [["pear"]]}
    assert on_sqlite.fields["build"].data_source == "data.sqlite"
    # A DuckDB bank whose rows are in a SQLite file: NULL and '' stay apart.
    edit(folder, "schema.sql", "name TEXT", "name VARCHAR")
    edit(folder, "cases.yaml", "engine: sqlite\n", "")
    on_duckdb = validate_bank(folder)
    assert _gold(on_duckdb) == {"nulls": [[1]], "empties": [[1]], "dear": [["pear"]]}


def test_sqlite_file_bank_converted_by_engine_option(tmp_path: Path) -> None:
    folder = _sqlite_bank(tmp_path)
    checked = validate_bank(folder, engine="duckdb")
    assert _gold(checked) == {"nulls": [[1]], "empties": [[1]], "dear": [["pear"]]}
    assert checked.fields["build"].transpiled_from == "sqlite"


def test_optional_case_fields_are_unassigned_and_derived(tmp_path: Path) -> None:
    checked = validate_bank(_sqlite_bank(tmp_path))
    specs = {c.id: c for c in checked.fields["cases"]}
    assert (specs["nulls"].dimension, specs["nulls"].difficulty) == ("unassigned", "unassigned")
    assert specs["nulls"].weight == Decimal(1)
    # 1 gold row: max(100, 10 * 1) = 100; an explicit max_rows is kept.
    assert specs["nulls"].max_rows == 100
    assert (specs["dear"].max_rows, specs["dear"].weight) == (7, Decimal(2))


def test_sqlite_file_hash_ignores_insert_order_and_vacuum(tmp_path: Path) -> None:
    a = _sqlite_bank(tmp_path / "a")
    b = _sqlite_bank(tmp_path / "b", list(reversed(ROWS)))
    con = sqlite3.connect(b / "data.sqlite")
    con.execute("VACUUM")
    con.close()
    assert read_source(a).content_sha256 == read_source(b).content_sha256
    assert read_source(a).file_hashes["data.sqlite"] == canonical_digest(a / "data.sqlite")
    c = _sqlite_bank(tmp_path / "c", [*ROWS[:2], (3, "plum", None, "y")])
    assert read_source(c).content_sha256 != read_source(a).content_sha256


def test_schema_sql_must_describe_the_sqlite_file(tmp_path: Path) -> None:
    folder = _sqlite_bank(tmp_path)
    edit(folder, "schema.sql", "  note TEXT\n", "  note TEXT,\n  extra INTEGER\n")
    with pytest.raises(BankError) as err:
        validate_bank(folder)
    assert "schema.sql does not describe data.sqlite: item: columns differ" in err.value.message


def test_stored_bank_folder_is_the_same_bank(tmp_path: Path) -> None:
    folder = _sqlite_bank(tmp_path)
    src = read_source(folder)
    copy = tmp_path / "copy"
    copy.mkdir()
    src.write_to(copy)
    assert read_source(copy).content_sha256 == src.content_sha256
    assert (copy / "data.sqlite").stat().st_mode & 0o222 == 0


def test_broken_foreign_key_is_recorded_on_sqlite_and_named_on_duckdb(tmp_path: Path) -> None:
    folder = _sqlite_bank(tmp_path)
    schema = SCHEMA + "CREATE TABLE tag (item_id INTEGER REFERENCES item (id), tag TEXT);\n"
    (folder / "schema.sql").write_text(schema, encoding="utf-8")
    (folder / "data.sqlite").unlink()
    con = sqlite3.connect(folder / "data.sqlite")
    con.executescript(schema)
    con.executemany("INSERT INTO item VALUES (?, ?, ?, ?)", ROWS)
    # Item 9 does not exist: one row breaks the key (SQLite does not enforce it).
    con.executemany("INSERT INTO tag VALUES (?, ?)", [(1, "red"), (9, "blue")])
    con.commit()
    con.close()
    (fk,) = validate_bank(folder).fields["build"].foreign_key_violations
    assert (fk.table, fk.columns, fk.parent_table, fk.parent_columns, fk.count) == (
        "tag",
        ("item_id",),
        "item",
        ("id",),
        1,
    )
    with pytest.raises(BankError) as err:
        validate_bank(folder, engine="duckdb", accept_engine_differences=True)
    assert "cannot load table tag" in err.value.message
    assert "publish the bank on the sqlite engine" in (err.value.hint or "")
