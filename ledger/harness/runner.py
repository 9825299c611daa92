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

import collections
import contextlib
import dataclasses
import functools
import importlib.metadata
import os
import queue
import random
import re
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from types import TracebackType
from typing import Any, NamedTuple

import duckdb

from ledger import __version__, codec, events
from ledger.adapters.base import (
    Adapter,
    Answer,
    Failure,
    MissingRecording,
    Reply,
    Request,
    RetryPolicy,
    adapter_secrets,
    call_with_retries,
)
from ledger.engines import Executor, executor_for
from ledger.errors import (
    BankError,
    InternalError,
    LedgerError,
    StoreConflictError,
    UsageError,
    broken,
)
from ledger.harness import score
from ledger.harness.attempt import AttemptKey, AttemptWriter, BankContext, Prepared, Stream
from ledger.harness.limits import DEFAULT_LIMITS, TextPolicy, text_cap, validate
from ledger.harness.protocol import OUTPUT_CONTRACT
from ledger.harness.reading import Reading, ReadRequest
from ledger.harness.worker import ExecResult
from ledger.keys import Signer
from ledger.store import Ledger, StoredEvent
from projections.caseruns import BankInfo
from projections.outcome import Terminal
from projections.outcome import terminal as outcome_of
from projections.report.build import stream_totals
from projections.report.schema import CONTRACT as REPORT_CONTRACT
from projections.runsummary import FailureGroup, RetryFigures, run_figures

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

TERMINAL = (events.ScoreComputed, events.AttemptCancelled)
#: Attempts in a row failing the same way that stop a run (``--max-consecutive-failures``).
DEFAULT_MAX_CONSECUTIVE_FAILURES = 5
#: ProviderFailed kinds that are the model's own answer, never a reason to stop a run.
_MODEL_KINDS = frozenset({"policy_refusal", "tool_use"})
#: Attempts appended in one durable transaction at most (a group commit) when the
#: answers cost nothing to get again (a replay file, the bank's reference SQL).
GROUP_ATTEMPTS = 64
#: An open group is appended at the latest this many seconds after its first attempt.
GROUP_WAIT_S = 0.5
#: How long the recording thread waits for a new answer at a time while the oldest
#: one is being judged (``_Line._fill``): it checks the judgement between waits.
FILL_POLL_S = 0.002
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


@dataclass
class Progress:
    """Counters the CLI shows while a run goes. ``phase``: ``starting`` (the SQL
    workers start, the run's start is recorded, no call yet) or ``running`` (the
    calls are under way; the SQL workers may still be starting: ``workers_ready``)."""

    planned: int
    done: int = 0
    correct: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    phase: str = "running"
    #: Attempts whose SQL ran and whose result differs from gold (``result_correct`` is
    #: False, the report's "wrong"): neither correct nor failed (issue 35).
    wrong: int = 0
    #: Every SQL worker has started (set by the last one to start; issue 34): the
    #: calls do not wait for them, only the judging of an answer's SQL does.
    workers_ready: bool = True


@dataclass(frozen=True)
class RunSummary:
    """The end-of-run numbers for the one-screen summary, over the whole run.

    ``done`` counts attempts with a final outcome (scored, or cancelled for a
    reason a resume does not retry; the last terminal of any scorer version counts,
    as for resume). ``correct`` and ``failures`` count those attempts' outcomes under
    the scorer version the run recorded in RunStarted, as ``caseledger runs`` and the
    report show them, so a later rescore does not change the summary. ``total_score``
    is the weighted model score of the report.

    With the bank (``summarise(..., bank=...)``, as ``run`` does) the report's own
    figures are filled in (``projections.runsummary``): ``scored`` (attempts with a
    score; cancelled attempts are not among them), ``cancelled`` by reason, the
    result-correct and format-ok rates, ``format_ok``, and ``groups``: the failures
    by category and sub-kind with the first message of each. ``message`` is the
    RunFinished message (why a run failed or was cancelled).
    """

    run_id: str
    status: str
    planned: int
    done: int
    correct: int
    failures: dict[str, int]
    total_score: Decimal | None = None
    message: str = ""
    scored: int | None = None
    format_ok: int | None = None
    result_correct_rate: str | None = None
    format_ok_rate: str | None = None
    cancelled: dict[str, int] = field(default_factory=dict)
    format_ok_na: str | None = None  # why format-ok does not apply (issue 31)
    groups: tuple[FailureGroup, ...] = ()
    #: The report's wrong (the SQL ran, the result differs from gold) and the model
    #: calls that were tried again, with the bank (issue 35).
    wrong: int | None = None
    retries: RetryFigures | None = None


def attempt_states(
    stored: Iterable[StoredEvent], scorer_version: str | None = None
) -> dict[AttemptKey, Terminal]:
    """The terminal of each attempt that has one (projections/outcome.py), under
    ``scorer_version`` (None: a ScoreComputed of any version ends an attempt, the
    rule resume follows)."""
    return _terminals((item.event() for item in stored), scorer_version)


def _terminals(
    decoded: Iterable[events.EventBase], scorer_version: str | None
) -> dict[AttemptKey, Terminal]:
    by_attempt: dict[AttemptKey, list[events.EventBase]] = {}
    for event in decoded:
        if isinstance(event, TERMINAL):
            by_attempt.setdefault((event.case_id, event.attempt), []).append(event)
    return {key: outcome_of(found, scorer_version) for key, found in by_attempt.items()}


def _is_final(state: Terminal | None) -> bool:
    # Scored, or cancelled for a reason a resume does not retry.
    return state is not None and state.final


def plan_keys(cases: Sequence[events.CaseSpec], attempts: int) -> list[AttemptKey]:
    """Every case of the bank times attempts 1..N, in bank order."""
    return [(c.id, n) for c in cases for n in range(1, attempts + 1)]


def _count(progress: Progress, last: events.EventBase) -> None:
    if isinstance(last, events.ScoreComputed):
        if last.result_correct:
            progress.correct += 1
        elif last.result_correct is False:
            progress.wrong += 1
        if last.failure_kind != "none":
            progress.failures[last.failure_kind] = progress.failures.get(last.failure_kind, 0) + 1
    elif isinstance(last, events.AttemptCancelled):
        progress.failures[last.reason] = progress.failures.get(last.reason, 0) + 1


def summarise(
    stored: Sequence[StoredEvent],
    planned: Sequence[AttemptKey],
    bank: events.BankPublished | None = None,
) -> RunSummary:
    """The summary of a run from its stream: the final outcome of each planned attempt.

    ``status`` is the last RunFinished's (``running`` when there is none yet). With
    ``bank`` (the run's published bank) the report's figures are added.
    """
    run_id, status, message, recorded = "", "running", "", None
    decoded = [item.event() for item in stored]
    for event in decoded:
        run_id = event.stream
        if isinstance(event, events.RunStarted):
            recorded = event.versions.scorer
        elif isinstance(event, events.RunFinished):
            status, message = event.status, event.message
    states = _terminals(decoded, None)
    views = states if recorded is None else _terminals(decoded, recorded)
    progress = Progress(planned=len(planned))
    for key in planned:
        if _is_final(states.get(key)):
            progress.done += 1
            view = views.get(key)
            if view is not None and view.event is not None and view.final:
                _count(progress, view.event)
    summary = RunSummary(
        run_id=run_id,
        status=status,
        planned=progress.planned,
        done=progress.done,
        correct=progress.correct,
        failures=dict(sorted(progress.failures.items())),
        message=message,
    )
    if bank is None or recorded is None:
        return summary
    figures = run_figures(
        bank,
        ((item.seq, item.leaf_hash, event) for item, event in zip(stored, decoded, strict=True)),
    )
    return dataclasses.replace(
        summary,
        total_score=None if figures.model_score is None else Decimal(figures.model_score),
        scored=figures.scored,
        format_ok=figures.format_ok,
        result_correct_rate=figures.result_correct_rate,
        format_ok_rate=figures.format_ok_rate,
        format_ok_na=figures.format_ok_na,
        cancelled=figures.cancelled,
        groups=figures.groups,
        wrong=figures.wrong,
        retries=figures.retries,
    )


def _versions() -> events.Versions:
    return events.Versions(
        app=__version__,
        scorer=score.SCORER_VERSION,
        duckdb=duckdb.__version__,
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
    existing = ledger.stream_events(plan.run_id)
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


_Outcome = Answer | Exception


class _Calls:
    """Model calls on daemon threads; their answers come back through one queue.

    Daemon threads because a stopped run must not wait for a slow model at exit.
    An exception raised by the adapter is an outcome too: the caller's thread
    re-raises it after recording what it can. Each call is retried under
    ``policy`` (``ledger.adapters.base.call_with_retries``); ``stop`` also ends a
    wait between tries at once. At most ``workers`` calls are made and not yet taken
    by the recording thread: calls never run ahead of the records (an early stop
    stops after about N calls, not after every fast failure of the plan).
    """

    def __init__(
        self,
        adapter: Adapter,
        policy: RetryPolicy,
        workers: int,
        requests: Sequence[Request],
        clock: Callable[[], str],
    ) -> None:
        self._adapter, self._policy, self._clock = adapter, policy, clock
        self.requests = tuple(requests)
        self._pending = collections.deque(requests)
        self._lock = threading.Lock()
        self._stopped = False
        self._waking = threading.Event()
        self._rng = random.Random()  # noqa: S311 (backoff jitter only)
        self._taken = self._received = 0
        count = min(max(1, workers), len(requests))
        self._slots = threading.Semaphore(count)
        self.started: set[AttemptKey] = set()
        self.answered: set[AttemptKey] = set()
        self._results: queue.Queue[tuple[Request, _Outcome]] = queue.Queue()
        for n in range(count):
            threading.Thread(target=self._work, name=f"caseledger-call-{n}", daemon=True).start()

    def _next(self) -> Request | None:
        # Checking the stop flag and taking a request under one lock makes
        # ``_taken`` final once stop() returns.
        with self._lock:
            if self._stopped or not self._pending:
                return None
            self._taken += 1
            request = self._pending.popleft()
            self.started.add((request.case_id, request.attempt))
            return request

    def _work(self) -> None:
        while True:
            self._slots.acquire()  # given back when the outcome is taken (get)
            request = self._next()
            if request is None:
                self._slots.release()
                return
            outcome: _Outcome
            try:
                outcome = call_with_retries(
                    self._adapter, request, self._policy, clock=self._clock, stop=self._waking
                )
            except Exception as exc:  # not hidden: the caller's thread re-raises it
                outcome = exc
                self.stop()  # a broken adapter gets no further request
            self._results.put((request, outcome))

    def get(self, timeout: float | None = None) -> tuple[Request, _Outcome]:
        """The next outcome, in completion order (blocks; a KeyboardInterrupt gets through).

        Raises:
            queue.Empty: nothing came within ``timeout`` seconds.
        """
        item = self._results.get(timeout=timeout)
        self._slots.release()
        self._received += 1
        self.answered.add((item[0].case_id, item[0].attempt))
        return item

    def stop(self, *, wake: bool = False) -> None:
        """Start no further call; ``wake``: also end every wait between tries now."""
        with self._lock:
            self._stopped = True
        if wake:
            self._waking.set()

    def in_flight(self, within: float | None = None) -> Iterable[tuple[Request, _Outcome]]:
        """Stop (ending waits between tries), then yield the outcomes of the calls already
        started as they arrive; ``within``: for at most that many seconds."""
        self.stop(wake=True)
        deadline = None if within is None else time.monotonic() + within
        while self._received < self._taken:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            try:
                yield self.get(left)
            except queue.Empty:
                return


class _AdapterFault(Exception):
    """Internal: the adapter raised on a call (a harness fault, never a model's)."""

    def __init__(self, request: Request, error: Exception) -> None:
        super().__init__(str(error))
        self.request, self.error = request, error


class _EarlyStop(Exception):
    """Internal: attempts in a row failed the same way (``RunPlan.max_consecutive_failures``)."""


class _Streak:
    """Counts attempts in a row that failed with the same provider or infrastructure failure."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.signature: tuple[str, int | None] | None = None
        self.count = 0
        self.first = ""

    def add(self, batch: Sequence[events.EventBase]) -> None:
        """Count one recorded attempt; raise _EarlyStop when the limit is reached."""
        found = _failure_signature(batch)
        if found is None:
            self.signature, self.count = None, 0
            return
        signature, message = found
        if signature != self.signature:
            self.signature, self.count, self.first = signature, 0, message
        self.count += 1
        if self.limit and self.count >= self.limit:
            kind, status = signature
            what = kind + (f" (HTTP {status})" if status is not None else "")
            raise _EarlyStop(
                f"{self.count} attempts in a row failed the same way, {what}: {self.first}"
            )


def _failure_signature(
    batch: Sequence[events.EventBase],
) -> tuple[tuple[str, int | None], str] | None:
    # (kind, HTTP status) and message of a provider or infrastructure failure; None else.
    for event in batch:
        if isinstance(event, events.ProviderFailed) and event.kind not in _MODEL_KINDS:
            return (event.kind, event.http_status), event.message
        if isinstance(event, events.AttemptCancelled) and event.reason == "infrastructure":
            return ("infrastructure", None), event.message
    return None


def _leak_summary(finding: str) -> str:
    """A leak finding without the leaked text: the log must not receive it either."""
    for marker in (":", " ("):
        finding = finding.split(marker)[0]
    if finding.startswith("contains the private path"):
        return "contains a private path"
    return finding


class _Session:
    """The one writer of a run: appends batches, keeps the stream head true to the log."""

    def __init__(
        self,
        ledger: Ledger,
        signer: Signer,
        run_id: str,
        clock: Callable[[], str],
        bank: events.BankPublished | None = None,
        stored: list[StoredEvent] | None = None,
        texts: TextPolicy | None = None,
    ) -> None:
        """``stored``: the run's stream as just read (checked) by the caller, else read here;
        ``texts``: how the run stores free text (cut, secrets scrubbed: issue 30)."""
        self.ledger, self.signer, self.run_id, self.clock = ledger, signer, run_id, clock
        self.texts = texts
        #: The run's bank: with it, a RunFinished carries the run's totals (issue 22).
        self.bank = bank
        self.stored: list[StoredEvent] = []
        self.last_seqs: list[int] = []  # the seqs of the last batch append() wrote
        self.stream = Stream(run_id, clock, None, texts)
        # The group commit: staged batches, each with the stream head after it.
        self.group: list[tuple[list[events.EventBase], tuple[int, str | None]]] = []
        self.group_head: tuple[int, str | None] = (-1, None)
        self.resync(stored)

    def resync(self, stored: list[StoredEvent] | None = None) -> None:
        """Re-read the stream head from the log (after an interrupt it is the only truth).

        ``stored``: the stream as the caller has just read it, instead of reading it
        again. Attempts staged and not appended are dropped (the caller records them
        again).
        """
        self.group = []
        self.stored = self.ledger.stream_events(self.run_id) if stored is None else stored
        last = self.stored[-1] if self.stored else None
        self.stream = Stream(self.run_id, self.clock, last, self.texts)

    def append(self, build: Callable[[Stream], list[events.EventBase]]) -> list[events.EventBase]:
        """Build a batch on the stream head and append it in one transaction, or not at all."""
        seq, prev = self.stream.seq, self.stream.prev
        try:
            batch = build(self.stream)
            self.last_seqs = self.ledger.append(batch, self.signer)
        except BaseException:
            self.stream.rollback(seq, prev)
            raise
        return batch

    def stage(self, build: Callable[[Stream], list[events.EventBase]]) -> list[events.EventBase]:
        """Build one attempt's batch on the stream head into the open group (not yet appended).

        The group is appended by :meth:`flush`; a batch that fails to build leaves the
        stream head where it was.
        """
        seq, prev = self.stream.seq, self.stream.prev
        try:
            batch = build(self.stream)
        except BaseException:
            self.stream.rollback(seq, prev)
            raise
        if not self.group:
            self.group_head = (seq, prev)
        self.group.append((batch, (self.stream.seq, self.stream.prev)))
        return batch

    def flush(self) -> list[list[events.EventBase]]:
        """Append the open group in ONE durable transaction (a group commit); returns its batches.

        Every attempt of the group is recorded, or none is. When the store refuses the
        group (a LedgerError, e.g. an event holding a secret), the attempts are appended
        one by one instead, so those before the refused one are recorded and the error
        names the refused one; the stream head then stays after the last recorded attempt.
        """
        group, self.group = self.group, []
        if not group:
            return []
        seq, prev = self.group_head
        try:
            self.ledger.append([e for batch, _ in group for e in batch], self.signer)
        except LedgerError:
            self.stream.rollback(seq, prev)
            for batch, head in group:  # the refused one raises; those before it stay
                self.ledger.append(batch, self.signer)
                self.stream.rollback(*head)
        except BaseException:
            self.stream.rollback(seq, prev)
            raise
        return [batch for batch, _ in group]

    def unflushed(self) -> int:
        """Attempts staged and not yet appended."""
        return len(self.group)

    def one(self, cls: type[events.EventBase], **fields: Any) -> events.EventBase:
        """Append one event."""
        return self.append(lambda stream: [stream.make(cls, **fields)[0]])[0]

    def cancel(self, key: AttemptKey, reason: str, message: str) -> events.EventBase:
        """AttemptCancelled for one attempt."""
        return self.one(
            events.AttemptCancelled, case_id=key[0], attempt=key[1], reason=reason, message=message
        )

    def finish(self, status: str, message: str = "") -> list[StoredEvent] | None:
        """RunFinished with the run's final status and, for a model or self-test run, its totals.

        The totals (issue 22: what ``caseledger runs`` shows of the run's attempts)
        are folded from the run's stream as recorded, read back from the log, by the
        definition ``runs`` folds with (``projections.report.build.stream_totals``);
        ``verify --recompute`` re-derives them.

        Returns the run's stream as read for the totals followed by the RunFinished as
        stored (what reading the stream again would give: the RunFinished was appended
        onto the head of the stream read, or the append failed), so that the run's
        summary needs no second read of the log; None when nothing was read (no bank).
        """
        fields: dict[str, Any] = {"status": status, "message": message}
        rows: list[StoredEvent] | None = None
        if self.bank is not None:
            rows = self.ledger.stream_events(self.run_id)
            totals = stream_totals(
                BankInfo(-1, self.bank), ((r.seq, r.leaf_hash, r.event()) for r in rows)
            )
            if totals is not None:
                fields["totals"] = totals
        self.one(events.RunFinished, **fields)
        finished = self.ledger.get(self.last_seqs[-1]) if rows is not None else None
        return None if rows is None or finished is None else [*rows, finished]

    def record(
        self, writer: AttemptWriter, request: Request, outcome: _Outcome
    ) -> list[events.EventBase]:
        """Record one model answer as its attempt's batch; returns the batch."""
        key = (request.case_id, request.attempt)
        if isinstance(outcome, Exception):
            raise broken(f"case {key[0]} attempt {key[1]}: an exception passed as an answer")
        answer, tries = outcome.outcome, outcome.tries
        if isinstance(answer, MissingRecording):
            return [self.cancel(key, "missing_recording", answer.message)]
        try:
            batch = self.append(lambda s: writer.events_for(s, key, request.prompt, answer, tries))
        except LedgerError:
            raise
        except Exception as exc:
            # A caseledger bug (in the scorer, the guard, ...): the batch was not appended,
            # so nothing is recorded for this attempt; never an infrastructure cancellation.
            raise InternalError(
                exc, where=f"nothing was recorded for case {key[0]} attempt {key[1]}"
            ) from exc
        return batch


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
    workers = _Workers(bank, plan.workers or os.cpu_count() or 1)
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
    workers: _Workers,
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
    todo = [k for k in planned if not _is_final(states.get(k))]
    prompts = {c.id: bank.prompt_for(c) for c in published.cases}
    leaks = {cid: found for cid, text in prompts.items() if (found := bank.leak_check(cid, text))}
    if not todo and existing and isinstance(existing[-1].event(), events.RunFinished):
        return summarise(existing, planned, published)  # a finished run: nothing to add
    secrets = adapter_secrets(adapter)
    texts = TextPolicy(text_cap(limits), secrets or None)
    session = _Session(ledger, signer, plan.run_id, clock, published, stored=existing, texts=texts)
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
    progress = _progress(summarise(existing, planned))
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
    calls = _Calls(adapter, policy, plan.concurrency, requests, clock)
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
    judges = ThreadPoolExecutor(2 * size, "caseledger-judge", initializer=_hold_ctrl_c)
    try:
        line = _Line(session, writer, calls, judges, depth, window)
        stopped = _drive(session, writer, calls, progress, on_progress, plan, line)
    finally:
        judges.shutdown(wait=False, cancel_futures=True)
    status, message = stopped or ("completed", "")
    stream = session.finish(status, message)
    if stream is None:
        stream = ledger.stream_events(plan.run_id)
    return summarise(stream, planned, published)


def _hold_ctrl_c() -> None:
    """Block SIGINT in this (non-main) thread, so a worker process it starts (or restarts
    after a crash) inherits a blocked SIGINT, as one started on the main thread does
    (``ledger.harness.worker``): a Ctrl-C to the whole process group cannot stop it
    half-started. Python handles signals on the main thread only, which keeps them."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


class _Workers:
    """The run's SQL workers: ``size`` sandboxed executors started at once on threads,
    used as one executor (each statement runs on an idle one; ``Executor``)."""

    def __init__(self, bank: BankContext, size: int) -> None:
        self.size = max(1, size)
        self._bank = bank
        self._lock = threading.Lock()
        self._made: list[Executor] = []
        self._errors: list[BaseException] = []
        self._idle: queue.Queue[Executor] = queue.Queue()
        self._on_ready: list[Callable[[], None]] = []
        self._started = 0  # workers that have started, or failed to
        self._closed = False  # a worker that starts after close() stops itself
        self._threads = [
            threading.Thread(target=self._start, name=f"caseledger-sql-start-{n}", daemon=True)
            for n in range(self.size)
        ]
        for thread in self._threads:
            thread.start()

    def _start(self) -> None:
        _hold_ctrl_c()
        try:
            made = executor_for(self._bank.event, self._bank.db_path)
        except BaseException as exc:  # not hidden: ready() raises it on the run's thread
            with self._lock:
                self._errors.append(exc)
                self._started += 1
            return
        with self._lock:
            late = self._closed
            if not late:
                self._made.append(made)
            self._started += 1
            done = self._started == self.size and not self._errors
            callbacks = list(self._on_ready) if done else []
        if late:  # the run ended while this worker started: nothing will use it
            made.close()
        else:
            self._idle.put(made)
        for callback in callbacks:
            callback()

    def when_ready(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once every worker has started (now, if they have; never when
        one failed to start), on the thread of the last one to start."""
        with self._lock:
            if self._started < self.size:
                self._on_ready.append(callback)
                return
            ok = not self._errors
        if ok:
            callback()

    def ready(self) -> _Workers:
        """Wait until every worker has started.

        Raises:
            SandboxError: a worker could not start (the bank database is missing, ...).
        """
        for thread in self._threads:
            thread.join()
        if self._errors:
            raise self._errors[0]
        return self

    def execute(
        self, sql: str, *, max_rows: int, max_result_bytes: int, max_cell_bytes: int
    ) -> ExecResult:
        """Run one statement on an idle worker (waiting for every worker to start, then
        for an idle one; SandboxError when one could not start)."""
        self.ready()
        executor = self._idle.get()
        try:
            return executor.execute(
                sql,
                max_rows=max_rows,
                max_result_bytes=max_result_bytes,
                max_cell_bytes=max_cell_bytes,
            )
        finally:
            self._idle.put(executor)

    def read(self, request: ReadRequest) -> Reading | None:
        """Read one SQL text on an idle worker (``ledger.harness.reading``); None when
        its engine's executor cannot, or the worker could not (the caller reads it).
        Waits for the workers to start, as :meth:`execute` does."""
        self.ready()
        executor = self._idle.get()
        try:
            read = getattr(executor, "read", None)
            return None if read is None else read(request)
        finally:
            self._idle.put(executor)

    def close(self) -> None:
        """Stop every worker that has started. One still starting is not waited for (a
        run that stopped before needing its SQL workers ends at once, issue 34): its
        own thread stops it once it is up, and a process that exits first ends it
        (the workers are daemon processes and watch their parent)."""
        with self._lock:
            self._closed = True
            made, self._made = self._made, []
        # Each on its own thread: a worker takes a moment to end, and they end together.
        errors: list[BaseException] = []

        def close(executor: Executor) -> None:
            try:
                executor.close()
            except BaseException as exc:  # not hidden: raised below, on the run's thread
                errors.append(exc)

        closers = [threading.Thread(target=close, args=(e,)) for e in made]
        for thread in closers:
            thread.start()
        for thread in closers:
            thread.join()
        if errors:
            raise errors[0]

    def __enter__(self) -> _Workers:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _progress(summary: RunSummary) -> Progress:
    return Progress(
        planned=summary.planned,
        done=summary.done,
        correct=summary.correct,
        failures=dict(summary.failures),
    )


def _store_prompts(session: _Session, existing: list[StoredEvent], texts: list[str]) -> None:
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
        digest = codec.sha256_hex(text.encode())
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
    session: _Session, run_id: str, todo: list[AttemptKey], leaks: dict[str, list[str]]
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


class _Line:
    """Answers taken from the calls, judged on the judge threads, staged in arrival order.

    ``depth``: answers judged ahead of the one being staged; ``window``: answers taken
    and not yet appended (judged ahead plus staged in the open group), at most.
    """

    def __init__(
        self,
        session: _Session,
        writer: AttemptWriter,
        calls: _Calls,
        judges: ThreadPoolExecutor,
        depth: int,
        window: int,
    ) -> None:
        self.session, self.writer, self.calls, self.judges = session, writer, calls, judges
        self.depth, self.window = depth, window
        self.pending: collections.deque[_Pending] = collections.deque()
        self.staged: list[_Pending] = []
        self.taken = 0
        self._failed = False  # the last answer taken was a failure: take no more ahead

    def more(self) -> bool:
        """Answers are still to come or to stage."""
        return self.taken < len(self.calls.requests) or bool(self.pending)

    def room(self) -> bool:
        """Another answer may be taken ahead now.

        Never after a failure (an early stop then records the answers it counted and the
        calls under way only, as without the line) and never past the window.
        """
        ahead = len(self.pending)
        return (
            not (self._failed and ahead)
            and ahead < self.depth
            and ahead + len(self.staged) < self.window
        )

    def take(self, *, block: bool, timeout: float | None = None) -> bool:
        """Take one answer from the calls and start judging it; False when none was ready
        (``block``: waiting for one, at most ``timeout`` seconds when given)."""
        if self.taken >= len(self.calls.requests):
            return False
        try:
            request, outcome = self.calls.get(timeout if block else 0)
        except queue.Empty:
            return False
        self.taken += 1
        judged: Future[Prepared] | None = None
        if isinstance(outcome, Answer) and not isinstance(outcome.outcome, MissingRecording):
            judged = self.judges.submit(
                self.writer.prepare,
                (request.case_id, request.attempt),
                request.prompt,
                outcome.outcome,
                outcome.tries,
            )
        self.pending.append(_Pending(request, outcome, judged))
        self._failed = not isinstance(outcome, Answer) or not isinstance(outcome.outcome, Reply)
        return True

    def stage(self) -> list[events.EventBase]:
        """Stage the oldest answer's batch in the open group (waiting for its judgement).

        Raises:
            _AdapterFault: the adapter raised on this call (the answer is dropped).
            InternalError: a caseledger bug judging or building it (nothing of it is staged).
        """
        item = self.pending[0]
        request, outcome, judged = item
        key = (request.case_id, request.attempt)
        if isinstance(outcome, Exception):
            self.pending.popleft()
            raise _AdapterFault(request, outcome)
        build: Callable[[Stream], list[events.EventBase]]
        answer = outcome.outcome
        try:
            if judged is None:
                message = answer.message if isinstance(answer, MissingRecording) else ""
                build = _cancellation(key, "missing_recording", message)
            else:
                self._fill(judged)
                prepared = judged.result()
                build = functools.partial(self.writer.build, prepared=prepared)
            batch = self.session.stage(build)
        except LedgerError:
            raise
        except Exception as exc:
            # A caseledger bug: nothing is recorded for this attempt; those before it are.
            raise InternalError(
                exc, where=f"nothing was recorded for case {key[0]} attempt {key[1]}"
            ) from exc
        self.pending.popleft()
        self.staged.append(item)
        return batch

    def _fill(self, judged: Future[Prepared]) -> None:
        """While ``judged`` (the oldest answer) is still being judged, take the answers
        that come in meanwhile, within :meth:`room`, and start judging them.

        Without this the recording thread took answers only between two stagings, and
        the calls run at most ``--concurrency`` answers ahead of it: with one call
        thread, about one answer was judged at a time and the SQL workers sat idle.
        """
        while not judged.done() and self.room() and self.taken < len(self.calls.requests):
            self.take(block=True, timeout=FILL_POLL_S)

    def unrecorded(self) -> list[tuple[Request, _Outcome, Prepared | None]]:
        """Answers taken and not appended, in arrival order, each with its judgement when
        it is ready (used on a stop to record them)."""
        out: list[tuple[Request, _Outcome, Prepared | None]] = []
        for request, outcome, judged in [*self.staged, *self.pending]:
            prepared = None
            if judged is not None and judged.done() and judged.exception() is None:
                prepared = judged.result()
            out.append((request, outcome, prepared))
        self.staged, self.pending = [], collections.deque()
        return out


class _Pending(NamedTuple):
    request: Request
    outcome: _Outcome
    # None: nothing to judge (no recording, or the adapter raised)
    judged: Future[Prepared] | None


def _cancellation(
    key: AttemptKey, reason: str, message: str
) -> Callable[[Stream], list[events.EventBase]]:
    def build(stream: Stream) -> list[events.EventBase]:
        event, _ = stream.make(
            events.AttemptCancelled, case_id=key[0], attempt=key[1], reason=reason, message=message
        )
        return [event]

    return build


def _drive(
    session: _Session,
    writer: AttemptWriter,
    calls: _Calls,
    progress: Progress,
    on_progress: Callable[[Progress], None] | None,
    plan: RunPlan,
    line: _Line,
) -> tuple[str, str] | None:
    """Record every answer as it arrives; on a stop, record why (module docstring).

    Answers are judged ahead on ``line``'s threads and appended in arrival order, in
    group commits: the open group is appended when it holds ``line.window`` attempts,
    when it is ``GROUP_WAIT_S`` old, and before waiting for the model.

    Returns the (status, message) of an early stop, None when every call was recorded.
    """
    streak = _Streak(plan.max_consecutive_failures)
    opened = 0.0

    def counted(batches: list[list[events.EventBase]]) -> None:
        for batch in batches:
            _count(progress, next(e for e in reversed(batch) if isinstance(e, TERMINAL)))
            progress.done += 1
        if batches and on_progress is not None:
            on_progress(progress)

    def flush() -> None:
        counted(session.flush())
        line.staged = []

    def record(
        request: Request, outcome: _Outcome, prepared: Prepared | None = None
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
    except _EarlyStop as stop:
        # Answers already received (maybe paid for) are recorded before stopping.
        settle()
        for request, outcome in calls.in_flight():
            if not isinstance(outcome, Exception):
                record(request, outcome)
        return "failed", str(stop)
    except _AdapterFault as fault:
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
    session: _Session,
    calls: _Calls,
    taken: list[tuple[Request, _Outcome, Prepared | None]],
    record: Callable[[Request, _Outcome, Prepared | None], list[events.EventBase]],
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
        if _is_final(states.get(key)) or isinstance(outcome, Exception):
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


def _unfinished(calls: _Calls, states: dict[AttemptKey, Terminal]) -> list[AttemptKey]:
    # Every request this session was given whose attempt has no final outcome yet.
    return [
        (r.case_id, r.attempt)
        for r in calls.requests
        if not _is_final(states.get((r.case_id, r.attempt)))
    ]
