"""One call for the CLI: resolve a bank, calibrate it against its published database, record it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ledger.bank.model import Bank, load_bank
from ledger.bank.publish import publish
from ledger.bank.registry import PublishedBank, builtin_banks, find_published
from ledger.calibration.calibrate import CalibrationResult, calibrate
from ledger.calibration.config import load_calibration
from ledger.calibration.record import record_calibration
from ledger.errors import UsageError
from ledger.keys import Signer
from ledger.store import Ledger

__all__ = ["CalibrationRun", "resolve_bank", "run_calibration", "variant_cache"]


@dataclass(frozen=True)
class CalibrationRun:
    """What ``caseledger calibrate`` did: the result and the run it was recorded as."""

    result: CalibrationResult
    run_id: str
    published: PublishedBank
    created_bank: bool


def variant_cache(published: PublishedBank) -> Path:
    """Where a published bank's variant databases live: beside its database."""
    return published.db_path.parent / "variants"


def resolve_bank(
    ledger: Ledger, signer: Signer, arg: str, home: Path, *, cwd: Path
) -> tuple[Bank, PublishedBank, bool]:
    """A folder or built-in name is published first (a no-op when it already is) so that its
    calibration.yaml is read from the source; ``NAME@VERSION`` or a hash reads the stored copy.
    """
    folder = Path(arg)
    if not folder.is_dir():
        folder = builtin_banks().get(arg, folder)
    if folder.is_dir():
        outcome = publish(ledger, signer, folder, home, cwd=cwd)
        return load_bank(folder), outcome.published, outcome.created
    published = find_published(ledger, home, arg)
    return published.stored_bank(), published, False


def run_calibration(
    ledger: Ledger, signer: Signer, arg: str, home: Path, *, cwd: Path, timeout_s: float = 5.0
) -> CalibrationRun:
    """Calibrate bank ``arg`` and append the calibration run to ``ledger``."""
    bank, published, created = resolve_bank(ledger, signer, arg, home, cwd=cwd)
    if published.event.build.engine != "duckdb":
        raise UsageError(
            f"bank {published.ref} runs on {published.event.build.engine}: calibration "
            "(mutants, variant databases) runs on DuckDB banks only",
            hint="calibrate the bank's DuckDB publication (publish it without --engine)",
        )
    calibration = load_calibration(bank)
    result = calibrate(
        bank, calibration, published.db_path, variant_cache(published), timeout_s=timeout_s
    )
    run_id = record_calibration(ledger, signer, result, published)
    return CalibrationRun(result, run_id, published, created)
