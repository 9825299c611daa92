"""One attempt as events: a model answer parsed, guarded, executed and scored.

``AttemptWriter.events_for`` turns one adapter answer into the attempt's
batch (PromptSent, ModelResponded | ProviderFailed, OutputParsed, SqlGuarded,
SqlExecuted, ScoreComputed | AttemptCancelled), each event complete and linked
on the run's ``Stream``. Pure but for the SQL worker: no clock (the stream's),
no ledger access.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ledger import codec, events
from ledger.adapters.base import Failure, Reply
from ledger.harness import guard as guard_mod
from ledger.harness import protocol, score
from ledger.harness.worker import WorkerPool
from ledger.store import StoredEvent, link_of

if TYPE_CHECKING:
    from ledger.harness.runner import AttemptKey, BankContext

__all__ = ["AttemptWriter", "Stream"]

E = TypeVar("E", bound=events.EventBase)


class Stream:
    """A run's stream head; builds complete, linked event bodies (the runner owns its stream)."""

    def __init__(self, run_id: str, clock: Callable[[], str], last: StoredEvent | None) -> None:
        self.run_id = run_id
        self.clock = clock
        self.seq = -1 if last is None else last.event().stream_seq
        self.prev = None if last is None else link_of(last.leaf_hash)

    def make(self, cls: type[E], **fields: Any) -> tuple[E, str]:
        """The next event of the stream and its link (``sha256:`` of its leaf hash)."""
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
        """Forget events made after (seq, prev): their batch was not stored."""
        self.seq, self.prev = seq, prev


class AttemptWriter:
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
        self, stream: Stream, key: AttemptKey, prompt: str, answer: Reply | Failure
    ) -> list[events.EventBase]:
        """The batch of one attempt: its terminal event is ScoreComputed or AttemptCancelled,
        followed by VariantChecked when the bank has variants and the SQL executed."""
        case_id, attempt = key
        case, gold = self.cases[case_id], self.gold[case_id]
        ids = {"case_id": case_id, "attempt": attempt}
        out: list[events.EventBase] = []
        evidence: list[str] = []

        def add(cls: type[E], **fields: Any) -> E:
            event, link = stream.make(cls, **ids, **fields)
            out.append(event)
            evidence.append(link)
            return event

        add(events.PromptSent, prompt=prompt, prompt_sha256=codec.sha256_hex(prompt.encode()))
        parsed: events.OutputParsed | None = None
        guarded: events.SqlGuarded | None = None
        executed: events.SqlExecuted | None = None
        failed: events.ProviderFailed | None = None
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
        check = self.bank.variant_check
        if check is not None and executed is not None and executed.ok and parsed is not None:
            # Diagnostics next to the score, recorded after it: they never change it.
            assert parsed.sql is not None
            variant, _ = stream.make(
                events.VariantChecked, **ids, **check(case, parsed.sql, executed)
            )
            out.append(variant)
        return out


def _struct_fields(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__struct_fields__}
