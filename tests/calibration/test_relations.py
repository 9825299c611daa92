"""Metamorphic checks of gold: partition sums and non-interference, on real builds."""

from __future__ import annotations

from pathlib import Path

import pytest
from calkit import FIXTURE, RETAIL, copy_bank

from ledger.bank.model import load_bank
from ledger.calibration.config import load_calibration
from ledger.calibration.relations import check_relations

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("folder", [FIXTURE, RETAIL], ids=["sales-fixture", "retail"])
def test_builtin_relations_hold(folder: Path, tmp_path: Path) -> None:
    bank = load_bank(folder)
    assert check_relations(bank, load_calibration(bank), cache_dir=tmp_path) == []


BROKEN = """
variants:
  - id: touches-region-a
    description: changes a region 甲 sale although declared outside the scope
    sql:
      - UPDATE sales SET amount = 250.00 WHERE sale_id = 'S02'
cases:
  sf-01:
    non_interfering: [touches-region-a]
relations:
  - id: distinct-looking
    measure: count
    total: {case: sf-04, column: order_count}
    parts: {case: sf-01, column: order_count}
  - id: missing-column
    measure: money
    total: {case: sf-04, column: yuan}
    parts: {case: sf-06, column: amount}
"""


def test_broken_relations_and_interfering_variants_are_reported(tmp_path: Path) -> None:
    folder = copy_bank(FIXTURE, tmp_path / "bank", calibration=BROKEN)
    bank = load_bank(folder)
    problems = [str(p) for p in check_relations(bank, load_calibration(bank))]
    # sf-04 counts 4 valid September sales; sf-01 only region 甲's 3.
    assert (
        "calibration.yaml: case sf-04: field relations: relation distinct-looking (count): "
        "sf-01.order_count adds up to 3, but sf-04.order_count is 4"
    ) in problems
    assert any("relation missing-column: case sf-04 has no column 'yuan'" in p for p in problems)
    assert any(
        p.startswith("calibration.yaml: case sf-01: field non_interfering: variant "
                     "touches-region-a is declared non_interfering but changes the gold")
        for p in problems
    )  # fmt: skip
    assert len(problems) == 3
