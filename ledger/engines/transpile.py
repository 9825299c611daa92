"""Rewrite SQL written for one engine into another engine's dialect (sqlglot).

Used to publish a bank for another engine (``bank publish --engine``): its
schema, seed and reference SQL are transpiled statement by statement. The gold
on the target engine is then compared with the gold on the source engine, so a
transpilation that changes an answer is caught, never trusted.
"""

from __future__ import annotations

import datetime as dt

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, SqlglotError

from ledger.errors import BankError

__all__ = ["DIALECTS", "transpile"]

#: The sqlglot dialect of each engine.
DIALECTS = {"duckdb": "duckdb", "sqlite": "sqlite", "postgres": "postgres"}


def _sqlite_instant(node: exp.Expr) -> exp.Expr:
    """``TIMESTAMPTZ '...+08:00'`` as the UTC text SQLite compares correctly.

    SQLite has no time types: an instant is stored and compared as text
    ``YYYY-MM-DD HH:MM:SS`` in UTC (the session time zone of a DuckDB bank), so
    a literal with an offset is converted once, here, and equal instants stay
    equal however they were written. A cast to TIMESTAMPTZ would otherwise be a
    cast to NUMERIC affinity in SQLite (the year).
    """
    if (
        isinstance(node, exp.Cast)
        and node.this.is_string
        and node.to.this in (exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ)
    ):
        try:
            value = dt.datetime.fromisoformat(node.this.name)
        except ValueError:
            return node
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return exp.Literal.string(value.strftime("%Y-%m-%d %H:%M:%S"))
    return node


def transpile(sql: str, source: str, target: str) -> str:
    """``sql`` (one or more statements for engine ``source``) for engine ``target``.

    >>> transpile("SELECT list_value(1, 2)", "duckdb", "postgres")
    'SELECT ARRAY[1, 2]'

    Raises:
        BankError: sqlglot cannot read or write a statement (the message names it).
    """
    try:
        trees = [t for t in sqlglot.parse(sql, read=DIALECTS[source]) if t is not None]
        if target == "sqlite":
            trees = [t.transform(_sqlite_instant) for t in trees]
        out = [
            t.sql(dialect=DIALECTS[target], unsupported_level=ErrorLevel.RAISE) for t in trees
        ]
    except SqlglotError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BankError(
            f"cannot rewrite SQL written for {source} as {target}: {first}",
            hint=f"publish the bank on {source}, or write its SQL for {target}",
        ) from None
    return ";\n".join(out) + (";\n" if len(out) > 1 else "")
