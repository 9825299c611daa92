"""One attempt as events: a model answer parsed, guarded, executed and scored.

``AttemptWriter.events_for`` turns one adapter answer into the attempt's
batch (PromptSent, ModelResponded | ProviderFailed, OutputParsed, SqlGuarded,
SqlExecuted, ScoreComputed | AttemptCancelled), each event complete and linked
on the run's ``Stream``, under the run's caps (``ledger.harness.limits``): an
output over the cap is stored as a prefix and not parsed, SQL over a cap is
rejected before sqlglot sees it, results are bounded by the worker. The judging
itself (guard, execution with its crash retry, score) is ``ledger.harness.pipeline.judge``:
this module reads the output and turns the judgement into events. Pure but
for the SQL worker and the CPU-time reading of the judge budget: no wall
clock (the stream's), no ledger access.

Only named refusals become events here: a ScoringError (evidence that does not
fit) cancels the attempt as ``infrastructure``. Any other exception is a
caseledger bug and goes on to the runner, which records nothing for the attempt.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ledger import codec, events
from ledger.adapters.base import Failure, Reply
from ledger.engines.cells import stored_size
from ledger.errors import broken
from ledger.harness import limits as limits_mod
from ledger.harness import pipeline, protocol
from ledger.secrets import SecretSet
from ledger.store import StoredEvent, link_of

if TYPE_CHECKING:
    from ledger.engines.base import Executor

__all__ = ["AttemptKey", "AttemptWriter", "BankContext", "Prepared", "Stream", "prompt_sha256"]


@functools.lru_cache(maxsize=1024)
def prompt_sha256(prompt: str) -> str:
    """``sha256:`` of a prompt's UTF-8 text, as PromptStored and PromptSent name it.

    Remembered for the last 1,024 prompts: a run sends each case's prompt once per
    attempt, and a prompt (schema and notes) is many kilobytes (issue 34)."""
    return codec.sha256_hex(prompt.encode())


E = TypeVar("E", bound=events.EventBase)

# An attempt within a run: (case id, attempt number from 1).
AttemptKey = tuple[str, int]


@dataclass(frozen=True)
class BankContext:
    """A published bank as the runner needs it."""

    event: events.BankPublished
    db_path: Path
    reference_sql: dict[str, str]
    # (case id, rendered prompt) -> leak findings (the prompt is that case's).
    leak_check: Callable[[str, str], list[str]]
    prompt_for: Callable[[events.CaseSpec], str]
    prompt_contract_digest: str
    # Variant diagnostics (calibration variants of the bank): given the case, the model's
    # SQL and its base execution, the VariantChecked fields; None when the bank has none.
    variant_check: Callable[[events.CaseSpec, str, events.SqlExecuted], dict[str, Any]] | None = (
        None
    )


@dataclass(frozen=True)
class Prepared:
    """One answer judged, before its events are made (``AttemptWriter.prepare``).

    ``first``: the ModelResponded (or, ``failed``, ProviderFailed) fields but the
    envelope and ids; ``parsed``: the OutputParsed fields (None after a failure);
    ``judgement``: guard, executions and score (``pipeline.judge``).
    """

    key: AttemptKey
    prompt: str
    failed: bool
    first: dict[str, Any]
    parsed: dict[str, Any] | None
    judgement: pipeline.Judgement


class Stream:
    """A run's stream head; builds complete, linked event bodies (the runner owns its stream).

    ``texts``: how the run stores free text (issue 30): every event with a ``texts_cut``
    field has its free texts cut to the run's cap and scrubbed of the run's secrets.
    """

    def __init__(
        self,
        run_id: str,
        clock: Callable[[], str],
        last: StoredEvent | None,
        texts: limits_mod.TextPolicy | None = None,
    ) -> None:
        self.run_id = run_id
        self.clock = clock
        self.texts = texts
        self.seq = -1 if last is None else last.event().stream_seq
        self.prev = None if last is None else link_of(last.leaf_hash)

    def make(self, cls: type[E], **fields: Any) -> tuple[E, str]:
        """The next event of the stream and its link (``sha256:`` of its leaf hash)."""
        if self.texts is not None and "texts_cut" in cls.__struct_fields__:
            fields = self.texts.fields(fields)
        self.seq += 1
        event = cls(
            stream=self.run_id,
            stream_seq=self.seq,
            stream_prev=self.prev,
            at=self.clock(),
            **fields,
        )
        self.prev = link_of(codec.leaf_hash(codec.encode(event, keep=True)))
        return event, self.prev

    def rollback(self, seq: int, prev: str | None) -> None:
        """Forget events made after (seq, prev): their batch was not stored."""
        self.seq, self.prev = seq, prev


class AttemptWriter:
    """Turns one model answer into the attempt's events (pure but for the worker)."""

    def __init__(
        self,
        bank: BankContext,
        pool: Executor,
        invocation: events.Invocation,
        version: str,
        limits: events.Limits = limits_mod.DEFAULT_LIMITS,
        cpu_clock: Callable[[], int] = time.thread_time_ns,
        secrets: SecretSet | None = None,
    ) -> None:
        self.bank = bank
        self.pool = pool
        self.invocation = invocation
        self.version = version
        self.limits = limits
        # The adapter's secrets (issue 30): scrubbed from the output before it is read and
        # from every result before it is scored; None or empty: nothing to scrub.
        self.secrets = secrets or None
        # CPU time of this thread (ns): what the judge budget counts, immune to machine load.
        self.cpu_clock = cpu_clock
        self.cases = {c.id: c for c in bank.event.cases}
        self.gold = {g.case_id: g for g in bank.event.gold}
        self.tables = frozenset(t.name for t in bank.event.tables)

    def events_for(
        self,
        stream: Stream,
        key: AttemptKey,
        prompt: str,
        answer: Reply | Failure,
        tries: tuple[events.CallTry, ...] = (),
    ) -> list[events.EventBase]:
        """The batch of one attempt: its terminal event is ScoreComputed or AttemptCancelled,
        followed by VariantChecked when the bank has variants and the SQL executed.

        ``tries``: every try of the call when it was retried (empty after one try, so
        the events keep the bytes they always had). The same as
        ``build(stream, prepare(key, prompt, answer, tries))``."""
        return self.build(stream, self.prepare(key, prompt, answer, tries))

    def prepare(
        self,
        key: AttemptKey,
        prompt: str,
        answer: Reply | Failure,
        tries: tuple[events.CallTry, ...] = (),
    ) -> Prepared:
        """Judge one answer (read the output, guard, execute, score) without the stream.

        Safe to call from several threads at once (the pool is): the runner judges the
        next answers while the previous ones are executed and recorded. The CPU-time
        judge budget counts the calling thread's time only.
        """
        case_id, attempt = key
        ids: dict[str, Any] = {"case_id": case_id, "attempt": attempt}
        parsed: events.OutputParsed | None = None
        failed: events.ProviderFailed | None = None
        first: dict[str, Any]
        spent_ns = _no_cpu
        retried: dict[str, Any] = {"tries": tries} if tries else {}
        if isinstance(answer, Failure):
            first = {**_struct_fields(answer), **retried}
            if answer.raw_output is not None:
                raw = answer.raw_output
                first.update(self._bounded(raw) or {"raw_output": self._scrub(raw)})
            first["invocation"] = self.invocation
            failed = events.ProviderFailed(**pipeline.ENVELOPE, **ids, **first)
            read: dict[str, Any] | None = None
        else:
            started = self.cpu_clock()

            def spent_ns() -> int:
                return self.cpu_clock() - started

            stored, verdict_p = self._read_output(answer.raw_output, imported=answer.imported)
            first = {**_struct_fields(answer), **stored, **retried}
            del first["imported"]  # how to parse it, not a ModelResponded field
            first["invocation"] = self.invocation
            read = _struct_fields(verdict_p)
            parsed = events.OutputParsed(**pipeline.ENVELOPE, **ids, **read)
        judged = pipeline.judge(
            self.bench(case_id),
            parsed=parsed,
            failure=failed,
            pool=self.pool,
            limits=self.limits,
            version=self.version,
            spent_ns=spent_ns,
            secrets=self.secrets,
        )
        return Prepared(key, prompt, failed is not None, first, read, judged)

    def build(self, stream: Stream, prepared: Prepared) -> list[events.EventBase]:
        """The attempt's events, linked on ``stream``, from its judgement (one thread)."""
        key = prepared.key
        case_id, attempt = key
        case = self.cases[case_id]
        ids = {"case_id": case_id, "attempt": attempt}
        out: list[events.EventBase] = []
        evidence: list[str] = []

        def add(cls: type[E], **fields: Any) -> E:
            event, link = stream.make(cls, **ids, **fields)
            out.append(event)
            evidence.append(link)
            return event

        # The text itself is in the run's PromptStored with this hash (issue 22: each
        # distinct prompt stored once, by the runner before the first model call).
        add(events.PromptSent, prompt_sha256=prompt_sha256(prepared.prompt))
        parsed: events.OutputParsed | None = None
        if prepared.failed:
            add(events.ProviderFailed, **prepared.first)
        else:
            add(events.ModelResponded, **prepared.first)
            parsed = add(events.OutputParsed, **(prepared.parsed or {}))
        judged = prepared.judgement
        executed: events.SqlExecuted | None = None
        if judged.guard is not None:
            verdict = judged.guard
            add(
                events.SqlGuarded,
                passed=verdict.passed,
                violations=verdict.violations,
                ast_digest=verdict.ast_digest,
            )
        for worker_try, result in enumerate(judged.executions, start=1):
            executed = add(events.SqlExecuted, **_struct_fields(result), worker_try=worker_try)
        if judged.score is None:
            if judged.cancelled is None:
                raise broken(f"case {key[0]} attempt {key[1]}: no score and no cancellation")
            add(events.AttemptCancelled, reason="infrastructure", message=judged.cancelled)
            return out
        fields = judged.score
        event, _ = stream.make(events.ScoreComputed, **ids, evidence=tuple(evidence), **fields)
        out.append(event)
        check = self.bank.variant_check
        if check is not None and executed is not None and executed.ok and parsed is not None:
            # Diagnostics next to the score, recorded after it: they never change it.
            if parsed.sql is None:
                raise broken(f"case {key[0]} attempt {key[1]}: executed without SQL")
            variant, _ = stream.make(
                events.VariantChecked, **ids, **check(case, parsed.sql, executed)
            )
            out.append(variant)
        return out

    def bench(self, case_id: str) -> pipeline.Bench:
        """What an answer to ``case_id`` is judged against."""
        return pipeline.Bench(
            self.cases[case_id],
            self.gold[case_id],
            self.tables,
            self.bank.reference_sql.get(case_id),
            self.bank.event.build.engine,
        )

    def _scrub(self, text: str) -> str:
        return text if self.secrets is None else self.secrets.scrub(text)

    def _bounded(self, raw: str) -> dict[str, Any]:
        """The raw output fields to store: the text itself (nothing to change), or a prefix
        (scrubbed of the run's secrets), the whole text's length and hash."""
        bounded = limits_mod.bound_text(raw, self.limits.max_output_bytes)
        if bounded.full_bytes is None:
            return {}
        return {
            "raw_output": self._scrub(bounded.text),
            "raw_output_bytes": bounded.full_bytes,
            "raw_output_sha256": bounded.full_sha256,
        }

    def _read_output(
        self, raw: str, *, imported: bool = False
    ) -> tuple[dict[str, Any], protocol.Parsed]:
        """(ModelResponded fields to override, the parse verdict) under the output cap.

        An output whose raw text alone is over the cap is stored as a prefix and not
        parsed. Otherwise it is parsed (``imported``: a benchmark's prediction, plain
        SQL, see ``protocol.imported``), and the raw text plus every string extracted
        from it must fit the cap too (they are all stored), else nothing is extracted.
        """
        cap = self.limits.max_output_bytes
        stored = self._bounded(raw)
        if not stored and self.secrets is not None:
            # Scrubbed before it is read: no SQL, summary or plan can carry a secret on.
            clean = self.secrets.scrub(raw)
            if clean != raw:
                raw = clean
                stored = self._bounded(raw) or {"raw_output": raw}
        if "raw_output_bytes" in stored:
            full = stored["raw_output_bytes"]
            detail = (
                f"the raw output is {full} bytes, over the {cap}-byte cap"
                if full > cap
                else f"the raw output takes {stored_size(raw)} bytes as stored (JSON escapes "
                f"included), over the {cap}-byte cap"
            )
            return stored, protocol.too_large(detail, imported=imported)
        verdict = protocol.imported(raw) if imported else protocol.parse_output(raw)
        size = stored_size(raw) + sum(map(stored_size, protocol.extracted_texts(verdict)))
        if size > cap:
            detail = (
                f"the output and the fields extracted from it take {size} bytes as stored, "
                f"over the {cap}-byte cap"
            )
            return stored, protocol.too_large(detail, imported=imported)
        return stored, verdict


def _no_cpu() -> int:
    return 0


def _struct_fields(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__struct_fields__}
