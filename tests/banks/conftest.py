"""Built-in banks built once per session with the real build code, opened read-only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ledger.bank.build import build_database, open_bank_db
from ledger.bank.model import Bank, CaseDef, load_bank
from ledger.bank.registry import builtin_banks
from ledger.events import Column
from ledger.harness.cells import encode_row
from ledger.harness.compare import compare


@dataclass(frozen=True)
class Result:
    """A query result as the worker would see it: columns, raw rows, encoded rows."""

    columns: tuple[Column, ...]
    rows: list[tuple[Any, ...]]

    @property
    def encoded(self) -> list[list[Any]]:
        """Rows through the one cell encoding (what gold and comparison use)."""
        return [encode_row(r) for r in self.rows]

    def multiset(self) -> Counter[tuple[Any, ...]]:
        """Rows as a multiset (Decimal 600.00 == int 600, so numbers compare by value)."""
        return Counter(self.rows)


@dataclass(frozen=True)
class BuiltBank:
    """A built-in bank, its database (read-only connection) and its cases by id."""

    bank: Bank
    con: duckdb.DuckDBPyConnection
    path: Path

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

    def judged_correct(self, case_id: str, actual: Result) -> bool:
        """What the real comparison says: column count, all rows (F1 = 1) and order."""
        case, gold = self.cases[case_id], self.gold(case_id)
        verdict = compare(
            gold.columns,
            gold.encoded,
            actual.columns,
            actual.encoded,
            abs_tolerance=case.abs_tolerance,
            rel_tolerance=case.rel_tolerance,
            order_significant=case.row_order_significant,
        )
        return verdict.column_count_ok and verdict.f1 == Decimal(1) and verdict.order_ok


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
        built.con.close()
