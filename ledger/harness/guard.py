"""Static SQL guard: decide from the sqlglot AST alone whether a model's SQL may run.

The guard parses the SQL with sqlglot (DuckDB dialect) and runs every check in
``CHECKS`` over the tree; each check yields ``Violation(check, message)``. The
query passes only when it parses, is exactly one statement and no check finds
anything. Everything is fail closed: a construct the guard does not know is
rejected, never waved through. The sandboxed worker (external access off,
read-only database) is the second, independent line of defence.

Rules, in the order reported (docs/protocol-and-guard.md explains each one):

- ``table_allowlist``: an empty set of published tables rejects everything;
- ``too_complex``: brackets, prefix operators or ``::`` casts nested deeper than
  ``ledger.harness.depth.LIMITS``, read from the tokens before any parser runs;
- ``parse``: the SQL must parse; the parser's reason is kept (``nesting`` when
  sqlglot parses a tree too deep for the checks to walk back out of);
- ``single_statement``: exactly one statement (empty statements such as a
  trailing ``;`` do not count);
- ``adjacent_literals``: no two string literals separated only by whitespace or
  comments (DuckDB joins them into one literal, sqlglot reads an alias);
- ``read_only_root``: the root is a query (SELECT, set operation, VALUES,
  PIVOT/UNPIVOT, a parenthesised query, each with an optional WITH);
- ``no_side_effects``: no write, DDL, transaction, session or utility node
  anywhere in the tree (CTE bodies included);
- ``known_constructs``: every non-function node is on an allow-list;
- ``table_functions``: FROM items are tables, subqueries, VALUES, UNNEST,
  ``range()`` or ``generate_series()``; no other table function;
- ``pivot_values``: every PIVOT column lists its values (``ON c IN (...)``);
- ``file_references``: no string literal, file, glob or URL name in FROM (``FROM 'x.csv'``);
- ``table_references``: only published ``main`` tables or CTEs in scope;
- ``function_allowlist``: every function call is on the allow-list generated from
  DuckDB's catalog (``ledger.engines.functions``); unknown means refused;
- ``deterministic``: nothing whose result depends on the clock, the machine's time
  zone or locale, a random or sampling source (``ledger.harness.determinism``; a
  call the allow-list denies as a clock or a random source is reported here too).
"""

from __future__ import annotations

import fnmatch
import functools
import re
import string
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import NamedTuple

import msgspec
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.tokenizer_core import TokenType

from ledger.codec import sha256_hex
from ledger.engines import engine_rules, functions
from ledger.errors import broken
from ledger.events import Violation
from ledger.harness import depth, determinism, function_calls, sqlparse

__all__ = [
    "ALLOWED_TABLE_FUNCTIONS",
    "CHECKS",
    "DIALECT",
    "VALUE_FUNCTIONS",
    "Context",
    "Verdict",
    "guard",
]

DIALECT = "duckdb"

# Table functions a FROM clause may call. VALUES and UNNEST are the literal-row
# sources; range()/generate_series() build calendar spines for empty periods.
ALLOWED_TABLE_FUNCTIONS: tuple[str, ...] = ("unnest", "values", "range", "generate_series")

# Bare words DuckDB's binder turns into function calls when no column has the name
# (SQL-standard value functions); sqlglot keeps some of them as plain columns.
VALUE_FUNCTIONS: frozenset[str] = frozenset(
    {
        *("current_catalog", "current_date", "current_schema", "current_role"),
        *("current_time", "current_timestamp", "current_user", "localtime"),
        *("localtimestamp", "session_user", "user"),
    }
)

# Token types DuckDB reads as string constants: two of them in a row are one literal.
_STRING_TOKENS = frozenset(
    {
        *(TokenType.STRING, TokenType.BIT_STRING, TokenType.HEX_STRING, TokenType.BYTE_STRING),
        *(TokenType.NATIONAL_STRING, TokenType.NATIONAL_RAW_STRING, TokenType.RAW_STRING),
        *(TokenType.HEREDOC_STRING, TokenType.UNICODE_STRING),
    }
)
_TOKENIZER = DuckDB().tokenizer_class()
# The end of a string literal, whitespace or comments, and the start of another (with an
# E/X/B/N/U& prefix): matches every real adjacency and, rarely, more.
_MAYBE_ADJACENT = re.compile(r"['$](?:\s|--[^\n]*|/\*.*?\*/)+[A-Za-z&]*['$]", re.DOTALL)

# Statement-level nodes: writes, DDL, transactions, session and utility
# commands. Forbidden anywhere, which covers `WITH x AS (DELETE ... RETURNING *)`.
_SIDE_EFFECTS: dict[type[exp.Expr], str] = {
    exp.Insert: "INSERT (a write)",
    exp.Update: "UPDATE (a write)",
    exp.Delete: "DELETE (a write)",
    exp.Merge: "MERGE (a write)",
    exp.Copy: "COPY",
    exp.Into: "SELECT ... INTO (creates a table)",
    exp.Returning: "RETURNING (belongs to a write)",
    exp.Create: "CREATE (DDL)",
    exp.Drop: "DROP (DDL)",
    exp.Alter: "ALTER (DDL)",
    exp.TruncateTable: "TRUNCATE (a write)",
    exp.Comment: "COMMENT ON (DDL)",
    exp.Attach: "ATTACH",
    exp.Detach: "DETACH",
    exp.Install: "INSTALL",
    exp.Pragma: "PRAGMA",
    exp.Set: "SET",
    exp.Use: "USE",
    exp.Transaction: "a transaction statement",
    exp.Commit: "COMMIT",
    exp.Rollback: "ROLLBACK",
    exp.Describe: "DESCRIBE",
    exp.Show: "SHOW",
    exp.Summarize: "SUMMARIZE",
    exp.Export: "EXPORT",
    exp.Analyze: "ANALYZE",
    exp.Cache: "CACHE",
    exp.Uncache: "UNCACHE",
    exp.Refresh: "REFRESH",
    exp.LoadData: "LOAD DATA",
    exp.Grant: "GRANT",
    exp.Revoke: "REVOKE",
    exp.Kill: "KILL",
    exp.Execute: "EXECUTE",
    exp.Lock: "a locking clause",
    exp.Command: "a statement sqlglot could not parse (LOAD, CALL, RESET, VACUUM, ...)",
}

# Non-function nodes a read-only query is made of. Function nodes (exp.Func) are
# judged by name instead (denied_functions, table_functions).
_KNOWN_NODES: frozenset[type[exp.Expr]] = frozenset(
    {
        *(exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery, exp.Values),
        *(exp.With, exp.CTE, exp.From, exp.Join, exp.Lateral, exp.Where, exp.Group, exp.Having),
        *(exp.Qualify, exp.Order, exp.Ordered, exp.Limit, exp.LimitOptions, exp.Offset),
        *(exp.Fetch, exp.Distinct),
        *(exp.Window, exp.WindowSpec, exp.Filter, exp.WithinGroup, exp.IgnoreNulls),
        *(exp.RespectNulls, exp.Cube, exp.Rollup, exp.GroupingSets, exp.TableSample),
        *(exp.Pivot, exp.PivotAlias, exp.UnpivotColumns, exp.Table, exp.TableAlias, exp.Alias),
        *(exp.Aliases, exp.Identifier, exp.Column, exp.Star, exp.Literal, exp.Null, exp.Boolean),
        *(exp.Var, exp.DataType, exp.DataTypeParam, exp.Interval, exp.IntervalSpan, exp.Tuple),
        *(exp.Lambda, exp.Kwarg, exp.PropertyEQ, exp.Slice, exp.Bracket, exp.Dot, exp.Paren),
        *(exp.Comprehension, exp.PositionalColumn, exp.Between, exp.In, exp.Is, exp.Like),
        *(exp.ILike, exp.Glob, exp.SimilarTo, exp.Escape, exp.Any, exp.All, exp.Not, exp.Neg),
        *(exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ),
        *(exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.DPipe, exp.Overlaps),
        *(exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseNot, exp.BitwiseLeftShift),
        *(exp.BitwiseRightShift, exp.AtTimeZone, exp.FromTimeZone, exp.HexString),
        *(exp.BitString, exp.ByteString, exp.RawString, exp.UnicodeString, exp.National),
        *(exp.JSONPath, exp.JSONPathKey, exp.JSONPathRoot, exp.JSONPathSubscript),
        *(exp.JSONPathSlice, exp.JSONPathWildcard, exp.JSONPathUnion, exp.JSONPathSelector),
        exp.JSONKeyValue,
    }
)

# Query roots that only read. exp.Subquery is a parenthesised query.
_READ_ONLY_ROOTS = (exp.Select, exp.SetOperation, exp.Values, exp.Pivot, exp.Subquery)

# Names of each engine's catalog tables and schemas. A CTE may not take one: whether
# the CTE or the catalog wins is the engine's choice, and the documented rule is that a
# query never reads the catalog (issue 30: `WITH sqlite_master AS (...)` on SQLite).
_CATALOG_NAMES: dict[str, tuple[str, ...]] = {
    "duckdb": ("sqlite_*", "duckdb_*", "pragma_*", "pg_*", "information_schema"),
    "sqlite": ("sqlite_*",),
    "postgres": ("pg_*", "information_schema"),
}

# A FROM name that looks like a path, glob or URL (DuckDB would scan the file).
_FILE_LIKE = re.compile(r"[./\\:*?~\[\]{}]")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """The guard's verdict: the SqlGuarded event's ``passed``, ``violations``, ``ast_digest``.

    ``ast_digest`` is ``sha256:<hex>`` of the normalised AST (identifiers folded the
    DuckDB way, comments dropped, regenerated as DuckDB SQL) whenever the SQL
    parses to exactly one statement, also when a check rejects it; else None.
    """

    passed: bool
    violations: tuple[Violation, ...]
    ast_digest: str | None


class Context(NamedTuple):
    """What a check may read besides the tree: the published tables, the SQL text, the
    engine's sqlglot dialect and function allow-list, and the tree's nodes in ``walk()``
    order (walked once for every check; None: each check walks the tree itself)."""

    tables: frozenset[str]
    sql: str
    dialect: str = DIALECT
    catalog: functions.Catalog | None = None  # None: DuckDB's
    nodes: tuple[exp.Expr, ...] | None = None


Check = Callable[[exp.Expr, Context], Iterator[Violation]]


def fold(name: str) -> str:
    """Fold an identifier the way DuckDB compares them: ASCII letters only, quoted or not.

    >>> fold("Customers"), fold("ÄB")
    ('customers', 'Äb')
    """
    return name.translate(_ASCII_LOWER)


def _walk(tree: exp.Expr, ctx: Context) -> Iterable[exp.Expr]:
    """The tree's nodes in ``walk()`` order: the context's, walked once for all checks."""
    return tree.walk() if ctx.nodes is None else ctx.nodes


def _where(node: exp.Expr) -> str:
    """`` (line L, col C)`` where the first token of the node with a position starts, or ''."""
    for sub in node.walk():
        meta = sub.meta
        if "line" in meta:
            # sqlglot records the column where the token ends; report where it starts.
            col = meta["col"] - (meta["end"] - meta["start"])
            return f" (line {meta['line']}, col {col})"
    return ""


# ------------------------------------------------------------------------- checks


def read_only_root(tree: exp.Expr, ctx: Context) -> Iterator[Violation]:
    """The statement itself must be a query that only reads."""
    ok = isinstance(tree, _READ_ONLY_ROOTS)
    if isinstance(tree, exp.Subquery):
        ok = isinstance(tree.unnest(), _READ_ONLY_ROOTS) and not isinstance(
            tree.unnest(), exp.Subquery
        )
    if not ok:
        kind = _SIDE_EFFECTS.get(type(tree), type(tree).__name__)
        yield Violation(
            check="read_only_root",
            message=f"statement is {kind}, expected a read-only query "
            "(SELECT, set operation, VALUES, PIVOT or UNPIVOT)",
        )


def no_side_effects(tree: exp.Expr, ctx: Context) -> Iterator[Violation]:
    """No write, DDL, transaction, session or utility node anywhere in the tree."""
    for node in _walk(tree, ctx):
        kind = _SIDE_EFFECTS.get(type(node))
        if kind is not None:
            yield Violation(check="no_side_effects", message=f"{kind} is not allowed{_where(node)}")


def known_constructs(tree: exp.Expr, ctx: Context) -> Iterator[Violation]:
    """Fail closed: a non-function node the guard does not know is rejected."""
    for node in _walk(tree, ctx):
        cls = type(node)
        if isinstance(node, exp.Func) or cls in _KNOWN_NODES or cls in _SIDE_EFFECTS:
            continue
        yield Violation(
            check="known_constructs",
            message=f"unknown construct {cls.__name__}{_where(node)}: the guard rejects "
            "what it does not know",
        )


def _from_items(nodes: Iterable[exp.Expr]) -> Iterator[exp.Expr]:
    """Every FROM item: the sources of FROM, JOIN, LATERAL, PIVOT and a Table's inner call."""
    for node in nodes:
        if isinstance(node, exp.From | exp.Join | exp.Lateral):
            source = node.this
            if isinstance(source, exp.Func):
                yield source
        elif isinstance(node, exp.Pivot) and isinstance(node.this, exp.Func):
            yield node.this
        elif isinstance(node, exp.Table) and not isinstance(node.this, exp.Identifier):
            yield node


def _call_of(item: exp.Expr) -> exp.Expr:
    return item.this if isinstance(item, exp.Table) else item


def table_functions(tree: exp.Expr, ctx: Context) -> Iterator[Violation]:
    """Only UNNEST, VALUES, range() and generate_series() may be called in FROM."""
    for item in _from_items(_walk(tree, ctx)):
        call = item.this if isinstance(item, exp.Table) else item
        qualified = isinstance(item, exp.Table) and bool(item.args.get("db"))
        if isinstance(call, exp.Unnest) and not qualified:
            continue
        names = (
            function_calls.sqlglot_names(call, ctx.dialect) if isinstance(call, exp.Func) else ()
        )
        if (
            isinstance(call, exp.GenerateSeries)
            and not qualified
            and {"range", "generate_series"}.intersection(names)
        ):
            continue
        shown = names[0] if names else type(call).__name__
        yield Violation(
            check="table_functions",
            message=f"table function {shown}(){_where(item)} is not allowed in FROM; "
            f"allowed: {', '.join(ALLOWED_TABLE_FUNCTIONS)}",
        )


class _CteScopes:
    """Resolves bare table names to CTEs the way DuckDB scopes them.

    A CTE sees only the CTEs declared before it; it sees itself only inside the
    recursive term (right side of the top UNION) of a WITH RECURSIVE. Anywhere
    else DuckDB resolves the name to the catalog or even to a file, so the
    guard must not treat it as the CTE. Names per WITH are indexed once, so a
    long chain of CTEs stays linear.
    """

    def __init__(self) -> None:
        self._first: dict[int, dict[str, int]] = {}

    def _declared(self, with_: exp.With, name: str, before: int | None) -> bool:
        first = self._first.get(id(with_))
        if first is None:
            first = {}
            for position, cte in enumerate(with_.expressions):
                first.setdefault(fold(cte.alias_or_name), position)
            self._first[id(with_)] = first
        found = first.get(name)
        return found is not None and (before is None or found < before)

    def resolves(self, table: exp.Table, name: str) -> bool:
        """Whether the bare name at this table reference is a CTE in scope."""
        child: exp.Expr = table
        node = table.parent
        while node is not None:
            if isinstance(node, exp.CTE):
                with_ = node.parent
                if not isinstance(with_, exp.With):
                    raise broken("sqlglot gave a CTE outside a WITH")
                if self._declared(with_, name, before=node.index):
                    return True
                body = node.this
                if (
                    with_.args.get("recursive")
                    and fold(node.alias_or_name) == name
                    and isinstance(body, exp.Union)
                    and sqlparse.inside(table, body.expression)
                ):
                    return True
                # Continue above the query that owns this WITH: its other CTEs
                # (declared later) are not visible from here.
                owner = with_.parent
                if owner is None:
                    return False
                child, node = owner, owner.parent
                continue
            with_ = node.args.get("with_")
            if (
                isinstance(with_, exp.With)
                and with_ is not child
                and self._declared(with_, name, before=None)
            ):
                return True
            child, node = node, node.parent
        return False


def _named_tables(nodes: Iterable[exp.Expr]) -> Iterator[exp.Table]:
    for node in nodes:
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            yield node


def _unknown_tables(nodes: Iterable[exp.Expr], tables: frozenset[str]) -> Iterator[exp.Table]:
    """Named FROM items that are neither a published table nor a CTE in scope."""
    scopes = _CteScopes()
    for table in _named_tables(nodes):
        name = fold(table.name)
        if table.args.get("catalog"):
            yield table
        elif table.args.get("db"):
            # `main.x` is always the catalog's table, never a CTE named x.
            if fold(table.text("db")) != "main" or name not in tables:
                yield table
        elif name not in tables and not scopes.resolves(table, name):
            yield table


def _literal_part(table: exp.Table, ctx: Context) -> exp.Identifier | None:
    """The part of a table name written as a string literal (``FROM 'x'``), if any."""
    for key in ("this", "db", "catalog"):
        part = table.args.get(key)
        if (
            isinstance(part, exp.Identifier)
            and part.args.get("quoted")
            and ctx.sql[part.meta.get("start", 0) : part.meta.get("start", 0) + 1] == "'"
        ):
            return part
    return None


def file_references(tree: exp.Expr, ctx: Context) -> Iterator[Violation]:
    """No string literal, file, glob or URL names in FROM: DuckDB would scan them."""
    for table in _named_tables(_walk(tree, ctx)):
        literal = _literal_part(table, ctx)
        if literal is not None:
            yield Violation(
                check="file_references",
                message=f"FROM names the string literal {literal.name!r}{_where(table)}: "
                "DuckDB reads a string in FROM as a file name; name a published table "
                "(identifiers take double quotes)",
            )
    for table in _unknown_tables(_walk(tree, ctx), ctx.tables):
        if _literal_part(table, ctx) is None and _FILE_LIKE.search(table.name):
            yield Violation(
                check="file_references",
                message=f"FROM names a file, glob or URL {table.name!r}{_where(table)}; "
                "only published tables may be read",
            )


def table_references(tree: exp.Expr, ctx: Context) -> Iterator[Violation]:
    """Only published ``main`` tables (bare or ``main.``-qualified) and CTEs in scope."""
    tables = ctx.tables
    for table in _unknown_tables(_walk(tree, ctx), tables):
        if _FILE_LIKE.search(table.name) or _literal_part(table, ctx) is not None:
            continue  # reported by file_references
        parts = [table.text(k) for k in ("catalog", "db") if table.args.get(k)]
        shown = ".".join([*parts, table.name])
        if table.args.get("catalog") or (parts and fold(parts[-1]) != "main"):
            why = "is outside the bank's main schema"
        else:
            why = "is not a published table or a CTE in scope"
        listed = ", ".join(sorted(tables)) if len(tables) <= 12 else f"{len(tables)} tables"
        yield Violation(
            check="table_references",
            message=f"table {shown!r}{_where(table)} {why}; published: {listed}",
        )
    reserved = _CATALOG_NAMES.get(ctx.dialect, ())
    for node in _walk(tree, ctx):
        if isinstance(node, exp.CTE):
            name = fold(node.alias_or_name)
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in reserved):
                yield Violation(
                    check="table_references",
                    message=f"CTE {name!r}{_where(node)} has the name of a catalog table of "
                    f"{ctx.dialect}; name the CTE otherwise",
                )


def pivot_values(tree: exp.Expr, ctx: Context) -> Iterator[Violation]:
    """Every PIVOT column lists its values: DuckDB runs ``PIVOT t ON c`` as two statements."""
    for node in _walk(tree, ctx):
        if not isinstance(node, exp.Pivot) or node.args.get("unpivot"):
            continue
        for column in node.expressions if isinstance(node.this, exp.Expr) else ():
            if not isinstance(column, exp.In):
                yield Violation(
                    check="pivot_values",
                    message=f"PIVOT ON {column.sql(dialect=ctx.dialect)}{_where(column)} has no IN "
                    "list: DuckDB first creates an ENUM type of its values (a second "
                    "statement); list the values: ON column IN (...)",
                )


def function_allowlist(tree: exp.Expr, ctx: Context) -> Iterator[Violation]:
    """Every function call, anywhere, is on the allow-list generated from DuckDB's catalog
    (or the bank engine's); a call in FROM may also be one of its allowed table functions
    (which ``table_functions`` narrows further)."""
    sources = {id(_call_of(item)) for item in _from_items(_walk(tree, ctx))}
    table_ok = (ctx.catalog or functions.catalog()).from_functions
    for node in _walk(tree, ctx):
        if isinstance(node, exp.Func):
            if id(node) in sources and table_ok.intersection(
                function_calls.sqlglot_names(node, ctx.dialect)
            ):
                continue
            refused = function_calls.sqlglot_call_refusal(node, ctx.catalog, ctx.dialect)
            if refused is not None:
                name, why = refused
                cat = ctx.catalog or functions.catalog()
                changing = determinism.changing_value(cat, node, name)
                if changing is not None:  # one rule for the clock, also when it is a name
                    finding = determinism.Finding(
                        node, f"function {name}()", f"depends on {changing}"
                    )
                    yield Violation(check=determinism.CHECK, message=finding.message(_where(node)))
                    continue
                yield Violation(
                    check="function_allowlist",
                    message=f"function {name}(){_where(node)} {why}",
                )
        elif (
            isinstance(node, exp.Column)
            and not node.table
            and isinstance(node.this, exp.Identifier)
            and not node.this.args.get("quoted")
            and fold(node.name) in VALUE_FUNCTIONS
        ):
            yield Violation(
                check="function_allowlist",
                message=f"bare {fold(node.name)}{_where(node)} is DuckDB's "
                f"{fold(node.name)}() unless a column has that name; qualify the column "
                "(t.name) or quote it",
            )


def deterministic(tree: exp.Expr, ctx: Context) -> Iterator[Violation]:
    """Nothing that reads the clock, the host's zone, a sample or a random source, by the
    rules of the bank's engine (``ledger.harness.determinism``)."""
    for finding in determinism.findings(tree, _walk(tree, ctx), ctx.dialect, ctx.tables):
        yield Violation(check=determinism.CHECK, message=finding.message(_where(finding.node)))


def adjacent_literals(sql: str) -> tuple[Violation, ...]:
    """Violations for string literals in a row (separated only by whitespace or comments).

    DuckDB joins ``'orders'`` and ``'.csv'`` across a line break (also with a line
    comment between them) into one literal, a file name, where sqlglot reads the
    second as an alias: the two parsers would judge different statements. Any two
    string tokens in a row are refused, on one line too (DuckDB rejects those).
    The text is tokenized only when a cheap scan finds a quote, whitespace or a
    comment, and a quote in a row (a superset of the real cases).
    """
    if not _MAYBE_ADJACENT.search(sql):
        return ()
    found: list[Violation] = []
    previous_was_string = False
    for token in _TOKENIZER.tokenize(sql):
        is_string = token.token_type in _STRING_TOKENS
        if is_string and previous_was_string:
            line = sql.count("\n", 0, token.start) + 1
            col = token.start - sql.rfind("\n", 0, token.start)
            found.append(
                Violation(
                    check="adjacent_literals",
                    message=f"two string literals in a row (line {line}, col {col}): "
                    "DuckDB joins them into one literal across a line break; write one "
                    "literal or join them with ||",
                )
            )
        previous_was_string = is_string
    return tuple(found)


CHECKS: tuple[Check, ...] = (
    read_only_root,
    no_side_effects,
    known_constructs,
    table_functions,
    pivot_values,
    file_references,
    table_references,
    function_allowlist,
    deterministic,
)


# -------------------------------------------------------------------------- guard


def _parse(sql: str, dialect: str = DIALECT) -> tuple[list[exp.Expr], Violation | None]:
    """Parse with sqlglot; empty statements (``;`` alone, a trailing comment) are dropped."""
    if not sql.strip():
        return [], Violation(check="parse", message="empty SQL")
    try:
        statements = sqlparse.parse(sql, dialect)
    except ParseError as error:
        first = error.errors[0] if error.errors else {}
        reason = str(first.get("description", error))
        highlight = str(first.get("highlight") or "")
        if "<Token" in reason:  # show the offending text, not the token's repr
            reason = f"{reason.split('<Token')[0].strip()} {highlight!r}"
        at = ""
        if "line" in first:
            # sqlglot reports the column where the offending token ends.
            col = first["col"] - max(len(highlight) - 1, 0)
            at = f" at line {first['line']}, col {col}"
        return [], Violation(check="parse", message=f"does not parse{at}: {reason}")
    except SqlglotError as error:  # TokenError: unterminated string or comment
        return [], Violation(check="parse", message=f"does not parse: {error}")
    except RecursionError:
        return [], Violation(check="parse", message="does not parse: nested too deeply")
    real = [s for s in statements if s is not None and not isinstance(s, exp.Semicolon)]
    return real, None


def _digest(tree: exp.Expr, dialect: str) -> str:
    """``sha256:<hex>`` of the tree with its identifiers normalised, regenerated without
    comments (the string ``normalize_identifiers(tree.copy()).sql(comments=False)`` gives,
    made with one copy instead of three: issue 21).

    The shared parse is never changed: the copy is :func:`sqlparse.copy_tree`'s, whose
    nodes come in ``walk()`` order, so each identifier is normalised in the order
    ``normalize_identifiers`` would without walking the copy again. A tree with a
    ``case_sensitive`` meta comment (which prunes that walk) goes through
    ``normalize_identifiers`` itself.
    """
    normalised, nodes = sqlparse.copy_tree(tree)
    rules = Dialect.get_or_raise(dialect)
    if any(node.meta_get("case_sensitive") for node in nodes):
        normalize_identifiers(normalised, dialect=rules)
    else:
        for node in nodes:
            if isinstance(node, exp.Identifier):
                rules.normalize_identifier(node)
    # The copy is this function's own: the generator may change it instead of a copy of it.
    text = rules.generate(normalised, copy=False, comments=False)
    return sha256_hex(text.encode("utf-8"))


def guard(sql: str, tables: Collection[str], engine: str = "duckdb") -> Verdict:
    """Judge one model SQL against the bank's published ``main`` tables.

    Args:
        sql: the SQL text exactly as the model wrote it.
        tables: names of the published tables (compared case-insensitively).
        engine: the bank's engine: its sqlglot dialect parses the SQL and its
            function allow-list judges every call (``functions.engine_catalog``).

    Returns:
        A Verdict; ``passed`` is true only when there is no violation at all.

    Example:
        >>> guard("SELECT count(*) FROM orders", {"orders"}).passed
        True
        >>> [v.check for v in guard("SELECT * FROM read_csv('/etc/passwd')", {"orders"}).violations]
        ['table_functions', 'function_allowlist']
    """
    allowed = frozenset(fold(t) for t in tables if t)
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:  # no adapter decodes one, but fail closed all the same
        violation = Violation(
            check="parse",
            message=f"not valid Unicode text (a lone surrogate at character {exc.start})",
        )
        return Verdict(passed=False, violations=(violation,), ast_digest=None)
    if len(sql) > sqlparse.CACHED_CHARS:
        return _judge(sql, allowed, engine)
    return _judged(sql, allowed, engine)


def _judge(sql: str, allowed: frozenset[str], engine: str = "duckdb") -> Verdict:
    if not allowed:
        # Without this an empty allow-list would still let table-free queries through.
        violation = Violation(
            check="table_allowlist", message="no published tables given: every query is rejected"
        )
        return Verdict(passed=False, violations=(violation,), ast_digest=None)
    # Decided on the text's tokens before any parser runs, so the verdict on a deep text
    # is the same whatever sqlglot build or recursion limit is installed (issue 34).
    too_deep = depth.refusal(sql)
    if too_deep is not None:
        violation = Violation(check="too_complex", message=too_deep)
        return Verdict(passed=False, violations=(violation,), ast_digest=None)
    dialect, catalog = engine_rules(engine)
    statements, failure = _parse(sql, dialect)
    if failure is not None:
        return Verdict(passed=False, violations=(failure,), ast_digest=None)
    if len(statements) != 1:
        violation = Violation(
            check="single_statement",
            message=f"found {len(statements)} statements, expected exactly one",
        )
        return Verdict(passed=False, violations=(violation,), ast_digest=None)
    tree = statements[0]
    found: list[Violation] = list(adjacent_literals(sql))
    try:
        # One walk for every check (each used to walk the tree again: issue 21).
        ctx = Context(allowed, sql, dialect, catalog, tuple(tree.walk()))
        for check in CHECKS:
            for violation in check(tree, ctx):
                if violation not in found:
                    found.append(violation)
        digest = _digest(tree, dialect)
    except SqlglotError as error:
        # sqlglot read the text but cannot write it back (DuckDB's `date()` without its
        # argument): no digest can be made, so the SQL is refused as not parsed, never
        # raised (a model's answer must not stop a run).
        violation = Violation(check="parse", message=f"cannot be normalised by sqlglot: {error}")
        return Verdict(passed=False, violations=(*found, violation), ast_digest=None)
    except RecursionError:
        # sqlglot parses some chains (`- - - 1`) deeper than it can regenerate.
        violation = Violation(check="nesting", message="nested too deeply to check")
        return Verdict(passed=False, violations=(violation,), ast_digest=None)
    return Verdict(passed=not found, violations=tuple(found), ast_digest=digest)


# A pure function of (SQL, allow-list) with an immutable result: cached, because the
# same SQL is judged again for every variant database of the diagnostics.
_judged = functools.lru_cache(maxsize=256)(_judge)
