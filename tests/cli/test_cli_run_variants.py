"""Variant diagnostics in model runs (issue 9): VariantChecked follows an unchanged score."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from runkit import answer, check_attempts, cli, fresh_home, stream

from ledger import events

EXCLUDING = """SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales
WHERE region <> '区域乙' AND valid = 'Y'
  AND deal_time >= TIMESTAMPTZ '2026-09-01 00:00:00+08:00'
  AND deal_time < TIMESTAMPTZ '2026-10-01 00:00:00+08:00'"""
SELECTING = EXCLUDING.replace("region <> '区域乙'", "region = '区域甲'")


def _replay(tmp_path: Path) -> Path:
    lines = [
        {"case": "sf-01", "attempt": 1, "output": answer(EXCLUDING)},
        {"case": "sf-01", "attempt": 2, "output": answer(SELECTING)},
    ]
    path = tmp_path / "sf01.jsonl"
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), "utf-8")
    return path


def _by_attempt(home: Path, run_id: str) -> dict[int, list[events.EventBase]]:
    out: dict[int, list[events.EventBase]] = {}
    for item in stream(home, run_id):
        event = item.event()
        if getattr(event, "case_id", None) == "sf-01":
            out.setdefault(event.attempt, []).append(event)
    return out


@pytest.mark.slow
def test_scope_leak_is_flagged_after_an_unchanged_score(tmp_path_factory, tmp_path) -> None:
    home = fresh_home(tmp_path_factory, tmp_path)
    replay = _replay(tmp_path)
    base = ["run", "--bank", "sales-fixture", "--adapter", "replay", "--replay-file", str(replay)]
    done = cli(home, *base, "--run-id", "with-variants")
    assert done.returncode == 0, done.stderr
    done = cli(home, *base, "--run-id", "no-variants", "--no-variants")
    assert done.returncode == 0, done.stderr

    flagged = _by_attempt(home, "with-variants")
    plain = _by_attempt(home, "no-variants")
    # On the third-region variant the excluding query's answer moves while gold stays put
    # (scope_leak), so it is also wrong against that variant's gold (variant_mismatch).
    for attempt, expected_flags in ((1, ("scope_leak", "variant_mismatch")), (2, ())):
        last = flagged[attempt][-1]
        assert isinstance(last, events.VariantChecked)
        assert last.flags == expected_flags
        scores = [e for e in flagged[attempt] if isinstance(e, events.ScoreComputed)]
        assert len(scores) == 1
        assert scores[0].total == Decimal("100.00")
        assert scores[0].result_correct is True
        # the same answer without diagnostics scores exactly the same
        (same,) = [e for e in plain[attempt] if isinstance(e, events.ScoreComputed)]
        assert (same.total, same.result_correct, same.items) == (
            scores[0].total,
            scores[0].result_correct,
            scores[0].items,
        )
        assert not any(isinstance(e, events.VariantChecked) for e in plain[attempt])
    # the excluding query moved on the third-region variant, the selecting one did not
    moved = {o.variant_id: o.moved for o in flagged[1][-1].outcomes if o.non_interfering}
    assert any(moved.values())
    # every other case has no recording: cancelled, still planned, never flagged
    planned = [(c, n) for c in ("sf-01",) for n in (1, 2)]
    chains = check_attempts(
        [
            s
            for s in stream(home, "with-variants")
            if getattr(s.event(), "case_id", "sf-01") == "sf-01"
        ],
        planned,
    )
    assert set(chains) == set(planned)
