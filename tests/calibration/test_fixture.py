"""Issue 9 "What it must show" 1-3 on the sales fixture: named mutants killed, controls pass,
a weakened fixture shows survivors that variants kill, and the scope_leak flag."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from calkit import FIXTURE, copy_bank, run_calibration

from ledger.bank.build import build_database
from ledger.bank.model import load_bank
from ledger.calibration.calibrate import CalibrationResult, MutantRecord, read_gold
from ledger.calibration.config import load_calibration
from ledger.calibration.diagnostics import VariantDiagnostics
from ledger.calibration.operators import OPERATORS
from ledger.calibration.oracle import Oracle
from ledger.calibration.report import format_text, report_dict
from ledger.codec import encode
from ledger.events import VariantChecked

pytestmark = pytest.mark.slow


def record(result: CalibrationResult, case: str, mutant: str) -> MutantRecord:
    return next(m for m in result.mutants if m.mutant.case_id == case and m.mutant.id == mutant)


def base_rows(rec: MutantRecord) -> list[list[object]]:
    result = rec.verdicts[0].result
    assert rec.verdicts[0].database == "base"
    assert result is not None
    return sorted(list(r) for r in result.rows)


# Base results worked out by hand from the seed rows S01..S06 (acceptance method table).
NAMED = [
    # the plain tag join: S01 twice, S02 three times, S03 once
    ("sf-05", "one_to_many_join#0", "EXISTS", [[6, "1100.00"]]),
    # the missing region filter: S04's 9000 joins region 甲's 600
    ("sf-01", "drop_scope_predicate#0", "region", [[4, "9600.00"]]),
    # the kept right endpoint: S05 (700) at 2026-10-01 00:00 +08:00
    ("sf-01", "move_range_endpoint#0", "<=", [[4, "1300.00"]]),
    # the kept invalid sale: S06 (500, valid N)
    ("sf-01", "drop_validity_predicate#0", "valid", [[4, "1100.00"]]),
    # creation time: S02 was entered in October, S05 in September
    ("sf-01", "time_column_swap#0", "created_at", [[3, "1100.00"]]),
    # by store name: S04's 门店C also matches the closed 门店C of region 甲
    (
        "sf-06",
        "join_key_swap#0",
        "store_name",
        [["区域乙", 1, "9000.00"], ["区域甲", 4, "9600.00"]],
    ),
]


@pytest.mark.parametrize(("case", "mutant", "marker", "rows"), NAMED, ids=[n[1] for n in NAMED])
def test_named_mutants_are_killed_on_the_base_database(
    fixture_result: CalibrationResult, case: str, mutant: str, marker: str, rows: list[list[object]]
) -> None:
    rec = record(fixture_result, case, mutant)
    assert rec.status == "killed"
    assert "base" in rec.killed_by
    assert marker in (rec.mutant.sql or "") or marker in rec.reason
    assert base_rows(rec) == rows


def test_patterns_one_to_six_and_one_to_many_are_all_killed(
    fixture_result: CalibrationResult,
) -> None:
    core = ("1", "2", "3", "4", "5", "6")
    judged = [
        m
        for m in fixture_result.mutants
        if m.status not in ("not_applicable", "unsupported")
        and (m.mutant.operator == "one_to_many_join" or m.mutant.operator in _by_pattern(core))
    ]
    assert len(judged) >= 40
    assert {m.status for m in judged} == {"killed"}
    assert fixture_result.kill_rate == Decimal("1.0000")
    assert fixture_result.survivors == ()


def _by_pattern(patterns: tuple[str, ...]) -> set[str]:
    return {op.name for op in OPERATORS if op.pattern in patterns}


def test_two_differently_written_correct_queries_pass(fixture_result: CalibrationResult) -> None:
    sf01 = [c for c in fixture_result.controls if c.case_id == "sf-01"]
    assert len(sf01) == 2
    assert sf01[0].sql != sf01[1].sql
    assert all(c.passed for c in sf01)
    assert all(len(c.verdicts) == 6 for c in sf01)  # base and five variants
    assert fixture_result.controls_passed == len(fixture_result.controls)
    assert fixture_result.passed


def test_pattern_eight_is_not_applicable_with_its_reason(fixture_result: CalibrationResult) -> None:
    eight = [m for m in fixture_result.mutants if m.mutant.operator == "changed_answer_number"]
    assert len(eight) == 7
    assert {(m.status, m.reason) for m in eight} == {
        ("not_applicable", "answers are not checked yet")
    }


WEAKEN = (
    "DELETE FROM sale_tags WHERE (sale_id, tag) IN "
    "(('S01', '促销'), ('S02', '促销'), ('S02', '会员'));\n"
    "DELETE FROM sales WHERE region = '区域乙';\n"
    "DELETE FROM stores WHERE region = '区域乙';"
)
VARIANTS_BACK = """
variants:
  - id: second-tag
    description: S01 gets its second tag back.
    sql:
      - INSERT INTO sale_tags VALUES ('S01', '促销')
  - id: region-yi
    description: Region 乙 comes back with its store and its large sale.
    sql:
      - INSERT INTO stores VALUES (4, '门店C', '区域乙', 'open')
      - >-
        INSERT INTO sales VALUES ('S04', '区域乙', 4, '门店C', '人员丁',
        TIMESTAMPTZ '2026-09-15 12:00:00+08:00', TIMESTAMPTZ '2026-09-15 12:04:00+08:00',
        9000.00, 'Y')
"""
BLIND_SPOTS = [
    ("sf-05", "one_to_many_join#0", "second-tag"),
    ("sf-01", "drop_scope_predicate#0", "region-yi"),
    ("sf-06", "join_key_swap#0", "region-yi"),
]


def test_weakened_fixture_shows_survivors_and_variants_kill_them(tmp_path: Path) -> None:
    weak = copy_bank(FIXTURE, tmp_path / "weak", calibration=None, seed_extra=WEAKEN)
    _, before = run_calibration(weak, tmp_path / "w1")
    survivors = {(m.mutant.case_id, m.mutant.id) for m in before.survivors}
    text = format_text(before)
    named = {(s["case"], s["mutant"]) for s in report_dict(before)["survivors"]}
    for case, mutant, _ in BLIND_SPOTS:
        assert (case, mutant) in survivors
        assert (case, mutant) in named
        assert f"- {case} {mutant}:" in text
    assert before.kill_rate is not None
    assert before.kill_rate < Decimal(1)

    (weak / "calibration.yaml").write_text(VARIANTS_BACK, encoding="utf-8")
    _, after = run_calibration(weak, tmp_path / "w2")
    for case, mutant, variant in BLIND_SPOTS:
        rec = record(after, case, mutant)
        assert rec.status == "killed"
        assert rec.killed_by == (variant,)  # the base snapshot still hides it
    assert after.kill_rate is not None
    assert after.kill_rate > before.kill_rate


EXCLUDING = """SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales
WHERE region <> '区域乙' AND valid = 'Y'
  AND deal_time >= TIMESTAMPTZ '2026-09-01 00:00:00+08:00'
  AND deal_time < TIMESTAMPTZ '2026-10-01 00:00:00+08:00'"""
SELECTING = EXCLUDING.replace("region <> '区域乙'", "region = '区域甲'")


def test_scope_leak_flags_the_excluding_query_only(tmp_path: Path) -> None:
    bank = load_bank(FIXTURE)
    calibration = load_calibration(bank)
    assert calibration is not None
    db = tmp_path / "base.duckdb"
    build_database(bank, db)
    case = next(c for c in bank.cases if c.id == "sf-01")
    gold = read_gold(bank, db)["sf-01"]
    with VariantDiagnostics(bank, calibration, db, tmp_path / "variants") as diag:
        # The attempt's own base execution, as the runner records it before the diagnostics.
        with Oracle({"base": db}, frozenset({"sales", "stores", "sale_tags"})) as oracle:
            excl = oracle.judge(case, EXCLUDING, "base", gold)
            sel = oracle.judge(case, SELECTING, "base", gold)
        # calibration never changes a score: both answers score the same on the base database
        assert excl.result_correct is True
        assert sel.result_correct is True
        assert excl.total == sel.total == Decimal("100.00")
        assert excl.result is not None
        assert sel.result is not None
        leak = diag.check(case, EXCLUDING, excl.result)
        clean = diag.check(case, SELECTING, sel.result)
    assert "scope_leak" in leak.flags
    moved = {o.variant_id for o in leak.outcomes if o.moved}
    assert "third-region" in moved
    assert clean.flags == ()
    event = VariantChecked(
        stream="run-1", stream_seq=9, stream_prev=None, at="2026-12-02T10:00:00.000000Z",
        case_id="sf-01", attempt=1, **leak.event_fields(),
    )  # fmt: skip
    assert b'"scope_leak"' in encode(event)
