"""The SQLite column of worker_bench: the executor's per-query overhead against sqlite3 in-process.

Usage:
    python benchmarks/worker_bench_sqlite.py [--reps 30] [--rounds 3]
    python benchmarks/worker_bench.py --sqlite        # the same, after the DuckDB table

The bank is the built-in ``retail`` bank, transpiled from DuckDB as a publish
does (``ledger.engines.transpile``: sqlglot statement by statement, plus its
SQLite rewrites) and built with the SQLite engine; the queries are its cases'
reference SQL, transpiled the same way (a query SQLite cannot run is reported
and skipped). Each query is timed two ways, end to end as the caller
sees them:

- direct: ``sqlite3`` in this process on the worker's own connection settings
  (``open_sandboxed``: read-only immutable URI, authorizer), ``execute``, fetch
  ``max_rows + 1`` rows, type the columns and encode the cells: the same work
  without the process, the pipe, the progress handler and the result caps;
- executor: ``SQLiteExecutor.execute`` on its warm worker process.

A round's overhead is the median over the queries of (executor median - direct
median). Three rounds give the median and the range. Target: <= 5 ms.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ledger.engines import cells  # noqa: E402
from ledger.engines.sqlite import SQLiteEngine  # noqa: E402
from ledger.engines.sqlite_sandbox import open_sandboxed, typed_result  # noqa: E402
from ledger.engines.transpile import transpile  # noqa: E402

TARGET_MS = 5.0
RETAIL = REPO / "ledger" / "banks" / "retail"


def _transpile(text: str) -> str:
    return transpile(text, "duckdb", "sqlite")


def _median_ms(run: Callable[[], object], reps: int) -> float:
    samples = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        run()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return statistics.median(samples)


def _direct(con: sqlite3.Connection, sql: str, max_rows: int) -> object:
    cursor = con.execute(sql)
    names = [str(d[0]) for d in cursor.description or ()]
    rows = cursor.fetchmany(max_rows + 1)
    cursor.close()
    _, typed = typed_result(names, rows[:max_rows])
    return [cells.encode_row(r) for r in typed]


def sqlite_column(*, reps: int = 30, rounds: int = 3) -> dict[str, Any]:
    """Time the retail reference queries; per-query medians of the last round and the rounds."""
    engine = SQLiteEngine()
    doc = yaml.safe_load((RETAIL / "cases.yaml").read_text(encoding="utf-8"))
    queries = [(c["id"], _transpile(c["reference_sql"]), int(c["max_rows"])) for c in doc["cases"]]
    skipped: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "retail.sqlite"
        engine.build(
            _transpile((RETAIL / "schema.sql").read_text(encoding="utf-8")),
            _transpile((RETAIL / "seed.sql").read_text(encoding="utf-8")),
            target,
        )
        round_overheads: list[float] = []
        table: list[dict[str, Any]] = []
        con, _ = open_sandboxed(target)
        try:
            with engine.executor(target) as ex:
                for _ in range(rounds):
                    table = []
                    for case_id, sql, max_rows in queries:
                        check = ex.execute(sql, max_rows=max_rows)
                        if not check.ok:
                            if case_id not in skipped:
                                skipped.append(case_id)
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
            con.close()
    return {
        "version": engine.version(),
        "table": table,
        "rounds": round_overheads,
        "skipped": skipped,
    }


def render(result: dict[str, Any]) -> str:
    """A Markdown table of the last round, then the median and range over the rounds."""
    lines = [
        f"SQLite {result['version']}: retail reference queries",
        "",
        "| query | rows | direct ms | executor ms | overhead ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in result["table"]:
        lines.append(
            f"| {r['query']} | {r['rows']} | {r['direct']:.3f} | {r['executor']:.3f} "
            f"| {r['executor'] - r['direct']:.3f} |"
        )
    rounds = result["rounds"]
    middle = statistics.median(rounds)
    verdict = "meets" if middle <= TARGET_MS else "MISSES"
    shown = ", ".join(f"{r:.3f}" for r in rounds)
    lines += [
        "",
        f"median executor overhead {middle:.3f} ms per query over {len(rounds)} rounds "
        f"(range {min(rounds):.3f}-{max(rounds):.3f}; rounds {shown}); {verdict} the "
        f"{TARGET_MS:g} ms target",
    ]
    if result["skipped"]:
        lines.append(
            f"skipped (SQLite cannot run the transpiled SQL): {', '.join(result['skipped'])}"
        )
    return "\n".join(lines)


def run(reps: int, rounds: int) -> str:
    """The rendered column."""
    return render(sqlite_column(reps=reps, rounds=rounds))


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and print the SQLite column."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="timed runs per query and mode")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (median and range)")
    args = parser.parse_args(argv)
    print(run(args.reps, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
