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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

import msgspec

from ledger.errors import UsageError
from ledger.events import BankPublished, CaseSpec, RunStarted
from projections import (
    aggregates,
    benchmark,
    calibration,
    claims,
    efficiency,
    fairness,
    quality,
    slices,
    variants,
)
from projections.caseruns import Attempt, BankInfo, RunInfo, State, attempts_of_run
from projections.report import schema as S
from projections.report.caserun_entry import caserun_entry, compact_caserun
from projections.report.jsonio import (
    caserun_json,
    from_json,
    from_json_v2,
    from_json_v3,
    from_plain,
    plain,
    splice_caseruns,
    to_json,
    to_plain,
)
from projections.report.schema import CONTRACT, CONTRACT_V2, CONTRACT_V3
from projections.report.significance import section_statistics
from projections.report.totals import (
    bank_cases,
    recorded_overview,
    run_overview,
    run_totals,
    stream_totals,
)

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


def _run_entry(
    info: RunInfo,
    version: str,
    cases: Sequence[CaseSpec],
    attempts: Sequence[Attempt],
    bank: BankPublished | None = None,
    trusted: Mapping[str, list[int | None]] | None = None,
) -> S.RunEntry:
    started = info.started
    scored = aggregates.summarize(cases, attempts)
    kind = S.SelfTestRunEntry if started.run_kind == "self_test" else S.RunEntry
    imported = None if bank is None else benchmark.summarize(bank, cases, attempts)
    extra: dict[str, Any] = {}
    if imported is not None:  # absent otherwise: other reports keep their bytes
        extra["benchmark"] = imported
    if slices.has_slices(attempts):  # likewise: runs without slice events keep their bytes
        extra["slices"] = slices.summarize(attempts, {c.id: c for c in cases})
    if claims.has_claims(attempts):  # likewise for claims.checked.v1 events
        extra["claims"] = claims.summarize(attempts)
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
        quality=quality.summarize(attempts),
        scores=scored.scores,
        cases=scored.cases,
        efficiency=efficiency.summarize(attempts),
        variant_diagnostics=variants.summarize(attempts),
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
        calibration=summary,
        rank=None,
        withdrawn=_withdrawal(info),
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
    cases = bank_cases(state, started)  # raises when the bank is unknown
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
        caseruns=[caserun_entry(a) for a in attempts],
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
        fairness=fairness.classify(fair_input) if ranked else None,
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
            S.Gold(case=g.case_id, columns=list(g.columns), rows=plain(g.rows), digest=g.digest)
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
