"""Secrets never enter the log (issue 12 section 3): the scrubber, the store's refusal,
``--api-key-env`` refusals, and a real ``caseledger run`` against a server that echoes the key."""

from __future__ import annotations

import base64
import json
import stat
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import msgspec
import pytest
from chatserver import ChatServer, scheduled
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from runkit import answer, cli, fresh_home, head, stream

from ledger import codec, events
from ledger.adapters import Failure, Reply, Request, build_adapter
from ledger.adapters.base import adapter_secrets
from ledger.errors import AdapterError, SecretLeakError, UsageError
from ledger.events import PromptSent
from ledger.keys import Signer
from ledger.secrets import MARKER, SecretSet, env_secret
from ledger.store import Draft, Ledger

KEY = "sk-NEWCOMER+test/Key=0123456789abcdefXYZ"


def body(secret: str) -> str:
    """The secret without a public vendor prefix (issue 30: ``sk-`` alone is no secret)."""
    for prefix in ("sk-proj-", "sk-ant-", "sk-"):
        if secret.startswith(prefix) and len(secret) > len(prefix):
            return secret[len(prefix) :]
    return secret


def runs(secret: str) -> list[str]:
    """Every shortest window of the body holding 7 letters or digits (issue 30's pieces)."""
    text = body(secret)
    marks = [i for i, c in enumerate(text) if c.isalnum()]
    return [text[marks[i] : marks[i + 6] + 1] for i in range(len(marks) - 6)]


def forms(secret: str) -> list[str]:
    """Every form the issue names, written out independently of ledger.secrets."""
    data = secret.encode()
    out = [secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)]
    for enc in (base64.b64encode(data), base64.urlsafe_b64encode(data)):
        out += [enc.decode(), enc.decode().rstrip("=")]
    out += runs(secret)
    return list(dict.fromkeys(out))


def leaks(text: str, secret: str = KEY) -> list[str]:
    return [f for f in forms(secret) if f in text]


# ------------------------------------------------------------------ the scrubber, by hand


def test_the_forms_of_the_key_are_what_the_issue_names() -> None:
    # Worked out by hand: '+' -> %2B, '/' -> %2F, '=' -> %3D.
    quoted = "sk-NEWCOMER%2Btest%2FKey%3D0123456789abcdefXYZ"
    lower_hex = "sk-NEWCOMER%2btest%2fKey%3d0123456789abcdefXYZ"
    b64 = base64.b64encode(KEY.encode()).decode()
    assert len(KEY) == 40
    assert b64.endswith("==")  # 40 bytes = 13 x 3 + 1: two pad chars
    assert forms(KEY)[:2] == [KEY, quoted]
    s = SecretSet([KEY])
    for form in (KEY, quoted, lower_hex, b64, b64.rstrip("=")):
        assert s.scrub(f"<{form}>") == f"<{MARKER}>"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"a {KEY} b", f"a {MARKER} b"),
        # A run of 7 letters and digits of the key's body, anywhere, is gone; 6 stay.
        ("id NEWCOMER+t!", f"id {MARKER}!"),
        ("id NEWCOME!", f"id {MARKER}!"),
        ("id NEWCOM!", "id NEWCOM!"),
        # The public prefix is no secret: a piece of the body after it goes, it stays.
        ("sk-NEW", "sk-NEW"),
        # Two runs that touch become one marker; runs apart stay apart.
        (f"{KEY}{KEY}", MARKER),
        ("0123456789 x abcdefXYZ", f"{MARKER} x {MARKER}"),
        # The key straddling a cut: what is left of its body is scrubbed too.
        ("tail: sk-NEWCOMER+te", f"tail: sk-{MARKER}"),
        ("", ""),
    ],
    ids=["whole", "run8", "run7", "run6", "prefix", "adjacent", "apart", "cut", "empty"],
)
def test_scrub_by_hand(text: str, expected: str) -> None:
    assert SecretSet([KEY]).scrub(text) == expected


def test_short_secret_only_whole() -> None:
    s = SecretSet(["abc123"])
    assert s.scrub("x abc123 y abc12 z") == f"x {MARKER} y abc12 z"
    assert s.scrub("YWJjMTIz") == MARKER  # base64 of abc123, by hand


def test_json_escaped_and_non_ascii_secret() -> None:
    secret = 'k"\\é-0123456789'  # noqa: S105 (a fake secret to scrub)
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
        assert leaks(raw) == [], at
        assert len(raw.encode()) == 300, at
        tail = s.tail("y" * 400 + KEY + "x" * at, 300)
        assert leaks(tail) == [], at
        assert len(tail) == 300, at


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
    secret = "ted]abcdefgh"  # noqa: S105 (a fake secret to scrub)
    s = SecretSet([secret])
    out = s.scrub("ted]abcdefghabcdefgh" + "ted]abcd")
    assert [secret[i : i + 8] for i in range(5) if secret[i : i + 8] in out] == []


def test_empty_set_and_repr() -> None:
    assert SecretSet([None, ""]).scrub(KEY) == KEY
    assert not SecretSet([])
    assert KEY not in repr(SecretSet([KEY]))
    assert repr(SecretSet([KEY])) == "SecretSet(1 secrets)"


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
    assert [g for g in forms(secret) if g in out] == []


@settings(max_examples=300, deadline=None)
@given(secret=st.text(alphabet="abcdefghij-_", min_size=1, max_size=40), text=_TEXT)
def test_text_without_secret_runs_is_unchanged(secret: str, text: str) -> None:
    # ASCII only (no compatibility form of a letter), no escape or hex digit that could
    # spell a letter of the secret once decoded.
    text = "".join(c for c in text if c.isascii() and c not in "abcdefghij-_%=+/\\&0123456789")
    text = "".join(c for c in text if not c.isupper())
    s = SecretSet([secret])
    assume(not any(f in text for f in forms(secret)))
    assert s.scrub(text) == text
    assert s.find(text.encode()) is None


_PIECES = st.sampled_from(
    ["ab9Z", "-_ ", "%41", "&amp;", "&#115;", "&#x73;", "\\u0073", "\\x41", "\\", "%", "&#",
     "\u00e9", "\uff53", "\u00df", "\u200b", "\ufb03", "\u3391", "\ufc5e"]
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(parts=st.lists(st.one_of(_PIECES, _TEXT), max_size=20))
def test_the_fast_search_reads_the_same_letters_as_the_spans(parts: list[str]) -> None:
    # scrub() searches a fast fold of each text and makes spans only for a text that holds
    # a piece: the two must read the same letters, or a piece could be missed.
    from ledger import secrets

    text = "".join(parts)
    for decode in (False, True):
        assert secrets._fast_fold(text, decode=decode) == secrets._squeezed(text, decode=decode)[0]


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
        ("x NEWCOMER+t y", "a 7-character run of a registered secret"),
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
        assert ledger.head() == before
        assert ledger.size() == 2
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


# ------------------------------------------------------------------ the command adapter


def _program(tmp_path: Path, body: str) -> str:
    script = tmp_path / "prog.py"
    script.write_text(f"#!{sys.executable}\nimport json, os, sys\nsys.stdin.read()\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_command_stderr_tail_is_scrubbed_before_the_cut(tmp_path: Path) -> None:
    # The key starts 470 + 40 = 510 characters before the end: across the 500 cut.
    prog = _program(tmp_path, "sys.stderr.write('E' * 600 + os.environ['K'] + 'x' * 470)\n"
                    "sys.exit(3)\n")  # fmt: skip
    a = build_adapter("command", {"command": prog, "api_key_env": "K"}, environ={"K": KEY})
    failure = a.call(Request("c1", 1, "q"))
    assert isinstance(failure, Failure)
    # By hand: the last 500 characters of 600 E, the marker, 470 x.
    assert failure.message == (
        "command failed (exit status 3); stderr: " + "E" * 20 + MARKER + "x" * 470
    )


def test_command_stdout_and_usage_file_are_scrubbed(tmp_path: Path) -> None:
    prog = _program(tmp_path, "k = os.environ['K']\n"
                    "json.dump({'model': 'm-' + k, 'output': 2},"
                    " open(os.environ['CASELEDGER_USAGE_FILE'], 'w'))\n"
                    "print('SELECT ' + repr(k))\n")  # fmt: skip
    a = build_adapter("command", {"command": prog, "api_key_env": "K"}, environ={"K": KEY})
    reply = a.call(Request("c1", 1, "q"))
    assert isinstance(reply, Reply)
    assert reply.raw_output == f"SELECT '{MARKER}'\n"
    assert reply.resolved_model == f"m-{MARKER}"
    assert reply.usage is not None
    assert reply.usage.raw_json == '{"model":"m-[redacted]","output":2}'
    assert adapter_secrets(a).find(KEY.encode()) == "a registered secret"


# ------------------------------------------------------------------ end to end


def _completion(content: str | None, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    message.update(extra.pop("message", {}))
    return {
        "id": "c",
        "object": "chat.completion",
        "model": "echo-model",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        **extra,
    }


def _body(doc: Any) -> bytes:
    return json.dumps(doc).encode()


B64 = base64.b64encode(KEY.encode()).decode()
URL = urllib.parse.quote(KEY, safe="")
# The straddling error bodies: the key starts at byte p of the body, for every p from
# one before it could reach the 300-byte cut to two past it (300 - 41 .. 301).
STRADDLE = list(range(300 - len(KEY) - 1, 302))


def echo_schedule() -> list[tuple[int, dict[str, str], bytes]]:
    """What the echoing server answers, request by request (the run uses --concurrency 1,
    so requests arrive in plan order)."""
    plain = _body(_completion(answer("SELECT 1 AS n")))
    schedule = [
        # 1. the answer content: in the SQL (which then runs), the summary, the assumptions
        (200, {}, _body(_completion(json.dumps({
            "plan": {"grain": "one row", "sources": [], "joins": [], "filters": [],
                     "metrics": [], "steps": [], "risks": [URL]},
            "sql": f"SELECT '{KEY}' AS k", "summary": f"base64 {B64}",
            "assumptions": [f"key {KEY}"]})))),
        # 2. a kept header: x-request-id, which becomes the provider request id
        (200, {"x-request-id": f"req-{KEY}"}, plain),
        # 3. the model field, which becomes the resolved model id
        (200, {}, _body({**_completion(answer("SELECT 2 AS n")), "model": f"m-{KEY}"})),
        # 4. the raw usage object (a float cost makes it keep the text as received)
        (200, {}, _body(_completion(answer("SELECT 3 AS n"), usage={
            "prompt_tokens": 10, "completion_tokens": 5, "cost": 0.0001,
            "note": f"billed to {KEY}", KEY: 1}))),
        # 5. a refusal: its text and the message cut from it (the key twice past 300)
        (200, {}, _body(_completion(None, message={
            "refusal": "r" * 290 + KEY + " and " + KEY}))),
        # 6. an error body: 401 echoing the key, the request id URL-encoded
        (401, {"x-request-id": URL},
         _body({"error": {"message": f"Incorrect API key provided: {KEY}"}})),
        # 8. a 429 message with the issue's partial key and the encoded forms
        (429, {}, f"slow down {KEY[:10]}... {B64} {URL}".encode()),
    ]  # fmt: skip
    # 7. error bodies where the key straddles the 300-byte cut, at every offset
    for p in STRADDLE:
        schedule.append((500, {}, ("e" * p + KEY + "z" * 60).encode()))
    return schedule


def command_model(tmp_path: Path) -> Path:
    """9. A command model that uses the key: 7 answers echo it (stdout, usage file, stderr),
    then every call fails with the key straddling the 500-character stderr tail."""
    counter = tmp_path / "calls"
    script = tmp_path / "model.py"
    # S608: this is a Python script (the fake model), not SQL; it answers with SQL text
    script.write_text(
        f"#!{sys.executable}\n"  # noqa: S608
        "import json, os, sys\n"
        "sys.stdin.read()\n"
        "key = os.environ['SECRETS_TEST_KEY']\n"
        f"counter = {str(counter)!r}\n"
        "n = int(open(counter).read()) if os.path.exists(counter) else 0\n"
        "open(counter, 'w').write(str(n + 1))\n"
        "if n < 7:\n"
        "    with open(os.environ['CASELEDGER_USAGE_FILE'], 'w') as f:\n"
        "        json.dump({'model': 'm-' + key, 'input': 3, 'output': 2}, f)\n"
        f"    plan = {{k: [] for k in {PLAN_LISTS!r}}}\n"
        '    sql = "SELECT \'" + key + "\' AS k"\n'
        "    doc = {'plan': {'grain': key, **plan}, 'sql': sql, 'summary': key}\n"
        "    print(json.dumps({**doc, 'assumptions': []}))\n"
        "    sys.stderr.write('warning: ' + key)\n"
        "    sys.exit(0)\n"
        "s = 499 + (n - 7) % 43  # characters from the key's start to the end of stderr\n"
        "sys.stderr.write('E' * 600 + key + 'x' * (s - len(key)))\n"
        "sys.exit(1)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


PLAN_LISTS = ("sources", "joins", "filters", "metrics", "steps", "risks")


def assert_no_key(where: str, data: bytes, *, pieces: bool = True) -> None:
    # A bank database holds the bank's own data: "1234567" (a piece of this test key's
    # body) is a phone number there, not a leak; only whole forms are searched in it.
    wanted = forms(KEY) if pieces else [f for f in forms(KEY) if f not in runs(KEY)]
    found = [f for f in wanted if f.encode() in data]
    assert found == [], f"{where} holds {len(found)} forms of the key"


@pytest.mark.slow
def test_a_server_and_a_command_echoing_the_key_leave_no_trace(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """The nine channels: (1) answer content, (2) the x-request-id header kept as the request
    id, (3) the model field, (4) the raw usage object, (5) a refusal text and its cut message,
    (6) a 401 error body (request id URL-encoded), (7) 500 error bodies with the key across the
    300-byte cut at every offset, (8) a 429 message with a partial key and the base64 and
    URL-encoded forms, (9) a command model's stdout, usage file and stderr, the key across
    the 500-character stderr tail at every offset. Afterwards no form of the key (whole, any
    8-character run, URL-encoded, base64) is in any file of the ledger's folder (ledger, WAL,
    projection stores, bank databases), in the three reports, or on stdout or stderr."""
    home = fresh_home(tmp_path_factory, tmp_path)
    server = ChatServer(scheduled(echo_schedule()))
    env = {"SECRETS_TEST_KEY": KEY}
    outputs: list[tuple[str, subprocess.CompletedProcess[str]]] = []
    try:
        # 7 cases x 8 attempts = 56 calls >= 7 channels + 43 offsets.
        done = cli(home, "run", "--bank", "sales-fixture", "--adapter", "openai",
                   "--base-url", server.url, "--model", "echo", "--api-key-env",
                   "SECRETS_TEST_KEY", "--run-id", "echo", "--attempts", "8",
                   "--retries", "0", "--max-consecutive-failures", "0",
                   env=env)  # fmt: skip
        outputs.append(("openai run", done))
        assert done.returncode == 0, done.stderr
    finally:
        server.close()
    assert len(server.received) == 56
    assert set(server.auth) == {f"Bearer {KEY}"}
    script = command_model(tmp_path)
    done = cli(home, "run", "--bank", "sales-fixture", "--adapter", "command",
               "--command", str(script), "--api-key-env", "SECRETS_TEST_KEY",
               "--run-id", "cmd", "--attempts", "8", "--max-consecutive-failures", "0",
               env=env)  # fmt: skip
    outputs.append(("command run", done))
    assert done.returncode == 0, done.stderr

    for fmt in ("json", "md", "html"):
        done = cli(home, "report", "--format", fmt)
        outputs.append((f"{fmt} report", done))
        assert done.returncode == 0, done.stderr
        assert len(done.stdout) > 1000
    done = cli(home, "verify")
    outputs.append(("verify", done))
    assert done.returncode == 0, done.stdout + done.stderr

    for name, done in outputs:
        assert_no_key(f"{name} stdout", done.stdout.encode())
        assert_no_key(f"{name} stderr", done.stderr.encode())
    files = [p for p in home.rglob("*") if p.is_file()]
    assert home / "ledger.db" in files
    for path in files:
        where = str(path.relative_to(home))
        assert_no_key(where, path.read_bytes(), pieces=not where.startswith("banks/"))

    # The evidence is still there, scrubbed: each channel recorded its marker.
    recorded = {s.seq: s.event() for s in stream(home, "echo")}
    replies = [e for e in recorded.values() if isinstance(e, events.ModelResponded)]
    failed = [e for e in recorded.values() if isinstance(e, events.ProviderFailed)]
    assert len(replies) + len(failed) == 56
    assert any(r.provider_request_id == f"req-{MARKER}" for r in replies)
    assert any(r.resolved_model == f"m-{MARKER}" for r in replies)
    # the SQL, the summary (base64), a risk (URL-encoded) and an assumption
    assert any(r.raw_output.count(MARKER) == 4 for r in replies)
    usage = [r.usage.raw_json for r in replies if r.usage and "cost" in (r.usage.raw_json or "")]
    assert usage
    assert all(MARKER in u for u in usage)
    refusal = [f for f in failed if f.kind == "policy_refusal"]
    assert refusal
    assert all(len(f.message) == 300 for f in refusal)
    auth = [f for f in failed if f.kind == "auth"]
    assert auth
    assert all(f.provider_request_id == MARKER for f in auth)
    # Scrubbed before the cut, worked out by hand: the key becomes the 10-character
    # marker, then the body is cut at 300 bytes; not one character of the key is left
    # at the edge (cutting first would leave up to 7, which no later scrub can find).
    straddled = sorted(f.message for f in failed if f.kind == "server_error")
    assert straddled == sorted("HTTP 500: " + ("e" * p + MARKER + "z" * 60)[:300] for p in STRADDLE)
    # The same for the command's stderr tail: its last 500 characters, key scrubbed first.
    cmd = [e for s in stream(home, "cmd") if isinstance(e := s.event(), events.ProviderFailed)]
    assert sorted(f.message for f in cmd) == sorted(
        "command failed (exit status 1); stderr: "
        + ("E" * 600 + MARKER + "x" * (499 + (n - 7) % 43 - len(KEY)))[-500:]
        for n in range(7, 56)
    )


@pytest.mark.slow
def test_a_key_given_to_api_key_env_is_refused_without_echo(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    home = fresh_home(tmp_path_factory, tmp_path)
    before = head(home)
    for adapter in (["--adapter", "openai", "--base-url", "http://127.0.0.1:9/v1",
                     "--model", "m"], ["--adapter", "command", "--command", "true"]):  # fmt: skip
        done = cli(home, "run", "--bank", "sales-fixture", *adapter, "--api-key-env", KEY)
        assert done.returncode == 2
        assert done.stderr == (
            "error: the value given to --api-key-env is not a variable name; "
            "pass the NAME of the variable that holds the key\n"
        )
        assert_no_key("stdout", done.stdout.encode())
        assert_no_key("stderr", done.stderr.encode())
    assert head(home) == before


@pytest.mark.slow
def test_store_refuses_a_prompt_holding_a_run_of_the_key(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """The last line of defence, for real: the key shares a 7-character run with the bank's
    prompt template ("assumptions"), which no adapter scrubs; the batch storing the run's
    prompts (issue 22: before the first model call) is refused, so no prompt is sent."""
    key = "sk-leak-assumptions-9f3a"
    home = fresh_home(tmp_path_factory, tmp_path)
    server = ChatServer(scheduled([(200, {}, _body(_completion(answer("SELECT 1 AS n"))))]))
    try:
        done = cli(home, "run", "--bank", "sales-fixture", "--adapter", "openai",
                   "--base-url", server.url, "--model", "m", "--api-key-env", "LEAK_KEY",
                   "--run-id", "leaky", env={"LEAK_KEY": key})  # fmt: skip
    finally:
        server.close()
    assert done.returncode == 2, done.stderr
    assert server.received == []  # refused before the first model call
    # stderr is not a terminal here: progress comes as plain lines every 10 s (a loaded
    # machine may print some before the refusal); the error itself is one line
    lines = [line for line in done.stderr.splitlines() if "elapsed " not in line]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "error: append refused: the PromptStored event of stream leaky contains a 7-character "
        "run of a registered secret; nothing of its batch was appended"
    )
    assert "Traceback" not in done.stderr
    kinds = [type(s.event()).__name__ for s in stream(home, "leaky")]
    assert "PromptSent" not in kinds
    assert "PromptStored" not in kinds
    assert kinds[0] == "RunStarted"
    assert key not in done.stdout + done.stderr
