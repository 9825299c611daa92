"""Tables shared by the Markdown and HTML renderers (each renderer only formats them).

Everything here reads the report struct of ``schema.py`` by attribute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from projections.calibration import STATUSES
from projections.quality import FAILURE_CATEGORIES
from projections.report.schema import (
    CalibrationRunEntry,
    Efficiency,
    Fairness,
    Quality,
    RunEntry,
    Section,
    SliceCounts,
    VariantDiagnostics,
)
from projections.slices import ROWS as SLICE_ROWS

__all__ = [
    "DIAGNOSTICS_HEAD",
    "FAILURES_HEAD",
    "FAIRNESS_HEAD",
    "INTRO",
    "BenchmarkTables",
    "CalibrationTables",
    "SliceTables",
    "benchmark_tables",
    "calibration_runs",
    "calibration_tables",
    "cancelled_text",
    "cost_per_correct",
    "diagnostics_rows",
    "failure_rows",
    "fairness_rows",
    "flag_summary",
    "model_runs",
    "slice_tables",
]

INTRO = (
    "Oracle checks, never ranked: planted errors (mutants) the oracle must reject and "
    "correct alternative queries (positive controls) it must accept. "
    "kill rate = killed / (killed + survived)."
)


@dataclass
class CalibrationTables:
    """Every table of a calibration section as (title, head, rows), plus failed controls."""

    head: list[str] = field(
        default_factory=lambda: [
            "run",
            "status",
            "kill rate",
            *STATUSES,
            "applicable",
            "positive controls",
            "passed",
        ]
    )
    rows: list[list[Any]] = field(default_factory=list)
    failed_controls: list[str] = field(default_factory=list)
    blocks: list[tuple[str, list[str], list[list[Any]]]] = field(default_factory=list)


def model_runs(section: Section) -> list[RunEntry]:
    """The run entries with attempts (models and self-test) of a section, in report order."""
    return [r for r in section.runs if isinstance(r, RunEntry)]


def calibration_runs(section: Section) -> list[CalibrationRunEntry]:
    """The calibration run entries of a section, in report order."""
    return [r for r in section.runs if isinstance(r, CalibrationRunEntry)]


def calibration_tables(section: Section) -> CalibrationTables:
    """Read a calibration section of the report into table rows (plain values, unescaped)."""
    out = CalibrationTables()
    survivors: list[list[Any]] = []
    equivalents: list[list[Any]] = []
    variants: list[list[Any]] = []
    operators: list[list[Any]] = []
    for r in calibration_runs(section):
        c = r.calibration
        pc = c.positive_controls
        out.rows.append(
            [
                r.run,
                r.status,
                c.kill_rate,
                *(getattr(c.counts, s) for s in STATUSES),
                c.applicable,
                f"{pc.passed}/{pc.total}",
                c.passed,
            ]
        )
        survivors += [[r.run, m.case, m.mutant, m.operator] for m in c.survivors]
        equivalents += [[r.run, m.case, m.mutant, m.operator, m.review] for m in c.equivalents]
        variants += [[r.run, v.id, v.stale, v.tables_digest, v.gold_digest] for v in c.variants]
        operators += [
            [r.run, name, *(getattr(counts, s) for s in STATUSES)]
            for name, counts in c.operators.items()
        ]
        out.failed_controls += [
            f"FAILED positive control in {r.run}: case {f.case} "
            f"alternative_sql[{f.index}] was rejected by the oracle."
            for f in pc.failed
        ]
    out.blocks = [
        (
            "Survivors (planted errors the oracle did not notice: review each)",
            ["run", "case", "mutant", "operator"],
            survivors,
        ),
        (
            "Reviewed equivalent mutants",
            ["run", "case", "mutant", "operator", "review"],
            equivalents,
        ),
        (
            "Variant databases",
            ["run", "variant", "stale", "tables digest", "gold digest"],
            variants,
        ),
        ("Mutants per operator", ["run", "operator", *STATUSES], operators),
    ]
    return out


FAIRNESS_HEAD = [
    "run",
    "harness",
    "response",
    "single call",
    "tools",
    "retries",
    "prompt contract",
    "provider",
    "auth",
    "model",
    "parameters",
    "invocation coverage",
]


def fairness_rows(fairness: Fairness) -> list[list[Any]]:
    """One row per run: its recorded controls, then its disclosed variables."""
    rows = []
    for run in fairness.runs:
        c, d = fairness.controls[run], fairness.disclosed[run]
        params = ", ".join(f"{k}={v}" for k, v in d.parameters.items())
        rows.append(
            [
                run,
                c.harness_kind,
                c.response_mode,
                c.single_call,
                c.tools,
                c.retries,
                c.prompt_contract_digest,
                d.provider,
                d.auth_mode,
                d.model,
                params,
                fairness.invocation_coverage[run],
            ]
        )
    return rows


def cost_per_correct(efficiency: Efficiency) -> str | None:
    """Cost per correct attempt as shown: a figure that is not the provider's bill is
    labelled as an estimate."""
    cost = efficiency.cost.per_correct
    if cost is not None and efficiency.cost.kind != "billed":
        return f"{cost} (estimate)"
    return cost


def flag_summary(v: VariantDiagnostics) -> str:
    """``variant_mismatch 5, scope_leak 0 of 54 checked`` (or ``not checked``).

    >>> flag_summary(VariantDiagnostics(diagnostic_only=True, total=2, checked=2,
    ...     coverage="1.0000", flagged=1, flags={"scope_leak": 1, "variant_mismatch": 1},
    ...     calibration_sha256=[]))
    'variant_mismatch 1, scope_leak 1 of 2 checked'
    """
    if not v.checked:
        return "not checked"
    f = v.flags
    return f"variant_mismatch {f['variant_mismatch']}, scope_leak {f['scope_leak']} of " + (
        f"{v.checked} checked"
    )


def cancelled_text(quality: Quality) -> str:
    """Cancelled attempts by reason (``missing_recording 1, interrupted 2``), or ``0``."""
    return ", ".join(f"{k} {v}" for k, v in sorted(quality.cancelled.items())) or "0"


FAILURES_HEAD = ["run", *FAILURE_CATEGORIES, "cancelled", "unscored"]


def failure_rows(section: Section) -> list[list[Any]]:
    """Failure classification: per run, each failure kind, cancellations, unscored."""
    return [
        [
            r.run,
            *(r.quality.failures[k] for k in FAILURE_CATEGORIES),
            cancelled_text(r.quality),
            r.quality.unscored,
        ]
        for r in model_runs(section)
    ]


DIAGNOSTICS_HEAD = ["run", "checked", "coverage", "variant_mismatch", "scope_leak", "any flag"]


def diagnostics_rows(section: Section) -> list[list[Any]]:
    """Variant diagnostics: per run, checked/total, coverage, the two listed flags, any flag."""
    rows = []
    for r in model_runs(section):
        v = r.variant_diagnostics
        rows.append(
            [
                r.run,
                f"{v.checked}/{v.total}",
                v.coverage,
                *(v.flags.get(f, 0) for f in ("variant_mismatch", "scope_leak")),
                v.flagged,
            ]
        )
    return rows


@dataclass
class BenchmarkTables:
    """The benchmark's EX beside caseledger's verdict (a bank imported from BIRD/Spider)."""

    title: str
    intro: str
    head: list[str]
    rows: list[list[Any]]
    detail_head: list[str]
    detail: list[list[Any]]


def benchmark_tables(section: Section) -> BenchmarkTables | None:
    """The runs' ``benchmark`` blocks as tables; None when the bank is not imported."""
    blocks = [
        (r.run, r.benchmark)
        for r in model_runs(section)
        if not isinstance(r.benchmark, msgspec.UnsetType)
    ]
    if not blocks:
        return None
    first = blocks[0][1]
    name = first.name
    return BenchmarkTables(
        title=f"{name.upper()} execution accuracy beside caseledger (imported bank)",
        intro=f"The benchmark's rule: {first.rule}. caseledger's verdict counts duplicate rows, "
        "aligns columns by name and applies the case's tolerances and order; every attempt "
        "where the two differ is listed with the reason.",
        head=["run", f"{name} EX correct", "EX decided", "caseledger correct", "agree", "attempts"],
        rows=[
            [run, b.ex_correct, b.ex_judged, b.caseledger_correct, b.agree, b.attempts]
            for run, b in blocks
        ],
        detail_head=["run", "case", "attempt", f"{name} EX", "caseledger", "why"],
        detail=[
            [run, d.case, d.attempt, d.ex, d.caseledger, d.reason]
            for run, b in blocks
            for d in b.disagreements
        ],
    )


@dataclass
class SliceTables:
    """Understanding slices (issue 19): per run and per dimension, where wrong answers first
    departed from the reference SQL; the attempts left out of the shares, with why."""

    title: str
    intro: str
    head: list[str]
    rows: list[list[Any]]
    dimension_head: list[str]
    dimension_rows: list[list[Any]]
    detail_head: list[str]
    detail: list[list[Any]]


def _slice_cells(c: SliceCounts) -> list[Any]:
    cells: list[Any] = [c.wrong, c.checked]
    for row in SLICE_ROWS:
        n = c.counts.get(row, 0)
        share = c.shares.get(row)
        cells.append(f"{n} ({share})" if share is not None else n)
    return cells


def slice_tables(section: Section) -> SliceTables | None:
    """The runs' ``slices`` blocks as tables; None when no run of the section has one."""
    blocks = [
        (r.run, r.slices)
        for r in model_runs(section)
        if not isinstance(r.slices, msgspec.UnsetType)
    ]
    if not blocks:
        return None
    labels = [row.replace("_", " ") for row in SLICE_ROWS]
    return SliceTables(
        title="Understanding slices (diagnostic: never change a score, a rate or the ranking)",
        intro="For each wrong attempt (executed, not result-correct), the first component "
        "where its SQL departs from the reference SQL, in the order tables, joins, filters, "
        "grouping, aggregates, projection, order; none = every component matches. Shares "
        "(in brackets) are over checked attempts: unknown (the SQL could not be attributed) "
        "and not recorded are counted apart and listed below. See docs/slices.md.",
        head=["run", "wrong", "checked", *labels],
        rows=[[run, *_slice_cells(b)] for run, b in blocks],
        dimension_head=["run", "dimension", "wrong", "checked", *labels],
        dimension_rows=[
            [run, dim, *_slice_cells(c)] for run, b in blocks for dim, c in b.dimensions.items()
        ],
        detail_head=["run", "case", "attempt", "slice", "why"],
        detail=[
            [run, u.case, u.attempt, u.component, u.detail]
            for run, b in blocks
            for u in b.unattributed
        ],
    )
