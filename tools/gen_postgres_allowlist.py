"""Regenerate ledger/engines/postgres_functions.json from a PostgreSQL server's pg_proc.

Usage: python tools/gen_postgres_allowlist.py [--check] [--dsn DSN]

Reads every function of ``pg_catalog`` in ``template1`` (the catalog a new bank
database starts from; extensions installed there are listed), adds the
grammar-level functions that are not in pg_proc (``coalesce``, ``greatest``,
``current_date``, ...), judges every (name, function type) with
``ledger.engines.postgres.judge_function`` (the name rules of ``DENY_RULES``,
then: every form takes or returns a pseudo-type -> internal; set-returning
other than unnest and generate_series -> table_function) and writes the data
file. The server is ``--dsn``, else ``CASELEDGER_PG_DSN``, else a throwaway
cluster of the Debian package (tests/pgcluster.py) started for the run.
``--check`` writes nothing and exits 1 when the checked-in file differs.
Review the diff before committing: a new allowed name is a new capability.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import msgspec
import psycopg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ledger.engines import functions, postgres  # noqa: E402

TARGET = REPO / "ledger" / "engines" / postgres.DATA_FILE

# Pseudo-types a query cannot produce or pass: a function all of whose forms use one
# is type input/output, planner support, a trigger or a handler.
_PSEUDO = (
    "internal", "cstring", "trigger", "event_trigger", "language_handler", "fdw_handler",
    "index_am_handler", "tsm_handler", "table_am_handler",
)  # fmt: skip

_CATALOG = """
SELECT p.proname::text,
       CASE WHEN p.proretset THEN 'table'
            WHEN p.prokind IN ('a', 'w') THEN 'aggregate'
            WHEN p.prokind = 'p' THEN 'procedure'
            ELSE 'scalar' END AS kind,
       bool_and(p.prorettype = ANY(%(pseudo)s::regtype[]::oid[])
                OR p.proargtypes::oid[] && %(pseudo)s::regtype[]::oid[]) AS internal
FROM pg_catalog.pg_proc AS p
JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace
WHERE n.nspname = 'pg_catalog'
GROUP BY 1, 2
"""


def generate_from(con: psycopg.Connection[Any]) -> dict[str, Any]:
    """The data document for the server behind ``con`` (connected to template1)."""
    rows = con.execute(_CATALOG, {"pseudo": list(_PSEUDO)}).fetchall()
    judged = {(str(n), str(k)): bool(i) for n, k, i in rows}
    for name in postgres.GRAMMAR_FUNCTIONS:
        judged.setdefault((name, "scalar"), False)
    entries = [
        postgres.judge_function(name, kind, internal=judged[(name, kind)])
        for name, kind in sorted(judged)
    ]
    version = con.execute("SHOW server_version").fetchone()
    number = con.execute("SHOW server_version_num").fetchone()
    extensions = con.execute("SELECT extname::text FROM pg_catalog.pg_extension").fetchall()
    if version is None or number is None:
        raise SystemExit("gen_postgres_allowlist: the server did not name its version")
    return {
        "generated_by": "tools/gen_postgres_allowlist.py",
        "engine": "PostgreSQL",
        "engine_version": str(version[0]).split()[0],
        "server_version": str(version[0]),
        "server_version_num": int(number[0]),
        "extensions": sorted(str(r[0]) for r in extensions),
        "deny_rules": [
            {"pattern": r.pattern, "category": r.category, "reason": r.reason}
            for r in postgres.all_rules()
        ],
        "functions": [msgspec.to_builtins(e) for e in entries],
    }


def generate(dsn: str) -> dict[str, Any]:
    """The data document for the server of an admin DSN (its template1 database)."""
    info = psycopg.conninfo.make_conninfo(dsn, dbname="template1")
    with psycopg.connect(info, autocommit=True) as con:
        return generate_from(con)


def render(doc: dict[str, Any]) -> str:
    """The exact text of the data file (one function per line, like the DuckDB file)."""
    return functions.render(doc)


def main(argv: list[str]) -> int:
    """Write (or with --check, compare) the data file; the exit code says what happened."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--dsn", help="admin DSN (default: CASELEDGER_PG_DSN or a throwaway)")
    args = parser.parse_args(argv)
    dsn = args.dsn or os.environ.get(postgres.ENV_VAR, "").strip()
    cluster = None
    if not dsn:
        sys.path.insert(0, str(REPO / "tests"))
        from pgcluster import PgCluster

        cluster = PgCluster.start()
        dsn = cluster.admin_dsn
    try:
        text = render(generate(dsn))
    finally:
        if cluster is not None:
            cluster.stop()
    if args.check:
        same = TARGET.exists() and TARGET.read_text(encoding="utf-8") == text
        print(f"{TARGET.relative_to(REPO)}: {'up to date' if same else 'differs'}")
        return 0 if same else 1
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
