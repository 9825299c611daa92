"""DuckDB's bank build: a database file built deterministically, read back read-only.

The pinned DuckDB version, the fixed connection settings (UTC, one thread, no
external access, locked), the build of schema.sql and seed.sql (or a bank's data
files, loaded by DuckDB's own readers) into a file moved into place, the table
snapshot and one reference query's typed result. ``ledger.bank.build`` builds a
bank and freezes its gold with these; the DuckDB engine (``duckdb``) puts them
behind the engine contract.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.codec import digest
from ledger.engines.base import EngineQueryError
from ledger.engines.cells import encode_row
from ledger.engines.data_files import DATA_SQLITE, DataFiles, load_hint, parents_first
from ledger.errors import BankError, first_line
from ledger.events import Column, TableSchema

if TYPE_CHECKING:  # imported where used: a run's own process never loads DuckDB (issue 34)
    import duckdb

__all__ = [
    "REQUIRED_DUCKDB",
    "Progress",
    "build_sql",
    "connect",
    "load_data_files",
    "no_progress",
    "open_bank_db",
    "require_duckdb",
    "run_query",
    "table_digests",
    "table_snapshot",
]

REQUIRED_DUCKDB = "1.5.5"


def require_duckdb() -> None:
    """Refuse any DuckDB but the pinned one: another version may build or compute differently."""
    import duckdb

    found = duckdb.__version__
    if found != REQUIRED_DUCKDB:
        raise BankError(
            f"banks are built and executed with DuckDB {REQUIRED_DUCKDB} exactly; "
            f"this Python has DuckDB {found}",
            hint=f"install the pinned version: pip install duckdb=={REQUIRED_DUCKDB}",
        )


def connect(path: Path, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Open a bank database with fixed settings (UTC, one thread, no external access, locked)."""
    import duckdb

    require_duckdb()
    con = duckdb.connect(
        str(path),
        read_only=read_only,
        config={"enable_external_access": False, "threads": 1},
    )
    # TimeZone can only be set after connecting (ICU is loaded by then).
    con.execute("SET TimeZone='UTC'")
    con.execute("SET lock_configuration=true")
    return con


def open_bank_db(path: Path) -> duckdb.DuckDBPyConnection:
    """Open a built bank database read-only (how every later reader must open it)."""
    if not path.is_file():
        raise BankError(f"bank database {path} is missing", hint="publish the bank again")
    return connect(path, read_only=True)


#: Where progress lines go (``caseledger bank validate`` prints them to stderr).
Progress = Callable[[str], None]


def no_progress(_: str) -> None:
    """A :data:`Progress` that prints nothing."""
    return None


def build_sql(
    schema_sql: str,
    seed_sql: str,
    path: Path,
    *,
    where: str,
    data: DataFiles | None = None,
    progress: Progress = no_progress,
) -> None:
    """Run ``schema_sql`` then ``seed_sql`` into a new DuckDB file at ``path`` (atomic).

    With ``data`` (a bank's data files), the rows come from those files instead
    of ``seed_sql``: loaded by DuckDB's own CSV / Parquet readers on a connection
    that runs no bank SQL, after schema.sql created the tables.
    """
    import duckdb

    require_duckdb()
    if path.exists():
        raise BankError(f"refusing to overwrite {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        con = connect(tmp, read_only=False)
        try:
            for name, sql in (("schema.sql", schema_sql), ("seed.sql", seed_sql)):
                try:
                    con.execute(sql)
                except duckdb.Error as exc:
                    raise BankError(
                        f"{where}: {name}: DuckDB error: {first_line(exc)}",
                        hint=f"fix {name} so it runs in DuckDB {REQUIRED_DUCKDB}",
                    ) from None
            con.execute("CHECKPOINT")
        finally:
            con.close()
        if data is not None:
            load_data_files(tmp, data, where=where, progress=progress)
        os.replace(tmp, path)
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def load_data_files(
    db: Path, data: DataFiles, *, where: str, progress: Progress = no_progress
) -> None:
    """Load a bank's data files into the tables schema.sql created in the DuckDB file ``db``.

    Only this function's own statements run on the loading connection (external
    access is needed to read the files; no bank SQL runs there). CSV: header row,
    comma, ``"`` quotes, an empty field is NULL, each column read as the table's
    type. ``data.sqlite``: each table's rows pass through a temporary CSV file in
    which NULL and the empty string stay apart.
    """
    import duckdb

    con = duckdb.connect(str(db), config={"threads": 1})
    try:
        con.execute("SET TimeZone='UTC'")
        tables = {t.name: t for t in table_snapshot(con)}
        if data.kind == DATA_SQLITE:
            _load_from_sqlite(con, data, tables, db, where, progress)
        else:
            files = data.tables()
            for table in _parents_first(con, sorted(files)):
                name = files[table]
                if table not in tables:
                    raise BankError(
                        f"{where}: {name}: schema.sql creates no table {table!r}",
                        hint="name each data file after a table that schema.sql creates",
                    )
                table_def = tables[table]
                data.require_columns(table, tuple(c.name for c in table_def.columns))
                progress(f"loading table {table}")
                _load_file(con, table_def, data.paths[name], data.kind, f"{where}: {name}")
        con.execute("CHECKPOINT")
    finally:
        con.close()


def _load_file(
    con: duckdb.DuckDBPyConnection, table: TableSchema, path: Path, kind: str, where: str,
    *, quoted_nulls: bool = True,
) -> None:  # fmt: skip
    import duckdb

    target = _ident(table.name)
    if kind == "parquet":
        reader = f"read_parquet({_sql_string(str(path))})"
    else:
        columns = ", ".join(f"{_sql_string(c.name)}: {_sql_string(c.type)}" for c in table.columns)
        reader = (
            f"read_csv({_sql_string(str(path))}, header=true, auto_detect=false, "
            f"delim=',', quote='\"', escape='\"', nullstr='', "
            f"allow_quoted_nulls={'true' if quoted_nulls else 'false'}, columns={{{columns}}})"
        )
    try:
        # Paths and names from the bank folder and the built catalog, quoted as literals.
        con.execute(f"INSERT INTO {target} SELECT * FROM {reader}")  # noqa: S608
    except duckdb.Error as exc:
        raise BankError(
            f"{where}: cannot load table {table.name}: {first_line(exc)}",
            hint=load_hint(str(exc)),
        ) from None


def _load_from_sqlite(
    con: duckdb.DuckDBPyConnection,
    data: DataFiles,
    tables: dict[str, TableSchema],
    db: Path,
    where: str,
    progress: Progress = no_progress,
) -> None:
    for name in _parents_first(con, sorted(tables)):
        table = tables[name]
        progress(f"loading table {name}")
        columns = tuple(c.name for c in table.columns)
        tmp = db.with_name(f".{db.name}.{os.getpid()}.rows.csv")
        try:
            with tmp.open("w", encoding="utf-8", newline="") as handle:
                handle.write(",".join(_csv_cell(c) for c in columns) + "\n")
                for batch in data.rows(table.name, columns).batches():
                    try:
                        lines = [",".join(_csv_cell(v) for v in row) + "\n" for row in batch]
                    except TypeError:
                        raise BankError(
                            f"{where}: {DATA_SQLITE}: table {table.name} holds a BLOB, "
                            "which this conversion does not carry",
                            hint="publish the bank on the sqlite engine instead",
                        ) from None
                    handle.writelines(lines)
            _load_file(con, table, tmp, "csv", f"{where}: {DATA_SQLITE}", quoted_nulls=False)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def _parents_first(con: duckdb.DuckDBPyConnection, names: list[str]) -> list[str]:
    """``names`` ordered parents first by the foreign keys schema.sql declared."""
    keys = con.execute(
        "SELECT table_name, referenced_table FROM duckdb_constraints() "
        "WHERE constraint_type = 'FOREIGN KEY' AND schema_name = 'main' "
        "AND database_name = current_database()"
    ).fetchall()
    return parents_first(names, [(str(c), str(p)) for c, p in keys])


def _csv_cell(value: Any) -> str:
    """A CSV field in which NULL (unquoted empty) and '' (quoted) stay apart."""
    if value is None:
        return ""
    if isinstance(value, str):
        return '"' + value.replace('"', '""') + '"'
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(type(value).__name__)
    return repr(value)


def table_snapshot(con: duckdb.DuckDBPyConnection) -> tuple[TableSchema, ...]:
    """Every user table and view of ``main``, columns in declaration order, sorted by name."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE schema_name = 'main' AND NOT internal AND database_name = current_database() "
        "ORDER BY table_name, column_index"
    ).fetchall()
    tables: dict[str, list[Column]] = {}
    for table, column, type_name in rows:
        tables.setdefault(table, []).append(Column(name=column, type=type_name))
    return tuple(TableSchema(name=t, columns=tuple(cols)) for t, cols in sorted(tables.items()))


def table_digests(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Digest of each table's typed contents, rows in a total order (for determinism checks)."""
    out: dict[str, str] = {}
    for table in table_snapshot(con):
        quoted = '"' + table.name.replace('"', '""') + '"'
        # A table name from the database's own catalog, quoted as an identifier.
        rel = con.sql(f"SELECT * FROM {quoted} ORDER BY ALL")  # noqa: S608
        columns = [[c, str(t)] for c, t in zip(rel.columns, rel.types, strict=True)]
        out[table.name] = digest(
            {"columns": columns, "rows": [encode_row(r) for r in rel.fetchall()]}
        )
    return out


def run_query(
    con: duckdb.DuckDBPyConnection, sql: str
) -> tuple[tuple[Column, ...], list[tuple[Any, ...]]]:
    """Run one DuckDB query: its typed columns and raw rows.

    Raises duckdb.Error as DuckDB does, and EngineQueryError when ``sql`` is not
    exactly one statement returning rows.
    """
    statements = con.extract_statements(sql)
    if len(statements) != 1:
        raise EngineQueryError(f"must be exactly one statement, found {len(statements)}")
    rel = con.sql(sql)
    if rel is None:
        raise EngineQueryError("does not return rows (it must be a query)")
    columns = tuple(
        Column(name=n, type=str(t)) for n, t in zip(rel.columns, rel.types, strict=True)
    )
    return columns, rel.fetchall()
