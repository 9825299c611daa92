"""Regenerate ledger/engines/duckdb_functions.json from DuckDB's own function catalog.

Usage: python tools/gen_function_allowlist.py [--check]

Reads ``duckdb_functions()`` of a default in-memory DuckDB (the extensions linked
into the wheel are loaded, as in the worker's sealed connection: core_functions,
icu, json, parquet), judges every (name, function type) with
``ledger.engines.functions.DENY_RULES`` and writes the data file. Refuses to run
on any DuckDB but the pinned one: another version has another catalog.
``--check`` writes nothing and exits 1 when the checked-in file differs.
Review the diff before committing: a new allowed name is a new capability.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import duckdb

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ledger.engines import functions  # noqa: E402

TARGET = REPO / "ledger" / "engines" / functions.DATA_FILE


def generate() -> dict[str, Any]:
    """The data document for the running DuckDB (which must be the pinned version)."""
    if duckdb.__version__ != functions.DUCKDB_VERSION:
        raise SystemExit(
            f"gen_function_allowlist: DuckDB {duckdb.__version__} is running, the allow-list "
            f"is for DuckDB {functions.DUCKDB_VERSION} exactly; install that version"
        )
    with duckdb.connect() as con:
        rows = con.execute(
            "SELECT function_name, function_type FROM duckdb_functions() "
            "WHERE database_name = 'system'"
        ).fetchall()
        loaded = con.execute(
            "SELECT extension_name FROM duckdb_extensions() WHERE loaded"
        ).fetchall()
    entries = functions.build_entries((str(n), str(t)) for n, t in rows)
    return functions.document(
        entries,
        duckdb_version=duckdb.__version__,
        extensions=[str(r[0]) for r in loaded],
    )


def main(argv: list[str]) -> int:
    """Write (or with --check, compare) the data file; the exit code says what happened."""
    text = functions.render(generate())
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
