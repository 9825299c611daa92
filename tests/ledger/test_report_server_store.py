"""Issue 21: a report of a ledger on a server (PostgreSQL: no file for a tree index) folds
one run at a time, through an index built in memory by checking the whole log once,
and gives the bytes of the whole fold; the same on SQLite (through its index file).

Real stores (a throwaway PostgreSQL cluster, tests/pgcluster.py), real runs (the
reference adapter on sales-fixture, two runs), real signatures.
"""

from __future__ import annotations

from pathlib import Path

from store_kit import Store, caseledger

from ledger import tree_index
from ledger.app.reporting import report_bytes
from ledger.app.snapshot import read_state, run_snapshots
from projections.report.build import build_report, build_report_v2, to_json


def _cli(location: object, *args: str, cwd: Path, home: Path) -> None:
    done = caseledger(location, *args, cwd=cwd, home=home)
    assert done.returncode == 0, (args, done.stderr)


def test_a_report_folds_one_run_at_a_time_on_every_store(store: Store, tmp_path: Path) -> None:
    home = tmp_path / "home"
    grant = ["--grant-writer", "ledger_writer"] if store.kind == "postgresql" else []
    _cli(store.owner_location, "init", *grant, cwd=tmp_path, home=home)
    _cli(store.location, "bank", "publish", "sales-fixture", cwd=tmp_path, home=home)
    for run in ("one", "two"):
        args = ["run", "--bank", "sales-fixture", "--adapter", "reference", "--run-id", run]
        _cli(store.location, *args, cwd=tmp_path, home=home)
    with store.open(readonly=True) as ledger:
        size = ledger.size()
        if store.kind == "postgresql":
            assert tree_index.index_path(ledger) is None
            built = tree_index.in_memory(ledger, size)
            assert built is not None
            assert built.size == size
        snaps = list(run_snapshots(ledger))
        # Two snapshots of one run each (a whole fold would be one snapshot of both).
        assert [sorted(s.state.runs) for s in snaps] == [["one"], ["two"]]
        whole = read_state(ledger)
        assert {s.root for s in snaps} == {whole.root}
        assert {s.size for s in snaps} == {size}
    streamed, at, root = report_bytes(store.location, fmt="json", detail="full")
    assert (at, root) == (size, whole.root)
    assert streamed == to_json(build_report(whole.state, root_hash=whole.root))
    streamed, _, _ = report_bytes(store.location, fmt="json", detail="compact")
    assert streamed == to_json(build_report_v2(whole.state, root_hash=whole.root))
