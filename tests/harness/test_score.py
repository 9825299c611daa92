"""Scorer 2.0.0: every boundary rule with totals worked out by hand, errors, properties."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.codec import decode, encode
from ledger.errors import UsageError
from ledger.events import (
    CaseSpec,
    Column,
    GoldResult,
    Invocation,
    OutputParsed,
    ProviderFailed,
    ScoreComputed,
    SqlExecuted,
    SqlGuarded,
    Violation,
)
from ledger.harness.score import (
    SCORER_VERSION,
    SCORERS,
    Scorer,
    ScoringError,
    get_scorer,
    score_attempt,
)

ENV = {"stream": "run-1", "stream_seq": 0, "stream_prev": None, "at": "2026-12-02T10:00:00.000000Z"}
COLS = (Column(name="region", type="VARCHAR"), Column(name="orders", type="BIGINT"))
ROWS = (("n", 3), ("s", 4), ("w", 5))
SQL = "SELECT region, count(*) AS orders FROM orders GROUP BY region HAVING count(*) > 0"
# group_by, having, case_when: 3 of RULES_8
SQL_3 = (
    "SELECT region, CASE WHEN count(*) > 0 THEN count(*) END AS orders "
    "FROM orders GROUP BY region HAVING count(*) > 0"
)
RULES_3 = ("group_by", "having", "cte")  # SQL passes 2 of 3
RULES_8 = (
    "group_by",
    "having",
    "case_when",
    "cte",
    "window_function",
    "not_exists",
    "left_join",
    "set_operation",
)
INVOCATION = Invocation(
    harness_kind="direct",
    response_mode="text",
    single_call=True,
    tools="off",
    retries=0,
    prompt_contract_digest="sha256:p",
    system_prompt_digest=None,
    wire_protocol="openai-chat",
    client_version="1",
)


def make_case(rules=(), order=False, abs_tol="0") -> CaseSpec:
    return CaseSpec(
        id="c1",
        dimension="basic",
        difficulty="easy",
        weight=Decimal(1),
        question="How many orders per region?",
        row_order_significant=order,
        abs_tolerance=Decimal(abs_tol),
        max_rows=100,
        required_ast=tuple(rules),
        reference_sql_sha256="sha256:ref",
    )


def make_gold(rows=ROWS, cols=COLS) -> GoldResult:
    return GoldResult(case_id="c1", columns=cols, rows=rows, digest="sha256:gold")


def make_parsed(sql=SQL, strict=True, error=None) -> OutputParsed:
    return OutputParsed(
        **ENV,
        case_id="c1",
        attempt=1,
        protocol_strict=strict and error is None,
        recovered_from_fence=not strict and error is None,
        plan=None,
        sql=None if error else sql,
        summary=None,
        assumptions=None,
        error=error,
    )


def make_guarded(passed=True) -> SqlGuarded:
    return SqlGuarded(
        **ENV, case_id="c1", attempt=1, passed=passed, violations=(), ast_digest="sha256:a"
    )


def make_executed(rows=ROWS, cols=COLS, error_kind=None, truncated=False) -> SqlExecuted:
    ok = error_kind is None
    return SqlExecuted(
        **ENV,
        case_id="c1",
        attempt=1,
        ok=ok,
        error_kind=error_kind,
        error_message=None if ok else "boom",
        columns=cols if ok else (),
        rows=tuple(rows) if ok else (),
        row_count=len(rows) if ok else 0,
        truncated=truncated,
        sql_us=1000,
    )


def make_provider(kind="timeout") -> ProviderFailed:
    return ProviderFailed(
        **ENV, case_id="c1", attempt=1, kind=kind, message="no answer", invocation=INVOCATION
    )


def run(
    *,
    case=None,
    gold=None,
    parsed="default",
    guarded="default",
    executed="default",
    provider=None,
    reference_sql=None,
):
    """Score with sensible evidence defaults: strict, guard passed, executed == gold."""
    if provider is not None:
        parsed = guarded = executed = None
    parsed = make_parsed() if parsed == "default" else parsed
    guarded = make_guarded() if guarded == "default" else guarded
    executed = make_executed() if executed == "default" else executed
    return score_attempt(
        case=case or make_case(),
        gold=gold or make_gold(),
        parsed=parsed,
        guarded=guarded,
        executed=executed,
        provider_failure=provider,
        reference_sql=reference_sql,
    )


K = (Column(name="k", type="VARCHAR"),)
AMOUNT = (Column(name="k", type="VARCHAR"), Column(name="v", type="DOUBLE"))
XY = (Column(name="x", type="DOUBLE"), Column(name="y", type="DOUBLE"))
AB = (Column(name="a", type="DOUBLE"), Column(name="b", type="DOUBLE"))

# (id, run() keyword arguments, total by hand, failure_kind, result_correct, format_ok)
BOUNDARY = [
    ("provider timeout", {"provider": make_provider("timeout")}, "0.00", "provider", None, False),
    (
        "provider policy refusal",
        {"provider": make_provider("policy_refusal")},
        "0.00",
        "policy_refusal",
        None,
        False,
    ),
    (
        "output contract error",
        {"parsed": make_parsed(error="prose around the JSON"), "guarded": None, "executed": None},
        "0.00",
        "protocol",
        None,
        False,
    ),
    (
        "empty SQL",
        {"parsed": make_parsed(sql=""), "guarded": None, "executed": None},
        "0.00",
        "protocol",
        None,
        False,
    ),
    # 5 (protocol)
    (
        "guard fails, strict",
        {"guarded": make_guarded(False), "executed": None},
        "5.00",
        "guard",
        None,
        False,
    ),
    # 0 (recovered fence) and AST 0 after a guard failure even with rules
    (
        "guard fails, recovered fence",
        {
            "case": make_case(RULES_3),
            "parsed": make_parsed(strict=False),
            "guarded": make_guarded(False),
            "executed": None,
        },
        "0.00",
        "guard",
        None,
        False,
    ),
    # 5 + 5 + 15 * 2/3 = 20
    (
        "sql_runtime, strict, 2 of 3 AST",
        {"case": make_case(RULES_3), "executed": make_executed(error_kind="sql_runtime")},
        "20.00",
        "execution",
        None,
        False,
    ),
    # 0 + 5 + 15
    (
        "timeout, recovered fence, no rules",
        {"parsed": make_parsed(strict=False), "executed": make_executed(error_kind="timeout")},
        "20.00",
        "execution",
        None,
        False,
    ),
    # 5 + 5 + 15 * 3/8 = 15.625 -> half-up 15.63 (half-even would say 15.62)
    (
        "memory, strict, 3 of 8 AST",
        {
            "case": make_case(RULES_8),
            "parsed": make_parsed(SQL_3),
            "executed": make_executed(error_kind="memory"),
        },
        "15.63",
        "execution",
        None,
        False,
    ),
    # 5 + 5 + 10 + 5 + 5 + 45 + 10 + 15
    ("perfect, strict", {}, "100.00", "none", True, True),
    (
        "perfect, recovered fence",
        {"parsed": make_parsed(strict=False)},
        "95.00",
        "none",
        True,
        False,
    ),
    # 5 + 5 + 10 + 5 + 5 + 45 + 10 + 10
    ("perfect, 2 of 3 AST", {"case": make_case(RULES_3)}, "95.00", "none", True, True),
    # names item lost
    (
        "columns permuted",
        {"executed": make_executed(rows=[(r[1], r[0]) for r in ROWS], cols=COLS[::-1])},
        "95.00",
        "none",
        True,
        False,
    ),
    # 5 + 5 + 10 + 5 + 5 + 45 * 2/3 + 0 + 15 = 75
    (
        "gold AAB, actual ABB",
        {
            "gold": make_gold(rows=(("A",), ("A",), ("B",)), cols=K),
            "executed": make_executed(rows=[("A",), ("B",), ("B",)], cols=K),
        },
        "75.00",
        "none",
        False,
        True,
    ),
    # 45 + 45 * 6/7 = 45 + 38.5714285714... = 83.5714... -> 83.57; the order item is lost
    (
        "extra duplicate row",
        {"executed": make_executed(rows=[*ROWS, ROWS[0]])},
        "83.57",
        "none",
        False,
        True,
    ),
    # 5 + 5 + 10 + 5 (count) + 0 + 0 + 0 + 15
    (
        "ambiguous columns",
        {
            "gold": make_gold(rows=(("1.5", "1.5"),), cols=AB),
            "executed": make_executed(rows=[("1.5", "1.5")], cols=XY),
        },
        "40.00",
        "none",
        False,
        False,
    ),
    # F1 = 2*2/(3+2) = 4/5 -> 36; order lost: 5 + 5 + 10 + 5 + 5 + 36 + 0 + 15
    (
        "truncated, two rows read",
        {"executed": make_executed(rows=ROWS[:2], truncated=True)},
        "81.00",
        "none",
        False,
        True,
    ),
    (
        "truncated, every row read",
        {"executed": make_executed(truncated=True)},
        "90.00",
        "none",
        False,
        True,
    ),
    # rows 0, order 0; count and names still judged
    (
        "non-finite cell",
        {
            "gold": make_gold(rows=(("a", "1.0"),), cols=AMOUNT),
            "executed": make_executed(rows=[("a", "Infinity")], cols=AMOUNT),
        },
        "45.00",
        "none",
        False,
        True,
    ),
    (
        "order significant, rows reversed",
        {"case": make_case(order=True), "executed": make_executed(rows=ROWS[::-1])},
        "90.00",
        "none",
        False,
        True,
    ),
    # 5 + 5 + 10 + 0 + 0 + 0 + 0 + 15
    (
        "column count mismatch",
        {
            "executed": make_executed(
                rows=[(*r, 1) for r in ROWS], cols=(*COLS, Column(name="x", type="INTEGER"))
            )
        },
        "35.00",
        "none",
        False,
        False,
    ),
    (
        "nothing matches",
        {"executed": make_executed(rows=[("x", 1)])},
        "45.00",
        "none",
        False,
        True,
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "total", "failure_kind", "result_correct", "format_ok"),
    [b[1:] for b in BOUNDARY],
    ids=[b[0] for b in BOUNDARY],
)
def test_boundary_rules(kwargs, total, failure_kind, result_correct, format_ok):
    fields = run(**kwargs)
    assert fields["total"] == Decimal(total)
    assert str(fields["total"]) == total  # always two places
    assert fields["failure_kind"] == failure_kind
    assert fields["result_correct"] is result_correct
    assert fields["format_ok"] is format_ok
    assert fields["scorer_version"] == "2.0.0"
    assert fields["gold_digest"] == "sha256:gold"
    items = fields["items"]
    shown = sum(
        (getattr(items, f) for f in items.__struct_fields__),
        Decimal(0),
    )
    assert abs(shown - fields["total"]) <= Decimal("0.005")


def test_items_of_an_extra_duplicate_row():
    items = run(executed=make_executed(rows=[*ROWS, ROWS[0]]))["items"]
    assert items.rows == Decimal("38.5714285714")  # 45 * 6/7, 10 places, half-up
    assert (items.protocol, items.guard, items.executed) == (5, 5, 10)
    assert (items.column_count, items.column_names, items.order, items.ast) == (5, 5, 0, 15)


def test_not_executed_fields():
    fields = run(guarded=make_guarded(False), executed=None)
    assert fields["alignment"] == "not_executed"
    assert fields["column_mapping"] is None
    assert (fields["matched"], fields["expected_rows"], fields["actual_rows"]) == (0, 3, 0)
    assert fields["ast_rules"] == ()
    assert fields["order_ok"] is False


def test_ast_rules_are_recorded_even_when_execution_fails():
    fields = run(case=make_case(RULES_3), executed=make_executed(error_kind="sql_runtime"))
    assert [(r.rule, r.passed) for r in fields["ast_rules"]] == [
        ("group_by", True),
        ("having", True),
        ("cte", False),
    ]
    assert fields["items"].ast == 10


def test_truncated_result_fails_the_order_field_too():
    fields = run(executed=make_executed(truncated=True))
    assert fields["f1"] == 1
    assert fields["order_ok"] is False
    assert fields["items"].order == 0


def test_structural_match_is_auxiliary():
    ref = "select REGION, count(*) as n from orders group by region having count(*) > 0"
    assert run(reference_sql=ref)["sql_structural_match"] is True
    assert run(reference_sql="SELECT 1")["sql_structural_match"] is False
    assert run()["sql_structural_match"] is None
    assert run(provider=make_provider(), reference_sql=ref)["sql_structural_match"] is None
    # a guard failure still has SQL to compare
    fields = run(guarded=make_guarded(False), executed=None, reference_sql=ref)
    assert fields["sql_structural_match"] is True


def test_fields_make_a_score_computed_event_that_round_trips():
    fields = run(executed=make_executed(rows=[*ROWS, ROWS[0]]), reference_sql=SQL)
    event = ScoreComputed(**ENV, case_id="c1", attempt=1, evidence=("sha256:e",), **fields)
    assert decode(encode(event)) == event


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gold": GoldResult(case_id="c2", columns=COLS, rows=ROWS, digest="d")}, "case c2"),
        ({"executed": make_executed(error_kind="worker_crash")}, "infrastructure"),
        ({"executed": None}, "no execution"),
        ({"guarded": None, "executed": None}, "no guard verdict"),
        ({"guarded": make_guarded(False)}, "yet it was executed"),
        ({"parsed": None, "guarded": None, "executed": None}, "no OutputParsed"),
        ({"executed": make_executed(error_kind="disk_full")}, "unknown execution error_kind"),
        ({"case": make_case(["no_such_rule"])}, "no_such_rule"),
        ({"gold": make_gold(rows=(("a", "NaN"),), cols=AMOUNT)}, "non-finite"),
    ],
    ids=[
        "gold of another case",
        "worker crash",
        "guard passed, nothing executed",
        "SQL without guard verdict",
        "rejected yet executed",
        "no parse and no provider failure",
        "unknown error kind",
        "unknown AST rule",
        "exception inside comparison",
    ],
)
def test_faults_raise_scoring_error_never_a_score(kwargs, message):
    with pytest.raises(ScoringError, match=message):
        run(**kwargs)


def test_exception_inside_comparison_is_chained():
    with pytest.raises(ScoringError) as info:
        run(gold=make_gold(rows=(("a", "NaN"),), cols=AMOUNT))
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.exit_code == 2


def test_scorer_registry():
    assert SCORER_VERSION == "2.0.0"
    assert get_scorer("2.0.0") is SCORERS["2.0.0"]
    assert sum(vars(get_scorer("2.0.0").points).values()) == 100
    with pytest.raises(UsageError, match=r"unknown scorer version '9\.9\.9'"):
        get_scorer("9.9.9")
    with pytest.raises(UsageError):
        run_with_version("1.0.0")


def run_with_version(version):
    return score_attempt(
        case=make_case(),
        gold=make_gold(),
        parsed=make_parsed(),
        guarded=make_guarded(),
        executed=make_executed(),
        provider_failure=None,
        reference_sql=None,
        version=version,
    )


def test_a_later_version_changes_one_rule():
    class HalfAst(Scorer):
        version = "2.1.0-test"

        def ast_points(self, rules):
            return super().ast_points(rules) / 2

    SCORERS[HalfAst.version] = HalfAst()
    try:
        fields = run_with_version("2.1.0-test")
        assert fields["scorer_version"] == "2.1.0-test"
        assert fields["total"] == Decimal("92.50")  # 100 - 15/2
        assert run_with_version("2.0.0")["total"] == Decimal("100.00")
    finally:
        del SCORERS[HalfAst.version]


# ---------------------------------------------------------------- properties (issue 5, item 2)

row = st.tuples(st.sampled_from(["n", "s", "w", "e"]), st.integers(0, 5))
outcomes = st.sampled_from(["ok", "sql_runtime", "timeout", "guard", "contract", "provider"])


@given(
    st.lists(row, max_size=6),
    st.booleans(),
    outcomes,
    st.booleans(),
    st.lists(st.sampled_from(sorted(RULES_8)), unique=True, max_size=4),
    st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_total_within_0_100_and_the_rounded_sum_of_items(
    actual, strict, outcome, truncated, rules, order
):
    kwargs = {"case": make_case(rules, order=order), "parsed": make_parsed(strict=strict)}
    if outcome == "ok":
        kwargs["executed"] = make_executed(rows=actual, truncated=truncated)
    elif outcome in ("sql_runtime", "timeout"):
        kwargs["executed"] = make_executed(error_kind=outcome)
    elif outcome == "guard":
        kwargs.update(guarded=make_guarded(False), executed=None)
    elif outcome == "contract":
        kwargs.update(parsed=make_parsed(error="bad"), guarded=None, executed=None)
    else:
        kwargs["provider"] = make_provider()
    fields = run(**kwargs)
    total = fields["total"]
    assert Decimal(0) <= total <= Decimal(100)
    items = fields["items"]
    shown = sum((getattr(items, f) for f in items.__struct_fields__), Decimal(0))
    # each shown item is within 0.5e-10 of its exact value, the total within 0.005
    assert abs(shown - total) <= Decimal("0.005") + 8 * Decimal("0.5e-10")
    if fields["result_correct"] is None:
        assert items.rows == items.order == items.column_count == items.column_names == 0


@given(st.lists(row, max_size=6), st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_shuffling_rows_never_changes_the_score(actual, rnd):
    shuffled = actual[:]
    rnd.shuffle(shuffled)
    assert run(executed=make_executed(rows=actual)) == run(executed=make_executed(rows=shuffled))


def test_rows_item_is_exact_before_rounding():
    # 45 * 2/3 is exactly 30: no 29.99 from rounding 2/3 first
    fields = run(
        gold=make_gold(rows=(("A",), ("A",), ("B",)), cols=K),
        executed=make_executed(rows=[("A",), ("B",), ("B",)], cols=K),
    )
    assert fields["items"].rows == 30
    assert Fraction(45) * Fraction(2, 3) == 30


# ---------------------------------------------------------------- caps (issue 13 section 2)


def _limit_guard(check: str) -> SqlGuarded:
    violation = Violation(check=check, message="over the cap")
    return SqlGuarded(
        **ENV, case_id="c1", attempt=1, passed=False, violations=(violation,), ast_digest=None
    )


@pytest.mark.parametrize(
    ("kwargs", "total", "kind", "detail"),
    [
        # protocol stage: nothing extracted, every item 0
        (
            {"parsed": make_parsed(error="output too large: the raw output is 2000 bytes, over "
                                   "the 1024-byte cap"), "guarded": None, "executed": None},
            "0.00", "protocol", "output_too_large",
        ),
        # guard stage: the 5 protocol points only
        ({"guarded": _limit_guard("sql_too_large"), "executed": None}, "5.00", "guard",
         "sql_too_large"),
        ({"guarded": _limit_guard("too_complex"), "executed": None}, "5.00", "guard",
         "too_complex"),
        # execution stage: protocol 5 + guard 5 + AST 15 (the case has no rules)
        ({"executed": make_executed(error_kind="result_too_large")}, "25.00", "execution",
         "result_too_large"),
        # the same stages without a cap have no detail
        ({"parsed": make_parsed(error="prose"), "guarded": None, "executed": None}, "0.00",
         "protocol", None),
        ({"executed": make_executed(error_kind="timeout")}, "25.00", "execution", None),
    ],
    ids=["output too large", "sql too large", "too complex", "result too large",
         "contract error", "timeout"],
)  # fmt: skip
def test_a_cap_is_scored_in_its_stage_with_a_detail(kwargs, total, kind, detail):
    fields = run(reference_sql=SQL, **kwargs)
    assert fields["total"] == Decimal(total)
    assert fields["failure_kind"] == kind
    assert fields.get("failure_detail") == detail
    assert fields["result_correct"] is None
    event = ScoreComputed(**ENV, case_id="c1", attempt=1, evidence=("sha256:e",), **fields)
    assert decode(encode(event)) == event
    # the detail is in the bytes only when there is one: older scores keep their bytes
    assert (b'"failure_detail"' in encode(event)) == (detail is not None)


def test_sql_refused_by_a_cap_is_never_parsed_for_the_structural_match():
    # 10,000 nested parentheses would exhaust sqlglot's recursion; a cap refused it first.
    deep = "SELECT " + "(" * 10_000 + "1" + ")" * 10_000
    fields = run(parsed=make_parsed(sql=deep), guarded=_limit_guard("too_complex"),
                 executed=None, reference_sql=SQL)  # fmt: skip
    assert fields["sql_structural_match"] is None
    assert fields["failure_detail"] == "too_complex"


def test_recursion_in_the_scorers_sql_work_is_too_complex(monkeypatch):
    # The guard passed and the SQL ran, but the scorer's own parse runs out of recursion
    # (another machine, a deeper stack): a guard-stage failure, never a crash or a cancel.
    def deep(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr("ledger.harness.score.structural_match", deep)
    fields = run(reference_sql=SQL)
    assert (fields["failure_kind"], fields["failure_detail"]) == ("guard", "too_complex")
    assert fields["total"] == Decimal("5.00")
    assert fields["sql_structural_match"] is None
    assert fields["result_correct"] is None


def test_truncated_cells_are_scored_like_truncated_rows():
    # Every row matches; one cell was cut to the cell cap: order 0 and never result_correct.
    executed = msgspec.structs.replace(make_executed(), cells_truncated=1)
    fields = run(executed=executed)
    assert fields["items"].order == 0
    assert fields["total"] == Decimal("90.00")  # 100 - order 10
    assert fields["result_correct"] is False
    assert fields["order_ok"] is False
    assert "failure_detail" not in fields


# ---------------------------------------------------------------- bugs are not refusals (s3)


def test_a_bug_in_the_comparator_propagates_unchanged(monkeypatch):
    def broken(*args, **kwargs):
        raise TypeError("deliberate fault")

    monkeypatch.setattr("ledger.harness.score.compare", broken)
    with pytest.raises(TypeError, match="deliberate fault"):
        run()


def test_named_refusals_stay_scoring_errors():
    # malformed result: a row of the wrong width
    with pytest.raises(ScoringError, match="actual rows must have 2 cells"):
        run(executed=make_executed(rows=[("n",)]))
