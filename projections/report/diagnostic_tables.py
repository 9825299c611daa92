"""The diagnostic tables of a section: the benchmark's verdict, slices, claims, CaseRun checks.

Shared by the Markdown and HTML renderers, as ``tables.py`` (whose ``Table`` they use):
what a section shows beside the score, read from the report struct of ``schema.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from projections.report.schema import Section, SliceCounts
from projections.report.tables import Table, model_runs
from projections.slices import ROWS as SLICE_ROWS

__all__ = [
    "BenchmarkTables",
    "ClaimTables",
    "SliceTables",
    "benchmark_tables",
    "caserun_diagnostics_table",
    "claim_tables",
    "slice_tables",
]


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


@dataclass
class ClaimTables:
    """The answer contract (issue 19): per run, the claims of its summaries by verdict and
    the three rates, beside the score and never inside it."""

    title: str
    intro: str
    head: list[str]
    rows: list[list[Any]]


def claim_tables(section: Section) -> ClaimTables | None:
    """The runs' ``claims`` blocks as a table; None when no run of the section has one."""
    blocks = [
        (r.run, r.claims)
        for r in model_runs(section)
        if not isinstance(r.claims, msgspec.UnsetType)
    ]
    if not blocks:
        return None
    return ClaimTables(
        title="Answer contract (diagnostic: never changes a score, a rate or the ranking)",
        intro="Claims read from each executed answer's summary (numbers with their unit, "
        "named items, extremes, comparisons, directions), checked against the answer's own "
        "result: supported, contradicted or unverifiable. faithfulness = supported / "
        "checkable (supported + contradicted); contradicted rate = contradicted / claims "
        "read; correct-but-contradicted = result-correct attempts whose summary contradicts "
        "their result. See docs/claims.md.",
        head=[
            "run",
            "summaries checked",
            "claims",
            "supported",
            "contradicted",
            "unverifiable",
            "faithfulness",
            "contradicted rate",
            "correct-but-contradicted",
        ],
        rows=[
            [
                run,
                b.attempts_checked,
                b.claims,
                b.counts.supported,
                b.counts.contradicted,
                b.counts.unverifiable,
                b.faithfulness_rate,
                b.contradicted_rate,
                f"{b.correct_contradicted}/{b.correct_checked} ({b.correct_contradicted_share})"
                if b.correct_contradicted_share is not None
                else f"{b.correct_contradicted}/{b.correct_checked}",
            ]
            for run, b in blocks
        ],
    )


def caserun_diagnostics_table(section: Section) -> Table | None:
    """The drill-down of issue 19: per attempt, its understanding slice and each claim of
    its summary with its verdicts; None when no CaseRun of the section has either."""
    rows: list[list[Any]] = []
    for c in section.caseruns:
        sl = None if isinstance(c.slice, msgspec.UnsetType) else c.slice
        found = [] if isinstance(c.claims, msgspec.UnsetType) else c.claims
        if sl is None and not found:
            continue
        sliced = None if sl is None else f"{sl.component}: {sl.detail}"
        correct = c.score.result_correct if c.score else None
        if not found:
            rows.append([c.run, c.case, c.attempt, correct, sliced, None, None, None, None])
        for i, x in enumerate(found):
            rows.append(
                [
                    c.run,
                    c.case,
                    c.attempt,
                    correct,
                    sliced if i == 0 else None,
                    f"{x.kind}: {x.reading}",
                    x.verdict,
                    x.gold_verdict,
                    x.detail,
                ]
            )
    if not rows:
        return None
    head = ["run", "case", "attempt", "result-correct", "slice", "claim", "verdict"]
    return Table([*head, "against gold", "why"], rows)
