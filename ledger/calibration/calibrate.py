"""Calibrate a bank's oracle: run every mutant and positive control, count what was caught.

Definitions (docs/calibration.md):

- A mutant is **killed** when the real scorer says ``result_correct = false``
  for it on the base database, or on any variant database against that
  variant's own gold (the reference SQL executed on the variant). A
  ``stale_snapshot`` mutant is the unchanged reference run on a stale variant
  and judged against the base gold.
- It **survives** when it is ``result_correct = true`` everywhere: every
  survivor is a candidate equivalent and is listed until calibration.yaml
  reviews it (``equivalent_mutants``), which makes it ``equivalent``.
- **blocked**: no verdict of false and at least one database gave no verdict
  (timeout, memory, a worker that crashed twice, a scoring fault), or the
  sqlglot rendering of the case's reference is not itself correct. Never killed.
- **unsupported**: the mutant does not parse, or the guard rejects it, or it
  fails to execute on the base database (a stillborn mutant).
- kill_rate = killed / (applicable - equivalent - blocked), where applicable
  counts every mutant that was run; i.e. killed / (killed + survivors).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import sqlglot
from sqlglot.errors import SqlglotError

from ledger.bank.build import freeze_gold
from ledger.bank.model import Bank, CaseDef
from ledger.calibration.config import Calibration
from ledger.calibration.operators import OPERATORS, Mutant, mutants_for, render
from ledger.calibration.oracle import Judged, Oracle
from ledger.calibration.variants import BASE, VariantDb, prepare_variants
from ledger.engines.cells import type_class
from ledger.engines.duckdb_build import open_bank_db, table_snapshot
from ledger.errors import broken
from ledger.events import GoldResult
from ledger.harness.compare import fraction_to_decimal
from ledger.harness.guard import fold

__all__ = [
    "RATE_PLACES",
    "STATUSES",
    "CalibrationResult",
    "ControlRecord",
    "MutantRecord",
    "calibrate",
    "kill_rate",
    "read_gold",
    "read_schema",
]

RATE_PLACES = Decimal("0.0001")
STATUSES = ("killed", "survived", "equivalent", "blocked", "unsupported", "not_applicable")
_PATTERN = {op.name: op.pattern for op in OPERATORS}
_RUNTIME = frozenset({"guard", "sql_runtime"})


@dataclass(frozen=True)
class MutantRecord:
    """One mutant's outcome: status, why, and the verdict of each database it ran on."""

    mutant: Mutant
    status: str
    reason: str
    verdicts: tuple[Judged, ...] = ()
    review: str | None = None

    @property
    def killed_by(self) -> tuple[str, ...]:
        """The databases on which the scorer said result_correct = false."""
        return tuple(v.database for v in self.verdicts if v.result_correct is False)


@dataclass(frozen=True)
class ControlRecord:
    """One positive control (an alternative_sql): it must be result_correct everywhere."""

    case_id: str
    index: int
    sql: str
    verdicts: tuple[Judged, ...]

    @property
    def passed(self) -> bool:
        """True when every database says result_correct = true."""
        return all(v.result_correct is True for v in self.verdicts)


@dataclass(frozen=True)
class CalibrationResult:
    """Everything one calibration found, in bank case order then operator order."""

    bank: Bank
    calibration: Calibration | None
    scorer_version: str
    variants: tuple[VariantDb, ...]
    mutants: tuple[MutantRecord, ...]
    controls: tuple[ControlRecord, ...]
    unused_reviews: tuple[tuple[str, str], ...] = field(default=())

    def count(self, status: str) -> int:
        """How many mutants have ``status``."""
        return sum(1 for m in self.mutants if m.status == status)

    @property
    def survivors(self) -> tuple[MutantRecord, ...]:
        """Survivors not yet reviewed as equivalent."""
        return tuple(m for m in self.mutants if m.status == "survived")

    @property
    def controls_passed(self) -> int:
        """Positive controls that passed."""
        return sum(1 for c in self.controls if c.passed)

    @property
    def passed(self) -> bool:
        """Calibration passes when every positive control is result_correct everywhere."""
        return self.controls_passed == len(self.controls)

    @property
    def kill_rate(self) -> Decimal | None:
        """killed / (killed + survivors), 4 places half-up; None with nothing to judge."""
        return kill_rate(self.count("killed"), self.count("survived"))


def kill_rate(killed: int, survived: int) -> Decimal | None:
    """The kill rate as a Decimal with 4 places (None when nothing was judged).

    >>> kill_rate(22, 1), kill_rate(3, 0), kill_rate(0, 0)
    (Decimal('0.9565'), Decimal('1.0000'), None)
    """
    if killed + survived == 0:
        return None
    return fraction_to_decimal(Fraction(killed, killed + survived), RATE_PLACES)


def read_schema(base_db: Path) -> dict[str, dict[str, str]]:
    """Published tables of a built bank: table -> column -> type class (names folded)."""
    con = open_bank_db(base_db)
    try:
        tables = table_snapshot(con)
    finally:
        con.close()
    return {fold(t.name): {fold(c.name): type_class(c.type) for c in t.columns} for t in tables}


def read_gold(bank: Bank, base_db: Path) -> dict[str, GoldResult]:
    """Every reference SQL executed on a built database, by case id."""
    con = open_bank_db(base_db)
    try:
        return {g.case_id: g for g in freeze_gold(con, bank)}
    finally:
        con.close()


class _Run:
    """Judges SQL texts of one case on the base database and every variant."""

    def __init__(
        self, oracle: Oracle, base_gold: dict[str, GoldResult], variants: tuple[VariantDb, ...]
    ) -> None:
        self.oracle, self.base_gold, self.variants = oracle, base_gold, variants

    def everywhere(self, case: CaseDef, sql: str) -> tuple[Judged, ...]:
        out = [self.oracle.judge(case, sql, BASE, self.base_gold[case.id])]
        for v in self.variants:
            out.append(self.oracle.judge(case, sql, v.id, v.gold[case.id]))
        return tuple(out)

    def mutant(self, case: CaseDef, m: Mutant, baseline_ok: str | None) -> MutantRecord:
        if m.status != "candidate":
            return MutantRecord(m, m.status, m.reason)
        if baseline_ok is not None:
            return MutantRecord(m, "blocked", baseline_ok)
        if m.sql is None:
            raise broken(f"mutant {m.operator} of case {m.case_id} is applicable but has no SQL")
        if m.variant is not None:  # stale snapshot: the reference, another database, base gold
            verdicts: tuple[Judged, ...] = (
                self.oracle.judge(case, m.sql, m.variant, self.base_gold[case.id]),
            )
        else:
            verdicts = self.everywhere(case, m.sql)
        base = verdicts[0]
        if m.variant is None and base.error_kind in _RUNTIME:
            return MutantRecord(m, "unsupported", f"{base.error_kind}: {base.message}", verdicts)
        if any(v.result_correct is False for v in verdicts):
            return MutantRecord(m, "killed", m.reason, verdicts)
        failed = [v for v in verdicts if v.result_correct is None]
        if failed:
            why = "; ".join(f"{v.database}: {v.error_kind}: {v.message}" for v in failed)
            return MutantRecord(m, "blocked", f"no verdict on {why}", verdicts)
        return MutantRecord(m, "survived", m.reason, verdicts)

    def baseline(self, case: CaseDef) -> str | None:
        """None when the sqlglot rendering of the reference is correct everywhere, else why."""
        try:
            rendered = render(sqlglot.parse_one(case.reference_sql, read="duckdb"))
        except SqlglotError as exc:
            return f"the reference SQL cannot be rendered by sqlglot: {exc}"
        bad = [v for v in self.everywhere(case, rendered) if v.result_correct is not True]
        if not bad:
            return None
        where = ", ".join(f"{v.database} ({v.error_kind or 'wrong result'})" for v in bad)
        return f"the sqlglot rendering of the reference is not result_correct on {where}"


def _review(records: list[MutantRecord], calibration: Calibration | None) -> tuple[
    list[MutantRecord], list[tuple[str, str]]
]:  # fmt: skip
    """Mark reviewed survivors equivalent; list reviews that match no survivor."""
    if calibration is None:
        return records, []
    used: set[tuple[str, str]] = set()
    out = []
    for rec in records:
        reviews = calibration.case(rec.mutant.case_id).equivalent_mutants
        match = next((r for r in reviews if r.covers(rec.mutant.id)), None)
        if match is not None and rec.status == "survived":
            used.add((rec.mutant.case_id, match.operator))
            rec = MutantRecord(rec.mutant, "equivalent", rec.reason, rec.verdicts, match.reason)
        out.append(rec)
    unused = [
        (cid, r.operator)
        for cid, cc in sorted(calibration.cases.items())
        for r in cc.equivalent_mutants
        if (cid, r.operator) not in used
    ]
    return out, unused


def calibrate(
    bank: Bank,
    calibration: Calibration | None,
    base_db: Path,
    cache_dir: Path,
    *,
    timeout_s: float = 5.0,
) -> CalibrationResult:
    """Run every mutant of every case and every positive control through the real oracle.

    Args:
        bank: the bank (reference SQL from its files).
        calibration: its calibration.yaml, or None (no variants, no controls).
        base_db: the bank's built database (the published one).
        cache_dir: where variant databases are built and reused.
        timeout_s: the worker timeout per query (the runner's default).
    """
    schema = read_schema(base_db)
    base_gold = read_gold(bank, base_db)
    variants = prepare_variants(bank, calibration, cache_dir) if calibration else ()
    stale = tuple(v.id for v in variants if v.variant.stale)
    databases = {BASE: base_db, **{v.id: v.path for v in variants}}
    records: list[MutantRecord] = []
    controls: list[ControlRecord] = []
    with Oracle(databases, frozenset(schema), timeout_s=timeout_s) as oracle:
        run = _Run(oracle, base_gold, variants)
        for case in bank.cases:
            mutants = mutants_for(case.id, case.reference_sql, schema, stale)
            baseline = run.baseline(case) if any(m.status == "candidate" for m in mutants) else None
            records.extend(run.mutant(case, m, baseline) for m in mutants)
            alternatives = calibration.case(case.id).alternative_sql if calibration else ()
            for i, sql in enumerate(alternatives):
                controls.append(ControlRecord(case.id, i, sql, run.everywhere(case, sql)))
        version = oracle.scorer_version
    reviewed, unused = _review(records, calibration)
    return CalibrationResult(
        bank=bank,
        calibration=calibration,
        scorer_version=version,
        variants=variants,
        mutants=tuple(reviewed),
        controls=tuple(controls),
        unused_reviews=tuple(unused),
    )


def pattern_of(operator: str) -> str:
    """The acceptance-method pattern number of an operator (``extra`` for the additions)."""
    return _PATTERN[operator]
