"""Projection store: CaseRuns written out during a catch-up are paged back in when needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import projstore
from ledger.projstore import ProjectionStore, replay_ledger

CASES = [(c, "basic", "easy", "1") for c in ("a", "b", "c", "d", "e", "f")]


def _late_events_ledger(hand_ledger):
    """Two runs interleaved; each run's first attempt gets a VariantChecked at the very end."""
    h = hand_ledger(CASES)
    h.run("r1", attempts=1)
    h.run("r2", attempts=1)
    for case, *_ in CASES:
        h.scored("r1", case, 1, "100.00")
        h.scored("r2", case, 1, "50.00", correct=False)
    h.finish("r2")
    # Long after their CaseRuns were folded (and, with a tiny flush size, written out):
    h.variant_checked("r1", "a", 1, ("scope_leak",))
    h.variant_checked("r2", "f", 1)
    return h


@pytest.mark.parametrize("flush_every", [1, 2, 5, 4096], ids=lambda n: f"flush every {n}")
def test_rebuild_pages_in_written_caseruns(hand_ledger, monkeypatch, tmp_path: Path, flush_every):
    monkeypatch.setattr(projstore, "_FLUSH_EVERY", flush_every)
    h = _late_events_ledger(hand_ledger)
    full = replay_ledger(h.ledger)
    # the kit writes 4 events per attempt; the 2 late events landed on their CaseRuns
    steps = {k: len(c.steps) for k, c in full.caseruns.items()}
    assert sorted(steps.values()) == [4] * 10 + [5, 5]
    with ProjectionStore(tmp_path / "p.db") as store:
        assert store.rebuild(h.ledger) == h.ledger.size()
        assert store.load() == full


def test_catch_up_in_steps_pages_in_runs_stored_earlier(hand_ledger, monkeypatch, tmp_path: Path):
    monkeypatch.setattr(projstore, "_FLUSH_EVERY", 2)
    h = hand_ledger(CASES)
    h.run("r1", attempts=1)
    with ProjectionStore(tmp_path / "p.db") as store:
        for case, *_ in CASES[:3]:
            h.scored("r1", case, 1, "100.00")
        store.catch_up(h.ledger)
        # r1 is in the file now; new events of its stored CaseRuns and of new ones
        h.variant_checked("r1", "b", 1)
        for case, *_ in CASES[3:]:
            h.scored("r1", case, 1, "100.00")
        h.variant_checked("r1", "a", 1)
        h.finish("r1")
        store.catch_up(h.ledger)
        assert store.load() == replay_ledger(h.ledger)
        assert store.load(["r1"]).caseruns == replay_ledger(h.ledger).caseruns
