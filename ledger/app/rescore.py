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

import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ledger.app.audit import check_run_totals, published_bank
from ledger.app.snapshot import run_snapshots
from ledger.bank.build import build_database, freeze_gold_at, gold_digest
from ledger.bank.model import Bank
from ledger.bank.registry import DB_SUFFIX, PublishedBank, bank_paths
from ledger.codec import leaf_hash as codec_leaf
from ledger.engines import Executor, discard, executor_for
from ledger.errors import (
    BankError,
    InternalError,
    LedgerError,
    UsageError,
    VerificationError,
    broken,
)
from ledger.events import (
    LEDGER_STREAM,
    BankPublished,
    EventBase,
    EventImported,
    Limits,
    OutputParsed,
    ProviderFailed,
    RunFinished,
    RunStarted,
    ScoreComputed,
    SqlExecuted,
    SqlGuarded,
    tag_of,
)
from ledger.foreign import inner_of
from ledger.harness import pipeline
from ledger.harness import score as score_mod
from ledger.harness.attempt import Stream
from ledger.harness.limits import DEFAULT_LIMITS
from ledger.keys import Signer
from ledger.store import Ledger, StoredEvent, link_of
from ledger.store_rows import envelope_of
from projections.caseruns import CaseRun, State
from projections.outcome import terminal as outcome_of

__all__ = ["Recomputation", "RescoreSummary", "recompute_hook", "rescore", "score_fields"]

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
    db_path, files_dir = bank_paths(home, info.content_sha256, info.build.engine)
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
    """The ScoreComputed fields ``version`` derives from the named evidence events.

    Raises:
        ScoringError: the evidence cannot be scored (or the bank has no such case).
    """
    named = _Named.of(evidence)
    judged = pipeline.judge(
        pipeline.Bench.of(bank, case_id, references),
        parsed=named.parsed,
        failure=named.failure,
        recorded=named.recorded(),
        version=version,
    )
    if judged.refusal is not None:
        raise judged.refusal
    if judged.score is None:  # nothing was executed, so nothing crashed
        raise broken("a judgement of recorded evidence with neither score nor refusal")
    return judged.score


@dataclass(frozen=True)
class _Named:
    """The evidence a score names, by kind (the last execution wins, as in the runner)."""

    parsed: OutputParsed | None = None
    guarded: SqlGuarded | None = None
    executed: SqlExecuted | None = None
    failure: ProviderFailed | None = None

    @classmethod
    def of(cls, evidence: Sequence[EventBase]) -> _Named:
        found: dict[str, Any] = {}
        for ev in evidence:
            for name, kind in _KINDS.items():
                if isinstance(ev, kind):
                    found[name] = ev
        return cls(**found)

    def recorded(self) -> pipeline.Recorded:
        return pipeline.Recorded(self.guarded, self.executed)


_KINDS: dict[str, type[EventBase]] = {
    "parsed": OutputParsed,
    "guarded": SqlGuarded,
    "executed": SqlExecuted,
    "failure": ProviderFailed,
}


def _run_limits(started: RunStarted) -> Limits:
    """The caps the run recorded (a run from before caps: the defaults)."""
    return started.limits if isinstance(started.limits, Limits) else DEFAULT_LIMITS


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
    chosen = None if not runs else sorted(set(runs))
    if chosen is not None:
        missing = [
            r for r in chosen if next(iter(ledger.indexed_stream(r, ledger.size())), None) is None
        ]
        if missing:
            raise UsageError(f"no run {', '.join(missing)} in {ledger.path}")
    summary = RescoreSummary(version, runs=[])
    # One run in memory at a time (issue 21): each run is folded, checked, rescored and
    # its batch appended before the next is read, so memory does not grow with the log.
    for snap in run_snapshots(ledger, runs=chosen):
        state = snap.state
        for run_id in sorted(state.runs):
            if chosen is not None and run_id not in chosen:
                continue
            summary.runs.append(run_id)
            head = snap.heads.get(run_id)
            if head is None:
                raise broken(f"run {run_id} has no stream head in the snapshot")
            stream = Stream(run_id, clock, None)
            stream.seq, stream.prev = head[0], link_of(head[1])
            found = [c for key, c in sorted(state.caseruns.items()) if c.run_id == run_id]
            batch = _rescore_run(state, found, stream, home, run_id, version, reexecute, summary)
            if batch:
                ledger.append(batch, signer)
        del state, snap
    if chosen is not None and summary.runs != chosen:
        missing = sorted(set(chosen) - set(summary.runs))
        raise UsageError(f"no run {', '.join(missing)} in {ledger.path}")
    return summary


def _rescore_run(
    state: State,
    found: list[CaseRun],
    stream: Stream,
    home: Path,
    run_id: str,
    version: str,
    reexecute: bool,
    summary: RescoreSummary,
) -> list[EventBase]:
    started = state.runs[run_id].started
    bank_info = state.banks[started.bank_hash]
    bank = bank_info.event
    references = _references(home, bank, bank_info.seq)
    limits = _run_limits(started)
    pool = None
    if reexecute:
        db_path, _ = bank_paths(home, bank.content_sha256, bank.build.engine)
        pool = executor_for(bank, db_path)
    out: list[EventBase] = []
    try:
        for caserun in found:
            latest = _latest_score(caserun)
            if latest is None:
                summary.skip("no_recorded_score")
                continue
            by_leaf = {s.link: s.event for s in caserun.steps}
            named = _Named.of([by_leaf[h] for h in latest.evidence if h in by_leaf])
            links = list(latest.evidence)
            if pool is None and _has_version(caserun, version, tuple(links)):
                summary.skip("already_scored")
                continue
            try:
                judged = pipeline.judge(
                    pipeline.Bench.of(bank, caserun.case_id, references),
                    parsed=named.parsed,
                    failure=named.failure,
                    pool=pool,
                    recorded=named.recorded(),
                    limits=limits,
                    version=version,
                )
            except score_mod.ScoringError:  # the bank has no such case
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
            for worker_try, result in enumerate(judged.executions, start=1):
                rerun, link = stream.make(
                    SqlExecuted,
                    case_id=caserun.case_id,
                    attempt=caserun.attempt,
                    worker_try=worker_try,
                    **{name: getattr(result, name) for name in result.__struct_fields__},
                )
                out.append(rerun)
                links.append(link)
            if judged.executions:
                summary.reexecuted += 1
            fields = judged.score
            if fields is None:
                summary.skip("scoring_failed")
                continue
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


# ----------------------------------------------------------------- verify --recompute

_EVIDENCE_TYPES = (OutputParsed, SqlGuarded, SqlExecuted, ProviderFailed)
#: How the per-origin counts of verify --recompute name runs recorded in this ledger.
HERE = "this ledger"
_IMPORTED_TAG = tag_of(EventImported)


def _unwrapped(row: StoredEvent) -> tuple[StoredEvent, str | None]:
    """An event.imported.v1 row as the event its home ledger signed (same seq, the
    original body and leaf hash, which evidence links name) and its origin; any
    other row as it is, with None. ``verify`` has checked the wrapper already."""
    if envelope_of(row.seq, row.body).type != _IMPORTED_TAG:
        return row, None
    wrapper = row.event()
    if not isinstance(wrapper, EventImported):  # its own envelope said it is one
        raise broken(f"seq {row.seq}: an event.imported.v1 envelope that does not decode as one")
    inner, problem = inner_of(wrapper)
    if inner is None:
        raise VerificationError(f"seq {row.seq}: {problem}", seq=row.seq)
    return row._replace(body=inner.body, leaf_hash=inner.leaf), wrapper.origin


#: Evidence events kept in memory while verify --recompute walks a bound ledger.
_WINDOW = 4096


def _recorded(event: ScoreComputed) -> dict[str, Any]:
    raw = msgspec.to_builtins(event, order="sorted", builtin_types=())
    return {k: v for k, v in raw.items() if k not in _ENVELOPE and k != "type"}


def recompute_hook(banks_dir: Path, *, reexecute: bool = True) -> Recomputation:
    """The ``verify --recompute`` check, reading bank files from ``banks_dir``.

    ``banks_dir`` holds each bank as ``<hex>/`` (``banks/`` beside the operator's
    ledger) or ``<bank>@<version>/`` (an audit export); see ``ledger.app.audit.bank_folder``.
    A bank file that differs from its BankPublished fails the check (exit 1); missing
    files mean it could not be made (exit 2).
    """
    return Recomputation(banks_dir, reexecute=reexecute)


class Recomputation:
    """``verify --recompute``: called with the verified events in order, it re-executes
    the SQL of every scored execution and re-derives every ScoreComputed, through the
    judge that recorded them (``ledger.harness.pipeline.judge``); ``summary()`` says
    what it did.

    Re-execution runs each recorded SqlExecuted that a score names (the last one it
    names: the one scored) once, in the sandboxed worker, on a database built from the
    checked bank files into a temporary folder (its gold must equal the published
    gold), under the run's recorded caps, and compares
    :data:`ledger.harness.pipeline.COMPARED_FIELDS`. A recorded timeout or memory stop
    is not re-run and a re-run stopped that way is not compared: both depend on the
    machine and are counted as not comparable. The first difference raises a
    VerificationError naming the seq of the SqlExecuted, before its score is checked.
    """

    def __init__(self, banks_dir: Path, *, reexecute: bool = True) -> None:
        self.banks_dir = banks_dir
        self.reexecute = reexecute
        self.ledger: Ledger | None = None
        self.scores = 0
        #: RunFinished totals re-derived (issue 22).
        self.totals = 0
        self.rerun = 0
        self.equal = 0
        self.not_comparable = 0
        #: origin -> [scores re-derived, executions re-run] (issue 29); ``this ledger``
        #: for runs recorded here, else the origin an imported run's wrappers record.
        self.by_origin: dict[str, list[int]] = {}

    def summary(self) -> str:
        """One line for people, and one more per origin when the ledger imported runs."""
        line = f"recompute: {self.scores} scores re-derived"
        if self.reexecute:
            line += (
                f"; {self.rerun} executions re-run, {self.equal} equal, "
                f"{self.not_comparable} not comparable (timeout or memory stop)"
            )
        if set(self.by_origin) - {HERE}:
            for origin in sorted(self.by_origin, key=lambda o: (o != HERE, o)):
                scores, rerun = self.by_origin[origin]
                line += f"\n  {origin}: {scores} scores re-derived, {rerun} executions re-run"
        return line

    def count(self, origin: str, *, scores: int = 0, rerun: int = 0) -> None:
        """Add to the counts of ``origin``."""
        held = self.by_origin.setdefault(origin, [0, 0])
        held[0] += scores
        held[1] += rerun

    def bind(self, ledger: Ledger) -> None:
        """Look evidence up in ``ledger`` by leaf hash (the verified ledger being walked)
        instead of keeping every evidence event of the walk in memory."""
        self.ledger = ledger

    def __call__(self, rows: Iterator[StoredEvent]) -> None:
        walk = _Walk(self)
        try:
            for row in rows:
                walk.add(row)
        finally:
            walk.close()
            # Close the ledger cursor now, before the caller closes the ledger.
            close = getattr(rows, "close", None)
            if close is not None:
                close()


class _Walk:
    """The state of one recompute pass over the events."""

    def __init__(self, owner: Recomputation) -> None:
        self.owner = owner
        self.banks: dict[str, tuple[BankPublished, int]] = {}
        self.loaded: dict[str, Bank] = {}
        self.runs: dict[str, RunStarted] = {}
        self.evidence: OrderedDict[str, tuple[int, EventBase]] = OrderedDict()
        self.rerun_done: set[str] = set()
        self.pools: dict[str, Executor] = {}
        self.tmp: tempfile.TemporaryDirectory[str] | None = None
        self.built: list[tuple[str, Path]] = []  # (engine, database) of temporary builds
        kept = (BankPublished, RunStarted, RunFinished, ScoreComputed, *_EVIDENCE_TYPES)
        self.wanted = frozenset(tag_of(cls) for cls in kept)
        #: With a ledger to look evidence up in, only the newest evidence events are
        #: kept (a score names those of its own batch, just before it; older ones, as
        #: a rescore's score names, are found by leaf hash), so memory stays flat.
        self.window = _WINDOW if owner.ledger is not None else None
        #: Without a ledger: stream -> (seq, body, leaf) of its events so far (issue 22).
        self.kept: dict[str, list[tuple[int, bytes, bytes]]] = {}
        #: (stream, leaf hash -> seq) of the stream whose older evidence was last sought.
        self.stream_leaves: tuple[str, dict[bytes, int]] | None = None
        #: run -> origin of each imported run (its wrappers'), for the per-origin counts.
        self.origins: dict[str, str] = {}

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()
        for engine, db in self.built:
            discard(engine, db)
        if self.tmp is not None:
            self.tmp.cleanup()

    def add(self, stored: StoredEvent) -> None:
        head = envelope_of(stored.seq, stored.body)
        if self.window is None and head.stream != LEDGER_STREAM:
            # no ledger to read a run's stream from: every run event is kept (as the
            # evidence is, without a ledger) to re-derive RunFinished totals
            self.kept.setdefault(head.stream, []).append(
                (stored.seq, stored.body, stored.leaf_hash)
            )
        # issue 29: an imported run is re-derived exactly as a native one
        row, origin = _unwrapped(stored)
        if origin is not None:
            self.origins.setdefault(head.stream, origin)
        kind = head.type if origin is None else envelope_of(row.seq, row.body).type
        if kind not in self.wanted:
            return  # decode only what the check reads
        event = row.event()
        if isinstance(event, BankPublished):
            self.banks.setdefault(event.content_sha256, (event, row.seq))
        elif isinstance(event, RunStarted):
            self.runs[event.run_id] = event
        elif isinstance(event, _EVIDENCE_TYPES):
            self.evidence[link_of(row.leaf_hash)] = (row.seq, event)
            if self.window is not None and len(self.evidence) > self.window:
                self.evidence.popitem(last=False)  # the oldest
        elif isinstance(event, ScoreComputed):
            self.check_score(row.seq, event)
        elif isinstance(event, RunFinished) and not isinstance(event.totals, msgspec.UnsetType):
            # issue 22: the run's `runs` figures, re-derived from its events before it
            # (read by the stream index; kept from the walk when there is no ledger)
            ledger = self.owner.ledger
            rows = (
                self.kept.get(event.stream, [])
                if ledger is None
                else ledger.indexed_stream(event.stream, row.seq)
            )
            started = self.runs.get(event.stream)
            bank = None if started is None else self.banks.get(started.bank_hash)
            check_run_totals(rows, row.seq, event, bank)
            self.owner.totals += 1

    def named(self, link: str, before: int, stream: str) -> tuple[int, EventBase] | None:
        """(seq, event) of the evidence event ``link`` names, stored before ``before``.

        The newest evidence events are kept as the walk passes them; an older one (a
        rescore's score names evidence far back) is looked up among the rows of the
        score's own stream (evidence of another stream is refused anyway), read once
        per stream by the stream index, and its body hashed to the leaf again. So
        memory does not grow with the ledger, and no lookup scans it (a ledger file
        may have no index on the leaf hash: docs/stores.md).
        """
        kept = self.evidence.get(link)
        ledger = self.owner.ledger
        if kept is not None or ledger is None:
            return kept
        try:
            leaf = bytes.fromhex(link.removeprefix("sha256:"))
        except ValueError:
            return None
        if self.stream_leaves is None or self.stream_leaves[0] != stream:
            leaves: dict[bytes, int] = {}
            for at, body, found in ledger.indexed_stream(stream, ledger.size()):
                # an imported row is named by the leaf hash of the event it wraps
                inner, _ = _unwrapped(StoredEvent(at, bytes(body), bytes(found), b"", "", b""))
                leaves[inner.leaf_hash] = at
            self.stream_leaves = (stream, leaves)
        seq = self.stream_leaves[1].get(leaf)
        if seq is None or seq >= before:
            return None
        stored = ledger.get(seq)  # the body hashed to its stored leaf
        if stored is None:
            return None
        row, _ = _unwrapped(stored)
        if row.leaf_hash != leaf or codec_leaf(row.body) != leaf:
            return None
        event = row.event()
        return (seq, event) if isinstance(event, _EVIDENCE_TYPES) else None

    def bank(self, bank_hash: str) -> Bank:
        if bank_hash not in self.loaded:
            event, seq = self.banks[bank_hash]
            self.loaded[bank_hash] = published_bank(self.owner.banks_dir, event, seq)
        return self.loaded[bank_hash]

    def pool(self, bank_hash: str) -> Executor:
        """A worker over the bank's database, built now from its checked files."""
        if bank_hash not in self.pools:
            event, seq = self.banks[bank_hash]
            bank = self.bank(bank_hash)
            if self.tmp is None:
                self.tmp = tempfile.TemporaryDirectory(prefix="caseledger-recompute-")
            hexhash = event.content_sha256.removeprefix("sha256:")
            db = Path(self.tmp.name) / f"recompute-{hexhash}{DB_SUFFIX[event.build.engine]}"
            self.built.append((event.build.engine, db))
            build_database(bank, db)
            gold = gold_digest(freeze_gold_at(db, bank))
            if gold != event.gold_digest:
                raise VerificationError(
                    f"seq {seq}: bank {event.bank_id}@{event.version}: building its published "
                    f"files gives gold {gold}, BankPublished records {event.gold_digest}",
                    seq=seq,
                    hint="build with the DuckDB version BankPublished names "
                    f"({event.build.duckdb_version})",
                )
            self.pools[bank_hash] = executor_for(event, db)
        return self.pools[bank_hash]

    def check_score(self, seq: int, event: ScoreComputed) -> None:
        def fail(message: str) -> VerificationError:
            return VerificationError(f"seq {seq}: {message}", seq=seq)

        started = self.runs.get(event.stream)
        bank_hash = None if started is None else started.bank_hash
        if started is None or bank_hash is None or bank_hash not in self.banks:
            raise fail(
                f"ScoreComputed in stream {event.stream}, which has no run on a published bank"
            )
        bank_event = self.banks[bank_hash][0]
        references = self.bank(bank_hash).references()
        named: list[tuple[str, int, EventBase]] = []
        for link in event.evidence:
            found = self.named(link, seq, event.stream)
            if found is not None:
                ev = found[1]
                if ev.stream != event.stream or ev.case_id != event.case_id:  # type: ignore[attr-defined]
                    raise fail(f"evidence {link} belongs to another attempt")
                named.append((link, *found))
        where = (
            f"verify stopped at seq {seq}, the score of {event.stream} case "
            f"{event.case_id} attempt {event.attempt}"
        )
        try:
            bench = pipeline.Bench.of(bank_event, event.case_id, references)
            evidence = _Named.of([ev for _, _, ev in named])
            executed = [(link, s) for link, s, ev in named if isinstance(ev, SqlExecuted)]
            if self.owner.reexecute and executed and evidence.executed is not None:
                link, exec_seq = executed[-1]
                if link not in self.rerun_done:
                    self.rerun_done.add(link)
                    self.reexecute(exec_seq, evidence, bench, started, bank_hash, event)
            fields = score_fields(
                bank_event, references, event.case_id, [ev for _, _, ev in named],
                event.scorer_version,
            )  # fmt: skip
        except score_mod.ScoringError as exc:
            raise fail(
                f"the recorded score cannot be re-derived from its evidence: {exc}"
            ) from None
        except LedgerError:
            raise
        except Exception as exc:
            raise InternalError(exc, where=where) from exc
        self.owner.scores += 1
        self.owner.count(self.origins.get(event.stream, HERE), scores=1)
        recomputed = msgspec.to_builtins(fields, order="sorted", builtin_types=())
        recorded = _recorded(event)
        differ = sorted(
            k for k in recorded.keys() | recomputed.keys() if recorded.get(k) != recomputed.get(k)
        )
        if differ:
            first = differ[0]
            imported = self.origins.get(event.stream)
            run = event.stream if imported is None else f"{event.stream} (imported from {imported})"
            raise fail(
                f"recorded score of {run} case {event.case_id} attempt {event.attempt} "
                f"(scorer {event.scorer_version}) differs from its evidence: {', '.join(differ)} "
                f"({first}: recorded {recorded.get(first)!r}, "
                f"recomputed {recomputed.get(first)!r})"
            )

    def reexecute(
        self,
        seq: int,
        evidence: _Named,
        bench: pipeline.Bench,
        started: RunStarted,
        bank_hash: str,
        score: ScoreComputed,
    ) -> None:
        """Run the scored SQL again and compare with the recorded SqlExecuted at ``seq``."""
        owner, recorded = self.owner, evidence.executed
        if recorded is None:
            raise broken("re-execution asked for an attempt with no SqlExecuted")
        if recorded.error_kind in pipeline.MACHINE_STOPS:
            owner.not_comparable += 1
            return
        judged = pipeline.judge(
            bench,
            parsed=evidence.parsed,
            pool=self.pool(bank_hash),
            recorded=evidence.recorded(),
            limits=_run_limits(started),
            version=score.scorer_version,
        )
        if not judged.executions:
            return  # the recorded guard did not pass it: the score check refuses it
        owner.rerun += 1
        owner.count(self.origins.get(score.stream, HERE), rerun=1)
        rerun = judged.executions[-1]
        if rerun.error_kind in pipeline.MACHINE_STOPS:
            owner.not_comparable += 1
            return
        differ = pipeline.execution_differences(recorded, rerun)
        if differ:
            first = differ[0]
            bank = self.banks[bank_hash][0]
            shown = _short(getattr(rerun, first))
            if recorded.scrubbed not in (msgspec.UNSET, 0) and first in ("columns", "rows"):
                # The re-execution prints what the run scrubbed (issue 30): never echo it.
                shown = "not shown (the recorded result had a secret scrubbed from it)"
            raise VerificationError(
                f"seq {seq}: the SqlExecuted of {recorded.stream} case {recorded.case_id} "
                f"attempt {recorded.attempt} differs from re-executing its SQL on bank "
                f"{bank.bank_id}@{bank.version}: {', '.join(differ)} ({first}: recorded "
                f"{_short(getattr(recorded, first))}, re-executed {shown})",
                seq=seq,
            )
        owner.equal += 1


def _short(value: Any, limit: int = 120) -> str:
    """A field as stored (JSON), cut to ``limit`` characters."""
    text = "unset" if value is msgspec.UNSET else msgspec.json.encode(value).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"
