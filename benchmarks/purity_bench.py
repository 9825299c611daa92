"""Speed of the purity check of seed.sql (issue 16): sqlglot's token and AST passes over
the whole text (the check before issue 16) vs the linear scan that keeps data rows away
from sqlglot (the check now).

Run: ``.venv/bin/python benchmarks/purity_bench.py`` (``--rows``, ``--rounds``,
``--old-max``). A synthetic seed: one CREATE TABLE and one INSERT of N rows of seven
literals (an integer, two strings, one with a doubled quote, a decimal, a DATE
literal, NULL, TRUE), about 80 bytes a row. Prints seconds as median (min-max) of
the rounds.

The old check takes minutes and gigabytes at 1,000,000 rows, so it is timed only up
to ``--old-max`` rows; larger sizes are estimated from the largest measured size,
scaled by the row count (its cost grows linearly with the text), and marked ``est``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from ledger.bank.purity import _fast_findings, _full_findings


def seed(rows: int) -> str:
    """A pure seed of ``rows`` rows (no problem for either check)."""
    body = ",\n".join(
        f"    ({i}, 'name {i}', 'city''s {i % 7}', {i * 1.5}, "
        f"DATE '2024-01-{i % 28 + 1:02d}', NULL, TRUE)"
        for i in range(rows)
    )
    return (
        "CREATE TABLE t (a INT, b TEXT, c TEXT, d DOUBLE, e DATE, f INT, g BOOLEAN);\n"
        f"INSERT INTO t VALUES\n{body};\n"
    )


def timed(check: object, text: str, rounds: int) -> list[float]:
    """Seconds of ``rounds`` runs of ``check(text)``; each must find nothing."""
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        found = check(text)  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
        if found:
            raise SystemExit(f"the pure seed was found impure: {found[:3]}")
    return times


def show(times: list[float]) -> str:
    return f"{statistics.median(times):8.2f} ({min(times):.2f}-{max(times):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--old-max", type=int, default=10_000, help="largest size the old check runs on"
    )
    args = parser.parse_args()

    old_head, new_head = "old s: median (range)", "new s: median (range)"
    print(f"{'rows':>9} {'MB':>6}  {old_head:>28}  {new_head:>24}  speed-up")
    measured: tuple[int, list[float]] | None = None
    for rows in args.rows:
        text = seed(rows)
        new = timed(_fast_findings, text, args.rounds)
        if rows <= args.old_max:
            old = timed(_full_findings, text, args.rounds)
            measured = (rows, old)
            old_shown = show(old) + "    "
        elif measured is not None:
            base_rows, base = measured
            old = [t * rows / base_rows for t in base]
            old_shown = show(old) + " est"
        else:
            old, old_shown = [], "not run".rjust(28)
        ratio = f"{statistics.median(old) / statistics.median(new):7.0f}x" if old else ""
        print(f"{rows:>9,} {len(text) / 1e6:6.1f}  {old_shown:>28}  {show(new):>24}  {ratio}")


if __name__ == "__main__":
    main()
