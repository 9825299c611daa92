"""A harness bug is a crash, not signed evidence (issue 13 section 3).

The comparator is broken on purpose (a TypeError, the fault injection the issue
asks for); everything else is real: the CLI in-process, a real ledger and bank,
real SQL workers, real keys. ``caseledger run``, ``rescore`` and ``baseline
freeze|check`` must stop with one ``internal error: ...`` line, exit 1, and
record nothing for the attempt (or run, or baseline) the bug hit; nothing
becomes an ``AttemptCancelled(infrastructure)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from runkit import answer, bank_json, check_attempts, fresh_home, head, stream

from ledger import events
from ledger.cli import main
from ledger.harness import compare as compare_mod
from ledger.harness import score as score_mod

FAULT = "deliberate fault in the comparator"
CASES = [f"sf-0{n}" for n in range(1, 8)]


def broken_after(calls: int) -> Callable[..., Any]:
    """The real comparator for the first ``calls`` calls, then a TypeError."""
    seen = [0]

    def compare(*args: Any, **kwargs: Any) -> Any:
        seen[0] += 1
        if seen[0] > calls:
            raise TypeError(FAULT)
        return compare_mod.compare(*args, **kwargs)

    return compare


def broken_for(case_id: str) -> Callable[..., Any]:
    """The real scorer comparison, except a TypeError for case ``case_id``.

    Keyed on the case, not on the order of calls: answers are judged on parallel
    threads, so "the third call" is not always the third case.
    """
    real = score_mod.Scorer.compare

    def compare(self: score_mod.Scorer, case: Any, gold: Any, executed: Any) -> Any:
        if case.id == case_id:
            raise TypeError(FAULT)
        return real(self, case, gold, executed)

    return compare


def invoke(home: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(home / "ledger.db"), *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def home(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    home = fresh_home(tmp_path_factory, tmp_path)
    refs = {c["id"]: c["reference_sql"] for c in bank_json(home, "sales-fixture")["cases"]}
    lines = [{"case": c, "attempt": 1, "output": answer(refs[c])} for c in CASES]
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return home


def run_args(home: Path, *extra: str) -> list[str]:
    replay = str(home.parent / "answers.jsonl")
    return ["run", "--bank", "sales-fixture", "--adapter", "replay", "--replay-file", replay,
            "--run-id", "r", "--no-variants", *extra]  # fmt: skip


def test_run_stops_and_records_nothing_for_the_attempt(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(score_mod.Scorer, "compare", broken_for("sf-03"))
    code, out, err = invoke(home, *run_args(home))
    assert code == 1
    assert err.splitlines()[-1] == (
        f"internal error: TypeError: {FAULT} (this is a caseledger bug; "
        "nothing was recorded for case sf-03 attempt 1)"
    )
    assert "Traceback" not in err
    assert "run r: completed" not in out
    stored = [s.event() for s in stream(home, "r")]
    # RunStarted, the 7 cases' prompts stored once (issue 22), two whole attempts (prompt,
    # answer, parse, guard, execution, score), the end
    assert [type(e).__name__ for e in stored] == [
        "RunStarted",
        *["PromptStored"] * 7,
        *["PromptSent", "ModelResponded", "OutputParsed", "SqlGuarded", "SqlExecuted",
          "ScoreComputed"] * 2,
        "RunFinished",
    ]  # fmt: skip
    assert [(e.case_id, e.attempt) for e in stored if isinstance(e, events.ScoreComputed)] == [
        ("sf-01", 1),
        ("sf-02", 1),
    ]
    finished = stored[-1]
    assert isinstance(finished, events.RunFinished)
    assert (finished.status, finished.message) == ("failed", "harness fault: TypeError")
    assert not any(isinstance(e, events.AttemptCancelled) for e in stored)

    # Once the bug is gone a resume finishes the run; nothing recorded before was lost.
    monkeypatch.undo()
    code, out, err = invoke(home, *run_args(home, "--resume", "r"))
    assert code == 0, err
    chains = check_attempts(stream(home, "r"), [(c, 1) for c in CASES])
    assert all(chain[-1].result_correct for chain in chains.values())


def test_rescore_stops_and_appends_nothing(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = invoke(home, *run_args(home))
    assert code == 0, err

    class Broken(score_mod.Scorer):
        version = "2.0.1-broken"

    monkeypatch.setitem(score_mod.SCORERS, Broken.version, Broken())
    monkeypatch.setattr(score_mod, "compare", broken_after(0))
    before = head(home)
    code, out, err = invoke(home, "rescore", "--scorer", Broken.version)
    assert code == 1
    assert err.splitlines()[-1] == (
        f"internal error: TypeError: {FAULT} (this is a caseledger bug; nothing was "
        "recorded for run r; it stopped at case sf-01 attempt 1)"
    )
    assert "Traceback" not in err
    assert "rescored" not in out
    assert head(home) == before


def test_baseline_freeze_and_check_stop_and_write_nothing(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = invoke(home, *run_args(home))
    assert code == 0, err
    good = tmp_path / "good"
    code, _, err = invoke(home, "baseline", "freeze", "r", "-o", str(good))
    assert code == 0, err
    expected = (
        f"internal error: TypeError: {FAULT} (this is a caseledger bug; re-scoring case "
        "sf-01 attempt 1 of run r failed; nothing was written)"
    )

    monkeypatch.setattr(score_mod, "compare", broken_after(0))
    broken = tmp_path / "broken"
    code, out, err = invoke(home, "baseline", "freeze", "r", "-o", str(broken))
    assert (code, err.splitlines()[-1]) == (1, expected)
    assert "Traceback" not in err
    assert sorted(broken.iterdir()) == []  # no half baseline left behind

    code, out, err = invoke(home, "baseline", "check", str(good))
    assert (code, err.splitlines()[-1]) == (1, expected)
    assert "metrics are not computable" not in out + err
    assert "Traceback" not in err
