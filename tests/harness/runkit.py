"""Helpers for the runner tests (imported by name, like tests/bank/banktest.py).

A template ledger with both built-in banks is made once per session through the
real CLI (``caseledger init``, ``bank publish``) and copied for each test, so
every test gets its own ledger, key and bank databases.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from support import made_once

from ledger import events
from ledger.store import Ledger, StoredEvent, link_of

# The installed console script, beside the interpreter running the tests.
CASELEDGER = [str(Path(sys.executable).parent / "caseledger")]


def cli(
    home: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``caseledger --ledger HOME/ledger.db ARGS`` in a real process."""
    return subprocess.run(
        [*CASELEDGER, "--ledger", str(home / "ledger.db"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd or home.parent,
        timeout=300,
        check=False,
    )


def spawn(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The same as ``cli`` but running in the background (to be killed or interrupted)."""
    return subprocess.Popen(
        [*CASELEDGER, "--ledger", str(home / "ledger.db"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=home.parent,
    )


def fresh_home(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    """A copy of the session's template ledger (both built-in banks published), made once
    for the whole session (``support.made_once``: shared by the test workers)."""

    def build(folder: Path) -> None:
        home = folder / "led"
        home.mkdir()
        for args in (["init"], ["bank", "publish", "sales-fixture"], ["bank", "publish", "retail"]):
            done = cli(home, *args)
            assert done.returncode == 0, done.stderr

    dest = tmp_path / "led"
    shutil.copytree(made_once(tmp_path_factory, "runkit-template", build) / "led", dest)
    return dest


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on: bound, read, closed (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bank_json(home: Path, name: str) -> dict[str, Any]:
    """``caseledger bank show NAME --with-reference --json`` (the stored bank files)."""
    done = cli(home, "bank", "show", name, "--with-reference", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def answer(sql: str) -> str:
    """A strict query-plan-v1 answer carrying ``sql``."""
    plan = {k: [] for k in ("sources", "joins", "filters", "metrics", "steps", "risks")}
    body = {"plan": {"grain": "one row per result", **plan}, "sql": sql, "summary": "s"}
    return json.dumps({**body, "assumptions": []}, ensure_ascii=False)


def fenced(sql: str) -> str:
    """The same answer inside one ```json fence (recoverable, 0 protocol points)."""
    return "```json\n" + answer(sql) + "\n```"


def stream(home: Path, run_id: str) -> list[StoredEvent]:
    """Every stored event of one run, in order."""
    with Ledger.open(home / "ledger.db", readonly=True) as ledger:
        return ledger.stream_events(run_id)


def head(home: Path) -> tuple[int, bytes]:
    """(number of events, chain hash of the last one): equal before and after = nothing appended."""
    with Ledger.open(home / "ledger.db", readonly=True) as ledger:
        return ledger.head()


def count_type(home: Path, tag: str) -> int:
    """Rows of one event type, read with plain sqlite while a writer may be running."""
    uri = (home / "ledger.db").resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=5)
    try:
        row = conn.execute("SELECT COUNT(*) FROM events WHERE type = ?", (tag,)).fetchone()
    finally:
        conn.close()
    return int(row[0])


# One letter per event kind; a complete attempt matches CHAIN.
_CODES = {
    events.PromptSent: "P",
    events.ModelResponded: "M",
    events.ProviderFailed: "F",
    events.OutputParsed: "O",
    events.SqlGuarded: "G",
    events.SqlExecuted: "E",
    events.ScoreComputed: "S",
    events.VariantChecked: "V",
}
# VariantChecked (diagnostics) follows the score only when the SQL executed.
CHAIN = re.compile(r"P(?:MOGE{1,2}SV?|MO(?:G)?S|FS)")


def _code(event: events.EventBase) -> str:
    if isinstance(event, events.AttemptCancelled):
        return "I" if event.reason == "interrupted" else "X"
    return _CODES[type(event)]


def check_attempts(
    stored: Sequence[StoredEvent], planned: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], list[events.EventBase]]:
    """Assert one complete, contiguous, never repeated evidence chain per planned attempt.

    An attempt may first have been cancelled as interrupted (any number of times);
    after that it has exactly one chain PromptSent, ModelResponded | ProviderFailed,
    [OutputParsed, [SqlGuarded, [SqlExecuted]]], ScoreComputed [, VariantChecked after an
    execution], whose events are
    consecutive in the run stream and whose ScoreComputed names exactly their links.
    Every PromptSent carries no text and names a PromptStored earlier in the stream;
    each distinct prompt is stored once (issue 22), also across resumes.
    Returns the chain of each attempt.
    """
    by_key: dict[tuple[str, int], list[tuple[StoredEvent, events.EventBase]]] = {}
    held: list[str] = []
    for item in stored:
        event = item.event()
        if isinstance(event, events.PromptStored):
            assert hashlib.sha256(event.prompt.encode()).hexdigest() == event.prompt_sha256[7:]
            held.append(event.prompt_sha256)
            continue
        if isinstance(event, events.RunStarted | events.RunFinished):
            continue
        if isinstance(event, events.PromptSent):
            assert event.prompt is msgspec.UNSET, f"{event.case_id}: prompt text inline"
            assert event.prompt_sha256 in held, f"{event.case_id}: prompt not stored before"
        by_key.setdefault((event.case_id, event.attempt), []).append((item, event))
    assert len(held) == len(set(held)), "a prompt was stored twice"
    assert sorted(by_key) == sorted(planned), "attempts in the stream differ from the plan"
    chains = {}
    for key, items in by_key.items():
        codes = "".join(_code(e) for _, e in items)
        assert re.fullmatch(r"I*" + CHAIN.pattern, codes), f"{key}: events {codes}"
        chain = [(s, e) for s, e in items if _code(e) != "I"]
        seqs = [e.stream_seq for _, e in chain]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), f"{key}: not one batch"
        if _code(chain[-1][1]) == "V":
            chain = chain[:-1]  # diagnostics after the score, not evidence of it
        links = tuple(link_of(s.leaf_hash) for s, _ in chain[:-1])
        score = chain[-1][1]
        assert isinstance(score, events.ScoreComputed)
        assert score.evidence == links
        chains[key] = [e for _, e in chain]
    return chains
