"""The engine contract: what every execution engine (DuckDB, SQLite, PostgreSQL) provides.

A bank names its engine in cases.yaml (``engine: duckdb | sqlite | postgres``,
default duckdb). Everything after the adapter goes through the engine: the
prompt's dialect notes, the guard's sqlglot dialect and function allow-list,
the bank build, the gold (the reference SQL executed on the engine) and the
sandboxed execution of a model's SQL.

Every engine keeps its built database at a path on disk under the ledger's
home: the database file itself (DuckDB, SQLite), or for a server engine a small
file naming the database on the server (PostgreSQL). ``Executor`` is the one
worker contract: a separate process or connection per query, read-only, a
timeout that really stops the query, a memory bound, at most ``max_rows`` rows
kept (``max_rows + 1`` fetched to know there were more), typed cells (Decimal
stays Decimal, timestamps in UTC, NULL as None) and failures as data
(:class:`ledger.engines.process.ExecResult`, kinds as ``ERROR_KINDS``).
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from ledger.engines.process import ExecResult
from ledger.events import ENGINES, Column, TableSchema

if TYPE_CHECKING:
    from ledger.engines.data_files import DataFiles

__all__ = ["ENGINES", "Engine", "EngineQueryError", "Executor"]


class EngineQueryError(Exception):
    """A reference query failed on the engine (the message is the engine's first line)."""


class Executor(Protocol):
    """Runs a model's SQL in the engine's sandbox; one per bank database, closed after use."""

    def execute(
        self, sql: str, *, max_rows: int, max_result_bytes: int, max_cell_bytes: int
    ) -> ExecResult:
        """Run one statement; every failure is an ExecResult, never an exception."""
        ...

    def close(self) -> None:
        """Stop every worker process or connection (nothing left running)."""
        ...

    def __enter__(self) -> Executor: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class Engine(Protocol):
    """One execution engine."""

    #: The name banks declare (one of ENGINES).
    name: str
    #: The sqlglot dialect the guard parses with.
    dialect: str

    def version(self) -> str:
        """The engine's version as recorded in BankPublished (e.g. ``3.45.1``)."""
        ...

    def dialect_notes(self) -> str:
        """One paragraph for the prompt's ``{{dialect}}``: which SQL the model must write."""
        ...

    def build(
        self, schema_sql: str, seed_sql: str, target: Path, *, data: DataFiles | None = None
    ) -> None:
        """Build the bank's database at ``target`` (never overwrite; atomic).

        ``schema_sql`` and ``seed_sql`` are in the engine's dialect. ``data``: the
        bank's data files, whose rows replace ``seed_sql`` (``ledger.engines.data_files``).
        Raises BankError naming the file (schema.sql / seed.sql / the data file)
        and the engine's message.
        """
        ...

    def tables(self, database: Path) -> tuple[TableSchema, ...]:
        """The built database's tables and typed columns, sorted by name."""
        ...

    def reference(
        self, database: Path, sql: str
    ) -> tuple[tuple[Column, ...], list[tuple[Any, ...]]]:
        """Run a reference query read-only: its typed columns and every row (raw values).

        Raises EngineQueryError with the engine's message when it fails or is not
        exactly one query.
        """
        ...

    def executor(
        self, database: Path, *, timeout_s: float = 5.0, memory_limit: str = "512MB"
    ) -> Executor:
        """A sandboxed executor over ``database`` (see the module doc)."""
        ...
