"""Keys this ledger trusts to sign runs made elsewhere (issue 29, docs/exchange.md).

``caseledger signers trust KEY.pub --name NAME [--origin ORIGIN]`` appends a
``signer.trusted.v1`` signed by the operator; ``signers revoke NAME`` a
``signer.untrusted.v1``; ``signers list`` shows them. ``import run`` accepts a
bundle only when every key that signed its run is trusted here (no trust on first
use). The rules (one key per name, only an operator may trust) live in the
keyring (``ledger.keys.Keyring``), so the store refuses a bad trust event and
``verify`` reports one, like any signer event.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.checkpoint import KeyFormatError, parse_verifier_key
from ledger.errors import UsageError
from ledger.events import LEDGER_STREAM, SignerTrusted, SignerUntrusted
from ledger.keys import Signer, TrustEntry, encode_public_key, key_id_hex
from ledger.store import Draft, Ledger

__all__ = ["TrustKey", "parse_trust_key", "revoke_signer", "trust_draft", "trust_signer"]

#: What an origin looks like: the ``caseledger/<16 hex>`` of a ledger's checkpoints.
ORIGIN_PREFIX = "caseledger/"


@dataclass(frozen=True)
class TrustKey:
    """A verifier key given to be trusted, read from its C2SP string."""

    name: str
    key_id: str
    public_key: bytes


def parse_trust_key(text: str, label: str, name: str | None) -> TrustKey:
    """The key in ``text`` (a C2SP verifier key ``name+keyid+base64``), named ``label``.

    ``name``, when given, must be the key's own name: the key id commits to it, so a
    key cannot be trusted under another name.

    Raises:
        UsageError (exit 2): not a verifier key, or another name than ``name``.
    """
    try:
        verifier = parse_verifier_key(text.strip())
    except KeyFormatError as exc:
        raise UsageError(
            f"{label}: not a verifier key ({exc})",
            hint="the file holds one line name+keyid+base64, as `caseledger keys list` prints",
        ) from None
    if name is not None and verifier.name != name:
        raise UsageError(
            f"{label}: the key is named {verifier.name}, not {name}; its key id commits to "
            "its name, so it can be trusted only under that name",
            hint=f"pass --name {verifier.name}, or check that this is the key you meant",
        )
    key_id = key_id_hex(verifier.name, verifier.public_key)
    return TrustKey(verifier.name, key_id, verifier.public_key)


def _check_origin(origin: str | None) -> None:
    if origin is None:
        return
    hexpart = origin.removeprefix(ORIGIN_PREFIX)
    if (
        not origin.startswith(ORIGIN_PREFIX)
        or len(hexpart) != 16
        or any(c not in "0123456789abcdef" for c in hexpart)
    ):
        raise UsageError(
            f"--origin {origin!r} is not a ledger origin (caseledger/ and 16 lowercase hex)",
            hint="`caseledger verify` on the other ledger prints its origin",
        )


def trust_draft(ledger: Ledger, key: TrustKey, signer: Signer, origin: str | None) -> Draft:
    """The ``signer.trusted.v1`` for ``key``, after the keyring's rules held.

    Raises:
        UsageError (exit 2): the name is bound to another key here, the key is this
            ledger's own or trusted already, or ``signer`` is not an operator.
    """
    _check_origin(origin)
    if signer.role != "operator":
        raise UsageError(f"trusting a key needs an operator key, {signer.name} is {signer.role}")
    keyring = ledger.keyring()
    native = keyring.get(key.key_id)
    if native is not None:
        raise UsageError(
            f"key {key.name} ({key.key_id}) is registered in {ledger.location} (seq "
            f"{native.registered_seq}): it signs here already, trusting it adds nothing"
        )
    problem = keyring.name_problem(key.name, key.key_id)
    if problem:
        raise UsageError(
            f"{problem}: key id {key.key_id} cannot be trusted under it",
            hint="a key of another machine needs its own name (caseledger init --name NAME there)",
        )
    held = keyring.trusted(key.key_id)
    if held is not None and held.revoked_seq is None:
        raise UsageError(
            f"key {key.name} ({key.key_id}) is trusted already (since seq {held.trusted_seq})",
            hint="`caseledger signers list` shows the trusted keys",
        )
    fields: dict[str, object] = {
        "key_id": key.key_id,
        "name": key.name,
        "public_key": encode_public_key(key.public_key),
        "trusted_by": signer.key_id,
    }
    if origin is not None:
        fields["origin"] = origin
    return Draft(SignerTrusted, LEDGER_STREAM, fields)


def trust_signer(
    ledger: Ledger, key: TrustKey, signer: Signer, origin: str | None = None
) -> TrustEntry:
    """Append a ``signer.trusted.v1`` for ``key``; the trust as the keyring now holds it."""
    (seq,) = ledger.append([trust_draft(ledger, key, signer, origin)], signer)
    entry = ledger.keyring().trusted(key.key_id)
    if entry is None or entry.trusted_seq != seq:
        raise UsageError(f"key {key.name} ({key.key_id}) was not recorded as trusted")
    return entry


def revoke_signer(ledger: Ledger, who: str, signer: Signer) -> TrustEntry:
    """Append a ``signer.untrusted.v1`` for the trusted key named ``who`` (a name or key id).

    Raises:
        UsageError (exit 2): no such trusted key, or its trust is revoked already.
    """
    if signer.role != "operator":
        raise UsageError(f"revoking trust needs an operator key, {signer.name} is {signer.role}")
    keyring = ledger.keyring()
    held = keyring.trusted_by_name(who) or keyring.trusted(who)
    if held is None:
        raise UsageError(
            f"no trusted key named {who} in {ledger.location}",
            hint="`caseledger signers list` shows the trusted keys",
        )
    if held.revoked_seq is not None:
        raise UsageError(
            f"trust in {held.name} ({held.key_id}) was already revoked at seq {held.revoked_seq}"
        )
    fields = {"key_id": held.key_id, "name": held.name, "revoked_by": signer.key_id}
    ledger.append([Draft(SignerUntrusted, LEDGER_STREAM, fields)], signer)
    entry = ledger.keyring().trusted(held.key_id)
    if entry is None:
        raise UsageError(f"trust in {held.name} ({held.key_id}) disappeared")
    return entry
