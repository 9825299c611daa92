"""Secrets never enter the log: scrub provider text, and say which form of a secret a body holds.

A ``SecretSet`` is built from the secret strings a run is configured with (the
API key of the openai adapter, the key a command adapter's program uses). Its
``scrub`` replaces, in any text that comes from a provider or a command,

- every occurrence of a secret,
- its URL-encoded forms (``quote`` and ``quote_plus``, upper- and lower-case hex),
- its base64 forms (standard and URL-safe alphabets, with and without padding),
- its JSON-escaped forms (what a JSON body holds when the secret has ``"``,
  ``\\``, control or non-ASCII characters),
- and every run of ``RUN`` (8) or more consecutive characters of a secret,

with the fixed marker ``[redacted]``. A secret shorter than ``RUN`` characters is
replaced only where it occurs whole (in any of the forms above).

Scrubbing comes before any cut: ``excerpt`` and ``tail`` scrub a window wide
enough to hold every secret that straddles the cut, then cut, so no part of a
secret survives at the edge. ``find`` is the store's last line of defence: it
names the form of a secret found in an encoded event body, never the secret.

>>> s = SecretSet(["sk-NEWCOMER-0123456789"])
>>> s.scrub("key sk-NEWCOMER-0123456789 and sk-NEWCOMER-01 and NEWCOME")
'key [redacted] and [redacted] and NEWCOME'
>>> s.find(b'{"raw":"x-NEWCOMER-0"}')
'an 8-character run of a registered secret'
>>> s.find(b"nothing here") is None
True
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from collections.abc import Iterable, Mapping

import msgspec

from ledger.errors import AdapterError, UsageError

__all__ = ["MARKER", "RUN", "SecretSet", "env_secret"]

MARKER = "[redacted]"
RUN = 8
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Variable names that look like names (not like keys) may be shown in messages.
_SHOWN_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
_JSON = msgspec.json.Encoder()


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


def _grams(text: str) -> set[str]:
    return {text[i : i + RUN] for i in range(len(text) - RUN + 1)}


class SecretSet:
    """The configured secrets of a run, and every form of them that must not be stored.

    Empty strings are ignored; an empty set scrubs nothing and finds nothing.
    """

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets = tuple(dict.fromkeys(s for s in secrets if s))
        # (description, needle) in the order find() reports them: whole forms first.
        needles: list[tuple[str, str]] = []
        runs: list[tuple[str, str]] = []
        for secret in self._secrets:
            for form in _escapes(secret):
                what = "a registered secret" if form == secret else "a JSON-escaped secret"
                needles.append((what, form))
                if len(secret) >= RUN:
                    runs.extend(
                        (f"an {RUN}-character run of a registered secret", g)
                        for g in sorted(_grams(form))
                    )
            for name, form in _encodings(secret):
                needles.append((f"the {name} form of a registered secret", form))
        self._needles = tuple(dict.fromkeys(needles + runs))
        self._texts = tuple(dict.fromkeys(n for _, n in self._needles))
        self._bytes = tuple((what, n.encode("utf-8")) for what, n in self._needles)
        # A window this wide on each side of a cut holds every needle that crosses it.
        self.margin = max((len(n) for n in self._texts), default=0)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def __repr__(self) -> str:
        return f"SecretSet({len(self._secrets)} secrets)"  # never the values

    def __len__(self) -> int:
        return len(self._secrets)

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """Where needles occur, merged into disjoint spans (touching spans merge too)."""
        found: list[tuple[int, int]] = []
        for needle in self._texts:
            start = text.find(needle)
            while start != -1:
                found.append((start, start + len(needle)))
                start = text.find(needle, start + 1)
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
        """``text`` with every form of every secret replaced by ``MARKER``.

        A marker next to the remaining text could in theory spell a new run of a
        secret (a secret containing ``]`` or ``[redacted``): scrubbing repeats until
        nothing is found, and after a few rounds drops the matches instead of
        marking them, which always ends (the text gets shorter each round).
        """
        if not self._texts:
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
