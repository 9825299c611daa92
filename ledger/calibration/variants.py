"""Variant databases: the bank's seed plus a variant's DML, built like the base, with their gold.

A variant database is built by the bank build code itself (schema.sql, then
seed.sql followed by the variant's statements), so it is exactly as
deterministic as the base database. It is stored content-addressed under
``<cache>/<hex>.duckdb`` where ``hex`` hashes (bank hash, calibration hash,
variant id), and read-only from then on. Its gold is every reference SQL
executed on it, frozen as typed rows like the published gold.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from ledger.bank.build import build_database, freeze_gold, gold_digest
from ledger.bank.model import Bank
from ledger.calibration.config import Calibration, Variant
from ledger.codec import digest
from ledger.engines.duckdb_build import open_bank_db, table_digests
from ledger.errors import BankError
from ledger.events import GoldResult

__all__ = ["BASE", "VariantDb", "build_variant", "prepare_variants", "variant_key"]

BASE = "base"  # the database name of the bank's own snapshot in verdicts
_KEY_HEADER = "caseledger/calibration-variant/v1\n"


def variant_key(bank_hash: str, calibration_hash: str, variant_id: str) -> str:
    """Hex SHA-256 naming one variant database (domain separated, one field per line).

    >>> variant_key("sha256:" + "0" * 64, "sha256:" + "1" * 64, "third-region")[:12]
    'e85be67675fa'
    """
    text = f"{_KEY_HEADER}{bank_hash}\n{calibration_hash}\n{variant_id}\n"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class VariantDb:
    """A built variant: where it is, its gold per case, and digests of its tables and gold."""

    variant: Variant
    path: Path
    gold: dict[str, GoldResult]
    tables_digest: str
    gold_digest: str

    @property
    def id(self) -> str:
        """The variant id."""
        return self.variant.id


def _variant_bank(bank: Bank, variant: Variant) -> Bank:
    extra = "".join(s.strip().rstrip(";") + ";\n" for s in variant.sql)
    seed = bank.seed_sql.rstrip("\n") + f"\n\n-- calibration variant {variant.id}\n" + extra
    files = {**bank.source.files, "seed.sql": seed.encode("utf-8")}
    return dataclasses.replace(bank, source=dataclasses.replace(bank.source, files=files))


def build_variant(bank: Bank, variant: Variant, path: Path) -> None:
    """Build one variant database at ``path`` (a temporary name first, then moved in place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.build")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        build_database(_variant_bank(bank, variant), tmp)
    except BankError as exc:
        raise BankError(
            f"calibration.yaml: variant {variant.id}: {exc.message}",
            hint=f"fix the sql of variant {variant.id} so it runs after seed.sql",
        ) from None
    tmp.chmod(0o444)
    os.replace(tmp, path)


def _open_variant(bank: Bank, variant: Variant, path: Path) -> VariantDb:
    con = open_bank_db(path)
    try:
        tables = table_digests(con)
        try:
            gold = freeze_gold(con, bank)
        except BankError as exc:
            raise BankError(
                f"calibration.yaml: variant {variant.id}: the reference SQL fails on it: "
                f"{exc.message}",
                hint=f"change variant {variant.id} (or the case's max_rows)",
            ) from None
    finally:
        con.close()
    return VariantDb(
        variant=variant,
        path=path,
        gold={g.case_id: g for g in gold},
        tables_digest=digest(sorted(tables.items())),
        gold_digest=gold_digest(gold),
    )


def prepare_variants(
    bank: Bank, calibration: Calibration, cache_dir: Path
) -> tuple[VariantDb, ...]:
    """Build (or reuse) every variant database of ``calibration`` and freeze its gold."""
    out = []
    for variant in calibration.variants:
        key = variant_key(bank.content_sha256, calibration.sha256, variant.id)
        path = cache_dir / f"{key}.duckdb"
        if not path.is_file():
            build_variant(bank, variant, path)
        out.append(_open_variant(bank, variant, path))
    return tuple(out)
