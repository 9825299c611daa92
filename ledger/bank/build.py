"""Build a bank into DuckDB deterministically, snapshot its tables, freeze typed gold."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import msgspec

from ledger.bank.data import DATA_SQLITE, DataFiles, load_hint, parents_first
from ledger.bank.model import Bank, CaseDef
from ledger.bank.problems import Problems
from ledger.codec import digest
from ledger.engines.cells import encode_row
from ledger.errors import BankError, DiskFullError, LedgerError, disk_full
from ledger.events import BuildSettings, Column, ForeignKeyViolation, GoldResult, TableSchema
from ledger.harness import determinism

__all__ = [
    "BUILD_SETTINGS",
    "REQUIRED_DUCKDB",
    "Progress",
    "build_database",
    "build_settings",
    "build_sql",
    "connect",
    "freeze_gold",
    "freeze_gold_at",
    "gold_digest",
    "open_bank_db",
    "require_duckdb",
    "run_query",
    "table_digests",
    "table_snapshot",
    "tables_at",
]

REQUIRED_DUCKDB = "1.5.5"
BUILD_SETTINGS = BuildSettings(
    duckdb_version=REQUIRED_DUCKDB, timezone="UTC", threads=1, external_access=False
)


def build_settings(bank: Bank) -> BuildSettings:
    """The BuildSettings a bank is published with (a DuckDB bank with seed.sql:
    :data:`BUILD_SETTINGS`). A bank with data files names their kind and, for
    ``data.sqlite``, records the foreign keys its rows break."""
    settings = BUILD_SETTINGS
    if bank.engine != "duckdb":
        from ledger.engines import get_engine

        settings = BuildSettings(
            duckdb_version=REQUIRED_DUCKDB,
            timezone="UTC",
            threads=1,
            external_access=False,
            engine=bank.engine,
            engine_version=get_engine(bank.engine).version(),
            transpiled_from=bank.written_for if bank.written_for != bank.engine else None,
        )
    elif bank.written_for != "duckdb":  # a bank written for another engine, run on DuckDB
        settings = msgspec.structs.replace(settings, transpiled_from=bank.written_for)
    data = bank.source.data
    if data is None:
        return settings
    violations: tuple[ForeignKeyViolation, ...] = ()
    if data.kind == DATA_SQLITE:
        from ledger.engines.sqlite_integrity import foreign_key_violations

        violations = foreign_key_violations(data.sqlite_file())
    return msgspec.structs.replace(
        settings, data_source=data.kind, foreign_key_violations=violations
    )


def require_duckdb() -> None:
    """Refuse any DuckDB but the pinned one: another version may build or compute differently."""
    found = duckdb.__version__
    if found != REQUIRED_DUCKDB:
        raise BankError(
            f"banks are built and executed with DuckDB {REQUIRED_DUCKDB} exactly; "
            f"this Python has DuckDB {found}",
            hint=f"install the pinned version: pip install duckdb=={REQUIRED_DUCKDB}",
        )


def connect(path: Path, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Open a bank database with fixed settings (UTC, one thread, no external access, locked)."""
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


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


#: Where progress lines go (``caseledger bank validate`` prints them to stderr).
Progress = Callable[[str], None]


def _silent(_: str) -> None:
    return None


def build_database(bank: Bank, path: Path, *, progress: Progress = _silent) -> None:
    """Build ``bank`` into a new database at ``path`` on the bank's engine.

    DuckDB runs schema.sql then seed.sql (normalised text); another engine gets
    them in its own dialect (``Bank.engine_sql``). Built into a temporary file
    beside ``path`` and moved into place, so a half-built database never sits
    under the final name. ``progress`` gets "building ..." and, for data files on
    DuckDB, "loading table <name>" per table.
    """
    data = bank.source.data
    progress(f"building {bank.ref} on {bank.engine}")
    try:
        if bank.engine != "duckdb":
            from ledger.engines import get_engine

            get_engine(bank.engine).build(
                bank.engine_sql(bank.schema_sql), bank.engine_sql(bank.seed_sql), path, data=data
            )
            return
        build_sql(
            bank.engine_sql(bank.schema_sql),
            bank.engine_sql(bank.seed_sql),
            path,
            where=f"bank {bank.ref}",
            data=data,
            progress=progress,
        )
    except LedgerError:
        raise
    except Exception as exc:
        # DuckDB reports a full disk as an IOException or, at CHECKPOINT, a
        # FatalException; SQLite as "database or disk is full". The half-built file is
        # already removed (the builders clean up their temporary name).
        if disk_full(exc):
            raise DiskFullError(
                path.parent, f"building the database of bank {bank.ref} on {bank.engine}"
            ) from None
        raise


def build_sql(
    schema_sql: str,
    seed_sql: str,
    path: Path,
    *,
    where: str,
    data: DataFiles | None = None,
    progress: Progress = _silent,
) -> None:
    """Run ``schema_sql`` then ``seed_sql`` into a new DuckDB file at ``path`` (atomic).

    With ``data`` (a bank's data files), the rows come from those files instead
    of ``seed_sql``: loaded by DuckDB's own CSV / Parquet readers on a connection
    that runs no bank SQL, after schema.sql created the tables.
    """
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
                        f"{where}: {name}: DuckDB error: {_first_line(exc)}",
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


def load_data_files(db: Path, data: DataFiles, *, where: str, progress: Progress = _silent) -> None:
    """Load a bank's data files into the tables schema.sql created in the DuckDB file ``db``.

    Only this function's own statements run on the loading connection (external
    access is needed to read the files; no bank SQL runs there). CSV: header row,
    comma, ``"`` quotes, an empty field is NULL, each column read as the table's
    type. ``data.sqlite``: each table's rows pass through a temporary CSV file in
    which NULL and the empty string stay apart.
    """
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
            f"{where}: cannot load table {table.name}: {_first_line(exc)}",
            hint=load_hint(str(exc)),
        ) from None


def _load_from_sqlite(
    con: duckdb.DuckDBPyConnection,
    data: DataFiles,
    tables: dict[str, TableSchema],
    db: Path,
    where: str,
    progress: Progress = _silent,
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


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Decimal):
        return not value.is_finite()
    if isinstance(value, list | tuple):
        return any(_non_finite(v) for v in value)
    if isinstance(value, dict):
        return any(_non_finite(v) for v in value.values())
    return False


Query = Callable[[str], tuple[tuple[Column, ...], list[tuple[Any, ...]]]]


def run_query(
    con: duckdb.DuckDBPyConnection, sql: str
) -> tuple[tuple[Column, ...], list[tuple[Any, ...]]]:
    """Run one DuckDB query: its typed columns and raw rows.

    Raises duckdb.Error as DuckDB does, and EngineQueryError when ``sql`` is not
    exactly one statement returning rows.
    """
    from ledger.engines.base import EngineQueryError

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


def _run_reference(
    query: Query, bank: Bank, case: CaseDef, problems: Problems
) -> GoldResult | None:
    from ledger.engines.base import EngineQueryError

    def bad(message: str, field: str = "reference_sql") -> None:
        line = bank.line_of(case, field)
        problems.add("cases.yaml", message, line=line, case=case.id, field=field)

    sql = bank.engine_sql(case.reference_sql)
    # Issue 30: a gold that reads the clock or a random source is a different gold
    # tomorrow; the rule is the guard's own `deterministic` check, on the bank's engine.
    changing = determinism.refusals(sql, bank.engine)
    if changing:
        bad(
            f"not reproducible on {bank.engine}: {' / '.join(changing)}; "
            "rewrite it with fixed values"
        )
        return None
    try:
        columns, raw_rows = query(sql)
    except EngineQueryError as exc:
        bad(f"fails on {bank.engine}: {exc}" if bank.engine != "duckdb" else str(exc))
        return None
    except duckdb.Error as exc:
        bad(f"fails to execute: {_first_line(exc)}")
        return None
    if any(_non_finite(v) for row in raw_rows for v in row):
        bad("gold result contains NaN or Infinity (e.g. a division by zero); fix the query")
        return None
    bound = case.row_bound(len(raw_rows))
    if len(raw_rows) >= bound:
        bad(
            f"must exceed the gold row count: gold has {len(raw_rows)} rows, max_rows is {bound}",
            "max_rows",
        )
    rows = tuple(tuple(encode_row(r)) for r in raw_rows)
    body = {"columns": columns, "rows": rows}
    return GoldResult(case_id=case.id, columns=columns, rows=rows, digest=digest(body))


def freeze_gold(con: duckdb.DuckDBPyConnection, bank: Bank) -> tuple[GoldResult, ...]:
    """Execute every reference SQL on a read-only connection and freeze its typed result.

    Raises one BankError listing every case whose reference SQL fails, returns
    NaN/Infinity, or returns as many rows as max_rows or more.
    """
    return _freeze(lambda sql: run_query(con, sql), bank)


def freeze_gold_at(
    db_path: Path, bank: Bank, *, progress: Progress = _silent
) -> tuple[GoldResult, ...]:
    """:func:`freeze_gold` on the bank's own engine, over the database built at ``db_path``
    (``progress`` gets "freezing gold k/N" before each case)."""
    if bank.engine == "duckdb":
        con = open_bank_db(db_path)
        try:
            return _freeze(lambda sql: run_query(con, sql), bank, progress)
        finally:
            con.close()
    from ledger.engines import get_engine

    engine = get_engine(bank.engine)
    return _freeze(lambda sql: engine.reference(db_path, sql), bank, progress)


def tables_at(db_path: Path, bank: Bank) -> tuple[TableSchema, ...]:
    """The tables of the database built at ``db_path`` on the bank's own engine."""
    if bank.engine == "duckdb":
        con = open_bank_db(db_path)
        try:
            return table_snapshot(con)
        finally:
            con.close()
    from ledger.engines import get_engine

    return get_engine(bank.engine).tables(db_path)


def _freeze(query: Query, bank: Bank, progress: Progress = _silent) -> tuple[GoldResult, ...]:
    problems = Problems(bank.ref)
    gold = []
    for k, case in enumerate(bank.cases, 1):
        progress(f"freezing gold {k}/{len(bank.cases)}")
        gold.append(_run_reference(query, bank, case, problems))
    problems.raise_if_any()
    return tuple(g for g in gold if g is not None)


def gold_digest(gold: tuple[GoldResult, ...]) -> str:
    """Digest over every case's gold digest, in case order."""
    return digest([[g.case_id, g.digest] for g in gold])
