"""Scorer 2.0.0 under a case's ``rows: set`` contract (issue 16): totals worked out by hand."""

from __future__ import annotations

from decimal import Decimal

import msgspec
import pytest
from test_score import make_executed, make_gold, make_guarded, make_parsed

from ledger.events import CaseSpec, Column
from ledger.harness.score import ScoringError, score_attempt

NS = (Column(name="n", type="INTEGER"), Column(name="s", type="VARCHAR"))
GOLD = ((1, "a"), (1, "a"), (2, "b"))
ANSWER = ((1, "a"), (2, "b"))
SQL = "SELECT n, s FROM t"


def case(rows: str | None, order: bool = False) -> CaseSpec:
    spec = CaseSpec(
        id="c1",
        dimension="basic",
        difficulty="easy",
        weight=Decimal(1),
        question="q",
        row_order_significant=order,
        max_rows=100,
        reference_sql_sha256="sha256:ref",
    )
    return spec if rows is None else msgspec.structs.replace(spec, rows=rows)


def score(spec: CaseSpec, gold=GOLD, answer=ANSWER) -> dict:
    return score_attempt(
        case=spec,
        gold=make_gold(rows=gold, cols=NS),
        parsed=make_parsed(sql=SQL),
        guarded=make_guarded(),
        executed=make_executed(rows=answer, cols=NS),
        provider_failure=None,
        reference_sql=None,
    )


def test_multiset_and_set_totals() -> None:
    # multiset: 5 + 5 + 10 + 5 + 5 + rows 45 * 0.8 = 36 + order 0 + ast 15 = 81
    multi = score(case(None))
    assert (multi["total"], multi["result_correct"], multi["f1"]) == (
        Decimal("81.00"),
        False,
        Decimal("0.8"),
    )
    assert score(case("multiset"))["total"] == Decimal("81.00")  # the same as no contract
    # set: gold has 2 distinct rows, both found: rows 45, order 10: 100
    as_set = score(case("set"))
    assert (as_set["total"], as_set["result_correct"]) == (Decimal("100.00"), True)
    assert (as_set["matched"], as_set["expected_rows"], as_set["actual_rows"]) == (2, 2, 2)
    assert as_set["items"].rows == Decimal(45)
    assert as_set["items"].order == Decimal(10)
    assert as_set["scorer_version"] == "2.0.0"


def test_an_answer_duplicating_a_row() -> None:
    gold, answer = ((1, "a"), (2, "b")), ((1, "a"), (1, "a"), (2, "b"))
    # multiset: P = 2/3, F1 = 0.8: 81 as above; set: 100
    multi = score(case(None), gold, answer)
    assert (multi["precision"], multi["total"]) == (Decimal("0.6666666667"), Decimal("81.00"))
    as_set = score(case("set"), gold, answer)
    assert (as_set["precision"], as_set["total"]) == (Decimal(1), Decimal("100.00"))


def test_set_with_significant_order_is_a_scoring_error() -> None:
    # the bank refuses this case; a forged one is a named refusal, never a score
    with pytest.raises(ScoringError, match="case c1: cannot compare: row order cannot be"):
        score(case("set", order=True))
