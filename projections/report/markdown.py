"""The Markdown view of a report: made only from the report struct (schema.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from projections.report.schema import Report, Section
from projections.report.tables import (
    FAILURES_HEAD,
    FAIRNESS_HEAD,
    INTRO,
    VARIANT_NOTE,
    Table,
    benchmark_tables,
    calibration_tables,
    caserun_diagnostics_table,
    caseruns_table,
    cases_table,
    claim_tables,
    diagnostics_table,
    dimensions_table,
    efficiency_table,
    failure_rows,
    fairness_rows,
    runs_table,
    slice_tables,
    withdrawn_lines,
)

__all__ = ["render_markdown"]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value).replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(text.split())


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return [*out, ""]


def _t(table: Table) -> list[str]:
    return _table(table.head, table.rows)


def _fairness(section: Section) -> list[str]:
    f = section.fairness
    if f is None:
        return ["Not ranked: these runs check the harness or calibrate it; they are no models.", ""]
    lines = [f"Fairness class: **{f.class_}**."]
    if f.differing_controls:
        lines.append("Controls that differ: " + ", ".join(f.differing_controls) + ".")
    if f.missing_invocation_evidence:
        lines.append(
            "Invocation evidence missing for: " + ", ".join(f.missing_invocation_evidence) + "."
        )
    if f.disclosed_differences:
        lines.append("Disclosed variables that differ: " + ", ".join(f.disclosed_differences))
    lines.append("")
    return lines + _table(FAIRNESS_HEAD, fairness_rows(f))


def _benchmark(section: Section) -> list[str]:
    """The benchmark's own EX beside caseledger's verdict (imported banks only)."""
    t = benchmark_tables(section)
    if t is None:
        return []
    lines = [f"### {t.title}", "", t.intro, "", *_table(t.head, t.rows)]
    if t.detail:
        lines += ["#### Where they differ", "", *_table(t.detail_head, t.detail)]
    return lines


def _slices(section: Section) -> list[str]:
    """Understanding slices (runs with slice events only)."""
    t = slice_tables(section)
    if t is None:
        return []
    lines = [f"### {t.title}", "", t.intro, "", *_table(t.head, t.rows)]
    lines += ["#### By dimension", "", *_table(t.dimension_head, t.dimension_rows)]
    if t.detail:
        lines += ["#### Not in the shares", "", *_table(t.detail_head, t.detail)]
    return lines


def _claims(section: Section) -> list[str]:
    """The answer contract (runs with claim events only)."""
    t = claim_tables(section)
    if t is None:
        return []
    return [f"### {t.title}", "", t.intro, "", *_table(t.head, t.rows)]


def _drilldown(section: Section) -> list[str]:
    """Slices and claims per attempt (only when some attempt has them)."""
    t = caserun_diagnostics_table(section)
    if t is None:
        return []
    return ["### Per attempt: understanding slice and claims (diagnostic)", "", *_t(t)]


def _calibration(section: Section) -> list[str]:
    t = calibration_tables(section)
    lines = [INTRO, ""]
    lines += t.failed_controls
    lines += _table(t.head, t.rows)
    for title, head, body in t.blocks:
        lines += [f"#### {title}", ""]
        lines += _table(head, body) if body else ["None.", ""]
    return lines


def render_markdown(report: Report) -> str:
    """The Markdown text of a report."""
    cp = report.checkpoint
    scorer = report.scorer.requested or "as recorded by each run"
    lines = [
        "# caseledger report",
        "",
        f"- Contract: `{report.contract}`",
        f"- Built from the first {cp.tree_size} events, root `{cp.root_hash}`"
        " (check with `caseledger verify` and `caseledger prove`)",
        f"- View: {report.view}. {report.notice}",
        f"- Scorer: {scorer}",
        "",
    ]
    notes = withdrawn_lines(report.withdrawn, len(report.sections))
    if notes:
        lines += [*notes, ""]
    elif not report.sections:
        lines += ["No runs in this ledger at this tree size.", ""]
    for section in report.sections:
        bank = section.bank
        lines += [
            f"## {section.title}",
            "",
            f"Bank `{bank.id}` version `{bank.version}`, hash `{bank.hash}` "
            f"(published at seq {bank.published_seq}). Scorer versions: "
            + ", ".join(section.scorer_versions)
            + ".",
            "",
        ]
        if section.kind == "calibration":
            lines += ["### Calibration runs", "", *_calibration(section)]
            continue
        lines += ["### Runs", "", *_t(runs_table(section))]
        lines += _benchmark(section)
        lines += _slices(section)
        lines += _claims(section)
        lines += ["### Variant diagnostics (never change a score)", ""]
        lines += [VARIANT_NOTE, "", *_t(diagnostics_table(section))]
        lines += ["### Failure classification (counts over planned attempts)", ""]
        lines += _table(FAILURES_HEAD, failure_rows(section))
        lines += ["### Efficiency (efficiency-v2)", "", *_t(efficiency_table(section))]
        lines += ["### Invocation controls and fairness", "", *_fairness(section)]
        lines += [
            "### Dimension and difficulty scores (auxiliary)",
            "",
            *_t(dimensions_table(section)),
        ]
        lines += ["### Cases", "", *_t(cases_table(section))]
        lines += ["### CaseRuns", "", *_t(caseruns_table(section))]
        lines += _drilldown(section)
    lines += ["## How to read this report", ""]
    lines += [f"- {item}" for item in report.how_to_read]
    return "\n".join(lines) + "\n"
