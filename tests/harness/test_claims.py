"""The answer contract (issue 19): claims read from a summary, checked against a result.

Every table below is the result of a sales-fixture case as the acceptance method works
it out by hand (seed 002): 区域甲 last month = 3 orders / 600 yuan; by store 门店A 300,
门店B 300, total 600; every region = 4 orders / 9,600 yuan; the plain tag join = 6 / 1,100.
The composition-effect table is sales-fixture v2's sf-08: 门店A 80/100 -> 9/10, 门店B
10/100 -> 40/200, both stores 90/200 = 0.45 -> 49/210 = 0.2333. Each verdict is written
beside its summary, worked out from these numbers, not from the checker's output.
"""

from __future__ import annotations

import random
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.harness.claims import (
    CONTRADICTED,
    SUPPORTED,
    UNVERIFIABLE,
    Table,
    check_summary,
)

S, C, U = SUPPORTED, CONTRADICTED, UNVERIFIABLE

SF01 = Table((("order_count", "BIGINT"), ("amount", "DECIMAL(38,2)")), ((3, "600.00"),))
SF04 = Table((("order_count", "BIGINT"), ("amount", "DECIMAL(38,2)")), ((4, "9600.00"),))
TAG_JOIN = Table((("order_count", "BIGINT"), ("amount", "DECIMAL(38,2)")), ((6, "1100.00"),))
SF02 = Table(
    (("store_name", "VARCHAR"), ("amount", "DECIMAL(38,2)")),
    (("门店A", "300.00"), ("门店B", "300.00"), ("合计", "600.00")),
)
SIMPSON = Table(
    (("store_name", "VARCHAR"), ("rate_2026_08", "DOUBLE"), ("rate_2026_09", "DOUBLE")),
    (("门店A", "0.8", "0.9"), ("门店B", "0.1", "0.2"), ("合计", "0.45", "0.2333")),
)

# one period only: 门店A 9/10, 门店B 40/200
RATES = Table((("store_name", "VARCHAR"), ("rate", "DOUBLE")), (("门店A", "0.9"), ("门店B", "0.2")))


def verdicts(summary: str, table: Table) -> list[tuple[str, str, str]]:
    return [(c.kind, c.reading, c.verdict) for c in check_summary(summary, table)]


# (summary, table, [(kind, reading, verdict)]) -- the verdict beside each claim by hand.
THREE_600 = [("number", "3 orders", S), ("number", "600 yuan", S)]
CASES = [
    # SQL-01: 3 orders / 600 yuan
    (
        "上个月区域甲有效销售3单，共600元。",
        SF01,
        [("number", "3 orders", S), ("number", "600 yuan", S)],
    ),
    (
        "There were 3 orders worth 600 yuan.",
        SF01,
        [("number", "3 orders", S), ("number", "600 yuan", S)],
    ),
    ("共4单，9,600元", SF01, [("number", "4 orders", C), ("number", "9600 yuan", C)]),
    ("共4单，9,600元", SF04, [("number", "4 orders", S), ("number", "9600 yuan", S)]),
    (
        "4 orders, 9600 yuan in total",
        SF04,
        [("number", "4 orders", S), ("number", "9600 yuan (total)", S)],
    ),
    # decoys: Chinese numerals and unit prefixes are documented forms -> supported
    ("三单，六百元", SF01, THREE_600),
    ("销售额0.6 千元", SF01, [("number", "600 yuan", S)]),
    ("销售额0.06万元", SF01, [("number", "600 yuan", S)]),
    ("九千六百元", SF04, [("number", "9600 yuan", S)]),
    # forms the extractor does not read are no claim at all, never contradicted
    ("陆佰元", SF01, []),
    ("一共卖得不错", SF01, []),
    ("2026年9月区域甲", SF01, []),
    # approximate or negated and not matching: unverifiable
    ("约650元", SF01, [("number", "650 yuan", U)]),
    ("不是700元", SF01, [("number", "700 yuan", U)]),
    ("600多元", SF01, [("bound", ">= 600 yuan", S)]),
    ("超过500元", SF01, [("bound", "> 500 yuan", S)]),
    ("more than 600 yuan", SF01, [("bound", "> 600 yuan", C)]),
    # a bare number (no unit, no subject) may be anything: never contradicted
    ("limit 10", SF01, [("number", "10", U)]),
    # a number beside a change may be the change, not the level
    (
        "门店A转化率增长了20%",
        RATES,
        [
            ("item", "names 门店A", S),
            ("number", "20% (门店A)", U),
            ("direction", "门店A went up", U),
        ],
    ),
    ("门店A转化率是20%", RATES, [("item", "names 门店A", S), ("number", "20% (门店A)", C)]),
    # the unit names the amount column, which holds 600
    ("3元", SF01, [("number", "3 yuan", C)]),
    # SQL-02: 门店A 300, 门店B 300, total 600
    (
        "门店A 300元，门店B 300元，合计600元。",
        SF02,
        [
            ("item", "names 门店A", S),
            ("number", "300 yuan (门店A)", S),
            ("item", "names 门店B", S),
            ("number", "300 yuan (门店B)", S),
            ("number", "600 yuan (total)", S),
        ],
    ),
    (
        "门店A和门店B分别为300和300",
        SF02,
        [
            ("item", "names 门店A", S),
            ("item", "names 门店B", S),
            ("number", "300 (门店A)", S),
            ("number", "300 (门店B)", S),
        ],
    ),
    ("合计9,600元", SF02, [("number", "9600 yuan (total)", C)]),
    ("门店A 600元", SF02, [("item", "names 门店A", S), ("number", "600 yuan (门店A)", C)]),
    ("The total is 600 yuan", SF02, [("number", "600 yuan (total)", S)]),
    ("共3行", SF02, [("number", "3 rows", S)]),
    ("2 rows", SF02, [("number", "2 rows", C)]),
    ("两家门店", SF02, [("number", "2 items", S)]),
    # a tie is not "the highest"; equal stores are not "more than"
    ("门店A最高", SF02, [("item", "names 门店A", S), ("extreme", "门店A is the highest", U)]),
    (
        "门店A高于门店B",
        SF02,
        [
            ("item", "names 门店A", S),
            ("item", "names 门店B", S),
            ("comparison", "门店A more than 门店B", C),
        ],
    ),
]


@pytest.mark.parametrize(("summary", "table", "expected"), CASES, ids=[c[0] for c in CASES])
def test_hand_written_summaries(summary: str, table: Table, expected: list) -> None:
    assert verdicts(summary, table) == expected


def test_a_wrong_result_against_its_gold() -> None:
    # The plain tag join's own numbers are supported by its result, contradicted by gold.
    found = check_summary("6单，1,100元", TAG_JOIN, SF01)
    assert [(c.reading, c.verdict, c.gold_verdict) for c in found] == [
        ("6 orders", S, C),
        ("1100 yuan", S, C),
    ]
    assert [c.detail for c in found] == ["order_count = 6 in row 1", "amount = 1100 in row 1"]


def test_composition_effect_subgroup_direction_stated_for_the_total() -> None:
    summary = (
        "门店A和门店B的转化率都上升了（门店A从80%升到90%，门店B从10%升到20%），整体转化率也上升了。"
    )
    assert verdicts(summary, SIMPSON) == [
        ("item", "names 门店A", S),
        ("item", "names 门店B", S),
        ("direction", "门店A and 门店B went up", S),
        ("number", "80% (门店A)", S),
        ("number", "90% (门店A)", S),
        ("direction", "门店A went up", S),
        ("number", "10% (门店B)", S),
        ("number", "20% (门店B)", S),
        ("direction", "门店B went up", S),
        ("direction", "the total went up", C),  # 0.45 -> 0.2333
    ]
    last = check_summary(summary, SIMPSON)[-1]
    assert last.detail == "row 3: rate_2026_08 0.45 -> rate_2026_09 0.2333"


def test_composition_effect_told_right_in_english() -> None:
    summary = "The total conversion rate fell from 45% to about 23.33%, while each store improved."
    assert verdicts(summary, SIMPSON) == [
        ("number", "45% (total)", S),
        ("number", "23.33% (total)", S),
        ("direction", "the total went down", S),
        ("direction", "each item went up", S),
    ]
    # and the seed's wrong reading: every store got worse
    assert verdicts("各门店转化率都下降了", SIMPSON) == [("direction", "each item went down", C)]


def test_direction_without_period_columns_is_unverifiable() -> None:
    assert verdicts("合计上升了", SF02) == [("direction", "the total went up", U)]


# ----------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=99_999_999))
def test_thousands_separators_keep_a_supported_number_supported(n: int) -> None:
    table = Table((("amount", "DECIMAL(38,2)"),), ((f"{n}.00",),))
    plain = verdicts(f"共{n}元", table)
    grouped = verdicts(f"共{n:,}元", table)
    assert plain == grouped == [("number", f"{n} yuan", S)]


_CN = "零一二三四五六七八九"


def _chinese(n: int) -> str:
    """1..9999 in Chinese numerals, written here independently of the reader."""
    out, zero = "", False
    for value, unit in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        digit = n // value % 10
        if digit:
            if zero:
                out += "零"
            out += _CN[digit] + unit
            zero = False
        elif out:
            zero = True
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=9999))
def test_chinese_numerals_read_as_their_value(n: int) -> None:
    table = Table((("amount", "DECIMAL(38,2)"),), ((f"{n}.00",),))
    assert verdicts(f"{_chinese(n)}元", table) == [("number", f"{n} yuan", S)]
    other = Table((("amount", "DECIMAL(38,2)"),), ((f"{n + 1}.00",),))
    assert verdicts(f"{_chinese(n)}元", other) == [("number", f"{n} yuan", C)]


SUMMARIES = [
    "门店A 300元，门店B 300元，合计600元。",
    "门店A最高，门店B 600元",
    "门店A和门店B的转化率都上升了，整体转化率也上升了，门店B最低",
    "The total fell from 45% to 23.33%; 门店A is higher than 门店B",
    "返回3行",
]


@settings(max_examples=40, deadline=None)
@given(st.randoms(use_true_random=False))
def test_shuffling_rows_never_changes_a_verdict(rnd: random.Random) -> None:
    for table in (SF02, SIMPSON):
        rows = list(table.rows)
        rnd.shuffle(rows)
        shuffled = Table(table.columns, tuple(rows))
        for summary in SUMMARIES:
            before = [(c.kind, c.reading, c.verdict) for c in check_summary(summary, table)]
            after = [(c.kind, c.reading, c.verdict) for c in check_summary(summary, shuffled)]
            assert before == after


def test_numbers_round_to_the_written_precision() -> None:
    # 49/210 = 0.233333...: 23.33% and 23.3% and 23% are the same number written shorter.
    table = Table((("rate", "DOUBLE"),), (("0.2333333333333333",),))
    for text in ("23.33%", "23.3%", "23%", "0.2333"):
        assert verdicts(f"转化率{text}", table)[0][2] == S, text
    assert verdicts("转化率24%", table)[0][2] == C
    assert Decimal("0.2333333333333333") * 100 - Decimal("23.33") < Decimal("0.005")


_PIECES = [
    "门店A", "门店B", "合计", "total", "六百", "三", "两", "零", "万", "千", "元", "%", "单", "行",
    "上升", "下降", "最高", "高于", "比", "多", "约", "不", "超过", "more than", "rose", "each",
    "都", "，", ",", "。", ".", " ", "(", ")", "1", "0", "9", ".5", ",000", "2026", "年", "月",
    "第", "top", "¥", "百分之", "个百分点", "+", "k", "million", "-", ":",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30).map("".join))
def test_any_summary_is_read_without_error(summary: str) -> None:
    for table in (SF01, SF02, SIMPSON, RATES, Table((), ())):
        for claim in check_summary(summary, table, SF02):
            assert claim.verdict in (S, C, U)
            assert claim.gold_verdict in (S, C, U)
