"""One CaseRun of a report: an attempt's outcome, evidence and diagnostics.

Part of the report build (``build.py``): :func:`caserun_entry` is the full CaseRun
(``caseledger-report/1``, every event's evidence verbatim) and :func:`compact_caserun`
the compact one (``/2`` and ``/3``: the evidence named by its steps).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ledger.events import PromptSent
from projections import claims, variants
from projections.caseruns import Attempt, Step, type_name
from projections.report import schema as S
from projections.report.jsonio import plain

__all__ = [
    "caserun_entry",
    "compact_caserun",
]


# ----------------------------------------------------------------- one CaseRun


def _response(a: Attempt) -> S.Response | None:
    r = a.response
    if r is not None:
        return S.Response(
            kind="model_responded",
            raw_output=r.raw_output,
            resolved_model=r.resolved_model,
            recorded_model=r.recorded_model,
            provider_request_id=r.provider_request_id,
            invocation=r.invocation,
            usage=r.usage,
            cost=None if r.cost is None else str(r.cost),
            estimated_cost=None if r.estimated_cost is None else str(r.estimated_cost),
            generation_us=r.generation_us,
            failure=None,
        )
    f = a.failure
    if f is None:
        return None
    return S.Response(
        kind="provider_failed",
        raw_output=f.raw_output,
        resolved_model=None,
        recorded_model=None,
        provider_request_id=f.provider_request_id,
        invocation=f.invocation,
        usage=f.usage,
        cost=None,
        estimated_cost=None,
        generation_us=f.generation_us,
        failure=S.ProviderFailure(kind=f.kind, message=f.message, http_status=f.http_status),
    )


def _slice(a: Attempt) -> S.CaseRunSlice | msgspec.UnsetType:
    """The slice of an attempt's answer, only when recorded (issue 19): a CaseRun
    without one keeps its bytes (likewise its claims)."""
    if a.slice is None:
        return msgspec.UNSET
    return S.CaseRunSlice(
        component=a.slice.component,
        detail=a.slice.detail,
        slicer_version=a.slice.slicer_version,
    )


def caserun_entry(a: Attempt) -> S.CaseRun:
    p, g, e, s = a.parsed, a.guarded, a.execution, a.score
    found = claims.attempt_claims(a)
    return S.CaseRun(
        slice=_slice(a),
        claims=msgspec.UNSET if found is None else found,
        run=a.run_id,
        case=a.case_id,
        attempt=a.attempt,
        outcome=a.outcome,
        # the fold fills in a PromptSent's text from its run's PromptStored (issue 22)
        prompt=a.prompt.prompt if a.prompt and isinstance(a.prompt.prompt, str) else None,
        prompt_sha256=a.prompt.prompt_sha256 if a.prompt else None,
        response=_response(a),
        parsed=None
        if p is None
        else S.Parsed(
            protocol_strict=p.protocol_strict,
            recovered_from_fence=p.recovered_from_fence,
            plan=p.plan,
            sql=p.sql,
            summary=p.summary,
            assumptions=None if p.assumptions is None else list(p.assumptions),
            error=p.error,
            imported=p.imported,
        ),
        guard=None
        if g is None
        else S.Guard(passed=g.passed, violations=list(g.violations), ast_digest=g.ast_digest),
        execution=None
        if e is None
        else S.Execution(
            ok=e.ok,
            error_kind=e.error_kind,
            error_message=e.error_message,
            columns=list(e.columns),
            rows=plain(e.rows),
            row_count=e.row_count,
            truncated=e.truncated,
            sql_us=e.sql_us,
            tries=len(a.executions),
        ),
        diff=None
        if s is None
        else S.Diff(
            alignment=s.alignment,
            expected_rows=s.expected_rows,
            actual_rows=s.actual_rows,
            matched=s.matched,
            missing_rows=s.expected_rows - s.matched,
            extra_rows=s.actual_rows - s.matched,
            precision=str(s.precision),
            recall=str(s.recall),
            f1=str(s.f1),
            order_ok=s.order_ok,
            non_finite=s.non_finite,
        ),
        score=None
        if s is None
        else S.Score(
            scorer_version=s.scorer_version,
            total=str(s.total),
            items=s.items,
            ast_rules=list(s.ast_rules),
            result_correct=s.result_correct,
            format_ok=s.format_ok,
            failure_kind=s.failure_kind,
            sql_structural_match=s.sql_structural_match,
        ),
        cancel=None
        if a.cancel is None
        else S.Cancel(reason=a.cancel.reason, message=a.cancel.message),
        variants=variants.caserun_variants(a),
        events=[
            S.EventRef(seq=step.seq, type=type_name(step.event), leaf_hash=step.link)
            for step in a.steps
        ],
    )


def _evidence_steps(a: Attempt) -> list[Step]:
    """The events a CaseRun's outcome rests on, in log order: a score's evidence and the
    score; a cancellation's batch (from its last PromptSent) and the cancellation; an
    unscored attempt's last batch; and the VariantChecked whose flags the CaseRun shows."""
    steps = a.steps
    end = a.score if a.score is not None else a.cancel
    term = None if end is None else next((s for s in steps if s.event is end), None)
    if term is not None and a.score is not None:
        named = set(a.score.evidence)
        found = [s for s in steps if s.link in named and s.seq < term.seq]
    else:
        before = [s for s in steps if term is None or s.seq < term.seq]
        starts = [i for i, s in enumerate(before) if isinstance(s.event, PromptSent)]
        found = before[starts[-1] :] if starts else []
    if term is not None:
        found.append(term)
    if a.variant is not None:
        found += [s for s in steps if s.event is a.variant and s not in found]
    return sorted(found, key=lambda s: s.seq)


def compact_caserun(a: Attempt, full: S.CaseRun) -> S.CompactCaseRun:
    """The ``caseledger-report/2`` CaseRun of attempt ``a`` (``full`` is its
    ``caseledger-report/1`` CaseRun): what says why it scored what it scored, and the
    leaf hashes of the events that say so; the prompt is named by its SHA-256 only
    (the report's ``prompts`` table holds its text once). docs/reports.md "Versions"."""
    r, p, g, e = full.response, full.parsed, full.guard, full.execution
    extra: dict[str, Any] = {}
    if not isinstance(full.slice, msgspec.UnsetType):
        extra["slice"] = full.slice
    if not isinstance(full.claims, msgspec.UnsetType):
        extra["claims"] = full.claims
    return S.CompactCaseRun(
        **extra,
        run=full.run,
        case=full.case,
        attempt=full.attempt,
        outcome=full.outcome,
        prompt_sha256=full.prompt_sha256,
        response=None
        if r is None
        else S.CompactResponse(
            kind=r.kind,
            invocation=r.invocation,
            usage=r.usage,
            cost=r.cost,
            estimated_cost=r.estimated_cost,
            generation_us=r.generation_us,
            failure=r.failure,
        ),
        parsed=None
        if p is None
        else S.CompactParsed(
            protocol_strict=p.protocol_strict,
            recovered_from_fence=p.recovered_from_fence,
            sql=p.sql,
            error=p.error,
            imported=p.imported,
        ),
        guard=None if g is None else S.CompactGuard(passed=g.passed, violations=g.violations),
        execution=None
        if e is None
        else S.CompactExecution(
            ok=e.ok,
            error_kind=e.error_kind,
            error_message=e.error_message,
            row_count=e.row_count,
            truncated=e.truncated,
            sql_us=e.sql_us,
            tries=e.tries,
        ),
        diff=full.diff,
        score=full.score,
        cancel=full.cancel,
        variant_flags=None if full.variants is None else full.variants.flags,
        evidence=[
            S.EventRef(seq=step.seq, type=type_name(step.event), leaf_hash=step.link)
            for step in _evidence_steps(a)
        ],
    )
