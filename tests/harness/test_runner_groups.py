"""Issue 21, group commits: when the store refuses a group, the attempts before the
refused one are still recorded (appended one by one) and the run fails naming it.

Real parts only: a real ledger and bank, real SQL workers, a real replay file.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from runkit import answer, bank_json, fresh_home

from ledger import events
from ledger.adapters import build_adapter
from ledger.app.evaluate import bank_context
from ledger.bank.registry import find_published
from ledger.errors import SecretLeakError
from ledger.keys import load_default_signer
from ledger.run import runner as runner_mod
from ledger.run.runner import RunPlan, run
from ledger.store import Ledger

AT = "2026-12-03T10:00:00.000000Z"
TOKEN = b"tok-SECRET-4242"


def _token(body: bytes) -> str | None:
    return "a test token" if TOKEN in body else None


@pytest.fixture
def home(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return fresh_home(tmp_path_factory, tmp_path)


def test_a_refused_group_keeps_the_attempts_before_the_refused_one(
    home: Path, tmp_path: Path
) -> None:
    cases = bank_json(home, "sales-fixture")["cases"]
    assert len(cases) == 7
    lines = []
    for n, case in enumerate(cases):
        sql = case["reference_sql"]
        if n == 4:  # the fifth answer holds the token: its attempt must not be stored
            sql = f"/* {TOKEN.decode()} */ {sql}"
        lines.append({"case": case["id"], "attempt": 1, "output": answer(sql)})
    replay = tmp_path / "answers.jsonl"
    replay.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with Ledger.open(home / "ledger.db") as ledger:
        ledger.register_secrets(_token)
        ctx = bank_context(find_published(ledger, home, "sales-fixture"), ledger.path, tmp_path)
        adapter = build_adapter("replay", {"replay_file": str(replay)})
        with pytest.raises(SecretLeakError):
            run(ledger, load_default_signer(home), ctx, adapter,
                RunPlan(run_id="g", profile="t"), clock=lambda: AT)  # fmt: skip
        stored = [s.event() for s in ledger.stream_events("g")]
    scored = [(e.case_id, e.attempt) for e in stored if isinstance(e, events.ScoreComputed)]
    # One call thread answers in plan order: the four before the fifth are recorded.
    assert scored == [(c["id"], 1) for c in cases[:4]]
    prompted = [e.case_id for e in stored if isinstance(e, events.PromptSent)]
    assert prompted == [c["id"] for c in cases[:4]]
    assert all(e.result_correct for e in stored if isinstance(e, events.ScoreComputed))
    finished = stored[-1]
    assert isinstance(finished, events.RunFinished)
    assert finished.status == "failed"
    assert finished.message == "harness fault: SecretLeakError"


class _Gate:
    """Counts the reads that start while the marked answer's read is held."""

    def __init__(self, needed: int) -> None:
        self.needed, self.others, self.released = needed, 0, False
        self.cond = threading.Condition()

    def hold(self) -> None:
        with self.cond:
            self.released = self.cond.wait_for(lambda: self.others >= self.needed, 60.0)

    def other(self) -> None:
        with self.cond:
            self.others += 1
            self.cond.notify_all()


class _Watched:
    """A real SQL executor whose read of the marked SQL waits for other reads to start."""

    def __init__(self, inner: Any, gate: _Gate) -> None:
        self.inner, self.gate = inner, gate

    def read(self, request: Any) -> Any:
        if HOLD in request.sql:
            self.gate.hold()
        else:
            self.gate.other()
        return self.inner.read(request)

    def execute(self, sql: str, **kw: Any) -> Any:
        return self.inner.execute(sql, **kw)

    def close(self) -> None:
        self.inner.close()


HOLD = "/* hold this one */"


def test_answers_are_judged_while_the_oldest_is_still_being_judged(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 21: the recording thread used to take new answers only between two
    # stagings, and the replay adapter runs one answer ahead, so about one answer was
    # judged at a time. Here the first answer's SQL reading is held (its worker stays
    # busy) until four other answers' readings have started on the other worker: that
    # happens only if answers keep being taken and judged while the oldest is judged.
    # Without that the hold would time out (60 s) and `released` stay False. Every answer's
    # text is its own (a comment naming it): a text another answer is already having read
    # is not read again but waits for that reading (issue 34, KeptReadings), and would
    # start no read here.
    cases = bank_json(home, "sales-fixture")["cases"]
    lines = [
        {"case": c["id"], "attempt": n, "output": answer(
            f"{HOLD} {c['reference_sql']}" if (i, n) == (0, 1)
            else f"/* answer {i}.{n} */ {c['reference_sql']}")}
        for n in (1, 2) for i, c in enumerate(cases)
    ]  # fmt: skip
    replay = tmp_path / "answers.jsonl"
    replay.write_text("".join(json.dumps(x) + "\n" for x in lines))
    gate = _Gate(needed=4)
    real = runner_mod.executor_for
    monkeypatch.setattr(runner_mod, "executor_for", lambda *a: _Watched(real(*a), gate))
    with Ledger.open(home / "ledger.db") as ledger:
        ctx = bank_context(find_published(ledger, home, "sales-fixture"), ledger.path, tmp_path)
        adapter = build_adapter("replay", {"replay_file": str(replay)})
        summary = run(ledger, load_default_signer(home), ctx, adapter,
                      RunPlan(run_id="o", profile="t", workers=2), clock=lambda: AT)  # fmt: skip
        stored = [s.event() for s in ledger.stream_events("o")]
    assert gate.released
    assert gate.others >= 4
    assert (summary.status, summary.done, summary.correct) == ("completed", 14, 14)
    scored = [(e.case_id, e.attempt) for e in stored if isinstance(e, events.ScoreComputed)]
    # still recorded in the order the answers arrived (plan order: one call thread)
    assert scored == [(c["id"], n) for c in cases for n in (1, 2)]
