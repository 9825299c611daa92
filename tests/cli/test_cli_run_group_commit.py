"""Issue 21, "Overlap the stages": a replay run appends its attempts in group commits
(many attempts per durable transaction); a SIGKILL in the middle leaves whole attempts
only, and ``--resume`` finishes the run with the verdicts of a run never killed.

Real parts only: real ``caseledger`` processes, a real ledger, real SQL workers, SIGKILL.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ledger import events

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from runkit import answer, bank_json, check_attempts, cli, count_type, fresh_home, spawn, stream

ATTEMPTS = 40  # 7 cases x 40 = 280 attempts: several groups of at most 64


@pytest.fixture
def home(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return fresh_home(tmp_path_factory, tmp_path)


def _replay(home: Path, tmp_path: Path) -> tuple[Path, dict[tuple[str, int], bool]]:
    """A replay file: odd attempts the reference SQL, even ones its rows twice.

    Returns the file and, per attempt, whether it is result-correct, worked out from
    how it was written: the reference is right; its rows twice (UNION ALL) are wrong.
    """
    cases = bank_json(home, "sales-fixture")["cases"]
    lines, expected = [], {}
    for case in cases:
        ref = case["reference_sql"]
        for n in range(1, ATTEMPTS + 1):
            twice = n % 2 == 0
            doubled = f"SELECT * FROM ({ref}) UNION ALL SELECT * FROM ({ref})"  # noqa: S608
            sql = doubled if twice else ref
            lines.append({"case": case["id"], "attempt": n, "output": answer(sql)})
            expected[(case["id"], n)] = not twice
    replay = tmp_path / "answers.jsonl"
    replay.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return replay, expected


def _verdicts(home: Path, run_id: str) -> dict[tuple[str, int], tuple[Any, ...]]:
    out = {}
    for item in stream(home, run_id):
        e = item.event()
        if isinstance(e, events.ScoreComputed):
            out[(e.case_id, e.attempt)] = (e.result_correct, e.failure_kind, str(e.total))
    return out


def _wait(predicate: Any, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.02)


@pytest.mark.slow
def test_sigkill_mid_group_leaves_whole_attempts_and_resume_is_exact(
    home: Path, tmp_path: Path
) -> None:
    replay, expected = _replay(home, tmp_path)
    total = len(expected)
    args = ["run", "--bank", "sales-fixture", "--adapter", "replay", "--replay-file",
            str(replay), "--no-variants"]  # fmt: skip
    proc = spawn(home, *args, "--run-id", "killed")
    _wait(lambda: count_type(home, "score.computed.v1") >= 1)  # the first group is in
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    scored = count_type(home, "score.computed.v1")
    assert 1 <= scored < total, "the kill must land before the end"
    # Whole attempts only: every attempt that has a prompt has its score, and no more.
    assert count_type(home, "prompt.sent.v1") == scored
    assert count_type(home, "sql.executed.v1") == scored
    assert count_type(home, "run.finished.v1") == 0
    verified = cli(home, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr

    resumed = cli(home, *args, "--resume", "killed")
    assert resumed.returncode == 0, resumed.stderr
    assert f"attempts: {total} planned, {total} done" in resumed.stdout
    stored = stream(home, "killed")
    check_attempts(stored, list(expected))
    kinds = [type(s.event()) for s in stored]
    assert kinds.count(events.PromptSent) == total  # no attempt was recorded twice
    assert kinds.count(events.RunFinished) == 1

    clean = cli(home, *args, "--run-id", "clean")
    assert clean.returncode == 0, clean.stderr
    after_kill, never_killed = _verdicts(home, "killed"), _verdicts(home, "clean")
    assert after_kill == never_killed
    assert {k: v[0] for k, v in after_kill.items()} == expected
    verified = cli(home, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
