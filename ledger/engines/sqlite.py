"""The SQLite engine: a bank as a SQLite file, a model's SQL in a locked-down worker process.

Build: the bank's schema and seed (SQLite SQL; a DuckDB bank is transpiled
first) run statement by statement into a temporary file beside the target,
which is then linked into place (never a half-built file under the final name,
never an overwrite). A bank that ships its data as a SQLite file is copied with
the backup API (:func:`build_from_file`). :func:`canonical_digest` hashes the
schema and the rows in a canonical order, so it does not depend on page layout,
insert order or VACUUM.

The gold runs on the sandboxed connection of ``sqlite_sandbox`` in this
process; a model's SQL runs in the worker of ``sqlite_worker``
(:class:`SQLiteExecutor`). Both type a result's columns by the same rule.
docs/engines.md "SQLite" has the details.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.codec import canonical_json
from ledger.engines.base import EngineQueryError
from ledger.engines.sqlite_sandbox import (
    open_sandboxed,
    readonly_uri,
    split_statements,
    statement_refusal,
    typed_result,
)
from ledger.engines.sqlite_worker import SQLiteExecutor
from ledger.errors import BankError, first_line
from ledger.events import Column, TableSchema

if TYPE_CHECKING:
    from ledger.engines.data_files import DataFiles

__all__ = [
    "DIALECT_NOTES",
    "SQLiteEngine",
    "SQLiteExecutor",
    "build_from_file",
    "build_sql",
    "canonical_digest",
    "table_schemas",
]

DIALECT_NOTES = (
    "The database is SQLite {version}: write SQLite SQL. Dates and times are TEXT "
    "('YYYY-MM-DD HH:MM:SS'), handled with date(), datetime() and strftime('%Y-%m', ts) "
    "(there is no date_trunc or EXTRACT); `/` between two integers is integer division "
    "(7 / 2 = 3), so write `x * 1.0 / y` for a fraction; REAL is an 8-byte double; "
    "'now', 'localtime' and random() are not allowed (an answer must not depend on when "
    "or where it runs)."
)

# ---------------------------------------------------------------- build, tables, digest


def _publish(tmp: Path, target: Path) -> None:
    """Put the finished file under its final name; never replace an existing file."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise BankError(f"refusing to overwrite {target}") from None
    except OSError:  # no hard links on this file system
        if target.exists():
            raise BankError(f"refusing to overwrite {target}") from None
        os.replace(tmp, target)


@contextlib.contextmanager
def _temporary_beside(target: Path) -> Iterator[Path]:
    if target.exists():
        raise BankError(f"refusing to overwrite {target}", hint="remove it or build elsewhere")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(handle)
    tmp = Path(name)
    try:
        yield tmp
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def build_sql(
    schema_sql: str, seed_sql: str, target: Path, *, data: DataFiles | None = None
) -> None:
    """Run schema.sql then seed.sql (SQLite SQL) into a new database file at ``target``.

    One transaction, statement by statement, into a temporary file beside
    ``target`` that is linked into place when complete. With ``data`` (CSV or
    Parquet data files) the rows come from the files instead of seed.sql.

    Raises:
        BankError: ``target`` exists, or a statement fails (naming the file,
            the statement's number and line, and SQLite's message).
    """
    target = Path(target)
    with _temporary_beside(target) as tmp:
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            con.execute("BEGIN")
            for name, text in (("schema.sql", schema_sql), ("seed.sql", seed_sql)):
                for number, (line, statement) in enumerate(split_statements(text), 1):
                    try:
                        con.execute(statement)
                    except sqlite3.Error as exc:
                        shown = " ".join(statement.split())[:80]
                        raise BankError(
                            f"{target}: {name}: statement {number} (line {line}): "
                            f"SQLite error: {first_line(exc)} (in: {shown})",
                            hint=f"fix {name} so it runs on SQLite {sqlite3.sqlite_version} "
                            "(a bank written for DuckDB is rewritten with sqlglot first: "
                            "check the statement it wrote)",
                        ) from None
            if data is not None:
                _insert_files(con, data, target)
            con.execute("COMMIT")
        finally:
            con.close()
        _publish(tmp, target)


def _insert_files(con: sqlite3.Connection, data: DataFiles, target: Path) -> None:
    tables = {t.name: t for t in table_schemas(con)}
    for table, name in sorted(data.tables().items()):
        schema = tables.get(table)
        if schema is None:
            raise BankError(
                f"{target}: {name}: schema.sql creates no table {table!r}",
                hint="name each data file after a table that schema.sql creates",
            )
        columns = tuple(c.name for c in schema.columns)
        marks = ", ".join("?" for _ in columns)
        statement = f"INSERT INTO {_quote(table)} VALUES ({marks})"  # noqa: S608
        try:
            for batch in data.rows(table, columns).batches():
                con.executemany(statement, batch)
        except sqlite3.Error as exc:
            raise BankError(
                f"{target}: {name}: cannot load table {table}: {first_line(exc)}",
                hint="each row needs one value per column of the table in schema.sql",
            ) from None


def check_schema_matches(schema_sql: str, database: Path) -> None:
    """Raise BankError unless ``schema_sql`` declares exactly the tables, views and
    columns (names and declared types, in order) of the SQLite file ``database``.

    A bank that ships ``data.sqlite`` shows schema.sql in its prompt: it must
    describe the file truly.
    """
    declared = sqlite3.connect(":memory:")
    try:
        for number, (line, statement) in enumerate(split_statements(schema_sql), 1):
            try:
                declared.execute(statement)
            except sqlite3.Error as exc:
                raise BankError(
                    f"schema.sql: statement {number} (line {line}): SQLite error: "
                    f"{first_line(exc)}",
                    hint="schema.sql must run on SQLite",
                ) from None
        want = {t.name: t.columns for t in table_schemas(declared)}
    finally:
        declared.close()
    con = _open_trusted(database)
    try:
        have = {t.name: t.columns for t in table_schemas(con)}
    finally:
        con.close()
    wrong = []
    for name in sorted(set(want) | set(have)):
        if name not in have:
            wrong.append(f"{name}: in schema.sql, not in data.sqlite")
        elif name not in want:
            wrong.append(f"{name}: in data.sqlite, not in schema.sql")
        elif want[name] != have[name]:
            shown = ", ".join(f"{c.name} {c.type}".strip() for c in have[name])
            wrong.append(f"{name}: columns differ (data.sqlite has {shown})")
    if wrong:
        raise BankError(
            "schema.sql does not describe data.sqlite: "
            + "; ".join(wrong[:5])
            + (f" (and {len(wrong) - 5} more)" if len(wrong) > 5 else ""),
            hint="write schema.sql from the file's own CREATE statements "
            "(sqlite3 data.sqlite .schema)",
        )


def build_from_file(source: Path, target: Path) -> None:
    """Copy an existing SQLite database (a bank's ``data.sqlite``) to ``target``.

    Uses SQLite's backup API (a consistent copy whatever the source's journal
    mode), checks the copy with ``PRAGMA quick_check`` and links it into place.

    Raises:
        BankError: the source is missing or not a sound SQLite database, or
            ``target`` exists.
    """
    source, target = Path(source), Path(target)
    if not source.is_file():
        raise BankError(f"{source}: SQLite database not found", hint="add data.sqlite to the bank")
    with _temporary_beside(target) as tmp:
        try:
            src = sqlite3.connect(Path(source).resolve().as_uri() + "?mode=ro", uri=True)
            try:
                dst = sqlite3.connect(tmp)
                try:
                    src.backup(dst)
                    check = dst.execute("PRAGMA quick_check").fetchall()
                finally:
                    dst.close()
            finally:
                src.close()
        except sqlite3.Error as exc:
            raise BankError(
                f"{source}: cannot read it as a SQLite database: {first_line(exc)}",
                hint="data.sqlite must be a SQLite 3 database file",
            ) from None
        if check != [("ok",)]:
            raise BankError(
                f"{source}: the SQLite database is damaged: {check[0][0]}",
                hint="rebuild data.sqlite",
            )
        _publish(tmp, target)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _objects(con: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """(name, type, sql) of every table and view of the bank, sorted by name."""
    rows = con.execute(
        "SELECT name, type, coalesce(sql, '') FROM sqlite_schema "
        "WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    ).fetchall()
    return sorted((str(n), str(t), str(s)) for n, t, s in rows)


def _columns(con: sqlite3.Connection, name: str) -> tuple[Column, ...]:
    rows = con.execute(
        "SELECT name, type FROM pragma_table_info(?) ORDER BY cid", (name,)
    ).fetchall()
    return tuple(Column(name=str(c), type=str(t).upper()) for c, t in rows)


def table_schemas(con: sqlite3.Connection) -> tuple[TableSchema, ...]:
    """Every table and view of the bank, columns in order with their declared types
    (upper-cased; "" where SQLite has none), sorted by name."""
    return tuple(TableSchema(name=n, columns=_columns(con, n)) for n, _, _ in _objects(con))


def _open_trusted(path: Path) -> sqlite3.Connection:
    path = Path(path)
    if not path.is_file():
        raise BankError(f"bank database {path} is missing", hint="publish the bank again")
    return sqlite3.connect(readonly_uri(path), uri=True, isolation_level=None)


_SAFE_INT = 2**53


def _tagged(value: Any) -> Any:
    """A cell for the canonical dump: the storage class stays visible (1, 1.0 and '1.0'
    differ), no floats."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if -_SAFE_INT < value < _SAFE_INT else {"integer": str(value)}
    if isinstance(value, float):
        return {"real": repr(value)}
    return {"blob": bytes(value).hex()}


def _dump_row(row: tuple[Any, ...]) -> bytes:
    """A row of the canonical dump: the JSON array of its cells as :func:`_tagged` writes
    them (the same bytes as ``canonical_json``; written directly, row by row, it is fast)."""
    return _ROW_ENCODER.encode(
        [
            v if (k := type(v)) is str or v is None or (k is int and -_SAFE_INT < v < _SAFE_INT)
            else {"real": repr(v)} if k is float
            else _tagged(v)
            for v in row
        ]
    )  # fmt: skip


_ROW_ENCODER = msgspec.json.Encoder(order="sorted")


def canonical_digest(path: Path) -> str:
    """``sha256:<hex>`` of a canonical dump of a SQLite bank database.

    The dump (docs/bank-format.md "Data files", format ``caseledger-sqlite-dump-2``)
    is the schema (tables and views sorted by name; a table's columns in order with
    their declared types, a view's SQL text) followed by each table's name and row
    count and then its rows, every cell tagged with its storage class. Rows are in
    SQLite's own order of ``ORDER BY typeof(c1), c1 COLLATE BINARY, typeof(c2), ...``
    (the sorting is SQLite's, spilling to temporary files: memory stays bounded
    whatever the size of the table); rows that order ties (equal but for a real's
    sign of zero, and duplicates) are written sorted by their bytes. So it does not
    depend on page layout, insert order, rowids that are not columns, VACUUM or a
    column's collation.
    """
    con = _open_trusted(path)
    try:
        # SQLite's sorter may use a helper thread (the order is the same either way).
        con.execute("PRAGMA threads = 2")
        objects = _objects(con)
        schema = [
            [n, kind, sql if kind == "view" else [[c.name, c.type] for c in _columns(con, n)]]
            for n, kind, sql in objects
        ]
        hasher = hashlib.sha256(canonical_json({"format": "caseledger-sqlite-dump-2"}))
        hasher.update(canonical_json(schema))
        for name, kind, _ in objects:
            if kind != "table":
                continue
            _dump_table(con, name, hasher)
    finally:
        con.close()
    return "sha256:" + hasher.hexdigest()


def _dump_table(con: sqlite3.Connection, name: str, hasher: Any) -> None:
    columns = [c.name for c in _columns(con, name)]
    # A table name from the database's own catalog, quoted as an identifier.
    (count,) = con.execute(f"SELECT count(*) FROM {_quote(name)}").fetchone()  # noqa: S608
    hasher.update(b"\n" + canonical_json([name, count]))
    order = ", ".join(f"{_quote(c)} COLLATE BINARY" for c in columns)
    cursor = con.execute(
        f"SELECT * FROM {_quote(name)}" + (f" ORDER BY {order}" if order else "")  # noqa: S608
    )
    update, dump = hasher.update, _dump_row
    # Rows the order ties (equal as SQLite compares them: 1 and 1.0, 0.0 and -0.0,
    # duplicates) come out in any order; they are equal in Python too and adjacent,
    # so each such run is written sorted by its bytes, kept as distinct rows with
    # their counts (a run of a million duplicates costs one row).
    last: tuple[Any, ...] | None = None
    first = b""
    run: dict[bytes, int] | None = None
    for row in cursor:
        dumped = dump(row)
        if row == last:
            if run is None:
                run = {first: 1}
            run[dumped] = run.get(dumped, 0) + 1
            continue
        if run is not None:
            _write_run(run, update)
            run = None
        elif last is not None:
            update(b"\n" + first)
        first, last = dumped, row
    if run is not None:
        _write_run(run, update)
    elif last is not None:
        update(b"\n" + first)


def _write_run(run: dict[bytes, int], update: Any) -> None:
    for dumped in sorted(run):
        line = b"\n" + dumped
        for _ in range(run[dumped]):
            update(line)


class SQLiteEngine:
    """SQLite as linked into Python's ``sqlite3``, in a locked-down worker process."""

    name = "sqlite"
    dialect = "sqlite"

    def version(self) -> str:
        """The linked SQLite library's version (e.g. ``3.40.1``)."""
        return sqlite3.sqlite_version

    def dialect_notes(self) -> str:
        """What the prompt says about the SQL to write."""
        return DIALECT_NOTES.format(version=sqlite3.sqlite_version)

    def build(
        self, schema_sql: str, seed_sql: str, target: Path, *, data: DataFiles | None = None
    ) -> None:
        """Build the database file at ``target`` (see :func:`build_sql`); a bank whose
        data is ``data.sqlite`` gets a copy of that file (:func:`build_from_file`),
        once schema.sql is checked to describe it (:func:`check_schema_matches`)."""
        if data is not None and data.kind == "data.sqlite":
            check_schema_matches(schema_sql, data.sqlite_file())
            build_from_file(data.sqlite_file(), target)
            return
        build_sql(schema_sql, seed_sql, target, data=data)

    def tables(self, database: Path) -> tuple[TableSchema, ...]:
        """The tables and views of the built database (:func:`table_schemas`)."""
        con = _open_trusted(database)
        try:
            return table_schemas(con)
        finally:
            con.close()

    def reference(
        self, database: Path, sql: str
    ) -> tuple[tuple[Column, ...], list[tuple[Any, ...]]]:
        """Run one reference query on the gold's sandboxed connection: typed columns and
        every row (coerced as :func:`column_plan` says)."""
        count = len(split_statements(sql))
        if count != 1:
            raise EngineQueryError(f"must be exactly one statement, found {count}")
        why = statement_refusal(sql)
        if why is not None:
            raise EngineQueryError(why)
        if not Path(database).is_file():
            raise BankError(f"bank database {database} is missing", hint="publish the bank again")
        con, authorizer = open_sandboxed(Path(database))
        try:
            cursor = con.execute(sql)
            names = [str(d[0]) for d in cursor.description or ()]
            rows = cursor.fetchall()
        except sqlite3.Error as exc:
            if authorizer.denied:
                raise EngineQueryError(authorizer.refusal()) from None
            raise EngineQueryError(first_line(exc)) from None
        finally:
            con.close()
        if not names:
            raise EngineQueryError("does not return rows (it must be a query)")
        return typed_result(names, rows)

    def executor(
        self, database: Path, *, timeout_s: float = 5.0, memory_limit: str = "512MB"
    ) -> SQLiteExecutor:
        """A sandboxed executor over ``database`` (:class:`SQLiteExecutor`)."""
        return SQLiteExecutor(database, timeout_s=timeout_s, memory_limit=memory_limit)
