"""Fixtures for projection and report tests (helpers live in report_testkit.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ledger_audit import HAND_MADE
from report_testkit import HandLedger, build_real_ledger


@pytest.fixture
def hand_ledger(tmp_path: Path, request: pytest.FixtureRequest):
    """A factory: ``hand_ledger(cases)`` -> HandLedger on a fresh ledger file.

    Its events are made by hand on a bank whose files are never written, so the test
    that makes one is left out of the suite's ``verify --recompute`` audit (HAND_MADE).
    """
    made: list[HandLedger] = []

    def make(cases: list[tuple[str, str, str, str]], name: str = "ledger.db") -> HandLedger:
        request.node.add_marker(HAND_MADE)
        made.append(HandLedger(tmp_path / name, cases))
        return made[-1]

    yield make
    for h in made:
        h.ledger.close()


@pytest.fixture(scope="session")
def real_ledger_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real run ledger per session (read-only: copy it before appending)."""
    return build_real_ledger(tmp_path_factory.mktemp("real") / "home")


@pytest.fixture
def real_ledger(real_ledger_master: Path, tmp_path: Path) -> Path:
    """A private copy of the real ledger folder (ledger, bank files, keys)."""
    dst = tmp_path / "home"
    shutil.copytree(
        real_ledger_master.parent, dst, ignore=shutil.ignore_patterns("*.projections.db")
    )
    return dst / "ledger.db"
