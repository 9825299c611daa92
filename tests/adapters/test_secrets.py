"""Secrets never enter the log (issue 12 section 3): the scrubber, the store's refusal,
``--api-key-env`` refusals, and a real ``caseledger run`` against a server that echoes the key."""

from __future__ import annotations

import base64
import urllib.parse
from pathlib import Path

import msgspec
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ledger import codec
from ledger.errors import AdapterError, SecretLeakError, UsageError
from ledger.events import PromptSent
from ledger.keys import Signer
from ledger.secrets import MARKER, SecretSet, env_secret
from ledger.store import Draft, Ledger

KEY = "sk-NEWCOMER+test/Key=0123456789abcdefXYZ"


def forms(secret: str) -> list[str]:
    """Every form the issue names, written out independently of ledger.secrets."""
    data = secret.encode()
    out = [secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)]
    for enc in (base64.b64encode(data), base64.urlsafe_b64encode(data)):
        out += [enc.decode(), enc.decode().rstrip("=")]
    out += [secret[i : i + 8] for i in range(len(secret) - 7)]
    return list(dict.fromkeys(out))


def leaks(text: str, secret: str = KEY) -> list[str]:
    return [f for f in forms(secret) if f in text]


# ------------------------------------------------------------------ the scrubber, by hand


def test_the_forms_of_the_key_are_what_the_issue_names() -> None:
    # Worked out by hand: '+' -> %2B, '/' -> %2F, '=' -> %3D.
    quoted = "sk-NEWCOMER%2Btest%2FKey%3D0123456789abcdefXYZ"
    lower_hex = "sk-NEWCOMER%2btest%2fKey%3d0123456789abcdefXYZ"
    b64 = base64.b64encode(KEY.encode()).decode()
    assert len(KEY) == 40 and b64.endswith("==")  # 40 bytes = 13 x 3 + 1: two pad chars
    assert forms(KEY)[:2] == [KEY, quoted]
    s = SecretSet([KEY])
    for form in (KEY, quoted, lower_hex, b64, b64.rstrip("=")):
        assert s.scrub(f"<{form}>") == f"<{MARKER}>"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"a {KEY} b", f"a {MARKER} b"),
        # A run of 8 characters of the key, anywhere, is gone; 7 stay.
        ("id NEWCOMER+t!", f"id {MARKER}!"),
        ("id NEWCOME!", "id NEWCOME!"),
        # Two runs that touch become one marker; runs apart stay apart.
        (f"{KEY}{KEY}", MARKER),
        ("0123456789 x abcdefXYZ", f"{MARKER} x {MARKER}"),
        # The key straddling a cut: what is left of it is scrubbed too.
        ("tail: sk-NEWCOMER+te", f"tail: {MARKER}"),
        ("", ""),
    ],
    ids=["whole", "run8", "run7", "adjacent", "apart", "cut", "empty"],
)
def test_scrub_by_hand(text: str, expected: str) -> None:
    assert SecretSet([KEY]).scrub(text) == expected


def test_short_secret_only_whole() -> None:
    s = SecretSet(["abc123"])
    assert s.scrub("x abc123 y abc12 z") == f"x {MARKER} y abc12 z"
    assert s.scrub("YWJjMTIz") == MARKER  # base64 of abc123, by hand


def test_json_escaped_and_non_ascii_secret() -> None:
    secret = 'k"\\é-0123456789'
    s = SecretSet([secret])
    body = msgspec.json.encode({"raw": f"see {secret}"})
    assert secret.encode() not in body  # the quote and backslash are escaped in JSON
    assert s.find(body) == "a JSON-escaped secret"
    inner = msgspec.json.encode({"raw_json": msgspec.json.encode({"x": secret}).decode()})
    assert s.find(inner) == "a JSON-escaped secret"


def test_excerpt_scrubs_before_the_cut_at_every_offset() -> None:
    s = SecretSet([KEY])
    for at in range(300 - len(KEY) - 2, 303):
        text = "x" * at + KEY + "y" * 400
        cut = s.excerpt(text, 300)
        assert leaks(cut) == [], at
        assert len(cut) == 300
        raw = s.excerpt_bytes(text.encode(), 300)
        assert leaks(raw) == [] and len(raw.encode()) == 300, at
        tail = s.tail("y" * 400 + KEY + "x" * at, 300)
        assert leaks(tail) == [] and len(tail) == 300, at


def test_excerpt_without_secret_is_the_plain_cut() -> None:
    s = SecretSet([KEY])
    data = "é".encode() * 200  # 400 bytes; a cut at 301 splits a character
    assert s.excerpt_bytes(data, 301) == data[:301].decode("utf-8", errors="replace")
    assert s.excerpt("abc" * 200, 300) == ("abc" * 200)[:300]


def test_excerpt_of_many_keys_leaves_no_tail_of_one() -> None:
    # Each key shrinks to a 10-character marker, so the cut reaches far past the
    # first window: the part of a key cut off at a window's end must not show.
    s = SecretSet([KEY])
    text = (KEY + ".") * 60
    assert leaks(s.excerpt(text, 300)) == []
    assert leaks(s.excerpt_bytes(text.encode(), 300)) == []
    assert leaks(s.tail(text, 300)) == []


def test_marker_next_to_text_cannot_spell_a_new_run() -> None:
    # The secret holds ']' and 'd': after one pass the marker plus the text around
    # it spells a run again; scrubbing goes on until nothing is left.
    secret = "ted]abcdefgh"
    s = SecretSet([secret])
    out = s.scrub("ted]abcdefghabcdefgh" + "ted]abcd")
    assert [secret[i : i + 8] for i in range(5) if secret[i : i + 8] in out] == []


def test_empty_set_and_repr() -> None:
    assert SecretSet([None, ""]).scrub(KEY) == KEY
    assert not SecretSet([])
    assert KEY not in repr(SecretSet([KEY])) and repr(SecretSet([KEY])) == "SecretSet(1 secrets)"


def test_scrub_json_strings_and_keys() -> None:
    s = SecretSet([KEY])
    value = {"note": f"k={KEY}", KEY: [1, "0123456789abcdef"], "n": 3}
    assert s.scrub_json(value) == {"note": f"k={MARKER}", MARKER: [1, MARKER], "n": 3}


# ------------------------------------------------------------------ the scrubber, properties

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80)


@settings(max_examples=300, deadline=None)
@given(
    secret=st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Zs", "Cc")),
        min_size=1,
        max_size=40,
    ),
    parts=st.lists(st.tuples(_TEXT, st.integers(0, 7)), min_size=1, max_size=5),
)
def test_embedded_secrets_never_survive(secret: str, parts: list[tuple[str, int]]) -> None:
    # Each piece of text is followed by the secret, one of its forms, or a run of it.
    pool = forms(secret)
    text = "".join(t + pool[n % len(pool)] for t, n in parts)
    out = SecretSet([secret]).scrub(text)
    assert secret not in out
    if len(secret) >= 8:
        assert [g for g in forms(secret) if g in out] == []


@settings(max_examples=300, deadline=None)
@given(secret=st.text(alphabet="abcdefghij-_", min_size=1, max_size=40), text=_TEXT)
def test_text_without_secret_runs_is_unchanged(secret: str, text: str) -> None:
    text = "".join(c for c in text if c not in "abcdefghij-_ABCDEFGHIJKLMNOPQRSTUVWXYZ%=+/")
    s = SecretSet([secret])
    assume(not any(f in text for f in forms(secret)))
    assert s.scrub(text) == text
    assert s.find(text.encode()) is None


# ------------------------------------------------------------------ the store refuses


def _op_signer() -> Signer:
    return Signer.from_seed("test-operator", bytes(range(32)), role="operator")


def _prompt(run: str, text: str) -> Draft:
    digest = codec.sha256_hex(text.encode())
    return Draft(PromptSent, run, {"case_id": "c1", "attempt": 1, "prompt": text,
                                   "prompt_sha256": digest})  # fmt: skip


@pytest.mark.parametrize(
    ("leaked", "what"),
    [
        (KEY, "a registered secret"),
        ("x NEWCOMER+t y", "an 8-character run of a registered secret"),
        (base64.b64encode(KEY.encode()).decode(), "the base64 form of a registered secret"),
        (urllib.parse.quote(KEY, safe=""), "the URL-encoded form of a registered secret"),
    ],
    ids=["whole", "run", "base64", "url"],
)
def test_store_refuses_a_body_with_a_secret(tmp_path: Path, leaked: str, what: str) -> None:
    signer = _op_signer()
    with Ledger.create(tmp_path / "l.db", signer) as ledger:
        ledger.append([_prompt("r1", "fine")], signer)
        ledger.register_secrets(SecretSet([KEY]).find)
        before = ledger.head()
        with pytest.raises(SecretLeakError) as exc:
            # The clean first event of the batch is not appended either.
            ledger.append([_prompt("r2", "clean"), _prompt("r1", leaked)], signer)
        assert exc.value.message == (
            f"append refused: the PromptSent event of stream r1 contains {what}; nothing of its "
            "batch was appended (a provider or command text escaped the scrubber: a caseledger "
            "bug, see docs/adapters.md, Secrets)"
        )
        assert exc.value.exit_code == 2
        assert ledger.head() == before and ledger.size() == 2
        assert ledger.append([_prompt("r2", "clean")], signer) == [2]
    data = (tmp_path / "l.db").read_bytes()
    assert leaks(data.decode("latin-1")) == []


# ------------------------------------------------------------------ --api-key-env


@pytest.mark.parametrize("value", [KEY, "sk-abc", "MY KEY", "1ABC", "", "A-B"])
def test_api_key_env_value_that_is_not_a_name(value: str) -> None:
    with pytest.raises(UsageError) as exc:
        env_secret(value, {value: "x"})
    assert exc.value.message == (
        "the value given to --api-key-env is not a variable name; "
        "pass the NAME of the variable that holds the key"
    )
    assert exc.value.hint is None


def test_api_key_env_name_that_looks_like_a_key_is_not_shown() -> None:
    key_like = "abcDEF0123456789xyz"  # a valid variable name, but not an upper-case one
    with pytest.raises(AdapterError) as exc:
        env_secret(key_like, {})
    assert key_like not in exc.value.diagnostics()
    assert exc.value.message == (
        "the environment variable named by --api-key-env (name not shown: it may be a key) "
        "is not set or empty"
    )
    with pytest.raises(AdapterError) as exc:
        env_secret("MY_KEY", {})
    assert exc.value.diagnostics() == (
        "environment variable MY_KEY (named by --api-key-env) is not set or empty\n"
        "  hint: export MY_KEY=... before running, or use --auth none"
    )
    assert env_secret("MY_KEY", {"MY_KEY": KEY}) == KEY
