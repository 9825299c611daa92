"""The DuckDB worker's own parse check asks for the tree with the text as a literal (issue 34).

``duckdb_sandbox.serialize_query`` writes the SQL text into the query as a string
literal (quotes doubled) instead of binding it as a parameter, which DuckDB's Python
client makes about 0.2 ms dearer. The literal must be the very same value: these tests
hold DuckDB's answer for the literal to its answer for the bound parameter, over every
SQL text of the project's corpus (the banks, the traps, the guard corpora, the
throughput workload) and over generated texts full of quotes, backslashes, comment
and dollar-quote marks, NULs and lone surrogates.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sqlparse_copy import CORPUS

from ledger.engines.duckdb_sandbox import serialize_query

PARAMETER = "SELECT json_serialize_sql(?)"


@pytest.fixture(scope="module")
def con() -> Any:
    connection = duckdb.connect()
    yield connection
    connection.close()


def _answer(con: Any, query: str, parameters: list[str]) -> tuple[str, str]:
    """("ok", DuckDB's JSON) or ("error", the exception's class and message)."""
    try:
        return "ok", con.execute(query, parameters).fetchone()[0]
    except (duckdb.Error, RuntimeError, UnicodeError) as exc:
        return "error", f"{type(exc).__name__}: {exc}"


def test_quotes_are_doubled_and_nothing_else_changes() -> None:
    assert serialize_query("SELECT 'a''b', \"c\" FROM t") == (
        "SELECT json_serialize_sql('SELECT ''a''''b'', \"c\" FROM t')",
        [],
    )
    assert serialize_query("SELECT E'\\'' -- x") == (
        "SELECT json_serialize_sql('SELECT E''\\'''' -- x')",
        [],
    )


def test_a_nul_or_a_lone_surrogate_is_bound_as_a_parameter() -> None:
    assert serialize_query("SELECT 1\x00; DROP TABLE t") == (
        PARAMETER,
        ["SELECT 1\x00; DROP TABLE t"],
    )
    assert serialize_query("SELECT '\ud800'") == (PARAMETER, ["SELECT '\ud800'"])


def test_a_text_that_tries_to_close_the_literal_is_read_as_text(con: Any) -> None:
    sql = "x'); CREATE TABLE pwned AS SELECT 1; SELECT ('"
    kind, answer = _answer(con, *serialize_query(sql))
    assert (kind, answer) == _answer(con, PARAMETER, [sql])
    assert kind == "ok"
    assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone() == (0,)


def test_every_corpus_text_gets_the_parameters_answer(con: Any) -> None:
    texts = sorted(set(CORPUS))
    assert len(texts) > 700  # the corpus was found (776 distinct texts when written)
    differ = [
        sql[:80]
        for sql in texts
        if _answer(con, *serialize_query(sql)) != _answer(con, PARAMETER, [sql])
    ]
    assert differ == []


_PIECES = st.sampled_from(
    ["'", "''", '"', "\\", "\\'", "E'", "$$", "$a$", "--", "/*", "*/", "\n", ";", "?", "$1",
     "\x00", "\ud800", "é", "𝔘", "SELECT ", "1", " FROM t", "(", ")", ":", "::int"]
)  # fmt: skip


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=4)), max_size=12).map("".join))
def test_any_text_gets_the_parameters_answer(con: Any, sql: str) -> None:
    assert _answer(con, *serialize_query(sql)) == _answer(con, PARAMETER, [sql])
