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

# The verdict of every trap, stated by hand: none is result_correct (each executes and its
# rows differ from gold), and the score the real path must give it, derived from DESIGN.md's
# table. Every trap passes the guard, executes and keeps gold's column names in gold's order:
# protocol 5 + guard 5 + executed 10 + column count 5 + names 5 = 30; order 0 (F1 < 1); AST 15
# (sf-01/03/04/05 have no rules; the sf-02/06/07 traps keep GROUP BY and the LEFT JOIN).
# So total = 45 + 45 x F1, F1 = 2 matched / (expected + actual) from the rows worked out below.
SINGLE_ROW = "45.00"  # one wrong row against one gold row: 0 matched, F1 = 0
TRAP_TOTALS: dict[tuple[str, str], str] = {
    **{
        (cid, name): SINGLE_ROW
        for cid in ("sf-01", "sf-03", "sf-04", "sf-05")
        for name, _ in TRAPS[cid]
    },
    # sf-02 gold: 门店A 300, 门店B 300, 合计 600
    ("sf-02", "plain_tag_join"): "60.00",  # A 800 (S01 x2, S02 x3), B 300, 合计 1100: F1 = 1/3
    ("sf-02", "missing_region"): "70.71",  # + 门店C 9000, 合计 9600: 2 of 4 vs 3, F1 = 4/7
    ("sf-02", "no_total_row"): "81.00",  # A 300, B 300: 2 of 2 vs 3, F1 = 0.8
    ("sf-02", "kept_invalid"): "60.00",  # A 800 (+ S06), B 300, 合计 1100: F1 = 1/3
    ("sf-02", "utc_boundary"): "60.00",  # A 900 (S02 + S05), B 300, 合计 1200: F1 = 1/3
    # sf-06 gold: 区域甲 3 600, 区域乙 1 9000
    ("sf-06", "store_name_join"): "67.50",  # 区域甲 4 9600, 乙 right: F1 = 1/2
    ("sf-06", "kept_invalid"): "67.50",  # 区域甲 4 1100, 乙 right: F1 = 1/2
    ("sf-06", "utc_boundary"): "67.50",  # 区域甲 3 1200 (S02 S03 S05), 乙 right: F1 = 1/2
    # sf-07 gold: (1 A 甲 300) (2 B 甲 300) (3 C 甲 0) (4 C 乙 9000)
    # MIN('区域甲', '区域乙') is 区域乙 (U+4E59 < U+7532): (3 C 乙 9000); 2 of 3 vs 4: F1 = 4/7
    ("sf-07", "group_by_store_name"): "70.71",
    ("sf-07", "store_name_join"): "78.75",  # store 3 gets 9000 too: 3 of 4, F1 = 3/4
    ("sf-07", "filter_in_where_drops_empty_store"): "83.57",  # store 3 gone: 3 of 3 vs 4, 6/7
    ("sf-07", "utc_boundary"): "78.75",  # A 900: 3 of 4, F1 = 3/4
}

TRAP_PARAMS = [
    pytest.param(cid, name, sql, id=f"{cid}:{name}")
    for cid, traps in TRAPS.items()
    for name, sql in traps
]

_SF01 = (
    "FROM sales WHERE region = '区域甲' AND valid = 'Y' "
    "AND deal_time >= TIMESTAMPTZ '2026-09-01 00:00:00+08:00' "
    "AND deal_time < TIMESTAMPTZ '2026-10-01 00:00:00+08:00'"
)

# Answers that are not traps, each judged by hand from DESIGN.md's result_correct rule
# (executed, column count, rows F1 = 1, order; names and AST not required) and its score table.
REWRITES = [
    pytest.param(
        "sf-01",
        f"SELECT SUM(amount) AS amount, COUNT(*) AS order_count {_SF01}",
        True,
        "95.00",  # columns reordered to gold's by name; the names item (5) needs gold's order
        id="sf-01:columns_permuted",
    ),
    pytest.param(
        "sf-01",
        f"SELECT COUNT(*) AS n, SUM(amount) AS total {_SF01}",
        True,
        "95.00",  # aligned by values (BIGINT 3 vs DECIMAL 600 fingerprints); names item lost
        id="sf-01:columns_renamed",
    ),
    pytest.param(
        "sf-01",
        f"SELECT COUNT(*) AS order_count, CAST(SUM(amount) AS DOUBLE) AS amount {_SF01}",
        True,
        "100.00",  # 600.0 (DOUBLE) equals 600.00 (DECIMAL): numbers compare by value
        id="sf-01:amount_as_double",
    ),
    pytest.param(
        "sf-01",
        f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount, 1 AS extra {_SF01}",
        False,
        "35.00",  # 3 columns vs 2: no mapping, rows/names/count/order 0; 5 + 5 + 10 + AST 15
        id="sf-01:extra_column",
    ),
    pytest.param(
        "sf-04",
        "SELECT COUNT(*) AS order_count, SUM(amount) + 0.01 AS amount FROM sales "
        "WHERE valid = 'Y' AND deal_time >= TIMESTAMPTZ '2026-09-01 00:00:00+08:00' "
        "AND deal_time < TIMESTAMPTZ '2026-10-01 00:00:00+08:00'",
        False,
        "45.00",  # 9600.01 vs 9600.00 with tolerance 0: the one row differs, F1 = 0
        id="sf-04:one_cent_off",
    ),
    pytest.param(
        "sf-07",
        "SELECT st.store_id, st.store_name, st.region, COALESCE(SUM(s.amount), 0) AS amount "
        "FROM stores AS st LEFT JOIN sales AS s ON s.store_id = st.store_id AND s.valid = 'Y' "
        "AND s.deal_time >= TIMESTAMPTZ '2026-09-01 00:00:00+08:00' "
        "AND s.deal_time < TIMESTAMPTZ '2026-10-01 00:00:00+08:00' "
        "GROUP BY st.store_id, st.store_name, st.region ORDER BY amount DESC, st.store_id DESC",
        True,
        "100.00",  # rows in another order: the case says order does not matter
        id="sf-07:other_row_order",
    ),
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
    judged = fixture_bank.judge(cid, fixture_bank.cases[cid].reference_sql)
    assert (judged.result_correct, judged.total) == (True, D("100.00"))


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
    if (cid, name) in WRONG_LITERALS:
        assert wrong.multiset() == Counter(WRONG_LITERALS[(cid, name)])
    judged = fixture_bank.judge(cid, sql)
    assert judged.error_kind is None, judged.message  # guarded, executed: a wrong result
    assert (judged.result_correct, judged.total) == (False, D(TRAP_TOTALS[(cid, name)]))


def test_every_trap_has_a_hand_derived_total():
    assert set(TRAP_TOTALS) == {(cid, name) for cid, traps in TRAPS.items() for name, _ in traps}


@pytest.mark.parametrize(("cid", "sql", "correct", "total"), REWRITES)
def test_rewrite_verdicts_stated_by_hand(fixture_bank, cid, sql, correct, total):
    judged = fixture_bank.judge(cid, sql)
    assert judged.error_kind is None, judged.message
    assert (judged.result_correct, judged.total) == (correct, D(total))


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
