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


# DuckDB's date_trunc units SQLite's date functions can express as a modifier.
_START_OF = {"YEAR": "start of year", "MONTH": "start of month", "DAY": "start of day"}
_STEP_UNITS = {"YEAR": "years", "MONTH": "months", "DAY": "days", "HOUR": "hours"}


def _sqlite_rewrite(node: exp.Expr) -> exp.Expr:
    """DuckDB constructs SQLite has no spelling for, rewritten to what SQLite has."""
    node = _sqlite_instant(node)
    if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
        unit = node.args.get("unit")
        name = unit.name.upper() if unit is not None else ""
        if name in _START_OF:
            return exp.func("DATETIME", node.this, exp.Literal.string(_START_OF[name]))
    if isinstance(node, exp.Table) and isinstance(node.this, exp.GenerateSeries):
        return _series_as_cte(node) or node
    return node


def _series_as_cte(table: exp.Table) -> exp.Expr | None:
    """``generate_series(a, b, INTERVAL n unit) AS t(c)`` as a recursive CTE SQLite runs.

    Only the form with a literal step in a unit SQLite's ``datetime`` modifiers know
    and a named column; anything else stays as it is (and fails on SQLite, naming
    the case).
    """
    series = table.this
    alias = table.args.get("alias")
    step = series.args.get("step")
    if alias is None or not isinstance(step, exp.Interval):
        return None
    columns = alias.columns
    if len(columns) != 1 or not step.this.is_string:
        return None
    unit = step.unit.name.upper() if step.unit is not None else ""
    if unit not in _STEP_UNITS or not step.this.name.isdigit():
        return None
    column = exp.to_identifier(columns[0].name)
    modifier = exp.Literal.string(f"+{int(step.this.name)} {_STEP_UNITS[unit]}")

    def next_of(ref: exp.Expr) -> exp.Expr:
        return exp.func("DATETIME", ref, modifier.copy())

    anchor = exp.select(exp.alias_(series.args["start"].copy(), column.copy()))
    step_up = (
        exp.select(exp.alias_(next_of(exp.column(column.copy())), column.copy()))
        .from_("_series")
        .where(
            exp.LTE(this=next_of(exp.column(column.copy())), expression=series.args["end"].copy())
        )
    )
    query = (
        exp.select(exp.column(column.copy()))
        .from_("_series")
        .with_("_series", as_=exp.union(anchor, step_up, distinct=False), recursive=True)
    )
    return exp.Subquery(this=query, alias=exp.TableAlias(this=alias.this.copy()))


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
            trees = [t.transform(_sqlite_rewrite) for t in trees]
        out = [t.sql(dialect=DIALECTS[target], unsupported_level=ErrorLevel.RAISE) for t in trees]
    except SqlglotError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BankError(
            f"cannot rewrite SQL written for {source} as {target}: {first}",
            hint=f"publish the bank on {source}, or write its SQL for {target}",
        ) from None
    return ";\n".join(out) + (";\n" if len(out) > 1 else "")
