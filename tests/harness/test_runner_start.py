"""Issue 34: the first model call does not wait for the SQL workers.

Real parts: a real ledger and bank, real SQL worker processes, the openai adapter
calling a closed port on 127.0.0.1 (nothing listens: connection refused). The run
reports each progress step through ``on_progress``; the test keeps a copy of each
and reads from them whether the SQL workers had all started (``workers_ready``)
when the calls began, when the failed call was recorded and when ``run`` returned.
No time is asserted.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
from pathlib import Path

import pytest
from runkit import closed_port, fresh_home

from ledger import events
from ledger.adapters import build_adapter
from ledger.app.evaluate import bank_context
from ledger.bank.registry import find_published
from ledger.keys import load_default_signer
from ledger.run.runner import Progress, RunPlan, run
from ledger.store import Ledger

AT = "2026-12-06T10:00:00.000000Z"


@pytest.fixture
def home(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return fresh_home(tmp_path_factory, tmp_path)


def test_an_unreachable_server_is_called_and_stops_the_run_before_the_workers_are_ready(
    home: Path,
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    seen: list[Progress] = []
    live: list[Progress] = []  # the run's own Progress object, which it keeps updating

    def progress(p: Progress) -> None:
        seen.append(dataclasses.replace(p))
        live.append(p)

    # Worker processes other tests of this pytest process keep (a session fixture's
    # oracle keeps one per built-in bank) are not this run's: only the ones started
    # from here on are watched.
    before = {p.pid for p in multiprocessing.active_children()}

    def started_here() -> list[int]:
        return sorted({p.pid for p in multiprocessing.active_children()} - before)

    with Ledger.open(home / "ledger.db") as ledger:
        ctx = bank_context(find_published(ledger, home, "sales-fixture"), ledger.path, home)
        adapter = build_adapter("openai", {"base_url": url, "model": "m", "timeout_s": 10})
        # Four SQL workers: four spawned processes importing DuckDB, far slower to
        # start than a refused connection on 127.0.0.1.
        plan = RunPlan(run_id="dead", profile="t", max_consecutive_failures=1, workers=4)
        summary = run(ledger, load_default_signer(home), ctx, adapter, plan, clock=lambda: AT,
                      on_progress=progress)  # fmt: skip
        # run() returned, the run recorded as stopped, before the workers were all up:
        # it did not wait for them to start in order to stop them either.
        returned_before_ready = not live[-1].workers_ready
        stored = [s.event() for s in ledger.stream_events("dead")]
    assert returned_before_ready
    # Each worker then stops itself once it is up: none is left behind (polled, with a
    # deadline; no time is asserted).
    deadline = time.monotonic() + 300
    while (started_here() or not live[-1].workers_ready) and (time.monotonic() < deadline):
        time.sleep(0.05)
    assert live[-1].workers_ready
    assert started_here() == []
    assert summary.status == "failed"
    steps = [(p.phase, p.done, p.workers_ready) for p in seen]
    # starting (nothing called), the calls under way (the workers still starting), then
    # the failed call recorded with the workers still not all started. A second call
    # may already be under way when the first fails (one call thread: at most one);
    # it is recorded too, as an early stop does.
    assert steps[:3] == [("starting", 0, False), ("running", 0, False), ("running", 1, False)]
    assert steps[3:] in ([], [("running", 2, False)])
    # The evidence is in the order the module docstring gives: the run's start and its
    # prompts (one PromptStored per case of sales-fixture's 7: each prompt differs), then
    # the attempts (each scored as a provider failure: no SQL, no worker), then the stop.
    kinds = [type(e).__name__ for e in stored]
    attempts = len(steps) - 2
    attempt = ["PromptSent", "ProviderFailed", "ScoreComputed"]
    assert kinds == ["RunStarted", *["PromptStored"] * 7, *attempt * attempts, "RunFinished"]
    failed = stored[9]
    assert isinstance(failed, events.ProviderFailed)
    assert failed.kind == "connection_error"
    finished = stored[-1]
    assert isinstance(finished, events.RunFinished)
    assert finished.status == "failed"
    assert finished.message == (
        f"1 attempts in a row failed the same way, connection_error: {failed.message}"
    )
    scored = stored[10]
    assert isinstance(scored, events.ScoreComputed)
    assert scored.failure_kind == "provider"
