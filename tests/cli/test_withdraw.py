"""Issue 20: ``caseledger runs withdraw RUN --reason TEXT`` end to end, through the CLI.

A real ledger (report_testkit: sales-fixture published, a reference run
``self-test`` and a replay run ``model-a``, real worker processes, a real
Ed25519 operator key), copied per test because withdrawing appends. What is
checked: the signed event and ``verify``; ``runs``, ``report`` (json, md, html)
and ``gate`` leave a withdrawn run out by default and say so in one line;
``--include-withdrawn`` shows it marked with the reason; the events stay (the
old tree size gives the old bytes); refusals exit 2 and append nothing.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "projections"))
from report_testkit import build_real_ledger

from ledger.cli import main
from ledger.keys import Signer
from ledger.store import Ledger

pytestmark = pytest.mark.slow  # one real ledger per module

REASON = "wrong port: every attempt was refused"


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_real_ledger(tmp_path_factory.mktemp("withdraw") / "home")


@pytest.fixture
def ledger(master: Path, tmp_path: Path) -> Path:
    """A private copy of the master ledger, its operator key and its built bank."""
    home = tmp_path / "home"
    shutil.copytree(master.parent, home)
    return home / master.name


def cli(ledger: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(ledger), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def size(ledger: Path) -> int:
    with Ledger.open(ledger, readonly=True) as led:
        return led.size()


def withdraw(ledger: Path, run: str, reason: str = REASON) -> int:
    """Withdraw ``run``; returns the seq the event got."""
    before = size(ledger)
    code, out, err = cli(ledger, "runs", "withdraw", run, "--reason", reason)
    assert code == 0, out + err
    assert out.startswith(f"withdrew run {run} at seq {before} (reason: {reason}); its events stay")
    assert size(ledger) == before + 1
    return before


def test_the_event_is_signed_by_the_operator_and_verifies(ledger: Path) -> None:
    seq = withdraw(ledger, "model-a")
    code, out, _ = cli(ledger, "log", "--type", "run.withdrawn", "--json")
    assert code == 0
    (line,) = out.splitlines()
    row = json.loads(line)
    operator = Signer.load(ledger.parent / "keys" / "operator.key", role="operator")
    assert (row["seq"], row["key_id"]) == (seq, operator.key_id)
    event = row["event"]
    assert (event["type"], event["stream"], event["reason"]) == (
        "run.withdrawn.v1", "model-a", REASON,
    )  # fmt: skip
    code, out, err = cli(ledger, "verify")
    assert code == 0, out + err
    # the run's own events are all still there (its stream continues after them)
    code, out, _ = cli(ledger, "log", "--run", "model-a")
    assert out.splitlines()[-1].split()[2] == "run.withdrawn.v1"


def test_runs_leaves_it_out_and_says_so(ledger: Path) -> None:
    withdraw(ledger, "model-a")
    code, out, err = cli(ledger, "runs")
    assert code == 0
    assert "model-a" not in out
    assert "self-test" in out
    assert err.splitlines() == [
        f"note: 1 withdrawn run left out: model-a ({REASON}); --include-withdrawn shows it"
    ]
    code, out, err = cli(ledger, "runs", "--include-withdrawn")
    (line,) = [x for x in out.splitlines() if x.startswith("model-a")]
    assert f"completed, withdrawn: {REASON}" in line
    assert err == ""
    rows = json.loads(cli(ledger, "runs", "--json")[1])
    assert [r["run"] for r in rows] == ["self-test"]
    rows = json.loads(cli(ledger, "runs", "--json", "--include-withdrawn")[1])
    assert [(r["run"], r.get("withdrawn")) for r in rows] == [
        ("model-a", REASON), ("self-test", None),
    ]  # fmt: skip
    assert rows[0]["status"] == "completed"  # JSON keeps the status; the reason is its own key


def test_reports_leave_it_out_or_mark_it(ledger: Path, tmp_path: Path) -> None:
    old_size = size(ledger)
    _, old_json, _ = cli(ledger, "report", "--at-size", str(old_size))
    seq = withdraw(ledger, "model-a")
    # the events stay: the report at the old tree size is byte for byte the old one
    assert cli(ledger, "report", "--at-size", str(old_size))[1] == old_json
    report = json.loads(cli(ledger, "report")[1])
    runs = [e["run"] for s in report["sections"] for e in s["runs"]]
    assert runs == ["self-test"]
    assert [c["run"] for s in report["sections"] for c in s["caseruns"]] == ["self-test"] * 7
    at = json.loads(cli(ledger, "log", "--type", "run.withdrawn", "--json")[1])["event"]["at"]
    assert report["withdrawn"] == [
        {"run": "model-a", "reason": REASON, "seq": seq, "at": at, "shown": False}
    ]
    note = (
        f"1 withdrawn run left out: model-a (seq {seq}: {REASON}). `--include-withdrawn` shows it."
    )
    md = cli(ledger, "report", "--format", "md")[1]
    assert note in md.splitlines()
    html = cli(ledger, "report", "--format", "html")[1]
    assert '<div id="withdrawn"><p class="notice">1 withdrawn run left out: model-a' in html
    # issue 35: the note's Markdown code span is code in the HTML, not backticks
    assert f"{REASON}). <code>--include-withdrawn</code> shows it.</p>" in html

    shown = json.loads(cli(ledger, "report", "--include-withdrawn")[1])
    entries = {e["run"]: e for s in shown["sections"] for e in s["runs"]}
    assert entries["model-a"]["withdrawn"] == {"reason": REASON, "seq": seq, "at": at}
    assert "withdrawn" not in entries["self-test"]
    assert shown["withdrawn"][0]["shown"] is True
    md = cli(ledger, "report", "--format", "md", "--include-withdrawn")[1]
    assert f"1 withdrawn run shown, marked withdrawn: model-a (seq {seq}: {REASON})." in md
    assert f"completed, withdrawn: {REASON}" in md

    code, out, err = cli(ledger, "report", "--run", "model-a")
    assert code == 2
    assert f"run model-a is withdrawn (reason: {REASON})" in out + err
    assert "--include-withdrawn" in out + err
    assert cli(ledger, "report", "--run", "model-a", "--include-withdrawn")[0] == 0


def test_when_every_run_is_withdrawn_the_report_says_so(ledger: Path) -> None:
    withdraw(ledger, "model-a")
    withdraw(ledger, "self-test", "reference check superseded")
    report = json.loads(cli(ledger, "report")[1])
    assert (report["sections"], [w["run"] for w in report["withdrawn"]]) == (
        [], ["model-a", "self-test"],
    )  # fmt: skip
    md = cli(ledger, "report", "--format", "md")[1]
    assert "Every run of this report is withdrawn: there is nothing to rank or compare." in md
    assert "No runs in this ledger" not in md
    code, out, err = cli(ledger, "runs")
    assert code == 0
    assert "model-a" not in out
    assert "self-test" not in out
    assert err.startswith("note: 2 withdrawn runs left out: model-a (")
    assert err.rstrip().endswith("--include-withdrawn shows them")


def test_the_gate_leaves_it_out(ledger: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no gate configuration
    withdraw(ledger, "model-a")
    # LEDGER without :RUN picks the one run that is not withdrawn
    code, out, err = cli(ledger, "gate", "--baseline", str(ledger), "--current", str(ledger))
    assert code == 0, out + err
    assert f"ledger {ledger} run self-test" in out
    withdraw(ledger, "self-test", "superseded")
    side = f"{ledger}:self-test"
    code, out, err = cli(ledger, "gate", "--baseline", side, "--current", side)
    assert code == 2
    assert "run self-test of" in out + err
    assert "is withdrawn (reason: superseded)" in out + err
    code, out, err = cli(
        ledger, "gate", "--baseline", side, "--current", side, "--include-withdrawn"
    )
    assert code == 0, out + err
    # a report built with --include-withdrawn carries the mark: the gate refuses it too
    report = tmp_path / "r.json"
    report.write_text(cli(ledger, "report", "--include-withdrawn")[1], "utf-8")
    code, out, err = cli(ledger, "gate", "--baseline", f"{report}:self-test",
                         "--current", f"{report}:self-test")  # fmt: skip
    assert code == 2
    assert "run self-test is withdrawn (reason: superseded)" in out + err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "--reason", "x"], "no run 'nope'"),
        (["model-a", "--reason", "  "], "--reason must be one non-empty line"),
        (["model-a", "--reason", "two\nlines"], "--reason must be one non-empty line"),
    ],
    ids=["unknown run", "empty reason", "two lines"],
)
def test_refusals_exit_2_and_append_nothing(ledger: Path, args: list[str], message: str) -> None:
    before = size(ledger)
    code, out, err = cli(ledger, "runs", "withdraw", *args)
    assert code == 2
    assert message in out + err
    assert "Traceback" not in out + err
    assert size(ledger) == before


def test_withdrawing_twice_is_refused(ledger: Path) -> None:
    seq = withdraw(ledger, "model-a")
    before = size(ledger)
    code, out, err = cli(ledger, "runs", "withdraw", "model-a", "--reason", "again")
    assert code == 2
    assert f"run model-a is already withdrawn (seq {seq}, reason: {REASON})" in out + err
    assert size(ledger) == before


def test_a_withdrawn_run_is_not_frozen_as_a_baseline(ledger: Path, tmp_path: Path) -> None:
    withdraw(ledger, "self-test")
    out_dir = tmp_path / "frozen"
    code, _, err = cli(ledger, "baseline", "freeze", "self-test", "-o", str(out_dir))
    assert code == 2
    assert f"run self-test is withdrawn (reason: {REASON})" in err
    assert "a withdrawn run is never frozen as a baseline" in err
    assert not (out_dir / "scorecard.json").exists()
