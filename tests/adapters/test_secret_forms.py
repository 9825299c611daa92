"""Issue 30 "Secrets are scrubbed from results and errors, never a reason to stop a run".

A real ``caseledger run`` with an OpenAI-style project key registered (``--api-key-env``)
against a Chat Completions server on 127.0.0.1 whose model spells the key, in every
form the issue lists, into SQL result cells, into engine error text, into its own
answer text and into provider error bodies, headers and model names; one answer
spells only the public vendor prefix (``SELECT 'sk-p' || 'roj-' AS x``). The run
completes (exit 0, every attempt scored) and no form of the key is anywhere in the
ledger's files or in the JSON, Markdown and HTML reports.

The search for the key is written here, on its own (it does not import
``ledger.secrets``): it folds each text (NFKC, case-folded, letters and digits only)
after each decoding the issue names (none, HTML entities, ``\\u``/``\\x`` escapes,
percent-encoding, hex at both nibble alignments, base64 of both alphabets at all four
alignments) and looks for any 7 consecutive letters and digits of the key's body
(the key without ``sk-proj-``), of the body reversed and of its ROT13.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import json
import re
import unicodedata
import urllib.parse
from pathlib import Path

import msgspec
import pytest
from chatserver import ChatServer, scheduled
from runkit import cli, fresh_home, stream

from ledger import events

PREFIX = "sk-proj-"
BODY = "T3BlbkFJx9Qm2vRk7LpW4zNc8HsY1dGf6JtB0aVe_Ku5XoPi-Zq"
KEY = PREFIX + BODY
ZERO_WIDTH = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff")


def _b64_at(offset: int, *, urlsafe: bool = False) -> str:
    """Base64 of a longer text in which the key starts at byte ``offset``."""
    data = b"note:"[:offset] + KEY.encode()
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


# The forms of the issue (reversed, hex, base64 at a non-aligned offset, spaced,
# zero-width-joined, \u-escaped, 7-character pieces, ROT13, HTML entities, full-width)
# and a few more of the same kind.
FORMS: dict[str, str] = {
    "whole": KEY,
    "upper": KEY.upper(),
    "reversed": KEY[::-1],
    "hex": KEY.encode().hex(),
    "hex-upper": KEY.encode().hex().upper(),
    "base64-0": _b64_at(0),
    "base64-1": _b64_at(1),
    "base64-2": _b64_at(2),
    "base64url-1": _b64_at(1, urlsafe=True),
    "spaced": " ".join(KEY),
    **{f"zero-width-{ord(z):04X}": z.join(KEY) for z in ZERO_WIDTH},
    "u-escaped": "".join(f"\\u{ord(c):04x}" for c in KEY),
    "x-escaped": "".join(f"\\x{ord(c):02x}" for c in KEY),
    "pieces-7": " / ".join(BODY[i : i + 7] for i in range(0, len(BODY), 7)),
    "rot13": codecs.encode(KEY, "rot13"),
    "html-decimal": "".join(f"&#{ord(c)};" for c in KEY),
    "html-hex": "".join(f"&#x{ord(c):x};" for c in KEY),
    "html-named": KEY.replace("-", "&hyphen;").replace("_", "&lowbar;"),
    "full-width": _full_width(KEY),
    "percent": "".join(f"%{b:02X}" for b in KEY.encode()),
}


# ------------------------------------------------------------------ the independent search


def _fold(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalnum())


def _needles() -> set[str]:
    body = _fold(BODY)
    out: set[str] = set()
    for variant in (body, body[::-1], codecs.encode(body, "rot13")):
        out.update(variant[i : i + 7] for i in range(len(variant) - 6))
    return out


NEEDLES = _needles()


def _decodings(text: str) -> list[str]:
    out = [text, html.unescape(text), urllib.parse.unquote(text)]
    out.append(re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text))
    out.append(re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), text))
    for run in re.findall(r"[0-9a-fA-F]{14,}", text):
        for align in (0, 1):
            usable = (len(run) - align) // 2 * 2
            out.append(bytes.fromhex(run[align : align + usable]).decode("latin-1"))
    for run in re.findall(r"[A-Za-z0-9+/_-]{12,}", text):
        for align in range(4):
            chunk = run[align:]
            chunk = chunk[: len(chunk) // 4 * 4].replace("-", "+").replace("_", "/")
            try:
                out.append(base64.b64decode(chunk, validate=True).decode("latin-1"))
            except binascii.Error:
                continue
    return out


def key_forms_in(text: str) -> list[str]:
    """The pieces of the key found in ``text`` under any decoding (empty: none)."""
    folded = [_fold(d) for d in _decodings(text)]
    return sorted({n for f in folded for n in NEEDLES if n in f})


def test_the_search_finds_every_form_and_not_the_prefix() -> None:
    for name, form in FORMS.items():
        assert key_forms_in(f"a {form} b"), name
    assert key_forms_in("SELECT 'sk-p' || 'roj-' AS x -> sk-proj-") == []
    assert key_forms_in("[redacted] and [redacted]") == []


# ------------------------------------------------------------------ the model server


FILLER = "\u0177"  # y with circumflex: a letter no form holds


def _spelled(text: str) -> str:
    """A DuckDB expression that evaluates to ``text`` without spelling it in the answer: a
    letter no form holds after every third character, removed by ``replace``."""
    assert FILLER not in text
    assert "'" not in text
    hidden = FILLER.join(text[i : i + 3] for i in range(0, len(text), 3))
    return f"replace('{hidden}', '{FILLER}', '')"


def _answer(sql: str, summary: str = "s") -> str:
    plan = {k: [] for k in ("sources", "joins", "filters", "metrics", "steps", "risks")}
    doc = {"plan": {"grain": "one row", **plan}, "sql": sql, "summary": summary}
    return json.dumps({**doc, "assumptions": []}, ensure_ascii=False)


def _completion(content: str, model: str = "echo-model") -> bytes:
    message = {"role": "assistant", "content": content}
    doc = {
        "id": "c",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    return json.dumps(doc).encode()


PREFIX_SQL = "SELECT 'sk-p' || 'roj-' AS x"


def schedule() -> list[tuple[int, dict[str, str], bytes]]:
    """What the server answers, request by request: each form in a result cell, in an
    engine error, in the answer's own text, in a 500 error body; echoes in a request id
    header and a model name; and the vendor prefix alone."""
    out: list[tuple[int, dict[str, str], bytes]] = [(200, {}, _completion(_answer(PREFIX_SQL)))]
    for form in FORMS.values():
        out.append((200, {}, _completion(_answer(f"SELECT {_spelled(form)} AS x"))))
        out.append((200, {}, _completion(_answer(f"SELECT error({_spelled(form)}) AS x"))))
        out.append((200, {}, _completion(_answer("SELECT 1 AS n", summary=f"echo {form}"))))
        out.append((500, {}, f"upstream failed for key {form}".encode()))
    out.append((200, {"x-request-id": FORMS["hex"]}, _completion(_answer("SELECT 2 AS n"))))
    out.append((200, {}, _completion(_answer("SELECT 3 AS n"), model=FORMS["base64-1"])))
    return out


# ------------------------------------------------------------------ the run


@pytest.mark.slow
@pytest.mark.no_cover  # see pyproject.toml: repeats covered paths
def test_a_key_spelled_in_every_form_is_scrubbed_and_the_run_completes(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    home = fresh_home(tmp_path_factory, tmp_path)
    answers = schedule()
    attempts = -(-len(answers) // 7)  # sales-fixture has 7 cases; every answer used once
    answers += [(200, {}, _completion(_answer("SELECT 4 AS n")))] * (7 * attempts - len(answers))
    server = ChatServer(scheduled(answers))
    outputs: list[tuple[str, str]] = []
    try:
        done = cli(home, "run", "--bank", "sales-fixture", "--adapter", "openai",
                   "--base-url", server.url, "--model", "echo", "--api-key-env", "OPENAI_KEY",
                   "--run-id", "forms", "--attempts", str(attempts), "--retries", "0",
                   "--max-consecutive-failures", "0", env={"OPENAI_KEY": KEY})  # fmt: skip
    finally:
        server.close()
    outputs += [("run stdout", done.stdout), ("run stderr", done.stderr)]
    assert done.returncode == 0, done.stderr
    assert len(server.received) == 7 * attempts

    # Every planned attempt is scored; the run completed.
    recorded = [s.event() for s in stream(home, "forms")]
    finished = recorded[-1]
    assert isinstance(finished, events.RunFinished)
    assert finished.status == "completed"
    scored = {(e.case_id, e.attempt) for e in recorded if isinstance(e, events.ScoreComputed)}
    assert len(scored) == 7 * attempts
    assert not [e for e in recorded if isinstance(e, events.AttemptCancelled)]

    # The vendor prefix alone is no secret: the cell is kept as the SQL made it, and scored.
    parsed = {(e.case_id, e.attempt): e for e in recorded if isinstance(e, events.OutputParsed)}
    executed = {(e.case_id, e.attempt): e for e in recorded if isinstance(e, events.SqlExecuted)}
    [prefix_key] = [k for k, p in parsed.items() if p.sql == PREFIX_SQL]
    assert executed[prefix_key].rows == (("sk-proj-",),)
    assert executed[prefix_key].scrubbed is msgspec.UNSET
    assert prefix_key in scored
    # Each form spelled into a result cell or an engine error ran and was scrubbed there.
    spelled = [k for k, p in parsed.items() if p.sql and p.sql.startswith("SELECT replace(")]
    assert len(spelled) == len(FORMS)
    assert all(executed[k].ok and executed[k].scrubbed == 1 for k in spelled)
    errors = [k for k, p in parsed.items() if p.sql and p.sql.startswith("SELECT error(replace(")]
    assert len(errors) == len(FORMS)
    assert all("[redacted]" in (executed[k].error_message or "") for k in errors)

    # The scored evidence re-derives every score, and re-executing each SQL (which prints
    # the key again, unscrubbed) matches the stored rows with [redacted] standing for it.
    done = cli(home, "verify", "--recompute")
    assert done.returncode == 0, done.stdout + done.stderr
    outputs += [("verify stdout", done.stdout), ("verify stderr", done.stderr)]
    for fmt in ("json", "md", "html"):
        done = cli(home, "report", "--format", fmt)
        assert done.returncode == 0, done.stderr
        outputs.append((f"{fmt} report", done.stdout))
    for name, text in outputs:
        assert key_forms_in(text) == [], name
    files = [p for p in home.rglob("*") if p.is_file() and "banks" not in p.parts]
    assert home / "ledger.db" in files
    for path in files:
        text = path.read_bytes().decode("utf-8", errors="ignore")
        assert key_forms_in(text) == [], path.name
