"""The PostgreSQL column of worker_bench: the executor's per-query overhead against psycopg.

Usage:
    python benchmarks/worker_bench_postgres.py [--dsn DSN] [--reps 30] [--rounds 3]
    python benchmarks/worker_bench.py --postgres        # the same, after the DuckDB table

The bank is the built-in ``retail`` bank, transpiled from DuckDB with sqlglot
statement by statement and built with the PostgreSQL engine; the queries are its
cases' reference SQL, transpiled the same way. Each query is timed two ways,
end to end as the caller sees them:

- direct: one psycopg connection as the bank's reader (the same role settings),
  ``execute``, fetch ``max_rows + 1`` rows, encode the cells: the same work
  without the sandbox;
- executor: ``PostgresExecutor.execute`` (worker process, READ ONLY
  transaction, DECLARE cursor, chunked FETCH under the result caps, ROLLBACK and
  DISCARD ALL).

A round's overhead is the median over the queries of (executor median - direct
median). Three rounds give the median and the range. Target: <= 5 ms. The server
is ``--dsn``, else ``CASELEDGER_PG_DSN``, else a throwaway cluster
(tests/pgcluster.py) started for the run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import sqlglot
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ledger.engines import cells  # noqa: E402
from ledger.engines.postgres import ENV_VAR, PostgresEngine  # noqa: E402

TARGET_MS = 5.0
RETAIL = REPO / "ledger" / "banks" / "retail"


def _transpile(text: str) -> str:
    return ";\n".join(sqlglot.transpile(text, read="duckdb", write="postgres"))


def _median_ms(run: Callable[[], object], reps: int) -> float:
    samples = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        run()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return statistics.median(samples)


def _direct(con: psycopg.Connection[Any], sql: str, max_rows: int) -> object:
    with con.cursor() as cur:
        cur.execute(sql.encode("utf-8"))
        rows = cur.fetchmany(max_rows + 1) if cur.description else []
        return [cells.encode_row(r) for r in rows[:max_rows]]


def postgres_column(dsn: str, *, reps: int = 30, rounds: int = 3) -> dict[str, Any]:
    """Time the retail reference queries; per-query medians of the last round and the rounds."""
    engine = PostgresEngine(dsn=dsn)
    doc = yaml.safe_load((RETAIL / "cases.yaml").read_text(encoding="utf-8"))
    queries = [(c["id"], _transpile(c["reference_sql"]), int(c["max_rows"])) for c in doc["cases"]]
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "retailbench" / "pg.json"
        engine.build(
            _transpile((RETAIL / "schema.sql").read_text(encoding="utf-8")),
            _transpile((RETAIL / "seed.sql").read_text(encoding="utf-8")),
            target,
        )
        try:
            round_overheads: list[float] = []
            table: list[dict[str, Any]] = []
            with (
                engine.executor(target) as ex,
                psycopg.connect(engine.reader_conninfo(target), autocommit=True) as con,
            ):
                for _ in range(rounds):
                    table = []
                    for case_id, sql, max_rows in queries:
                        check = ex.execute(sql, max_rows=max_rows)
                        if not check.ok:
                            print(f"{case_id}: {check.error_kind}: {check.error_message}")
                            continue
                        for _ in range(2):  # warm both sides
                            _direct(con, sql, max_rows)
                            ex.execute(sql, max_rows=max_rows)
                        direct = _median_ms(lambda s=sql, m=max_rows: _direct(con, s, m), reps)
                        sandboxed = _median_ms(
                            lambda s=sql, m=max_rows: ex.execute(s, max_rows=m), reps
                        )
                        table.append(
                            {"query": case_id, "rows": check.row_count, "direct": direct,
                             "executor": sandboxed}
                        )  # fmt: skip
                    round_overheads.append(
                        statistics.median(r["executor"] - r["direct"] for r in table)
                    )
        finally:
            engine.drop(target)
    return {"version": engine.version(), "table": table, "rounds": round_overheads}


def render(result: dict[str, Any]) -> str:
    """A Markdown table of the last round, then the median and range over the rounds."""
    lines = [
        f"PostgreSQL {result['version']}: retail reference queries",
        "",
        "| query | rows | direct ms | executor ms | overhead ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in result["table"]:
        lines.append(
            f"| {r['query']} | {r['rows']} | {r['direct']:.2f} | {r['executor']:.2f} "
            f"| {r['executor'] - r['direct']:.2f} |"
        )
    rounds = result["rounds"]
    middle = statistics.median(rounds)
    verdict = "meets" if middle <= TARGET_MS else "MISSES"
    shown = ", ".join(f"{r:.2f}" for r in rounds)
    lines += [
        "",
        f"median executor overhead {middle:.2f} ms per query over {len(rounds)} rounds "
        f"(range {min(rounds):.2f}-{max(rounds):.2f}; rounds {shown}); {verdict} the "
        f"{TARGET_MS:g} ms target",
    ]
    return "\n".join(lines)


def run(dsn: str | None, reps: int, rounds: int) -> str:
    """The rendered column, on ``dsn`` or CASELEDGER_PG_DSN or a throwaway cluster."""
    dsn = dsn or os.environ.get(ENV_VAR, "").strip() or None
    cluster = None
    if dsn is None:
        sys.path.insert(0, str(REPO / "tests"))
        from pgcluster import PgCluster

        cluster = PgCluster.start()
        dsn = cluster.admin_dsn
    try:
        return render(postgres_column(dsn, reps=reps, rounds=rounds))
    finally:
        if cluster is not None:
            cluster.stop()


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and print the PostgreSQL column."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help=f"admin DSN (default: {ENV_VAR} or a throwaway cluster)")
    parser.add_argument("--reps", type=int, default=30, help="timed runs per query and mode")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (median and range)")
    args = parser.parse_args(argv)
    print(run(args.dsn, args.reps, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
