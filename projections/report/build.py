"""The report: a pure function of (the fold state at tree size N, a scorer version, the contract).

:func:`build_report` returns a plain dict (str, int, bool, None, list, dict only;
every number that is not a count is a decimal string) and :func:`to_json`
gives its canonical bytes (sorted keys, no floats), the source of the Markdown
and HTML views. Every list is in an explicit order (sections by kind, bank and
scorer major; runs by rank then id; cases in bank order; attempts by number);
nothing depends on dict insertion order, the clock, paths or randomness.
docs/reports.md describes every field.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import msgspec

from ledger.codec import canonical_json
from ledger.errors import UsageError
from ledger.events import CaseSpec, Invocation, RunStarted
from projections import aggregates, calibration, efficiency, fairness, quality, variants
from projections.caseruns import Attempt, RunInfo, State, attempts_of_run, type_name

__all__ = [
    "CONTRACT",
    "HOW_TO_READ",
    "KIND_ORDER",
    "build_report",
    "run_overview",
    "scorer_major",
    "to_json",
]

CONTRACT = "caseledger-report/1"
#: Section kinds in the order they appear; only ``models`` is ranked.
KIND_ORDER = ("models", "self_test", "calibration")
_KIND_LABEL = {
    "models": "Models",
    "self_test": "Self-test (not ranked)",
    "calibration": "Calibration (oracle checks, never ranked)",
}
_KIND_OF_RUN = {"model": "models", "self_test": "self_test", "calibration": "calibration"}

#: The fixed closing section (DESIGN.md fine print), in this wording in every report.
HOW_TO_READ = (
    "Three attempts per case show spread, not statistical significance: a difference "
    "between two models can be noise.",
    "One question bank is one schema and one set of questions; its results do not "
    "generalise to other schemas, domains or dialects.",
    "The nonzero-score rate is not a success rate: partial credit is not a correct "
    "answer; the result-correct rate is.",
    "A green regression gate is not accuracy: it only says nothing got worse beyond "
    "its tolerances against one baseline.",
)


def scorer_major(version: str) -> str:
    """The major part of a scorer version.

    >>> scorer_major("2.1.0-test")
    '2'
    """
    return version.split(".", 1)[0]


def _plain(value: Any) -> Any:
    return msgspec.to_builtins(value, order="sorted", builtin_types=())


def _bank_cases(state: State, started: RunStarted) -> tuple[CaseSpec, ...]:
    bank = state.banks.get(started.bank_hash)
    if bank is None:
        raise UsageError(
            f"run {started.run_id} names bank {started.bank_hash}, which is not published "
            f"in the first {state.size} events",
            hint="build the report at a tree size that includes the BankPublished event",
        )
    by_id = {c.id: c for c in bank.event.cases}
    return tuple(by_id[c] for c in started.case_ids if c in by_id)


# ----------------------------------------------------------------- one run


def _identity(started: RunStarted, attempts: Sequence[Attempt]) -> dict[str, Any]:
    responses = [a.response for a in attempts if a.response]
    resolved = sorted({r.resolved_model for r in responses if r.resolved_model is not None})
    recorded = sorted({r.recorded_model for r in responses if r.recorded_model is not None})
    if resolved:
        source = "resolved_by_provider"
    elif recorded:
        source = "recorded_claim"
    else:
        source = "requested_only"
    return {
        "requested": started.requested_model,
        "provider": started.provider,
        "auth_mode": started.auth_mode,
        "identity_source": source,
        "resolved": resolved,
        "recorded": recorded,
    }


def _configured(started: RunStarted) -> dict[str, Any]:
    return {
        "harness_kind": started.harness_kind,
        "bridge_version": started.bridge_version,
        "policy_version": started.policy_version,
        "response_mode": started.response_mode,
        "single_turn": started.single_turn,
        "tools": started.tools,
        "retries": started.retries,
        "context_isolation": started.context_isolation,
        "timeout_ms": started.timeout_ms,
        "system_prompt_digest": started.system_prompt_digest,
        "prompt_contract_digest": started.prompt_contract_digest,
        "params": _plain(started.params),
    }


def _run_entry(
    info: RunInfo, version: str, cases: Sequence[CaseSpec], attempts: Sequence[Attempt]
) -> dict[str, Any]:
    started = info.started
    scores = aggregates.summarize(cases, attempts)
    return {
        "run": started.run_id,
        "run_kind": started.run_kind,
        "profile": started.profile,
        "adapter_kind": started.adapter_kind,
        "dates": {"first_event": info.first_at, "last_event": info.last_at},
        "status": info.finished.status if info.finished is not None else "unfinished",
        "attempts_per_case": started.attempts,
        "scorer_version": version,
        "model": _identity(started, attempts),
        "configured": _configured(started),
        "versions": _plain(started.versions),
        "price_snapshot_digest": started.price_snapshot_digest,
        "replay_file_sha256": started.replay_file_sha256,
        "quality": quality.summarize(attempts),
        "scores": {
            "auxiliary": True,
            "model_score": scores["model_score"],
            "dimensions": scores["dimensions"],
            "difficulties": scores["difficulties"],
        },
        "cases": scores["cases"],
        "efficiency": efficiency.summarize(attempts),
        "variant_diagnostics": variants.summarize(attempts),
        "rank": None,
    }


def _calibration_entry(state: State, info: RunInfo) -> dict[str, Any]:
    started = info.started
    return {
        "run": started.run_id,
        "run_kind": started.run_kind,
        "profile": started.profile,
        "adapter_kind": started.adapter_kind,
        "dates": {"first_event": info.first_at, "last_event": info.last_at},
        "status": info.finished.status if info.finished is not None else "unfinished",
        "scorer_version": started.versions.scorer,
        "versions": _plain(started.versions),
        "calibration": calibration.summarize(state.calibrations.get(started.run_id)),
        "rank": None,
    }


# ----------------------------------------------------------------- one CaseRun


def _invocation(inv: Invocation | None) -> Any:
    return None if inv is None else _plain(inv)


def _caserun(a: Attempt) -> dict[str, Any]:
    out: dict[str, Any] = {
        "run": a.run_id,
        "case": a.case_id,
        "attempt": a.attempt,
        "outcome": a.outcome,
        "prompt": a.prompt.prompt if a.prompt else None,
        "prompt_sha256": a.prompt.prompt_sha256 if a.prompt else None,
        "response": None,
        "parsed": None,
        "guard": None,
        "execution": None,
        "diff": None,
        "score": None,
        "cancel": None,
        "variants": variants.caserun_variants(a),
        "events": [
            {"seq": s.seq, "type": type_name(s.event), "leaf_hash": s.link} for s in a.steps
        ],
    }
    r = a.response
    if r is not None:
        out["response"] = {
            "kind": "model_responded",
            "raw_output": r.raw_output,
            "resolved_model": r.resolved_model,
            "recorded_model": r.recorded_model,
            "provider_request_id": r.provider_request_id,
            "invocation": _invocation(r.invocation),
            "usage": _plain(r.usage),
            "cost": None if r.cost is None else str(r.cost),
            "estimated_cost": None if r.estimated_cost is None else str(r.estimated_cost),
            "generation_us": r.generation_us,
            "failure": None,
        }
    elif a.failure is not None:
        f = a.failure
        out["response"] = {
            "kind": "provider_failed",
            "raw_output": f.raw_output,
            "resolved_model": None,
            "recorded_model": None,
            "provider_request_id": f.provider_request_id,
            "invocation": _invocation(f.invocation),
            "usage": _plain(f.usage),
            "cost": None,
            "estimated_cost": None,
            "generation_us": f.generation_us,
            "failure": {"kind": f.kind, "message": f.message, "http_status": f.http_status},
        }
    if a.parsed is not None:
        p = a.parsed
        out["parsed"] = {
            "protocol_strict": p.protocol_strict,
            "recovered_from_fence": p.recovered_from_fence,
            "plan": _plain(p.plan),
            "sql": p.sql,
            "summary": p.summary,
            "assumptions": None if p.assumptions is None else list(p.assumptions),
            "error": p.error,
        }
    if a.guarded is not None:
        g = a.guarded
        out["guard"] = {
            "passed": g.passed,
            "violations": [_plain(v) for v in g.violations],
            "ast_digest": g.ast_digest,
        }
    e = a.execution
    if e is not None:
        out["execution"] = {
            "ok": e.ok,
            "error_kind": e.error_kind,
            "error_message": e.error_message,
            "columns": [_plain(c) for c in e.columns],
            "rows": _plain(e.rows),
            "row_count": e.row_count,
            "truncated": e.truncated,
            "sql_us": e.sql_us,
            "tries": len(a.executions),
        }
    s = a.score
    if s is not None:
        out["diff"] = {
            "alignment": s.alignment,
            "expected_rows": s.expected_rows,
            "actual_rows": s.actual_rows,
            "matched": s.matched,
            "missing_rows": s.expected_rows - s.matched,
            "extra_rows": s.actual_rows - s.matched,
            "precision": str(s.precision),
            "recall": str(s.recall),
            "f1": str(s.f1),
            "order_ok": s.order_ok,
            "non_finite": s.non_finite,
        }
        out["score"] = {
            "scorer_version": s.scorer_version,
            "total": str(s.total),
            "items": _plain(s.items),
            "ast_rules": [_plain(r) for r in s.ast_rules],
            "result_correct": s.result_correct,
            "format_ok": s.format_ok,
            "failure_kind": s.failure_kind,
            "sql_structural_match": s.sql_structural_match,
        }
    if a.cancel is not None:
        out["cancel"] = {"reason": a.cancel.reason, "message": a.cancel.message}
    return out


# ----------------------------------------------------------------- sections


def _rank(entries: list[dict[str, Any]]) -> None:
    def key(e: dict[str, Any]) -> tuple[Any, ...]:
        rate = e["quality"]["result_correct_rate"]
        score = e["scores"]["model_score"]
        # Best result-correct rate first, the auxiliary score breaks ties; null ranks last.
        return (
            Decimal(rate) if rate is not None else Decimal(-1),
            Decimal(score) if score is not None else Decimal(-1),
        )

    entries.sort(key=lambda e: e["run"])
    entries.sort(key=key, reverse=True)
    previous, rank = None, 0
    for position, entry in enumerate(entries, start=1):
        current = key(entry)
        if current != previous:
            rank, previous = position, current
        entry["rank"] = rank


def _section(
    state: State,
    kind: str,
    bank_hash: str,
    major: str,
    runs: list[tuple[RunInfo, str]],
    with_gold: bool,
) -> dict[str, Any]:
    bank = state.banks[bank_hash].event
    entries: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    fair_input: list[tuple[str, Sequence[Attempt]]] = []
    for info, version in sorted(runs, key=lambda r: r[0].started.run_id):
        if kind == "calibration":
            # No attempts and no score: the oracle's verdicts on mutants and controls.
            entries.append(_calibration_entry(state, info))
            continue
        cases = _bank_cases(state, info.started)
        attempts = attempts_of_run(state, info.started.run_id, version)
        entries.append(_run_entry(info, version, cases, attempts))
        details.extend(_caserun(a) for a in attempts)
        fair_input.append((info.started.run_id, attempts))
    ranked = kind == "models"
    if ranked:
        _rank(entries)
    else:
        entries.sort(key=lambda e: e["run"])
    section: dict[str, Any] = {
        "kind": kind,
        "ranked": ranked,
        "title": _title(kind, bank.bank_id, bank.version, bank_hash, major),
        "bank": {
            "id": bank.bank_id,
            "version": bank.version,
            "hash": bank_hash,
            "published_seq": state.banks[bank_hash].seq,
            "gold_digest": bank.gold_digest,
        },
        "scorer_major": major,
        "scorer_versions": sorted({v for _, v in runs}),
        "fairness": fairness.classify(fair_input) if ranked else None,
        "cases": [
            {
                "case": c.id,
                "dimension": c.dimension,
                "difficulty": c.difficulty,
                "weight": str(c.weight),
                "question": c.question,
                "question_en": c.question_en,
                "required_ast": list(c.required_ast),
            }
            for c in bank.cases
        ],
        "runs": entries,
        "caseruns": details,
        "gold": None,
    }
    if with_gold:
        section["gold"] = [
            {
                "case": g.case_id,
                "columns": [_plain(c) for c in g.columns],
                "rows": _plain(g.rows),
                "digest": g.digest,
            }
            for g in bank.gold
        ]
    return section


def _title(kind: str, bank_id: str, version: str, bank_hash: str, major: str) -> str:
    label = _KIND_LABEL[kind]
    short = bank_hash.removeprefix("sha256:")[:12]
    return f"{label} - bank {bank_id} {version} (sha256:{short}) - scorer {major}.x"


def build_report(
    state: State,
    *,
    root_hash: bytes,
    scorer: str | None = None,
    runs: Sequence[str] | None = None,
    with_gold: bool = False,
) -> dict[str, Any]:
    """The canonical report dict of a fold state covering the first ``state.size`` events.

    Args:
        state: the fold state at tree size N (``state.size``).
        root_hash: the RFC 9162 root of leaves 0..N-1 (the checkpoint it is built from).
        scorer: view every run under this scorer version; None = the version each run
            recorded in its RunStarted.
        runs: only these run ids (None = every run).
        with_gold: the internal view, with gold rows (never reference SQL).

    Raises:
        UsageError: a named run does not exist at this tree size.
    """
    chosen = sorted(state.runs) if runs is None else sorted(set(runs))
    unknown = [r for r in chosen if r not in state.runs]
    if unknown:
        raise UsageError(
            f"no run {', '.join(unknown)} in the first {state.size} events",
            hint="list runs with `caseledger runs`",
        )
    groups: dict[tuple[str, str, str], list[tuple[RunInfo, str]]] = {}
    for run_id in chosen:
        info = state.runs[run_id]
        kind = _KIND_OF_RUN.get(info.started.run_kind, "calibration")
        # A calibration's verdicts were made by the scorer it recorded; --scorer views scores.
        version = info.started.versions.scorer if kind == "calibration" else None
        version = version or scorer or info.started.versions.scorer
        key = (kind, info.started.bank_hash, scorer_major(version))
        groups.setdefault(key, []).append((info, version))

    def order(key: tuple[str, str, str]) -> tuple[Any, ...]:
        kind, bank_hash, major = key
        bank = state.banks.get(bank_hash)
        ident = (bank.event.bank_id, bank.event.version) if bank else ("", "")
        return (KIND_ORDER.index(kind), *ident, bank_hash, major)

    sections = []
    for key in sorted(groups, key=order):
        kind, bank_hash, major = key
        for info, _ in groups[key]:
            _bank_cases(state, info.started)  # raises when the bank is unknown
        sections.append(_section(state, kind, bank_hash, major, groups[key], with_gold))
    return {
        "contract": CONTRACT,
        "checkpoint": {"tree_size": state.size, "root_hash": "sha256:" + root_hash.hex()},
        "view": "internal-with-gold" if with_gold else "public",
        "notice": (
            "INTERNAL VIEW: contains gold rows. Do not publish."
            if with_gold
            else "Public view: no reference SQL and no gold rows."
        ),
        "scorer": {"requested": scorer},
        "selection": {"runs": None if runs is None else chosen},
        "sections": sections,
        "how_to_read": list(HOW_TO_READ),
    }


def to_json(report: dict[str, Any]) -> bytes:
    """Canonical JSON bytes of a report (sorted keys, no floats), with a final newline."""
    return canonical_json(report) + b"\n"


def run_overview(state: State) -> list[dict[str, Any]]:
    """One row per run (in run id order) for ``caseledger runs``, under each run's own scorer."""
    rows = []
    for run_id in sorted(state.runs):
        info = state.runs[run_id]
        started = info.started
        version = started.versions.scorer
        attempts = attempts_of_run(state, run_id, version)
        cases = _bank_cases(state, started)
        q = quality.summarize(attempts)
        row: dict[str, Any] = {
            "run": run_id,
            "run_kind": started.run_kind,
            "bank": f"{started.bank_id}@{started.bank_version}",
            "bank_hash": started.bank_hash,
            "adapter": started.adapter_kind,
            "profile": started.profile,
            "requested_model": started.requested_model,
            "status": info.finished.status if info.finished is not None else "unfinished",
            "done": sum(1 for a in attempts if a.outcome != "unscored"),
            "planned": len(attempts),
            "result_correct_rate": q["result_correct_rate"],
            "score": aggregates.summarize(cases, attempts)["model_score"],
            "scorer_version": version,
            "first_event": info.first_at,
            "kill_rate": None,
        }
        if started.run_kind == "calibration":
            # No attempts and no score: done when its totals are recorded.
            cal = calibration.summarize(state.calibrations.get(run_id))
            row["done"] = len(attempts) if cal["finished"] else 0
            row["result_correct_rate"] = row["score"] = None
            row["kill_rate"] = cal["kill_rate"]
        rows.append(row)
    return rows
