"""Ed25519 signers, their key files, and the keyring of signers registered in a ledger.

A signer is an Ed25519 key with a C2SP signed-note name. Its key id is the C2SP
one (SHA-256(name || 0x0A || 0x01 || public key)[:4], as 8 lowercase hex
characters). Key files hold the C2SP signer-key string and are written with
mode 0600; a private key is never logged and never put in an event.

The keyring is the log's own record of who may sign: a key may sign from the
event after its SignerRegistered (the genesis registration at seq 0 signs
itself) up to and including its own SignerRetired. Windows are positions in
the log, because order is by sequence number only; ``valid_from`` and
``retired_at`` are the writer's time claims and are kept for readers.

It also holds the keys the operator trusts to sign runs made elsewhere
(``signer.trusted.v1`` / ``signer.untrusted.v1``, issue 29): a trusted key signs
nothing in this log, it only vouches for imported runs. A signer name is bound to
one key per ledger, whether the key is registered here or trusted.
"""

from __future__ import annotations

import base64
import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from msgspec import UnsetType

from ledger.checkpoint import (
    key_id as _c2sp_key_id,
)
from ledger.checkpoint import (
    parse_signer_key,
    sign_note,
    signer_key_string,
    verifier_key_string,
)
from ledger.errors import StoreError, UsageError
from ledger.events import (
    EventBase,
    SignerRegistered,
    SignerRetired,
    SignerTrusted,
    SignerUntrusted,
)

__all__ = [
    "EVENT_SIGNING_PREFIX",
    "EVENT_SIGNING_PREFIX_V2",
    "KeyEntry",
    "Keyring",
    "Signer",
    "TrustEntry",
    "encode_public_key",
    "event_message",
    "key_id_hex",
    "load_default_signer",
    "public_key_problem",
    "verify_event_signature",
]

#: Rule event/v1 (ledgers written before the keyed chain): sig = Ed25519(prefix || leaf_hash).
#: It fixes an event's content but not its place in the log.
EVENT_SIGNING_PREFIX = b"caseledger/event/v1\n"
#: Rule event/v2 (every event written now): sig = Ed25519(prefix || previous chain || leaf_hash).
#: The previous row's chain value fixes the event's place: removing, inserting or
#: reordering any earlier event breaks every later signature.
EVENT_SIGNING_PREFIX_V2 = b"caseledger/event/v2\n"
ROLES = ("operator", "adapter", "auditor")


def key_id_hex(name: str, public_key: bytes) -> str:
    """The C2SP key id of an Ed25519 key as 8 lowercase hex characters."""
    return _c2sp_key_id(name, public_key).hex()


def encode_public_key(public_key: bytes) -> str:
    """How SignerRegistered carries a public key: standard base64 of the 32 raw bytes."""
    return base64.b64encode(public_key).decode("ascii")


def _check_name(name: str) -> None:
    # C2SP signed-note key names: non-empty, no whitespace, no '+'.
    if not name or "+" in name or any(c.isspace() for c in name):
        raise UsageError(f"bad signer name {name!r}: it must be non-empty, without spaces or '+'")


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise UsageError(f"bad role {role!r}: expected one of {', '.join(ROLES)}")


class Signer:
    """An Ed25519 private key with a C2SP signed-note name and a role."""

    __slots__ = ("_private", "key_id", "name", "public_key", "role")

    def __init__(self, name: str, private_key: Ed25519PrivateKey, role: str = "operator") -> None:
        _check_name(name)
        _check_role(role)
        self.name = name
        self.role = role
        self._private = private_key
        self.public_key: bytes = private_key.public_key().public_bytes(
            Encoding.Raw, PublicFormat.Raw
        )
        self.key_id: str = key_id_hex(name, self.public_key)

    def __repr__(self) -> str:
        # Never show key material beyond the public id.
        return f"Signer(name={self.name!r}, role={self.role!r}, key_id={self.key_id!r})"

    @classmethod
    def generate(cls, name: str, role: str = "operator") -> Signer:
        """A new random key."""
        return cls(name, Ed25519PrivateKey.generate(), role)

    @classmethod
    def from_seed(cls, name: str, seed: bytes, role: str = "operator") -> Signer:
        """A deterministic key from a 32-byte seed (for tests and fixtures)."""
        if len(seed) != 32:
            raise UsageError(f"an Ed25519 seed has 32 bytes, got {len(seed)}")
        return cls(name, Ed25519PrivateKey.from_private_bytes(seed), role)

    @property
    def verifier_key(self) -> str:
        """The public C2SP verifier-key string (``name+keyid+base64``), safe to publish."""
        return verifier_key_string(self.name, self.public_key)

    def sign(self, data: bytes) -> bytes:
        """An Ed25519 signature (64 bytes) over ``data``."""
        return self._private.sign(data)

    def sign_note(self, text: str) -> str:
        """A C2SP signed note over ``text`` (which ends with a newline)."""
        return sign_note(text, self.name, self._private)

    def save(self, path: Path) -> None:
        """Write the C2SP signer-key string to a new file with mode 0600 (never overwrites)."""
        seed = self._private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        text = signer_key_string(self.name, seed) + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise UsageError(
                f"key file {path} already exists", hint="a key file is never overwritten"
            ) from None
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(text)
        os.chmod(path, 0o600)  # in case the umask was unusual

    @classmethod
    def load(cls, path: Path, role: str = "operator") -> Signer:
        """Read a key file written by ``save``. Refuses files others may read."""
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
            text = path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            raise StoreError(f"no key file at {path}", hint="run `caseledger init` first") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"cannot read key file {path}: {exc}") from None
        if mode & 0o077:
            raise StoreError(
                f"key file {path} has mode {mode:04o}: others may read it",
                hint=f"chmod 600 {path}",
            )
        try:
            name, seed = parse_signer_key(text)
        except Exception as exc:
            # Keep key material out of the message: name the file, not its content.
            raise StoreError(f"key file {path} is not a C2SP Ed25519 signer key") from exc
        return cls.from_seed(name, seed, role)


def load_default_signer(home: Path) -> Signer:
    """The operator key made by ``caseledger init``: ``<home>/keys/operator.key``."""
    return Signer.load(home / "keys" / "operator.key", role="operator")


def event_message(prev_chain: bytes | None, leaf_hash: bytes) -> bytes:
    """The bytes an event signature covers: rule event/v2 with ``prev_chain``, else event/v1.

    >>> event_message(bytes(32), bytes(32))[:20]
    b'caseledger/event/v2\\n'
    >>> event_message(None, bytes(32))[:20]
    b'caseledger/event/v1\\n'
    """
    if prev_chain is None:
        return EVENT_SIGNING_PREFIX + leaf_hash
    return EVENT_SIGNING_PREFIX_V2 + prev_chain + leaf_hash


def verify_event_signature(
    public_key: bytes, leaf_hash: bytes, sig: bytes, prev_chain: bytes | None = None
) -> bool:
    """True when ``sig`` is the key's signature over the event (rule v2 when ``prev_chain``)."""
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(
            sig, event_message(prev_chain, leaf_hash)
        )
    except (InvalidSignature, ValueError):
        return False
    return True


@dataclass(frozen=True)
class KeyEntry:
    """A registered signer and its window in the log."""

    key_id: str
    name: str
    public_key: bytes
    role: str
    valid_from: str
    registered_seq: int
    retired_at: str | None = None
    retired_seq: int | None = None
    reason: str = ""

    @property
    def verifier_key(self) -> str:
        """The C2SP verifier-key string of this signer."""
        return verifier_key_string(self.name, self.public_key)


@dataclass(frozen=True)
class TrustEntry:
    """A key trusted to sign runs imported from other ledgers, and its window."""

    key_id: str
    name: str
    public_key: bytes
    origin: str | None  # the only origin it is trusted for; None: any
    trusted_seq: int
    revoked_seq: int | None = None

    @property
    def verifier_key(self) -> str:
        """The C2SP verifier-key string of this key."""
        return verifier_key_string(self.name, self.public_key)

    def active_at(self, seq: int) -> bool:
        """Whether the trust holds at ``seq``: after the trust, before any revocation."""
        return self.trusted_seq < seq and (self.revoked_seq is None or seq < self.revoked_seq)


def public_key_problem(name: str, key_id: str, encoded: str, label: str = "") -> str | None:
    """Why a (name, key id, base64 public key) triple of a signer event does not hold:
    the key is not 32 bytes of standard base64, or ``key_id`` is not its C2SP key id.
    Messages name the key as ``label`` (default: its name)."""
    label = label or name
    try:
        public_key = base64.b64decode(encoded, validate=True)
    except ValueError:
        return f"public key of {label} is not base64"
    if len(public_key) != 32:
        return f"public key of {label} has {len(public_key)} bytes, expected 32"
    expected = key_id_hex(name, public_key)
    if key_id != expected:
        return f"key id {key_id} of {label} should be {expected}"
    return None


class Keyring:
    """The signers registered in a log, built by applying signer events in order.

    The same rules serve the store (which refuses a bad append) and the verifier
    (which reports a bad row); each method returns a problem text or None and the
    caller chooses the error class.
    """

    def __init__(self) -> None:
        self._by_id: dict[str, KeyEntry] = {}
        self._by_name: dict[str, KeyEntry] = {}
        #: Keys trusted for imported runs (the newest trust of each key), by key id and name.
        self._trusted: dict[str, TrustEntry] = {}
        self._trusted_by_name: dict[str, TrustEntry] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def entries(self) -> list[KeyEntry]:
        """Every signer ever registered, in registration order."""
        return sorted(self._by_id.values(), key=lambda e: e.registered_seq)

    def get(self, key_id: str) -> KeyEntry | None:
        """The signer with this key id, if registered."""
        return self._by_id.get(key_id)

    def by_name(self, name: str) -> KeyEntry | None:
        """The signer registered under this name, if any."""
        return self._by_name.get(name)

    def trusted(self, key_id: str) -> TrustEntry | None:
        """The trust given to this key id for imported runs (revoked or not), if any."""
        return self._trusted.get(key_id)

    def trusted_by_name(self, name: str) -> TrustEntry | None:
        """The key trusted under this name, if any."""
        return self._trusted_by_name.get(name)

    def trust_entries(self) -> list[TrustEntry]:
        """Every trusted key (the newest trust of each), in the order they were trusted."""
        return sorted(self._trusted.values(), key=lambda e: e.trusted_seq)

    def name_problem(self, name: str, key_id: str) -> str | None:
        """Why ``name`` may not be bound to ``key_id`` here (one key per name per ledger)."""
        native = self._by_name.get(name)
        if native is not None and native.key_id != key_id:
            return (
                f"signer name {name} is bound in this ledger to key id {native.key_id} "
                f"(registered at seq {native.registered_seq}); a name names one key"
            )
        trusted = self._trusted_by_name.get(name)
        if trusted is not None and trusted.key_id != key_id:
            return (
                f"signer name {name} is bound in this ledger to key id {trusted.key_id} "
                f"(trusted at seq {trusted.trusted_seq}); a name names one key"
            )
        return None

    def signer_problem(self, seq: int, key_id: str, event: EventBase | None = None) -> str | None:
        """Why ``key_id`` may not sign the event at ``seq`` (None when it may).

        ``event`` is needed only for the genesis rule: seq 0 is an operator's
        SignerRegistered signed by the key it registers.
        """
        if seq == 0:
            if (
                isinstance(event, SignerRegistered)
                and event.key_id == key_id
                and event.role == "operator"
                and key_id not in self._by_id
            ):
                return None
            return (
                f"the first event must be an operator's SignerRegistered signed by its own key, "
                f"got {type(event).__name__ if event else 'an event'} signed by key id {key_id}"
            )
        entry = self._by_id.get(key_id)
        if entry is None:
            return f"signed by unregistered key id {key_id}"
        if entry.retired_seq is not None and seq > entry.retired_seq:
            return (
                f"signed by key {entry.name} ({key_id}) after it was retired at seq "
                f"{entry.retired_seq} ({entry.retired_at})"
            )
        signer_events = SignerRegistered | SignerRetired | SignerTrusted | SignerUntrusted
        if isinstance(event, signer_events) and entry.role != "operator":
            return f"signer events need an operator key, {entry.name} ({key_id}) is {entry.role}"
        return None

    def event_problem(self, event: EventBase) -> str | None:
        """Why a signer event may not be applied (None when it may, or is not one)."""
        if isinstance(event, SignerRegistered):
            problem = public_key_problem(event.name, event.key_id, event.public_key)
            if problem:
                return problem
            trusted = self._trusted_by_name.get(event.name)
            if trusted is not None:
                return (
                    f"signer name {event.name} is bound to trusted key id {trusted.key_id} "
                    f"(seq {trusted.trusted_seq}); a name names one key"
                )
            known = self._by_name.get(event.name)
            if known is not None:
                return (
                    f"signer name {event.name} is already registered with key id "
                    f"{known.key_id} (seq {known.registered_seq}); names are never re-used"
                )
            if event.key_id in self._by_id:
                return f"key id {event.key_id} is already registered"
        elif isinstance(event, SignerRetired):
            entry = self._by_id.get(event.key_id)
            if entry is None or entry.name != event.name:
                return f"retires {event.name} ({event.key_id}), which is not registered"
            if entry.retired_seq is not None:
                return (
                    f"{event.name} ({event.key_id}) was already retired at seq {entry.retired_seq}"
                )
            if event.retired_at < entry.valid_from:
                return f"retired_at {event.retired_at} is before valid_from {entry.valid_from}"
        elif isinstance(event, SignerTrusted):
            return self._trust_problem(event)
        elif isinstance(event, SignerUntrusted):
            held = self._trusted.get(event.key_id)
            if held is None or held.name != event.name:
                return f"revokes trust in {event.name} ({event.key_id}), which is not trusted"
            if held.revoked_seq is not None:
                return (
                    f"trust in {event.name} ({event.key_id}) was already revoked at seq "
                    f"{held.revoked_seq}"
                )
        return None

    def _trust_problem(self, event: SignerTrusted) -> str | None:
        problem = public_key_problem(event.name, event.key_id, event.public_key)
        if problem:
            return problem
        if event.key_id in self._by_id:
            return f"key {event.name} ({event.key_id}) is registered in this ledger, not foreign"
        problem = self.name_problem(event.name, event.key_id)
        if problem:
            return problem
        held = self._trusted.get(event.key_id)
        if held is not None and held.revoked_seq is None:
            return f"key {event.name} ({event.key_id}) is trusted already (seq {held.trusted_seq})"
        return None

    def apply(self, seq: int, event: EventBase) -> None:
        """Record a signer event (checked with ``event_problem`` first); others are ignored."""
        if isinstance(event, SignerRegistered):
            entry = KeyEntry(
                key_id=event.key_id,
                name=event.name,
                public_key=base64.b64decode(event.public_key),
                role=event.role,
                valid_from=event.valid_from,
                registered_seq=seq,
            )
            self._by_id[entry.key_id] = entry
            self._by_name[entry.name] = entry
        elif isinstance(event, SignerRetired):
            old = self._by_id[event.key_id]
            new = replace(old, retired_at=event.retired_at, retired_seq=seq, reason=event.reason)
            self._by_id[new.key_id] = new
            self._by_name[new.name] = new
        elif isinstance(event, SignerTrusted):
            trust = TrustEntry(
                key_id=event.key_id,
                name=event.name,
                public_key=base64.b64decode(event.public_key),
                origin=None if isinstance(event.origin, UnsetType) else event.origin,
                trusted_seq=seq,
            )
            self._trusted[trust.key_id] = trust
            self._trusted_by_name[trust.name] = trust
        elif isinstance(event, SignerUntrusted):
            revoked = replace(self._trusted[event.key_id], revoked_seq=seq)
            self._trusted[revoked.key_id] = revoked
            self._trusted_by_name[revoked.name] = revoked

    def active_operators(self) -> list[KeyEntry]:
        """Operator keys that are not retired."""
        return [e for e in self.entries() if e.role == "operator" and e.retired_seq is None]
