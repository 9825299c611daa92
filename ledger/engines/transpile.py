"""Rewrite SQL written for one engine into another engine's dialect (sqlglot).

Used to publish a bank for another engine (``bank publish --engine``): its
schema, seed and reference SQL are transpiled statement by statement. The gold
on the target engine is then compared with the gold on the source engine, so a
transpilation that changes an answer is caught, never trusted.
"""

from __future__ import annotations

import sqlglot
from sqlglot.errors import ErrorLevel, SqlglotError

from ledger.errors import BankError

__all__ = ["DIALECTS", "transpile"]

#: The sqlglot dialect of each engine.
DIALECTS = {"duckdb": "duckdb", "sqlite": "sqlite", "postgres": "postgres"}


def transpile(sql: str, source: str, target: str) -> str:
    """``sql`` (one or more statements for engine ``source``) for engine ``target``.

    >>> transpile("SELECT list_value(1, 2)", "duckdb", "postgres")
    'SELECT ARRAY[1, 2]'

    Raises:
        BankError: sqlglot cannot read or write a statement (the message names it).
    """
    try:
        out = sqlglot.transpile(
            sql, read=DIALECTS[source], write=DIALECTS[target], unsupported_level=ErrorLevel.RAISE
        )
    except SqlglotError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BankError(
            f"cannot rewrite SQL written for {source} as {target}: {first}",
            hint=f"publish the bank on {source}, or write its SQL for {target}",
        ) from None
    return ";\n".join(out) + (";\n" if len(out) > 1 else "")
