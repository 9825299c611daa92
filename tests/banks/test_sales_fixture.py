"""Built-in bank sales-fixture v1: the acceptance method's literal numbers and every trap."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal as D

import pytest
from traps import TRAPS

from ledger.bank.publish import validate_bank
from ledger.bank.registry import builtin_banks
from ledger.harness.ast_rules import check_rules
from ledger.harness.guard import guard

BANK = "sales-fixture"

# The acceptance method's numbers (issue 3), plus the two cases added for the store master.
EXPECTED: dict[str, list[tuple]] = {
    "sf-01": [(3, D("600"))],  # 区域甲, last month, valid: S01 + S02 + S03
    "sf-02": [("门店A", D("300")), ("门店B", D("300")), ("合计", D("600"))],
    "sf-03": [(1, D("100"))],  # 人员甲: S01 only (S05 at the endpoint, S06 invalid)
    "sf-04": [(4, D("9600"))],  # all regions: S01..S04
    "sf-05": [(3, D("600"))],  # through the tag table: still 600
    "sf-06": [("区域甲", 3, D("600")), ("区域乙", 1, D("9000"))],
    "sf-07": [
        (1, "门店A", "区域甲", D("300")),
        (2, "门店B", "区域甲", D("300")),
        (3, "门店C", "区域甲", D("0")),  # the closed store
        (4, "门店C", "区域乙", D("9000")),
    ],
}

# Wrong answers the acceptance method names, as literal numbers: (case, trap) -> rows.
WRONG_LITERALS: dict[tuple[str, str], list[tuple]] = {
    ("sf-05", "plain_tag_join"): [(6, D("1100"))],
    ("sf-01", "plain_tag_join"): [(6, D("1100"))],
    ("sf-01", "missing_region"): [(4, D("9600"))],
    ("sf-01", "kept_right_endpoint"): [(4, D("1300"))],  # + S05
    ("sf-01", "kept_invalid"): [(4, D("1100"))],  # + S06
    ("sf-01", "utc_boundary"): [(3, D("1200"))],  # - S01 + S05
    ("sf-01", "creation_time"): [(3, D("1100"))],  # - S02 + S05
    ("sf-01", "store_name_join"): [(4, D("9600"))],  # S04 via the closed 门店C of 区域甲
    ("sf-03", "kept_right_endpoint"): [(2, D("800"))],
    ("sf-03", "kept_invalid"): [(2, D("600"))],
    ("sf-03", "utc_boundary"): [(1, D("700"))],
    ("sf-03", "creation_time"): [(2, D("800"))],
    ("sf-04", "store_name_join"): [(5, D("18600"))],
    ("sf-06", "store_name_join"): [("区域甲", 4, D("9600")), ("区域乙", 1, D("9000"))],
}

TRAP_PARAMS = [
    pytest.param(cid, name, sql, id=f"{cid}:{name}")
    for cid, traps in TRAPS.items()
    for name, sql in traps
]


@pytest.fixture(scope="module")
def fixture_bank(built_bank):
    return built_bank(BANK)


def test_identity(fixture_bank):
    assert (fixture_bank.bank.bank_id, fixture_bank.bank.version) == ("sales-fixture", "v1")
    assert set(EXPECTED) == set(fixture_bank.cases) == set(TRAPS)


def test_literal_rows_of_the_issue(fixture_bank):
    rows = fixture_bank.con.execute(
        "SELECT sale_id, region, store_name, salesperson, "
        "strftime(deal_time AT TIME ZONE 'Asia/Shanghai', '%Y-%m-%d %H:%M:%S'), amount, valid "
        "FROM sales ORDER BY sale_id"
    ).fetchall()
    assert rows == [
        ("S01", "区域甲", "门店A", "人员甲", "2026-09-01 00:00:00", D("100"), "Y"),
        ("S02", "区域甲", "门店A", "人员乙", "2026-09-30 23:59:59", D("200"), "Y"),
        ("S03", "区域甲", "门店B", "人员丙", "2026-09-15 12:00:00", D("300"), "Y"),
        ("S04", "区域乙", "门店C", "人员丁", "2026-09-15 12:00:00", D("9000"), "Y"),
        ("S05", "区域甲", "门店A", "人员甲", "2026-10-01 00:00:00", D("700"), "Y"),
        ("S06", "区域甲", "门店A", "人员甲", "2026-09-12 12:00:00", D("500"), "N"),
    ]
    tags = fixture_bank.con.execute(
        "SELECT sale_id, count(*) FROM sale_tags GROUP BY sale_id ORDER BY sale_id"
    ).fetchall()
    assert tags == [("S01", 2), ("S02", 3), ("S03", 1)]


def test_times_are_instants_with_a_real_shanghai_boundary(fixture_bank):
    con = fixture_bank.con
    s01 = con.execute("SELECT deal_time FROM sales WHERE sale_id = 'S01'").fetchone()[0]
    assert s01 == datetime(2026, 8, 31, 16, 0, tzinfo=UTC)  # August in UTC
    kind = con.execute("SELECT typeof(deal_time), typeof(created_at) FROM sales LIMIT 1")
    assert kind.fetchone() == ("TIMESTAMP WITH TIME ZONE", "TIMESTAMP WITH TIME ZONE")
    # creation month differs from deal month (Asia/Shanghai) for a counted and an uncounted sale
    moved = con.execute(
        "SELECT sale_id FROM sales WHERE date_trunc('month', deal_time AT TIME ZONE "
        "'Asia/Shanghai') <> date_trunc('month', created_at AT TIME ZONE 'Asia/Shanghai') "
        "ORDER BY sale_id"
    ).fetchall()
    assert moved == [("S02",), ("S05",)]


def test_store_master_has_a_closed_store_and_a_shared_name(fixture_bank):
    rows = fixture_bank.con.execute(
        "SELECT store_id, region, status FROM stores WHERE store_name = '门店C' ORDER BY store_id"
    ).fetchall()
    assert rows == [(3, "区域甲", "closed"), (4, "区域乙", "open")]
    s04 = fixture_bank.con.execute("SELECT store_id FROM sales WHERE sale_id = 'S04'").fetchone()
    assert s04 == (4,)


@pytest.mark.parametrize("cid", list(EXPECTED))
def test_gold_holds_the_literal_numbers(fixture_bank, cid):
    gold = fixture_bank.gold(cid)
    assert gold.multiset() == Counter(EXPECTED[cid])
    assert len(gold.rows) < fixture_bank.cases[cid].max_rows
    assert fixture_bank.judged_correct(cid, gold)


@pytest.mark.parametrize("cid", list(EXPECTED))
def test_reference_passes_guard_and_its_own_ast_rules(fixture_bank, cid):
    case = fixture_bank.cases[cid]
    verdict = guard(case.reference_sql, ["sales", "stores", "sale_tags"])
    assert verdict.passed, verdict.violations
    assert all(r.passed for r in check_rules(case.reference_sql, case.required_ast))


@pytest.mark.parametrize(("cid", "name", "sql"), TRAP_PARAMS)
def test_trap_gives_a_different_answer(fixture_bank, cid, name, sql):
    gold = fixture_bank.gold(cid)
    wrong = fixture_bank.run(sql)
    assert len(wrong.columns) == len(gold.columns), "a trap keeps the reference's shape"
    assert wrong.multiset() != gold.multiset()
    assert not fixture_bank.judged_correct(cid, wrong)
    if (cid, name) in WRONG_LITERALS:
        assert wrong.multiset() == Counter(WRONG_LITERALS[(cid, name)])


def test_named_traps_are_all_present():
    """Each trap the acceptance method names has a wrong query somewhere in TRAPS."""
    names = {name for traps in TRAPS.values() for name, _ in traps}
    assert {
        "plain_tag_join",
        "missing_region",
        "kept_right_endpoint",
        "kept_invalid",
        "utc_boundary",
        "creation_time",
        "store_name_join",
        "group_by_store_name",
    } <= names
    assert set(WRONG_LITERALS) <= {(cid, n) for cid, traps in TRAPS.items() for n, _ in traps}


def test_frozen_gold_carries_the_numbers(fixture_bank):
    """Publishing's gold (typed, encoded cells) holds the acceptance numbers."""
    checked = validate_bank(builtin_banks()[BANK])
    gold = {g.case_id: g for g in checked.fields["gold"]}

    def numbers(cid):
        return Counter(
            tuple(D(c) if isinstance(c, str) and c[0].isdigit() else c for c in row)
            for row in gold[cid].rows
        )

    for cid, rows in EXPECTED.items():
        assert numbers(cid) == Counter(rows), cid


def test_semantic_layer_states_the_frozen_time(fixture_bank):
    rules = json.loads(fixture_bank.bank.semantic_json)["business_rules"]
    assert any("2026-10-01 00:00:00" in r and "Asia/Shanghai" in r for r in rules)
    assert any("[2026-09-01 00:00:00, 2026-10-01 00:00:00)" in r for r in rules)
