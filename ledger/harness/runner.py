"""The runner: plan cases x attempts, drive one adapter, append every step as an event.

For each planned (case, attempt) the runner appends, in the run's own stream and
in ONE batch (so an attempt is either fully recorded or not at all):

    PromptSent, ModelResponded | ProviderFailed, OutputParsed, SqlGuarded,
    SqlExecuted (twice after a worker crash), ScoreComputed | AttemptCancelled

Only the model calls run concurrently (``concurrency`` threads); parsing,
guarding, execution, scoring and the single ledger writer stay on the calling
thread. The runner builds complete event bodies itself (it owns its stream's
head), so ScoreComputed can name the leaf hashes of the evidence it scored.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib.metadata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import sqlglot

from ledger import codec, events
from ledger.adapters.base import Adapter, Failure, MissingRecording, Reply, Request
from ledger.errors import LedgerError, UsageError
from ledger.harness import guard as guard_mod
from ledger.harness import protocol, score
from ledger.harness.worker import WorkerPool
from ledger.keys import Signer
from ledger.store import Ledger, StoredEvent, link_of

__all__ = [
    "OUTPUT_CONTRACT",
    "REPORT_CONTRACT",
    "TERMINAL",
    "AttemptKey",
    "BankContext",
    "Progress",
    "RunPlan",
    "RunSummary",
    "attempt_states",
    "run",
]

OUTPUT_CONTRACT = "query-plan-v1"
REPORT_CONTRACT = "caseledger-report/1"
# Cancellation reasons after which resume tries the attempt again.
_RETRYABLE_CANCEL = frozenset({"interrupted"})
TERMINAL = (events.ScoreComputed, events.AttemptCancelled)

AttemptKey = tuple[str, int]


@dataclass(frozen=True)
class BankContext:
    """A published bank as the runner needs it."""

    event: events.BankPublished
    db_path: Path
    reference_sql: dict[str, str]
    leak_check: Callable[[str], list[str]]
    prompt_for: Callable[[events.CaseSpec], str]
    prompt_contract_digest: str


@dataclass(frozen=True)
class RunPlan:
    """What to run."""

    run_id: str
    profile: str
    attempts: int
    concurrency: int = 1
    retries: int = 0
    resume: bool = False


@dataclass
class Progress:
    """Counters the CLI shows while a run goes."""

    planned: int
    done: int = 0
    correct: int = 0
    failures: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSummary:
    """The end-of-run numbers for the one-screen summary."""

    run_id: str
    status: str
    planned: int
    done: int
    correct: int
    total_score: str
    failures: dict[str, int]


class _Stream:
    """The run's stream head; builds complete, linked event bodies."""

    def __init__(self, run_id: str, clock: Callable[[], str], last: StoredEvent | None) -> None:
        self.run_id = run_id
        self.clock = clock
        self.seq = -1 if last is None else last.event().stream_seq
        self.prev = None if last is None else link_of(last.leaf_hash)

    def make(self, cls: type[events.EventBase], **fields: Any) -> tuple[events.EventBase, str]:
        self.seq += 1
        event = cls(
            stream=self.run_id,
            stream_seq=self.seq,
            stream_prev=self.prev,
            at=self.clock(),
            **fields,
        )
        self.prev = link_of(codec.leaf_hash(codec.encode(event)))
        return event, self.prev

    def rollback(self, seq: int, prev: str | None) -> None:
        self.seq, self.prev = seq, prev


def attempt_states(stored: Iterable[StoredEvent]) -> dict[AttemptKey, events.EventBase]:
    """The last terminal event (ScoreComputed or AttemptCancelled) of each attempt."""
    states: dict[AttemptKey, events.EventBase] = {}
    for item in stored:
        event = item.event()
        if isinstance(event, TERMINAL):
            states[(event.case_id, event.attempt)] = event
    return states


def _versions() -> events.Versions:
    return events.Versions(
        app=importlib.metadata.version("caseledger"),
        scorer=score.SCORER_VERSION,
        duckdb=duckdb.__version__,
        sqlglot=sqlglot.__version__,
        output_contract=OUTPUT_CONTRACT,
        report_contract=REPORT_CONTRACT,
    )


def _run_started(bank: BankContext, adapter: Adapter, plan: RunPlan) -> dict[str, Any]:
    ident = adapter.identity
    published = bank.event
    return {
        "run_id": plan.run_id,
        "run_kind": ident.run_kind,
        "bank_id": published.bank_id,
        "bank_version": published.version,
        "bank_hash": published.content_sha256,
        "adapter_kind": ident.adapter_kind,
        "profile": plan.profile,
        "requested_model": ident.requested_model,
        "provider": ident.provider,
        "auth_mode": ident.auth_mode,
        "params": ident.params,
        "timeout_ms": ident.timeout_ms,
        "harness_kind": ident.harness_kind,
        "bridge_version": ident.bridge_version,
        "policy_version": ident.policy_version,
        "response_mode": "text",
        "single_turn": True,
        "tools": "off",
        "retries": plan.retries,
        "context_isolation": "fresh-context-per-attempt",
        "system_prompt_digest": ident.system_prompt_digest,
        "prompt_contract_digest": bank.prompt_contract_digest,
        "attempts": plan.attempts,
        "case_ids": tuple(c.id for c in published.cases),
        "price_snapshot_digest": ident.price_snapshot_digest,
        "replay_file_sha256": ident.replay_file_sha256,
        "versions": _versions(),
    }


# Fields of RunStarted a resumed run must agree on with the original one.
_RESUME_FIELDS = (
    "run_kind",
    "bank_hash",
    "adapter_kind",
    "requested_model",
    "provider",
    "auth_mode",
    "params",
    "harness_kind",
    "system_prompt_digest",
    "prompt_contract_digest",
    "attempts",
    "price_snapshot_digest",
    "replay_file_sha256",
    "retries",
)


def _check_resume(started: events.RunStarted, fresh: dict[str, Any]) -> None:
    differ = [f for f in _RESUME_FIELDS if getattr(started, f) != fresh[f]]
    if differ:
        raise UsageError(
            f"cannot resume run {started.run_id}: "
            + ", ".join(f"{f} was {getattr(started, f)!r}, now {fresh[f]!r}" for f in differ),
            hint="resume with the same bank, adapter options and --attempts as the original run",
        )


def _call(adapter: Adapter, request: Request, retries: int) -> Reply | Failure | MissingRecording:
    answer = adapter.call(request)
    tries = 0
    while isinstance(answer, Failure) and tries < retries:
        tries += 1
        answer = adapter.call(request)
    return answer


class _AttemptWriter:
    """Turns one model answer into the attempt's events (pure but for the worker)."""

    def __init__(
        self, bank: BankContext, pool: WorkerPool, invocation: events.Invocation, version: str
    ) -> None:
        self.bank = bank
        self.pool = pool
        self.invocation = invocation
        self.version = version
        self.cases = {c.id: c for c in bank.event.cases}
        self.gold = {g.case_id: g for g in bank.event.gold}
        self.tables = frozenset(t.name for t in bank.event.tables)

    def events_for(
        self, stream: _Stream, key: AttemptKey, prompt: str, answer: Reply | Failure
    ) -> list[events.EventBase]:
        case_id, attempt = key
        case, gold = self.cases[case_id], self.gold[case_id]
        ids = {"case_id": case_id, "attempt": attempt}
        out: list[events.EventBase] = []
        evidence: list[str] = []

        def add(cls: type[events.EventBase], **fields: Any) -> events.EventBase:
            event, link = stream.make(cls, **ids, **fields)
            out.append(event)
            evidence.append(link)
            return event

        add(events.PromptSent, prompt=prompt, prompt_sha256=codec.sha256_hex(prompt.encode()))
        parsed = guarded = executed = failed = None
        if isinstance(answer, Failure):
            failed = add(
                events.ProviderFailed, invocation=self.invocation, **_struct_fields(answer)
            )
        else:
            add(events.ModelResponded, invocation=self.invocation, **_struct_fields(answer))
            verdict_p = protocol.parse_output(answer.raw_output)
            parsed = add(events.OutputParsed, **_struct_fields(verdict_p))
            if parsed.sql is not None:
                verdict = guard_mod.guard(parsed.sql, self.tables)
                guarded = add(
                    events.SqlGuarded,
                    passed=verdict.passed,
                    violations=verdict.violations,
                    ast_digest=verdict.ast_digest,
                )
                if verdict.passed:
                    result = self.pool.execute(parsed.sql, max_rows=case.max_rows)
                    executed = add(events.SqlExecuted, **_struct_fields(result), worker_try=1)
                    if result.error_kind == "worker_crash":
                        result = self.pool.execute(parsed.sql, max_rows=case.max_rows)
                        executed = add(events.SqlExecuted, **_struct_fields(result), worker_try=2)
                        if result.error_kind == "worker_crash":
                            add(
                                events.AttemptCancelled,
                                reason="infrastructure",
                                message="the SQL worker crashed twice",
                            )
                            return out
        try:
            fields = score.score_attempt(
                case=case,
                gold=gold,
                parsed=parsed,
                guarded=guarded,
                executed=executed,
                provider_failure=failed,
                reference_sql=self.bank.reference_sql.get(case_id),
                version=self.version,
            )
        except score.ScoringError as exc:
            add(events.AttemptCancelled, reason="infrastructure", message=f"scoring failed: {exc}")
            return out
        event, _ = stream.make(events.ScoreComputed, **ids, evidence=tuple(evidence), **fields)
        out.append(event)
        return out


def _struct_fields(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__struct_fields__}


def run(
    ledger: Ledger,
    signer: Signer,
    bank: BankContext,
    adapter: Adapter,
    plan: RunPlan,
    *,
    clock: Callable[[], str],
    on_progress: Callable[[Progress], None] | None = None,
) -> RunSummary:
    """Run (or resume) ``plan`` and return its summary. KeyboardInterrupt cancels cleanly."""
    published = bank.event
    fresh = _run_started(bank, adapter, plan)
    existing = ledger.stream_events(plan.run_id)
    if existing and not plan.resume:
        raise UsageError(
            f"run {plan.run_id} already exists in {ledger.path}",
            hint=f"use --resume {plan.run_id} to finish it, or pick another --run-id",
        )
    if plan.resume and not existing:
        raise UsageError(f"no run {plan.run_id} to resume in {ledger.path}")
    adapter.validate_cases(c.id for c in published.cases)
    stream = _Stream(plan.run_id, clock, existing[-1] if existing else None)
    if existing:
        started = existing[0].event()
        if not isinstance(started, events.RunStarted):
            raise UsageError(f"stream {plan.run_id} is not a run")
        _check_resume(started, fresh)
    else:
        event, _ = stream.make(events.RunStarted, **fresh)
        ledger.append([event], signer)

    states = attempt_states(existing)
    planned = plan_keys(published.cases, plan.attempts)
    todo = [
        k
        for k in planned
        if k not in states
        or (
            isinstance(states[k], events.AttemptCancelled) and states[k].reason in _RETRYABLE_CANCEL  # type: ignore[attr-defined]
        )
    ]
    progress = Progress(planned=len(planned), done=len(planned) - len(todo))
    for st in states.values():
        if isinstance(st, events.ScoreComputed) and st.result_correct:
            progress.correct += 1
    invocation = adapter.invocation(bank.prompt_contract_digest, plan.retries)
    cases = {c.id: c for c in published.cases}
    status, message = "completed", ""
    with WorkerPool(bank.db_path) as pool:
        writer = _AttemptWriter(bank, pool, invocation, score.SCORER_VERSION)
        executor = cf.ThreadPoolExecutor(max_workers=max(1, plan.concurrency))
        finished: set[AttemptKey] = set()
        try:
            prompts = {k: bank.prompt_for(cases[k[0]]) for k in todo}
            for key in todo:
                leaks = bank.leak_check(prompts[key])
                if leaks:
                    _append_cancel(ledger, signer, stream, key, "prompt_leak", "; ".join(leaks))
                    finished.add(key)
                    status, message = "failed", f"prompt leak in case {key[0]}: {leaks[0]}"
                    raise _Stop(message)
            futures = {
                executor.submit(_call, adapter, Request(k[0], k[1], prompts[k]), plan.retries): k
                for k in todo
            }
            for future in cf.as_completed(futures):
                key = futures[future]
                answer = future.result()
                if isinstance(answer, MissingRecording):
                    _append_cancel(ledger, signer, stream, key, "missing_recording", answer.message)
                else:
                    seq, prev = stream.seq, stream.prev
                    try:
                        batch = writer.events_for(stream, key, prompts[key], answer)
                        ledger.append(batch, signer)
                    except BaseException:
                        stream.rollback(seq, prev)
                        raise
                    _count(progress, batch[-1])
                finished.add(key)
                progress.done += 1
                if on_progress is not None:
                    on_progress(progress)
        except (KeyboardInterrupt, _Stop) as exc:
            for f in list(locals().get("futures", {})):
                f.cancel()
            executor.shutdown(wait=False, cancel_futures=True)
            if isinstance(exc, KeyboardInterrupt):
                status, message = "cancelled", "interrupted by the user"
                for key in todo:
                    if key not in finished:
                        _append_cancel(ledger, signer, stream, key, "interrupted", message)
            event, _ = stream.make(events.RunFinished, status=status, message=message)
            ledger.append([event], signer)
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise LedgerError(
                f"run {plan.run_id} stopped: {message}",
                hint="fix the bank (a prompt must never contain reference SQL, gold or paths)",
            ) from None
        executor.shutdown(wait=True)
    event, _ = stream.make(events.RunFinished, status=status, message=message)
    ledger.append([event], signer)
    return RunSummary(
        run_id=plan.run_id,
        status=status,
        planned=progress.planned,
        done=progress.done,
        correct=progress.correct,
        total_score="",
        failures=dict(progress.failures),
    )


class _Stop(Exception):
    """Internal: stop the run after recording why."""


def _append_cancel(
    ledger: Ledger, signer: Signer, stream: _Stream, key: AttemptKey, reason: str, message: str
) -> None:
    event, _ = stream.make(
        events.AttemptCancelled, case_id=key[0], attempt=key[1], reason=reason, message=message
    )
    ledger.append([event], signer)


def _count(progress: Progress, last: events.EventBase) -> None:
    if isinstance(last, events.ScoreComputed):
        if last.result_correct:
            progress.correct += 1
        if last.failure_kind != "none":
            progress.failures[last.failure_kind] = progress.failures.get(last.failure_kind, 0) + 1
    elif isinstance(last, events.AttemptCancelled):
        progress.failures[last.reason] = progress.failures.get(last.reason, 0) + 1


def plan_keys(cases: Sequence[events.CaseSpec], attempts: int) -> list[AttemptKey]:
    """Every case of the bank times attempts 1..N, in bank order."""
    return [(c.id, n) for c in cases for n in range(1, attempts + 1)]
