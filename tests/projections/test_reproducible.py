"""Byte reproducibility of reports (issue 7 item 1) and the checked read they are built from."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ledger_audit import COPIED_WITHOUT_BANKS
from report_testkit import GUARD_CASE, MISSING_CASE, RENAMED_CASE, TIMEOUT_CASE

from ledger import codec
from ledger.app.snapshot import read_state
from ledger.merkle import root_hash
from ledger.store import Ledger
from projections.replay import replay

CLI = [sys.executable, "-m", "ledger.cli"]


def _report(ledger: Path, fmt: str, *extra: str, seed: str = "0") -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    env.pop("CASELEDGER_LEDGER", None)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ledger.cli import main; main()",
            "--ledger",
            str(ledger),
            "report",
            "--format",
            fmt,
            "--detail",
            "full",
            *extra,
        ],
        capture_output=True,
        env=env,
        check=True,
        cwd=ledger.parent,
    )
    assert b"report built at tree size" in done.stderr
    return done.stdout


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@COPIED_WITHOUT_BANKS
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["json", "md", "html"])
def test_same_bytes_everywhere(real_ledger: Path, tmp_path: Path, fmt: str):
    first = _report(real_ledger, fmt, seed="1")
    # the same report twice
    assert _sha(_report(real_ledger, fmt, seed="1")) == _sha(first)
    # another process with another hash seed
    assert _sha(_report(real_ledger, fmt, seed="12345")) == _sha(first)
    # a report writes nothing beside the ledger (no cache that could change a number)
    assert sorted(p.name for p in real_ledger.parent.glob("*.projections.db")) == []
    # from a copy of the ledger alone in another folder
    other = tmp_path / "elsewhere" / "copy.db"
    other.parent.mkdir()
    shutil.copyfile(real_ledger, other)
    assert _sha(_report(other, fmt, seed="99")) == _sha(first)
    # no path of where the report was built (events may quote paths they recorded)
    assert str(real_ledger.parent).encode() not in first
    assert str(other.parent).encode() not in first


def test_report_content_of_the_real_run(real_ledger: Path):
    import json

    report = json.loads(_report(real_ledger, "json"))
    assert report["contract"] == "caseledger-report/1"
    with Ledger.open(real_ledger, readonly=True) as ledger:
        assert report["checkpoint"]["tree_size"] == ledger.size()
    models, self_test = report["sections"]
    assert (models["kind"], self_test["kind"]) == ("models", "self_test")
    assert models["bank"]["id"] == "sales-fixture"
    run = models["runs"][0]
    assert run["model"]["identity_source"] == "recorded_claim"
    assert run["model"]["recorded"] == ["demo-model-1"]
    q = run["quality"]
    # 7 cases x 3 attempts; renamed column is still correct; fenced answer is correct but
    # not format_ok; guard, timeout and missing recording are not correct.
    assert q["total"] == 21
    assert q["correct"] == 18
    assert q["failures"]["guard"] == 1
    assert q["failures"]["provider"] == 1
    assert q["cancelled"] == {"missing_recording": 1}
    assert q["evaluated"] == 20
    assert (
        q["format_ok_rate"] == "0.7619"
    )  # 16 of 21: not the renamed, fenced, guard, timeout, missing
    by_key = {(c["case"], c["attempt"]): c for c in models["caseruns"]}
    assert by_key[RENAMED_CASE]["score"]["total"] == "95.00"
    assert by_key[GUARD_CASE]["guard"]["passed"] is False
    assert by_key[TIMEOUT_CASE]["response"]["failure"]["kind"] == "timeout"
    assert by_key[MISSING_CASE]["cancel"]["reason"] == "missing_recording"
    # public by default: no gold rows, no reference SQL
    assert models["gold"] is None
    assert "reference_sql" not in json.dumps(report)


def test_with_gold_is_a_labelled_internal_view(real_ledger: Path):
    import json

    report = json.loads(_report(real_ledger, "json", "--with-gold"))
    assert report["view"] == "internal-with-gold"
    assert "INTERNAL" in report["notice"]
    assert report["sections"][0]["gold"][0]["rows"]


def test_snapshot_folds_like_a_replay_of_the_decoded_events(real_ledger: Path):
    # The checked read folds the same events as a plain replay of decoded bodies, at
    # every prefix; asking for one run keeps that run's CaseRuns and lists it.
    with Ledger.open(real_ledger, readonly=True) as ledger:
        size = ledger.size()
        for stop in (size // 3, 2 * size // 3, size):
            plain = replay(
                (seq, leaf, codec.decode(body)) for seq, leaf, body in ledger.iter_bodies(0, stop)
            )
            snap = read_state(ledger, at_size=stop)
            assert snap.size == stop
            assert snap.state.runs == plain.runs
            assert snap.state.banks == plain.banks
            assert sorted(snap.state.caseruns) == sorted(plain.caseruns)
            assert snap.root == root_hash(ledger.leaf_hashes(stop))
        full = read_state(ledger).state
        for run_id in full.runs:
            one = read_state(ledger, runs=[run_id]).state
            # read through the tree index (issue 22): that run only, as in the full fold
            assert one.runs == {run_id: full.runs[run_id]}
            assert one.caseruns == {k: v for k, v in full.caseruns.items() if v.run_id == run_id}
