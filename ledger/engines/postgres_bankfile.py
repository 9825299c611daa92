"""The PostgreSQL bank file: what a build writes at its target and an executor reads.

Part of the PostgreSQL engine (``ledger.engines.postgres``): the small JSON file
naming the bank's database and roles (no secret in it; the reader's password is in
``<target>.password`` beside it), and ``CASELEDGER_PG_DSN``, the variable naming the server.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from ledger.errors import BankError

#: The variable naming the server (an admin DSN): the engine reads it, the executor names it.
ENV_VAR = "CASELEDGER_PG_DSN"
#: The bank file's format.
FORMAT = "caseledger-postgres-bank/1"


class BankFile(msgspec.Struct, frozen=True, kw_only=True):
    """The JSON written at ``target`` (no secret in it)."""

    format: str
    database: str
    schema: str
    owner: str
    reader: str
    password_file: str
    server_version: str
    collate: str
    ctype: str


def read_bank_file(database: Path) -> BankFile:
    try:
        raw = Path(database).read_bytes()
    except FileNotFoundError:
        raise BankError(
            f"bank database {database} is missing", hint="publish the bank again"
        ) from None
    try:
        bank: BankFile = msgspec.json.decode(raw, type=BankFile)
    except msgspec.DecodeError as exc:
        raise BankError(f"{database}: not a PostgreSQL bank file: {exc}") from None
    if bank.format != FORMAT:
        raise BankError(f"{database}: unknown bank file format {bank.format!r}")
    return bank
