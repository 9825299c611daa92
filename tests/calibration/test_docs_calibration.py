"""docs/calibration.md stays in step with the code: operators, event tags, the YAML example."""

from __future__ import annotations

import re

from calkit import FIXTURE

from ledger.bank.model import load_bank
from ledger.bank.registry import REPO_ROOT as REPO
from ledger.calibration.config import parse_calibration
from ledger.calibration.operators import OPERATORS
from ledger.events import (
    CalibrationControlChecked,
    CalibrationFinished,
    CalibrationMutantJudged,
    VariantChecked,
    tag_of,
)

DOC = (REPO / "docs" / "calibration.md").read_text(encoding="utf-8")


def test_every_operator_is_documented_with_its_pattern() -> None:
    for op in OPERATORS:
        assert f"| `{op.name}` | {op.pattern} |" in DOC, op.name


def test_every_calibration_event_tag_is_documented() -> None:
    for cls in (CalibrationMutantJudged, CalibrationControlChecked, CalibrationFinished,
                VariantChecked):  # fmt: skip
        assert f"`{tag_of(cls)}`" in DOC


def test_the_yaml_example_is_a_valid_calibration_of_the_fixture() -> None:
    block = re.search(r"```yaml\n(.*?)```", DOC, re.S)
    assert block is not None
    cal = parse_calibration(block.group(1), load_bank(FIXTURE))
    assert [v.id for v in cal.variants] == ["third-region"]
    assert cal.case("sf-01").equivalent_mutants[0].operator == "join_type_swap"
