"""Issue 33: one ``evaluate()`` (ledger/app/evaluate.py) that ``caseledger run``, the demo
and the Python API call, so each makes the same checks in the same order.

Real parts: a real ledger with the built-in banks published (``fresh_home``), real SQL
worker processes, the variant diagnostics' real DuckDB workers, the openai adapter
calling a closed port on 127.0.0.1. ``with_variants`` is wrapped (never replaced) to
count how often a bank's variant workers are started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from runkit import closed_port, fresh_home

from ledger import events
from ledger.api import RunPlan, open_ledger
from ledger.app import evaluate as app_evaluate
from ledger.errors import AdapterError, UsageError
from ledger.store import Ledger


@pytest.fixture
def home(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return fresh_home(tmp_path_factory, tmp_path)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The banks whose variant diagnostics were started, in order."""
    seen: list[str] = []
    real = app_evaluate.with_variants

    def counting(ctx: Any, published: Any, stack: Any) -> Any:
        seen.append(published.ref)
        return real(ctx, published, stack)

    monkeypatch.setattr(app_evaluate, "with_variants", counting)
    return seen


def test_the_api_makes_the_run_commands_checks_first(home: Path, started: list[str]) -> None:
    # caseledger run's checks, in its order, through the Python API: an unreachable
    # server is said before anything is prepared (issue 35), a taken run id before the
    # adapter is even asked; nothing is appended for either.
    port = closed_port()
    with open_ledger(home / "ledger.db") as ws:
        size = ws.ledger.size()
        bank = ws.resolve_bank("sales-fixture")
        dead = ws.build_adapter("openai", {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m"})
        with pytest.raises(AdapterError) as err:
            ws.evaluate(bank, dead, RunPlan(run_id="dead", profile="m"))
        assert err.value.message == (
            f"cannot reach the model server http://127.0.0.1:{port}: Connection refused; "
            "nothing was prepared or recorded"
        )
        assert err.value.hint == "start the server, or check --base-url"
        reference = ws.build_adapter("reference", bank=bank)
        first = ws.evaluate(bank, reference, RunPlan(run_id="taken", profile="self-test"))
        assert (first.status, first.correct, first.planned) == ("completed", 7, 7)
        assert started == ["sales-fixture@v1"]
        after = ws.ledger.size()
        with pytest.raises(UsageError) as taken:
            ws.evaluate(bank, dead, RunPlan(run_id="taken", profile="m"))
        assert taken.value.message.startswith("run taken already exists in")
        assert started == ["sales-fixture@v1"]  # nothing prepared for either refusal
        assert ws.ledger.size() == after
        assert "dead" not in set(ws.ledger.streams())
    assert after > size


def test_an_evaluator_starts_a_banks_variant_workers_once(home: Path, started: list[str]) -> None:
    # The demo's way: several runs on one bank share its variant diagnostics. Each run
    # still gets them: the reference answers all 7 cases of sales-fixture, and each
    # executed answer is checked on the variants (one VariantChecked per attempt).
    with Ledger.open(home / "ledger.db") as ledger:
        evaluator = app_evaluate.Evaluator(ledger, home, local_path=home / "ledger.db")
        try:
            for run_id in ("a", "b"):
                summary = evaluator.evaluate(
                    "sales-fixture", "reference", RunPlan(run_id=run_id, profile="self-test")
                )
                assert (summary.status, summary.correct, summary.planned) == ("completed", 7, 7)
            # --no-variants: that run has none, the bank's workers are not started again
            evaluator.evaluate(
                "sales-fixture", "reference", RunPlan(run_id="c", profile="t"), variants=False
            )
        finally:
            evaluator.close()
        checked = {
            run_id: sum(
                isinstance(s.event(), events.VariantChecked) for s in ledger.stream_events(run_id)
            )
            for run_id in ("a", "b", "c")
        }
    assert started == ["sales-fixture@v1"]
    assert checked == {"a": 7, "b": 7, "c": 0}


def test_an_adapter_object_stays_open_and_no_plan_names_the_run_after_its_kind(
    home: Path,
) -> None:
    # evaluate() closes only an adapter it built from a kind: an object is the caller's.
    closed: list[str] = []

    with open_ledger(home / "ledger.db") as ws:
        bank = ws.resolve_bank("sales-fixture")
        mine = ws.build_adapter("reference", bank=bank)
        real_close = mine.close

        def close() -> None:
            closed.append("mine")
            real_close()

        mine.close = close  # type: ignore[method-assign]
        summary = ws.evaluate(bank, mine, variants=False)
        # No plan: a new run named after the adapter kind, <kind>-<n>, n the streams
        # already in the log: fresh_home's init and two publications are all in one,
        # the ledger's own stream.
        assert summary.run_id == "reference-0001"
        assert (summary.status, summary.correct) == ("completed", 7)
        assert closed == []
        mine.close()
    assert closed == ["mine"]
