"""sqlglot function nodes judged against an engine's function catalog (the guard's
``function_allowlist`` check and the determinism rules).

A function node is rendered in the engine's dialect with its arguments replaced by a
stub, and the called name taken; sqlglot's own names for the node's class follow, so a
name written under any of them is judged. The catalogs themselves are data
(``ledger.engines.functions``, ``sqlite_catalog``, ``postgres_catalog``), kept apart
from sqlglot so that a SQL worker that only executes never imports a parser.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Hashable

from sqlglot import exp
from sqlglot.errors import SqlglotError

from ledger.engines.functions import SYNTAX_CALLS, Catalog, catalog, fold
from ledger.errors import broken

__all__ = ["sqlglot_call_refusal", "sqlglot_names", "transparent"]

_CALL_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_STUB = exp.column("x")


def _stub(value: object) -> object:
    if isinstance(value, exp.Expr):
        return _STUB
    if isinstance(value, list):
        return [_STUB if isinstance(v, exp.Expr) else v for v in value]
    return value


def _shape(value: object) -> Hashable:
    if isinstance(value, exp.Expr):
        return "expr"
    if isinstance(value, list):
        return tuple(_shape(v) for v in value)
    return value if isinstance(value, Hashable) else repr(value)


def sqlglot_names(node: exp.Func, dialect: str = "duckdb") -> tuple[str, ...]:
    """Every name a function node may stand for, the DuckDB spelling first.

    An unknown function keeps the name as written. A known one is regenerated as
    DuckDB SQL with its arguments replaced by a stub (so one node costs the same
    whatever its subtree) and the called name taken; sqlglot's own names for the
    class follow, so that a name written under any of them is judged.
    """
    if isinstance(node, exp.Anonymous):
        return (fold(node.name),)
    names: list[str] = []
    rendered = _render(node, dialect)
    if rendered is not None:
        names.append(rendered)
    # Abstract function classes have no SQL name.
    with contextlib.suppress(NotImplementedError):
        names.extend(fold(n) for n in type(node).sql_names())
    return tuple(dict.fromkeys(names))


def _render(node: exp.Func, dialect: str = "duckdb") -> str | None:
    key = (dialect, type(node), tuple((k, _shape(v)) for k, v in node.args.items()))
    found = _RENDERED.get(key, _MISSING)
    if found is _MISSING:
        found = None
        try:
            text = type(node)(**{k: _stub(v) for k, v in node.args.items()}).sql(dialect=dialect)
        except (SqlglotError, ValueError, TypeError, KeyError, AttributeError):
            text = ""  # the name then comes from the class alone
        match = _CALL_NAME.match(text)
        if match:
            found = fold(match.group(1))
        if len(_RENDERED) < 4096:
            _RENDERED[key] = found
    return found if isinstance(found, str) else None


def transparent(node: exp.Func, dialect: str) -> bool:
    """True when ``dialect`` writes ``node`` as just its (stubbed) argument: no call at all."""
    try:
        text = type(node)(**{k: _stub(v) for k, v in node.args.items()}).sql(dialect=dialect)
    except (SqlglotError, ValueError, TypeError, KeyError, AttributeError):
        return False
    return text == _STUB.sql(dialect=dialect)


_MISSING = object()
_RENDERED: dict[Hashable, object] = {}


def sqlglot_call_refusal(
    node: exp.Func, cat: Catalog | None = None, dialect: str = "duckdb"
) -> tuple[str, str] | None:
    """(name, why) when the allow-list refuses this call; None when it is allowed.

    ``cat`` and ``dialect``: the engine's allow-list and sqlglot dialect (DuckDB's by default).
    """
    cat = catalog() if cat is None else cat
    names = sqlglot_names(node, dialect)
    if isinstance(node, exp.Binary | exp.Unary) and _render(node, dialect) is None:
        return None  # an operator (AND, ||, ->>, ...), not a call
    if dialect != "duckdb" and not isinstance(node, exp.Anonymous) and transparent(node, dialect):
        # A node sqlglot inserts that the engine writes as its argument alone (SQLite's
        # strftime(f, x) reads as TimeToStr(TsOrDsToTimestamp(x))): no call to judge;
        # its arguments are judged on their own.
        return None
    for name in names:
        if name in cat.denied and name not in cat.calls:
            why = cat.call_refusal(name)
            if why is None:
                raise broken(f"function {name} is denied without a reason")
            return name, why
    if any(n in cat.calls or n in SYNTAX_CALLS for n in names):
        return None
    shown = names[0] if names else type(node).__name__.lower()
    return shown, cat.call_refusal(shown) or "is not on the allow-list"
