"""Metamorphic checks of the gold itself (bank sanity, ``bank publish --check-relations``).

Two kinds, both declared in calibration.yaml:

- partition relations: the sum of a money or count column over the rows of
  one case's gold (a complete, disjoint partition) equals the sum of a column
  over the rows of another case's gold (usually one total row). Distinct
  counts and ratios do not add up over a partition and are not accepted.
- non-interference: for every variant a case lists as ``non_interfering``, the
  reference SQL gives the same gold on the variant as on the base database
  (changing only rows outside the case's scope leaves its answer alone).
"""

from __future__ import annotations

import tempfile
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from ledger.bank.build import build_database, freeze_gold
from ledger.bank.model import Bank, load_bank
from ledger.bank.problems import Problem
from ledger.calibration.config import Calibration, Relation, RelationSide, load_calibration
from ledger.calibration.variants import VariantDb, prepare_variants
from ledger.engines.duckdb_build import open_bank_db
from ledger.events import GoldResult

__all__ = ["check_relations", "relation_problems"]

_FILE = "calibration.yaml"


def _side_sum(side: RelationSide, gold: dict[str, GoldResult], rid: str) -> Decimal | str:
    result = gold.get(side.case)
    if result is None:
        return f"no gold for case {side.case}"
    names = [c.name.casefold() for c in result.columns]

    def index(name: str) -> int | None:
        return names.index(name.casefold()) if name.casefold() in names else None

    col = index(side.column)
    if col is None:
        return f"case {side.case} has no column {side.column!r} (columns: {', '.join(names)})"
    total = Decimal(0)
    kept = 0
    for row in result.rows:
        keep = True
        for filters, wanted in ((side.where, True), (side.where_not, False)):
            for name, value in filters:
                i = index(name)
                if i is None:
                    return f"case {side.case} has no column {name!r} to filter on"
                if (str(row[i]) == str(value)) != wanted:
                    keep = False
        if not keep:
            continue
        kept += 1
        cell: Any = row[col]
        if cell is None:
            continue
        try:
            total += Decimal(str(cell))
        except InvalidOperation:
            return f"case {side.case} column {side.column} holds a non-number {cell!r}"
    if kept == 0:
        return f"no row of case {side.case} passes the filters of relation {rid}"
    return total


def relation_problems(
    calibration: Calibration, gold: dict[str, GoldResult], variants: tuple[VariantDb, ...] = ()
) -> list[Problem]:
    """Problems of the declared relations on ``gold`` and of non-interference on ``variants``."""
    problems: list[Problem] = []
    for rel in calibration.relations:
        total = _side_sum(rel.total, gold, rel.id)
        parts = _side_sum(rel.parts, gold, rel.id)
        for value in (total, parts):
            if isinstance(value, str):
                problems.append(Problem(_FILE, f"relation {rel.id}: {value}", field="relations"))
        if isinstance(total, Decimal) and isinstance(parts, Decimal) and total != parts:
            problems.append(_mismatch(rel, total, parts))
    for v in variants:
        for case_id, cc in sorted(calibration.cases.items()):
            if v.id in cc.non_interfering and v.gold[case_id].digest != gold[case_id].digest:
                message = (
                    f"variant {v.id} is declared non_interfering but changes the gold "
                    f"({gold[case_id].digest} -> {v.gold[case_id].digest})"
                )
                problems.append(Problem(_FILE, message, case=case_id, field="non_interfering"))
    return problems


def _mismatch(rel: Relation, total: Decimal, parts: Decimal) -> Problem:
    message = (
        f"relation {rel.id} ({rel.measure}): {rel.parts.case}.{rel.parts.column} adds up to "
        f"{parts}, but {rel.total.case}.{rel.total.column} is {total}"
    )
    return Problem(_FILE, message, case=rel.total.case, field="relations")


def check_relations(
    bank: Bank, calibration: Calibration | None, *, cache_dir: Path | None = None
) -> list[Problem]:
    """Build the bank and its variants (in ``cache_dir`` or a temporary folder) and check them.

    Returns the problems found (empty when every relation holds and every
    non_interfering variant leaves its case's gold unchanged).
    """
    if calibration is None:
        return []
    with tempfile.TemporaryDirectory(prefix="caseledger-relations-") as tmp:
        base = Path(tmp) / "base.duckdb"
        build_database(bank, base)
        con = open_bank_db(base)
        try:
            gold = {g.case_id: g for g in freeze_gold(con, bank)}
        finally:
            con.close()
        variants = prepare_variants(bank, calibration, cache_dir or Path(tmp) / "variants")
        return relation_problems(calibration, gold, variants)


def check_folder_relations(folder: Path) -> list[Problem]:
    """Load the bank folder and its calibration.yaml and check every relation (publish flag)."""
    bank = load_bank(folder)
    return check_relations(bank, load_calibration(bank))
