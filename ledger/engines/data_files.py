"""A bank's data given as files instead of ``seed.sql`` (issue 16).

A bank folder holds its rows in exactly one of:

- ``seed.sql``: INSERT statements (the original format);
- ``data.sqlite``: a SQLite database file holding every table (how BIRD and
  Spider ship their databases); ``schema.sql`` must declare the same tables and
  columns, it is what the prompt shows;
- ``data/<table>.csv`` or ``data/<table>.parquet``: one file per table created
  by ``schema.sql`` (CSV: a header row naming the table's columns in order,
  comma separated, ``"`` quoting, UTF-8; an empty field is NULL).

Data files are hashed by content and never parsed as SQL: ``data.sqlite`` by a
canonical dump of its schema and rows (so page layout, VACUUM and insert order
do not change the bank hash), CSV and Parquet files by their bytes. The hash of
each goes into the bank manifest under its name (``data.sqlite``,
``data/orders.csv``).

The description lives beside the engines, which load the rows
(``ledger.bank.source.find_data`` finds the files in a bank folder).
"""

from __future__ import annotations

import csv
import hashlib
import io
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import BankError

__all__ = [
    "DATA_DIR",
    "DATA_SQLITE",
    "DataFiles",
    "TableRows",
    "file_sha256",
    "load_hint",
    "parents_first",
]

DATA_SQLITE = "data.sqlite"
DATA_DIR = "data"
#: Rows handed to an engine at a time while loading (bounded memory).
BATCH_ROWS = 10_000


def load_hint(message: str) -> str:
    """What to do when an engine refuses a data file's rows (``message``: its error)."""
    if "foreign key" in message.lower():
        return (
            "the data breaks a foreign key that schema.sql declares and this engine "
            "enforces; SQLite does not: publish the bank on the sqlite engine (its "
            "violations are then recorded), or fix the data"
        )
    return "each value must fit its column's type in schema.sql"


def file_sha256(path: Path) -> str:
    """``sha256:<hex>`` of a file's bytes, read in chunks (no size limit)."""
    hasher = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(chunk)
    return "sha256:" + hasher.hexdigest()


@dataclass(frozen=True)
class TableRows:
    """One table's rows from a data file, read in batches."""

    table: str
    columns: tuple[str, ...]
    path: Path
    kind: str  # data.sqlite | csv | parquet

    def batches(self) -> Iterator[list[tuple[Any, ...]]]:
        """The rows, ``BATCH_ROWS`` at a time (CSV cells are text, an empty one None)."""
        if self.kind == "csv":
            yield from _csv_batches(self.path, len(self.columns))
        elif self.kind == "parquet":
            yield from _parquet_batches(self.path)
        else:
            yield from _sqlite_batches(self.path, self.table, self.columns)


def _csv_batches(path: Path, width: int) -> Iterator[list[tuple[Any, ...]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        next(reader, None)  # the header, checked by DataFiles.check_header
        batch: list[tuple[Any, ...]] = []
        for row in reader:
            if len(row) != width:
                raise BankError(
                    f"{path.parent.name}/{path.name}: line {reader.line_num}: {len(row)} "
                    f"fields, the header has {width}",
                    hint="every CSV line needs one field per column (quote commas)",
                )
            batch.append(tuple(cell if cell != "" else None for cell in row))
            if len(batch) == BATCH_ROWS:
                yield batch
                batch = []
        if batch:
            yield batch


def _parquet_batches(path: Path) -> Iterator[list[tuple[Any, ...]]]:
    import duckdb

    con = duckdb.connect(":memory:", config={"threads": 1})
    try:
        con.execute("SET TimeZone='UTC'")
        rel = con.read_parquet(str(path))
        while batch := rel.fetchmany(BATCH_ROWS):
            yield batch
    finally:
        con.close()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sqlite_batches(
    path: Path, table: str, columns: tuple[str, ...]
) -> Iterator[list[tuple[Any, ...]]]:
    con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        shown = ", ".join(_quote(c) for c in columns)
        # Names from the file's own catalog, quoted as identifiers.
        cursor = con.execute(f"SELECT {shown} FROM {_quote(table)} ORDER BY rowid")  # noqa: S608
        while batch := cursor.fetchmany(BATCH_ROWS):
            yield batch
    finally:
        con.close()


@dataclass(frozen=True)
class DataFiles:
    """A bank's data files: their kind, paths (bank-relative names) and hashes."""

    kind: str  # data.sqlite | csv | parquet
    paths: dict[str, Path]  # bank-relative name -> file
    hashes: dict[str, str]

    def tables(self) -> dict[str, str]:
        """Table name -> bank-relative file name (CSV / Parquet)."""
        return {Path(name).stem: name for name in self.paths}

    def sqlite_file(self) -> Path:
        """The ``data.sqlite`` file (only for that kind)."""
        return self.paths[DATA_SQLITE]

    def rows(self, table: str, columns: tuple[str, ...]) -> TableRows:
        """The rows of ``table`` (whose columns, in order, are ``columns``)."""
        if self.kind == DATA_SQLITE:
            return TableRows(table, columns, self.sqlite_file(), DATA_SQLITE)
        self.require_columns(table, columns)
        return TableRows(table, columns, self.paths[self.tables()[table]], self.kind)

    def require_columns(self, table: str, columns: tuple[str, ...]) -> None:
        """Raise BankError unless the file of ``table`` names ``columns`` in order (a CSV
        header row, a Parquet file's schema): loading is by position."""
        name = self.tables().get(table)
        if name is None or self.kind == DATA_SQLITE:
            return
        found = _header(self.paths[name], self.kind)
        line = "line 1: " if self.kind == "csv" else ""
        if found is None:
            raise BankError(
                f"{name}: {line}is empty", hint="a CSV data file starts with a header row"
            )
        if tuple(found) != columns:
            raise BankError(
                f"{name}: {line}columns {', '.join(found)} do not match table {table} in "
                f"schema.sql ({', '.join(columns)})",
                hint="name the table's columns in the order schema.sql declares them",
            )


def _header(path: Path, kind: str) -> list[str] | None:
    if kind == "parquet":
        import duckdb

        con = duckdb.connect(":memory:")
        try:
            return list(con.read_parquet(str(path)).columns)
        finally:
            con.close()
    with path.open(encoding="utf-8", newline="") as handle:
        first = handle.readline()
    if not first.strip():
        return None
    return next(csv.reader(io.StringIO(first)))


def parents_first(names: list[str], keys: list[tuple[str, str]]) -> list[str]:
    """``names`` with each table after the tables its foreign keys ``(child, parent)``
    reference, otherwise in the given order: DuckDB and PostgreSQL check a key as
    the rows arrive, so a bank's data files load parents first. A table in a cycle
    of keys keeps its place.

    >>> parents_first(["hero_power", "superhero", "superpower"],
    ...               [("hero_power", "superhero"), ("hero_power", "superpower")])
    ['superhero', 'superpower', 'hero_power']
    """
    parents: dict[str, set[str]] = {n: set() for n in names}
    for child, parent in keys:
        if child in parents and parent in parents and parent != child:
            parents[child].add(parent)
    done: list[str] = []
    state: dict[str, bool] = {}  # False: being placed, True: placed

    def place(name: str) -> None:
        if name in state:
            return
        state[name] = False
        for parent in sorted(parents[name]):
            place(parent)
        state[name] = True
        done.append(name)

    for name in names:
        place(name)
    return done
