"""Per-query overhead of the sandboxed SQL worker against running the same query in-process.

Usage:
    python benchmarks/worker_bench.py                      # generated bank, built-in queries
    python benchmarks/worker_bench.py --db BANK.duckdb --queries cases.yaml
    python benchmarks/worker_bench.py --db BANK.duckdb --queries queries.sql

``--queries`` takes a bank's ``cases.yaml`` (each case's ``reference_sql`` and
``max_rows``) or a ``.sql`` file of statements separated by semicolons.  Three
ways of running each query are timed, end to end as the caller sees them:

- in-process: the worker's own settings (``connect_sandboxed``), a fresh cursor,
  fetch ``max_rows + 1`` rows, encode the cells: the same work minus the process;
- pool: ``WorkerPool.execute`` on a warm persistent worker;
- spawn: ``execute_once`` (a fresh worker process per query).

``--postgres`` adds the PostgreSQL executor's overhead against psycopg on the
retail bank (``worker_bench_postgres.py``: 3 rounds, median and range).
``--sqlite`` adds the SQLite executor's overhead against sqlite3 in-process on
the retail bank (``worker_bench_sqlite.py``: 3 rounds, median and range).

The overhead of a mode is its median minus the in-process median of the same
query.  Target: pool overhead <= 5 ms per query at the median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import duckdb
import yaml

from ledger.engines import cells
from ledger.engines.duckdb_worker import WorkerPool, connect_sandboxed, execute_once

TARGET_MS = 5.0

_SEED = """
CREATE TABLE branch AS
  SELECT i AS branch_id, 'Branch ' || i AS name,
         ['North','South','East','West'][1 + i % 4] AS region
  FROM range(1, 41) r(i);
CREATE TABLE customer AS
  SELECT i AS customer_id, 'Customer ' || i AS name, 1 + (i * 7) % 40 AS branch_id,
         DATE '2015-01-01' + CAST((i * 37) % 3000 AS INTEGER) AS joined,
         ['retail','premium','business'][1 + (i * 13) % 3] AS segment
  FROM range(1, 20001) r(i);
CREATE TABLE account AS
  SELECT i AS account_id, 1 + (i * 11) % 20000 AS customer_id,
         ['checking','savings','card'][1 + i % 3] AS product,
         CAST(((i * 7919) % 1000000) / 100.0 AS DECIMAL(12,2)) AS balance,
         DATE '2016-01-01' + CAST((i * 53) % 2900 AS INTEGER) AS opened
  FROM range(1, 40001) r(i);
CREATE TABLE txn AS
  SELECT i AS txn_id, 1 + (i * 104729) % 40000 AS account_id,
         TIMESTAMP '2025-01-01 00:00:00' + to_seconds((i * 7331) % 31536000) AS booked_at,
         CAST((((i * 15485863) % 200000) - 60000) / 100.0 AS DECIMAL(12,2)) AS amount,
         ['card','transfer','atm','fee','salary'][1 + (i * 17) % 5] AS channel
  FROM range(1, 500001) r(i);
"""

_QUERIES = """
SELECT count(*) AS customers FROM customer;
SELECT segment, count(*) AS n FROM customer GROUP BY segment ORDER BY segment;
SELECT a.product, sum(a.balance) AS total_balance, avg(a.balance) AS avg_balance
  FROM account a GROUP BY a.product ORDER BY a.product;
SELECT b.region, count(DISTINCT c.customer_id) AS customers, sum(a.balance) AS balance
  FROM branch b JOIN customer c USING (branch_id) JOIN account a USING (customer_id)
  GROUP BY b.region ORDER BY b.region;
SELECT date_trunc('month', booked_at) AS month, channel, sum(amount) AS net
  FROM txn GROUP BY ALL ORDER BY month, channel;
SELECT customer_id, total FROM (
  SELECT a.customer_id, sum(t.amount) AS total,
         rank() OVER (ORDER BY sum(t.amount) DESC) AS rk
  FROM txn t JOIN account a USING (account_id) GROUP BY a.customer_id)
  WHERE rk <= 10 ORDER BY total DESC, customer_id;
WITH monthly AS (
  SELECT account_id, date_trunc('month', booked_at) AS month, sum(amount) AS net
  FROM txn GROUP BY ALL)
SELECT account_id, month, net,
       sum(net) OVER (PARTITION BY account_id ORDER BY month) AS running
FROM monthly WHERE account_id <= 20 ORDER BY account_id, month;
SELECT c.customer_id, c.name FROM customer c
  WHERE NOT EXISTS (SELECT 1 FROM account a WHERE a.customer_id = c.customer_id)
  ORDER BY c.customer_id LIMIT 50;
SELECT a.account_id, a.balance FROM account a
  WHERE a.balance > (SELECT avg(balance) FROM account b WHERE b.product = a.product)
  ORDER BY a.balance DESC, a.account_id LIMIT 20;
SELECT d::DATE AS day, coalesce(sum(t.amount), 0) AS net
  FROM generate_series(TIMESTAMP '2025-03-01', TIMESTAMP '2025-03-31', INTERVAL 1 DAY) g(d)
  LEFT JOIN txn t ON date_trunc('day', t.booked_at) = g.d
  GROUP BY d ORDER BY d;
SELECT * FROM txn WHERE channel = 'fee' ORDER BY booked_at, txn_id LIMIT 200;
"""


def build_default_db(path: Path) -> None:
    """Write a deterministic retail-bank-like DuckDB file (about 500k transactions)."""
    con = duckdb.connect(str(path), config={"threads": 1})
    con.execute("SET TimeZone='UTC'")
    con.execute(_SEED)
    con.close()


def load_queries(path: Path | None, default_max_rows: int) -> list[tuple[str, int]]:
    """(sql, max_rows) pairs from a cases.yaml, a .sql file, or the built-in set."""
    if path is None:
        return [(s.query, default_max_rows) for s in duckdb.extract_statements(_QUERIES)]
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        doc = yaml.safe_load(text)
        return [
            (case["reference_sql"], int(case.get("max_rows", default_max_rows)))
            for case in doc["cases"]
        ]
    return [(s.query, default_max_rows) for s in duckdb.extract_statements(text)]


def _median_ms(run: Callable[[], object], reps: int) -> float:
    """Median wall time of ``run()`` in milliseconds (the benchmark's only float)."""
    samples = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        run()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return statistics.median(samples)


def _in_process(con: duckdb.DuckDBPyConnection, sql: str, max_rows: int) -> object:
    cursor = con.cursor()
    cursor.execute(sql)
    rows = cursor.fetchmany(max_rows + 1) if cursor.description else []
    encoded = [cells.encode_row(r) for r in rows[:max_rows]]
    cursor.close()
    return encoded


def bench(db: Path, queries: list[tuple[str, int]], reps: int, spawn_reps: int) -> list[dict]:
    """Time every query three ways; returns one row of medians (ms) per query."""
    con = connect_sandboxed(db)
    table = []
    with WorkerPool(db) as pool:
        for i, (sql, max_rows) in enumerate(queries, 1):
            check = pool.execute(sql, max_rows=max_rows)
            if not check.ok:
                print(f"q{i}: {check.error_kind}: {check.error_message}", file=sys.stderr)
                continue
            for _ in range(2):  # warm caches on both sides
                _in_process(con, sql, max_rows)
                pool.execute(sql, max_rows=max_rows)
            inproc = _median_ms(partial(_in_process, con, sql, max_rows), reps)
            pooled = _median_ms(partial(pool.execute, sql, max_rows=max_rows), reps)
            spawned = (
                _median_ms(partial(execute_once, db, sql, max_rows=max_rows), spawn_reps)
                if spawn_reps
                else float("nan")
            )
            table.append(
                {
                    "query": f"q{i}",
                    "rows": check.row_count,
                    "inproc": inproc,
                    "pool": pooled,
                    "spawn": spawned,
                }
            )
    con.close()
    return table


def render(table: list[dict]) -> str:
    """A Markdown table of medians, overheads and ratios, plus the verdict line."""
    lines = [
        "| query | rows | in-process ms | pool ms | pool overhead ms | pool ratio "
        "| spawn ms | spawn overhead ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in table:
        lines.append(
            f"| {r['query']} | {r['rows']} | {r['inproc']:.2f} | {r['pool']:.2f} "
            f"| {r['pool'] - r['inproc']:.2f} | {r['pool'] / r['inproc']:.2f}x "
            f"| {r['spawn']:.1f} | {r['spawn'] - r['inproc']:.1f} |"
        )
    pool_over = statistics.median(r["pool"] - r["inproc"] for r in table)
    spawn_over = statistics.median(r["spawn"] - r["inproc"] for r in table)
    verdict = "meets" if pool_over <= TARGET_MS else "MISSES"
    lines.append("")
    lines.append(
        f"median pool overhead {pool_over:.2f} ms per query ({verdict} the {TARGET_MS:g} ms "
        f"target); median spawn-per-query overhead {spawn_over:.1f} ms"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the default bank if needed, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="a built bank database (default: generated)")
    parser.add_argument("--queries", type=Path, help="cases.yaml or a .sql file")
    parser.add_argument("--reps", type=int, default=30, help="timed runs per query and mode")
    parser.add_argument("--spawn-reps", type=int, default=5, help="timed fresh-spawn runs")
    parser.add_argument("--max-rows", type=int, default=1000, help="when the file gives none")
    parser.add_argument(
        "--postgres", action="store_true", help="add the PostgreSQL column (retail bank)"
    )
    parser.add_argument("--sqlite", action="store_true", help="add the SQLite column (retail bank)")
    args = parser.parse_args(argv)
    queries = load_queries(args.queries, args.max_rows)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db
        if db is None:
            db = Path(tmp) / "bench_bank.duckdb"
            build_default_db(db)
        table = bench(db, queries, args.reps, args.spawn_reps)
    print(render(table))
    if args.postgres:
        from worker_bench_postgres import run as postgres_run  # this folder's sibling

        print()
        print(postgres_run(None, args.reps, 3))
    if args.sqlite:
        from worker_bench_sqlite import run as sqlite_run  # this folder's sibling

        print()
        print(sqlite_run(args.reps, 3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
