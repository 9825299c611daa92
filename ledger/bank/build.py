"""Build a bank on its engine deterministically, snapshot its tables, freeze typed gold.

DuckDB's own build (connection settings, data files, table snapshot, one query) is
``ledger.engines.duckdb_build``; another engine builds through the engine contract.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import msgspec

from ledger.bank.model import Bank, CaseDef
from ledger.bank.problems import Problems
from ledger.codec import digest
from ledger.engines import get_engine
from ledger.engines.base import EngineQueryError
from ledger.engines.cells import encode_row
from ledger.engines.data_files import DATA_SQLITE
from ledger.engines.duckdb_build import (
    REQUIRED_DUCKDB,
    Progress,
    build_sql,
    no_progress,
    open_bank_db,
    run_query,
    table_snapshot,
)
from ledger.engines.sqlite_integrity import foreign_key_violations
from ledger.errors import DiskFullError, LedgerError, disk_full, first_line
from ledger.events import BuildSettings, Column, ForeignKeyViolation, GoldResult, TableSchema
from ledger.harness import determinism

__all__ = [
    "BUILD_SETTINGS",
    "build_database",
    "build_settings",
    "freeze_gold",
    "freeze_gold_at",
    "gold_digest",
    "tables_at",
]

BUILD_SETTINGS = BuildSettings(
    duckdb_version=REQUIRED_DUCKDB, timezone="UTC", threads=1, external_access=False
)


def build_settings(bank: Bank) -> BuildSettings:
    """The BuildSettings a bank is published with (a DuckDB bank with seed.sql:
    :data:`BUILD_SETTINGS`). A bank with data files names their kind and, for
    ``data.sqlite``, records the foreign keys its rows break."""
    settings = BUILD_SETTINGS
    if bank.engine != "duckdb":
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
        violations = foreign_key_violations(data.sqlite_file())
    return msgspec.structs.replace(
        settings, data_source=data.kind, foreign_key_violations=violations
    )


def build_database(bank: Bank, path: Path, *, progress: Progress = no_progress) -> None:
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


def _run_reference(
    query: Query, bank: Bank, case: CaseDef, problems: Problems
) -> GoldResult | None:
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
        bad(f"fails to execute: {first_line(exc)}")
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
    db_path: Path, bank: Bank, *, progress: Progress = no_progress
) -> tuple[GoldResult, ...]:
    """:func:`freeze_gold` on the bank's own engine, over the database built at ``db_path``
    (``progress`` gets "freezing gold k/N" before each case)."""
    if bank.engine == "duckdb":
        con = open_bank_db(db_path)
        try:
            return _freeze(lambda sql: run_query(con, sql), bank, progress)
        finally:
            con.close()
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
    return get_engine(bank.engine).tables(db_path)


def _freeze(query: Query, bank: Bank, progress: Progress = no_progress) -> tuple[GoldResult, ...]:
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
