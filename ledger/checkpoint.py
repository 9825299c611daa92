"""C2SP signed notes, tlog-checkpoint bodies, tlog-cosignature/v1 and tile paths."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from ledger.errors import LedgerError, ProofError

__all__ = [
    "COSIGNATURE_V1",
    "ED25519",
    "MAX_NOTE_BYTES",
    "MAX_SIGNATURES",
    "Checkpoint",
    "Cosignature",
    "KeyFormatError",
    "Note",
    "NoteError",
    "NoteFormatError",
    "NoteSignature",
    "NoteVerifier",
    "SumdbTile",
    "TilePathError",
    "check_note_format",
    "cosignature_message",
    "entries_path",
    "format_checkpoint",
    "format_sumdb_tile_path",
    "key_hash",
    "key_id",
    "open_checkpoint",
    "open_note",
    "parse_checkpoint",
    "parse_cosignature",
    "parse_signer_key",
    "parse_sumdb_tile_path",
    "parse_verifier_key",
    "sign_cosignature",
    "sign_note",
    "signer_key_string",
    "split_note",
    "tile_index_path",
    "tile_path",
    "tile_widths",
    "verifier_key_string",
    "verify_cosignature",
]

#: Signature type byte of plain Ed25519 note signatures (C2SP signed-note).
ED25519 = 0x01
#: Signature type byte of timestamped Ed25519 witness cosignatures (C2SP tlog-cosignature).
COSIGNATURE_V1 = 0x04
#: More signature lines than this make a note malformed (C2SP asks for at least 16).
MAX_SIGNATURES = 100
#: A checkpoint note (or a key file) longer than this is not read further: 100 signature
#: lines of a long key name fit in 16 KiB, so 64 KiB is never a real note (docs/cli.md).
MAX_NOTE_BYTES = 64 * 1024
_SIG_PREFIX = "\u2014 "  # em dash, space
_KEY_ID_SIZE = 4
_PUBLIC_KEY_SIZE = 32
_ED25519_SIG_SIZE = 64


class NoteError(ProofError):
    """A signed note, checkpoint or cosignature is malformed or does not verify."""


class NoteFormatError(LedgerError):
    """A note given to check is not a well-formed signed checkpoint note (could not check: 2).

    Raised by :func:`check_note_format` before any signature is looked at; a
    well-formed note whose signature or tree does not match is a :class:`NoteError` (1).
    """


class KeyFormatError(LedgerError):
    """A verifier or signer key string cannot be parsed (could not check: exit 2)."""


class TilePathError(LedgerError):
    """A tile path is not in the expected layout."""


# ----------------------------------------------------------------- keys


def key_hash(name: str, public_key: bytes, sig_type: int = ED25519) -> bytes:
    """The full SHA-256(name || 0x0A || type || public key); its first 4 bytes are the key id."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([sig_type]) + public_key).digest()


def key_id(name: str, public_key: bytes, sig_type: int = ED25519) -> bytes:
    """The C2SP note key id: the first 4 bytes of :func:`key_hash`.

    Example:
        >>> pub = base64.b64decode("6TJ5GubnqECkYWTJBHhkJtXngh3YspoA1hyucq/dTaQ=")
        >>> key_id("example.com/foo", pub).hex()
        '530d903a'
    """
    return key_hash(name, public_key, sig_type)[:_KEY_ID_SIZE]


def _valid_name(name: str) -> bool:
    # Key names: non-empty, no Unicode spaces, no '+', and (as note text) no control chars.
    return bool(name) and not any(c.isspace() or c == "+" or ord(c) < 0x20 for c in name)


def _b64decode(text: str) -> bytes | None:
    """Strict standard base64 (RFC 4648 section 4); None when ``text`` is not exactly that."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        return None
    # Only the canonical spelling: no stray padding bits that would make two texts one key.
    return raw if base64.b64encode(raw).decode() == text else None


class NoteVerifier:
    """An Ed25519 note verifier: a key name, its 4-byte key id and the 32-byte public key."""

    __slots__ = ("_key", "key_id", "name", "public_key")

    def __init__(
        self, name: str, public_key: bytes, *, expected_key_id: bytes | None = None
    ) -> None:
        if not _valid_name(name):
            raise KeyFormatError(f"invalid key name {name!r}: it must be non-empty, no spaces or +")
        if len(public_key) != _PUBLIC_KEY_SIZE:
            raise KeyFormatError(
                f"key {name}: an Ed25519 public key has 32 bytes, got {len(public_key)}"
            )
        computed = key_id(name, public_key)
        if expected_key_id is not None and expected_key_id != computed:
            raise KeyFormatError(
                f"key {name}: key id {expected_key_id.hex()} does not match the key "
                f"(expected {computed.hex()})"
            )
        self.name = name
        self.public_key = bytes(public_key)
        self.key_id = computed
        self._key = Ed25519PublicKey.from_public_bytes(self.public_key)

    @classmethod
    def from_private_key(cls, name: str, private_key: Ed25519PrivateKey) -> NoteVerifier:
        """The verifier matching a signer."""
        return cls(name, private_key.public_key().public_bytes_raw())

    @property
    def key_string(self) -> str:
        """The verifier key string ``<name>+<hex id>+<base64(0x01||pub)>``."""
        return verifier_key_string(self.name, self.public_key)

    def verify(self, msg: bytes, sig: bytes) -> bool:
        """True when ``sig`` (64 bytes, without the key id) is this key's signature of ``msg``."""
        if len(sig) != _ED25519_SIG_SIZE:
            return False
        try:
            self._key.verify(sig, msg)
        except InvalidSignature:
            return False
        return True

    def __repr__(self) -> str:
        return f"NoteVerifier({self.key_string!r})"


def verifier_key_string(name: str, public_key: bytes) -> str:
    """``<name>+<hex key id>+<base64(0x01 || public key)>``, as C2SP verifier keys are written."""
    encoded = base64.b64encode(bytes([ED25519]) + public_key).decode()
    return f"{name}+{key_id(name, public_key).hex()}+{encoded}"


def parse_verifier_key(s: str) -> NoteVerifier:
    """Parse a verifier key string; reject a wrong shape, algorithm, length or key id.

    Raises:
        KeyFormatError: the string is not an Ed25519 verifier key whose id matches.
    """
    parts = s.split("+", 2)
    if len(parts) != 3:
        raise KeyFormatError(f"verifier key {s!r}: expected <name>+<key id>+<base64 key>")
    name, hex_id, encoded = parts
    raw = _b64decode(encoded)
    if raw is None:
        raise KeyFormatError(f"verifier key {s!r}: the key is not standard base64")
    if len(hex_id) != 2 * _KEY_ID_SIZE or not all(c in "0123456789abcdef" for c in hex_id):
        raise KeyFormatError(f"verifier key {s!r}: the key id must be 8 lowercase hex digits")
    if not raw or raw[0] != ED25519:
        raise KeyFormatError(
            f"verifier key {s!r}: unsupported algorithm (only Ed25519, type byte 0x01)"
        )
    return NoteVerifier(name, raw[1:], expected_key_id=bytes.fromhex(hex_id))


def signer_key_string(name: str, seed: bytes) -> str:
    """``PRIVATE+KEY+<name>+<hex key id>+<base64(0x01 || seed)>``: keep it secret."""
    if len(seed) != 32:
        raise KeyFormatError(f"key {name}: an Ed25519 seed has 32 bytes, got {len(seed)}")
    public = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    encoded = base64.b64encode(bytes([ED25519]) + seed).decode()
    return f"PRIVATE+KEY+{name}+{key_id(name, public).hex()}+{encoded}"


def parse_signer_key(s: str) -> tuple[str, bytes]:
    """Parse a signer key string into (name, 32-byte Ed25519 seed), checking its key id."""
    parts = s.split("+", 4)
    # Never echo the string itself: it holds a private key.
    if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
        raise KeyFormatError("signer key: expected PRIVATE+KEY+<name>+<key id>+<base64 key>")
    name, hex_id, encoded = parts[2:]
    raw = _b64decode(encoded)
    if raw is None or len(raw) != 33 or raw[0] != ED25519:
        raise KeyFormatError(f"signer key {name}: not a base64 Ed25519 seed with type byte 0x01")
    seed = raw[1:]
    verifier = NoteVerifier.from_private_key(name, Ed25519PrivateKey.from_private_bytes(seed))
    if verifier.key_id.hex() != hex_id:
        raise KeyFormatError(f"signer key {name}: key id {hex_id} does not match the key")
    return name, seed


# ----------------------------------------------------------------- notes


@dataclass(frozen=True)
class NoteSignature:
    """One signature line: key name, 4-byte key id and the signature bytes after the id."""

    name: str
    key_id: bytes
    signature: bytes

    @property
    def line(self) -> str:
        """The signature line as written in a note, with its final newline."""
        encoded = base64.b64encode(self.key_id + self.signature).decode()
        return f"{_SIG_PREFIX}{self.name} {encoded}\n"


@dataclass(frozen=True)
class Note:
    """An opened note: its text, the signatures that verified, and those by unknown keys."""

    text: str
    verified: tuple[NoteSignature, ...]
    unverified: tuple[NoteSignature, ...]

    @property
    def verified_names(self) -> list[str]:
        """Names of the keys whose signatures verified, in note order."""
        return [sig.name for sig in self.verified]


def _check_text(text: str, what: str) -> None:
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise NoteError(f"{what}: the note text is not valid Unicode") from exc
    if not text.endswith("\n"):
        raise NoteError(f"{what}: the note text must end with a newline")
    bad = next((c for c in text if ord(c) < 0x20 and c != "\n"), None)
    if bad is not None:
        raise NoteError(f"{what}: control character U+{ord(bad):04X} in the note text")


def sign_note(text: str, name: str, private_key: Ed25519PrivateKey) -> str:
    """Sign ``text`` (which ends with a newline) and return the whole note.

    Ed25519 is deterministic, so the same text, name and key always give the same note.
    """
    _check_text(text, "sign note")
    if not _valid_name(name):
        raise KeyFormatError(f"invalid key name {name!r}: it must be non-empty, no spaces or +")
    public = private_key.public_key().public_bytes_raw()
    sig = NoteSignature(name, key_id(name, public), private_key.sign(text.encode()))
    return text + "\n" + sig.line


def _malformed(why: str) -> NoteError:
    return NoteError(
        f"malformed note: {why}",
        hint="a signed note is text, a blank line, "
        "then lines '— <key name> <base64 signature>', each ending in a newline",
    )


def split_note(note: str | bytes) -> tuple[str, list[NoteSignature]]:
    """Split a note into its text and signature lines, enforcing the C2SP format.

    Nothing is verified here: use :func:`open_note` before trusting the text.
    """
    try:
        # A str with lone surrogates has no UTF-8 form, so it cannot have been signed.
        note = note.decode("utf-8") if isinstance(note, bytes) else note.encode().decode()
    except UnicodeError as exc:
        raise _malformed("not valid UTF-8") from exc
    if any(ord(c) < 0x20 and c != "\n" for c in note):
        raise _malformed("control character other than newline")
    split = note.rfind("\n\n")
    if split < 0:
        raise _malformed("no blank line between the text and the signatures")
    text, block = note[: split + 1], note[split + 2 :]
    if not block.endswith("\n"):
        raise _malformed("no signature lines, or the last one does not end with a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise _malformed(f"{len(lines)} signatures, at most {MAX_SIGNATURES} are accepted")
    sigs = []
    for number, line in enumerate(lines, 1):
        name, _, encoded = line.removeprefix(_SIG_PREFIX).partition(" ")
        raw = _b64decode(encoded)
        if not line.startswith(_SIG_PREFIX) or not _valid_name(name) or raw is None:
            raise _malformed(f"signature line {number} is not '— <key name> <base64>'")
        if len(raw) <= _KEY_ID_SIZE:
            raise _malformed(f"signature line {number} is too short")
        sigs.append(NoteSignature(name, raw[:_KEY_ID_SIZE], raw[_KEY_ID_SIZE:]))
    return text, sigs


def open_note(note: str | bytes, verifiers: Sequence[NoteVerifier]) -> Note:
    """Verify a signed note with the trusted ``verifiers`` (C2SP signed-note rules).

    A signature whose (name, key id) is not a trusted key is ignored and listed as
    unverified. A trusted key whose signature fails rejects the note, and so does a
    note with no verified trusted signature.

    Raises:
        NoteError: the note is malformed, a known key's signature is invalid, or no
            trusted key signed it.
    """
    text, sigs = split_note(note)
    known = {(v.name, v.key_id): v for v in verifiers}
    message = text.encode()
    verified: list[NoteSignature] = []
    unverified: list[NoteSignature] = []
    for sig in sigs:
        verifier = known.get((sig.name, sig.key_id))
        if verifier is None:
            unverified.append(sig)
        elif not verifier.verify(message, sig.signature):
            raise NoteError(
                f"invalid signature for key {sig.name}+{sig.key_id.hex()}",
                hint="the note text or the signature was changed after signing",
            )
        elif sig not in verified:
            verified.append(sig)
    if not verified:
        raise NoteError(
            "note has no verifiable signatures: no signature by a trusted key "
            f"(signed by {', '.join(f'{s.name}+{s.key_id.hex()}' for s in sigs)})",
            hint="pass the verifier key of the log operator that signed it",
        )
    return Note(text, tuple(verified), tuple(unverified))


# ----------------------------------------------------------------- checkpoints


@dataclass(frozen=True)
class Checkpoint:
    """A tlog-checkpoint body: origin, tree size, root hash and optional extension lines."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        """The checkpoint as note text."""
        return format_checkpoint(self.origin, self.size, self.root_hash, self.extensions)


def format_checkpoint(origin: str, size: int, root: bytes, extensions: Sequence[str] = ()) -> str:
    """The checkpoint note text: origin, decimal size, base64 root, extension lines.

    Example:
        >>> format_checkpoint("example.com/log", 0, hashlib.sha256(b"").digest())
        'example.com/log\\n0\\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\\n'
    """
    lines = [origin, str(size), base64.b64encode(root).decode(), *extensions]
    if size < 0 or len(root) != 32:
        raise NoteError(f"checkpoint: need size >= 0 and a 32-byte root, got {size}, {len(root)}")
    if any(not line or "\n" in line for line in lines):
        raise NoteError("checkpoint: origin and extension lines must be non-empty single lines")
    text = "\n".join(lines) + "\n"
    _check_text(text, "checkpoint")
    return text


def parse_checkpoint(text: str, expected_origin: str | None = None) -> Checkpoint:
    """Parse checkpoint note text (tlog-checkpoint); optionally require its origin.

    Raises:
        NoteError: fewer than three lines, an empty line, a size that is not a plain
            decimal, a root that is not a 32-byte base64 hash, or a different origin.
    """
    if not text.endswith("\n"):
        raise NoteError("checkpoint: the text must end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3 or not all(lines):
        raise NoteError("checkpoint: expected origin, size and root hash lines, none empty")
    origin, size_text, root_text, *extensions = lines
    if expected_origin is not None and origin != expected_origin:
        raise NoteError(
            f"checkpoint origin is {origin!r}, expected {expected_origin!r}",
            hint="this checkpoint belongs to another log",
        )
    # ASCII digits only, no sign, no leading zero except the size "0" itself.
    if not (size_text.isascii() and size_text.isdigit()) or (
        size_text.startswith("0") and size_text != "0"
    ):
        raise NoteError(f"checkpoint tree size {size_text!r:.40} is not a plain decimal number")
    # A tree size is a uint64 in C2SP; int() of thousands of digits would raise.
    if len(size_text) > 20 or int(size_text) >= 1 << 63:
        raise NoteError(f"checkpoint tree size {size_text:.40} is not below 2^63")
    root = _b64decode(root_text)
    if root is None or len(root) != 32:
        raise NoteError(f"checkpoint root hash {root_text!r} is not a base64 32-byte hash")
    return Checkpoint(origin, int(size_text), root, tuple(extensions))


def check_note_format(
    note: str | bytes, *, label: str, origin_pattern: str | None = None
) -> Checkpoint:
    """Check that ``note`` is a well-formed signed checkpoint note; nothing is verified.

    The shape only: a checkpoint body (origin, a plain decimal size below 2^63, a
    base64 32-byte root), a blank line, then well-formed signature lines, and
    an origin matching ``origin_pattern`` when given. Whether a signature holds is
    for :func:`open_checkpoint`.

    Raises:
        NoteFormatError: naming ``label`` and what is wrong (exit 2: could not check).
    """
    if len(note) > MAX_NOTE_BYTES:  # characters or bytes: either bounds the work below
        raise NoteFormatError(
            f"{label}: not a signed checkpoint note: longer than {MAX_NOTE_BYTES:,} bytes",
            hint="a checkpoint note is a few hundred bytes (caseledger checkpoint -o FILE)",
        )
    try:
        text, _ = split_note(note)
        body = parse_checkpoint(text)
    except NoteError as exc:
        raise NoteFormatError(
            f"{label}: not a signed checkpoint note: {exc.message}",
            hint="a checkpoint note is origin, size and root hash lines, a blank line, "
            "then lines '— <key name> <base64 signature>' (caseledger checkpoint -o FILE)",
        ) from None
    if origin_pattern is not None and not re.fullmatch(origin_pattern, body.origin):
        raise NoteFormatError(
            f"{label}: origin {body.origin!r:.80} is not a caseledger log origin",
            hint="caseledger checkpoints have the origin caseledger/<16 hex digits>",
        )
    return body


def open_checkpoint(
    note: str | bytes, verifiers: Sequence[NoteVerifier], expected_origin: str | None = None
) -> tuple[Checkpoint, Note]:
    """Verify a signed checkpoint note, then parse its text."""
    opened = open_note(note, verifiers)
    return parse_checkpoint(opened.text, expected_origin), opened


# ----------------------------------------------------------------- cosignatures


@dataclass(frozen=True)
class Cosignature:
    """A tlog-cosignature/v1 signature: key id, POSIX timestamp, Ed25519 signature."""

    key_id: bytes
    timestamp: int
    signature: bytes


def parse_cosignature(sig: bytes) -> Cosignature:
    """Split the decoded bytes of a cosignature line: key id(4) || u64 BE time || sig(64)."""
    if len(sig) != _KEY_ID_SIZE + 8 + _ED25519_SIG_SIZE:
        raise NoteError(f"cosignature has {len(sig)} bytes, expected 76 (a plain note sig has 68)")
    timestamp = int.from_bytes(sig[4:12], "big")
    if timestamp >= 1 << 63:
        raise NoteError(f"cosignature timestamp {timestamp} exceeds 2^63 - 1")
    return Cosignature(sig[:4], timestamp, sig[12:])


def cosignature_message(checkpoint_text: str, timestamp: int) -> bytes:
    """The bytes a cosigner signs: 'cosignature/v1', 'time <ts>', then the checkpoint text."""
    return f"cosignature/v1\ntime {timestamp}\n{checkpoint_text}".encode()


def sign_cosignature(
    checkpoint_text: str, name: str, private_key: Ed25519PrivateKey, timestamp: int
) -> str:
    """A cosignature line for ``checkpoint_text`` (append it to the signed checkpoint)."""
    public = private_key.public_key().public_bytes_raw()
    body = timestamp.to_bytes(8, "big") + private_key.sign(
        cosignature_message(checkpoint_text, timestamp)
    )
    return NoteSignature(name, key_id(name, public, COSIGNATURE_V1), body).line


def verify_cosignature(checkpoint_text: str, name: str, public_key: bytes, sig: bytes) -> int:
    """Verify one cosignature (decoded line bytes) by ``name``; returns its timestamp."""
    cosig = parse_cosignature(sig)
    if cosig.key_id != key_id(name, public_key, COSIGNATURE_V1):
        raise NoteError(f"cosignature key id {cosig.key_id.hex()} is not {name}'s")
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(
            cosig.signature, cosignature_message(checkpoint_text, cosig.timestamp)
        )
    except InvalidSignature as exc:
        raise NoteError(f"invalid cosignature for key {name}+{cosig.key_id.hex()}") from exc
    return cosig.timestamp


# ----------------------------------------------------------------- tile paths

_TILE_WIDTH = 256


def tile_index_path(n: int) -> str:
    """A tile index as zero-padded 3-digit path elements, all but the last prefixed ``x``.

    Example:
        >>> tile_index_path(1234067)
        'x001/x234/067'
    """
    if n < 0:
        raise TilePathError(f"tile index {n} is negative")
    groups = [f"{n % 1000:03d}"]
    n //= 1000
    while n:
        groups.append(f"x{n % 1000:03d}")
        n //= 1000
    return "/".join(reversed(groups))


def _partial_suffix(width: int, full: int) -> str:
    if not 1 <= width <= full:
        raise TilePathError(f"tile width {width} is not within 1..{full}")
    return "" if width == full else f".p/{width}"


def tile_path(level: int, index: int, width: int = _TILE_WIDTH) -> str:
    """C2SP tlog-tiles path of a Merkle tile: ``tile/<L>/<N>[.p/<W>]``."""
    if not 0 <= level <= 63:
        raise TilePathError(f"tile level {level} is not within 0..63")
    return f"tile/{level}/{tile_index_path(index)}{_partial_suffix(width, _TILE_WIDTH)}"


def entries_path(index: int, width: int = _TILE_WIDTH) -> str:
    """C2SP tlog-tiles path of an entry bundle: ``tile/entries/<N>[.p/<W>]``."""
    return f"tile/entries/{tile_index_path(index)}{_partial_suffix(width, _TILE_WIDTH)}"


def tile_widths(tree_size: int) -> list[tuple[int, int]]:
    """Per level from 0 up: (number of full tiles, width of the partial tile or 0)."""
    levels = []
    span = 1  # leaves covered by one hash at this level: 256**level
    while tree_size // span:
        hashes = tree_size // span
        levels.append((hashes // _TILE_WIDTH, hashes % _TILE_WIDTH))
        span *= _TILE_WIDTH
    return levels


@dataclass(frozen=True)
class SumdbTile:
    """A tile in the older golang.org/x/mod/sumdb layout: height, level, index, width.

    Level -1 is the ``data`` tile (the records themselves).
    """

    height: int
    level: int
    index: int
    width: int


def format_sumdb_tile_path(tile: SumdbTile) -> str:
    """``tile/<H>/<L>/<N>[.p/<W>]`` with ``data`` for level -1 (not the C2SP layout)."""
    if not 1 <= tile.height <= 30 or tile.level < -1:
        raise TilePathError(f"invalid sumdb tile {tile}")
    level = "data" if tile.level == -1 else str(tile.level)
    suffix = _partial_suffix(tile.width, 1 << tile.height)
    return f"tile/{tile.height}/{level}/{tile_index_path(tile.index)}{suffix}"


def _small_decimal(text: str) -> int | None:
    plain = text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0"))
    return int(text) if plain and len(text) <= 9 else None


def parse_sumdb_tile_path(path: str) -> SumdbTile:
    """Parse a sumdb tile path; reject index elements without their ``x`` prefixes."""
    parts = path.split("/")
    height = _small_decimal(parts[1]) if len(parts) >= 4 else None
    if parts[0] != "tile" or height is None or not 1 <= height <= 30:
        raise TilePathError(f"{path!r} is not tile/<H>/<L>/<N>[.p/<W>]")
    level = -1 if parts[2] == "data" else _small_decimal(parts[2])
    elements, width = parts[3:], 1 << height
    if len(elements) >= 2 and elements[-2].endswith(".p"):
        partial = _small_decimal(elements[-1])
        if partial is None or not 1 <= partial < width:
            raise TilePathError(f"{path!r}: bad partial tile width")
        elements, width = [*elements[:-2], elements[-2][:-2]], partial
    index = 0
    for pos, element in enumerate(elements):
        digits = element[1:] if pos < len(elements) - 1 and element.startswith("x") else element
        if pos < len(elements) - 1 and digits == element:
            digits = ""  # every element but the last needs its x prefix
        if len(digits) != 3 or not (digits.isascii() and digits.isdigit()):
            raise TilePathError(f"{path!r}: index element {element!r} is not [x]ddd")
        index = index * 1000 + int(digits)
    if level is None:
        raise TilePathError(f"{path!r}: level must be a decimal number or 'data'")
    tile = SumdbTile(height, level, index, width)
    if format_sumdb_tile_path(tile) != path:
        raise TilePathError(f"{path!r} is not the canonical path of {tile}")
    return tile
