"""Issue 22: ``caseledger runs`` of a ledger on a server (PostgreSQL: no file for a tree
index) reads each run's RunFinished totals through the index built in memory, and lists
the same bytes as the fold of every run (``runs --fold``); the same on SQLite.

Real stores (a throwaway PostgreSQL cluster, tests/pgcluster.py), real runs (the
reference adapter on sales-fixture), real signatures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from store_kit import Store

from ledger.app.snapshot import RecordedRun, run_listing

CASELEDGER = str(Path(sys.executable).with_name("caseledger"))
LISTINGS = ([], ["--json"], ["--include-withdrawn"], ["--json", "--include-withdrawn"])


def test_a_server_ledger_reads_the_totals_through_its_index_in_memory(
    store: Store, tmp_path: Path
) -> None:
    env = {**os.environ, "CASELEDGER_HOME": str(tmp_path / "home")}

    def cli(location: object, *args: str) -> str:
        done = subprocess.run(
            [CASELEDGER, "--ledger", str(location), *args],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    grant = ["--grant-writer", "ledger_writer"] if store.kind == "postgresql" else []
    cli(store.owner_location, "init", *grant)
    cli(store.location, "bank", "publish", "sales-fixture")
    for name in ("one", "two"):
        cli(store.location, "run", "--bank", "sales-fixture", "--adapter", "reference",
            "--run-id", name)  # fmt: skip
    with store.open(readonly=True) as ledger:
        listed = list(run_listing(ledger))
    assert [isinstance(item, RecordedRun) for item in listed] == [True, True]
    for extra in LISTINGS:
        assert cli(store.location, "runs", *extra) == cli(store.location, "runs", *extra, "--fold")
    rows = json.loads(cli(store.location, "runs", "--json"))
    # the reference SQL of 7 cases, once each: all done and correct, 100 points
    assert [(r["run"], r["done"], r["planned"], r["score"]) for r in rows] == [
        ("one", 7, 7, "100.00"), ("two", 7, 7, "100.00"),
    ]  # fmt: skip
