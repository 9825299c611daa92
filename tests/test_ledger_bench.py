"""benchmarks/ledger_bench.py --layouts: each build in its own process, the code of
another checkout measured beside today's, and every build a ledger that verifies.

Timings are never asserted; what is checked is what the table is made of.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import ledger_bench  # noqa: E402

from ledger.verify import verify_ledger  # noqa: E402


@pytest.mark.parametrize("layout", ["stream", "leaf"])
def test_a_build_in_a_child_writes_a_whole_ledger_of_that_layout(
    tmp_path: Path, layout: str
) -> None:
    path = tmp_path / "bench.db"
    rate = ledger_bench._build_in_child(None, path, 251, 100, layout)
    assert rate > 0
    assert verify_ledger(path).size == 251  # genesis + 250 prompts in batches of 100
    conn = sqlite3.connect(path)
    try:
        ddl = "".join(r[0] or "" for r in conn.execute("SELECT sql FROM sqlite_master"))
    finally:
        conn.close()
    # The layout made before issue 21 keeps a UNIQUE leaf_hash; today's does not.
    assert ("leaf_hash  BLOB NOT NULL UNIQUE" in ddl) == (layout == "leaf")


def test_the_before_row_runs_the_other_checkouts_code(tmp_path: Path) -> None:
    # A "checkout" whose ledger package refuses to import: the child must run it (and
    # fail), proving the row is built by that code and not by this tree's.
    fake = tmp_path / "checkout"
    (fake / "ledger").mkdir(parents=True)
    (fake / "ledger" / "__init__.py").write_text("raise ImportError('the other checkout')\n")
    with pytest.raises(subprocess.CalledProcessError) as failed:
        ledger_bench._build_in_child(fake, tmp_path / "x.db", 11, 10, "stream")
    assert "the other checkout" in failed.value.stderr


@pytest.mark.slow
def test_layouts_prints_a_row_per_build_with_the_before_checkout(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger_bench, "N_CRYPTO", 500)
    ledger_bench.layouts(events=201, batch=100, rounds=1, before=ROOT)
    lines = capsys.readouterr().out.splitlines()
    assert "201 events in batches of 100" in lines[0]
    rows = [line.split(" | ")[0].lstrip("| ") for line in lines[3:]]
    assert rows == [
        "UNIQUE leaf_hash (before)",
        "UNIQUE (stream, stream_seq)",
        f"code of {ROOT.name}, the layout its Ledger.create makes",
    ]
