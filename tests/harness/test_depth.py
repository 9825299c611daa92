"""The guard's depth rule (issue 34): decided on the tokens before any parser runs.

- every text of the guard corpora, the built-in banks and the benchmark workload is
  within the limits (none refused by the rule);
- generated deep shapes (brackets, NOT chains, unary -, + and ~, ``::`` casts, CAST and
  CASE nesting, NOT interleaved with brackets) pass at the limit and are refused with
  ``too_complex`` at the limit + 1, and the deep shapes of the issue (100-400 NOT,
  350-800 unary minus or casts) are refused by the rule;
- brackets, NOT and signs inside strings, quoted identifiers, comments and dollar
  quotes do not count (hypothesis);
- the verdict is the same with Python's recursion limit lowered to 200.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_guard import TABLES, load
from test_sqlparse_copy import CORPUS

from ledger.events import Violation
from ledger.harness import depth
from ledger.harness import guard as guard_mod
from ledger.harness.depth import Depth, measure, refusal
from ledger.harness.guard import Verdict, guard
from ledger.harness.limits import DEFAULT_LIMITS, Judged, judge_sql

LIMIT = 20  # the documented limit of each depth (docs/protocol-and-guard.md)

WHAT = {
    "nesting": "levels of brackets and CASE",
    "prefix": "prefix operators (-, +, ~, NOT) in a row",
    "casts": "::type casts in a row",
}

# name -> (which depth it makes n deep, the SQL n deep); each valid SQL the guard passes.
SHAPES: dict[str, tuple[str, Callable[[int], str]]] = {
    "parentheses": ("nesting", lambda n: "SELECT " + "(" * n + "1" + ")" * n + " AS x"),
    "CAST nesting": ("nesting", lambda n: "SELECT " + "CAST(" * n + "1" + " AS int)" * n),
    "CASE nesting": (
        "nesting",
        lambda n: "SELECT " + "CASE WHEN true THEN " * n + "1" + " END" * n + " AS x",
    ),
    "NOT chain": ("prefix", lambda n: "SELECT * FROM orders WHERE " + "NOT " * n + "true"),  # noqa: S608
    "unary minus": ("prefix", lambda n: "SELECT " + "- " * n + "1 AS x"),
    "unary plus": ("prefix", lambda n: "SELECT " + "+ " * n + "1 AS x"),
    "bitwise not": ("prefix", lambda n: "SELECT " + "~ " * n + "1 AS x"),
    "NOT ( chain": (
        "prefix",  # n NOT waiting for their operand, but only n - 1 brackets
        lambda n: "SELECT * FROM orders WHERE NOT " + "(NOT " * (n - 1) + "true" + ")" * (n - 1),
    ),
    ":: casts": ("casts", lambda n: "SELECT 1" + "::int" * n + " AS x"),
    ":: casts of casts": (
        "casts",  # (1::int)::int ... : the bracket's cast and the ones after it add up
        lambda n: "SELECT " + "(" * (n // 2) + "1" + ")::int" * (n // 2) + "::int" * (n - n // 2),
    ),
}


def too_complex(n: int, what: str) -> Verdict:
    message = f"nested too deeply: {n} {WHAT[what]}, over the limit of {LIMIT}"
    return Verdict(
        passed=False, violations=(Violation(check="too_complex", message=message),), ast_digest=None
    )


def _corpus() -> Iterator[tuple[str, str]]:
    """(SQL, the engine whose guard judges it) of every corpus text."""
    yield from ((sql, "duckdb") for sql in CORPUS)
    for engine in ("duckdb", "postgres", "sqlite"):
        yield from ((e.sql, engine) for e in load(f"nondeterministic_{engine}.sql"))


def test_the_documented_limits() -> None:
    assert Depth(nesting=LIMIT, prefix=LIMIT, casts=LIMIT) == depth.LIMITS


def test_no_corpus_text_is_refused_by_the_rule() -> None:
    texts = list(_corpus())
    assert len(texts) > 900
    assert [sql for sql, _ in texts if refusal(sql) is not None] == []
    # and no guard verdict of the corpora names the rule
    refused = [
        sql
        for sql, engine in texts
        if "too_complex" in {v.check for v in guard(sql, TABLES, engine).violations}
    ]
    assert refused == []


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_shape_at_the_limit_passes_and_one_deeper_is_refused(shape: str) -> None:
    what, make = SHAPES[shape]
    at_limit = make(LIMIT)
    assert measure(at_limit)._asdict()[what] == LIMIT
    assert guard(at_limit, TABLES).passed, guard(at_limit, TABLES).violations
    assert guard(make(LIMIT + 1), TABLES) == too_complex(LIMIT + 1, what)


# The issue's deep shapes: (shape, n, what the refusal names, how deep it says it is).
# Brackets are reported first: NOT ( n deep is n - 1 brackets, casts of casts n // 2.
DEEP = [
    *(("NOT chain", n, "prefix", n) for n in (100, 200, 300, 400)),
    *(("unary minus", n, "prefix", n) for n in (350, 500, 800)),
    *((":: casts", n, "casts", n) for n in (350, 500, 800)),
    ("bitwise not", 350, "prefix", 350),
    ("NOT ( chain", 100, "nesting", 99),
    (":: casts of casts", 400, "nesting", 200),
]


@pytest.mark.parametrize(("shape", "n", "what", "deep"), DEEP)
def test_the_deep_shapes_of_the_issue_are_refused_by_the_rule(
    shape: str, n: int, what: str, deep: int
) -> None:
    assert guard(SHAPES[shape][1](n), TABLES) == too_complex(deep, what)


def test_a_run_records_the_rule_as_too_complex() -> None:
    judged = judge_sql(
        "SELECT " + "NOT " * 100 + "true",
        TABLES,
        rules=(),
        reference_sql="SELECT true",
        limits=DEFAULT_LIMITS,
        spent_ns=lambda: 0,
    )
    assert judged == Judged(False, too_complex(100, "prefix").violations, None)


def test_chains_end_at_their_operand() -> None:
    # Hand-counted: NOT a AND NOT b is two chains of one; the bracket's NOT waits for it.
    assert measure("SELECT NOT a AND NOT b AND NOT c") == Depth(0, 1, 0)
    assert measure("SELECT NOT (a AND NOT (b AND NOT c))") == Depth(2, 3, 0)
    assert measure("SELECT a - -1, b + +1, a NOT IN (1), b IS NOT NULL") == Depth(1, 1, 0)
    # decimal( and int[ are each one bracket deep; the type names go on the chain of casts
    assert measure("SELECT x::decimal(12, 2)::timestamp with time zone, y::int[]") == Depth(1, 0, 2)
    assert measure("SELECT f(a::int, b::int, c::int)") == Depth(1, 0, 1)
    assert measure("SELECT a::int + b::int + c::int AS x") == Depth(0, 0, 1)


# Text that would count if it were read as SQL: brackets, NOT, signs, casts, CASE.
_NOISE = st.text(alphabet="()[]{}NOT not-+~:: CASEcase\n*/$'\"x", max_size=40)


def _hidden(noise: str, how: int) -> str:
    """``noise`` inside a string, a quoted identifier, a comment or a dollar quote."""
    if how == 0:
        return "'" + noise.replace("'", "''") + "'"
    if how == 1:
        return '"' + noise.replace('"', '""') + '"'
    if how == 2:
        return "-- " + noise.replace("\n", " ") + "\n"
    if how == 3:
        return "/* " + noise.replace("*/", "").replace("/*", "").replace("*", "") + " */"
    if how == 4:
        return "E'" + noise.replace("\\", "").replace("'", "\\'") + "'"
    return "$q$" + noise.replace("$", "") + "$q$"


@settings(max_examples=300, deadline=None)
@given(
    shape=st.sampled_from(sorted(SHAPES)),
    n=st.integers(min_value=1, max_value=30),
    noise=_NOISE,
    how=st.integers(min_value=0, max_value=5),
)
def test_strings_identifiers_and_comments_do_not_count(
    shape: str, n: int, noise: str, how: int
) -> None:
    what, make = SHAPES[shape]
    sql = make(n)
    expected = measure(sql)
    assert expected._asdict()[what] == n
    # After the SELECT keyword, as a comment beside it or as a column before the rest.
    hidden = _hidden(noise, how)
    if how in (2, 3):
        padded = sql.replace("SELECT ", "SELECT " + hidden + " ", 1)
    else:
        padded = sql + ", " + hidden + " AS y"
    assert measure(padded) == expected


@pytest.mark.parametrize(("shape", "n", "what", "deep"), DEEP)
def test_the_verdict_does_not_depend_on_the_recursion_limit(
    shape: str, n: int, what: str, deep: int
) -> None:
    own, make = SHAPES[shape]
    texts = [make(LIMIT + 1), make(n)]
    # _judge: the guard without its cache, so that each verdict is computed here.
    default = [guard_mod._judge(sql, frozenset(TABLES)) for sql in texts]
    assert default == [too_complex(LIMIT + 1, own), too_complex(deep, what)]
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        lowered = [guard_mod._judge(sql, frozenset(TABLES)) for sql in texts]
    finally:
        sys.setrecursionlimit(before)
    assert lowered == default
