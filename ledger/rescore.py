"""Rescoring from recorded evidence, and the ``verify --recompute`` check.

``rescore`` appends, per attempt whose latest terminal event is a score, a new
ScoreComputed under another scorer version, computed from the evidence the
latest score names (the recorded OutputParsed, SqlGuarded, SqlExecuted or
ProviderFailed). It makes no model call. SQL is re-executed only with
``reexecute=True``: the new execution is appended as a SqlExecuted and the new
score names it as evidence. Old ScoreComputed events are never touched, so a
report built for the old scorer version at the old tree size keeps its bytes.

``recompute_hook`` re-derives every recorded ScoreComputed with the scorer
version it names, from the evidence it names, and raises a VerificationError
naming the first seq whose recorded fields differ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ledger.audit import published_references
from ledger.bank.registry import PublishedBank, bank_paths
from ledger.errors import BankError, InternalError, LedgerError, UsageError, VerificationError
from ledger.events import (
    BankPublished,
    EventBase,
    OutputParsed,
    ProviderFailed,
    RunStarted,
    ScoreComputed,
    SqlExecuted,
    SqlGuarded,
)
from ledger.harness import score as score_mod
from ledger.harness.attempt import Stream
from ledger.keys import Signer
from ledger.snapshot import read_state
from ledger.store import Ledger, StoredEvent, link_of
from projections.caseruns import CaseRun, State
from projections.outcome import terminal as outcome_of

__all__ = ["RescoreSummary", "recompute_hook", "rescore", "score_fields"]

_ENVELOPE = ("stream", "stream_seq", "stream_prev", "at", "case_id", "attempt", "evidence")


@dataclass
class RescoreSummary:
    """What a rescore appended and what it left alone, per reason."""

    version: str
    appended: int = 0
    reexecuted: int = 0
    runs: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        """Count one attempt left without a new score."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def summary(self) -> str:
        """One line for people."""
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items())) or "none"
        return (
            f"rescored {self.appended} attempts of {len(self.runs)} runs under scorer "
            f"{self.version} (re-executed {self.reexecuted}); skipped: {skipped}"
        )


def _references(home: Path, info: BankPublished, seq: int) -> dict[str, str]:
    db_path, files_dir = bank_paths(home, info.content_sha256)
    try:
        return PublishedBank(info, seq, db_path, files_dir).references()
    except BankError as exc:
        raise UsageError(
            f"cannot rescore or recompute runs on bank {info.bank_id}@{info.version}: "
            f"{exc.message}",
            hint="scores compare against the reference SQL kept beside the ledger; "
            "publish the bank folder again (caseledger bank publish) to restore it",
        ) from None


def score_fields(
    bank: BankPublished,
    references: dict[str, str],
    case_id: str,
    evidence: Sequence[EventBase],
    version: str,
) -> dict[str, Any]:
    """The ScoreComputed fields ``version`` derives from the named evidence events."""
    case = next((c for c in bank.cases if c.id == case_id), None)
    gold = next((g for g in bank.gold if g.case_id == case_id), None)
    if case is None or gold is None:
        raise score_mod.ScoringError(f"bank {bank.bank_id} has no case {case_id!r}")
    found: dict[type, Any] = {}
    for ev in evidence:
        found[type(ev)] = ev  # the last execution wins, as in the runner
    return score_mod.score_attempt(
        case=case,
        gold=gold,
        parsed=found.get(OutputParsed),
        guarded=found.get(SqlGuarded),
        executed=found.get(SqlExecuted),
        provider_failure=found.get(ProviderFailed),
        reference_sql=references.get(case_id),
        version=version,
    )


def _latest_score(caserun: CaseRun) -> ScoreComputed | None:
    """The score to re-derive: the attempt's terminal under any scorer version, when it
    is a ScoreComputed (None when it is a cancellation or there is none)."""
    return outcome_of([s.event for s in caserun.steps], None).score


def _has_version(caserun: CaseRun, version: str, evidence: tuple[str, ...]) -> bool:
    """Whether the attempt's terminal under ``version`` is already a score of ``evidence``."""
    score = outcome_of([s.event for s in caserun.steps], version).score
    return score is not None and score.evidence == evidence


def rescore(
    ledger: Ledger,
    signer: Signer,
    home: Path,
    *,
    version: str,
    runs: Sequence[str] | None = None,
    reexecute: bool = False,
    clock: Callable[[], str],
) -> RescoreSummary:
    """Append ScoreComputed events under ``version`` for the chosen runs (all by default).

    ``clock`` gives each new event's ``at`` (a writer's claim, as in the runner).

    Raises:
        UsageError: unknown scorer version or run; bank files missing.
    """
    score_mod.get_scorer(version)  # unknown versions fail before anything is read
    state = read_state(ledger, runs=runs or None).state
    chosen = sorted(state.runs) if not runs else sorted(set(runs))
    missing = [r for r in chosen if r not in state.runs]
    if missing:
        raise UsageError(f"no run {', '.join(missing)} in {ledger.path}")
    summary = RescoreSummary(version, runs=chosen)
    for run_id in chosen:
        batch = _rescore_run(state, ledger, home, run_id, version, reexecute, summary, clock)
        if batch:
            ledger.append(batch, signer)
    return summary


def _rescore_run(
    state: State,
    ledger: Ledger,
    home: Path,
    run_id: str,
    version: str,
    reexecute: bool,
    summary: RescoreSummary,
    clock: Callable[[], str],
) -> list[EventBase]:
    started = state.runs[run_id].started
    bank_info = state.banks[started.bank_hash]
    bank = bank_info.event
    references = _references(home, bank, bank_info.seq)
    pool = None
    if reexecute:
        from ledger.harness.worker import WorkerPool

        db_path, _ = bank_paths(home, bank.content_sha256)
        pool = WorkerPool(db_path)
    head = ledger.stream_events(run_id)[-1]
    stream = Stream(run_id, clock, head)
    out: list[EventBase] = []
    try:
        for key in sorted(state.caseruns):
            caserun = state.caseruns[key]
            if caserun.run_id != run_id:
                continue
            latest = _latest_score(caserun)
            if latest is None:
                summary.skip("no_recorded_score")
                continue
            by_leaf = {s.link: s.event for s in caserun.steps}
            # _reexecute appends re-executed events, so the list holds the base type.
            evidence: list[EventBase] = [by_leaf[h] for h in latest.evidence if h in by_leaf]
            links = list(latest.evidence)
            if pool is not None:
                rerun = _reexecute(pool, bank, caserun, evidence, stream)
                if rerun is not None:
                    out.append(rerun[0])
                    evidence.append(rerun[0])
                    links.append(rerun[1])
                    summary.reexecuted += 1
            if _has_version(caserun, version, tuple(links)):
                summary.skip("already_scored")
                continue
            try:
                fields = score_fields(bank, references, caserun.case_id, evidence, version)
            except score_mod.ScoringError:
                summary.skip("scoring_failed")
                continue
            except LedgerError:
                raise
            except Exception as exc:
                # A scorer bug: this run's batch is dropped whole (runs before it stay).
                raise InternalError(
                    exc,
                    where=f"nothing was recorded for run {run_id}; it stopped at case "
                    f"{caserun.case_id} attempt {caserun.attempt}",
                ) from exc
            event, _ = stream.make(
                ScoreComputed,
                case_id=caserun.case_id,
                attempt=caserun.attempt,
                evidence=tuple(links),
                **fields,
            )
            out.append(event)
            summary.appended += 1
    finally:
        if pool is not None:
            pool.close()
    return out


def _reexecute(
    pool: Any, bank: BankPublished, caserun: CaseRun, evidence: list[EventBase], stream: Stream
) -> tuple[EventBase, str] | None:
    parsed = next((e for e in evidence if isinstance(e, OutputParsed)), None)
    guarded = next((e for e in evidence if isinstance(e, SqlGuarded)), None)
    if parsed is None or not parsed.sql or guarded is None or not guarded.passed:
        return None
    case = next(c for c in bank.cases if c.id == caserun.case_id)
    worker_try = 1
    result = pool.execute(parsed.sql, max_rows=case.max_rows)
    if result.error_kind == "worker_crash":  # retried once, as the runner does
        worker_try = 2
        result = pool.execute(parsed.sql, max_rows=case.max_rows)
    values = {name: getattr(result, name) for name in result.__struct_fields__}
    evidence[:] = [e for e in evidence if not isinstance(e, SqlExecuted)]
    return stream.make(
        SqlExecuted,
        case_id=caserun.case_id,
        attempt=caserun.attempt,
        worker_try=worker_try,
        **values,
    )


# ----------------------------------------------------------------- verify --recompute

_EVIDENCE_TYPES = (OutputParsed, SqlGuarded, SqlExecuted, ProviderFailed)


def _recorded(event: ScoreComputed) -> dict[str, Any]:
    raw = msgspec.to_builtins(event, order="sorted", builtin_types=())
    return {k: v for k, v in raw.items() if k not in _ENVELOPE and k != "type"}


def recompute_hook(banks_dir: Path) -> Callable[[Iterator[StoredEvent]], None]:
    """The ``verify --recompute`` check, reading bank files from ``banks_dir``.

    ``banks_dir`` holds each bank as ``<hex>/`` (``banks/`` beside the operator's
    ledger) or ``<bank>@<version>/`` (an audit export); see ``ledger.audit.bank_folder``.
    A bank file that differs from its BankPublished fails the check (exit 1); missing
    files mean it could not be made (exit 2).
    """

    def check(rows: Iterator[StoredEvent]) -> None:
        banks: dict[str, tuple[BankPublished, int]] = {}
        references: dict[str, dict[str, str]] = {}
        run_banks: dict[str, str] = {}
        evidence: dict[str, EventBase] = {}
        try:
            for row in rows:
                event = row.event()
                if isinstance(event, BankPublished):
                    banks.setdefault(event.content_sha256, (event, row.seq))
                elif isinstance(event, RunStarted):
                    run_banks[event.run_id] = event.bank_hash
                elif isinstance(event, _EVIDENCE_TYPES):
                    evidence[link_of(row.leaf_hash)] = event
                elif isinstance(event, ScoreComputed):
                    _check_score(row.seq, event, banks, references, run_banks, evidence, banks_dir)
        finally:
            # Close the ledger cursor now, before the caller closes the ledger.
            close = getattr(rows, "close", None)
            if close is not None:
                close()

    return check


def _check_score(
    seq: int,
    event: ScoreComputed,
    banks: dict[str, tuple[BankPublished, int]],
    references: dict[str, dict[str, str]],
    run_banks: dict[str, str],
    evidence: dict[str, EventBase],
    banks_dir: Path,
) -> None:
    def fail(message: str) -> VerificationError:
        return VerificationError(f"seq {seq}: {message}", seq=seq)

    bank_hash = run_banks.get(event.stream)
    if bank_hash is None or bank_hash not in banks:
        raise fail(f"ScoreComputed in stream {event.stream}, which has no run on a published bank")
    bank, bank_seq = banks[bank_hash]
    if bank_hash not in references:
        references[bank_hash] = published_references(banks_dir, bank, bank_seq)
    named = []
    for link in event.evidence:
        found = evidence.get(link)
        if found is not None:
            if found.stream != event.stream or found.case_id != event.case_id:  # type: ignore[attr-defined]
                raise fail(f"evidence {link} belongs to another attempt")
            named.append(found)
    try:
        fields = score_fields(
            bank, references[bank_hash], event.case_id, named, event.scorer_version
        )
    except score_mod.ScoringError as exc:
        raise fail(f"the recorded score cannot be re-derived from its evidence: {exc}") from None
    except LedgerError:
        raise
    except Exception as exc:
        raise InternalError(
            exc,
            where=f"verify stopped at seq {seq}, the score of {event.stream} case "
            f"{event.case_id} attempt {event.attempt}",
        ) from exc
    recomputed = msgspec.to_builtins(fields, order="sorted", builtin_types=())
    recorded = _recorded(event)
    differ = sorted(
        k for k in recorded.keys() | recomputed.keys() if recorded.get(k) != recomputed.get(k)
    )
    if differ:
        first = differ[0]
        raise fail(
            f"recorded score of {event.stream} case {event.case_id} attempt {event.attempt} "
            f"(scorer {event.scorer_version}) differs from its evidence: {', '.join(differ)} "
            f"({first}: recorded {recorded.get(first)!r}, "
            f"recomputed {recomputed.get(first)!r})"
        )
