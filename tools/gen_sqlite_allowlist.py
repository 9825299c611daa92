"""Regenerate ledger/engines/sqlite_functions.json from the linked SQLite's own catalog.

Usage: python tools/gen_sqlite_allowlist.py [--check]

Reads ``PRAGMA function_list`` and ``PRAGMA module_list`` of a default in-memory
connection of the SQLite library Python's ``sqlite3`` is linked with, judges
every (name, function type) with ``ledger.engines.sqlite_catalog.DENY_RULES``
and writes the data file, recording the SQLite version it came from.
``--check`` writes nothing and exits 1 when the checked-in file differs (also
when this Python links another SQLite version: another version has another
catalog). Review the diff before committing: a new allowed name is a new
capability of the model's SQL.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ledger.engines import sqlite_catalog  # noqa: E402
from ledger.engines.functions import render  # noqa: E402

TARGET = REPO / "ledger" / "engines" / sqlite_catalog.DATA_FILE


def generate() -> dict[str, Any]:
    """The data document for the linked SQLite."""
    con = sqlite3.connect(":memory:")
    try:
        rows = sqlite_catalog.read_catalog(con)
    finally:
        con.close()
    entries = sqlite_catalog.build_entries(rows)
    return sqlite_catalog.document(entries, sqlite_version=sqlite3.sqlite_version)


def main(argv: list[str]) -> int:
    """Write (or with --check, compare) the data file; the exit code says what happened."""
    text = render(generate())
    if argv == ["--check"]:
        same = TARGET.exists() and TARGET.read_text(encoding="utf-8") == text
        print(f"{TARGET.relative_to(REPO)}: {'up to date' if same else 'differs'}")
        return 0 if same else 1
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
