"""Runs between machines: ``export run`` writes a bundle, ``import run`` checks and appends it.

A bundle (docs/exchange.md) holds one run's events exactly as signed on the ledger
that ran it: each body byte for byte, its leaf hash (the event id), the original
key id and Ed25519 signature, and the chain value before it on that ledger (which
rule event/v2 signs); the verifier key (name, key id, public key) of every key
that signed them; the BankPublished of the run's bank, signed the same way; and
the format version. Its bytes are canonical JSON of those values only (no clock,
no path), so exporting the same run twice gives the same file.

Importing checks everything before anything is written, then appends one batch
signed by the importing operator: a ``signer.foreign.v1`` for each signer the
ledger has not accepted yet and one ``event.imported.v1`` per original event, in
the run's stream (ledger/foreign.py says why the events are wrapped and not
stored as native rows: their signatures bind the home ledger's chain).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import msgspec

from ledger import codec
from ledger.errors import ChainBrokenError, SignatureError, UsageError, VerificationError
from ledger.events import (
    LEDGER_STREAM,
    BankPublished,
    EventImported,
    ForeignSignerRegistered,
    RunFinished,
    RunStarted,
    tag_of,
)
from ledger.foreign import (
    NOT_IMPORTABLE,
    foreign_key_problem,
    inner_of,
    link,
    signature_problem,
)
from ledger.harness.runner import RUN_ID_PATTERN
from ledger.keys import Signer, encode_public_key
from ledger.store import GENESIS_CHAIN, Draft, Ledger

__all__ = [
    "FORMAT",
    "Bundle",
    "BundleEvent",
    "BundleSigner",
    "ImportResult",
    "check_bundle",
    "export_run",
    "import_run",
    "read_bundle",
]

#: The bundle format; a reader refuses any other value.
FORMAT = "caseledger-run-bundle/v1"
_BANK_TAG = tag_of(BankPublished)
_IMPORTED_TAG = tag_of(EventImported)
_FOREIGN_TAG = tag_of(ForeignSignerRegistered)


class BundleSigner(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A key that signed events of the bundle on its home ledger."""

    key_id: str
    name: str
    public_key: str  # standard base64 of the 32 raw bytes
    verifier_key: str  # the C2SP verifier-key string, name+keyid+base64


class BundleEvent(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One event as stored on its home ledger (binary values as base64 / hex)."""

    seq: int
    leaf_hash: str  # sha256:<hex>, the event id
    body: str  # standard base64 of the canonical bytes
    prev_chain: str | None  # hex chain value before it (rule event/v2); None for event/v1
    key_id: str
    sig: str  # standard base64


class Bundle(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A run exported from one ledger (see the module doc and docs/exchange.md)."""

    format: str
    run: str
    origin: str
    bank_hash: str
    bank: BundleEvent
    signers: tuple[BundleSigner, ...]
    events: tuple[BundleEvent, ...]


# ----------------------------------------------------------------- export


def _bundle_event(
    seq: int, body: bytes, leaf: bytes, prev: bytes, key_id: str, sig: bytes, public_key: bytes
) -> BundleEvent:
    """The row as a bundle event, after checking its signature (rule v2, else v1)."""
    if signature_problem(public_key, leaf, sig, prev) is None:
        prev_chain: str | None = prev.hex()
    elif signature_problem(public_key, leaf, sig, None) is None:
        prev_chain = None
    else:
        raise SignatureError(
            f"seq {seq}: signature does not verify; not exported",
            seq=seq,
            hint="run `caseledger verify` on this ledger",
        )
    return BundleEvent(
        seq=seq,
        leaf_hash=link(leaf),
        body=base64.b64encode(body).decode("ascii"),
        prev_chain=prev_chain,
        key_id=key_id,
        sig=base64.b64encode(sig).decode("ascii"),
    )


def export_run(ledger: Ledger, run_id: str) -> bytes:
    """The bundle of run ``run_id`` as canonical JSON bytes (one line, newline-terminated).

    Every row is read through the checked scan (leaf hashes and chain hold) and
    every exported signature is checked with the key the ledger registered.

    Raises:
        UsageError: no such run, an unfinished run, or a run this ledger imported.
        VerificationError: a row or signature of the ledger does not hold (exit 1).
    """
    keyring = ledger.keyring()
    rows: list[tuple[int, bytes, bytes, bytes, str, bytes]] = []
    banks: dict[str, tuple[int, bytes, bytes, bytes, str, bytes]] = {}
    prev = GENESIS_CHAIN
    origin = ""
    for row in ledger.scan_rows():
        seq, body, leaf, chain, key_id, sig, head = (*row[:6], row[9])
        if seq == 0:
            origin = "caseledger/" + leaf.hex()[:16]
        if head.stream == run_id:
            rows.append((seq, body, leaf, prev, key_id, sig))
        elif head.type == _BANK_TAG:
            event = codec.decode(body)
            if isinstance(event, BankPublished):
                banks.setdefault(event.content_sha256, (seq, body, leaf, prev, key_id, sig))
        prev = chain
    if not rows:
        raise UsageError(
            f"no run {run_id} in {ledger.location}", hint="`caseledger runs` lists the runs"
        )
    decoded = [codec.decode(r[1]) for r in rows]
    if isinstance(decoded[0], EventImported):
        raise UsageError(
            f"run {run_id} was imported into {ledger.location} from "
            f"{decoded[0].origin}: export it from its home ledger"
        )
    started = decoded[0]
    if not isinstance(started, RunStarted):
        raise UsageError(f"stream {run_id} in {ledger.location} is not a run")
    if not any(isinstance(e, RunFinished) for e in decoded):
        raise UsageError(
            f"run {run_id} is not finished (it has no RunFinished): a partial run is not exported",
            hint=f"finish it first: caseledger run ... --resume {run_id}",
        )
    bank_row = banks.get(started.bank_hash)
    if bank_row is None:
        raise UsageError(f"run {run_id} names bank {started.bank_hash}, not published here")
    signers: dict[str, BundleSigner] = {}
    out: list[BundleEvent] = []
    for seq, body, leaf, before, key_id, sig in [bank_row, *rows]:
        entry = keyring.get(key_id)
        if entry is None:
            raise SignatureError(f"seq {seq}: signed by unregistered key id {key_id}", seq=seq)
        signers[key_id] = BundleSigner(
            key_id=key_id,
            name=entry.name,
            public_key=encode_public_key(entry.public_key),
            verifier_key=entry.verifier_key,
        )
        out.append(_bundle_event(seq, body, leaf, before, key_id, sig, entry.public_key))
    bundle = Bundle(
        format=FORMAT,
        run=run_id,
        origin=origin,
        bank_hash=started.bank_hash,
        bank=out[0],
        signers=tuple(signers[k] for k in sorted(signers)),
        events=tuple(out[1:]),
    )
    return codec.canonical_json(bundle) + b"\n"


# ----------------------------------------------------------------- import


def read_bundle(data: bytes, name: str) -> Bundle:
    """Parse a bundle file's bytes; UsageError (exit 2) naming the file when it is not one."""
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise UsageError(f"{name}: not a run bundle (not JSON: {exc})") from None
    except RecursionError:  # msgspec's own depth check (``[[[[...`` 100,000 deep)
        raise UsageError(
            f"{name}: not a run bundle (JSON nested too deep to read)",
            hint="write one with `caseledger export run RUN -o FILE`",
        ) from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        found = raw.get("format") if isinstance(raw, dict) else None
        raise UsageError(
            f"{name}: not a {FORMAT} bundle (format is {found!r})",
            hint="write one with `caseledger export run RUN -o FILE`",
        )
    try:
        return msgspec.convert(raw, Bundle)
    except msgspec.ValidationError as exc:
        raise UsageError(f"{name}: malformed run bundle: {exc}") from None


@dataclass(frozen=True)
class _Checked:
    """A bundle event whose bytes and original signature held."""

    index: int
    source: BundleEvent
    event: Any


def _where(name: str, index: int, ev: BundleEvent) -> str:
    return f"{name}: event {index} (seq {ev.seq} on its home ledger, event id {ev.leaf_hash})"


def _check_event(
    name: str, index: int, ev: BundleEvent, keys: dict[str, bytes], label: str | None = None
) -> _Checked:
    where = label or _where(name, index, ev)
    try:
        body = base64.b64decode(ev.body, validate=True)
        sig = base64.b64decode(ev.sig, validate=True)
        prev = None if ev.prev_chain is None else bytes.fromhex(ev.prev_chain)
    except ValueError:
        raise VerificationError(
            f"{where}: body, signature or prev_chain is not well encoded; nothing was imported"
        ) from None
    leaf = codec.leaf_hash(body)
    if link(leaf) != ev.leaf_hash:
        raise VerificationError(
            f"{where}: body hashes to {link(leaf)}, not to its event id "
            "(the bundle was changed); nothing was imported"
        )
    public_key = keys.get(ev.key_id)
    if public_key is None:
        raise SignatureError(
            f"{where}: signed by key id {ev.key_id}, which the bundle's signers do not list; "
            "nothing was imported"
        )
    problem = signature_problem(public_key, leaf, sig, prev)
    if problem:
        raise SignatureError(f"{where}: {problem}; nothing was imported")
    try:
        event = codec.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise VerificationError(f"{where}: body is not a known event: {exc}") from None
    return _Checked(index, ev, event)


def check_bundle(bundle: Bundle, name: str) -> tuple[BankPublished, list[_Checked]]:
    """Check a bundle on its own: signers, every event's bytes and signature, completeness.

    Raises VerificationError / SignatureError / ChainBrokenError (exit 1) naming the event.
    """
    keys: dict[str, bytes] = {}
    for s in bundle.signers:
        fake = ForeignSignerRegistered(
            stream=LEDGER_STREAM,
            stream_seq=0,
            stream_prev=None,
            at="-",
            key_id=s.key_id,
            name=s.name,
            public_key=s.public_key,
            origin=bundle.origin,
            accepted_by="-",
        )
        problem = foreign_key_problem(fake)
        if problem:
            raise SignatureError(f"{name}: signer {s.name}: {problem}; nothing was imported")
        keys[s.key_id] = base64.b64decode(s.public_key)
    run = bundle.run
    if not RUN_ID_PATTERN.fullmatch(run) or run == LEDGER_STREAM:
        raise UsageError(f"{name}: bad run id {run!r}")
    bank = _check_event(name, -1, bundle.bank, keys, f"{name}: the bank's BankPublished").event
    if not isinstance(bank, BankPublished) or bank.content_sha256 != bundle.bank_hash:
        raise VerificationError(
            f"{name}: the bundle's BankPublished is not bank {bundle.bank_hash}; "
            "nothing was imported"
        )
    checked = [_check_event(name, i, ev, keys) for i, ev in enumerate(bundle.events)]
    if not checked:
        raise VerificationError(f"{name}: the bundle holds no events of run {run}")
    prev: str | None = None
    last_seq = -1
    for c in checked:
        event, where = c.event, _where(name, c.index, c.source)
        if isinstance(event, NOT_IMPORTABLE) or event.stream != run:
            raise VerificationError(
                f"{where}: a {type(event).__name__} of stream {event.stream} is not an event "
                f"of run {run}; nothing was imported"
            )
        if c.source.seq <= last_seq:
            raise ChainBrokenError(f"{where}: seq {c.source.seq} after seq {last_seq}")
        if event.stream_seq != c.index or event.stream_prev != prev:
            missing = "missing" if event.stream_seq > c.index else "out of order"
            raise ChainBrokenError(
                f"{where}: run {run} stream_seq {event.stream_seq} after {event.stream_prev}, "
                f"expected stream_seq {c.index} after {prev}: an event is {missing} "
                "(a partial run); nothing was imported"
            )
        prev, last_seq = c.source.leaf_hash, c.source.seq
    first = checked[0].event
    if not isinstance(first, RunStarted) or first.run_id != run:
        raise ChainBrokenError(
            f"{_where(name, 0, bundle.events[0])}: a run starts with its RunStarted; "
            "nothing was imported"
        )
    if first.bank_hash != bundle.bank_hash:
        raise VerificationError(
            f"{name}: run {run} names bank {first.bank_hash}, the bundle says "
            f"{bundle.bank_hash}; nothing was imported"
        )
    if not any(isinstance(c.event, RunFinished) for c in checked):
        raise ChainBrokenError(
            f"{name}: run {run} has no RunFinished (a partial run: {len(checked)} events, "
            f"the last is event {len(checked) - 1}, seq {checked[-1].source.seq}); "
            "nothing was imported",
            hint="export the run again after it finished on its home machine",
        )
    return bank, checked


@dataclass(frozen=True)
class ImportResult:
    """What ``import run`` did."""

    run_id: str
    origin: str
    events: int
    already: bool  # the same bundle was imported before: nothing appended
    registered: tuple[str, ...]  # foreign signers accepted now, "name (key id)"
    seqs: tuple[int, ...] = ()


def import_run(ledger: Ledger, signer: Signer, data: bytes, name: str) -> ImportResult:
    """Check the bundle ``data`` (file ``name``) against itself and this ledger, then append.

    Raises:
        UsageError (exit 2): not a bundle; the bank is not published in this ledger.
        VerificationError (exit 1): a changed, partial or forked bundle, or a run id
            this ledger already holds with other events; nothing is appended.
    """
    if signer.role != "operator":
        raise UsageError(f"importing a run needs an operator key, {signer.name} is {signer.role}")
    bundle = read_bundle(data, name)
    _, checked = check_bundle(bundle, name)
    run = bundle.run
    size = ledger.size()
    banks: set[str] = set()
    accepted: dict[str, ForeignSignerRegistered] = {}
    stream: list[tuple[int, Any]] = []
    for row in ledger.scan_rows(size):
        seq, body, head = row[0], row[1], row[9]
        if head.type == _BANK_TAG:
            event = codec.decode(body)
            if isinstance(event, BankPublished):
                banks.add(event.content_sha256)
        elif head.type == _FOREIGN_TAG:
            event = codec.decode(body)
            if isinstance(event, ForeignSignerRegistered):
                accepted.setdefault(event.key_id, event)
        if head.stream == run:
            stream.append((seq, codec.decode(body)))
    if bundle.bank_hash not in banks:
        raise UsageError(
            f"{name}: run {run} was made on bank {bundle.bank_hash}, which is not published "
            f"in {ledger.location}; nothing was imported",
            hint="publish that bank here first (caseledger bank publish), then import again",
        )
    if stream:
        return _already(bundle, checked, stream, name, ledger)
    registered: list[Draft] = []
    names: list[str] = []
    for s in bundle.signers:
        known = accepted.get(s.key_id)
        if known is not None and known.origin == bundle.origin:
            continue
        if known is not None:
            raise VerificationError(
                f"{name}: signer {s.name} ({s.key_id}) was accepted here for ledger "
                f"{known.origin}, this bundle comes from {bundle.origin}; nothing was imported"
            )
        fields = {
            "key_id": s.key_id,
            "name": s.name,
            "public_key": s.public_key,
            "origin": bundle.origin,
            "accepted_by": signer.key_id,
        }
        registered.append(Draft(ForeignSignerRegistered, LEDGER_STREAM, fields))
        names.append(f"{s.name} ({s.key_id})")
    wrappers = [
        Draft(
            EventImported,
            run,
            {
                "origin": bundle.origin,
                "origin_seq": c.source.seq,
                "body": c.source.body,
                "prev_chain": c.source.prev_chain,
                "key_id": c.source.key_id,
                "sig": c.source.sig,
            },
        )
        for c in checked
    ]
    seqs = ledger.append([*registered, *wrappers], signer, expect_size=size)
    return ImportResult(run, bundle.origin, len(checked), False, tuple(names), tuple(seqs))


def _already(
    bundle: Bundle,
    checked: list[_Checked],
    stream: list[tuple[int, Any]],
    name: str,
    ledger: Ledger,
) -> ImportResult:
    """The run is in the ledger already: the same import (a no-op), else a refusal."""
    run = bundle.run
    first = stream[0][1]
    if not isinstance(first, EventImported):
        raise VerificationError(
            f"{name}: run {run} already exists in {ledger.location}, recorded there (seq "
            f"{stream[0][0]}), not imported; a run id names one run: nothing was imported",
            hint="a run from another machine needs its own run id (caseledger run --run-id)",
        )
    imported = [(seq, e) for seq, e in stream if isinstance(e, EventImported)]
    for c in checked:
        if c.index >= len(imported):
            raise VerificationError(
                f"{_where(name, c.index, c.source)}: run {run} was imported with "
                f"{len(imported)} events; this bundle has {len(checked)} (a fork of run "
                f"{run}); nothing was imported"
            )
        seq, have = imported[c.index]
        if have.body != c.source.body or have.sig != c.source.sig or have.origin != bundle.origin:
            inner, _ = inner_of(have)
            theirs = link(inner.leaf) if inner is not None else "an unreadable event"
            raise VerificationError(
                f"{_where(name, c.index, c.source)}: run {run} was imported from "
                f"{have.origin} with event {theirs} there (seq {seq}): two bundles claim run "
                f"{run} with different events (a fork); nothing was imported"
            )
    if len(imported) != len(checked):
        raise VerificationError(
            f"{name}: run {run} was imported with {len(imported)} events; this bundle has "
            f"{len(checked)} (a fork of run {run}); nothing was imported"
        )
    return ImportResult(run, bundle.origin, len(checked), True, ())
