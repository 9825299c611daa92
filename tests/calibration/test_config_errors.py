"""calibration.yaml of the wrong shapes (issue 14 item 6): each problem named with its line,
case and field, all of them in one BankError; and the file read again by load_calibration.

The line numbers are counted by hand in the YAML texts below (the first line is 1).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from calkit import FIXTURE, copy_bank

from ledger.bank.model import Bank, load_bank
from ledger.calibration.config import (
    CaseCalibration,
    Variant,
    load_calibration,
    parse_calibration,
)
from ledger.errors import BankError

HINT = "fix calibration.yaml (docs/calibration.md)"
ID_RULE = "[A-Za-z0-9][A-Za-z0-9_.-]*"


@pytest.fixture(scope="module")
def bank() -> Bank:
    return load_bank(FIXTURE)


WRONG_SHAPES = """\
variants:
  - just a string
  - id: "bad id!"
    description: d
    stale: maybe
    sql: DELETE FROM sales
  - id: v2
    description: d
    sql:
      - "DELETE FROM sales WHERE sale_id = 'S01'; DELETE FROM sales"
      - "UPDATE sales SET amount = random()"
cases:
  sf-01: [a]
  sf-02:
    non_interfering: [v2, v2]
    equivalent_mutants: {operator: remove_distinct}
  sf-03:
    alternative_sql: [""]
    equivalent_mutants:
      - just text
relations:
  - not a mapping
  - id: "r 1"
    measure: money
    total: [x]
    parts: {case: sf-01, column: "", where: [1], colour: red}
"""


def test_every_wrong_shape_is_named_with_its_line_case_and_field(bank: Bank) -> None:
    with pytest.raises(BankError) as info:
        parse_calibration(WRONG_SHAPES, bank)
    assert info.value.hint == HINT
    assert info.value.message.splitlines() == [
        "bank sales-fixture@v1 calibration.yaml: 18 problems",
        # variants: in file order, each field of an item in the order it is checked
        "  calibration.yaml:2: field variants.0: variant #1 must be a mapping with id, "
        "description and sql",
        f"  calibration.yaml:3: field variants.1.id: must match {ID_RULE}, got 'bad id!'",
        "  calibration.yaml:5: field variants.1.stale: must be true or false, got 'maybe'",
        "  calibration.yaml:6: field variants.1.sql: must be a list of non-empty strings",
        "  calibration.yaml:6: field variants.1.sql: must list at least one INSERT, UPDATE "
        "or DELETE statement",
        "  calibration.yaml:10: field variants.2.sql.0: variant v2: must be exactly one "
        "INSERT, UPDATE or DELETE",
        "  calibration.yaml:11: field variants.2.sql.1: variant v2: impure SQL: random() "
        "reads the clock, random numbers, files or the environment",
        # cases: the case is named apart from the field inside it
        "  calibration.yaml:13: case sf-01: must be a mapping",
        "  calibration.yaml:15: case sf-02: field non_interfering: a variant is listed twice",
        "  calibration.yaml:16: case sf-02: field equivalent_mutants: must be a list of "
        "{operator, reason}",
        "  calibration.yaml:18: case sf-03: field alternative_sql: must be a list of "
        "non-empty strings",
        "  calibration.yaml:20: case sf-03: field equivalent_mutants.0: must be a mapping "
        "with operator and reason",
        # relations
        "  calibration.yaml:22: field relations.0: must be a mapping with id, measure, "
        "total and parts",
        f"  calibration.yaml:23: field relations.1.id: must match {ID_RULE}, got 'r 1'",
        "  calibration.yaml:25: field relations.1.total: must be a mapping with case and column",
        "  calibration.yaml:26: field relations.1.parts.colour: unknown field (known: case, "
        "column, where, where_not)",
        "  calibration.yaml:26: field relations.1.parts.column: must name a result column",
        "  calibration.yaml:26: field relations.1.parts.where: must map result column "
        "names to values",
    ]


def test_sql_that_does_not_parse_is_named(bank: Bank) -> None:
    text = "variants:\n  - id: v1\n    description: d\n    sql: ['DELETE FROM sales WHERE (']\n"
    with pytest.raises(BankError) as info:
        parse_calibration(text, bank)
    head, problem = info.value.message.splitlines()
    assert head == "bank sales-fixture@v1 calibration.yaml: 1 problem"
    # sqlglot's own first line follows; ours is the place and the variant
    assert problem.startswith(
        "  calibration.yaml:4: field variants.0.sql.0: variant v1: does not parse: "
    )


def test_sections_of_the_wrong_type_and_an_unknown_section(bank: Bank) -> None:
    text = "variants: {}\ncases: []\nrelations: x\nextra: 1\n"
    with pytest.raises(BankError) as info:
        parse_calibration(text, bank)
    assert info.value.message.splitlines() == [
        "bank sales-fixture@v1 calibration.yaml: 4 problems",
        "  calibration.yaml:4: field extra: unknown field (known: variants, cases, relations)",
        "  calibration.yaml:1: field variants: must be a list of variants",
        "  calibration.yaml:2: field cases: must be a mapping from case id to its calibration",
        "  calibration.yaml:3: field relations: must be a list of relations",
    ]


def test_a_document_that_is_not_a_mapping_stops_at_once(bank: Bank) -> None:
    with pytest.raises(BankError) as info:
        parse_calibration("- variants\n- cases\n", bank)
    assert info.value.message == (
        "bank sales-fixture@v1 calibration.yaml: 1 problem\n"
        "  calibration.yaml:1: must be a mapping with variants, cases and relations"
    )
    assert info.value.hint == HINT


def test_an_empty_file_is_an_empty_calibration(bank: Bank) -> None:
    cal = parse_calibration("", bank)
    assert (cal.variants, cal.cases, cal.relations) == ((), {}, ())
    # the hash of the canonical form of the empty mapping: "{}" and a newline
    assert cal.sha256 == "sha256:" + hashlib.sha256(b"{}\n").hexdigest()
    assert cal.case("sf-01") == CaseCalibration()


def test_variants_are_found_by_id(bank: Bank) -> None:
    text = (
        "variants:\n"
        "  - id: v1\n"
        "    description: one more sale\n"
        "    stale: true\n"
        "    sql: [\"DELETE FROM sales WHERE sale_id = 'S01'\"]\n"
    )
    cal = parse_calibration(text, bank)
    assert cal.variant("v1") == Variant(
        "v1", "one more sale", ("DELETE FROM sales WHERE sale_id = 'S01'",), stale=True
    )
    with pytest.raises(KeyError):
        cal.variant("v2")


# ----------------------------------------------------------------- load_calibration


def test_a_file_changed_after_the_bank_was_read_is_refused(tmp_path: Path) -> None:
    folder = copy_bank(FIXTURE, tmp_path / "b", calibration="variants: []\n")
    bank = load_bank(folder)
    (folder / "calibration.yaml").write_text("relations: []\n", encoding="utf-8")
    with pytest.raises(BankError) as info:
        load_calibration(bank)
    assert info.value.message == (
        "bank sales-fixture@v1 calibration.yaml: 1 problem\n"
        "  calibration.yaml: changed while the bank was being read; run again"
    )


def test_a_file_turned_into_bad_utf8_after_the_bank_was_read_names_the_byte(
    tmp_path: Path,
) -> None:
    folder = copy_bank(FIXTURE, tmp_path / "b", calibration="variants: []\n")
    bank = load_bank(folder)
    # byte 14 (counted from 0) is the lone 0xff on line 2
    (folder / "calibration.yaml").write_bytes(b"variants: []\n#\xff\n")
    with pytest.raises(BankError) as info:
        load_calibration(bank)
    assert info.value.message == (
        "bank sales-fixture@v1 calibration.yaml: 1 problem\n"
        "  calibration.yaml:2: not valid UTF-8 (byte 14)"
    )


def test_a_file_removed_after_the_bank_was_read_is_no_calibration(tmp_path: Path) -> None:
    folder = copy_bank(FIXTURE, tmp_path / "b", calibration="variants: []\n")
    bank = load_bank(folder)
    (folder / "calibration.yaml").unlink()
    assert load_calibration(bank) is None
