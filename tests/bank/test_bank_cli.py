"""`caseledger bank ...`: list, validate, publish, show, diff through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from banktest import edit
from click.testing import CliRunner

from ledger.cli import main


@pytest.fixture
def run(tmp_path: Path):
    ledger = tmp_path / "home" / "ledger.db"
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(main, ["--ledger", str(ledger), *args], catch_exceptions=False)

    return invoke


def test_validate_ok_and_error_exit_codes(run, tiny: Path) -> None:
    ok = run("bank", "validate", str(tiny))
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.startswith("ok: tiny@v1 sha256:")
    assert "(3 cases, 5 gold rows)" in ok.output
    edit(tiny, "cases.yaml", "weight: 1.5", "weight: -1")
    bad = run("bank", "validate", str(tiny))
    assert bad.exit_code == 2
    assert "cases.yaml:24: case tiny-02: field weight: must be > 0, got -1" in bad.output
    assert "Traceback" not in bad.output
    missing = run("bank", "validate", "no-such-bank")
    assert missing.exit_code == 2
    assert "neither a bank folder nor a built-in bank" in missing.output


def test_publish_show_list_diff(run, tiny: Path, tmp_path: Path) -> None:
    assert run("init").exit_code == 0
    first = run("bank", "publish", str(tiny))
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith("published: tiny@v1 sha256:")
    again = run("bank", "publish", str(tiny))
    assert again.stdout.startswith("already published: tiny@v1")

    listed = run("bank", "list")
    assert listed.exit_code == 0
    assert "published:\n  tiny@v1 " in listed.output
    assert "3 cases" in listed.output

    shown = run("bank", "show", "tiny@v1", "--json")
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert data["bank"] == "tiny"
    assert data["published_seq"] == 1
    assert [(c["id"], c["weight"], c["dimension"], c["difficulty"]) for c in data["cases"]] == [
        ("tiny-01", "1", "basic", "easy"),
        ("tiny-02", "1.5", "time_window", "medium"),
        ("tiny-03", "2", "joins_grain", "medium"),
    ]
    assert "reference_sql" not in data["cases"][0]
    assert "SELECT" not in shown.output
    with_ref = json.loads(run("bank", "show", "tiny", "--json", "--with-reference").output)
    assert with_ref["cases"][0]["reference_sql"].startswith("SELECT customer_id, name")
    text = run("bank", "show", "tiny").output
    assert text.splitlines()[0].endswith("(published at seq 1)")
    assert "tiny-02  time_window          medium         1.5  2026 年 9 月" in text

    edit(tiny, "cases.yaml", "weight: 1.5", "weight: 3")
    edit(tiny, "cases.yaml", "version: v1", "version: v2")
    diff = run("bank", "diff", "tiny@v1", str(tiny))
    assert diff.exit_code == 0, diff.output
    lines = diff.output.splitlines()
    assert "version: 'v1' -> 'v2'" in lines
    assert "file changed: cases.yaml" in lines
    assert "case changed: tiny-02 (weight)" in lines
    assert not any(line.startswith("file changed: seed.sql") for line in lines)
    as_json = json.loads(run("bank", "diff", "tiny@v1", str(tiny), "--json").output)
    assert as_json["cases"]["changed"] == {"tiny-02": ["weight"]}

    stale = run("bank", "show", "tiny@v9")
    assert stale.exit_code == 2
    assert "no published bank 'tiny@v9'" in stale.output
