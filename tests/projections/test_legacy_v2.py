"""Issue 22: a ledger written before prompts were stored once still verifies and renders.

tests/data/legacy-v2 was written by commit c9f356e (its README says how): every
PromptSent carries its prompt inline. Today's code must verify it (signatures,
checkpoint, and ``--recompute`` against the built-in bank files), list its run and
write the very report bytes that commit wrote (``reports.sha256``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from ledger_audit import EARLIER_RELEASE

from ledger.cli import main

LEGACY = Path(__file__).resolve().parents[1] / "data" / "legacy-v2"
BANK = Path(__file__).resolve().parents[2] / "ledger" / "banks" / "sales-fixture"


def cli(ledger: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(ledger), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def home(tmp_path: Path) -> Path:
    dst = tmp_path / "legacy"
    shutil.copytree(LEGACY, dst)
    return dst


def test_the_fixture_holds_inline_prompts_only() -> None:
    # immutable: a read of the checked-in file must not leave -shm/-wal files beside it
    conn = sqlite3.connect(f"file:{LEGACY / 'ledger.db'}?mode=ro&immutable=1", uri=True)
    try:
        kinds = dict(conn.execute("SELECT type, count(*) FROM events GROUP BY type").fetchall())
        bodies = [
            json.loads(b)
            for (b,) in conn.execute("SELECT body FROM events WHERE type = 'prompt.sent.v1'")
        ]
    finally:
        conn.close()
    assert sum(kinds.values()) == 103
    assert kinds["prompt.sent.v1"] == 14  # 7 cases x 2 attempts
    assert "prompt.stored.v1" not in kinds
    for body in bodies:
        digest = hashlib.sha256(body["prompt"].encode()).hexdigest()
        assert body["prompt_sha256"] == "sha256:" + digest


def test_it_verifies_with_its_checkpoint_and_recomputes(home: Path) -> None:
    path = home / "ledger.db"
    key = (home / "operator.pub").read_text().strip()
    code, out, err = cli(
        path, "verify", "--key", key, "--checkpoint", str(home / "checkpoint.note")
    )
    assert code == 0, err
    assert out.startswith("verified: 103 events, 2 streams, 1 signers; ")
    assert "signatures seq 0-102 event/v2 (content and place)" in out
    banks = home / "banks"
    shutil.copytree(BANK, banks / "sales-fixture@v1")
    code, out, err = cli(path, "verify", "--recompute", "--banks", str(banks), "--key", key)
    assert code == 0, err
    assert "14 scores re-derived; 14 executions re-run, 14 equal" in out


@EARLIER_RELEASE
def test_runs_lists_its_run(home: Path) -> None:
    code, out, err = cli(home / "ledger.db", "runs")
    assert code == 0, err
    assert out.splitlines()[1].split() == [
        "reference-0001",
        "sales-fixture@v1",
        "reference",
        "reference",
        "-",
        "completed",
        "14/14",
        "1.0000",
        "100.00",
    ]


@EARLIER_RELEASE
def test_its_reports_have_the_bytes_that_commit_wrote(home: Path) -> None:
    digests = {}
    for line in (home / "reports.sha256").read_text().splitlines():
        digest, name = line.split()
        digests[name] = digest
    for fmt in ("json", "md", "html"):
        # That commit wrote caseledger-report/1: `--detail full` since issue 21.
        code, out, err = cli(home / "ledger.db", "report", "--format", fmt, "--detail", "full")
        assert code == 0, err
        assert hashlib.sha256(out.encode()).hexdigest() == digests[f"report.{fmt}"], fmt
    # `--detail compact` (caseledger-report/2; the default before issue 32 made it /3).
    md = cli(home / "ledger.db", "report", "--format", "md", "--detail", "compact")[1]
    assert (home / "report.md").read_text() == md
