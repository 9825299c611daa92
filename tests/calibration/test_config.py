"""calibration.yaml: a valid file loads with its own hash; every problem names file, line,
case and field; the bank hash ignores the calibration file."""

from __future__ import annotations

from pathlib import Path

import pytest
from calkit import FIXTURE, RETAIL, copy_bank

from ledger.bank.model import load_bank
from ledger.calibration.config import load_calibration, parse_calibration
from ledger.errors import BankError


def test_builtin_calibrations_load() -> None:
    for folder in (FIXTURE, RETAIL):
        bank = load_bank(folder)
        cal = load_calibration(bank)
        assert cal is not None
        assert cal.sha256 == bank.source.calibration_sha256
        assert any(v.stale for v in cal.variants)
        assert all(c.alternative_sql or c.equivalent_mutants or c.non_interfering
                   for c in cal.cases.values())  # fmt: skip


def test_fixture_has_the_variants_the_issue_names() -> None:
    cal = load_calibration(load_bank(FIXTURE))
    assert cal is not None
    assert {"third-region", "more-tags", "region-yi-changed"} <= {v.id for v in cal.variants}
    assert "third-region" in cal.case("sf-01").non_interfering


def test_calibration_changes_never_change_the_bank_hash(tmp_path: Path) -> None:
    a = copy_bank(FIXTURE, tmp_path / "a", calibration=None)
    b = copy_bank(FIXTURE, tmp_path / "b", calibration="variants: []\n")
    bank_a, bank_b = load_bank(a), load_bank(b)
    assert bank_a.content_sha256 == bank_b.content_sha256
    assert load_calibration(bank_a) is None
    cal = load_calibration(bank_b)
    assert cal is not None
    assert cal.variants == ()


BAD = """\
variants:
  - id: v1
    description: ok
    sql:
      - SELECT 1
  - id: v1
    description: ''
    sql:
      - INSERT INTO sales SELECT * FROM read_csv('x.csv')
cases:
  sf-01:
    non_interfering: [nope]
    equivalent_mutants:
      - operator: no_such_operator
        reason: because
      - operator: join_type_swap#x
        reason: ''
    alternate_sql: []
  sf-99: {}
relations:
  - id: r1
    measure: ratio
    total: {case: sf-01, column: amount}
    parts: {case: sf-00, column: amount}
"""


def test_every_problem_is_named_with_line_case_and_field() -> None:
    bank = load_bank(FIXTURE)
    with pytest.raises(BankError) as info:
        parse_calibration(BAD, bank)
    text = info.value.message
    expected = [
        "calibration.yaml:5: field variants.0.sql.0: variant v1: must be exactly one INSERT",
        "calibration.yaml:6: field variants.1.id: duplicate variant id 'v1'",
        "calibration.yaml:7: field variants.1.description: must be a non-empty string",
        "calibration.yaml:9: field variants.1.sql.0: variant v1:",
        "calibration.yaml:12: case sf-01: field non_interfering.0: no variant 'nope'",
        "calibration.yaml:14: case sf-01: field equivalent_mutants.0.operator: unknown operator "
        "'no_such_operator'",
        "calibration.yaml:16: case sf-01: field equivalent_mutants.1.operator: unknown operator "
        "'join_type_swap#x'",
        "calibration.yaml:17: case sf-01: field equivalent_mutants.1.reason: must say why",
        "calibration.yaml:18: case sf-01: field alternate_sql: unknown field",
        "calibration.yaml:19: case sf-99: no such case in bank sales-fixture@v1",
        "calibration.yaml:22: field relations.0.measure: must be one of money, count",
        "calibration.yaml:24: field relations.0.parts.case: no such case 'sf-00'",
    ]
    for line in expected:
        assert line in text, f"missing: {line}\n--- got:\n{text}"


def test_yaml_syntax_error_names_the_line() -> None:
    with pytest.raises(BankError, match=r"calibration.yaml:3: YAML syntax error"):
        parse_calibration("variants:\n  - id: [\n", load_bank(FIXTURE))
