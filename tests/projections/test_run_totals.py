"""Issue 22: a run's RunFinished carries its ``runs`` figures (``totals``), signed like any
event; ``caseledger runs`` reads them when the RunFinished is the run's last event and
folds every other run; ``verify --recompute`` re-derives them.

Real ledgers (SQLite files; a PostgreSQL ledger in tests/ledger/test_run_totals_server.py),
real runs of the built-in sales-fixture bank (reference and replay adapters, real SQL
workers), the operator's real Ed25519 key. Every listing is compared with the fold of
every run (``runs --fold``), byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_audit import EARLIER_RELEASE, TAMPERED, TEST_SCORER
from report_testkit import CLOCK, resign_from
from runkit import fresh_home
from test_runner import go, published, reference, write_replay

from ledger import codec, events
from ledger.adapters import build_adapter
from ledger.app.evaluate import bank_context
from ledger.app.rescore import recompute_hook
from ledger.app.snapshot import RecordedRun, run_listing
from ledger.cli import main
from ledger.errors import BankError, VerificationError
from ledger.harness import score as score_mod
from ledger.store import Ledger

DATA = Path(__file__).resolve().parents[1] / "data"
LISTINGS = ([], ["--json"], ["--include-withdrawn"], ["--json", "--include-withdrawn"])


def cli(ledger: object, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(ledger), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def same_as_fold(ledger: object) -> dict[str, dict[str, Any]]:
    """Every ``runs`` listing equals the fold of every run; the rows by run id."""
    for extra in LISTINGS:
        fast = cli(ledger, "runs", *extra)
        assert fast[0] == 0, fast[2]
        assert fast == cli(ledger, "runs", *extra, "--fold"), extra
    rows = json.loads(cli(ledger, "runs", "--json", "--include-withdrawn")[1])
    return {row["run"]: row for row in rows}


def read_as(ledger: Ledger) -> dict[str, str]:
    """run -> "recorded" (read from its RunFinished's totals) or "folded"."""
    found: dict[str, str] = {}
    for item in run_listing(ledger):
        if isinstance(item, RecordedRun):
            found[item.started.run_id] = "recorded"
        else:
            found.update(dict.fromkeys(item.state.runs, "folded"))
    return found


def finished_of(ledger: Ledger, run: str) -> events.RunFinished:
    last = ledger.stream_events(run)[-1].event()
    assert isinstance(last, events.RunFinished)
    return last


def totals(done: int, planned: int, rate: str | None, score: str | None) -> events.RunTotals:
    return events.RunTotals(
        done=done, planned=planned, result_correct_rate=rate, score=score, first_event=CLOCK
    )


def test_an_old_run_finished_keeps_its_bytes() -> None:
    event = events.RunFinished(
        stream="r", stream_seq=3, stream_prev=None, at=CLOCK, status="completed"
    )
    assert b"totals" not in codec.encode(event)
    assert codec.decode(codec.encode(event)) == event


def test_the_runner_records_totals_worked_out_by_hand(real_ledger: Path) -> None:
    with Ledger.open(real_ledger, readonly=True) as ledger:
        # self-test: the reference SQL of 7 cases, once each: all correct, 100 points
        assert finished_of(ledger, "self-test").totals == totals(7, 7, "1.0000", "100.00")
        # model-a: 21 planned, every one with an outcome (the missing recording is
        # cancelled); result-correct all but the guard failure, the timeout and the
        # missing recording: 18 / 21 = 0.857142... -> 0.8571
        got = finished_of(ledger, "model-a").totals
        assert isinstance(got, events.RunTotals)
        assert (got.done, got.planned, got.result_correct_rate, got.first_event) == (
            21, 21, "0.8571", CLOCK,
        )  # fmt: skip
        assert read_as(ledger) == {"model-a": "recorded", "self-test": "recorded"}
    rows = same_as_fold(real_ledger)
    assert rows["model-a"]["score"] == got.score
    assert (rows["self-test"]["done"], rows["self-test"]["score"]) == (7, "100.00")


@pytest.mark.slow
def test_the_demo_ledger_lists_the_same_rows_from_its_totals(demo_copy: Path) -> None:
    path = demo_copy / "ledger.db"
    with Ledger.open(path, readonly=True) as ledger:
        assert set(read_as(ledger).values()) == {"recorded"}
    # each RunFinished's totals are re-derived by verify --recompute
    code, _, err = cli(path, "verify", "--recompute")
    assert code == 0, err
    rows = same_as_fold(path)
    # the demo story (18 cases x 3 attempts; tests/gate/test_ci_baseline.py):
    # northwind 52/54 result-correct, lumen-mini 44/54; the self-tests all correct
    assert {
        run: (row["done"], row["planned"], row["result_correct_rate"]) for run, row in rows.items()
    } == {
        "demo-harbor-coder-14b": (54, 54, "0.8148"),
        "demo-lumen-mini": (54, 54, "0.8148"),
        "demo-northwind-sql-pro": (54, 54, "0.9630"),
        "demo-self-test-retail": (18, 18, "1.0000"),
        "demo-self-test-sales-fixture": (7, 7, "1.0000"),
    }


@EARLIER_RELEASE
@pytest.mark.parametrize("fixture", ["legacy-v1", "legacy-v2"])
def test_ledgers_written_before_are_folded(fixture: str, tmp_path: Path) -> None:
    shutil.copytree(DATA / fixture, tmp_path / fixture)
    path = tmp_path / fixture / "ledger.db"
    with Ledger.open(path, readonly=True) as ledger:
        assert set(read_as(ledger).values()) == {"folded"}
    assert same_as_fold(path)


@TEST_SCORER
def test_withdrawn_and_rescored_runs_are_folded(
    real_ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class _Same(score_mod.Scorer):
        version = "2.1.0-totals"

    monkeypatch.setitem(score_mod.SCORERS, _Same.version, _Same())
    before = same_as_fold(real_ledger)
    code, _, err = cli(real_ledger, "runs", "withdraw", "self-test", "--reason", "wrong bank")
    assert code == 0, err
    code, _, err = cli(real_ledger, "rescore", "--run", "model-a", "--scorer", _Same.version)
    assert code == 0, err
    with Ledger.open(real_ledger, readonly=True) as ledger:
        assert read_as(ledger) == {"model-a": "folded", "self-test": "folded"}
    after = same_as_fold(real_ledger)
    assert after["self-test"] == {**before["self-test"], "withdrawn": "wrong bank"}
    # the run's own scorer's figures: the rescore adds a version, it changes no row
    assert after["model-a"] == before["model-a"]
    assert "self-test" not in cli(real_ledger, "runs")[1]


def test_failed_resumed_early_stopped_and_leak_stopped_runs(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    home = fresh_home(tmp_path_factory, tmp_path)
    with Ledger.open(home / "ledger.db") as ledger:
        bank = published(ledger, home, "sales-fixture")
        ctx = bank_context(bank, ledger.path, tmp_path)
        cases = [c.id for c in bank.event.cases]
        # an adapter fault on the 4th case, one call at a time: 3 of 7 recorded, correct
        with pytest.raises(RuntimeError, match="adapter bug"):
            go(ledger, home, ctx, reference(bank, fail_on=cases[3]), run_id="fault", attempts=1)
        failed = finished_of(ledger, "fault")
        assert failed.status == "failed"
        assert isinstance(failed.totals, events.RunTotals)
        # 3 / 7 = 0.428571... -> 0.4286
        assert (failed.totals.done, failed.totals.planned) == (3, 7)
        assert failed.totals.result_correct_rate == "0.4286"
        # resumed: the other 4 recorded; the last RunFinished counts the whole run
        go(ledger, home, ctx, reference(bank), run_id="fault", resume=True)
        assert finished_of(ledger, "fault").totals == totals(7, 7, "1.0000", "100.00")
        # early stop: every answer a provider timeout, stopped after 2 in a row
        lines = [
            {"case": c, "attempt": 1, "error": {"kind": "timeout", "message": "no answer"}}
            for c in cases
        ]
        replay = write_replay(tmp_path / "timeouts.jsonl", lines)
        timeouts = build_adapter("replay", {"replay_file": str(replay), "tools": "off"})
        go(ledger, home, ctx, timeouts, run_id="stopped", attempts=1, max_consecutive_failures=2)
        stopped = finished_of(ledger, "stopped")
        assert stopped.status == "failed"
        assert isinstance(stopped.totals, events.RunTotals)
        # every timeout recorded is scored (0 points, not result-correct): 0 / 7; how
        # many answers were already taken when it stopped depends on the machine
        scored = sum(
            isinstance(s.event(), events.ScoreComputed) for s in ledger.stream_events("stopped")
        )
        assert 2 <= scored < 7
        assert (stopped.totals.done, stopped.totals.planned) == (scored, 7)
        assert stopped.totals.result_correct_rate == "0.0000"
        # a leaking prompt: every attempt cancelled (7 cases x 2) before any call
        leaky = dataclasses.replace(ctx, leak_check=lambda _c, _t: ["leaks on purpose"])
        with pytest.raises(BankError):
            go(ledger, home, leaky, reference(bank), run_id="leaky", attempts=2)
        leak = finished_of(ledger, "leaky").totals
        assert isinstance(leak, events.RunTotals)
        assert (leak.done, leak.planned, leak.result_correct_rate) == (14, 14, "0.0000")
        assert read_as(ledger) == dict.fromkeys(("fault", "leaky", "stopped"), "recorded")
    rows = same_as_fold(home / "ledger.db")
    assert [rows[r]["status"] for r in ("fault", "leaky", "stopped")] == [
        "completed", "failed", "failed",
    ]  # fmt: skip


# ----------------------------------------------------------------- verify --recompute


CHANGES: dict[str, st.SearchStrategy[Any]] = {
    "done": st.sampled_from([0, 20, 22]),
    "planned": st.sampled_from([7, 20]),
    "result_correct_rate": st.sampled_from([None, "0.8572", "1.0000"]),
    "score": st.sampled_from([None, "0.00", "99.99"]),
    "first_event": st.sampled_from(["2026-12-01T00:00:00.000000Z", "2027-01-01T00:00:00Z"]),
}


@TAMPERED
@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(change=st.sampled_from(sorted(CHANGES)).flatmap(lambda f: st.tuples(st.just(f), CHANGES[f])))
def test_changed_totals_pass_verify_and_fail_recompute(
    change: tuple[str, Any], real_ledger_master: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    field, value = change
    folder = tmp_path_factory.mktemp("tamper") / "home"
    shutil.copytree(real_ledger_master.parent, folder)
    path = folder / "ledger.db"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    seq, raw = conn.execute(
        "SELECT seq, body FROM events WHERE type = 'run.finished.v1' AND stream = 'model-a'"
    ).fetchone()
    conn.close()
    body = json.loads(raw)
    assert body["totals"][field] != value
    body["totals"][field] = value
    resign_from(path, seq, msgspec.json.encode(body, order="sorted"))
    code, _, err = cli(path, "verify")
    assert code == 0, err
    code, _, err = cli(path, "verify", "--recompute")
    assert code == 1
    assert f"seq {seq}: run.finished.v1 of model-a: totals.{field} is {value!r}" in err
    # the same check when the hook walks the rows without a ledger to read them from
    unbound = recompute_hook(folder / "banks", reexecute=False)
    with Ledger.open(path, readonly=True) as ledger, pytest.raises(VerificationError) as caught:
        unbound(ledger.iter_events())
    assert caught.value.seq == seq
    assert f"totals.{field} is {value!r}" in str(caught.value)
    # `runs` shows what the signed RunFinished says: verify --recompute is the check
    assert json.loads(cli(path, "runs", "--json")[1])[0]["run"] == "model-a"
