"""The DuckDB engine (the default): the bank build of ``ledger.engines.duckdb_build`` and the
sandboxed worker of ``ledger.engines.duckdb_worker`` behind the engine contract."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.engines.base import EngineQueryError
from ledger.engines.duckdb_build import (
    REQUIRED_DUCKDB,
    build_sql,
    open_bank_db,
    run_query,
    table_snapshot,
)
from ledger.engines.duckdb_worker import WorkerPool
from ledger.engines.functions import DIALECT_NOTES
from ledger.events import Column, TableSchema

if TYPE_CHECKING:
    from ledger.engines.data_files import DataFiles

__all__ = ["DuckDBEngine"]


class DuckDBEngine:
    """DuckDB at the pinned version, in a locked-down worker process per pool."""

    name = "duckdb"
    dialect = "duckdb"

    def version(self) -> str:
        """The pinned DuckDB version."""
        return REQUIRED_DUCKDB

    def dialect_notes(self) -> str:
        """What the prompt says about the SQL to write."""
        return DIALECT_NOTES  # the prompt's own text: one definition

    def build(
        self, schema_sql: str, seed_sql: str, target: Path, *, data: DataFiles | None = None
    ) -> None:
        """Build the database file at ``target`` (see ``ledger.engines.duckdb_build.build_sql``)."""
        build_sql(schema_sql, seed_sql, target, where=str(target), data=data)

    def tables(self, database: Path) -> tuple[TableSchema, ...]:
        """The tables of the built database."""
        con = open_bank_db(database)
        try:
            return table_snapshot(con)
        finally:
            con.close()

    def reference(
        self, database: Path, sql: str
    ) -> tuple[tuple[Column, ...], list[tuple[Any, ...]]]:
        """Run one reference query read-only."""
        import duckdb  # here: a run's own process only makes executors (issue 34)

        con = open_bank_db(database)
        try:
            return run_query(con, sql)
        except duckdb.Error as exc:
            raise EngineQueryError(str(exc).strip().splitlines()[0]) from None
        finally:
            con.close()

    def executor(
        self, database: Path, *, timeout_s: float = 5.0, memory_limit: str = "512MB"
    ) -> WorkerPool:
        """The sandboxed DuckDB worker pool."""
        return WorkerPool(database, timeout_s=timeout_s, memory_limit=memory_limit)
