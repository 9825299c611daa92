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
from projections.metrics import by_name
from projections.quality import FAILURE_CATEGORIES
from projections.report.build import HOW_TO_READ
from projections.report.schema import (
    CalibrationRunEntry,
    CaseRun,
    Efficiency,
    Fairness,
    Quality,
    Report,
    RunEntry,
    Section,
    SectionStatistics,
    SliceCounts,
    VariantDiagnostics,
    WithdrawnRun,
)
from projections.slices import ROWS as SLICE_ROWS

__all__ = [
    "CASERUNS_HEAD",
    "DIAGNOSTICS_HEAD",
    "FAILURES_HEAD",
    "FAIRNESS_HEAD",
    "INTRO",
    "VARIANT_NOTE",
    "BenchmarkTables",
    "CalibrationTables",
    "ClaimTables",
    "SliceTables",
    "Table",
    "benchmark_tables",
    "calibration_runs",
    "calibration_tables",
    "cancelled_text",
    "caserun_diagnostics_table",
    "caserun_failure",
    "caserun_flags",
    "caserun_row",
    "caseruns_table",
    "cases_table",
    "claim_tables",
    "column_definitions",
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
    "how_to_read",
    "model_runs",
    "model_text",
    "run_label",
    "runs_table",
    "slice_tables",
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


def _metric(name: str) -> str:
    return by_name(name).description


#: One-line definitions of the columns of the tables above, by column head: the HTML shows
#: them on hover and under each table. Gateable metrics take the text of projections/metrics.py.
DEFINITIONS: dict[str, str] = {
    "rank": "position among the ranked runs of the section (by result-correct rate); - when "
    "not ranked",
    "model [identity from]": "the model requested, the ids the provider resolved (or a "
    "recording claims), and where the identity comes from",
    "status": "how the run ended (completed, interrupted, failed, ...)",
    "planned": "planned attempts: every case x attempts per case; the denominator of every rate",
    "result-correct": _metric("result_correct_rate"),
    "correct/wrong/unknown": "attempts whose result matched gold / executed but did not / "
    "neither (nothing executed, cancelled or unscored)",
    "format-ok": _metric("format_ok_rate"),
    "SQL exec ok": _metric("sql_exec_success_rate"),
    "coverage": "attempts scored under the viewed scorer / planned attempts",
    "score (auxiliary)": _metric("model_score") + ", 0-100",
    "variant flags (diagnostic)": "flags raised on variant databases; never change a score",
    "tokens/correct": _metric("tokens_per_correct"),
    "cost/correct": _metric("cost_per_correct") + "; not billed = an estimate",
    "gen P95 ms": _metric("generation_p95_ms"),
    "correct (C)": "result-correct attempts (the C of every per-correct figure)",
    "tokens total": "input + cache + output tokens over the attempts that report them",
    "tokens coverage": "attempts that report tokens / planned attempts",
    "cost total": "the provider's bill where reported, else the price-snapshot estimate",
    "cost kind": "billed (the provider's bill), estimate (price snapshot) or mixed (an estimate)",
    "cost coverage": "attempts that have a cost / planned attempts",
    "gen ms/correct": "generation time over all attempts / result-correct attempts, ms",
    "gen coverage": "attempts with a generation time / planned attempts",
    "SQL exec P95 ms": _metric("sql_exec_p95_ms"),
    **{k: f"planned attempts whose score names failure kind {k}" for k in FAILURE_CATEGORIES},
    "cancelled": "cancelled attempts by reason",
    "unscored": "planned attempts with no terminal event",
    "checked": "attempts run on the variant databases / planned attempts",
    "variant_mismatch": "on a variant database the answer is not result-correct against "
    "that variant's gold",
    "scope_leak": "a variant that only changes rows outside the question's scope moved the answer",
    "any flag": "attempts with at least one variant flag",
    **{
        d: f"weighted score over the {d} cases, 0-100 (- when the bank has none)"
        for d in DIMENSIONS
    },
    "unassigned": "weighted score over the cases with no dimension, 0-100",
    **{
        d: f"weighted score over the {d} cases, 0-100 (- when the bank has none)"
        for d in ("easy", "medium", "hard")
    },
    "no difficulty": "weighted score over the cases with no difficulty, 0-100",
    "weight": "the case's weight in the weighted scores",
    "mean / sd / nonzero": "mean attempt total, its population standard deviation, and the "
    "share of attempts scoring above 0 (partial credit is not success)",
    "mean / sd / nonzero / totals": "mean attempt total, its population standard deviation, "
    "the share of attempts scoring above 0, then each attempt's total",
    "outcome": "what the attempt's last event says (scored, cancelled, ...)",
    "total": "the attempt's score, 0-100",
    "failure": "the scored failure kind, or why the attempt was cancelled",
    "missing rows": "gold rows the answer lacks",
    "extra rows": "answer rows gold does not have",
    "guard": "the SQL guard's verdict (passed or rejected)",
    # Issue 32 (caseledger-report/3; docs/statistics.md).
    "rank group": "runs whose paired difference is not significant share a group (1, 2=, 2=)",
    "cases": "cases of the run (the unit of every standard error)",
    "result-correct rate": "mean over cases of result-correct attempts / planned attempts",
    "rate SE": "sd of the per-case rates (ddof=1) / sqrt(cases)",
    "rate 95% CI": "rate +- 1.96 SE, clipped to [0, 1]",
    "score": _metric("model_score") + ", 0-100",
    "score SE": "standard error of the weighted mean of the case means",
    "score 95% CI": "score +- 1.96 SE, clipped to [0, 100]",
    "difference A-B": "mean over the paired cases of A's case rate - B's",
    "SE": "sd of the paired differences (ddof=1) / sqrt(cases)",
    "95% CI": "difference +- 1.96 SE",
    "p": "two-sided p-value: exact sign-flip test up to 20 differing cases, else normal",
    "significant": "p (as shown) below 0.05",
    "A better": "cases where A's rate is higher (one attempt: A right, B wrong)",
    "B better": "cases where B's rate is higher (one attempt: B right, A wrong)",
    "MDD": "minimum detectable difference at 80% power, alpha 0.05: 2.8016 SE",
}

#: The same head means something else in these tables.
_DIAGNOSTICS_DEFINITIONS = {"coverage": "attempts checked on variants / planned attempts"}

#: The Failure table's columns (issue 35: its ``guard`` column counts failures of kind
#: guard; it is not the CaseRuns table's guard verdict). docs/scoring.md "Boundary rules".
FAILURE_DEFINITIONS = {
    "policy_refusal": "planned attempts the provider refused to answer (a refusal or content "
    "filter; failure kind policy_refusal)",
    "protocol": "planned attempts whose output broke the answer contract or held no SQL "
    "(failure kind protocol)",
    "guard": "planned attempts whose SQL the guard refused, so it never ran (failure kind guard)",
    "execution": "planned attempts whose SQL failed when it ran: an error, a timeout, the "
    "memory or result cap (failure kind execution)",
    "provider": "planned attempts whose model call failed: timeout, rate limit, server or "
    "transport error (failure kind provider)",
    "infrastructure": "planned attempts cancelled because the harness failed (a SQL worker "
    "crashed twice)",
}


def column_definitions(
    head: list[str], diagnostics: bool = False, failures: bool = False
) -> list[tuple[str, str]]:
    """The defined columns of a table head, each with its one-line definition (a per-run
    column ``<run> mean / sd / nonzero`` is defined by its suffix). ``failures``: the
    Failure table's definitions (:data:`FAILURE_DEFINITIONS`) of its failure kinds."""
    out = []
    for h in head:
        text = (
            (_DIAGNOSTICS_DEFINITIONS.get(h) if diagnostics else None)
            or (FAILURE_DEFINITIONS.get(h) if failures else None)
            or DEFINITIONS.get(h)
        )
        if text is None:
            for suffix in ("mean / sd / nonzero / totals", "mean / sd / nonzero"):
                if h.endswith(suffix):
                    h, text = suffix, DEFINITIONS[suffix]
                    break
        if text is not None and (h, text) not in out:
            out.append((h, text))
    return out


def how_to_read(report: Report) -> list[str]:
    """The report's reading notes, with the fixed first note (three attempts per case)
    replaced by the attempts per case the runs of this report actually planned."""
    by_count: dict[int, list[str]] = {}
    for section in report.sections:
        for r in model_runs(section):
            by_count.setdefault(r.attempts_per_case, []).append(r.run)
    if not by_count:
        return list(report.how_to_read)
    if len(by_count) == 1:
        ((n, _),) = by_count.items()
        said = f"Every run here made {n} attempt{'s' if n != 1 else ''} per case"
    else:
        said = "Attempts per case here: " + "; ".join(
            f"{n} for {', '.join(runs)}" for n, runs in sorted(by_count.items(), reverse=True)
        )
    most = max(by_count)
    tail = (
        ": repeated attempts show spread, not statistical significance"
        if most > 1
        else ": one attempt shows no spread at all"
    )
    note = said + tail + "; a difference between two models can be noise."
    return [note if item == HOW_TO_READ[0] else item for item in report.how_to_read]


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
