"""The Markdown view of a report: made only from the report struct (schema.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from projections.report.diagnostic_tables import (
    benchmark_tables,
    caserun_diagnostics_table,
    claim_tables,
    slice_tables,
)
from projections.report.legend import how_to_read
from projections.report.schema import CONTRACT_V3, Report, Section, SectionStatistics
from projections.report.tables import (
    CASERUNS_HEAD,
    FAILURES_HEAD,
    FAIRNESS_HEAD,
    INTRO,
    VARIANT_NOTE,
    Table,
    calibration_tables,
    caserun_row,
    cases_table,
    diagnostics_table,
    dimensions_table,
    efficiency_table,
    failure_rows,
    fairness_rows,
    fairness_sentences,
    runs_table,
    statistics_tables,
    withdrawn_lines,
)

__all__ = ["render_markdown", "render_markdown_chunks"]

#: Lines per piece of :func:`render_markdown_chunks`.
_LINES = 512


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value).replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(text.split())


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    return list(_table_lines(head, rows))


def _table_lines(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    yield "| " + " | ".join(head) + " |"
    yield "|" + "---|" * len(head)
    for row in rows:
        yield "| " + " | ".join(_cell(v) for v in row) + " |"
    yield ""


def _t(table: Table) -> list[str]:
    return _table(table.head, table.rows)


def _fairness(section: Section, v3: bool = False) -> list[str]:
    f = section.fairness
    if f is None:
        return ["Not ranked: these runs check the harness or calibrate it; they are no models.", ""]
    if v3:  # issue 35: sentences true of the recorded controls (tables.fairness_sentences)
        return [" ".join(fairness_sentences(f)), "", *_table(FAIRNESS_HEAD, fairness_rows(f))]
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


def _statistics(stats: SectionStatistics | None) -> list[str]:
    """Error bars, the pairwise table and rank groups (``caseledger-report/3`` only)."""
    if stats is None:
        return []
    runs, pairs = statistics_tables(stats)
    lines = [
        "### Error bars (95% intervals; the case is the unit, docs/statistics.md)",
        "",
        *_t(runs),
    ]
    if pairs is not None:
        lines += ["### Paired comparisons (result-correct rate, paired by case)", "", *_t(pairs)]
    return lines


def _headline(report: Report, stats: Sequence[SectionStatistics | None] | None) -> list[str]:
    """The headline of every models section, at the top (``caseledger-report/3`` only)."""
    if stats is None:
        return []
    said = [
        f"- **{section.title}**: {s.headline}"
        for section, s in zip(report.sections, stats, strict=True)
        if s is not None and s.headline is not None
    ]
    return ["## Headline", "", *said, ""] if said else []


def render_markdown(
    report: Report, statistics: Sequence[SectionStatistics | None] | None = None
) -> str:
    """The Markdown text of a report; ``statistics`` (one per section, ``caseledger-report/3``)
    adds the headline, error bars and pairwise tables (None: the bytes of ``/1`` and ``/2``)."""
    return "".join(render_markdown_chunks(report, statistics))


def render_markdown_chunks(
    report: Report, statistics: Sequence[SectionStatistics | None] | None = None
) -> Iterator[str]:
    """The Markdown text of a report in pieces of at most ``_LINES`` lines, which joined
    are :func:`render_markdown`'s text. A section's CaseRuns are read once, as their rows
    are written, so a report of many CaseRuns is never held whole (issue 21)."""
    lines = _lines(report, statistics)
    while piece := list(islice(lines, _LINES)):
        yield "".join(line + "\n" for line in piece)


def _lines(report: Report, statistics: Sequence[SectionStatistics | None] | None) -> Iterator[str]:
    cp = report.checkpoint
    scorer = report.scorer.requested or "as recorded by each run"
    v3 = statistics is not None  # issue 35 changed the /3 view only: /1 and /2 keep their bytes
    yield from [
        "# caseledger report",
        "",
        f"- Contract: `{CONTRACT_V3 if v3 else report.contract}`",
        f"- Built from the first {cp.tree_size} events, root `{cp.root_hash}`"
        " (check with `caseledger verify` and `caseledger prove`)",
        f"- View: {report.view}. {report.notice}",
        f"- Scorer: {scorer}",
        "",
    ]
    yield from _headline(report, statistics)
    notes = withdrawn_lines(report.withdrawn, len(report.sections))
    if notes:
        yield from [*notes, ""]
    elif not report.sections:
        yield from ["No runs in this ledger at this tree size.", ""]
    for i, section in enumerate(report.sections):
        bank = section.bank
        yield from [
            f"## {section.title}",
            "",
            f"Bank `{bank.id}` version `{bank.version}`, hash `{bank.hash}` "
            f"(published at seq {bank.published_seq}). Scorer versions: "
            + ", ".join(section.scorer_versions)
            + ".",
            "",
        ]
        if section.kind == "calibration":
            yield from ["### Calibration runs", "", *_calibration(section)]
            continue
        yield from ["### Runs", "", *_t(runs_table(section))]
        yield from _statistics(None if statistics is None else statistics[i])
        yield from _benchmark(section)
        yield from _slices(section)
        yield from _claims(section)
        yield from ["### Variant diagnostics (never change a score)", ""]
        yield from [VARIANT_NOTE, "", *_t(diagnostics_table(section))]
        yield from ["### Failure classification (counts over planned attempts)", ""]
        yield from _table(FAILURES_HEAD, failure_rows(section))
        yield from ["### Efficiency (efficiency-v2)", "", *_t(efficiency_table(section))]
        yield from ["### Invocation controls and fairness", "", *_fairness(section, v3)]
        yield from [
            "### Dimension and difficulty scores (auxiliary)",
            "",
            *_t(dimensions_table(section)),
        ]
        yield from ["### Cases", "", *_t(cases_table(section))]
        yield from ["### CaseRuns", ""]
        yield from _table_lines(
            CASERUNS_HEAD, (caserun_row(c, ran_only=v3) for c in section.caseruns)
        )
        yield from _drilldown(section)
    yield from ["## How to read this report", ""]
    # /3 (issue 35): the attempts per case as they were, as the HTML says them.
    yield from [f"- {item}" for item in (how_to_read(report) if v3 else report.how_to_read)]
