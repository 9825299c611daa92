"""The report: a pure function of (the fold state at tree size N, a scorer version, the contract).

:func:`build_report` returns a :class:`~projections.report.schema.Report` (the one
schema, ``schema.py``; every number that is not a count is a decimal string) and
:func:`to_json` gives its canonical bytes (sorted keys, no floats), the source of
the Markdown and HTML views. Every list is in an explicit order (sections by kind, bank and
scorer major; runs by rank then id; cases in bank order; attempts by number);
nothing depends on dict insertion order, the clock, paths or randomness.
docs/reports.md describes every field; docs/report.schema.json is generated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, TypeVar

import msgspec

from ledger.codec import canonical_json
from ledger.errors import InternalError, UsageError
from ledger.events import (
    BankPublished,
    CaseSpec,
    Event,
    PromptSent,
    RunFinished,
    RunStarted,
    RunTotals,
)
from projections import (
    aggregates,
    benchmark,
    calibration,
    caseruns,
    claims,
    efficiency,
    fairness,
    quality,
    slices,
    variants,
)
from projections.caseruns import (
    Attempt,
    BankInfo,
    RunInfo,
    State,
    Step,
    attempts_of_run,
    type_name,
)
from projections.report import schema as S
from projections.report.schema import CONTRACT, CONTRACT_V2, CONTRACT_V3
from projections.report.significance import section_statistics

__all__ = [
    "CONTRACT",
    "HOW_TO_READ",
    "KIND_ORDER",
    "Detail",
    "RunPart",
    "assemble",
    "assemble_v2",
    "assemble_v3",
    "build_report",
    "build_report_v2",
    "build_report_v3",
    "caserun_json",
    "compact_caserun",
    "from_json",
    "from_json_v2",
    "from_json_v3",
    "from_plain",
    "recorded_overview",
    "run_overview",
    "run_part",
    "run_totals",
    "scorer_major",
    "splice_caseruns",
    "stream_totals",
    "to_json",
    "to_plain",
    "unknown_error",
    "with_statistics",
    "withdrawn_error",
    "withdrawn_run",
]

SectionKind = Literal["models", "self_test", "calibration"]
#: Which report contract is built: ``stats`` (``caseledger-report/3``, the default of
#: ``caseledger report``: compact evidence and each section's statistics, issue 32),
#: ``compact`` (``caseledger-report/2``) or ``full`` (``caseledger-report/1``, every
#: event's evidence verbatim). Markdown and HTML show the statistics only with ``stats``,
#: so reports published under ``/1`` and ``/2`` rebuild byte for byte in every format.
Detail = Literal["stats", "compact", "full"]
T = TypeVar("T")
#: Section kinds in the order they appear; only ``models`` is ranked.
KIND_ORDER: tuple[SectionKind, ...] = ("models", "self_test", "calibration")
_KIND_LABEL = {
    "models": "Models",
    "self_test": "Self-test (not ranked)",
    "calibration": "Calibration (oracle checks, never ranked)",
}
_KIND_OF_RUN: dict[str, SectionKind] = {
    "model": "models",
    "self_test": "self_test",
    "calibration": "calibration",
}

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


def _identity(started: RunStarted, attempts: Sequence[Attempt]) -> S.ModelIdentity:
    responses = [a.response for a in attempts if a.response]
    resolved = sorted({r.resolved_model for r in responses if r.resolved_model is not None})
    recorded = sorted({r.recorded_model for r in responses if r.recorded_model is not None})
    source: Literal["resolved_by_provider", "recorded_claim", "requested_only"]
    if resolved:
        source = "resolved_by_provider"
    elif recorded:
        source = "recorded_claim"
    else:
        source = "requested_only"
    return S.ModelIdentity(
        requested=started.requested_model,
        provider=started.provider,
        auth_mode=started.auth_mode,
        identity_source=source,
        resolved=resolved,
        recorded=recorded,
    )


def _configured(started: RunStarted) -> S.Configured:
    return S.Configured(
        harness_kind=started.harness_kind,
        bridge_version=started.bridge_version,
        policy_version=started.policy_version,
        response_mode=started.response_mode,
        single_turn=started.single_turn,
        tools=started.tools,
        retries=started.retries,
        context_isolation=started.context_isolation,
        timeout_ms=started.timeout_ms,
        system_prompt_digest=started.system_prompt_digest,
        prompt_contract_digest=started.prompt_contract_digest,
        params=started.params,
    )


def _typed(value: Any, kind: type[T]) -> T:
    """A summary dict of a projection module as its report struct (its fields are checked)."""
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise InternalError(exc, where=f"a report block does not match {kind.__name__}") from None


def _run_entry(
    info: RunInfo,
    version: str,
    cases: Sequence[CaseSpec],
    attempts: Sequence[Attempt],
    bank: BankPublished | None = None,
    trusted: Mapping[str, list[int | None]] | None = None,
) -> S.RunEntry:
    started = info.started
    scores = aggregates.summarize(cases, attempts)
    kind = S.SelfTestRunEntry if started.run_kind == "self_test" else S.RunEntry
    imported = None if bank is None else benchmark.summarize(bank, cases, attempts)
    extra: dict[str, Any] = {}
    if imported is not None:  # absent otherwise: other reports keep their bytes
        extra["benchmark"] = _typed(imported, S.BenchmarkBlock)
    if slices.has_slices(attempts):  # likewise: runs without slice events keep their bytes
        extra["slices"] = _typed(slices.summarize(attempts, {c.id: c for c in cases}), S.SliceBlock)
    if claims.has_claims(attempts):  # likewise for claims.checked.v1 events
        extra["claims"] = _typed(claims.summarize(attempts), S.ClaimBlock)
    extra.update(_signer(trusted or {}, info))
    return kind(
        **extra,
        run=started.run_id,
        profile=started.profile,
        adapter_kind=started.adapter_kind,
        dates=S.Dates(first_event=info.first_at, last_event=info.last_at),
        status=info.finished.status if info.finished is not None else "unfinished",
        attempts_per_case=started.attempts,
        scorer_version=version,
        model=_identity(started, attempts),
        configured=_configured(started),
        versions=started.versions,
        price_snapshot_digest=started.price_snapshot_digest,
        replay_file_sha256=started.replay_file_sha256,
        quality=_typed(quality.summarize(attempts), S.Quality),
        scores=S.Scores(
            auxiliary=True,
            model_score=scores["model_score"],
            dimensions=scores["dimensions"],
            difficulties=scores["difficulties"],
        ),
        cases=[_typed(c, S.CaseScores) for c in scores["cases"]],
        efficiency=_typed(efficiency.summarize(attempts), S.Efficiency),
        variant_diagnostics=_typed(variants.summarize(attempts), S.VariantDiagnostics),
        rank=None,
        withdrawn=_withdrawal(info),
    )


def _withdrawal(info: RunInfo) -> S.Withdrawal | msgspec.UnsetType:
    """``withdrawn`` of a withdrawn run a report shows (``--include-withdrawn``); UNSET
    (left out of the bytes) for any other run, so reports without withdrawals keep them."""
    w = info.withdrawn
    if w is None or info.withdrawn_seq is None:
        return msgspec.UNSET
    return S.Withdrawal(reason=w.reason, seq=info.withdrawn_seq, at=w.at)


def _withdrawn_runs(state: State, chosen: Sequence[str], shown: bool) -> list[S.WithdrawnRun]:
    """The withdrawn runs among ``chosen``, in run id order."""
    found = (withdrawn_run(state.runs[run_id], shown) for run_id in chosen)
    return [w for w in found if w is not None]


def _signer(trusted: Mapping[str, list[int | None]], info: RunInfo) -> dict[str, S.RunSigner]:
    """``signer`` for a run imported from another machine; nothing for a run recorded here
    (so the reports of single-machine ledgers keep their bytes)."""
    if info.signer_key_id is None:
        return {}
    trust = trusted.get(info.signer_key_id)
    extra: dict[str, Any] = {}
    if info.signer_origin is not None:
        extra["origin"] = info.signer_origin
    if trust is not None:
        extra["trusted_since"] = trust[0]
        if trust[1] is not None:
            extra["revoked_at"] = trust[1]
    signer = S.RunSigner(name=info.signer_name or "", key_id=info.signer_key_id, **extra)
    return {"signer": signer}


def _calibration_entry(state: State, info: RunInfo) -> S.CalibrationRunEntry:
    started = info.started
    summary = calibration.summarize(state.calibrations.get(started.run_id))
    return S.CalibrationRunEntry(
        **_signer(state.trusted, info),
        run=started.run_id,
        profile=started.profile,
        adapter_kind=started.adapter_kind,
        dates=S.Dates(first_event=info.first_at, last_event=info.last_at),
        status=info.finished.status if info.finished is not None else "unfinished",
        scorer_version=started.versions.scorer,
        versions=started.versions,
        calibration=_typed(summary, S.Calibration),
        rank=None,
        withdrawn=_withdrawal(info),
    )


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


def _variants(a: Attempt) -> S.CaseRunVariants | None:
    found = variants.caserun_variants(a)
    return None if found is None else _typed(found, S.CaseRunVariants)


def _diagnostics(a: Attempt) -> dict[str, Any]:
    """The slice and claims of an attempt's answer, only when recorded (issue 19): a
    CaseRun without them keeps its bytes."""
    extra: dict[str, Any] = {}
    if a.slice is not None:
        extra["slice"] = S.CaseRunSlice(
            component=a.slice.component,
            detail=a.slice.detail,
            slicer_version=a.slice.slicer_version,
        )
    found = claims.attempt_claims(a)
    if found is not None:
        extra["claims"] = [_typed(c, S.CaseRunClaim) for c in found]
    return extra


def _caserun(a: Attempt) -> S.CaseRun:
    p, g, e, s = a.parsed, a.guarded, a.execution, a.score
    return S.CaseRun(
        **_diagnostics(a),
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
            rows=_plain(e.rows),
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
        variants=_variants(a),
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


# ----------------------------------------------------------------- sections


def _ranked(entries: list[S.RunEntry]) -> list[S.RunEntry]:
    def key(e: S.RunEntry) -> tuple[Decimal, Decimal]:
        rate = e.quality.result_correct_rate
        score = e.scores.model_score
        # Best result-correct rate first, the auxiliary score breaks ties; null ranks last.
        return (
            Decimal(rate) if rate is not None else Decimal(-1),
            Decimal(score) if score is not None else Decimal(-1),
        )

    entries = sorted(entries, key=lambda e: e.run)
    entries.sort(key=key, reverse=True)
    previous: tuple[Decimal, Decimal] | None = None
    rank = 0
    out = []
    for position, entry in enumerate(entries, start=1):
        current = key(entry)
        if current != previous:
            rank, previous = position, current
        out.append(msgspec.structs.replace(entry, rank=rank))
    return out


@dataclass
class RunPart:
    """One run's share of a report, built from a fold that holds that run: its section
    key (kind, bank hash, scorer major), the scorer version it is viewed under, its run
    entry, its CaseRuns (in attempt order; a streamed report writes them out and empties
    the list) and, for a model run, what the section's fairness block reads of it."""

    run: str
    key: tuple[SectionKind, str, str]
    version: str
    entry: S.AnyRunEntry
    caseruns: list[S.CaseRun]
    fair: fairness.RunInvocations | None
    #: ``detail="compact"``: the ``caseledger-report/2`` CaseRuns (``caseruns`` is then
    #: empty) and the text of each prompt they name, by SHA-256.
    compact: list[S.CompactCaseRun] = field(default_factory=list)
    prompts: dict[str, str] = field(default_factory=dict)


def run_part(state: State, run_id: str, scorer: str | None, detail: Detail = "full") -> RunPart:
    """The :class:`RunPart` of run ``run_id`` of ``state`` (which must hold its bank), with
    ``caseledger-report/1`` CaseRuns (``detail="full"``) or ``/2`` ones (``"compact"``, and
    ``"stats"``: ``/3`` carries the CaseRuns of ``/2``).

    Raises:
        UsageError: the run's bank is not published at this tree size.
    """
    info = state.runs[run_id]
    started = info.started
    kind = _KIND_OF_RUN.get(started.run_kind, "calibration")
    # A calibration's verdicts were made by the scorer it recorded; --scorer views scores.
    version = started.versions.scorer if kind == "calibration" else None
    version = version or scorer or started.versions.scorer
    key = (kind, started.bank_hash, scorer_major(version))
    cases = _bank_cases(state, started)  # raises when the bank is unknown
    if kind == "calibration":
        # No attempts and no score: the oracle's verdicts on mutants and controls.
        return RunPart(run_id, key, version, _calibration_entry(state, info), [], None)
    attempts = attempts_of_run(state, run_id, version)
    bank = state.banks[started.bank_hash].event
    part = RunPart(
        run=run_id,
        key=key,
        version=version,
        entry=_run_entry(info, version, cases, attempts, bank, state.trusted),
        caseruns=[_caserun(a) for a in attempts],
        fair=fairness.run_invocations(attempts) if kind == "models" else None,
    )
    if detail != "full":
        for a, full in zip(attempts, part.caseruns, strict=True):
            if full.prompt_sha256 is not None and full.prompt is not None:
                part.prompts[full.prompt_sha256] = full.prompt
            part.compact.append(compact_caserun(a, full))
        part.caseruns = []
    return part


def _section(
    banks: Mapping[str, BankInfo],
    key: tuple[SectionKind, str, str],
    parts: list[RunPart],
    with_gold: bool,
) -> S.Section:
    kind, bank_hash, major = key
    bank = banks[bank_hash].event
    parts = sorted(parts, key=lambda p: p.run)
    entries: list[S.AnyRunEntry] = [p.entry for p in parts]
    details = [c for p in parts for c in p.caseruns]
    ranked = kind == "models"
    fair_input = [(p.run, p.fair) for p in parts if p.fair is not None]
    if ranked:
        entries = list(_ranked([e for e in entries if isinstance(e, S.RunEntry)]))
    else:
        entries.sort(key=lambda e: e.run)
    return S.Section(
        kind=kind,
        ranked=ranked,
        title=_title(kind, bank.bank_id, bank.version, bank_hash, major, bank.build.engine),
        bank=S.Bank(
            id=bank.bank_id,
            version=bank.version,
            hash=bank_hash,
            published_seq=banks[bank_hash].seq,
            gold_digest=bank.gold_digest,
            engine=_engine(bank),
        ),
        scorer_major=major,
        scorer_versions=sorted({p.version for p in parts}),
        fairness=_typed(fairness.classify(fair_input), S.Fairness) if ranked else None,
        cases=[
            S.SectionCase(
                case=c.id,
                dimension=c.dimension,
                difficulty=c.difficulty,
                weight=str(c.weight),
                question=c.question,
                question_en=c.question_en,
                required_ast=list(c.required_ast),
            )
            for c in bank.cases
        ],
        runs=entries,
        caseruns=details,
        gold=[
            S.Gold(case=g.case_id, columns=list(g.columns), rows=_plain(g.rows), digest=g.digest)
            for g in bank.gold
        ]
        if with_gold
        else None,
    )


def _engine(bank: BankPublished) -> S.BankEngine | msgspec.UnsetType:
    b = bank.build
    if b.engine == "duckdb":
        return msgspec.UNSET
    return S.BankEngine(
        name=b.engine,
        version=b.engine_version,
        transpiled_from=b.transpiled_from,
        differences=[f"{d.case_id}: {d.detail}" for d in b.engine_differences],
    )


def _title(
    kind: str, bank_id: str, version: str, bank_hash: str, major: str, engine: str = "duckdb"
) -> str:
    label = _KIND_LABEL[kind]
    short = bank_hash.removeprefix("sha256:")[:12]
    on = "" if engine == "duckdb" else f" on {engine}"
    return f"{label} - bank {bank_id} {version} (sha256:{short}){on} - scorer {major}.x"


def build_report(
    state: State,
    *,
    root_hash: bytes,
    scorer: str | None = None,
    runs: Sequence[str] | None = None,
    with_gold: bool = False,
    include_withdrawn: bool = False,
) -> S.Report:
    """The canonical report of a fold state covering the first ``state.size`` events.

    Args:
        state: the fold state at tree size N (``state.size``).
        root_hash: the RFC 9162 root of leaves 0..N-1 (the checkpoint it is built from).
        scorer: view every run under this scorer version; None = the version each run
            recorded in its RunStarted.
        runs: only these run ids (None = every run).
        with_gold: the internal view, with gold rows (never reference SQL).
        include_withdrawn: show withdrawn runs (marked); by default they are left out and
            listed in ``withdrawn``.

    Raises:
        UsageError: a named run does not exist at this tree size.
    """
    parts, selection, listed = _parts(state, scorer, runs, include_withdrawn, "full")
    return assemble(
        parts,
        state.banks,
        size=state.size,
        root_hash=root_hash,
        scorer=scorer,
        selection=selection,
        with_gold=with_gold,
        withdrawn=listed,
    )


def build_report_v2(
    state: State,
    *,
    root_hash: bytes,
    scorer: str | None = None,
    runs: Sequence[str] | None = None,
    with_gold: bool = False,
    include_withdrawn: bool = False,
) -> S.ReportV2:
    """The compact ``caseledger-report/2`` report of a fold state (options as
    :func:`build_report`): the same fields with compact CaseRuns and a prompts table."""
    parts, selection, listed = _parts(state, scorer, runs, include_withdrawn, "compact")
    return assemble_v2(
        parts,
        state.banks,
        size=state.size,
        root_hash=root_hash,
        scorer=scorer,
        selection=selection,
        with_gold=with_gold,
        withdrawn=listed,
    )


def build_report_v3(
    state: State,
    *,
    root_hash: bytes,
    scorer: str | None = None,
    runs: Sequence[str] | None = None,
    with_gold: bool = False,
    include_withdrawn: bool = False,
) -> S.ReportV3:
    """The ``caseledger-report/3`` report of a fold state (options as :func:`build_report`):
    the ``/2`` report with each section's statistics."""
    v2 = build_report_v2(
        state,
        root_hash=root_hash,
        scorer=scorer,
        runs=runs,
        with_gold=with_gold,
        include_withdrawn=include_withdrawn,
    )
    return with_statistics(v2)


def _parts(
    state: State,
    scorer: str | None,
    runs: Sequence[str] | None,
    include_withdrawn: bool,
    detail: Detail,
) -> tuple[list[RunPart], list[str] | None, list[S.WithdrawnRun]]:
    """The parts of the chosen runs, the ``selection`` and the withdrawn list of a report."""
    chosen = sorted(state.runs) if runs is None else sorted(set(runs))
    unknown = [r for r in chosen if r not in state.runs]
    if unknown:
        raise unknown_error(unknown, state.size)
    listed = _withdrawn_runs(state, chosen, include_withdrawn)
    if runs is not None and listed and not include_withdrawn:
        raise withdrawn_error(listed)
    if not include_withdrawn:
        chosen = [r for r in chosen if state.runs[r].withdrawn is None]
    parts = [run_part(state, run_id, scorer, detail) for run_id in chosen]
    return parts, None if runs is None else chosen, listed


def unknown_error(unknown: Sequence[str], size: int) -> UsageError:
    """The error of a report that names runs the first ``size`` events do not have."""
    return UsageError(
        f"no run {', '.join(unknown)} in the first {size} events",
        hint="list runs with `caseledger runs`",
    )


def withdrawn_error(listed: Sequence[S.WithdrawnRun]) -> UsageError:
    """The error of a report that names withdrawn runs without ``--include-withdrawn``."""
    return UsageError(
        "; ".join(f"run {w.run} is withdrawn (reason: {w.reason})" for w in listed),
        hint="report, runs and gate show it with --include-withdrawn, marked as withdrawn; "
        "a withdrawn run is never frozen as a baseline",
    )


def withdrawn_run(info: RunInfo, shown: bool) -> S.WithdrawnRun | None:
    """The ``withdrawn`` list entry of a withdrawn run; None for a run not withdrawn."""
    w, seq = info.withdrawn, info.withdrawn_seq
    if w is None or seq is None:
        return None
    return S.WithdrawnRun(run=info.started.run_id, reason=w.reason, seq=seq, at=w.at, shown=shown)


def assemble(
    parts: Iterable[RunPart],
    banks: Mapping[str, BankInfo],
    *,
    size: int,
    root_hash: bytes,
    scorer: str | None,
    selection: list[str] | None,
    with_gold: bool,
    withdrawn: list[S.WithdrawnRun],
) -> S.Report:
    """The report of the runs' parts (any order): sections by kind, bank and scorer major.

    A part whose CaseRuns were written out elsewhere gives a section with fewer (or
    no) CaseRuns; :func:`splice_caseruns` puts them back into the bytes.
    """
    groups: dict[tuple[SectionKind, str, str], list[RunPart]] = {}
    for part in parts:
        groups.setdefault(part.key, []).append(part)

    def order(key: tuple[SectionKind, str, str]) -> tuple[Any, ...]:
        kind, bank_hash, major = key
        bank = banks.get(bank_hash)
        ident = (bank.event.bank_id, bank.event.version) if bank else ("", "")
        return (KIND_ORDER.index(kind), *ident, bank_hash, major)

    sections = [_section(banks, key, groups[key], with_gold) for key in sorted(groups, key=order)]
    return S.Report(
        **({"withdrawn": withdrawn} if withdrawn else {}),
        contract=CONTRACT,
        checkpoint=S.Checkpoint(tree_size=size, root_hash="sha256:" + root_hash.hex()),
        view="internal-with-gold" if with_gold else "public",
        notice=(
            "INTERNAL VIEW: contains gold rows. Do not publish."
            if with_gold
            else "Public view: no reference SQL and no gold rows."
        ),
        scorer=S.ScorerView(requested=scorer),
        selection=S.Selection(runs=selection),
        sections=sections,
        how_to_read=list(HOW_TO_READ),
    )


def assemble_v2(
    parts: Iterable[RunPart],
    banks: Mapping[str, BankInfo],
    *,
    size: int,
    root_hash: bytes,
    scorer: str | None,
    selection: list[str] | None,
    with_gold: bool,
    withdrawn: list[S.WithdrawnRun],
) -> S.ReportV2:
    """The ``caseledger-report/2`` report of parts built with ``detail="compact"``: the
    sections, runs and order of :func:`assemble`, each section's compact CaseRuns and
    every prompt the parts name. Parts whose CaseRuns and prompts were written out
    elsewhere give empty lists; :func:`splice_caseruns` puts them back into the bytes."""
    parts = list(parts)
    base = assemble(
        parts,
        banks,
        size=size,
        root_hash=root_hash,
        scorer=scorer,
        selection=selection,
        with_gold=with_gold,
        withdrawn=withdrawn,
    )
    compact = {p.run: p.compact for p in parts}
    prompts: dict[str, str] = {}
    for part in parts:
        prompts.update(part.prompts)
    sections = []
    for section in base.sections:
        fields = {f: getattr(section, f) for f in section.__struct_fields__}
        runs = sorted(e.run for e in section.runs)
        fields["caseruns"] = [c for run in runs for c in compact[run]]
        sections.append(S.SectionV2(**fields))
    extra = {} if isinstance(base.withdrawn, msgspec.UnsetType) else {"withdrawn": base.withdrawn}
    return S.ReportV2(
        **extra,
        contract=CONTRACT_V2,
        checkpoint=base.checkpoint,
        view=base.view,
        notice=base.notice,
        scorer=base.scorer,
        selection=base.selection,
        prompts=dict(sorted(prompts.items())),
        sections=sections,
        how_to_read=base.how_to_read,
    )


def assemble_v3(
    parts: Iterable[RunPart],
    banks: Mapping[str, BankInfo],
    *,
    size: int,
    root_hash: bytes,
    scorer: str | None,
    selection: list[str] | None,
    with_gold: bool,
    withdrawn: list[S.WithdrawnRun],
) -> S.ReportV3:
    """The ``caseledger-report/3`` report of parts built with ``detail="stats"``: the
    ``/2`` report of :func:`assemble_v2` with each section's statistics."""
    base = assemble_v2(
        parts,
        banks,
        size=size,
        root_hash=root_hash,
        scorer=scorer,
        selection=selection,
        with_gold=with_gold,
        withdrawn=withdrawn,
    )
    return with_statistics(base)


def with_statistics(report: S.ReportV2) -> S.ReportV3:
    """A ``caseledger-report/2`` report as ``/3``: the same fields, and each section's
    statistics (``projections/report/significance.py``, docs/statistics.md)."""
    sections = [
        S.SectionV3(
            **{f: getattr(section, f) for f in section.__struct_fields__},
            statistics=section_statistics(section),
        )
        for section in report.sections
    ]
    fields = {f: getattr(report, f) for f in report.__struct_fields__}
    return S.ReportV3(**{**fields, "contract": CONTRACT_V3, "sections": sections})


def caserun_json(caserun: S.CaseRun | S.CompactCaseRun) -> bytes:
    """The canonical bytes of one CaseRun as it appears in a report's ``caseruns`` list."""
    return canonical_json(caserun)


_EMPTY_CASERUNS = b'"caseruns":[]'


_EMPTY_PROMPTS = b'"prompts":{}'


def splice_caseruns(
    skeleton: S.Report | S.ReportV2 | S.ReportV3,
    caseruns: Sequence[Iterable[bytes]],
    prompts: Iterable[bytes] = (),
) -> Iterator[bytes]:
    """The canonical bytes of ``skeleton`` (every section's ``caseruns`` empty) with
    section i's CaseRuns taken from ``caseruns[i]`` (chunks of canonical CaseRun bytes
    already joined by commas): the same bytes :func:`to_json` gives for the whole report.
    For a ``caseledger-report/2`` skeleton (its ``prompts`` table empty), ``prompts``
    gives the table's entries (``"sha256:...":"text"`` pieces in key order, joined by
    commas).

    Keys are sorted and strings escape every quote, so ``"caseruns":[]`` occurs in the
    skeleton's bytes exactly once per section, in section order, and nowhere else. The
    first ``"prompts":{}`` is the table's: only the checkpoint, the contract, the
    reading notes and the notice come before it, and none of them holds a map.
    """
    data = to_json(skeleton)
    if len(caseruns) != len(skeleton.sections):
        raise InternalError(ValueError("one CaseRun source per section"), where="splice")
    start = 0
    if isinstance(skeleton, S.ReportV2 | S.ReportV3):
        at = data.index(_EMPTY_PROMPTS) + len(_EMPTY_PROMPTS) - 1
        yield data[:at]
        yield from prompts
        start = at
    for chunks in caseruns:
        at = data.index(_EMPTY_CASERUNS, start)
        yield data[start : at + len(_EMPTY_CASERUNS) - 1]
        yield from chunks
        start = at + len(_EMPTY_CASERUNS) - 1
    if data.find(_EMPTY_CASERUNS, start) >= 0:
        raise InternalError(ValueError("more sections than CaseRun sources"), where="splice")
    yield data[start:]


def to_json(report: S.Report | S.ReportV2 | S.ReportV3) -> bytes:
    """Canonical JSON bytes of a report (sorted keys, no floats), with a final newline."""
    return canonical_json(report) + b"\n"


def from_json(data: bytes | str) -> S.Report:
    """Decode report JSON into the schema (the inverse of :func:`to_json`).

    Raises:
        UsageError: the bytes are not a ``caseledger-report/1`` report; names the JSON path.
    """
    return _decode(data, S.Report, CONTRACT, "docs/report.schema.json")


def from_json_v2(data: bytes | str) -> S.ReportV2:
    """Decode ``caseledger-report/2`` JSON into its schema (the inverse of :func:`to_json`).

    Raises:
        UsageError: the bytes are not a ``caseledger-report/2`` report; names the JSON path.
    """
    return _decode(data, S.ReportV2, CONTRACT_V2, "docs/report-v2.schema.json")


def from_json_v3(data: bytes | str) -> S.ReportV3:
    """Decode ``caseledger-report/3`` JSON into its schema (the inverse of :func:`to_json`).

    Raises:
        UsageError: the bytes are not a ``caseledger-report/3`` report; names the JSON path.
    """
    return _decode(data, S.ReportV3, CONTRACT_V3, "docs/report-v3.schema.json")


def _decode(data: bytes | str, kind: type[T], contract: str, schema: str) -> T:
    try:
        return msgspec.json.decode(data, type=kind)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise UsageError(
            f"not a {contract} report: {exc}",
            hint=f"build one with `caseledger report --format json` ({schema})",
        ) from None


def to_plain(report: S.Report) -> dict[str, Any]:
    """The report as the JSON document it encodes to (dicts, lists, str, int, bool, None)."""
    plain: dict[str, Any] = msgspec.json.decode(to_json(report))
    return plain


def from_plain(document: Mapping[str, Any]) -> S.Report:
    """A report JSON document (as :func:`to_plain` gives) read back into the schema.

    Raises:
        UsageError: the document does not match ``caseledger-report/1``; names the path.
    """
    try:
        return msgspec.convert(document, S.Report)
    except msgspec.ValidationError as exc:
        raise UsageError(
            f"not a {CONTRACT} report: {exc}",
            hint="build one with `caseledger report --format json` (docs/report.schema.json)",
        ) from None


def _on(state: State, started: RunStarted) -> str:
    """``:<engine>`` for a run on a bank that is not on DuckDB (as ``--bank`` spells it)."""
    bank = state.banks.get(started.bank_hash)
    engine = "duckdb" if bank is None else bank.event.build.engine
    return "" if engine == "duckdb" else f":{engine}"


def run_totals(state: State, run_id: str) -> RunTotals:
    """The figures of a run's ``runs`` row that depend on its attempts, under its own scorer.

    The one definition: ``caseledger runs`` computes them so when it folds a run, the
    runner when it records them in the run's RunFinished (``RunFinished.totals``),
    ``verify --recompute`` when it re-derives them. ``first_event`` is the earliest
    date the run's events folded so far claim.
    """
    info = state.runs[run_id]
    started = info.started
    attempts = attempts_of_run(state, run_id, started.versions.scorer)
    cases = _bank_cases(state, started)
    return RunTotals(
        done=sum(1 for a in attempts if a.outcome != "unscored"),
        planned=len(attempts),
        result_correct_rate=quality.summarize(attempts)["result_correct_rate"],
        score=aggregates.summarize(cases, attempts)["model_score"],
        first_event=info.first_at,
    )


def stream_totals(bank: BankInfo, items: Iterable[tuple[int, bytes, Event]]) -> RunTotals | None:
    """:func:`run_totals` of the run whose stream ``items`` are (seq, leaf hash, event), in
    log order (a run's events, up to and not including the RunFinished to carry them),
    on ``bank`` (the BankPublished its RunStarted names). None when the stream holds no
    RunStarted, is a calibration run's (its row is not made of attempts), or holds a
    RunWithdrawn (such a run is folded by ``runs``, which then marks it withdrawn).
    Model and self-test runs (``run_kind`` ``model``, ``self_test``) get totals: their
    rows are made alike.
    """
    state = caseruns.initial()
    state.banks[bank.event.content_sha256] = bank
    for item in items:
        state = caseruns.apply(state, item)
    if len(state.runs) != 1:
        return None
    ((run_id, info),) = state.runs.items()
    if info.started.run_kind == "calibration" or info.withdrawn is not None:
        return None
    return run_totals(state, run_id)


def _overview_row(state: State, info: RunInfo, totals: RunTotals) -> dict[str, Any]:
    """A ``runs`` row from a run's RunStarted, last RunFinished, withdrawal and totals."""
    started = info.started
    row: dict[str, Any] = {
        "run": started.run_id,
        "run_kind": started.run_kind,
        "bank": f"{started.bank_id}@{started.bank_version}{_on(state, started)}",
        "bank_hash": started.bank_hash,
        "adapter": started.adapter_kind,
        "profile": started.profile,
        "requested_model": started.requested_model,
        "status": info.finished.status if info.finished is not None else "unfinished",
        "done": totals.done,
        "planned": totals.planned,
        "result_correct_rate": totals.result_correct_rate,
        "score": totals.score,
        "scorer_version": started.versions.scorer,
        "first_event": totals.first_event,
        "kill_rate": None,
    }
    if info.withdrawn is not None:  # only then: listings without withdrawals keep their shape
        row["withdrawn"] = info.withdrawn.reason
    return row


def recorded_overview(state: State, started: RunStarted, finished: RunFinished) -> dict[str, Any]:
    """The ``runs`` row of a model run whose last event is ``finished``, a RunFinished
    carrying ``totals``: the same row :func:`run_overview` gives when it folds the run.

    ``state`` holds the published banks (for the bank's engine; a bank not published
    fails as in the fold). The fold's first date also counts the RunFinished's own.
    """
    totals = finished.totals
    if isinstance(totals, msgspec.UnsetType):
        raise InternalError(ValueError("a RunFinished without totals"), where="runs")
    _bank_cases(state, started)  # a run on a bank that is not published fails as folded
    info = RunInfo(started, -1, started.at, started.at, finished=finished)
    first = min(totals.first_event, finished.at)
    return _overview_row(state, info, msgspec.structs.replace(totals, first_event=first))


def run_overview(state: State) -> list[dict[str, Any]]:
    """One row per run (in run id order) for ``caseledger runs``, under each run's own scorer."""
    rows = []
    for run_id in sorted(state.runs):
        info = state.runs[run_id]
        started = info.started
        row = _overview_row(state, info, run_totals(state, run_id))
        if started.run_kind == "calibration":
            # No attempts and no score: done when its totals are recorded.
            cal = calibration.summarize(state.calibrations.get(run_id))
            row["done"] = row["planned"] if cal["finished"] else 0
            row["result_correct_rate"] = row["score"] = None
            row["kill_rate"] = cal["kill_rate"]
        rows.append(row)
    return rows
