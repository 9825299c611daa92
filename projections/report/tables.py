"""Tables shared by the Markdown and HTML renderers (each renderer only formats them).

Everything here reads the report struct of ``schema.py`` by attribute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from projections.aggregates import DIMENSIONS
from projections.calibration import STATUSES
from projections.fairness import CONSTRAINTS, CONTROLS
from projections.quality import FAILURE_CATEGORIES
from projections.report.schema import (
    CalibrationRunEntry,
    CaseRun,
    Efficiency,
    Fairness,
    Quality,
    RunEntry,
    Section,
    SectionStatistics,
    VariantDiagnostics,
    WithdrawnRun,
)

__all__ = [
    "CASERUNS_HEAD",
    "DIAGNOSTICS_HEAD",
    "FAILURES_HEAD",
    "FAIRNESS_HEAD",
    "INTRO",
    "VARIANT_NOTE",
    "CalibrationTables",
    "Table",
    "calibration_runs",
    "calibration_tables",
    "cancelled_text",
    "caserun_failure",
    "caserun_flags",
    "caserun_row",
    "caseruns_table",
    "cases_table",
    "cost_per_correct",
    "diagnostics_rows",
    "diagnostics_table",
    "dimensions_present",
    "dimensions_table",
    "efficiency_table",
    "failure_rows",
    "fairness_rows",
    "fairness_sentences",
    "flag_summary",
    "model_runs",
    "model_text",
    "run_label",
    "runs_table",
    "sql_ran",
    "statistics_tables",
    "status_text",
    "tokens_per_correct",
    "withdrawn_lines",
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
                status_text(r),
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


#: A control's value that says nothing: the adapter could not see it (``unknown``), or
#: the run has no invocation evidence (null). Never a difference (issue 35).
UNKNOWN = ("unknown", None)


def _known(value: Any) -> list[Any]:
    """The known values of a recorded control (a list when a run used several)."""
    values = value if isinstance(value, list) else [value]
    return [v for v in values if v not in UNKNOWN]


def _shown(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else str(value)


def fairness_sentences(fairness: Fairness) -> list[str]:
    """What the report says of a section's fairness, each sentence true of the recorded
    controls (issue 35). One model run: its class only (there is nothing it could differ
    from). Two or more: the controls whose known values differ between runs; those with
    one known value that a controlled harness does not allow (``retries 2 in every
    run``); those some run did not record (``unknown`` is not a difference, but it keeps
    the class from ``controlled_harness``); then missing evidence and disclosed
    variables that differ."""
    f = fairness
    if f.class_ == "single_model":
        lines = ["Fairness class: single_model (one model run: nothing to compare it with)."]
    else:
        lines = [f"Fairness class: {f.class_}."]
        differ, disallowed, unknown = [], [], []
        for control in CONTROLS:
            recorded = [getattr(f.controls[run], control) for run in f.runs]
            known = sorted({repr(v): v for r in recorded for v in _known(r)}.items())
            if len(known) > 1:
                differ.append(control)
            elif known and control in CONSTRAINTS and known[0][1] != CONSTRAINTS[control]:
                disallowed.append(
                    f"{control} {_shown(known[0][1])} (a controlled harness has "
                    f"{_shown(CONSTRAINTS[control])})"
                )
            missing = [run for run, r in zip(f.runs, recorded, strict=True) if not _known(r)]
            if missing and len(known) <= 1:
                who = "every run" if len(missing) == len(f.runs) else ", ".join(missing)
                unknown.append(f"{control} for {who}")
        if differ:
            lines.append("Controls that differ between runs: " + ", ".join(differ) + ".")
        if disallowed:
            said = "; ".join(disallowed)
            lines.append(f"The same in every run, outside a controlled harness: {said}.")
        if unknown:
            lines.append("Not recorded (unknown, so not a difference): " + "; ".join(unknown) + ".")
    if f.missing_invocation_evidence:
        lines.append(
            "Invocation evidence missing for: " + ", ".join(f.missing_invocation_evidence) + "."
        )
    if f.disclosed_differences:
        lines.append("Disclosed variables that differ: " + ", ".join(f.disclosed_differences) + ".")
    return lines


def status_text(run: RunEntry | CalibrationRunEntry) -> str:
    """The run's status, and for a withdrawn run shown (``--include-withdrawn``) its reason."""
    w = run.withdrawn
    return (
        run.status if isinstance(w, msgspec.UnsetType) else f"{run.status}, withdrawn: {w.reason}"
    )


def withdrawn_lines(withdrawn: list[WithdrawnRun] | msgspec.UnsetType, sections: int) -> list[str]:
    """The lines that say which withdrawn runs the report leaves out or shows (none when
    no run of the selection is withdrawn), and that nothing is left when all are."""
    if isinstance(withdrawn, msgspec.UnsetType) or not withdrawn:
        return []
    n = len(withdrawn)
    names = "; ".join(f"{w.run} (seq {w.seq}: {w.reason})" for w in withdrawn)
    runs = f"{n} withdrawn run{'s' if n != 1 else ''}"
    if withdrawn[0].shown:
        return [f"{runs} shown, marked withdrawn: {names}."]
    lines = [f"{runs} left out: {names}. `--include-withdrawn` shows {'it' if n == 1 else 'them'}."]
    if sections == 0:
        lines.append("Every run of this report is withdrawn: there is nothing to rank or compare.")
    return lines


def _with_coverage(value: str | None, covered: int | msgspec.UnsetType, planned: int) -> str | None:
    """``3853.32 (52 of 54 attempts)`` when the figure runs over only some attempts."""
    if value is None or isinstance(covered, msgspec.UnsetType):
        return value
    return f"{value} ({covered} of {planned} attempts)"


def tokens_per_correct(efficiency: Efficiency, planned: int) -> str | None:
    """Tokens per correct attempt as shown, with the attempts it runs over when not all."""
    return _with_coverage(efficiency.tokens.per_correct, efficiency.tokens.covered, planned)


def cost_per_correct(efficiency: Efficiency, planned: int | None = None) -> str | None:
    """Cost per correct attempt as shown: a figure that is not the provider's bill is
    labelled as an estimate; with ``planned``, the attempts it runs over when not all."""
    cost = efficiency.cost.per_correct
    if cost is not None and efficiency.cost.kind != "billed":
        cost = f"{cost} (estimate)"
    return cost if planned is None else _with_coverage(cost, efficiency.cost.covered, planned)


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
class Table:
    """One table as plain values (unescaped): its column heads and rows.

    ``numeric``: the first column index from which the cells are numbers (the HTML aligns
    them right); 0 when none are.
    """

    head: list[str]
    rows: list[list[Any]]
    numeric: int = 0


def model_text(run: RunEntry) -> str:
    """``requested (resolved or recorded ids) [identity source]``: who answered a run."""
    m = run.model
    named = m.resolved or m.recorded
    shown = m.requested or "-"
    if named:
        shown += " (" + ", ".join(named) + ")"
    return f"{shown} [{m.identity_source}]"


def run_label(run: RunEntry) -> str:
    """The run id, and for a run imported from another machine the key that signed it
    there: ``run (signed by name key_id of ORIGIN, trusted since seq N)``, and ``, trust
    revoked at seq M`` after a revocation (docs/exchange.md)."""
    signer = run.signer
    if isinstance(signer, msgspec.UnsetType):
        return run.run
    said = f"signed by {signer.name} {signer.key_id}"
    if not isinstance(signer.origin, msgspec.UnsetType):
        said += f" of {signer.origin}"
    if not isinstance(signer.trusted_since, msgspec.UnsetType):
        said += f", trusted since seq {signer.trusted_since}"
    if not isinstance(signer.revoked_at, msgspec.UnsetType):
        said += f", trust revoked at seq {signer.revoked_at}"
    return f"{run.run} ({said})"


def runs_table(section: Section) -> Table:
    """The runs of a section: rank, identity, quality rates, the auxiliary score, variant
    flags and the efficiency figures a reader compares first."""
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
        rows.append(
            [
                r.rank,
                run_label(r),
                r.profile,
                model_text(r),
                status_text(r),
                q.total,
                q.result_correct_rate,
                f"{q.correct}/{q.wrong}/{q.unknown}",
                _format_ok(r),
                q.sql_exec_success_rate,
                q.coverage,
                r.scores.model_score,
                flag_summary(r.variant_diagnostics),
                tokens_per_correct(e, q.total),
                cost_per_correct(e, q.total),
                e.generation_ms.p95,
            ]
        )
    return Table(head, rows)


def _format_ok(r: RunEntry) -> Any:
    """The format-ok rate, or why it does not apply: a run of a benchmark's own
    predictions (its rate is null, projections/quality.py ``imported_only``)."""
    q = r.quality
    if q.format_ok_rate is None and q.total and not isinstance(r.benchmark, msgspec.UnsetType):
        return "n/a (benchmark predictions: no answer contract)"
    return q.format_ok_rate


def efficiency_table(section: Section) -> Table:
    """Efficiency-v2 totals per run, each with its coverage, and the cost's kind."""
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
    return Table(head, rows, numeric=1)


def dimensions_present(section: Section) -> list[str]:
    """The dimensions a section's runs are scored on: the six, then ``unassigned`` when a
    bank has such cases (imported questions)."""
    runs = model_runs(section)
    extra = ["unassigned"] if any("unassigned" in r.scores.dimensions for r in runs) else []
    return [*DIMENSIONS, *extra]


def dimensions_table(section: Section) -> Table:
    """Weighted dimension and difficulty scores per run (auxiliary; ``-``: no such cases)."""
    runs = model_runs(section)
    dims = dimensions_present(section)
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
    return Table(head, rows, numeric=1)


def cases_table(section: Section, questions: bool = False) -> Table:
    """One row per case of the bank: its dimension, difficulty, weight and each run's
    ``mean / sd / nonzero``. ``questions``: also the question (and its English gloss when
    the bank has one) and each run's attempt totals."""
    runs = model_runs(section)
    per_run = [{c.case: c for c in r.cases} for r in runs]
    english = questions and any(c.question_en for c in section.cases)
    head = ["case", "dimension", "difficulty", "weight"]
    if questions:
        head += ["question", *(["question (English)"] if english else [])]
        head += [f"{r.run}: mean / sd / nonzero / totals" for r in runs]
    else:
        head += [f"{r.run} mean / sd / nonzero" for r in runs]
    rows = []
    for case in section.cases:
        row: list[Any] = [case.case, case.dimension, case.difficulty, case.weight]
        if questions:
            row += [case.question, *([case.question_en] if english else [])]
        for table in per_run:
            c = table.get(case.case)
            if c is None:
                row.append(None)
            elif questions:
                row.append(f"{c.mean} / {c.stddev} / {c.nonzero_rate} / {' '.join(c.totals)}")
            else:
                row.append(f"{c.mean} / {c.stddev} / {c.nonzero_rate}")
        rows.append(row)
    return Table(head, rows)


VARIANT_NOTE = (
    "Diagnostics only: a flag never changes a score, a rate or the ranking. "
    "`variant_mismatch`: on a variant database the answer is not result-correct against "
    "that variant's gold; `scope_leak`: a variant that only changes rows outside the "
    "question's scope moved the answer. Checked = attempts run on the variants."
)


def diagnostics_table(section: Section) -> Table:
    """Variant diagnostics per run (:data:`DIAGNOSTICS_HEAD`), then any other flag seen."""
    head = list(DIAGNOSTICS_HEAD)
    rows = diagnostics_rows(section)
    runs = model_runs(section)
    others = sorted({f for r in runs for f in r.variant_diagnostics.flags})
    others = [f for f in others if f not in ("variant_mismatch", "scope_leak")]
    if others:
        head += others
        for row, r in zip(rows, runs, strict=True):
            row += [r.variant_diagnostics.flags.get(f, 0) for f in others]
    return Table(head, rows, numeric=3)


def caserun_flags(c: CaseRun) -> str | None:
    """A CaseRun's variant flags: ``None`` when not checked, ``none`` when clean."""
    v = c.variants
    if v is None:
        return None
    return ", ".join(v.flags) or "none"


def caserun_failure(c: CaseRun) -> str | None:
    """The scored failure kind, else the cancellation reason."""
    s = c.score
    return s.failure_kind if s else (c.cancel.reason if c.cancel else None)


#: The head of :func:`caseruns_table`.
CASERUNS_HEAD = [
    *("run", "case", "attempt", "outcome", "total", "result-correct", "failure"),
    *("missing rows", "extra rows", "guard", "variant flags (diagnostic)"),
]


def caserun_row(c: CaseRun, ran_only: bool = False) -> list[Any]:
    """One CaseRun's row of :func:`caseruns_table`. ``ran_only`` (the ``/3`` views, issue
    35): the diff's missing and extra rows only when the SQL ran (a provider failure or a
    rejected query has no rows to miss)."""
    s, d, g = c.score, c.diff, c.guard
    if ran_only and not sql_ran(c):
        d = None
    return [
        c.run,
        c.case,
        c.attempt,
        c.outcome,
        s.total if s else None,
        s.result_correct if s else None,
        caserun_failure(c),
        d.missing_rows if d else None,
        d.extra_rows if d else None,
        None if g is None else ("passed" if g.passed else "rejected"),
        caserun_flags(c),
    ]


def sql_ran(c: CaseRun) -> bool:
    """Whether the CaseRun's SQL ran and returned rows to compare with gold."""
    return c.execution is not None and c.execution.ok


def caseruns_table(section: Section) -> Table:
    """One row per CaseRun: outcome, total, result-correct, failure, the diff's missing and
    extra rows, the guard's verdict and the variant flags."""
    return Table(list(CASERUNS_HEAD), [caserun_row(c) for c in section.caseruns])


# ----------------------------------------------------------------- statistics (report/3)

#: The heads of :func:`statistics_tables` (docs/statistics.md defines every column).
STATS_RUNS_HEAD = [
    "rank group", "run", "cases", "result-correct rate", "rate SE", "rate 95% CI",
    "score", "score SE", "score 95% CI",
]  # fmt: skip
STATS_PAIRS_HEAD = [
    "A", "B", "cases", "difference A-B", "SE", "95% CI", "p", "test", "significant",
    "A better", "B better", "MDD",
]  # fmt: skip


def _ci(interval: Any) -> str | None:
    return None if interval is None else f"{interval.low} to {interval.high}"


def statistics_tables(stats: SectionStatistics) -> tuple[Table, Table | None]:
    """The error bars of every run, and the pairwise table (None outside models sections)."""
    runs = Table(
        list(STATS_RUNS_HEAD),
        [
            [
                r.rank_group,
                r.run,
                r.cases,
                r.result_correct_rate.value,
                r.result_correct_rate.se,
                _ci(r.result_correct_rate.interval),
                r.model_score.value,
                r.model_score.se,
                _ci(r.model_score.interval),
            ]
            for r in stats.runs
        ],
        numeric=2,
    )
    if stats.headline is None:
        return runs, None
    pairs = Table(
        list(STATS_PAIRS_HEAD),
        [
            [
                p.a,
                p.b,
                p.cases,
                p.difference,
                p.se,
                _ci(p.interval),
                p.p_value,
                p.test,
                p.significant,
                p.a_better,
                p.b_better,
                p.mdd,
            ]
            for p in stats.pairs
        ],
        numeric=2,
    )
    return runs, pairs
