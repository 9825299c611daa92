"""The runner: plan cases x attempts, drive one adapter, append every step as an event.

For each planned (case, attempt) the runner appends, in the run's own stream and
in ONE transaction (so an attempt is either fully recorded or not at all):

    PromptSent, ModelResponded | ProviderFailed, OutputParsed, SqlGuarded,
    SqlExecuted (twice after a worker crash), ScoreComputed | AttemptCancelled

Before the first model call (after RunStarted, once the leak check passed) it
appends one batch of PromptStored, one per distinct prompt text of the attempts
to do that the stream does not hold yet; each PromptSent names its text by
SHA-256 instead of repeating it (issue 22, docs/events.md).

The stages overlap (issue 21): the model calls run on ``concurrency`` daemon
threads (so an interrupted run never waits for a slow model); each answer is
judged (parsed, guarded, executed, scored: ``AttemptWriter.prepare``) on one of
``workers`` judge threads, each statement on an idle one of ``workers`` SQL worker
processes (one per core by default, started while the plan is prepared; the calls
do not wait for them, only the judging of SQL does: issue 34); the
calling thread, the single ledger writer, turns the judgements into events in the
order the answers arrived and appends them in group commits: several attempts in
one durable transaction, so a crash leaves whole attempts only. For a live model
at most ``concurrency`` answers are taken and not yet recorded (the group holds
at most that many); for answers a resume gets again for free (a replay file, the
reference SQL) a group holds up to GROUP_ATTEMPTS attempts. An open group is
appended before waiting for the model and after GROUP_WAIT_S. The runner builds
complete event bodies itself (it owns its stream's head), so ScoreComputed can
name the leaf hashes of the evidence it scored.

How a run ends (docs/running.md):

- every planned attempt recorded: RunFinished(completed);
- ``max_consecutive_failures`` attempts in a row (in the order they are
  recorded) fail with the same provider or infrastructure failure (the same
  ProviderFailed kind and HTTP status, not a refusal or a tool request; or an
  ``infrastructure`` cancellation): no further call starts, the answers of calls
  already under way are recorded, RunFinished(failed) names the failure, and the
  summary (status ``failed``) is returned;
- KeyboardInterrupt (Ctrl-C, or SIGTERM turned into one by the CLI): no further
  call starts; the answers already received and those arriving within
  ``interrupt_grace_s`` are recorded as usual attempts; AttemptCancelled(interrupted)
  for each attempt still without an outcome (its message says when its call was
  still under way, or was waiting to retry), RunFinished(cancelled), and the
  KeyboardInterrupt goes on to the caller;
- a prompt that leaks: AttemptCancelled(prompt_leak) for the attempts of each
  leaking case, RunFinished(failed), BankError (nothing is sent to the model);
- the adapter raises: the answers already received are still recorded,
  unfinished attempts stay without a terminal event (a resume finishes them),
  RunFinished(failed), and the exception goes on unchanged;
- the harness raises anything but a LedgerError (a caseledger bug, for example
  in the scorer): nothing is recorded for the attempt being built (its batch is
  dropped whole; earlier attempts stay), RunFinished(failed), and an
  InternalError (exit 1) goes on to the caller. A bug is never signed as an
  infrastructure cancellation.

Every attempt runs under the run's caps (``RunPlan.limits``, recorded in
RunStarted ``limits``; docs/running.md "Limits").

A resume (``RunPlan.resume``) finishes the planned attempts that have no
terminal event or were cancelled as interrupted, and never repeats another.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ledger import __version__, events, stream_read
from ledger.adapters.base import Adapter, Answer, Failure, Request, RetryPolicy, adapter_secrets
from ledger.engines import executor_for
from ledger.errors import BankError, InternalError, LedgerError, StoreConflictError, UsageError
from ledger.harness import score
from ledger.harness.attempt import (
    AttemptKey,
    AttemptWriter,
    BankContext,
    Prepared,
    prompt_sha256,
)
from ledger.harness.limits import DEFAULT_LIMITS, TextPolicy, text_cap, validate
from ledger.harness.protocol import OUTPUT_CONTRACT
from ledger.keys import Signer
from ledger.run.calls import AdapterFault, Calls, Outcome
from ledger.run.line import Line
from ledger.run.progress import (
    TERMINAL,
    Progress,
    RunSummary,
    attempt_states,
    count_outcome,
    is_final,
    plan_keys,
    progress_of,
    summarise,
)
from ledger.run.session import Session
from ledger.run.sqlpool import SqlWorkers, hold_ctrl_c
from ledger.run.streak import DEFAULT_MAX_CONSECUTIVE_FAILURES, EarlyStop, Streak
from ledger.store import Ledger, StoredEvent
from projections.outcome import Terminal
from projections.report.schema import CONTRACT as REPORT_CONTRACT

__all__ = [
    "DEFAULT_MAX_CONSECUTIVE_FAILURES",
    "OUTPUT_CONTRACT",
    "REPORT_CONTRACT",
    "RUN_ID_PATTERN",
    "TERMINAL",
    "AttemptKey",
    "BankContext",
    "Progress",
    "RunPlan",
    "RunSummary",
    "attempt_states",
    "plan_keys",
    "run",
    "summarise",
]

#: Attempts appended in one durable transaction at most (a group commit) when the
#: answers cost nothing to get again (a replay file, the bank's reference SQL).
GROUP_ATTEMPTS = 64
#: An open group is appended at the latest this many seconds after its first attempt.
GROUP_WAIT_S = 0.5
#: Adapters whose answers a resume gets again for free: their answers may wait in a group.
_FREE_ANSWERS = frozenset({"replay", "reference"})
# A run id is a stream name: short, printable, no spaces, never the log's own stream.
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


@dataclass(frozen=True)
class RunPlan:
    """What to run. ``attempts`` None: the original run's (on resume), else the
    adapter's default (a replay file's largest attempt), else 1. ``limits`` None:
    the original run's (on resume), else the defaults.

    ``max_consecutive_failures``: stop the run after this many attempts in a row
    failed the same provider or infrastructure way (0: never). ``backoff_s``: the
    first backoff step of a retry (``RetryPolicy.base_s``). ``interrupt_grace_s``:
    how long an interrupted run waits for the answers of calls under way.
    ``workers``: SQL worker processes (and judge threads), None: one per core.
    None of these changes what an attempt is: none is part of RunStarted.
    """

    run_id: str
    profile: str
    attempts: int | None = None
    concurrency: int = 1
    retries: int = 0
    resume: bool = False
    limits: events.Limits | None = None
    max_consecutive_failures: int = DEFAULT_MAX_CONSECUTIVE_FAILURES
    backoff_s: float = 1.0
    interrupt_grace_s: float = 3.0
    workers: int | None = None


def _versions() -> events.Versions:
    return events.Versions(
        app=__version__,
        scorer=score.SCORER_VERSION,
        # The installed distributions' versions, read without importing either: the
        # run's own process needs neither module (its SQL workers import DuckDB).
        duckdb=importlib.metadata.version("duckdb"),
        sqlglot=importlib.metadata.version("sqlglot"),
        output_contract=OUTPUT_CONTRACT,
        report_contract=REPORT_CONTRACT,
    )


def _run_started(
    bank: BankContext, adapter: Adapter, plan: RunPlan, attempts: int, limits: events.Limits
) -> dict[str, Any]:
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
        "attempts": attempts,
        "case_ids": tuple(c.id for c in published.cases),
        "price_snapshot_digest": ident.price_snapshot_digest,
        "replay_file_sha256": ident.replay_file_sha256,
        "versions": _versions(),
        "limits": limits,
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


def _limits(plan: RunPlan, started: events.RunStarted | None) -> events.Limits:
    """The caps of this run: the plan's, else the original run's (resume), else the defaults.

    A run recorded before caps existed is resumed under the defaults (its RunStarted
    has no ``limits``); the resumed attempts' evidence shows what they met.
    """
    if plan.limits is not None:
        return validate(plan.limits)
    if started is not None and isinstance(started.limits, events.Limits):
        return started.limits
    return DEFAULT_LIMITS


def _check_resume(started: events.RunStarted, fresh: dict[str, Any]) -> None:
    differ = [
        f"{f} was {getattr(started, f)!r}, now {fresh[f]!r}"
        for f in _RESUME_FIELDS
        if getattr(started, f) != fresh[f]
    ]
    if isinstance(started.limits, events.Limits):
        was, now = started.limits, fresh["limits"]
        differ += [
            f"limits.{f} was {getattr(was, f)}, now {getattr(now, f)}"
            for f in was.__struct_fields__
            if getattr(was, f) != getattr(now, f)
            # A run recorded before max_text_bytes existed is resumed under its default.
            and not (f == "max_text_bytes" and text_cap(was) == text_cap(now))
        ]
    if differ:
        raise UsageError(
            f"cannot resume run {started.run_id}: " + ", ".join(differ),
            hint="resume with the same bank, adapter options, --attempts and caps as the "
            "original run (a resume keeps the original caps unless you give others)",
        )


def _existing_run(
    ledger: Ledger, plan: RunPlan
) -> tuple[list[StoredEvent], events.RunStarted | None]:
    """The run's stored events and its RunStarted; refuse a run id that does not fit the plan."""
    if not RUN_ID_PATTERN.fullmatch(plan.run_id) or plan.run_id == events.LEDGER_STREAM:
        raise UsageError(
            f"bad run id {plan.run_id!r}",
            hint="use letters, digits and . _ : - (at most 128, not 'ledger')",
        )
    existing = stream_read.stream_events(ledger, plan.run_id)
    if existing and not plan.resume:
        raise UsageError(
            f"run {plan.run_id} already exists in {ledger.path}",
            hint=f"use --resume {plan.run_id} to finish it, or pick another --run-id",
        )
    if plan.resume and not existing:
        raise UsageError(f"no run {plan.run_id} to resume in {ledger.path}")
    if not existing:
        return existing, None
    started = existing[0].event()
    if not isinstance(started, events.RunStarted):
        raise UsageError(f"stream {plan.run_id} in {ledger.path} is not a run")
    return existing, started


def preflight(ledger: Ledger, plan: RunPlan) -> None:
    """Refuse a run id that does not fit the plan (taken, or nothing to resume) before
    anything expensive is prepared (variant databases, SQL workers): the check
    :func:`run` makes again when it starts (issue 35)."""
    _existing_run(ledger, plan)


def _leak_summary(finding: str) -> str:
    """A leak finding without the leaked text: the log must not receive it either."""
    for marker in (":", " ("):
        finding = finding.split(marker)[0]
    if finding.startswith("contains the private path"):
        return "contains a private path"
    return finding


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
    """Run (or resume) ``plan`` and return the summary of the whole run.

    Nothing is appended when the plan is refused (run id taken, resume that
    does not match, a replay file naming unknown cases, no bank database).

    Raises:
        UsageError: see above.
        BankError: a prompt leaks (after recording the cancellation, see the module docstring).
        SecretLeakError: an event would hold the adapter's key (that batch is not appended).
        KeyboardInterrupt: after recording the cancellation.
    """
    # Before anything is appended or sent: the store refuses an event holding a key.
    if secrets := adapter_secrets(adapter):
        ledger.register_secrets(secrets.find)
    published = bank.event
    existing, started = _existing_run(ledger, plan)
    attempts = (
        plan.attempts
        or (started.attempts if started is not None else None)
        or adapter.identity.default_attempts
        or 1
    )
    limits = _limits(plan, started)
    fresh = _run_started(bank, adapter, plan, attempts, limits)
    if started is not None:
        _check_resume(started, fresh)
    adapter.validate_cases(c.id for c in published.cases)
    # The SQL workers start now, while the plan is prepared; a plan that stops here
    # (a finished run, a leak) closes them unused.
    workers = SqlWorkers(bank, plan.workers or os.cpu_count() or 1, executor_for)
    try:
        return _run_planned(
            ledger, signer, bank, adapter, plan, workers, existing, started, attempts,
            limits, fresh, clock=clock, on_progress=on_progress,
        )  # fmt: skip
    finally:
        workers.close()


def _run_planned(
    ledger: Ledger,
    signer: Signer,
    bank: BankContext,
    adapter: Adapter,
    plan: RunPlan,
    workers: SqlWorkers,
    existing: list[StoredEvent],
    started: events.RunStarted | None,
    attempts: int,
    limits: events.Limits,
    fresh: dict[str, Any],
    *,
    clock: Callable[[], str],
    on_progress: Callable[[Progress], None] | None,
) -> RunSummary:
    published = bank.event
    planned = plan_keys(published.cases, attempts)
    states = attempt_states(existing)
    todo = [k for k in planned if not is_final(states.get(k))]
    prompts = {c.id: bank.prompt_for(c) for c in published.cases}
    leaks = {cid: found for cid, text in prompts.items() if (found := bank.leak_check(cid, text))}
    if not todo and existing and isinstance(existing[-1].event(), events.RunFinished):
        return summarise(existing, planned, published)  # a finished run: nothing to add
    secrets = adapter_secrets(adapter)
    texts = TextPolicy(text_cap(limits), secrets or None)
    session = Session(ledger, signer, plan.run_id, clock, published, stored=existing, texts=texts)
    head = ledger.stream_head(plan.run_id)
    if (None if head is None else head[2]) != (existing[-1].seq if existing else None):
        # Another process appended to this run since it was checked above (the same
        # --run-id started twice at once): never a second RunStarted in one stream. The
        # store's stream index names the stream's last row (the store refuses an append
        # that does not continue the stream's stored head in any case).
        raise StoreConflictError(f"stream {plan.run_id} grew while this run was starting")
    if leaks:
        if started is None:
            session.one(events.RunStarted, **fresh)
        _stop_for_leaks(session, plan.run_id, todo, leaks)
    progress = progress_of(summarise(existing, planned))
    progress.workers_ready = False
    workers.when_ready(lambda: setattr(progress, "workers_ready", True))
    if on_progress is not None:
        on_progress(dataclasses.replace(progress, phase="starting"))
    if started is None:
        session.one(events.RunStarted, **fresh)
    _store_prompts(session, existing, [prompts[cid] for cid, _ in todo])
    invocation = adapter.invocation(bank.prompt_contract_digest, plan.retries)
    # The calls start now, once RunStarted and the prompts are recorded, while the SQL
    # workers may still be starting: only the judging of an answer's SQL waits for them
    # (the pool's execute and read), so an unreachable server is found and recorded (and
    # an early stop made) without waiting for them (issue 34).
    writer = AttemptWriter(bank, workers, invocation, score.SCORER_VERSION, limits, secrets=secrets)
    requests = [Request(cid, n, prompts[cid]) for cid, n in todo]
    policy = RetryPolicy(retries=plan.retries, base_s=plan.backoff_s)
    calls = Calls(adapter, policy, plan.concurrency, requests, clock)
    if on_progress is not None:
        on_progress(progress)
    size = workers.size
    if adapter.identity.adapter_kind in _FREE_ANSWERS:
        depth, window = 2 * size + 2, 2 * size + 2 + GROUP_ATTEMPTS
    else:  # at most --concurrency answers taken and not yet recorded
        depth = window = max(1, plan.concurrency)
    # Two judge threads per worker: while one waits for its worker, the other's next
    # request is already queued, so the workers (which read the SQL as well as run it)
    # are never idle for want of work.
    judges = ThreadPoolExecutor(2 * size, "caseledger-judge", initializer=hold_ctrl_c)
    try:
        line = Line(session, writer, calls, judges, depth, window)
        stopped = _drive(session, writer, calls, progress, on_progress, plan, line)
    finally:
        judges.shutdown(wait=False, cancel_futures=True)
    status, message = stopped or ("completed", "")
    stream = session.finish(status, message)
    if stream is None:
        stream = stream_read.stream_events(ledger, plan.run_id)
    return summarise(stream, planned, published, session.folded)


def _store_prompts(session: Session, existing: list[StoredEvent], texts: list[str]) -> None:
    """Append one PromptStored per distinct prompt text the attempts to do will send and
    the run's stream does not hold yet (a resume adds only the missing ones), in one
    batch, before the first model call; each attempt's PromptSent then names its text by
    SHA-256 (issue 22: the text stored once, not once per attempt). Called only after
    the leak check passed: a leaking prompt is never stored."""
    tag = events.tag_of(events.PromptStored).encode()
    held = {
        event.prompt_sha256
        for item in existing
        if tag in item.body and isinstance(event := item.event(), events.PromptStored)
    }
    missing: dict[str, str] = {}
    for text in texts:
        digest = prompt_sha256(text)
        if digest not in held:
            missing.setdefault(digest, text)
    if missing:
        session.append(
            lambda stream: [
                stream.make(events.PromptStored, prompt_sha256=digest, prompt=text)[0]
                for digest, text in missing.items()
            ]
        )


def _stop_for_leaks(
    session: Session, run_id: str, todo: list[AttemptKey], leaks: dict[str, list[str]]
) -> None:
    """Cancel the attempts whose prompt leaks, fail the run, raise. Nothing is sent."""
    for key in todo:
        if key[0] in leaks:
            summary = "; ".join(dict.fromkeys(_leak_summary(f) for f in leaks[key[0]]))
            session.cancel(key, "prompt_leak", f"the prompt {summary}; it was not sent")
    first = next(iter(leaks))
    session.finish("failed", f"the prompt of case {first} leaks; nothing was sent")
    raise BankError(
        f"run {run_id} failed: the prompt of case {first} leaks: {leaks[first][0]}"
        + (f" (and {len(leaks) - 1} more cases)" if len(leaks) > 1 else ""),
        hint="a prompt must never contain reference SQL, gold or private paths: fix the "
        "bank's prompt.md and publish a new version",
    )


def _drive(
    session: Session,
    writer: AttemptWriter,
    calls: Calls,
    progress: Progress,
    on_progress: Callable[[Progress], None] | None,
    plan: RunPlan,
    line: Line,
) -> tuple[str, str] | None:
    """Record every answer as it arrives; on a stop, record why (module docstring).

    Answers are judged ahead on ``line``'s threads and appended in arrival order, in
    group commits: the open group is appended when it holds ``line.window`` attempts,
    when it is ``GROUP_WAIT_S`` old, and before waiting for the model.

    Returns the (status, message) of an early stop, None when every call was recorded.
    """
    streak = Streak(plan.max_consecutive_failures)
    opened = 0.0

    def counted(batches: list[list[events.EventBase]]) -> None:
        for batch in batches:
            count_outcome(progress, next(e for e in reversed(batch) if isinstance(e, TERMINAL)))
            progress.done += 1
        if batches and on_progress is not None:
            on_progress(progress)

    def flush() -> None:
        counted(session.flush())
        line.staged = []

    def record(
        request: Request, outcome: Outcome, prepared: Prepared | None = None
    ) -> list[events.EventBase]:
        if prepared is not None:
            batch = session.append(functools.partial(writer.build, prepared=prepared))
        else:
            batch = session.record(writer, request, outcome)
        counted([batch])
        return batch

    def settle() -> None:
        # Record the answers taken and not yet appended (an adapter fault's answer dropped).
        flush()
        for request, outcome, prepared in line.unrecorded():
            if not isinstance(outcome, Exception):
                record(request, outcome, prepared)

    try:
        while line.more():
            while line.room() and line.take(block=False):
                pass
            if not line.pending:
                flush()  # waiting for the model: record every answer judged so far first
                line.take(block=True)
                continue
            if not line.staged:
                opened = time.monotonic()
            batch = line.stage()
            streak.add(batch)
            if len(line.staged) >= line.window or time.monotonic() - opened >= GROUP_WAIT_S:
                flush()
        flush()
    except KeyboardInterrupt:
        _interrupted(session, calls, line.unrecorded(), record, plan.interrupt_grace_s)
        raise
    except EarlyStop as stop:
        # Answers already received (maybe paid for) are recorded before stopping.
        settle()
        for request, outcome in calls.in_flight():
            if not isinstance(outcome, Exception):
                record(request, outcome)
        return "failed", str(stop)
    except AdapterFault as fault:
        # Answers already received (maybe paid for) are recorded before stopping.
        settle()
        for request, outcome in calls.in_flight():
            if not isinstance(outcome, Exception):
                record(request, outcome)
        where = f"case {fault.request.case_id} attempt {fault.request.attempt}"
        session.finish("failed", f"the adapter raised {type(fault.error).__name__} on {where}")
        raise fault.error from None
    except BaseException as exc:
        calls.stop(wake=True)
        # A harness or ledger fault: the attempts staged before it are recorded, then
        # the run is closed; the original error wins.
        cause = exc.error if isinstance(exc, InternalError) else exc
        with contextlib.suppress(LedgerError):
            if isinstance(exc, InternalError):
                flush()
        with contextlib.suppress(LedgerError):
            session.resync()
            session.finish("failed", f"harness fault: {type(cause).__name__}")
        raise
    return None


_INTERRUPTED = "interrupted by the user"


def _interrupted(
    session: Session,
    calls: Calls,
    taken: list[tuple[Request, Outcome, Prepared | None]],
    record: Callable[[Request, Outcome, Prepared | None], list[events.EventBase]],
    grace: float,
) -> None:
    """Record what an interrupted run received, then cancel the rest and close the run.

    No further call starts and waits between tries end. The answers taken and not
    yet appended (judged ahead, or staged in the open group), the answers already
    received and those arriving within ``grace`` seconds are recorded as usual
    attempts (a second Ctrl-C ends the wait). Every other unfinished attempt is
    cancelled as interrupted, saying whether its call was under way or waiting to retry.
    """
    calls.stop(wake=True)
    late = list(taken)
    with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: stop waiting
        for request, outcome in calls.in_flight(grace):
            late.append((request, outcome, None))
    session.resync()
    states = attempt_states(session.stored)
    notes: dict[AttemptKey, str] = {}
    for request, outcome, prepared in late:
        key = (request.case_id, request.attempt)
        if is_final(states.get(key)) or isinstance(outcome, Exception):
            continue
        if outcome.cut_short:
            notes[key] = f"{_INTERRUPTED} while its call waited to retry: {_tries_text(outcome)}"
            continue
        record(request, outcome, prepared)
    session.resync()
    states = attempt_states(session.stored)
    for key in _unfinished(calls, states):
        note = notes.get(key)
        if note is None and key in calls.started and key not in calls.answered:
            note = (
                f"{_INTERRUPTED}; its call was still under way after {grace:g} s "
                "(an answer after that is not recorded)"
            )
        session.cancel(key, "interrupted", note or _INTERRUPTED)
    session.finish("cancelled", _INTERRUPTED)


def _tries_text(answer: Answer) -> str:
    n = len(answer.tries) or 1
    last = answer.outcome
    if not isinstance(last, Failure):
        return f"{n} tries"
    status = f" (HTTP {last.http_status})" if last.http_status is not None else ""
    return f"{n} {'try' if n == 1 else 'tries'}, the last {last.kind}{status}: {last.message}"


def _unfinished(calls: Calls, states: dict[AttemptKey, Terminal]) -> list[AttemptKey]:
    # Every request this session was given whose attempt has no final outcome yet.
    return [
        (r.case_id, r.attempt)
        for r in calls.requests
        if not is_final(states.get((r.case_id, r.attempt)))
    ]
