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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from msgspec import UNSET, UnsetType

from ledger import codec
from ledger.app.trust import TrustKey, trust_draft
from ledger.errors import (
    ChainBrokenError,
    SignatureError,
    StoreConflictError,
    UsageError,
    VerificationError,
)
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
from ledger.keys import Keyring, Signer, TrustEntry, encode_public_key
from ledger.run.runner import RUN_ID_PATTERN
from ledger.store import GENESIS_CHAIN, Draft, Ledger

__all__ = [
    "FORMAT",
    "UNATTESTED",
    "Bundle",
    "BundleEvent",
    "BundleSigner",
    "ImportResult",
    "OriginProof",
    "check_bundle",
    "export_run",
    "import_run",
    "origin_message",
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


class OriginProof(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A signature by a key that signed the run, over :func:`origin_message` (issue 29)."""

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
    #: The origin attested by a key that signed the run; absent: the origin is not bound
    #: and an importing ledger records the run's origin as ``unattested``.
    origin_proof: OriginProof | UnsetType = UNSET


#: The origin an imported run is recorded under when its bundle does not attest one.
UNATTESTED = "unattested"
#: Domain separation of the origin attestation (never a valid event or note message).
ORIGIN_PREFIX = b"caseledger/run-origin/v1\n"


def origin_message(origin: str, run: str, first: str, last: str) -> bytes:
    """What a bundle's origin proof signs: the origin, the run id and the event ids of the
    run's first and last events, one per line after the domain prefix."""
    return ORIGIN_PREFIX + f"{origin}\n{run}\n{first}\n{last}\n".encode()


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


def export_run(ledger: Ledger, run_id: str, attest: Signer | None = None) -> bytes:
    """The bundle of run ``run_id`` as canonical JSON bytes (one line, newline-terminated).

    Every row is read through the checked scan (leaf hashes and chain hold) and
    every exported signature is checked with the key the ledger registered. With
    ``attest`` (the exporting operator's key, when it signed the run) the bundle's
    origin is attested by its signature (``origin_proof``); Ed25519 signatures are
    deterministic, so the bundle stays the same bytes.

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
    events = tuple(out[1:])
    proof: OriginProof | UnsetType = UNSET
    if attest is not None and any(ev.key_id == attest.key_id for ev in events):
        message = origin_message(origin, run_id, events[0].leaf_hash, events[-1].leaf_hash)
        sig = base64.b64encode(attest.sign(message)).decode("ascii")
        proof = OriginProof(key_id=attest.key_id, sig=sig)
    bundle = Bundle(
        format=FORMAT,
        run=run_id,
        origin=origin,
        bank_hash=started.bank_hash,
        bank=out[0],
        signers=tuple(signers[k] for k in sorted(signers)),
        events=events,
        origin_proof=proof,
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
        if s.key_id in keys:
            raise VerificationError(
                f"{name}: signer {s.name} ({s.key_id}) is listed twice; nothing was imported"
            )
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
    trusted: tuple[str, ...] = ()  # keys trusted now by --trust, "name (key id)"
    #: name (key id) -> the seq of the signer.trusted.v1 its run is accepted under.
    trusted_since: tuple[tuple[str, int], ...] = ()


def attested_origin(bundle: Bundle, name: str) -> str:
    """The origin the bundle's proof attests, or :data:`UNATTESTED` without a proof.

    The proof must be by a key that signed the run's events and verify over
    :func:`origin_message`; a proof that does not (an edited origin, a proof moved
    from another bundle) refuses the bundle.

    Raises:
        SignatureError (exit 1): the proof does not hold; nothing is imported.
    """
    proof = bundle.origin_proof
    if isinstance(proof, UnsetType):
        return UNATTESTED
    signers = {s.key_id: s for s in bundle.signers}
    run_keys = {ev.key_id for ev in bundle.events}
    who = signers.get(proof.key_id)
    if who is None or proof.key_id not in run_keys or not bundle.events:
        raise SignatureError(
            f"{name}: the origin proof is by key id {proof.key_id}, which signed no event of "
            f"run {bundle.run}; nothing was imported"
        )
    first, last = bundle.events[0].leaf_hash, bundle.events[-1].leaf_hash
    try:
        sig = base64.b64decode(proof.sig, validate=True)
        public = base64.b64decode(who.public_key, validate=True)
        Ed25519PublicKey.from_public_bytes(public).verify(
            sig, origin_message(bundle.origin, bundle.run, first, last)
        )
    except (ValueError, InvalidSignature):
        raise SignatureError(
            f"{name}: the origin {bundle.origin} is not what key {who.name} ({who.key_id}) "
            "attested for this run (the origin or the run was changed); nothing was imported"
        ) from None
    return bundle.origin


def _not_trusted(name: str, s: BundleSigner, keyring: Keyring) -> SignatureError:
    """The refusal of a run signed by a key this ledger does not trust."""
    bound = keyring.trusted_by_name(s.name)
    native = keyring.by_name(s.name)
    if bound is not None and bound.key_id != s.key_id:
        why = (
            f"the key differs from the one trusted under that name ({bound.key_id}, seq "
            f"{bound.trusted_seq})"
        )
    elif native is not None and native.key_id != s.key_id:
        why = f"that name is this ledger's own key {native.key_id}"
    else:
        why = "the key is not trusted here (no trust on first use)"
    return SignatureError(
        f"{name}: run signed by {s.name} (key id {s.key_id}): {why}; nothing was imported",
        hint=f"if you trust this key, get its verifier key from its owner (not from the "
        f"bundle) and run `caseledger signers trust KEY.pub --name {s.name}`, or "
        "`caseledger import run FILE --trust KEY.pub`",
    )


def _trust_of(
    name: str, s: BundleSigner, keyring: Keyring, origin: str, pending: TrustEntry | None
) -> TrustEntry:
    """The trust a run key is accepted under (refusing an untrusted, revoked or
    wrong-origin key with SignatureError, exit 1)."""
    entry = pending if pending is not None and pending.key_id == s.key_id else None
    entry = entry or keyring.trusted(s.key_id)
    if entry is None or entry.name != s.name:
        raise _not_trusted(name, s, keyring)
    if entry.revoked_seq is not None:
        raise SignatureError(
            f"{name}: run signed by {s.name} (key id {s.key_id}), whose trust was revoked at "
            f"seq {entry.revoked_seq}; nothing was imported"
        )
    if entry.origin is not None and origin != entry.origin:
        raise SignatureError(
            f"{name}: run signed by {s.name} (key id {s.key_id}) from {origin}; the key is "
            f"trusted only for runs of {entry.origin}; nothing was imported"
        )
    return entry


#: How many times ``import run`` checks the ledger and appends when other writers keep
#: moving the log between its check and its append (docs/exchange.md).
IMPORT_TRIES = 5


def import_run(
    ledger: Ledger,
    signer: Signer,
    data: bytes,
    name: str,
    *,
    trust: TrustKey | None = None,
    trust_origin: str | None = None,
    before_append: Callable[[int], None] | None = None,
) -> ImportResult:
    """Check the bundle ``data`` (file ``name``) against itself and this ledger, then append.

    Every key that signed the run's events must be trusted here (``signers trust``);
    ``trust`` trusts one more key in the same batch (``import run --trust``), after
    every check held. The append expects the tree size the ledger was checked at;
    when another writer moved the log meanwhile, the ledger checks are made again at
    the new size and the append retried, up to IMPORT_TRIES times in all.
    ``before_append(try)`` is called between the checks and each append (tests move
    the log there).

    Raises:
        UsageError (exit 2): not a bundle; the bank is not published in this ledger;
            ``trust`` cannot be trusted here (its name names another key).
        VerificationError / SignatureError (exit 1): a changed, partial or forked bundle,
            a run id this ledger already holds with other events, a key not trusted
            here, an origin its key did not attest; nothing is appended.
        StoreConflictError (exit 1): the log moved before every one of the tries.
    """
    if signer.role != "operator":
        raise UsageError(f"importing a run needs an operator key, {signer.name} is {signer.role}")
    bundle = read_bundle(data, name)
    _, checked = check_bundle(bundle, name)
    origin = attested_origin(bundle, name)
    for attempt in range(1, IMPORT_TRIES + 1):
        try:
            return _import_checked(
                ledger, signer, bundle, checked, origin, name, trust, trust_origin,
                before_append, attempt,
            )  # fmt: skip
        except StoreConflictError as exc:
            moved = exc
    raise StoreConflictError(
        f"{name}: the ledger moved under each of {IMPORT_TRIES} tries to import run "
        f"{bundle.run} (last: {moved}); nothing was imported",
        hint="other writers keep appending: run `caseledger import run` again when they pause",
    )


def _import_checked(
    ledger: Ledger,
    signer: Signer,
    bundle: Bundle,
    checked: list[_Checked],
    origin: str,
    name: str,
    trust: TrustKey | None,
    trust_origin: str | None,
    before_append: Callable[[int], None] | None,
    attempt: int,
) -> ImportResult:
    """Check a checked bundle against the ledger as it is now, then append it expecting
    the size it was checked at (StoreConflictError when the log moved meanwhile)."""
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
        return _already(bundle, origin, checked, stream, name, ledger)
    keyring = ledger.keyring()
    drafts: list[Draft] = []
    pending: TrustEntry | None = None
    trusted_now: list[str] = []
    run_keys = {c.source.key_id for c in checked}
    if trust is not None:
        if trust.key_id not in run_keys:
            raise UsageError(
                f"{name}: --trust names {trust.name} ({trust.key_id}), which signed no event "
                f"of run {run} (its signers: {', '.join(sorted(run_keys))}); nothing was "
                "imported"
            )
        held = keyring.trusted(trust.key_id)
        if held is None or held.revoked_seq is not None:
            drafts.append(trust_draft(ledger, trust, signer, trust_origin))
            # its seq is known after the append; the window opens before the run's rows
            pending = TrustEntry(
                trust.key_id, trust.name, trust.public_key, trust_origin, trusted_seq=-1
            )
            trusted_now.append(f"{trust.name} ({trust.key_id})")
    trusts: dict[str, TrustEntry] = {}
    for s in bundle.signers:
        if s.key_id in run_keys:
            trusts[s.key_id] = _trust_of(name, s, keyring, origin, pending)
    names: list[str] = []
    for s in bundle.signers:
        if s.key_id not in run_keys:
            continue  # signed only the bank's BankPublished, which is not imported
        known = accepted.get(s.key_id)
        if known is not None and known.origin == origin:
            continue
        if known is not None:
            raise VerificationError(
                f"{name}: signer {s.name} ({s.key_id}) was accepted here for ledger "
                f"{known.origin}, this bundle comes from {origin}; nothing was imported"
            )
        fields = {
            "key_id": s.key_id,
            "name": s.name,
            "public_key": s.public_key,
            "origin": origin,
            "accepted_by": signer.key_id,
        }
        drafts.append(Draft(ForeignSignerRegistered, LEDGER_STREAM, fields))
        names.append(f"{s.name} ({s.key_id})")
    wrappers = [
        Draft(
            EventImported,
            run,
            {
                "origin": origin,
                "origin_seq": c.source.seq,
                "body": c.source.body,
                "prev_chain": c.source.prev_chain,
                "key_id": c.source.key_id,
                "sig": c.source.sig,
            },
        )
        for c in checked
    ]
    if before_append is not None:
        before_append(attempt)
    seqs = ledger.append([*drafts, *wrappers], signer, expect_size=size)
    since = tuple(
        (f"{t.name} ({t.key_id})", seqs[0] if t.trusted_seq < 0 else t.trusted_seq)
        for t in sorted(trusts.values(), key=lambda t: t.key_id)
    )
    return ImportResult(
        run,
        origin,
        len(checked),
        False,
        tuple(names),
        tuple(seqs),
        tuple(trusted_now),
        since,
    )


def _already(
    bundle: Bundle,
    origin: str,
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
        if have.body != c.source.body or have.sig != c.source.sig or have.origin != origin:
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
    return ImportResult(run, origin, len(checked), True, ())
