"""CaseRuns: the fold that groups every run event by (run, case, attempt), and its views.

The fold keeps what the log says and decides nothing: each CaseRun holds its
ordered steps (seq, leaf hash, event). Which terminal event counts, and which
evidence belongs to it, is decided by :func:`resolve` when a view is asked for,
under one scorer version:

* the terminal of an attempt under scorer version V is the one
  :func:`projections.outcome.terminal` picks, the rule every reader shares: the
  LAST of its AttemptCancelled events and its ScoreComputed events with
  ``scorer_version`` V (a resumed run may score an attempt that was cancelled as
  interrupted; a rescore adds a ScoreComputed under a new version and leaves the
  old one);
* the evidence of a ScoreComputed is exactly the events its ``evidence`` leaf
  hashes name; the evidence of a cancellation (or of an attempt with no
  terminal) is the last batch: the steps from the last PromptSent on.

``apply`` updates the state it is given and returns it (a fold over a
700,000-event log cannot copy its state per event); it does no I/O and reads
nothing but its arguments, so replaying the same items always gives the same
state. Only ``projections/replay.py`` loops over items.

Two kinds of evidence sit beside the scores and never change them:

* a VariantChecked (variant diagnostics of one attempt, recorded after its
  ScoreComputed) is a step of its CaseRun; the view attaches the one of the
  scored batch (after the batch's PromptSent, before the next one), so a
  rescore under another version keeps the same flags;
* a calibration run's CalibrationMutantJudged, CalibrationControlChecked and
  CalibrationFinished events are kept per run in ``State.calibrations``.

A PromptSent written since issue 22 names its prompt by SHA-256 only; the text is
in the PromptStored of the same stream with that hash (stored once per run). The
fold files such a PromptSent with its text filled in from that PromptStored, so
every view reads the verbatim prompt as it did when the text was inline (the
step keeps the stored event's leaf hash). A PromptStored whose text does not hash
to its ``prompt_sha256``, or a PromptSent whose reference names no PromptStored
before it, stops the fold with a VerificationError naming the seq (exit 1), as
``verify`` does.
"""

from __future__ import annotations

import base64

import msgspec
from msgspec import UNSET

from ledger import codec
from ledger.errors import VerificationError
from ledger.events import (
    AttemptCancelled,
    BankPublished,
    CalibrationControlChecked,
    CalibrationFinished,
    CalibrationMutantJudged,
    ClaimsChecked,
    Event,
    EventImported,
    ForeignSignerRegistered,
    ModelResponded,
    OutputParsed,
    PromptSent,
    PromptStored,
    ProviderFailed,
    RunFinished,
    RunStarted,
    RunWithdrawn,
    ScoreComputed,
    SignerTrusted,
    SignerUntrusted,
    SliceComputed,
    SqlExecuted,
    SqlGuarded,
    VariantChecked,
    tag_of,
)
from projections.outcome import Outcome
from projections.outcome import terminal as outcome_of

__all__ = [
    "ATTEMPT_EVENTS",
    "CALIBRATION_EVENTS",
    "CONSUMES",
    "Attempt",
    "BankInfo",
    "CalibrationRecord",
    "CaseRun",
    "Item",
    "RunInfo",
    "State",
    "Step",
    "apply",
    "attempts_of_run",
    "caserun_key",
    "initial",
    "resolve",
    "touch_run",
]

#: Events that belong to one case attempt (VariantChecked, SliceComputed, ClaimsChecked:
#: diagnostics after the score).
ATTEMPT_EVENTS = (
    PromptSent,
    ModelResponded,
    ProviderFailed,
    OutputParsed,
    SqlGuarded,
    SqlExecuted,
    ScoreComputed,
    AttemptCancelled,
    VariantChecked,
    SliceComputed,
    ClaimsChecked,
)
#: Events of a calibration run (one mutant, one positive control, the totals).
CALIBRATION_EVENTS = (CalibrationMutantJudged, CalibrationControlChecked, CalibrationFinished)
CONSUMES = (
    BankPublished,
    RunStarted,
    RunFinished,
    RunWithdrawn,
    PromptStored,
    *ATTEMPT_EVENTS,
    *CALIBRATION_EVENTS,
    ForeignSignerRegistered,
    EventImported,
    SignerTrusted,
    SignerUntrusted,
)

#: One replay item: (seq, leaf hash bytes, decoded event).
Item = tuple[int, bytes, Event]


class Step(msgspec.Struct, array_like=True):
    """One event of a CaseRun: its log position, leaf hash (32 bytes) and body."""

    seq: int
    leaf_hash: bytes
    event: Event

    @property
    def link(self) -> str:
        """The leaf hash as events name it: ``sha256:<hex>``."""
        return "sha256:" + self.leaf_hash.hex()


class CaseRun(msgspec.Struct):
    """Every event of one (run, case, attempt), in log order."""

    run_id: str
    case_id: str
    attempt: int
    steps: list[Step] = msgspec.field(default_factory=list)


class RunInfo(msgspec.Struct):
    """A run's RunStarted, its last RunFinished, and the span of dates its events claim."""

    started: RunStarted
    started_seq: int
    first_at: str
    last_at: str
    finished: RunFinished | None = None
    events: int = 1
    #: The foreign key that signed the run's RunStarted on its home ledger, for a run
    #: imported from another machine (docs/exchange.md); None for a run recorded here.
    signer_key_id: str | None = None
    signer_name: str | None = None
    #: The origin its wrappers record (as attested by the signer, or ``unattested``).
    signer_origin: str | None = None
    #: The run's first RunWithdrawn and its seq, when an operator withdrew it.
    withdrawn: RunWithdrawn | None = None
    withdrawn_seq: int | None = None


class BankInfo(msgspec.Struct):
    """A BankPublished event and its seq."""

    seq: int
    event: BankPublished


class CalibrationRecord(msgspec.Struct):
    """The calibration events of one run, in log order (the last CalibrationFinished wins)."""

    mutants: list[CalibrationMutantJudged] = msgspec.field(default_factory=list)
    controls: list[CalibrationControlChecked] = msgspec.field(default_factory=list)
    finished: CalibrationFinished | None = None


class State(msgspec.Struct):
    """The whole fold state. ``size`` = last applied seq + 1 (the tree size it covers)."""

    size: int = 0
    banks: dict[str, BankInfo] = msgspec.field(default_factory=dict)
    runs: dict[str, RunInfo] = msgspec.field(default_factory=dict)
    caseruns: dict[str, CaseRun] = msgspec.field(default_factory=dict)
    calibrations: dict[str, CalibrationRecord] = msgspec.field(default_factory=dict)
    #: Foreign signers accepted by this ledger (signer.foreign.v1): key id -> name.
    foreign_signers: dict[str, str] = msgspec.field(default_factory=dict)
    #: Keys trusted for imported runs (signer.trusted.v1 / signer.untrusted.v1, issue 29):
    #: key id -> [seq of its newest trust, seq of the revocation after it or None].
    trusted: dict[str, list[int | None]] = msgspec.field(default_factory=dict)
    #: stream -> prompt_sha256 -> text of each PromptStored folded (issue 22).
    prompts: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)


def caserun_key(run_id: str, case_id: str, attempt: int) -> str:
    """The state key of a CaseRun (unit separators: run and case ids may hold any text).

    >>> caserun_key("r1", "c-01", 2)
    'r1\\x1fc-01\\x1f2'
    """
    return f"{run_id}\x1f{case_id}\x1f{attempt}"


def initial() -> State:
    """The empty state."""
    return State()


def apply(state: State, item: Item) -> State:
    """Fold one (seq, leaf hash, event) into the state; unknown types are ignored.

    >>> s = apply(initial(), (0, bytes(32), RunFinished(
    ...     stream="r", stream_seq=0, stream_prev=None, at="t", status="completed")))
    >>> s.size, s.runs
    (1, {})
    """
    seq, leaf, event = item
    if isinstance(event, PromptSent) and event.prompt is UNSET:
        event = _with_text(state, seq, event)
    if isinstance(event, ATTEMPT_EVENTS):
        key = caserun_key(event.stream, event.case_id, event.attempt)
        found = state.caseruns.get(key)
        if found is None:
            found = state.caseruns[key] = CaseRun(event.stream, event.case_id, event.attempt)
        found.steps.append(Step(seq, leaf, event))
        touch_run(state, event.stream, event.at)
    elif isinstance(event, CALIBRATION_EVENTS):
        record = state.calibrations.get(event.stream)
        if record is None:
            record = state.calibrations[event.stream] = CalibrationRecord()
        if isinstance(event, CalibrationMutantJudged):
            record.mutants.append(event)
        elif isinstance(event, CalibrationControlChecked):
            record.controls.append(event)
        else:
            record.finished = event
        touch_run(state, event.stream, event.at)
    elif isinstance(event, RunStarted):
        state.runs[event.run_id] = RunInfo(event, seq, event.at, event.at)
    elif isinstance(event, PromptStored):
        _store_prompt(state, seq, event)
        touch_run(state, event.stream, event.at)
    elif isinstance(event, RunFinished):
        info = touch_run(state, event.stream, event.at)
        if info is not None:
            info.finished = event
    elif isinstance(event, RunWithdrawn):
        # Not a step of the run: its dates and event count stay those of the run itself.
        info = state.runs.get(event.stream)
        if info is not None and info.withdrawn is None:
            info.withdrawn, info.withdrawn_seq = event, seq
    elif isinstance(event, BankPublished):
        state.banks.setdefault(event.content_sha256, BankInfo(seq, event))
    elif isinstance(event, EventImported):
        _apply_imported(state, seq, event)
    elif isinstance(event, ForeignSignerRegistered):
        state.foreign_signers[event.key_id] = event.name
    elif isinstance(event, SignerTrusted):
        state.trusted[event.key_id] = [seq, None]
    elif isinstance(event, SignerUntrusted):
        held = state.trusted.get(event.key_id)
        if held is not None:
            held[1] = seq
    state.size = seq + 1
    return state


def _store_prompt(state: State, seq: int, event: PromptStored) -> None:
    """Keep a PromptStored's text under its hash, once the text hashes to it."""
    found = codec.sha256_hex(event.prompt.encode())
    if found != event.prompt_sha256:
        raise VerificationError(
            f"seq {seq}: prompt.stored.v1: the prompt hashes to {found}, "
            f"not to its prompt_sha256 {event.prompt_sha256}",
            seq=seq,
        )
    state.prompts.setdefault(event.stream, {})[event.prompt_sha256] = event.prompt


def _with_text(state: State, seq: int, event: PromptSent) -> PromptSent:
    """A text-less PromptSent with the text of the PromptStored it names (same stream)."""
    text = state.prompts.get(event.stream, {}).get(event.prompt_sha256)
    if text is None:
        raise VerificationError(
            f"seq {seq}: prompt.sent.v1 of case {event.case_id} attempt {event.attempt} "
            f"names prompt {event.prompt_sha256}, which no prompt.stored.v1 before it in "
            f"stream {event.stream} holds",
            seq=seq,
        )
    return msgspec.structs.replace(event, prompt=text)


def _apply_imported(state: State, seq: int, wrapper: EventImported) -> None:
    """Fold the event a run's home ledger signed (docs/exchange.md) as the run's own.

    It keeps its original leaf hash, which the evidence of its ScoreComputed names,
    and takes the wrapper's seq, so log order is the order of import (the order it
    had at home). ``verify`` checks the inner signature; a fold only reads.
    """
    body = base64.b64decode(wrapper.body)
    inner = codec.decode(body)
    if isinstance(inner, EventImported | ForeignSignerRegistered):
        return  # never nested (import refuses it)
    apply(state, (seq, codec.leaf_hash(body), inner))
    if isinstance(inner, RunStarted):
        info = state.runs[inner.run_id]
        info.signer_key_id = wrapper.key_id
        info.signer_name = state.foreign_signers.get(wrapper.key_id, "")
        info.signer_origin = wrapper.origin


def touch_run(state: State, run_id: str, at: str) -> RunInfo | None:
    """Count one more event of a run and widen the span of dates it claims.

    What :func:`apply` does for every event of a run after its RunStarted; a
    store that keeps CaseRuns elsewhere calls it for the attempt events it files.
    """
    info = state.runs.get(run_id)
    if info is not None:
        info.events += 1
        # Times are writers' claims; order is by seq, so keep the min and max claimed.
        if at != info.last_at:
            info.first_at = min(info.first_at, at)
            info.last_at = max(info.last_at, at)
    return info


# ----------------------------------------------------------------- views


class Attempt(msgspec.Struct, frozen=True):
    """One planned attempt as a view under one scorer version."""

    run_id: str
    case_id: str
    attempt: int
    outcome: Outcome
    score: ScoreComputed | None = None
    cancel: AttemptCancelled | None = None
    prompt: PromptSent | None = None
    response: ModelResponded | None = None
    failure: ProviderFailed | None = None
    parsed: OutputParsed | None = None
    guarded: SqlGuarded | None = None
    executions: tuple[SqlExecuted, ...] = ()
    steps: tuple[Step, ...] = ()
    variant: VariantChecked | None = None
    #: The last SliceComputed that names this attempt's OutputParsed (issue 19).
    slice: SliceComputed | None = None

    @property
    def execution(self) -> SqlExecuted | None:
        """The last execution of the attempt (the one that was scored)."""
        return self.executions[-1] if self.executions else None


def resolve(caserun: CaseRun | None, scorer_version: str, planned: tuple[str, str, int]) -> Attempt:
    """The attempt under ``scorer_version``: its terminal event and its evidence.

    ``planned`` is (run id, case id, attempt) for attempts that have no events at all.
    """
    run_id, case_id, attempt = planned
    if caserun is None:
        return Attempt(run_id, case_id, attempt, "unscored")
    steps = caserun.steps
    end = outcome_of([s.event for s in steps], scorer_version)
    terminal = None if end.index is None else steps[end.index]
    variant: VariantChecked | None = None
    if terminal is not None and isinstance(terminal.event, ScoreComputed):
        named = set(terminal.event.evidence)
        found = [s for s in steps if s.link in named and s.seq < terminal.seq]
        evidence = [s.event for s in found]
        variant = _variant_of(steps, found[0].seq if found else _last_prompt(steps, terminal.seq))
    else:
        stop = terminal.seq if terminal is not None else None
        before = [s for s in steps if stop is None or s.seq < stop]
        starts = [i for i, s in enumerate(before) if isinstance(s.event, PromptSent)]
        found = before[starts[-1] :] if starts else []
        evidence = [s.event for s in found]
    fields: dict[str, object] = {"executions": []}
    for ev in evidence:
        if isinstance(ev, SqlExecuted):
            fields["executions"].append(ev)  # type: ignore[attr-defined]
        else:
            fields[_SLOTS.get(type(ev), "_")] = ev
    fields.pop("_", None)
    fields["executions"] = tuple(fields["executions"])  # type: ignore[arg-type]
    if end.outcome == "scored":
        fields["score"] = end.event
    elif end.outcome == "cancelled":
        fields["cancel"] = end.event
    return Attempt(
        run_id,
        case_id,
        attempt,
        end.outcome,
        steps=tuple(steps),
        variant=variant,
        slice=_slice_of(steps, found),
        **fields,  # type: ignore[arg-type]
    )


def _slice_of(steps: list[Step], evidence: list[Step]) -> SliceComputed | None:
    """The last SliceComputed whose evidence names the attempt's OutputParsed: a slice
    reads the answer, so every scorer version of that answer sees the same slice."""
    parsed = [s.link for s in evidence if isinstance(s.event, OutputParsed)]
    if not parsed:
        return None
    found: SliceComputed | None = None
    for step in steps:
        if isinstance(step.event, SliceComputed) and parsed[-1] in step.event.evidence:
            found = step.event
    return found


def _last_prompt(steps: list[Step], before: int) -> int:
    """The seq of the last PromptSent before ``before`` (-1 when there is none)."""
    seqs = [s.seq for s in steps if isinstance(s.event, PromptSent) and s.seq < before]
    return seqs[-1] if seqs else -1


def _variant_of(steps: list[Step], start: int) -> VariantChecked | None:
    """The last VariantChecked of the batch that begins at seq ``start`` (its PromptSent).

    The batch ends at the next PromptSent: a later batch's diagnostics belong to
    another answer. Diagnostics recorded after a rescore's ScoreComputed still
    belong to the batch they follow, so every scorer version sees the same flags.
    """
    found: VariantChecked | None = None
    for step in steps:
        if step.seq <= start:
            continue
        if isinstance(step.event, PromptSent):
            break
        if isinstance(step.event, VariantChecked):
            found = step.event
    return found


_SLOTS: dict[type, str] = {
    PromptSent: "prompt",
    ModelResponded: "response",
    ProviderFailed: "failure",
    OutputParsed: "parsed",
    SqlGuarded: "guarded",
}


def attempts_of_run(state: State, run_id: str, scorer_version: str) -> list[Attempt]:
    """Every planned attempt of a run (its cases x 1..N, in bank order) under a scorer version.

    Attempts the run never planned (they cannot exist in an honest log) are left out.
    """
    info = state.runs[run_id]
    started = info.started
    found = state.caseruns
    return [
        resolve(found.get(caserun_key(run_id, case_id, n)), scorer_version, (run_id, case_id, n))
        for case_id in started.case_ids
        for n in range(1, started.attempts + 1)
    ]


def type_name(event: Event) -> str:
    """The stable tag of an event, e.g. ``score.computed.v1``."""
    return tag_of(type(event))
