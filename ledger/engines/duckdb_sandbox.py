"""The DuckDB SQL worker's sandbox: its own parse check and its shadowed functions.

Part of ``ledger.engines.duckdb_worker`` (the child side): :func:`connect_sandboxed` opens
a bank database with the worker's locked-down settings; ``Sandbox`` holds the worker's two
connections, one that reads a statement with DuckDB's own parser
(:func:`duckdb_refusals`: one query, known tables only, no random or clock functions)
and one that runs it with every denied function shadowed by a raising macro
(:func:`shadow_denied_functions`).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from ledger.engines import functions

__all__ = ["Sandbox", "connect_sandboxed", "duckdb_refusals", "shadow_denied_functions"]


def connect_sandboxed(db_path: str | Path, *, memory_limit: str = "512MB") -> Any:
    """Open a bank database read-only with the worker's locked-down settings, in this process.

    The worker calls this in its own process.  Called directly it gives the same
    DuckDB settings without the process boundary, the timeout or the kill: use it
    only for trusted SQL (benchmarks, differential checks), never for a model's.
    """
    import duckdb

    con = duckdb.connect(
        str(db_path),
        read_only=True,
        config={
            "enable_external_access": False,
            "memory_limit": memory_limit,
            "threads": 1,
            "allow_community_extensions": False,
            "allow_unsigned_extensions": False,
            "autoload_known_extensions": False,
            "autoinstall_known_extensions": False,
            "allow_persistent_secrets": False,
            # The default names the user's home directory (current_setting would show it).
            "secret_directory": "/nonexistent/caseledger",
            # No spilling: a big query hits the memory limit instead of writing temp files.
            "temp_directory": "",
        },
    )
    # TimeZone only after connecting: ICU is not loaded while the config is applied.
    con.execute("SET TimeZone='UTC'")
    con.execute("SET lock_configuration=true")
    return con


# --------------------------------------------------------------- DuckDB's own parse check

# Query nodes, table references and expression classes of DuckDB's parse tree
# (json_serialize_sql) a read-only SELECT is made of. Anything else is refused.
_QUERY_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE"})
_TABLE_REFS = frozenset(
    {"BASE_TABLE", "JOIN", "SUBQUERY", "TABLE_FUNCTION", "EXPRESSION_LIST", "EMPTY", "PIVOT"}
)
_EXPRESSIONS = frozenset(
    {
        *("BETWEEN", "CASE", "CAST", "COLLATE", "COLUMN_REF", "COMPARISON", "CONJUNCTION"),
        *("CONSTANT", "FUNCTION", "LAMBDA", "OPERATOR", "STAR", "SUBQUERY", "WINDOW"),
        *("POSITIONAL_REFERENCE", "LAMBDA_REF"),
    }
)
# Bare words DuckDB's binder turns into function calls (same list as the guard's).
_VALUE_FUNCTIONS = frozenset(
    {
        *("current_catalog", "current_date", "current_schema", "current_role"),
        *("current_time", "current_timestamp", "current_user", "localtime"),
        *("localtimestamp", "session_user", "user"),
    }
)
_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def duckdb_refusals(
    parsed: Any, tables: frozenset[str], schemas: frozenset[str] = frozenset({"main"})
) -> list[str]:
    """Why DuckDB's parse tree of one statement may not run; empty when it may.

    ``parsed`` is the decoded result of ``json_serialize_sql``; ``tables`` the
    published ``main`` tables (folded); ``schemas`` the schema names of the
    database (a function qualified with one of them other than ``main`` is
    refused; another qualifier is DuckDB's method-call syntax on a column).
    Pure: walks the tree iteratively, so depth cannot overflow the stack.
    """
    if not isinstance(parsed, dict):
        return ["DuckDB's parser returned no tree"]
    if parsed.get("error"):
        return [f"DuckDB cannot serialize it: {parsed.get('error_message', 'unknown error')}"]
    statements = parsed.get("statements")
    if not isinstance(statements, list) or len(statements) != 1:
        count = len(statements) if isinstance(statements, list) else 0
        return [f"DuckDB parses {count} statements, expected exactly one SELECT"]
    catalog = functions.catalog()
    found: list[str] = []
    stack: list[tuple[Any, frozenset[str]]] = [(statements[0].get("node"), frozenset())]
    while stack and len(found) < 5:
        value, ctes = stack.pop()
        if isinstance(value, list):
            stack.extend((v, ctes) for v in value)
            continue
        if not isinstance(value, dict):
            continue
        rest = dict(value)
        kind = value.get("type")
        klass = value.get("class")
        if isinstance(klass, str):
            found.extend(_expression_refusals(value, catalog, schemas))
            if klass == "FUNCTION" or klass == "WINDOW":
                rest.pop("function_name", None)
        elif isinstance(kind, str) and kind.endswith("_NODE") and "modifiers" in value:
            if kind not in _QUERY_NODES:
                found.append(f"query node {kind} is not a SELECT")
            if value.get("sample") is not None:  # the guard's `deterministic` (issue 30)
                found.append(_SAMPLE)
            ctes = _push_ctes(rest, ctes, stack)
            if kind == "RECURSIVE_CTE_NODE":
                name = str(value.get("cte_name", "")).translate(_FOLD)
                stack.append((rest.pop("left", None), ctes))
                stack.append((rest.pop("right", None), ctes | {name}))
        elif isinstance(kind, str) and "alias" in value and "sample" in value:
            found.extend(_table_refusals(value, rest, tables, ctes))
        stack.extend((v, ctes) for v in rest.values())
    return found


_SAMPLE = "a sample (USING SAMPLE, TABLESAMPLE) reads random rows: not reproducible"


def _push_ctes(
    node: dict[str, Any], ctes: frozenset[str], stack: list[tuple[Any, frozenset[str]]]
) -> frozenset[str]:
    """Push each CTE body with the CTEs declared before it; return the scope of the rest."""
    entries = (node.pop("cte_map", None) or {}).get("map") or []
    scope = ctes
    for entry in entries:
        stack.append((entry.get("value"), scope))
        scope = scope | {str(entry.get("key", "")).translate(_FOLD)}
    return scope


def _table_refusals(
    ref: dict[str, Any], rest: dict[str, Any], tables: frozenset[str], ctes: frozenset[str]
) -> list[str]:
    kind = ref["type"]
    if ref.get("sample") is not None:
        return [_SAMPLE]
    if kind not in _TABLE_REFS:
        return [f"table reference {kind} is not allowed (DESCRIBE, SHOW, SUMMARIZE, ...)"]
    if ref.get("at_clause") is not None:
        return ["time travel (AT ...) is not allowed"]
    if kind == "BASE_TABLE":
        catalog_name = str(ref.get("catalog_name") or "")
        schema = str(ref.get("schema_name") or "").translate(_FOLD)
        name = str(ref.get("table_name") or "")
        folded = name.translate(_FOLD)
        if catalog_name or schema not in ("", "main"):
            shown = ".".join(p for p in (catalog_name, schema, name) if p)
            return [f"table {shown!r} is outside the bank's main schema"]
        if (schema == "" and folded in ctes) or folded in tables:
            return []
        return [f"table {name!r} is not a published table or a CTE in scope"]
    if kind == "TABLE_FUNCTION":
        call = rest.pop("function", None)
        if not isinstance(call, dict) or call.get("class") != "FUNCTION":
            return ["a table function DuckDB does not name"]
        name = str(call.get("function_name", "")).translate(_FOLD)
        schema = str(call.get("schema") or "").translate(_FOLD)
        rest["arguments"] = [call.get("children"), call.get("filter"), call.get("order_bys")]
        if call.get("catalog") or schema not in ("", "main") or name not in functions.ALLOWED_FROM:
            return [f"table function {name}() is not allowed in FROM"]
    return []


def _expression_refusals(
    expr: dict[str, Any], catalog: functions.Catalog, schemas: frozenset[str]
) -> list[str]:
    klass = expr["class"]
    if klass not in _EXPRESSIONS:
        return [f"expression {klass} is not allowed (parameters and unknown constructs)"]
    if klass == "COLUMN_REF":
        names = expr.get("column_names") or []
        if len(names) == 1 and str(names[0]).translate(_FOLD) in _VALUE_FUNCTIONS:
            return [f"bare {names[0]} is DuckDB's {names[0]}() function"]
        return []
    if klass not in ("FUNCTION", "WINDOW"):
        return []
    name = str(expr.get("function_name", ""))
    schema = str(expr.get("schema") or "").translate(_FOLD)
    if expr.get("catalog") or (schema not in ("", "main") and schema in schemas | _SYSTEM):
        return [f"function {name}() is qualified with a catalog or schema"]
    why = catalog.call_refusal(name)
    # age(x) is the age from today (the guard's `deterministic`, issue 30); `x.age()`
    # (method-call syntax: a qualifier and no children) is age(x) too.
    arguments = len(expr.get("children") or []) + (1 if schema or expr.get("catalog") else 0)
    if why is None and name.translate(_FOLD) == "age" and arguments == 1:
        why = "with one argument is the age from today (the clock): not reproducible"
    return [] if why is None else [f"function {name}() {why}"]


_SYSTEM = frozenset({"pg_catalog", "information_schema", "system", "temp"})


def serialize_query(sql: str) -> tuple[str, list[str]]:
    """The query (and its parameters) that asks DuckDB for its parse tree of ``sql``.

    The text goes in as a string literal with its quotes doubled (DuckDB's standard
    string literals have no other escape), which is the same value as a bound
    parameter: DuckDB's Python client spends about 0.2 ms more on a query with a
    parameter than on one without (issue 34). A text with a NUL character (a query
    string ends at its first NUL) or one that is not valid Unicode is bound as a
    parameter, as before.

    >>> serialize_query("SELECT 'it''s'")[0]
    "SELECT json_serialize_sql('SELECT ''it''''s''')"
    >>> serialize_query("SELECT 1\\x00")
    ('SELECT json_serialize_sql(?)', ['SELECT 1\\x00'])
    """
    if "\x00" in sql or not _encodable(sql):
        return "SELECT json_serialize_sql(?)", [sql]
    return "SELECT json_serialize_sql('" + sql.replace("'", "''") + "')", []


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: How many of its last texts' refusals a worker remembers (``Sandbox.refusal``).
REFUSALS_KEPT = 256
REFUSAL_KEPT_CHARS = 65536


class Sandbox:
    """The worker's two connections: one checks statements, one runs them (shadowed)."""

    def __init__(self, con: Any) -> None:
        self.check = con
        rows = con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
            "AND database_name = current_database() UNION "
            "SELECT view_name FROM duckdb_views() WHERE schema_name = 'main' "
            "AND database_name = current_database() AND NOT internal"
        ).fetchall()
        self.tables = frozenset(str(r[0]).translate(_FOLD) for r in rows)
        rows = con.execute("SELECT DISTINCT schema_name FROM duckdb_schemas()").fetchall()
        self.schemas = frozenset(str(r[0]).translate(_FOLD) for r in rows)
        self.query = con.cursor()
        shadow_denied_functions(self.query)
        # DuckDB's reading of a text, kept for the texts seen last (issue 34: a run sends
        # the same SQL many times); the answer depends on the text alone (the tables and
        # schemas are fixed for the worker's life).
        self._kept = functools.lru_cache(maxsize=REFUSALS_KEPT)(self._refusal)

    def refusal(self, sql: str) -> str | None:
        """Why the worker refuses ``sql`` (DuckDB's own reading of it), or None; the answers
        for the last :data:`REFUSALS_KEPT` texts of up to :data:`REFUSAL_KEPT_CHARS` are
        remembered."""
        return self._kept(sql) if len(sql) <= REFUSAL_KEPT_CHARS else self._refusal(sql)

    def _refusal(self, sql: str) -> str | None:
        import duckdb

        try:
            raw = self.check.execute(*serialize_query(sql)).fetchone()[0]
            found = duckdb_refusals(json.loads(raw), self.tables, self.schemas)
        except duckdb.Error as exc:
            found = [f"DuckDB cannot parse it: {str(exc).splitlines()[0]}"]
        except RecursionError:
            found = ["nested too deeply to check"]
        if not found:
            return None
        return "refused by the worker's DuckDB parse check: " + "; ".join(found)


def shadow_denied_functions(con: Any) -> int:
    """Shadow every denied function on ``con`` with a temporary macro that raises an error.

    DuckDB looks an unqualified (or ``main.``-qualified) name up in the temp
    schema first, so ``current_setting('home_directory')`` or
    ``duckdb_databases()`` fail on this connection even when both checks are
    bypassed. ``system.main.<name>`` still reaches the built-in: DuckDB 1.5.5
    cannot disable functions (docs/sandbox.md). Returns the number of macros.
    """
    scalar: dict[str, None] = {}
    table: dict[str, None] = {}
    catalog = functions.catalog()
    allowed = catalog.calls | catalog.from_functions
    for entry in catalog.entries:
        name = functions.fold(entry.name)
        if entry.allowed or name in allowed or not name.replace("_", "a").isalnum():
            continue
        if entry.type in functions.CALL_TYPES:
            scalar[name] = None
        elif entry.type in ("table", "table_macro", "pragma"):
            table[name] = None
    params = "a := NULL, b := NULL, c := NULL, d := NULL"
    statements = [
        f"CREATE TEMP MACRO \"{n}\"({params}) AS error('{n}() is disabled in the SQL worker')"
        for n in scalar
    ]
    statements += [
        f'CREATE TEMP MACRO "{n}"({params}) AS TABLE '
        f"SELECT error('{n}() is disabled in the SQL worker') AS disabled"
        for n in table
        if n not in scalar
    ]
    con.execute(";\n".join(statements))
    return len(statements)
