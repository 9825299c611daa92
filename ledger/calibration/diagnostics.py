"""Variant diagnostics for model runs: flags next to the score, never part of it.

For a model's SQL on a case, the SQL also runs on every variant database of
the bank's calibration:

- ``variant_mismatch``: on some variant its answer is not result_correct
  against that variant's gold (a latent error the base snapshot hides);
- ``scope_leak``: on a variant the case lists as ``non_interfering`` (its gold
  equals the base gold) the model's answer differs from its own base answer,
  i.e. it read rows outside the question's scope.

Neither flag changes ScoreComputed, the score or ``result_correct``; the runner
records them as a VariantChecked event after the attempt's ScoreComputed.
"""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.bank.model import Bank, CaseDef
from ledger.calibration.calibrate import read_gold, read_schema
from ledger.calibration.config import Calibration, load_calibration
from ledger.calibration.oracle import Oracle
from ledger.calibration.variants import prepare_variants
from ledger.closing import Closing
from ledger.codec import canonical_json
from ledger.engines.process import ExecResult
from ledger.events import CaseSpec, SqlExecuted, VariantOutcome

__all__ = ["FLAGS", "VariantCheck", "VariantDiagnostics", "answer_moved", "variant_diagnostics"]

FLAGS = ("scope_leak", "variant_mismatch")


@dataclass(frozen=True)
class VariantCheck:
    """The flags of one attempt and the outcome on each variant (VariantChecked fields)."""

    calibration_sha256: str
    flags: tuple[str, ...]
    outcomes: tuple[VariantOutcome, ...]

    def event_fields(self) -> dict[str, Any]:
        """Fields of VariantChecked except case_id and attempt."""
        return {
            "calibration_sha256": self.calibration_sha256,
            "flags": self.flags,
            "outcomes": self.outcomes,
        }


def _rows_key(
    result: ExecResult | SqlExecuted, ordered: bool
) -> list[bytes] | list[tuple[bytes, int]]:
    rows = [canonical_json(list(r)) for r in result.rows]
    if ordered:
        return rows
    return sorted(Counter(rows).items())


def answer_moved(
    base: ExecResult | SqlExecuted, other: ExecResult | SqlExecuted, *, ordered: bool
) -> bool | None:
    """True when two executions of the same SQL returned different typed results.

    None when either failed. Cells are compared exactly as encoded (same SQL,
    same engine: there is no tolerance to apply); rows as a multiset unless
    the case's order is significant.
    """
    if not base.ok or not other.ok:
        return None
    if [(c.name, c.type) for c in base.columns] != [(c.name, c.type) for c in other.columns]:
        return True
    if base.truncated != other.truncated:
        return True
    return _rows_key(base, ordered) != _rows_key(other, ordered)


class VariantDiagnostics(Closing):
    """Variant databases and workers of one bank, ready to check model answers.

    Use as a context manager (the workers stop on exit).
    """

    def __init__(
        self,
        bank: Bank,
        calibration: Calibration,
        base_db: Path,
        cache_dir: Path,
        *,
        timeout_s: float = 5.0,
    ) -> None:
        self.calibration = calibration
        self.base_gold = read_gold(bank, base_db)
        self.variants = prepare_variants(bank, calibration, cache_dir)
        tables = _tables(base_db)
        self.oracle = Oracle({v.id: v.path for v in self.variants}, tables, timeout_s=timeout_s)
        # At most one SQL per core at a time, so a query's time (and its timeout) is
        # about what it would be alone.
        parallel = max(1, min(len(self.variants), os.cpu_count() or 1))
        self._threads = ThreadPoolExecutor(parallel, thread_name_prefix="caseledger-variant")

    def close(self) -> None:
        """Stop the workers."""
        self._threads.shutdown()
        self.oracle.close()

    def check(
        self, case: CaseDef | CaseSpec, sql: str, base_result: ExecResult | SqlExecuted
    ) -> VariantCheck:
        """Run ``sql`` on every variant and derive the flags (see the module docstring)."""
        non_interfering = set(self.calibration.case(case.id).non_interfering)
        outcomes, flags = [], set()
        # Each variant has its own worker: the judgements run side by side (they mostly
        # wait on their workers), and come back in variant order.
        judgements = self._threads.map(
            lambda v: self.oracle.judge(case, sql, v.id, v.gold[case.id]), self.variants
        )
        for v, judged in zip(self.variants, judgements, strict=True):
            moved = None
            if judged.result is not None:
                moved = answer_moved(base_result, judged.result, ordered=_ordered(case))
            quiet = v.id in non_interfering and v.gold[case.id].digest == (
                self.base_gold[case.id].digest
            )
            if judged.result_correct is False:
                flags.add("variant_mismatch")
            if quiet and moved:
                flags.add("scope_leak")
            outcomes.append(
                VariantOutcome(
                    variant_id=v.id,
                    non_interfering=v.id in non_interfering,
                    result_correct=judged.result_correct,
                    moved=moved,
                    error_kind=judged.error_kind,
                )
            )
        return VariantCheck(self.calibration.sha256, tuple(sorted(flags)), tuple(outcomes))


def _ordered(case: CaseDef | CaseSpec) -> bool:
    return bool(case.row_order_significant)


def _tables(base_db: Path) -> frozenset[str]:
    return frozenset(read_schema(base_db))


def variant_diagnostics(
    diagnostics: VariantDiagnostics,
    case: CaseDef | CaseSpec,
    sql: str,
    base_result: ExecResult | SqlExecuted,
) -> VariantCheck:
    """Flags for a model's SQL on a case (``variant_mismatch``, ``scope_leak``); see the module.

    ``base_result`` is the attempt's own execution on the base database
    (the SqlExecuted the runner recorded).
    """
    return diagnostics.check(case, sql, base_result)


def open_for_published(published: Any) -> VariantDiagnostics | None:
    """Variant diagnostics of a published bank (its stored calibration.yaml), or None.

    None when the bank was published without calibration data or declares no
    variants, and for a bank on another engine than DuckDB (variant databases are
    DuckDB builds). Variant databases are cached beside the bank's database.
    """
    if published.event.build.engine != "duckdb":
        return None

    bank = published.stored_bank()
    calibration = load_calibration(bank)
    if calibration is None or not calibration.variants:
        return None
    cache = Path(published.db_path).parent / "variants"
    return VariantDiagnostics(bank, calibration, Path(published.db_path), cache)


def as_event_check(diagnostics: VariantDiagnostics) -> Any:
    """The runner's ``variant_check`` callable: case, SQL, base execution -> event fields."""

    def check(case: CaseSpec, sql: str, executed: SqlExecuted) -> dict[str, Any]:
        return diagnostics.check(case, sql, executed).event_fields()

    return check
