"""The report commands through click's CliRunner: report, runs, rebuild, rescore."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "projections"))
from report_testkit import build_real_ledger
from support import REPO

from ledger.cli import main
from ledger.merkle import root_hash
from ledger.store import Ledger


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_real_ledger(tmp_path_factory.mktemp("cli") / "home")


def run(ledger: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(ledger), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("command", ["report", "runs", "rebuild", "rescore"])
def test_help(command: str):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output


def test_runs_lines_and_json(ledger: Path):
    code, out, _ = run(ledger, "runs")
    assert code == 0
    # by hand, case means (weights 1): sf-01 (95+95+100)/3, sf-02 (100+100+0)/3,
    # sf-03 (5+100+100)/3 (a guard failure keeps the 5 protocol points), sf-04..06 100,
    # sf-07 (100+100+0)/3 -> 598.33/7 = 85.48; correct 18 of 21 = 0.8571
    # a header line, then one line per run, columns padded to their widest cell
    assert out.splitlines() == [
        "run        bank              adapter    profile    model  status     attempts  "
        "correct  score",
        "model-a    sales-fixture@v1  replay     model-a    -      completed  21/21     "
        "0.8571   85.48",
        "self-test  sales-fixture@v1  reference  reference  -      completed  7/7       "
        "1.0000   100.00",
    ]
    code, out, _ = run(ledger, "runs", "--json")
    rows = json.loads(out)
    assert [r["run"] for r in rows] == ["model-a", "self-test"]
    assert rows[0]["done"] == 21
    assert rows[0]["planned"] == 21
    # every key docs/cli.md names, and no other; no kill rate outside a calibration run
    assert [sorted(r) for r in rows] == [sorted(documented_runs_keys())] * 2
    assert [r["kill_rate"] for r in rows] == [None, None]


def documented_runs_keys() -> set[str]:
    """The keys docs/cli.md's ``runs`` section says ``runs --json`` prints."""
    text = (REPO / "docs" / "cli.md").read_text("utf-8")
    section = text[text.index("### `caseledger runs [") :]
    start = section.index("`--json` prints a JSON array of objects with the keys")
    keys = set(re.findall(r"`(\w+)`", section[start : section.index("Withdrawn runs", start)]))
    assert len(keys) == 15, keys  # the sentence was found whole
    return keys


def test_report_prints_the_tree_size_and_writes_the_file(ledger: Path, tmp_path: Path):
    with Ledger.open(ledger, readonly=True) as led:
        size = led.size()
    out = tmp_path / "r.md"
    code, stdout, stderr = run(ledger, "report", "--format", "md", "-o", str(out))
    assert code == 0
    assert stdout == ""
    assert stderr.startswith(f"report built at tree size {size}, root sha256:")
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# caseledger report\n")
    assert "## How to read this report" in text
    assert "Self-test (not ranked)" in text


def test_report_selection_and_errors(ledger: Path):
    code, out, _ = run(ledger, "report", "--run", "self-test")
    assert code == 0
    report = json.loads(out)
    assert [s["kind"] for s in report["sections"]] == ["self_test"]
    code, _, err = run(ledger, "report", "--run", "nope")
    assert code == 2
    assert "no run nope" in err
    code, _, err = run(ledger, "report", "--at-size", "999999")
    assert code == 2
    assert "out of range" in err
    code, out, _ = run(ledger, "report", "--at-size", "1")
    assert code == 0
    assert json.loads(out)["sections"] == []


def test_rebuild(ledger: Path):
    with Ledger.open(ledger, readonly=True) as opened:
        size, root = opened.size(), root_hash(opened.leaf_hashes())
    code, out, _ = run(ledger, "rebuild")
    assert code == 0
    assert f"replayed {size} events" in out
    assert f"root sha256:{root.hex()}" in out
    # nothing is written beside the ledger, and a store left by an earlier release is named
    stale = ledger.with_name(ledger.stem + ".projections.db")
    assert not stale.exists()
    stale.write_bytes(b"anything")
    code, out, _ = run(ledger, "rebuild")
    assert code == 0
    assert "nothing reads it now" in out


def test_missing_ledger_exits_2(tmp_path: Path):
    code, _, err = run(tmp_path / "none.db", "report")
    assert code == 2
    assert "no ledger" in err
