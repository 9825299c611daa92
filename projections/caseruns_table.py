"""CaseRuns as one flat table: one row per planned attempt, with its score and items.

What ``caseledger export caseruns`` writes (Parquet or CSV, docs/formats.md
"CaseRuns table") for pandas, polars or DuckDB. Pure: it reads a fold state
(:mod:`projections.caseruns`) and returns rows; writing the file is
``ledger/app/export_caseruns.py``'s job.

Each run is shown under the scorer version it recorded (as ``caseledger runs``
does), each attempt resolved by :func:`projections.caseruns.attempts_of_run`, the
one rule every reader shares. Rows come in a fixed order: runs by run id, then the
run's cases in bank order, then attempts 1..N. Calibration runs have no case
attempts and are not rows. A withdrawn run is left out unless asked for (as
reports and ``caseledger runs`` do); when shown, its rows carry the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from ledger.errors import UsageError
from ledger.events import BenchmarkCase, BenchmarkSource, CaseSpec, GoldResult, ScoreItems
from projections import benchmark
from projections.caseruns import Attempt, State, attempts_of_run

__all__ = ["COLUMNS", "ITEM_COLUMNS", "Row", "caserun_rows", "withdrawn_runs"]

#: The score items of scorer 2.x, one column each (``item_<name>``), in ScoreItems order.
ITEM_COLUMNS: tuple[str, ...] = tuple(f"item_{name}" for name in ScoreItems.__struct_fields__)

_POINTS = "DOUBLE"
_WHY_POINTS = "points of this item (the ledger's decimal as the nearest double)"

#: (name, DuckDB type, meaning), in column order. docs/formats.md lists the same.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("run", "VARCHAR", "run id"),
    ("run_kind", "VARCHAR", "model or self_test"),
    ("bank", "VARCHAR", "bank id@version"),
    ("bank_hash", "VARCHAR", "content hash of the published bank"),
    ("adapter", "VARCHAR", "adapter kind"),
    ("profile", "VARCHAR", "model profile (display name)"),
    ("requested_model", "VARCHAR", "model id the run asked for (null: none)"),
    ("scorer_version", "VARCHAR", "the scorer version the run recorded; scores are under it"),
    ("withdrawn", "VARCHAR", "why the run was withdrawn (--include-withdrawn; else null)"),
    ("case_id", "VARCHAR", "case id"),
    ("dimension", "VARCHAR", "the case's dimension"),
    ("difficulty", "VARCHAR", "the case's difficulty"),
    ("weight", "DOUBLE", "the case's weight"),
    ("attempt", "INTEGER", "attempt number, 1..N"),
    ("outcome", "VARCHAR", "scored, cancelled or unscored (no terminal event yet)"),
    ("cancel_reason", "VARCHAR", "why a cancelled attempt ended (null otherwise)"),
    ("result_correct", "BOOLEAN", "the result equals gold (null: not scored or undecided)"),
    ("format_ok", "BOOLEAN", "the answer followed the output contract"),
    ("failure_kind", "VARCHAR", "the stage that failed, none when correct"),
    ("failure_detail", "VARCHAR", "a cap that stopped the attempt in its stage (else null)"),
    ("total", "DECIMAL(5,2)", "the 100-point score"),
    *((name, _POINTS, _WHY_POINTS) for name in ITEM_COLUMNS),
    ("precision", "DOUBLE", "row precision against gold"),
    ("recall", "DOUBLE", "row recall against gold"),
    ("f1", "DOUBLE", "F1 of precision and recall"),
    ("matched", "BIGINT", "rows matched with gold"),
    ("expected_rows", "BIGINT", "gold rows"),
    ("actual_rows", "BIGINT", "result rows"),
    ("order_ok", "BOOLEAN", "row order as the case requires"),
    ("alignment", "VARCHAR", "how result columns were aligned with gold"),
    ("sql", "VARCHAR", "the SQL extracted from the answer (null: none)"),
    ("resolved_model", "VARCHAR", "the model id the provider reported"),
    ("input_tokens", "BIGINT", "input tokens (excluding cached input)"),
    ("output_tokens", "BIGINT", "output tokens"),
    ("cost", "DOUBLE", "billed cost of the call"),
    ("estimated_cost", "DOUBLE", "cost estimated from a price snapshot"),
    ("generation_ms", "DOUBLE", "time to the model's answer, ms"),
    ("sql_exec_ms", "DOUBLE", "time of the scored SQL execution, ms"),
    ("score_seq", "BIGINT", "seq of the ScoreComputed event (null: not scored)"),
    ("benchmark", "VARCHAR", "the public benchmark the bank was imported from (bird, spider)"),
    ("benchmark_question_id", "VARCHAR", "the benchmark's question id (Spider: its index)"),
    ("benchmark_ex", "BOOLEAN", "the benchmark's own EX (null: undecided or no benchmark)"),
)

#: One row: column name -> plain value (str, int, bool, Decimal or None), in COLUMNS order.
Row = dict[str, str | int | bool | Decimal | None]


def withdrawn_runs(state: State, runs: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """(run id, reason) of the withdrawn runs among ``runs`` (default: all), by run id."""
    chosen = sorted(set(runs)) if runs is not None else sorted(state.runs)
    return [
        (run_id, w.reason)
        for run_id in chosen
        if run_id in state.runs and (w := state.runs[run_id].withdrawn) is not None
    ]


def caserun_rows(
    state: State, runs: Sequence[str] | None = None, *, include_withdrawn: bool = False
) -> list[Row]:
    """Every planned attempt of the given runs (default: every run with cases) as rows.

    Withdrawn runs are left out unless ``include_withdrawn`` (:func:`withdrawn_runs`
    names them).

    Raises:
        UsageError: a named run is not in the state, is a calibration run, or is
            withdrawn and ``include_withdrawn`` is not set.
    """
    if runs is not None:
        for run_id in runs:
            info = state.runs.get(run_id)
            if info is None:
                raise UsageError(
                    f"no run {run_id!r} in the first {state.size} events",
                    hint="`caseledger runs` lists the runs",
                )
            if info.started.run_kind == "calibration":
                raise UsageError(
                    f"run {run_id} is a calibration run: it has no case attempts",
                    hint="`caseledger calibrate --json` shows its mutants and controls",
                )
            if info.withdrawn is not None and not include_withdrawn:
                raise UsageError(
                    f"run {run_id} is withdrawn (reason: {info.withdrawn.reason})",
                    hint="add --include-withdrawn to export it, marked as withdrawn",
                )
    chosen = sorted(set(runs)) if runs is not None else sorted(state.runs)
    rows: list[Row] = []
    for run_id in chosen:
        info = state.runs[run_id]
        started = info.started
        if started.run_kind == "calibration":
            continue
        if info.withdrawn is not None and not include_withdrawn:
            continue
        bank = state.banks.get(started.bank_hash)
        cases = {c.id: c for c in bank.event.cases} if bank is not None else {}
        golds = {g.case_id: g for g in bank.event.gold} if bank is not None else {}
        source = bank.event.benchmark if bank is not None else None
        imported = source.name if isinstance(source, BenchmarkSource) else None
        version = started.versions.scorer
        head: Row = {
            "run": run_id,
            "run_kind": started.run_kind,
            "bank": f"{started.bank_id}@{started.bank_version}",
            "bank_hash": started.bank_hash,
            "adapter": started.adapter_kind,
            "profile": started.profile,
            "requested_model": started.requested_model,
            "scorer_version": version,
            "withdrawn": info.withdrawn.reason if info.withdrawn is not None else None,
        }
        for attempt in attempts_of_run(state, run_id, version):
            case = cases.get(attempt.case_id)
            row = head | {
                "case_id": attempt.case_id,
                "dimension": None if case is None else case.dimension,
                "difficulty": None if case is None else case.difficulty,
                "weight": None if case is None else case.weight,
                "attempt": attempt.attempt,
            }
            row |= _outcome(attempt)
            row |= _benchmark(imported, case, golds.get(attempt.case_id), attempt)
            rows.append({name: row[name] for name, _, _ in COLUMNS})
    return rows


def _outcome(a: Attempt) -> Row:
    """The columns from ``outcome`` on, for one attempt."""
    s, r = a.score, a.response
    usage = r.usage if r is not None else None
    row: Row = {
        "outcome": a.outcome,
        "cancel_reason": a.cancel.reason if a.cancel is not None else None,
    }
    row |= {
        "result_correct": None if s is None else s.result_correct,
        "format_ok": None if s is None else s.format_ok,
        "failure_kind": None if s is None else s.failure_kind,
        "failure_detail": s.failure_detail
        if s is not None and isinstance(s.failure_detail, str)
        else None,
        "total": None if s is None else s.total,
    }
    for name in ScoreItems.__struct_fields__:
        row[f"item_{name}"] = None if s is None else getattr(s.items, name)
    execution = a.execution
    row |= {
        "precision": None if s is None else s.precision,
        "recall": None if s is None else s.recall,
        "f1": None if s is None else s.f1,
        "matched": None if s is None else s.matched,
        "expected_rows": None if s is None else s.expected_rows,
        "actual_rows": None if s is None else s.actual_rows,
        "order_ok": None if s is None else s.order_ok,
        "alignment": None if s is None else s.alignment,
        "sql": a.parsed.sql if a.parsed is not None else None,
        "resolved_model": r.resolved_model if r is not None else None,
        "input_tokens": usage.input if usage is not None else None,
        "output_tokens": usage.output if usage is not None else None,
        "cost": r.cost if r is not None else None,
        "estimated_cost": r.estimated_cost if r is not None else None,
        "generation_ms": _ms(r.generation_us) if r is not None else None,
        "sql_exec_ms": _ms(execution.sql_us) if execution is not None else None,
        "score_seq": _score_seq(a),
    }
    return row


def _benchmark(name: str | None, case: CaseSpec | None, gold: GoldResult | None, a: Attempt) -> Row:
    """The benchmark columns (issue 31): which benchmark, its question id (BIRD's
    ``question_id``; Spider has none, so its index in the question file) and its own
    verdict (``projections.benchmark.verdict``, the report's)."""
    if name is None or case is None or not isinstance(case.benchmark, BenchmarkCase):
        return {"benchmark": None, "benchmark_question_id": None, "benchmark_ex": None}
    ref = case.benchmark
    qid = ref.question_id if ref.question_id is not None else str(ref.index)
    ex = None if gold is None else benchmark.verdict(name, case, gold, a)[0]
    return {"benchmark": name, "benchmark_question_id": qid, "benchmark_ex": ex}


def _ms(micros: int | None) -> Decimal | None:
    """Microseconds as exact milliseconds."""
    return None if micros is None else Decimal(micros) / 1000


def _score_seq(a: Attempt) -> int | None:
    """The seq of the attempt's ScoreComputed (the event an auditor looks up)."""
    if a.score is None:
        return None
    return next((step.seq for step in a.steps if step.event is a.score), None)
