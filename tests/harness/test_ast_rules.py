"""AST capability rules (DESIGN.md fine print) and the auxiliary structural match."""

from __future__ import annotations

import pytest

from ledger.errors import BankError
from ledger.harness.ast_rules import KNOWN_RULES, check_rules, structural_match, validate_rules

# (rule, SQL, passes)
CASES = [
    ("window_function", "SELECT row_number() OVER (ORDER BY a) FROM t", True),
    ("window_function", "SELECT sum(a) OVER w FROM t WINDOW w AS (PARTITION BY b)", True),
    ("window_function", "SELECT sum(a) FROM t", False),
    ("cte", "WITH x AS (SELECT 1 AS a) SELECT a FROM x", True),
    ("cte", "SELECT a FROM (SELECT 1 AS a) AS x", False),
    ("not_exists", "SELECT a FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.a = t.a)", True),
    ("not_exists", "SELECT a FROM t WHERE NOT (EXISTS (SELECT 1 FROM u))", True),
    ("not_exists", "SELECT a FROM t WHERE a NOT IN (SELECT a FROM u)", False),
    ("not_exists", "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u)", False),
    (
        "correlated_subquery",
        "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a)",
        True,
    ),
    (
        "correlated_subquery",
        "SELECT o.id, (SELECT max(i.x) FROM items AS i WHERE i.oid = o.id) FROM orders AS o",
        True,
    ),
    (
        "correlated_subquery",
        "WITH c AS (SELECT * FROM t) SELECT * FROM c "
        "WHERE EXISTS (SELECT 1 FROM u WHERE u.x = c.x)",
        True,
    ),
    ("correlated_subquery", "SELECT a FROM t WHERE t.a IN (SELECT u.a FROM u)", False),
    ("correlated_subquery", "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM t WHERE t.a = 1)", False),
    ("correlated_subquery", "SELECT a FROM (SELECT a FROM t) AS s", False),
    ("left_join", "SELECT * FROM t LEFT JOIN u ON t.a = u.a", True),
    ("left_join", "SELECT * FROM t LEFT OUTER JOIN u USING (a)", True),
    ("left_join", "SELECT * FROM t RIGHT JOIN u ON t.a = u.a", False),
    ("left_join", "SELECT * FROM t LEFT SEMI JOIN u ON t.a = u.a", False),
    ("left_join", "SELECT * FROM t ANTI JOIN u ON t.a = u.a", False),
    ("group_by", "SELECT a, count(*) FROM t GROUP BY a", True),
    ("group_by", "SELECT a, count(*) FROM t GROUP BY ALL", True),
    ("group_by", "SELECT count(*) FROM t", False),
    ("having", "SELECT a FROM t GROUP BY a HAVING count(*) > 1", True),
    ("having", "SELECT a FROM t GROUP BY a", False),
    ("distinct_count", "SELECT count(DISTINCT a) FROM t", True),
    ("distinct_count", "SELECT count(*) FROM (SELECT DISTINCT a FROM t) AS s", False),
    ("case_when", "SELECT CASE WHEN a > 1 THEN 'x' ELSE 'y' END FROM t", True),
    ("case_when", "SELECT CASE a WHEN 1 THEN 'x' END FROM t", True),
    ("case_when", "SELECT if(a > 1, 'x', 'y') FROM t", False),
    ("set_operation", "SELECT a FROM t UNION SELECT a FROM u", True),
    ("set_operation", "SELECT a FROM t UNION ALL SELECT a FROM u", True),
    ("set_operation", "SELECT a FROM t INTERSECT SELECT a FROM u", True),
    ("set_operation", "SELECT a FROM t EXCEPT SELECT a FROM u", True),
    ("set_operation", "SELECT a FROM t", False),
]


@pytest.mark.parametrize(
    ("rule", "sql", "passes"),
    CASES,
    ids=[f"{r}-{'yes' if p else 'no'}-{i}" for i, (r, _, p) in enumerate(CASES)],
)
def test_rule(rule, sql, passes):
    (verdict,) = check_rules(sql, [rule])
    assert verdict.rule == rule
    assert verdict.passed is passes


def test_every_known_rule_has_cases():
    assert {r for r, _, _ in CASES} == KNOWN_RULES
    assert {r for r, _, p in CASES if p} == KNOWN_RULES
    assert {r for r, _, p in CASES if not p} == KNOWN_RULES


def test_rules_come_back_in_the_order_asked():
    sql = "WITH x AS (SELECT a FROM t) SELECT a, count(*) FROM x GROUP BY a"
    got = check_rules(sql, ["having", "cte", "group_by"])
    assert [(r.rule, r.passed) for r in got] == [
        ("having", False),
        ("cte", True),
        ("group_by", True),
    ]


def test_no_rules_no_verdicts():
    assert check_rules("SELECT 1", []) == ()


def test_unparseable_sql_passes_no_rule():
    assert [r.passed for r in check_rules("SELECT FROM WHERE (", ["group_by", "cte"])] == [
        False,
        False,
    ]


def test_unknown_rule_is_a_bank_error():
    with pytest.raises(BankError, match="no_such_rule"):
        check_rules("SELECT 1", ["no_such_rule"])
    with pytest.raises(BankError, match=r"cases\.yaml case r07: unknown required_ast"):
        validate_rules(["cte", "pivot"], where="cases.yaml case r07")
    validate_rules(sorted(KNOWN_RULES), where="x")


@pytest.mark.parametrize(
    ("sql", "reference", "equal"),
    [
        ("select a from t", "SELECT a\n  FROM   t", True),
        ('SELECT "A" FROM T', "select a from t", True),
        ("SELECT o.id FROM orders o", "SELECT ord.id FROM orders AS ord", True),
        ("SELECT sum(x) AS total FROM t", "SELECT sum(x) AS revenue FROM t", True),
        (
            "SELECT a AS k, count(*) AS n FROM t GROUP BY a ORDER BY n",
            "SELECT a AS key, count(*) AS cnt FROM t GROUP BY a ORDER BY cnt",
            True,
        ),
        (
            "WITH x AS (SELECT 1 AS a) SELECT x.a FROM x",
            "WITH y AS (SELECT 1 AS a) SELECT y.a FROM y",
            True,
        ),
        ("SELECT a FROM t", "SELECT b FROM t", False),
        ("SELECT a, b FROM t", "SELECT b, a FROM t", False),
        ("SELECT count(*) FROM t", "SELECT count(1) FROM t", False),
        ("SELECT a FROM t", "SELECT FROM WHERE (", False),
        ("SELECT FROM WHERE (", "SELECT FROM WHERE (", False),
    ],
)
def test_structural_match(sql, reference, equal):
    assert structural_match(sql, reference) is equal
