"""Question banks: load, normalise and hash, validate, build in DuckDB, freeze gold, publish.

Stages, in the order data flows: ``source`` (normalised bytes and the content
hash; rows given as data.sqlite, CSV or Parquet files instead of seed.sql are found
there and described by ``ledger.engines.data_files``), ``problems`` (findings naming
file, line, case and field), ``model`` (structural validation into a Bank),
``purity`` (the seed reads no clock, randomness or files), ``build`` (the database on
the bank's engine, table snapshot, gold), ``leak`` (the anti-memorisation check),
``publish`` (the BankPublished event), ``registry`` (built-in and published banks),
``describe`` (what ``bank show``, ``diff`` and ``list`` print) and ``importer``
(BIRD and Spider written as banks).
"""

from ledger.bank.build import build_database, freeze_gold
from ledger.bank.leak import LeakContext, leak_context, leak_findings
from ledger.bank.model import Bank, CaseDef, load_bank
from ledger.bank.publish import Checked, PublishResult, publish, validate_bank
from ledger.bank.registry import (
    PublishedBank,
    builtin_banks,
    find_published,
    list_published,
    load_any,
    resolve_source,
)
from ledger.bank.source import BankSource, read_source
from ledger.engines.duckdb_build import open_bank_db, table_snapshot

__all__ = [
    "Bank",
    "BankSource",
    "CaseDef",
    "Checked",
    "LeakContext",
    "PublishResult",
    "PublishedBank",
    "build_database",
    "builtin_banks",
    "find_published",
    "freeze_gold",
    "leak_context",
    "leak_findings",
    "list_published",
    "load_any",
    "load_bank",
    "open_bank_db",
    "publish",
    "read_source",
    "resolve_source",
    "table_snapshot",
    "validate_bank",
]
