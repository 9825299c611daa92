"""Secrets never enter the log: scrub provider text, and say which form of a secret a body holds.

A ``SecretSet`` is built from the secret strings a run is configured with (the
API key of the openai adapter, the key a command adapter's program uses). Its
``scrub`` replaces with the fixed marker ``[redacted]``, in any text that comes
from a provider, a command or an answer's SQL result or error (docs/adapters.md,
Secrets):

- every occurrence of a secret, its URL-encoded, base64 and JSON-escaped forms;
- every **piece** of the secret's body: a run of ``RUN`` (7) consecutive letters
  and digits of the body, searched in normalised views of the text, so that
  none of these forms survives: case changed; separators, spaces or zero-width
  characters (U+200B-U+200D, U+2060, U+FEFF) between the characters; reversed;
  ROT13; ``\\uXXXX`` / ``\\UXXXXXXXX`` / ``\\xXX`` / ``%XX`` escapes; HTML entities
  (named, decimal, hex); full-width and other compatibility forms (NFKC); hex
  (at either nibble alignment); base64 starting at any offset (the secret at byte
  offset 0, 1 or 2 of a longer encoded text; standard and URL-safe alphabets).

The **body** is the secret without its public vendor prefix (``PUBLIC_PREFIXES``:
``sk-proj-``, ``sk-ant-``, ``sk-``, ``ghp_``, ...): a prefix is printed in every
vendor's documentation, so a text holding ``sk-proj-`` alone holds nothing
secret and is kept. A body shorter than ``RUN`` letters and digits is replaced
only where it occurs whole (in the plain and decoded views, or as one of the
whole forms).

Scrubbing comes before any cut: ``excerpt`` and ``tail`` scrub a window wide
enough to hold every whole form that straddles the cut, then cut; a piece cut
in two leaves fewer than ``RUN`` characters on each side, which is no piece.
``find`` is the store's last line of defence: it names the form of a secret
found in an encoded event body, never the secret; everything it finds, ``scrub``
removes (its needles are the whole forms and the body's pieces as written).

>>> s = SecretSet(["sk-proj-NEWCOMER0123456789"])
>>> s.scrub("key sk-proj-NEWCOMER0123456789 and sk-proj-NEWCOMER01 and NEWCOM")
'key [redacted] and sk-proj-[redacted] and NEWCOM'
>>> s.scrub("n e w c o m e r")
'[redacted]'
>>> s.scrub("SELECT 'sk-proj-' AS x")
"SELECT 'sk-proj-' AS x"
>>> s.find(b'{"raw":"x-NEWCOMER"}')
'a 7-character run of a registered secret'
>>> s.find(b'{"x":"sk-proj-"}') is None
True
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html.entities
import json
import re
import unicodedata
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping

import msgspec

from ledger.errors import AdapterError, UsageError

__all__ = ["MARKER", "PUBLIC_PREFIXES", "RUN", "SecretSet", "body_of", "env_secret"]

MARKER = "[redacted]"
#: Consecutive letters and digits of a secret's body that count as a piece of it.
RUN = 7
#: Public vendor prefixes of API keys, longest first: never a secret by themselves.
_PREFIXES = (
    "sk-proj-", "sk-svcacct-", "sk-admin-", "sk-ant-api03-", "sk-ant-admin01-", "sk-ant-",
    "sk-or-v1-", "sk-", "sk_live_", "sk_test_", "rk_live_", "pk_live_", "github_pat_", "ghp_",
    "gho_", "ghu_", "ghs_", "ghr_", "glpat-", "xoxb-", "xoxp-", "hf_", "AKIA", "AIza",
)  # fmt: skip
PUBLIC_PREFIXES = tuple(sorted(_PREFIXES, key=len, reverse=True))
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Variable names that look like names (not like keys) may be shown in messages.
_SHOWN_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
_JSON = msgspec.json.Encoder()
# Escapes decoded before matching, and runs of ASCII letters and digits (kept as they are).
_TOKEN = re.compile(
    r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})|\\x([0-9A-Fa-f]{2})|%([0-9A-Fa-f]{2})"
    r"|&#([0-9]{1,7});?|&#[xX]([0-9A-Fa-f]{1,6});?|&([A-Za-z][A-Za-z0-9]{1,31};)"
    r"|([A-Za-z0-9]+)|([^\x00-\x7f])"
)
_ESCAPE = re.compile(_TOKEN.pattern.split("|([A-Za-z0-9]+)")[0])
_ESCAPED = re.compile(r"[\\%&]")
_ALNUM = re.compile(r"[A-Za-z0-9]+")
_NON_ALNUM = re.compile(r"[\W_]+")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
# Encoded runs long enough to hold the bytes of a piece at any alignment.
_HEX_RUN = re.compile(rf"[0-9A-Fa-f]{{{2 * RUN},}}")
_B64_RUN = re.compile(rf"[A-Za-z0-9+/_-]{{{4 * -(-RUN // 3)},}}")
_B64_SAFE = bytes.maketrans(b"-_", b"+/")

# A view of a text: its characters, and for each the span of the text it came from.
_View = tuple[str, list[int], list[int]]


def body_of(secret: str) -> str:
    """The secret without its public vendor prefix (the whole secret when it has none).

    >>> body_of("sk-proj-abc123XYZ"), body_of("sk-ant-api03-Q9z"), body_of("plainkey")
    ('abc123XYZ', 'Q9z', 'plainkey')
    """
    for prefix in PUBLIC_PREFIXES:
        if secret.startswith(prefix) and len(secret) > len(prefix):
            return secret[len(prefix) :]
    return secret


def _fold(char: str) -> str:
    """The letters and digits one character stands for: NFKC, case-folded (often "")."""
    if char.isascii():
        return char.lower() if char.isalnum() else ""
    folded = "".join(c for c in unicodedata.normalize("NFKC", char).casefold() if c.isalnum())
    # A few letters normalise to combining marks only: they stand for themselves.
    return folded or (char.casefold() if char.isalnum() else "")


def _folded(text: str) -> str:
    """``text`` folded character by character (what pieces are made of)."""
    return "".join(_fold(c) for c in text)


def _json_escaped(text: str, *, ascii_only: bool) -> str:
    # The inside of a JSON string holding ``text`` (msgspec keeps non-ASCII as
    # UTF-8; other encoders write \\uXXXX).
    if ascii_only:
        return json.dumps(text, ensure_ascii=True)[1:-1]
    return _JSON.encode(text).decode("utf-8")[1:-1]


def _escapes(secret: str) -> list[str]:
    """The secret as written inside JSON strings, once and twice (a JSON text in a JSON field)."""
    once = [_json_escaped(secret, ascii_only=a) for a in (False, True)]
    twice = [_json_escaped(e, ascii_only=a) for e in once for a in (False, True)]
    return list(dict.fromkeys([secret, *once, *twice]))


def _encodings(secret: str) -> list[tuple[str, str]]:
    """(form name, text) of the URL-encoded and base64 forms of a secret."""
    data = secret.encode("utf-8")
    forms: list[tuple[str, str]] = []
    for quoted in (urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)):
        forms.append(("URL-encoded", quoted))
        lower = re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quoted)
        forms.append(("URL-encoded", lower))
    for encoded in (base64.b64encode(data), base64.urlsafe_b64encode(data)):
        text = encoded.decode("ascii")
        forms.append(("base64", text))
        forms.append(("base64", text.rstrip("=")))
    return [(name, text) for name, text in dict.fromkeys(forms) if text and text != secret]


def _raw_pieces(body: str) -> set[str]:
    """The shortest substrings of ``body``, from each character that folds to something,
    that fold to ``RUN`` or more letters and digits (``find``'s needles).

    >>> sorted(_raw_pieces("ab-cdefgh"))
    ['ab-cdefg', 'b-cdefgh']
    """
    widths = [len(_fold(c)) for c in body]
    pieces = set()
    for start, width in enumerate(widths):
        if not width:
            continue
        total, end = 0, start
        while end < len(body) and total < RUN:
            total += widths[end]
            end += 1
        if total >= RUN:
            pieces.add(body[start:end])
    return pieces


def _decode_char(match: re.Match[str]) -> str | None:
    """The character an escape token stands for (None: not an escape, or not a character)."""
    group = match.lastindex
    value = match.group(group or 0)
    try:
        if group in (1, 2, 3, 4, 6):
            return chr(int(value, 16))
        if group == 5:
            return chr(int(value))
    except (ValueError, OverflowError):
        return None
    if group == 7:
        return html.entities.html5.get(value)
    return None


def _fast_fold(text: str, *, decode: bool) -> str:
    """The text of ``_squeezed(text, decode=decode)`` without its spans, at C speed (the
    search runs on this; spans are made only for a text that holds a piece)."""
    if decode:
        text = _ESCAPE.sub(lambda m: _decode_char(m) or "", text)
    if not text.isascii():
        text = _NON_ASCII.sub(lambda m: _fold(m.group(0)), text)
    return _NON_ALNUM.sub("", text).translate(_ASCII_LOWER)


def _squeezed(text: str, *, decode: bool) -> _View:
    """Letters and digits of ``text`` (NFKC, case-folded), escapes decoded when ``decode``,
    each with the span of ``text`` it came from."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for m in _TOKEN.finditer(text):
        start, end = m.span()
        if m.lastindex == 8:  # ASCII letters and digits
            chars.append(m.group(8).lower())
            starts.extend(range(start, end))
            ends.extend(range(start + 1, end + 1))
            continue
        if m.lastindex == 9:
            char: str | None = m.group(9)
        elif decode:
            char = _decode_char(m)
        else:  # the escape as written: its letters and digits
            for sub in _ALNUM.finditer(m.group(0)):
                chars.append(sub.group(0).lower())
                starts.extend(range(start + sub.start(), start + sub.end()))
                ends.extend(range(start + sub.start() + 1, start + sub.end() + 1))
            continue
        folded = _folded(char) if char else ""
        chars.append(folded)
        starts.extend([start] * len(folded))
        ends.extend([end] * len(folded))
    return "".join(chars), starts, ends


def _bytes_view(data: bytes, starts: list[int], ends: list[int]) -> _View:
    """Letters and digits of ``data`` (read as Latin-1, lower-cased), each with the span of
    the characters that encode its byte (``starts[k]``, ``ends[k]`` for byte ``k``)."""
    text = data.decode("latin-1").lower()
    chars: list[str] = []
    out_starts: list[int] = []
    out_ends: list[int] = []
    for m in _ALNUM.finditer(text):
        chars.append(m.group(0))
        out_starts.extend(starts[m.start() : m.end()])
        out_ends.extend(ends[m.start() : m.end()])
    return "".join(chars), out_starts, out_ends


def _encoded_runs(text: str) -> Iterator[tuple[bytes, int, int, int]]:
    """(decoded bytes, run start, alignment, width) for every run of hex digits (at both
    nibble alignments) and of base64 characters (at all four alignments, both alphabets)
    long enough to hold a piece: the secret at any byte offset of an encoded text."""
    for m in _HEX_RUN.finditer(text):
        for align in (0, 1):
            usable = (len(m.group(0)) - align) // 2 * 2
            yield bytes.fromhex(m.group(0)[align : align + usable]), m.start(), align, 2
    for m in _B64_RUN.finditer(text):
        raw = m.group(0).encode("ascii").translate(_B64_SAFE)
        for align in range(4):
            usable = (len(raw) - align) // 4 * 4
            try:
                data = base64.b64decode(raw[align : align + usable], validate=True)
            except binascii.Error:  # pragma: no cover - the alphabet is checked by the regex
                continue
            yield data, m.start(), align, 4


def _encoded_view(data: bytes, start: int, align: int, width: int) -> _View:
    """The bytes view of one decoded run, with the spans of the characters encoding each byte
    (hex: two per byte; base64: the four of its group of three bytes)."""
    first = start + align
    if width == 2:
        starts = [first + 2 * k for k in range(len(data))]
        ends = [first + 2 * k + 2 for k in range(len(data))]
    else:
        starts = [first + 4 * (k // 3) for k in range(len(data))]
        ends = [first + 4 * (k // 3) + 4 for k in range(len(data))]
    return _bytes_view(data, starts, ends)


def _rot13(text: str) -> str:
    return codecs.encode(text, "rot13")


def _merge(found: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans merged into disjoint spans (touching spans merge too)."""
    if not found:
        return []
    found.sort()
    merged = [found[0]]
    for start, end in found[1:]:
        last_start, last_end = merged[-1]
        if start <= last_end:
            merged[-1] = (last_start, max(last_end, end))
        else:
            merged.append((start, end))
    return merged


class SecretSet:
    """The configured secrets of a run, and every form of them that must not be stored.

    Empty strings are ignored; an empty set scrubs nothing and finds nothing.
    """

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets = tuple(dict.fromkeys(s for s in secrets if s))
        # (description, needle) in the order find() reports them: whole forms first.
        needles: list[tuple[str, str]] = []
        runs: list[tuple[str, str]] = []
        grams: set[str] = set()
        short: set[str] = set()
        for secret in self._secrets:
            for form in _escapes(secret):
                what = "a registered secret" if form == secret else "a JSON-escaped secret"
                needles.append((what, form))
            for name, form in _encodings(secret):
                needles.append((f"the {name} form of a registered secret", form))
            body = body_of(secret)
            folded = _folded(body)
            variants = (folded, folded[::-1], _rot13(folded))
            if len(folded) >= RUN:
                grams.update(v[i : i + RUN] for v in variants for i in range(len(v) - RUN + 1))
                runs.extend(
                    (f"a {RUN}-character run of a registered secret", form)
                    for piece in sorted(_raw_pieces(body))
                    for form in _escapes(piece)
                )
            elif folded:  # whole only, as written (reversed or ROT13 it is too short to tell)
                short.add(folded)
        self._needles = tuple(dict.fromkeys(needles + runs))
        self._texts = tuple(dict.fromkeys(n for _, n in needles))
        self._bytes = tuple((what, n.encode("utf-8")) for what, n in self._needles)
        self._grams = frozenset(grams)
        self._short = tuple(sorted(short, key=len, reverse=True))
        # A window this wide on each side of a cut holds every whole form that crosses it.
        self.margin = max((len(n) for n in self._texts), default=0)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def __repr__(self) -> str:
        return f"SecretSet({len(self._secrets)} secrets)"  # never the values

    def __len__(self) -> int:
        return len(self._secrets)

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """Where whole forms and pieces occur, merged into disjoint spans of ``text``."""
        found: list[tuple[int, int]] = []
        for needle in self._texts:
            start = text.find(needle)
            while start != -1:
                found.append((start, start + len(needle)))
                start = text.find(needle, start + 1)
        if not (self._grams or self._short):
            return _merge(found)
        for decode in (False, True) if _ESCAPED.search(text) else (False,):
            if self._holds(_fast_fold(text, decode=decode), short=True):
                found.extend(self._where(_squeezed(text, decode=decode), short=True))
        for data, start, align, width in _encoded_runs(text):
            if self._holds(_NON_ALNUM.sub("", data.decode("latin-1")).lower(), short=False):
                found.extend(self._where(_encoded_view(data, start, align, width), short=False))
        return _merge(found)

    def _needles_in(self, short: bool) -> Iterator[str]:
        yield from self._grams
        if short:  # a short body whole: in text views only (decoded bytes are too noisy)
            yield from self._short

    def _holds(self, folded: str, *, short: bool) -> bool:
        return any(n in folded for n in self._needles_in(short))

    def _where(self, view: _View, *, short: bool) -> Iterator[tuple[int, int]]:
        text, starts, ends = view
        for needle in self._needles_in(short):
            at = text.find(needle)
            while at != -1:
                yield starts[at], ends[at + len(needle) - 1]
                at = text.find(needle, at + 1)

    @staticmethod
    def _replace(text: str, spans: list[tuple[int, int]], marker: str) -> str:
        parts: list[str] = []
        at = 0
        for start, end in spans:
            parts.append(text[at:start])
            parts.append(marker)
            at = end
        parts.append(text[at:])
        return "".join(parts)

    def scrub(self, text: str) -> str:
        """``text`` with every form and piece of every secret replaced by ``MARKER``.

        A marker next to the remaining text could in theory spell a new piece of a
        secret (a secret containing ``redacted``): scrubbing repeats until nothing is
        found, and after a few rounds drops the matches instead of marking them, which
        always ends (the text gets shorter each round).
        """
        if not self._secrets:
            return text
        for _ in range(4):
            spans = self._spans(text)
            if not spans:
                return text
            text = self._replace(text, spans, MARKER)
        while spans := self._spans(text):
            text = self._replace(text, spans, "")
        return text

    def scrub_optional(self, text: str | None) -> str | None:
        """``scrub`` that passes None through."""
        return None if text is None else self.scrub(text)

    def excerpt(self, text: str, limit: int) -> str:
        """The first ``limit`` characters of the scrubbed text (scrubbed before the cut).

        Only a window is scrubbed; it grows until its scrubbed text is ``margin``
        longer than the cut, so a run cut off at the window's end lies past the cut.
        """
        width = limit + self.margin
        while True:
            clean = self.scrub(text[:width])
            if len(clean) >= limit + self.margin or width >= len(text):
                return clean[:limit]
            width *= 2

    def tail(self, text: str, limit: int) -> str:
        """The last ``limit`` characters of the scrubbed text (scrubbed before the cut)."""
        if limit <= 0:
            return ""
        width = limit + self.margin
        while True:
            clean = self.scrub(text[-width:] if width < len(text) else text)
            if len(clean) >= limit + self.margin or width >= len(text):
                return clean[-limit:]
            width *= 2

    def excerpt_bytes(self, data: bytes, limit: int) -> str:
        """The first ``limit`` bytes of ``data`` as text (invalid UTF-8 replaced), scrubbed first.

        Without a secret in reach this is exactly ``data[:limit].decode(errors="replace")``.
        """
        width = limit + 4 * self.margin
        while True:
            window = data[:width].decode("utf-8", errors="replace")
            clean = self.scrub(window)
            if clean == window:
                return data[:limit].decode("utf-8", errors="replace")
            encoded = clean.encode("utf-8")
            if len(encoded) >= limit + 4 * self.margin or width >= len(data):
                return encoded[:limit].decode("utf-8", errors="replace")
            width *= 2

    def scrub_json(self, value: object) -> object:
        """A decoded JSON value with every string in it (keys too) scrubbed."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {self.scrub(k): self.scrub_json(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.scrub_json(v) for v in value]
        return value

    def find(self, data: bytes) -> str | None:
        """Which form of a secret ``data`` holds (a description, never the secret), or None."""
        for what, needle in self._bytes:
            if needle in data:
                return what
        return None


def env_secret(env_name: object, environ: Mapping[str, str], *, flag: str = "--api-key-env") -> str:
    """The secret held by the environment variable named ``env_name``.

    The name must be a variable name: a value that is not (a key passed by
    mistake) is refused without echoing it. A name is shown in messages only
    when it looks like a conventional variable name (upper case), so a key
    that happens to be a valid name is not printed either.

    Raises:
        UsageError: ``env_name`` is not a variable name.
        AdapterError: the variable is unset, empty, or holds whitespace or control chars.
    """
    if not isinstance(env_name, str) or not _ENV_NAME.fullmatch(env_name):
        raise UsageError(
            f"the value given to {flag} is not a variable name; "
            "pass the NAME of the variable that holds the key"
        )
    if _SHOWN_NAME.fullmatch(env_name):
        named = f"environment variable {env_name} (named by {flag})"
        hint = f"export {env_name}=... before running, or use --auth none"
    else:
        named = f"the environment variable named by {flag} (name not shown: it may be a key)"
        hint = "check the name you gave, or use --auth none"
    secret = environ.get(env_name)
    if not secret:
        raise AdapterError(f"{named} is not set or empty", hint=hint)
    if any(c.isspace() or ord(c) < 32 for c in secret):
        # Never quote the value: it is a secret.
        raise AdapterError(f"{named} holds whitespace or control chars")
    return secret
