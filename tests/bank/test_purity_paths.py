"""The purity check of seed.sql and schema.sql (issue 14 item 6): the paths the bank
tests do not take. A token scan names the line; the AST pass catches what a token scan
cannot see (a quoted function name) and fails closed on SQL too deep to parse."""

from __future__ import annotations

from pathlib import Path

import pytest
from banktest import edit

from ledger.bank.model import load_bank
from ledger.bank.problems import Problems
from ledger.bank.purity import check_purity
from ledger.errors import BankError


def problems_of(sql: str) -> list[str]:
    found = Problems("test")
    check_purity(sql, "seed.sql", found)
    return [str(p) for p in found.items]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # a quoted table name that looks like a file, right after FROM or JOIN
        (
            'SELECT * FROM "orders.csv"',
            "seed.sql:1: impure SQL: quoted name 'orders.csv' looks like a file reference",
        ),
        (
            'SELECT 1 FROM t\nJOIN "/data/x" USING (k)',
            "seed.sql:2: impure SQL: quoted name '/data/x' looks like a file reference",
        ),
        # a path-like string anywhere, and any string right after FROM
        (
            "INSERT INTO t VALUES (1),\n(2),\n('~/secrets')",
            "seed.sql:3: impure SQL: string '~/secrets' looks like a file reference",
        ),
        (
            "SELECT * FROM 'orders'",
            "seed.sql:1: impure SQL: string 'orders' looks like a file reference",
        ),
        # a statement word counts at the start of every statement, not only the first
        ("SELECT 1;\nSET threads = 1", "seed.sql:2: impure SQL: SET statement is not allowed"),
    ],
)
def test_token_scan_names_the_line(sql: str, expected: str) -> None:
    assert problems_of(sql) == [expected]


def test_a_quoted_name_that_is_no_file_and_a_statement_word_inside_a_statement_pass() -> None:
    assert problems_of('SELECT "set", "load" FROM "orders"') == []
    assert problems_of("SELECT 1;;") == []  # an empty statement is nothing to check


@pytest.mark.parametrize(
    ("sql", "what"),
    [
        ('SELECT "random"()', "Rand"),  # the parser knows it under a quoted name
        ('SELECT "uuid"()', "Uuid"),
        ('SELECT "read_csv"(1)', "ReadCSV"),
        ('SELECT "now"()', "now()"),  # an anonymous call, named by its function list
        ('SELECT "glob"(1)', "glob()"),
        ('SELECT "parquet_scan"(1)', "parquet_scan()"),  # the *_scan pattern
    ],
)
def test_the_ast_pass_sees_a_quoted_function_name(sql: str, what: str) -> None:
    # The token scan sees an identifier, not a call of a forbidden word; the AST pass
    # names the node (it has no line: the parse tree keeps none).
    assert problems_of(sql) == [f"seed.sql: impure SQL: {what} is not allowed in a pure seed"]


def test_sql_that_does_not_tokenize_is_a_problem() -> None:
    (problem,) = problems_of("SELECT 'no end")
    # sqlglot's text follows the prefix; what matters is that it is a problem, not a pass
    assert problem.startswith("seed.sql: cannot tokenize SQL: ")


def test_sql_too_deep_to_parse_fails_closed() -> None:
    deep = "SELECT " + "(" * 3000 + "1" + ")" * 3000
    assert problems_of(deep) == [
        "seed.sql: nested too deeply to check its purity (simplify the SQL)"
    ]


def test_a_quoted_call_in_a_real_seed_is_refused_by_the_loader(tiny: Path) -> None:
    edit(tiny, "seed.sql", "'Hangzhou'", '"random"()::VARCHAR')
    with pytest.raises(BankError) as info:
        load_bank(tiny)
    assert info.value.message.splitlines()[1:] == [
        "  seed.sql: impure SQL: Rand is not allowed in a pure seed"
    ]
