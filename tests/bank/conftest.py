"""Bank test fixtures: a copy of the documented tiny bank, a fresh ledger, a fixed signer."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.keys import Signer
from ledger.store import Ledger

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "docs" / "examples" / "tiny-bank"


def fixed_clock() -> str:
    """A constant ``at`` so event bodies do not depend on the wall clock."""
    return "2026-12-02T10:00:00.000000Z"


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A writable copy of docs/examples/tiny-bank."""
    dest = tmp_path / "tiny"
    shutil.copytree(TINY, dest)
    return dest


@pytest.fixture
def signer() -> Signer:
    """A deterministic operator key."""
    return Signer.from_seed("test-operator", b"\x01" * 32)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The folder beside the ledger (keys, banks)."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def ledger(home: Path, signer: Signer) -> Iterator[Ledger]:
    """A new ledger file under ``home``."""
    led = Ledger.create(home / "ledger.db", signer, clock=fixed_clock)
    yield led
    led.close()
