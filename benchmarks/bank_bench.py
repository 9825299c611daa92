"""Bank build + validation against loading the same data straight into the engine (issue 16).

Run: ``.venv/bin/python benchmarks/bank_bench.py`` (``--rows 10000,100000`` for a quick
run, ``--rounds 3``, ``--work DIR`` to keep the generated banks).

A synthetic bank per size: ``orders`` (N rows: int, int, text, DECIMAL(12,2),
TIMESTAMP, a text column with NULLs, commas and quotes) and a ``customers``
dimension table (1,000 rows), five cases of aggregate reference SQL that run on
both engines. The bank's data is given three ways:

- ``csv``: ``data/<table>.csv`` on DuckDB; load = ``CREATE TABLE AS SELECT * FROM
  read_csv(...)`` with the same column types, into a new file;
- ``data.sqlite``: the SQLite file on the SQLite engine; load = ``executemany`` of
  the CSV rows into a new SQLite file (one transaction; reading the file back is
  not loading);
- ``seed.sql``: INSERT statements (1,000 rows each) on DuckDB; load = running
  seed.sql on a DuckDB connection. A seed.sql above the 64 MiB bank file limit is
  skipped (said in the table).

Every measurement runs in its own child process: the child times the operation
itself (imports excluded on both sides: duckdb, sqlglot's dialects, ledger; a
command pays them once, about 0.1 s) and reports its peak resident memory (``VmHWM`` of
/proc/self/status, or its own children's ``ru_maxrss`` when larger). Validation is
``validate_bank(folder)``: read and hash the files, purity check, build, freeze
gold, leak check. DuckDB runs with one thread on both sides (a bank is built
with ``threads=1``). Rounds are interleaved, so load on a shared machine hits
both sides. Prints seconds and MB as median (min-max) of the rounds, and the
ratio validate / load of the medians.

Targets (issue 16): validate <= 2x load, peak memory < 1 GB at 1,000,000 rows.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

CUSTOMERS = 1000
SEED_BATCH = 1000
MAX_FILE_BYTES = 64 * 1024 * 1024
TARGET_RATIO = 2.0
TARGET_MB = 1024.0
KINDS = ("csv", "data.sqlite", "seed.sql")

SCHEMA = """\
-- A synthetic shop: customers (a small dimension) and their orders.
CREATE TABLE customers (
    customer_id INTEGER NOT NULL,
    name        VARCHAR NOT NULL,
    region      VARCHAR
);

CREATE TABLE orders (
    order_id    INTEGER NOT NULL,
    customer_id INTEGER NOT NULL,
    status      VARCHAR NOT NULL,
    amount      DECIMAL(12,2) NOT NULL,
    ordered_at  TIMESTAMP NOT NULL,
    note        VARCHAR
);
"""

TYPES = {
    "customers": (("customer_id", "INTEGER"), ("name", "VARCHAR"), ("region", "VARCHAR")),
    "orders": (
        ("order_id", "INTEGER"),
        ("customer_id", "INTEGER"),
        ("status", "VARCHAR"),
        ("amount", "DECIMAL(12,2)"),
        ("ordered_at", "TIMESTAMP"),
        ("note", "VARCHAR"),
    ),
}

CASES = """\
bank: bench
version: v1
description: Synthetic bank for benchmarks/bank_bench.py.
{engine}cases:
  - id: by-status
    question: How many orders, and what revenue, per order status?
    reference_sql: |
      SELECT status, count(*) AS n, sum(amount) AS total
      FROM orders GROUP BY status ORDER BY status
    row_order_significant: true
    abs_tolerance: 0.01
  - id: by-region
    question: Orders and the average order amount per customer region.
    reference_sql: |
      SELECT c.region, count(*) AS n, round(avg(o.amount), 2) AS avg_amount
      FROM orders AS o JOIN customers AS c ON c.customer_id = o.customer_id
      GROUP BY c.region ORDER BY c.region
    row_order_significant: true
    abs_tolerance: 0.01
  - id: by-month
    question: How many orders were placed per calendar month?
    reference_sql: |
      SELECT substr(CAST(ordered_at AS VARCHAR), 1, 7) AS month, count(*) AS n
      FROM orders GROUP BY month ORDER BY month
    row_order_significant: true
  - id: notes
    question: How many orders are there, how many carry a note, and the largest order id?
    reference_sql: |
      SELECT count(*) AS n, count(note) AS with_note, max(order_id) AS last_id FROM orders
  - id: top-customers
    question: The ten customers with the largest total order amount (ties by customer id).
    reference_sql: |
      SELECT customer_id, sum(amount) AS total
      FROM orders GROUP BY customer_id ORDER BY total DESC, customer_id LIMIT 10
    row_order_significant: true
    abs_tolerance: 0.01
    max_rows: 11
"""

PROMPT = """\
Answer the question with one SQL query.

{{dialect}}

{{schema}}

{{semantic}}

{{question}}

{{output_schema}}
"""

SEMANTIC = (
    '{"entities": [{"name": "order", "table": "orders", "key": "order_id"}], '
    '"relations": [], "metrics": [], "dimensions": [], "business_rules": []}\n'
)


# ---------------------------------------------------------------- data


def _write_csvs(folder: Path, rows: int) -> None:
    import duckdb

    folder.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:")
    try:
        con.execute(
            f"COPY (SELECT i AS customer_id, 'Customer ' || i AS name, "  # noqa: S608 - fixed
            f"CASE WHEN i % 10 = 0 THEN NULL ELSE ['north','south','east','west'][1 + i % 4] "
            f"END AS region FROM range(1, {CUSTOMERS + 1}) r(i)) "
            f"TO '{folder / 'customers.csv'}' (HEADER, DELIMITER ',')"
        )
        con.execute(
            f"COPY (SELECT i AS order_id, 1 + (i * 7919) % {CUSTOMERS} AS customer_id, "  # noqa: S608
            "['completed','cancelled','refunded'][1 + (i * 13) % 3] AS status, "
            "CAST(((i * 104729) % 100000) / 100.0 AS DECIMAL(12,2)) AS amount, "
            "TIMESTAMP '2025-01-01 00:00:00' + to_seconds((i * 7331) % 31536000) AS ordered_at, "
            "CASE WHEN i % 3 = 0 THEN NULL WHEN i % 3 = 1 THEN 'gift, wrap \"red\"' "
            "ELSE 'note ' || i END AS note "
            f"FROM range(1, {rows + 1}) r(i)) "
            f"TO '{folder / 'orders.csv'}' (HEADER, DELIMITER ',', TIMESTAMPFORMAT "
            "'%Y-%m-%d %H:%M:%S')"
        )
    finally:
        con.close()


def _csv_rows(path: Path) -> Iterator[tuple[str | None, ...]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        next(reader)
        for row in reader:
            yield tuple(c if c != "" else None for c in row)


def load_sqlite(csv_dir: Path, target: Path) -> None:
    """The SQLite load: schema, then executemany of each CSV's rows, one transaction."""
    con = sqlite3.connect(target, isolation_level=None)
    try:
        con.execute("BEGIN")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                con.execute(statement)
        for table, columns in TYPES.items():
            marks = ", ".join("?" for _ in columns)
            con.executemany(
                f"INSERT INTO {table} VALUES ({marks})",  # noqa: S608 - fixed names
                _csv_rows(csv_dir / f"{table}.csv"),
            )
        con.execute("COMMIT")
    finally:
        con.close()


def _sql_value(cell: str | None, type_name: str) -> str:
    if cell is None:
        return "NULL"
    if type_name == "INTEGER":
        return cell
    if type_name == "TIMESTAMP":
        return f"TIMESTAMP '{cell}'"
    if type_name.startswith("DECIMAL"):
        return cell
    return "'" + cell.replace("'", "''") + "'"


def _write_seed(csv_dir: Path, target: Path) -> None:
    with target.open("w", encoding="utf-8") as out:
        for table, columns in TYPES.items():
            batch: list[str] = []
            for row in _csv_rows(csv_dir / f"{table}.csv"):
                cells = ", ".join(_sql_value(c, t) for c, (_, t) in zip(row, columns, strict=True))
                batch.append(f"({cells})")
                if len(batch) == SEED_BATCH:
                    out.write(f"INSERT INTO {table} VALUES\n" + ",\n".join(batch) + ";\n")
                    batch = []
            if batch:
                out.write(f"INSERT INTO {table} VALUES\n" + ",\n".join(batch) + ";\n")


def make_banks(work: Path, rows: int) -> dict[str, Path | None]:
    """The three bank folders for ``rows`` orders (None: seed.sql over the file limit)."""
    base = work / f"rows-{rows}"
    banks: dict[str, Path | None] = {
        "csv": base / "csv",
        "data.sqlite": base / "sqlite",
        "seed.sql": base / "seed",
    }
    if (base / "done").is_file():
        seed = banks["seed.sql"]
        if seed is not None and not (seed / "seed.sql").is_file():
            banks["seed.sql"] = None
        return banks
    for kind, folder in banks.items():
        assert folder is not None
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "schema.sql").write_text(SCHEMA, encoding="utf-8")
        (folder / "prompt.md").write_text(PROMPT, encoding="utf-8")
        (folder / "semantic.json").write_text(SEMANTIC, encoding="utf-8")
        engine = "engine: sqlite\n" if kind == "data.sqlite" else ""
        (folder / "cases.yaml").write_text(CASES.format(engine=engine), encoding="utf-8")
    csv_dir = base / "csv" / "data"
    _write_csvs(csv_dir, rows)
    load_sqlite(csv_dir, base / "sqlite" / "data.sqlite")
    seed = base / "seed" / "seed.sql"
    _write_seed(csv_dir, seed)
    if seed.stat().st_size > MAX_FILE_BYTES:
        seed.unlink()
        banks["seed.sql"] = None
    (base / "done").write_text("", encoding="utf-8")
    return banks


# ---------------------------------------------------------------- child side


def _peak_mb() -> float:
    hwm_kb = 0
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                hwm_kb = int(line.split()[1])
    children_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(hwm_kb, children_kb) / 1024


def _load_duckdb_csv(csv_dir: Path, target: Path) -> None:
    import duckdb

    con = duckdb.connect(str(target), config={"threads": 1})
    try:
        for table, columns in TYPES.items():
            spec = ", ".join(f"'{n}': '{t}'" for n, t in columns)
            con.execute(
                # Fixed table names, a path in this run's own folder.
                f"CREATE TABLE {table} AS SELECT * FROM read_csv('{csv_dir / f'{table}.csv'}', "  # noqa: S608
                f"header=true, auto_detect=false, delim=',', quote='\"', escape='\"', "
                f"nullstr='', columns={{{spec}}})"
            )
        con.execute("CHECKPOINT")
    finally:
        con.close()


def _load_duckdb_seed(seed: Path, target: Path) -> None:
    import duckdb

    con = duckdb.connect(str(target), config={"threads": 1})
    try:
        con.execute(SCHEMA)
        con.execute(seed.read_text(encoding="utf-8"))
        con.execute("CHECKPOINT")
    finally:
        con.close()


def child(op: str, kind: str, folder: Path) -> None:
    """Run one measurement in this process and print {"seconds", "mb"} as JSON."""
    with tempfile.TemporaryDirectory(prefix="bank-bench-") as tmp:
        target = Path(tmp) / "load.db"
        if op == "validate":
            # Imported before timing, like duckdb for the load: a one-off ~0.1 s per
            # process (sqlglot's dialects, lazily imported by the purity check).
            import sqlglot.dialects.duckdb
            import sqlglot.dialects.sqlite  # noqa: F401

            from ledger.bank.publish import validate_bank
            from ledger.engines import sqlite  # noqa: F401

            t0 = time.perf_counter()
            validate_bank(folder)
        elif kind == "csv":
            import duckdb

            t0 = time.perf_counter()
            _load_duckdb_csv(folder / "data", target)
        elif kind == "data.sqlite":
            t0 = time.perf_counter()
            load_sqlite(folder.parent / "csv" / "data", target)
        else:
            import duckdb  # noqa: F401

            t0 = time.perf_counter()
            _load_duckdb_seed(folder / "seed.sql", target)
        seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "mb": _peak_mb()}))


# ---------------------------------------------------------------- parent side


def measure(op: str, kind: str, folder: Path) -> tuple[float, float]:
    """(seconds, peak MB) of one operation, run in a fresh child process."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", op, kind, str(folder)],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    if out.returncode != 0:
        sys.exit(f"{op} {kind} {folder} failed:\n{out.stderr}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return float(data["seconds"]), float(data["mb"])


def _cell(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="10000,100000,1000000", help="orders rows per bank")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", default=",".join(KINDS), help="csv,data.sqlite,seed.sql")
    ap.add_argument("--work", type=Path, default=None, help="keep generated banks here")
    ap.add_argument("--child", nargs=3, metavar=("OP", "KIND", "FOLDER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        op, kind, folder = args.child
        child(op, kind, Path(folder))
        return
    sizes = [int(r) for r in args.rows.split(",")]
    kinds = [k for k in args.kinds.split(",") if k]
    with tempfile.TemporaryDirectory(prefix="bank-bench-") as tmp:
        work = args.work or Path(tmp)
        print(
            f"validate_bank(folder) vs loading the same data, {args.rounds} rounds, "
            "seconds and peak MB: median (min-max); ratio of the medians"
        )
        print("| rows | data | load s | validate s | validate / load | load MB | validate MB |")
        print("|---|---|---|---|---|---|---|")
        worst: dict[int, tuple[float, float]] = {}  # rows -> (worst ratio, worst peak MB)
        for rows in sizes:
            banks = make_banks(work, rows)
            for kind in kinds:
                folder = banks[kind]
                if folder is None:
                    print(f"| {rows:,} | {kind} | skipped: seed.sql exceeds the 64 MiB bank "
                          "file limit | | | | |")  # fmt: skip
                    continue
                load_s, load_mb, val_s, val_mb = [], [], [], []
                for _ in range(args.rounds):
                    s, mb = measure("load", kind, folder)
                    load_s.append(s)
                    load_mb.append(mb)
                    s, mb = measure("validate", kind, folder)
                    val_s.append(s)
                    val_mb.append(mb)
                ratio = statistics.median(val_s) / statistics.median(load_s)
                before = worst.get(rows, (0.0, 0.0))
                worst[rows] = (max(before[0], ratio), max(before[1], max(val_mb)))
                print(
                    f"| {rows:,} | {kind} | {_cell(load_s, '.2f')} | {_cell(val_s, '.2f')} "
                    f"| {ratio:.2f}x | {_cell(load_mb, '.0f')} | {_cell(val_mb, '.0f')} |",
                    flush=True,
                )
        print()
        for rows, (ratio, mb) in worst.items():
            # The targets are for a database of 1,000,000 rows; below that a fixed cost
            # of about 0.1 s (DuckDB files opened four times, checkpoints) weighs in.
            ok = ratio <= TARGET_RATIO and mb < TARGET_MB
            verdict = ("met" if ok else "NOT met") if rows >= 1_000_000 else "for information"
            print(
                f"{rows:,} rows: worst ratio {ratio:.2f}x (target <= {TARGET_RATIO:.0f}x at "
                f"1,000,000 rows), worst peak {mb:.0f} MB (target < {TARGET_MB:.0f} MB): {verdict}"
            )


if __name__ == "__main__":
    main()
