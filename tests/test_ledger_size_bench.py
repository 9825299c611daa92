"""benchmarks/ledger_size_bench.py at tiny sizes: the JSON rows' shape, real runs and a
second writer that is never refused (issue 34).

Timings are never asserted; what is checked is what the table is made of.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import ledger_size_bench  # noqa: E402
import projection_bench  # noqa: E402

from ledger.verify import verify_ledger  # noqa: E402


@pytest.mark.slow
def test_tiny_sizes_print_one_json_row_per_size_with_no_busy_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A template of one attempt per retail case (18 attempts) instead of 80: the
    # ledgers are one and two copies of that run.
    monkeypatch.setattr(projection_bench, "GROWTH_ATTEMPTS", 1)
    cache = tmp_path / "cache"
    ledger_size_bench.main(["--sizes", "150,300", "--rounds", "2", "--json", "--cache", str(cache)])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["size"] for row in rows] == [150, 300]
    figures = set(ledger_size_bench.FIGURES)
    for row in rows:
        assert set(row) == {
            "size", "events", "rounds", "index_build_cpu_s", "busy", "writer_appends", "ratio",
            *figures,
        }  # fmt: skip
        assert row["rounds"] == 2
        assert row["busy"] == 0
        # the writer appended at least once per round (before the run, it waits 0.5 s)
        assert row["writer_appends"] >= 2
        for figure in figures:
            spread = row[figure]
            assert spread["min"] <= spread["median"] <= spread["max"]
            assert spread["min"] > 0
        assert set(row["ratio"]) == figures
    assert all(r == 1.0 for r in rows[0]["ratio"].values())
    # The second ledger holds two copies of the first's one run.
    assert rows[1]["events"] > rows[0]["events"]
    # The cached source ledgers are left as built and verify.
    for size in (150, 300):
        assert verify_ledger(cache / f"ledger-{size}" / "ledger.db").size > 0
