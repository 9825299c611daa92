"""One sqlglot parse per SQL text, shared by the guard and the AST rules.

An attempt's SQL is read by the guard, by the AST capability rules and, with
variant diagnostics, again for every variant database; parsing it once saves
most of that work. The cache holds the parsed statements keyed by the exact
SQL text. The trees are shared, so callers only read them and ``copy()``
before changing anything. A text that does not parse is not cached: the
error is raised afresh on every call, so each caller reports it as before.
"""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp

__all__ = ["CACHED_CHARS", "DIALECT", "parse"]

DIALECT = "duckdb"


#: Texts longer than this are parsed every time: the cache must stay small.
CACHED_CHARS = 65536


def parse(sql: str, dialect: str = DIALECT) -> tuple[exp.Expr | None, ...]:
    """The statements of ``sql`` as sqlglot parses them (DuckDB dialect); read-only.

    Raises whatever ``sqlglot.parse`` raises (ParseError, TokenError, RecursionError).

    >>> [type(t).__name__ for t in parse("SELECT 1; SELECT 2")]
    ['Select', 'Select']
    >>> parse("SELECT 1") is parse("SELECT 1")
    True
    """
    return _cached(sql, dialect) if len(sql) <= CACHED_CHARS else _parse(sql, dialect)


def _parse(sql: str, dialect: str) -> tuple[exp.Expr | None, ...]:
    return tuple(sqlglot.parse(sql, read=dialect))


_cached = functools.lru_cache(maxsize=256)(_parse)
