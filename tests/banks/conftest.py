"""Built-in banks built once per session with the real build code, opened read-only.

A query is judged the way a model's answer is: ``BuiltBank.judge`` hands it to the
calibration ``Oracle`` (the real guard, the sandboxed worker with the case's max_rows and
the scorer's own ``result_correct`` against the frozen gold). Nothing here decides
correctness itself; the tests state by hand what each verdict must be.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ledger.bank.build import build_database, freeze_gold
from ledger.bank.model import Bank, CaseDef, load_bank
from ledger.bank.registry import builtin_banks
from ledger.calibration.oracle import Judged, Oracle
from ledger.engines.duckdb_build import open_bank_db
from ledger.events import Column, GoldResult


@dataclass(frozen=True)
class Result:
    """A query result read directly from DuckDB: columns and raw Python rows."""

    columns: tuple[Column, ...]
    rows: list[tuple[Any, ...]]

    def multiset(self) -> Counter[tuple[Any, ...]]:
        """Rows as a multiset (Decimal 600.00 == int 600, so numbers compare by value)."""
        return Counter(self.rows)


@dataclass
class BuiltBank:
    """A built-in bank, its database (read-only connection) and its cases by id."""

    bank: Bank
    con: duckdb.DuckDBPyConnection
    path: Path
    _oracle: Oracle | None = field(default=None, repr=False)
    _gold: dict[str, GoldResult] = field(default_factory=dict, repr=False)

    @property
    def cases(self) -> dict[str, CaseDef]:
        """Cases by id, in file order."""
        return {c.id: c for c in self.bank.cases}

    def run(self, sql: str) -> Result:
        """Execute one query on the built database."""
        rel = self.con.sql(sql)
        columns = tuple(
            Column(name=n, type=str(t)) for n, t in zip(rel.columns, rel.types, strict=True)
        )
        return Result(columns, rel.fetchall())

    def gold(self, case_id: str) -> Result:
        """The reference result of a case."""
        return self.run(self.cases[case_id].reference_sql)

    def judge(self, case_id: str, sql: str) -> Judged:
        """Guard, execute and score ``sql`` as a strict answer to ``case_id`` (the real path)."""
        if self._oracle is None:
            self._gold = {g.case_id: g for g in freeze_gold(self.con, self.bank)}
            rows = self.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
            tables = frozenset(t for (t,) in rows)
            self._oracle = Oracle({"base": self.path}, tables)
        return self._oracle.judge(self.cases[case_id], sql, "base", self._gold[case_id])

    def close(self) -> None:
        """Stop the worker and close the connection."""
        if self._oracle is not None:
            self._oracle.close()
        self.con.close()


@pytest.fixture(scope="session")
def built_bank(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], BuiltBank]]:
    """Factory: ``built_bank("retail")`` builds a built-in bank once and reuses it."""
    cache: dict[str, BuiltBank] = {}

    def get(name: str) -> BuiltBank:
        if name not in cache:
            bank = load_bank(builtin_banks()[name])
            path = tmp_path_factory.mktemp(f"bank-{name}") / f"{bank.source.hexhash}.duckdb"
            build_database(bank, path)
            cache[name] = BuiltBank(bank, open_bank_db(path), path)
        return cache[name]

    yield get
    for built in cache.values():
        built.close()
