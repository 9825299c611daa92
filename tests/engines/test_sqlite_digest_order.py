"""The canonical dump of data.sqlite (format caseledger-sqlite-dump-2, docs/bank-format.md
"Data files"): its bytes written out by hand, and rows SQLite's order ties."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from ledger.engines.sqlite import canonical_digest

# Cells in an untyped column (no affinity: every storage class stays as inserted).
_CELLS = ["'b'", "1.0", "1", "NULL", "-0.0", "0.0", "X'00'"]


def _file(path: Path, cells: list[str]) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    for cell in cells:
        con.execute(f"INSERT INTO t VALUES ({cell})")  # noqa: S608 - fixed test literals
    con.commit()
    con.close()
    return path


def test_dump_bytes_written_by_hand(tmp_path: Path) -> None:
    # NULL first, then numbers by value (-0.0 = 0.0 < 1 = 1.0), text, blob; rows the
    # order ties are written sorted by their bytes ('-' < '0', '1' < '{').
    dump = (
        b'{"format":"caseledger-sqlite-dump-2"}'
        b'[["t","table",[["x",""]]]]'
        b'\n["t",7]'
        b"\n[null]"
        b'\n[{"real":"-0.0"}]'
        b'\n[{"real":"0.0"}]'
        b"\n[1]"
        b'\n[{"real":"1.0"}]'
        b'\n["b"]'
        b'\n[{"blob":"00"}]'
    )
    expected = "sha256:" + hashlib.sha256(dump).hexdigest()
    assert canonical_digest(_file(tmp_path / "a.sqlite", _CELLS)) == expected


@pytest.mark.parametrize("order", [[6, 5, 4, 3, 2, 1, 0], [5, 2, 4, 1, 0, 3, 6], [4, 1, 5, 2]])
def test_ties_do_not_depend_on_insert_order(tmp_path: Path, order: list[int]) -> None:
    cells = [_CELLS[i] for i in order]
    a = canonical_digest(_file(tmp_path / "a.sqlite", cells))
    b = canonical_digest(_file(tmp_path / "b.sqlite", sorted(cells)))
    assert a == b


def test_sign_of_zero_and_duplicates_count(tmp_path: Path) -> None:
    one = canonical_digest(_file(tmp_path / "a.sqlite", ["-0.0", "0.0"]))
    two = canonical_digest(_file(tmp_path / "b.sqlite", ["0.0", "0.0"]))
    three = canonical_digest(_file(tmp_path / "c.sqlite", ["0.0", "0.0", "0.0"]))
    assert len({one, two, three}) == 3
    many = ["1", "1.0"] * 500 + ["0.0"]
    assert canonical_digest(_file(tmp_path / "d.sqlite", many)) == canonical_digest(
        _file(tmp_path / "e.sqlite", ["0.0", *(["1.0"] * 500), *(["1"] * 500)])
    )
