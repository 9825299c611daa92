"""Issue 3 item 1: two processes build the same bank into the same content, hash and gold."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from banktest import edit

from ledger.bank.build import build_database
from ledger.bank.model import load_bank
from ledger.bank.publish import validate_bank
from ledger.bank.registry import builtin_banks
from ledger.engines.duckdb_build import open_bank_db, table_digests
from ledger.errors import BankError

# Run in a fresh interpreter: load, build into PATH, freeze gold, print what must agree.
_CHILD = """
import json, sys
from pathlib import Path
from ledger.bank.build import build_database, freeze_gold, gold_digest
from ledger.bank.model import load_bank
from ledger.engines.duckdb_build import open_bank_db, table_digests, table_snapshot
bank = load_bank(Path(sys.argv[1]))
db = Path(sys.argv[2])
build_database(bank, db)
con = open_bank_db(db)
gold = freeze_gold(con, bank)
print(json.dumps({
    "hash": bank.content_sha256,
    "tables": table_digests(con),
    "snapshot": [[t.name, [[c.name, c.type] for c in t.columns]] for t in table_snapshot(con)],
    "gold": {g.case_id: g.digest for g in gold},
    "gold_digest": gold_digest(gold),
}))
"""


def _build_in_child(folder: Path, db: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(folder), str(db)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout)


_BANKS = {"tiny": Path(__file__).resolve().parents[2] / "docs/examples/tiny-bank"}
_BANKS.update(builtin_banks())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_BANKS))
def test_two_processes_build_the_same_content(name: str, tmp_path: Path) -> None:
    first = _build_in_child(_BANKS[name], tmp_path / "a.duckdb")
    second = _build_in_child(_BANKS[name], tmp_path / "b.duckdb")
    assert first == second
    assert first["tables"], "a bank without tables proves nothing"
    assert len(first["gold"]) == len(load_bank(_BANKS[name]).cases)


def test_one_changed_seed_cell_changes_hash_tables_and_gold(tiny: Path, tmp_path: Path) -> None:
    before = _build_in_child(tiny, tmp_path / "a.duckdb")
    edit(tiny, "seed.sql", "80.50", "80.51")
    after = _build_in_child(tiny, tmp_path / "b.duckdb")
    assert after["hash"] != before["hash"]
    assert after["tables"]["orders"] != before["tables"]["orders"]
    assert after["tables"]["customers"] == before["tables"]["customers"]
    # Only tiny-02 (September revenue) reads order 102's amount.
    assert after["gold"]["tiny-02"] != before["gold"]["tiny-02"]
    assert after["gold"]["tiny-01"] == before["gold"]["tiny-01"]
    assert after["gold"]["tiny-03"] == before["gold"]["tiny-03"]


def test_the_build_reads_the_normalised_bytes(tiny: Path, tmp_path: Path) -> None:
    # A decomposed "É" (E + combining acute) in the seed is stored composed (NFC), as hashed.
    edit(tiny, "seed.sql", "'Eve',", "'E\u0301ve',")
    bank = load_bank(tiny)
    build_database(bank, tmp_path / "t.duckdb")
    con = open_bank_db(tmp_path / "t.duckdb")
    (name,) = con.execute("SELECT name FROM customers WHERE customer_id = 5").fetchone()
    assert name == "\u00c9ve"


def test_built_database_is_read_only_with_fixed_settings(tiny: Path, tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    build_database(load_bank(tiny), db)
    con = open_bank_db(db)
    assert con.execute("SELECT current_setting('TimeZone')").fetchone() == ("UTC",)
    assert con.execute("SELECT current_setting('threads')").fetchone() == (1,)
    assert con.execute("SELECT current_setting('enable_external_access')").fetchone() == (False,)
    with pytest.raises(duckdb.InvalidInputException, match="read-only"):
        con.execute("DELETE FROM orders")
    with pytest.raises(duckdb.InvalidInputException, match='option "TimeZone" - the config'):
        con.execute("SET TimeZone = 'Asia/Shanghai'")
    assert table_digests(con)["orders"].startswith("sha256:")


def test_build_refuses_to_overwrite(tiny: Path, tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    db.write_bytes(b"")
    with pytest.raises(BankError, match="refusing to overwrite") as exc:
        build_database(load_bank(tiny), db)
    assert exc.value.message == f"refusing to overwrite {db}"


def test_gold_rows_are_typed_and_literal(tiny: Path) -> None:
    checked = validate_bank(tiny)
    gold = {g.case_id: g for g in checked.fields["gold"]}
    # Worked out by hand from seed.sql: customer 3 has no city.
    assert gold["tiny-01"].rows == ((3, "Chen"),)
    assert [(c.name, c.type) for c in gold["tiny-01"].columns] == [
        ("customer_id", "INTEGER"),
        ("name", "VARCHAR"),
    ]
    # September 2026 in Asia/Shanghai: orders 102 (80.50), 104 (45.00), 105 (210.00).
    assert gold["tiny-02"].rows == (("335.50",),)
    # Beijing: Bo (104); Hangzhou: Eve only cancelled; Shanghai: Ann (101, 102), Dara none.
    assert gold["tiny-03"].rows == (("Beijing", 1), ("Hangzhou", 0), ("Shanghai", 1))
