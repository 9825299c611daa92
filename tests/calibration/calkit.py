"""Helpers of the calibration tests: built-in bank folders, copies, a calibrated bank.

A module of its own name (not ``conftest``): a test module that imported them from
``conftest`` got the top-level tests/conftest.py instead whenever another folder's
conftest was loaded first (issue 33).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ledger.bank.build import build_database
from ledger.bank.model import Bank, load_bank
from ledger.bank.registry import BUILTIN_DIR
from ledger.calibration.calibrate import CalibrationResult, calibrate
from ledger.calibration.config import load_calibration

FIXTURE = BUILTIN_DIR / "sales-fixture"
RETAIL = BUILTIN_DIR / "retail"
BANK_FILES = ("cases.yaml", "prompt.md", "schema.sql", "seed.sql", "semantic.json")


def copy_bank(src: Path, dest: Path, *, calibration: str | None, seed_extra: str = "") -> Path:
    """Copy a bank's five files; append SQL to its seed; write (or omit) calibration.yaml."""
    dest.mkdir(parents=True)
    for name in BANK_FILES:
        shutil.copyfile(src / name, dest / name)
    if seed_extra:
        with (dest / "seed.sql").open("a", encoding="utf-8") as f:
            f.write("\n" + seed_extra + "\n")
    if calibration is not None:
        (dest / "calibration.yaml").write_text(calibration, encoding="utf-8")
    return dest


def run_calibration(folder: Path, work: Path) -> tuple[Bank, CalibrationResult]:
    """Build the bank in ``work`` and calibrate it with its own calibration.yaml."""
    bank = load_bank(folder)
    db = work / "base.duckdb"
    build_database(bank, db)
    return bank, calibrate(bank, load_calibration(bank), db, work / "variants")
