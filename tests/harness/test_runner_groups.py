"""Issue 21, group commits: when the store refuses a group, the attempts before the
refused one are still recorded (appended one by one) and the run fails naming it.

Real parts only: a real ledger and bank, real SQL workers, a real replay file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runkit import answer, bank_json, fresh_home

from ledger import events
from ledger.adapters import build_adapter
from ledger.bank.registry import find_published
from ledger.cli.run import bank_context
from ledger.errors import SecretLeakError
from ledger.harness.runner import RunPlan, run
from ledger.keys import load_default_signer
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
