"""`bank publish --check-relations`: broken metamorphic relations exit 1 and publish nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from ledger.bank.registry import builtin_banks
from ledger.cli import main
from ledger.store import Ledger


def _init(tmp_path: Path) -> Path:
    ledger = tmp_path / "home" / "ledger.db"
    result = CliRunner().invoke(main, ["--ledger", str(ledger), "init"])
    assert result.exit_code == 0, result.output
    return ledger


def test_relations_hold_for_the_built_in_fixture(tmp_path: Path) -> None:
    ledger = _init(tmp_path)
    result = CliRunner().invoke(
        main, ["--ledger", str(ledger), "bank", "publish", "sales-fixture", "--check-relations"]
    )
    assert result.exit_code == 0, result.output
    assert "relations hold" in result.output
    assert "published: sales-fixture@v1" in result.output


def test_a_broken_relation_exits_1_and_publishes_nothing(tmp_path: Path) -> None:
    ledger = _init(tmp_path)
    folder = tmp_path / "fixture"
    shutil.copytree(builtin_banks()["sales-fixture"], folder)
    cal = folder / "calibration.yaml"
    text = cal.read_text("utf-8")
    # region 甲's amount (600) is not the sum of every region's amount (600 + 9000)
    broken = text.replace(
        "    total: {case: sf-04, column: amount}\n    parts: {case: sf-06, column: amount}",
        "    total: {case: sf-01, column: amount}\n    parts: {case: sf-06, column: amount}",
        1,
    )
    assert broken != text
    cal.write_text(broken, "utf-8")
    with Ledger.open(ledger, readonly=True) as opened:
        before = opened.size()
    result = CliRunner().invoke(
        main, ["--ledger", str(ledger), "bank", "publish", str(folder), "--check-relations"]
    )
    assert result.exit_code == 1, result.output
    assert "relation broken" in result.output
    assert "regions-add-up-amount" in result.output
    assert "nothing was published" in result.output
    with Ledger.open(ledger, readonly=True) as opened:
        assert opened.size() == before
