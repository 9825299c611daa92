"""Frozen baselines: a run's signed events as a verifiable bundle, and its pinned scorecard.

A baseline is a folder (docs/gate.md "Frozen baselines"):

* ``events.jsonl``: one line per event, in log order: the ledger's signer
  events (SignerRegistered / SignerRetired, from the genesis on), the
  BankPublished the run names, and every event of the run's stream. Each line
  holds the original ``seq``, the stored ``body`` (the exact signed bytes, as
  UTF-8 text), its ``leaf_hash``, the signer's ``key_id``, the ``sig``
  (base64) and ``prev_chain``, the chain value of the row before it in the
  source ledger, which an event/v2 signature covers (bundles frozen before
  that rule lack it and carry event/v1 signatures). Nothing is re-encoded:
  ``baseline check`` hashes the body bytes.
* ``manifest.json``: format, run, bank, origin of the source ledger, number of
  events, SHA-256 of ``events.jsonl`` and the leaf hash of the stream head.
* ``scorecard.json``: the pinned scorecard (projections/gate.py) of the run as
  the current code computes it: every recorded score is re-derived from its
  evidence by the current scorer (no model call, no SQL run), then the metrics
  of projections/metrics.py are read from the report built on that. Re-pinned
  only on purpose (``baseline pin``).

Verification, numbered as in docs/gate.md: (1) body -> leaf hash and a known
event shape; (2) log order (seq strictly increasing); (3) every signature by a
key registered by the bundle's own signer events, inside its window, the
genesis registration signing itself; (4) the run's stream chain (stream_seq
from 0, each stream_prev the previous leaf hash); (5) one BankPublished, the
run's bank; (6) the manifest matches the events. Trust is anchored in the
genesis key, which ``baseline check`` names.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ledger import codec
from ledger.app.rescore import score_fields
from ledger.errors import (
    ChainBrokenError,
    InternalError,
    LedgerError,
    SignatureError,
    StoreError,
    UsageError,
    VerificationError,
    broken,
)
from ledger.events import (
    AttemptCancelled,
    BankPublished,
    Event,
    EventBase,
    RunStarted,
    ScoreComputed,
    SignerRegistered,
    SignerRetired,
)
from ledger.harness import score as score_mod
from ledger.keys import Keyring, verify_event_signature
from ledger.store import GENESIS_CHAIN, Ledger, StoredEvent, link_of
from projections import gate
from projections.caseruns import Item, State
from projections.outcome import terminal as outcome_of
from projections.replay import replay
from projections.report.build import build_report
from projections.report.jsonio import plain
from projections.report.schema import Scorecard

__all__ = [
    "EVENTS_FILE",
    "FIELDS",
    "FORMAT",
    "MANIFEST_FILE",
    "SCORECARD_FILE",
    "Bundle",
    "BundleEvent",
    "freeze",
    "items_of",
    "pin",
    "read_bundle",
    "recompute_scorecard",
    "rescored_state",
    "scorecard_bytes",
    "stale_fields",
    "verify_bundle",
]

FORMAT = "caseledger-baseline/1"
EVENTS_FILE = "events.jsonl"
MANIFEST_FILE = "manifest.json"
SCORECARD_FILE = "scorecard.json"
#: Fields whose coverage ``baseline check`` reports (``--require-fields`` names them).
FIELDS = ("tokens", "cost", "generation_ms", "sql_exec_ms", "invocation", "request_id")


@dataclass(frozen=True)
class BundleEvent:
    """One line of ``events.jsonl``."""

    seq: int
    body: bytes
    leaf_hash: bytes
    key_id: str
    sig: bytes
    event: Event
    prev_chain: bytes | None = None  # rule event/v2 signs it; None: an event/v1 bundle line


@dataclass(frozen=True)
class Bundle:
    """A baseline folder as read from disk (not yet verified)."""

    folder: Path
    manifest: dict[str, Any]
    events: tuple[BundleEvent, ...]
    events_sha256: str
    pinned: dict[str, Any] | None = field(default=None)

    @property
    def run_id(self) -> str:
        """The run the baseline freezes."""
        return str(self.manifest.get("run"))

    def stream(self) -> list[BundleEvent]:
        """The run's own events, in order."""
        return [e for e in self.events if e.event.stream == self.run_id]


def scorecard_bytes(card: Scorecard) -> bytes:
    """Canonical JSON of a scorecard (sorted keys, no floats) with a final newline."""
    return codec.canonical_json(plain(card)) + b"\n"


# ----------------------------------------------------------------- freeze


def _line(row: Any, prev_chain: bytes) -> bytes:
    try:
        text = bytes(row.body).decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"seq {row.seq}: stored body is not UTF-8; cannot freeze it") from None
    return (
        codec.canonical_json(
            {
                "seq": row.seq,
                "body": text,
                "leaf_hash": "sha256:" + bytes(row.leaf_hash).hex(),
                "key_id": row.key_id,
                "sig": base64.b64encode(bytes(row.sig)).decode("ascii"),
                "prev_chain": "sha256:" + prev_chain.hex(),
            }
        )
        + b"\n"
    )


def _prev_chain(ledger: Ledger, seq: int) -> bytes:
    """The chain value of the row before ``seq`` (32 zero bytes before seq 0)."""
    if seq == 0:
        return GENESIS_CHAIN
    row = ledger.get(seq - 1)
    if row is None:
        raise StoreError(f"seq {seq - 1} is missing", hint="run `caseledger verify`")
    return bytes(row.chain)


def _bank_event(row: StoredEvent) -> BankPublished:
    """The BankPublished a row selected by type holds (a mismatch means a damaged ledger)."""
    event = row.event()
    if not isinstance(event, BankPublished):
        raise StoreError(
            f"seq {row.seq}: row is filed as BankPublished but holds {type(event).__name__}",
            hint="the ledger file is damaged; run `caseledger verify` on it",
        )
    return event


def freeze(ledger: Ledger, run_id: str, out_dir: Path) -> Scorecard:
    """Write the baseline of ``run_id`` into ``out_dir``; returns its scorecard.

    Raises:
        UsageError: no such run, or ``out_dir`` already holds a baseline.
    """
    stream = ledger.stream_events(run_id)
    started = stream[0].event() if stream else None
    if not isinstance(started, RunStarted):
        raise UsageError(
            f"no run {run_id!r} in {ledger.path}", hint="list runs with `caseledger runs`"
        )
    present = [n for n in (EVENTS_FILE, MANIFEST_FILE, SCORECARD_FILE) if (out_dir / n).exists()]
    if present:
        raise UsageError(
            f"{out_dir} already holds a baseline ({', '.join(present)})",
            hint="freeze into an empty folder; re-pin with `caseledger baseline pin`",
        )
    rows = list(ledger.events_of_type(SignerRegistered, SignerRetired))
    banks = [
        r
        for r in ledger.events_of_type(BankPublished)
        if _bank_event(r).content_sha256 == started.bank_hash
    ]
    rows += banks[:1] + stream
    rows.sort(key=lambda r: r.seq)
    data = b"".join(_line(r, _prev_chain(ledger, r.seq)) for r in rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / n for n in (EVENTS_FILE, MANIFEST_FILE, SCORECARD_FILE)]
    try:
        return _write(ledger, run_id, started, rows, stream, data, out_dir)
    except BaseException:
        # Half a baseline is worse than none: remove what this call wrote.
        for path in written:
            path.unlink(missing_ok=True)
        raise


def _write(
    ledger: Ledger,
    run_id: str,
    started: RunStarted,
    rows: list[StoredEvent],
    stream: list[StoredEvent],
    data: bytes,
    out_dir: Path,
) -> Scorecard:
    (out_dir / EVENTS_FILE).write_bytes(data)
    manifest = {
        "format": FORMAT,
        "run": run_id,
        "bank": {
            "id": started.bank_id,
            "version": started.bank_version,
            "hash": started.bank_hash,
        },
        "origin": ledger.origin(),
        "events": len(rows),
        "events_sha256": codec.sha256_hex(data),
        "stream_head": link_of(bytes(stream[-1].leaf_hash)),
    }
    (out_dir / MANIFEST_FILE).write_bytes(codec.canonical_json(manifest) + b"\n")
    return pin(out_dir)


# ----------------------------------------------------------------- read and verify


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        raise UsageError(f"{path} is missing", hint="is this a baseline folder?") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not JSON ({exc})") from None


def read_bundle(folder: Path) -> Bundle:
    """Read a baseline folder (the events are parsed, not yet verified).

    Raises:
        UsageError: a file is missing or not in the baseline format (names file and line).
        ChainBrokenError: a body does not hash to its leaf hash, or is no known event.
    """
    if not folder.is_dir():
        raise UsageError(f"no baseline folder at {folder}")
    manifest = _json(folder / MANIFEST_FILE)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise UsageError(f"{folder / MANIFEST_FILE}: not a {FORMAT} manifest")
    path = folder / EVENTS_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path} is missing") from None
    out = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            seq, text, key_id = raw["seq"], raw["body"], raw["key_id"]
            leaf = bytes.fromhex(raw["leaf_hash"].removeprefix("sha256:"))
            sig = base64.b64decode(raw["sig"], validate=True)
            prev_chain = None
            if "prev_chain" in raw:
                prev_chain = bytes.fromhex(raw["prev_chain"].removeprefix("sha256:"))
                if len(prev_chain) != 32:
                    raise ValueError("prev_chain must be a SHA-256 digest")
            if not isinstance(seq, int) or not isinstance(text, str):
                raise TypeError("seq must be an integer and body a string")
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
            raise UsageError(f"{path} line {number}: not a bundle line ({exc})") from None
        body = text.encode("utf-8")
        # (1) the stored bytes hash to the leaf hash and decode to a known shape.
        if codec.leaf_hash(body) != leaf:
            raise ChainBrokenError(
                f"seq {seq} ({path.name} line {number}): body hashes to "
                f"sha256:{codec.leaf_hash(body).hex()}, line says sha256:{leaf.hex()}",
                seq=seq,
            )
        try:
            event = codec.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ChainBrokenError(f"seq {seq}: body is no known event ({exc})", seq=seq) from None
        out.append(BundleEvent(seq, body, leaf, str(key_id), sig, event, prev_chain))
    pinned = _json(folder / SCORECARD_FILE) if (folder / SCORECARD_FILE).exists() else None
    return Bundle(folder, manifest, tuple(out), codec.sha256_hex(data), pinned)


def _fail(cls: type[VerificationError], seq: int, message: str) -> VerificationError:
    return cls(f"seq {seq}: {message}", seq=seq)


def verify_bundle(bundle: Bundle) -> str:
    """Verify steps (2)-(6) of the module doc; returns the genesis signer's verifier key.

    Raises:
        VerificationError: names the first bad seq (ChainBrokenError, SignatureError).
    """
    keyring = Keyring()
    previous = -1
    genesis = ""
    first_v2: int | None = None
    for e in bundle.events:
        # (2) log order.
        if e.seq <= previous:
            raise _fail(ChainBrokenError, e.seq, f"out of order after seq {previous}")
        previous = e.seq
        # (3) signatures, keys applied in log order as the store applies them.
        problem = keyring.signer_problem(e.seq, e.key_id, e.event)
        if problem is None and isinstance(e.event, SignerRegistered | SignerRetired):
            problem = keyring.event_problem(e.event)
        if problem is not None:
            raise _fail(SignatureError, e.seq, problem)
        if e.seq == 0 and isinstance(e.event, SignerRegistered):
            public = base64.b64decode(e.event.public_key)
        else:
            entry = keyring.get(e.key_id)
            if entry is None:  # signer_problem said it is registered
                raise broken(f"key {e.key_id} checked as registered but not in the keyring")
            public = entry.public_key
        # Rule event/v2 (leaf and place) first; event/v1 (leaf only) only before any v2.
        if e.prev_chain is not None and verify_event_signature(
            public, e.leaf_hash, e.sig, e.prev_chain
        ):
            first_v2 = e.seq if first_v2 is None else first_v2
        elif not verify_event_signature(public, e.leaf_hash, e.sig):
            raise _fail(SignatureError, e.seq, f"signature by key id {e.key_id} does not verify")
        elif first_v2 is not None:
            raise _fail(
                SignatureError,
                e.seq,
                f"signed under rule event/v1 after seq {first_v2} was signed under event/v2",
            )
        keyring.apply(e.seq, e.event)
        if e.seq == 0:
            entry0 = keyring.get(e.key_id)
            genesis = entry0.verifier_key if entry0 else ""
    if not genesis:
        first = bundle.events[0].seq if bundle.events else 0
        raise _fail(SignatureError, first, "the bundle lacks the ledger's genesis registration")
    _verify_stream(bundle)
    _verify_manifest(bundle)
    return genesis


def _verify_stream(bundle: Bundle) -> None:
    run_id = bundle.run_id
    prev: str | None = None
    expected = 0
    banks: list[BankPublished] = []
    for e in bundle.events:
        ev = e.event
        if ev.stream != run_id:
            if isinstance(ev, BankPublished):
                banks.append(ev)
            elif not isinstance(ev, SignerRegistered | SignerRetired):
                raise _fail(ChainBrokenError, e.seq, f"unexpected {type(ev).__name__} in bundle")
            continue
        # (4) the run's own chain.
        if ev.stream_seq != expected or ev.stream_prev != prev:
            raise _fail(
                ChainBrokenError,
                e.seq,
                f"stream {run_id}: stream_seq {ev.stream_seq} prev {ev.stream_prev}, expected "
                f"stream_seq {expected} prev {prev}",
            )
        if expected == 0 and not isinstance(ev, RunStarted):
            raise _fail(ChainBrokenError, e.seq, f"stream {run_id} does not start with RunStarted")
        expected += 1
        prev = link_of(e.leaf_hash)
    if expected == 0:
        raise VerificationError(f"the bundle holds no event of run {run_id}")
    started = bundle.stream()[0].event
    if not isinstance(started, RunStarted):
        raise VerificationError(f"the bundle of run {run_id} does not start with RunStarted")
    # (5) exactly the run's bank.
    if len(banks) != 1 or banks[0].content_sha256 != started.bank_hash:
        raise VerificationError(
            f"the bundle must hold exactly one BankPublished, of bank {started.bank_hash}; "
            f"found {len(banks)}"
        )
    if prev != bundle.manifest.get("stream_head"):
        raise VerificationError(
            f"stream head is {prev}, manifest says {bundle.manifest.get('stream_head')}"
        )


def _verify_manifest(bundle: Bundle) -> None:
    m = bundle.manifest
    # (6) the manifest describes these events.
    problems = []
    if m.get("events") != len(bundle.events):
        problems.append(f"events {m.get('events')} != {len(bundle.events)} lines")
    if m.get("events_sha256") != bundle.events_sha256:
        problems.append(f"events_sha256 {m.get('events_sha256')} != {bundle.events_sha256}")
    bank = bundle.stream()[0].event
    if isinstance(bank, RunStarted) and (m.get("bank") or {}).get("hash") != bank.bank_hash:
        problems.append("bank hash differs from the RunStarted")
    if problems:
        raise VerificationError(f"{bundle.folder / MANIFEST_FILE}: " + "; ".join(problems))


# ----------------------------------------------------------------- the scorecard


def items_of(bundle: Bundle) -> list[Item]:
    """(seq, leaf hash, event) of every bundle event, for the projections' fold."""
    return [(e.seq, e.leaf_hash, e.event) for e in bundle.events]


def _latest_scores(state: State, run_id: str) -> list[tuple[str, int, ScoreComputed, Any]]:
    """(case, attempt, score, its evidence) of each attempt whose terminal under any
    scorer version is a ScoreComputed (projections/outcome.py), in key order."""
    out = []
    for key in sorted(state.caseruns):
        caserun = state.caseruns[key]
        if caserun.run_id != run_id:
            continue
        latest = outcome_of([s.event for s in caserun.steps], None).score
        if latest is not None:
            by_leaf = {s.link: s.event for s in caserun.steps}
            evidence = [by_leaf[h] for h in latest.evidence if h in by_leaf]
            out.append((caserun.case_id, caserun.attempt, latest, evidence))
    return out


def rescored_state(
    bundle: Bundle, version: str = score_mod.SCORER_VERSION, failures: list[str] | None = None
) -> State:
    """The fold of the bundle plus, per scored attempt, a ScoreComputed under ``version``
    re-derived from the evidence its latest score names (kept in memory, never signed).

    Reference SQL is not in a bundle, so ``sql_structural_match`` (auxiliary, never a
    metric) is null in the re-derived scores. A score that can no longer be derived
    becomes an infrastructure cancellation, as in the runner, and its message is
    appended to ``failures`` when given.
    """
    state = replay(items_of(bundle))
    run_id = bundle.run_id
    started = state.runs[run_id].started
    bank = state.banks[started.bank_hash].event
    seq = max(e.seq for e in bundle.events) + 1
    extra: list[Item] = []
    stream_seq = max(e.event.stream_seq for e in bundle.stream())
    for case_id, attempt, latest, evidence in _latest_scores(state, run_id):
        stream_seq += 1
        envelope: dict[str, Any] = {
            "stream": run_id,
            "stream_seq": stream_seq,
            "stream_prev": None,
            "at": latest.at,
            "case_id": case_id,
            "attempt": attempt,
        }
        event: EventBase
        try:
            fields = score_fields(bank, {}, case_id, evidence, version)
            event = ScoreComputed(**envelope, evidence=latest.evidence, **fields)
        except score_mod.ScoringError as exc:
            event = AttemptCancelled(**envelope, reason="infrastructure", message=exc.message)
            if failures is not None:
                failures.append(f"{case_id}#{attempt}: {exc.message}")
        except LedgerError:
            raise
        except Exception as exc:
            # A scorer bug is never turned into a cancellation (or into any number).
            raise InternalError(
                exc,
                where=f"re-scoring case {case_id} attempt {attempt} of run {run_id} failed; "
                "nothing was written",
            ) from exc
        extra.append((seq, codec.leaf_hash(codec.encode(event)), event))
        seq += 1
    return replay(extra, state)


def recompute_scorecard(bundle: Bundle, failures: list[str] | None = None) -> Scorecard:
    """The run's scorecard as the current scorer and metric definitions compute it."""
    version = score_mod.SCORER_VERSION
    state = rescored_state(bundle, version, failures)
    report = build_report(state, root_hash=bytes(32), scorer=version, runs=[bundle.run_id])
    return gate.scorecard(report, bundle.run_id)


def pin(folder: Path) -> Scorecard:
    """Verify the bundle and (re)write its pinned scorecard; returns it."""
    bundle = read_bundle(folder)
    verify_bundle(bundle)
    card = recompute_scorecard(bundle)
    (folder / SCORECARD_FILE).write_bytes(scorecard_bytes(card))
    return card


def stale_fields(pinned: Mapping[str, Any], recomputed: Scorecard | Mapping[str, Any]) -> list[str]:
    """Where a pinned scorecard differs from the recomputed one (``metrics.<name>``, ...):
    both compared as JSON (the pinned file as read, so one of an earlier shape is still
    compared field by field; the recomputed one encoded by
    :func:`projections.report.jsonio.plain`)."""
    if isinstance(recomputed, Scorecard):
        encoded: Mapping[str, Any] = plain(recomputed)
        recomputed = encoded
    out = []
    for key in sorted(set(pinned) | set(recomputed)):
        a, b = pinned.get(key), recomputed.get(key)
        if key == "metrics" and isinstance(a, dict) and isinstance(b, dict):
            for name in sorted(set(a) | set(b)):
                if name not in a:
                    out.append(f"metrics.{name}: not pinned, recomputed {b[name]}")
                elif name not in b:
                    out.append(f"metrics.{name}: pinned {a[name]}, no longer computed")
                elif a[name] != b[name]:
                    out.append(f"metrics.{name}: pinned {a[name]}, recomputed {b[name]}")
        elif a != b:
            out.append(f"{key}: pinned {json.dumps(a, sort_keys=True)}, recomputed "
                       f"{json.dumps(b, sort_keys=True)}")  # fmt: skip
    return out
