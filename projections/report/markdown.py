"""The Markdown view of a report: made only from the report struct (schema.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from projections.aggregates import DIMENSIONS
from projections.report.schema import (
    CaseRun,
    Report,
    RunEntry,
    Section,
)
from projections.report.tables import (
    DIAGNOSTICS_HEAD,
    FAILURES_HEAD,
    FAIRNESS_HEAD,
    INTRO,
    benchmark_tables,
    calibration_tables,
    cost_per_correct,
    diagnostics_rows,
    failure_rows,
    fairness_rows,
    flag_summary,
    model_runs,
    slice_tables,
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


def _model(run: RunEntry) -> str:
    m = run.model
    named = m.resolved or m.recorded
    shown = m.requested or "-"
    if named:
        shown += " (" + ", ".join(named) + ")"
    return f"{shown} [{m.identity_source}]"


def _runs(section: Section) -> list[str]:
    head = [
        "rank",
        "run",
        "profile",
        "model [identity from]",
        "status",
        "planned",
        "result-correct",
        "correct/wrong/unknown",
        "format-ok",
        "SQL exec ok",
        "coverage",
        "score (auxiliary)",
        "variant flags (diagnostic)",
        "tokens/correct",
        "cost/correct",
        "gen P95 ms",
    ]
    rows = []
    for r in model_runs(section):
        q, e = r.quality, r.efficiency
        cost = cost_per_correct(e)
        rows.append(
            [
                r.rank,
                r.run,
                r.profile,
                _model(r),
                r.status,
                q.total,
                q.result_correct_rate,
                f"{q.correct}/{q.wrong}/{q.unknown}",
                q.format_ok_rate,
                q.sql_exec_success_rate,
                q.coverage,
                r.scores.model_score,
                flag_summary(r.variant_diagnostics),
                e.tokens.per_correct,
                cost,
                e.generation_ms.p95,
            ]
        )
    return _table(head, rows)


def _failures(section: Section) -> list[str]:
    return _table(FAILURES_HEAD, failure_rows(section))


def _efficiency(section: Section) -> list[str]:
    head = [
        "run",
        "correct (C)",
        "tokens total",
        "tokens coverage",
        "cost total",
        "cost kind",
        "cost coverage",
        "gen ms/correct",
        "gen coverage",
        "SQL exec P95 ms",
    ]
    rows = []
    for r in model_runs(section):
        e = r.efficiency
        rows.append(
            [
                r.run,
                e.correct,
                e.tokens.total,
                e.tokens.coverage,
                e.cost.total,
                e.cost.kind,
                e.cost.coverage,
                e.generation_ms.per_correct,
                e.generation_ms.coverage,
                e.sql_exec_ms.p95,
            ]
        )
    return _table(head, rows)


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


def _dimensions(section: Section) -> list[str]:
    runs = model_runs(section)
    # ``unassigned`` is a key only for a bank that has such cases (imported questions).
    dims = [*DIMENSIONS, *(["unassigned"] if any("unassigned" in r.scores.dimensions
                                                  for r in runs) else [])]  # fmt: skip
    levels = ["easy", "medium", "hard"]
    if any("unassigned" in r.scores.difficulties for r in runs):
        levels.append("unassigned")
    head = ["run", *dims, *(d if d != "unassigned" else "no difficulty" for d in levels)]
    rows = [
        [
            r.run,
            *(r.scores.dimensions.get(d) for d in dims),
            *(r.scores.difficulties.get(d) for d in levels),
        ]
        for r in runs
    ]
    return _table(head, rows)


def _cases(section: Section) -> list[str]:
    runs = model_runs(section)
    head = ["case", "dimension", "difficulty", "weight"]
    head += [f"{r.run} mean / sd / nonzero" for r in runs]
    per_run = [{c.case: c for c in r.cases} for r in runs]
    rows = []
    for case in section.cases:
        cells = []
        for table in per_run:
            c = table.get(case.case)
            cells.append(f"{c.mean} / {c.stddev} / {c.nonzero_rate}" if c else None)
        rows.append([case.case, case.dimension, case.difficulty, case.weight, *cells])
    return _table(head, rows)


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


def _variant_diagnostics(section: Section) -> list[str]:
    lines = [
        "Diagnostics only: a flag never changes a score, a rate or the ranking. "
        "`variant_mismatch`: on a variant database the answer is not result-correct against "
        "that variant's gold; `scope_leak`: a variant that only changes rows outside the "
        "question's scope moved the answer. Checked = attempts run on the variants.",
        "",
    ]
    head = list(DIAGNOSTICS_HEAD)
    rows = diagnostics_rows(section)
    runs = model_runs(section)
    others = sorted({f for r in runs for f in r.variant_diagnostics.flags})
    others = [f for f in others if f not in ("variant_mismatch", "scope_leak")]
    if others:
        head += others
        for row, r in zip(rows, runs, strict=True):
            row += [r.variant_diagnostics.flags.get(f, 0) for f in others]
    return lines + _table(head, rows)


def _flags(c: CaseRun) -> str | None:
    v = c.variants
    if v is None:
        return None
    return ", ".join(v.flags) or "none"


def _calibration(section: Section) -> list[str]:
    t = calibration_tables(section)
    lines = [INTRO, ""]
    lines += t.failed_controls
    lines += _table(t.head, t.rows)
    for title, head, body in t.blocks:
        lines += [f"#### {title}", ""]
        lines += _table(head, body) if body else ["None.", ""]
    return lines


def _caseruns(section: Section) -> list[str]:
    head = ["run", "case", "attempt", "outcome", "total", "result-correct", "failure"]
    head += ["missing rows", "extra rows", "guard", "variant flags (diagnostic)"]
    rows = []
    for c in section.caseruns:
        s, d, g = c.score, c.diff, c.guard
        failure = s.failure_kind if s else (c.cancel.reason if c.cancel else None)
        rows.append(
            [
                c.run,
                c.case,
                c.attempt,
                c.outcome,
                s.total if s else None,
                s.result_correct if s else None,
                failure,
                d.missing_rows if d else None,
                d.extra_rows if d else None,
                None if g is None else ("passed" if g.passed else "rejected"),
                _flags(c),
            ]
        )
    return _table(head, rows)


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
    if not report.sections:
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
        lines += ["### Runs", "", *_runs(section)]
        lines += _benchmark(section)
        lines += _slices(section)
        lines += ["### Variant diagnostics (never change a score)", ""]
        lines += _variant_diagnostics(section)
        lines += ["### Failure classification (counts over planned attempts)", ""]
        lines += _failures(section)
        lines += ["### Efficiency (efficiency-v2)", "", *_efficiency(section)]
        lines += ["### Invocation controls and fairness", "", *_fairness(section)]
        lines += ["### Dimension and difficulty scores (auxiliary)", "", *_dimensions(section)]
        lines += ["### Cases", "", *_cases(section)]
        lines += ["### CaseRuns", "", *_caseruns(section)]
    lines += ["## How to read this report", ""]
    lines += [f"- {item}" for item in report.how_to_read]
    return "\n".join(lines) + "\n"
