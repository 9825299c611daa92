"""Helpers for the bank tests (imported by name, like tests/ledger/ledger_testkit.py)."""

from __future__ import annotations

from pathlib import Path


def edit(folder: Path, name: str, old: str, new: str) -> None:
    """Replace one exact piece of a bank file (it must be there exactly once)."""
    path = folder / name
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {name}"
    path.write_text(text.replace(old, new), encoding="utf-8")
