"""Issue 16, item 6: a bank's rows as data files, loaded by PostgreSQL's COPY.

The tiny example bank with its seed.sql replaced by data/customers.csv and
data/orders.csv (the rows of tests/bank/test_data_files.py), and a data.sqlite bank
whose child table sorts before its parent, validated with ``--engine postgres`` on
the session's throwaway cluster. Expected gold is worked out by hand: customer 3
has no city; completed September orders in Shanghai time are 80.50 + 45.00 +
210.00 = 335.50.
"""

from __future__ import annotations

import shutil
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from support import CUSTOMERS, ORDERS, TINY

from ledger.bank.publish import validate_bank
from ledger.cli import main


@pytest.fixture
def on_postgres(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CASELEDGER_PG_DSN", pg_dsn)
    return pg_dsn


def _cli(tmp_path: Path, *args: str) -> Result:
    result = CliRunner().invoke(main, ["--ledger", str(tmp_path / "home" / "ledger.db"), *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def _plain(cell: Any) -> Any:
    if isinstance(cell, int | float) and not isinstance(cell, bool):
        return Decimal(str(cell))
    if isinstance(cell, str):
        try:
            return Decimal(cell)
        except ArithmeticError:
            return cell
    return cell


def _gold(checked: Any) -> dict[str, list[list[Any]]]:
    return {g.case_id: [[_plain(c) for c in r] for r in g.rows] for g in checked.fields["gold"]}


def _csv_bank(tmp_path: Path) -> Path:
    folder = tmp_path / "csv-bank"
    shutil.copytree(TINY, folder)
    (folder / "seed.sql").unlink()
    (folder / "data").mkdir()
    (folder / "data" / "customers.csv").write_text(CUSTOMERS, encoding="utf-8")
    (folder / "data" / "orders.csv").write_text(ORDERS, encoding="utf-8")
    return folder


@pytest.mark.slow
def test_csv_bank_on_postgres(on_postgres: str, tmp_path: Path) -> None:
    folder = _csv_bank(tmp_path)
    result = _cli(tmp_path, "bank", "validate", str(folder), "--engine", "postgres")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: tiny@v1 ")
    checked = validate_bank(folder, engine="postgres")
    assert checked.fields["build"].engine == "postgres"
    assert checked.fields["build"].data_source == "csv"
    gold = _gold(checked)
    assert gold["tiny-01"] == [[Decimal(3), "Chen"]]
    assert gold["tiny-02"] == [[Decimal("335.50")]]


# A child table (order_line) whose name sorts before its parent's (product): the
# rows must be loaded parents first wherever the engine checks foreign keys.
SHOP_SCHEMA = """\
CREATE TABLE product (
  product_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  price REAL
);
CREATE TABLE order_line (
  line_id INTEGER PRIMARY KEY,
  product_id INTEGER NOT NULL REFERENCES product (product_id),
  quantity INTEGER NOT NULL,
  note TEXT
);
"""
SHOP_CASES = """\
bank: shop
version: v1
engine: sqlite
cases:
  - id: units
    question: How many units of tea were ordered?
    reference_sql: >-
      SELECT sum(l.quantity) AS units FROM order_line AS l
      JOIN product AS p ON p.product_id = l.product_id WHERE p.name = 'tea'
  - id: no-note
    question: How many order lines have no note?
    reference_sql: SELECT count(*) AS n FROM order_line WHERE note IS NULL
  - id: empty-note
    question: How many order lines have an empty note?
    reference_sql: SELECT count(*) AS n FROM order_line WHERE note = ''
"""


def _sqlite_bank(tmp_path: Path) -> Path:
    folder = tmp_path / "shop"
    folder.mkdir()
    shutil.copy(TINY / "prompt.md", folder / "prompt.md")
    shutil.copy(TINY / "semantic.json", folder / "semantic.json")
    (folder / "schema.sql").write_text(SHOP_SCHEMA, encoding="utf-8")
    (folder / "cases.yaml").write_text(SHOP_CASES, encoding="utf-8")
    con = sqlite3.connect(folder / "data.sqlite")
    con.executescript(SHOP_SCHEMA)
    con.executemany("INSERT INTO product VALUES (?, ?, ?)", [(1, "tea", 3.5), (2, "cake", None)])
    # Tea: 2 + 5 = 7 units; notes: NULL twice, '' once, 'gift' once.
    con.executemany(
        "INSERT INTO order_line VALUES (?, ?, ?, ?)",
        [(1, 1, 2, None), (2, 2, 1, ""), (3, 1, 5, "gift"), (4, 2, 4, None)],
    )
    con.commit()
    con.close()
    return folder


@pytest.mark.slow
def test_sqlite_file_bank_on_postgres(on_postgres: str, tmp_path: Path) -> None:
    folder = _sqlite_bank(tmp_path)
    want = {"units": [[Decimal(7)]], "no-note": [[Decimal(2)]], "empty-note": [[Decimal(1)]]}
    assert _gold(validate_bank(folder)) == want  # on SQLite, its own engine
    result = _cli(tmp_path, "bank", "validate", str(folder), "--engine", "postgres")
    assert result.exit_code == 0, result.output
    checked = validate_bank(folder, engine="postgres")
    assert checked.fields["build"].data_source == "data.sqlite"
    assert checked.fields["build"].transpiled_from == "sqlite"
    assert _gold(checked) == want


def test_sqlite_file_bank_converted_to_duckdb_loads_parents_first(tmp_path: Path) -> None:
    folder = _sqlite_bank(tmp_path)
    checked = validate_bank(folder, engine="duckdb")
    assert _gold(checked) == {
        "units": [[Decimal(7)]],
        "no-note": [[Decimal(2)]],
        "empty-note": [[Decimal(1)]],
    }
