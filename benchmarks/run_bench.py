"""The runner's own time per attempt on a replay run, against the time of the SQL executions.

Usage:
    python benchmarks/run_bench.py [--attempts 3] [--bank retail] [--keep DIR]

Builds a fresh ledger in a temporary folder (a new operator key, the bank
published from the built-in folder), writes a replay file answering every case
with its reference SQL (so every attempt parses, passes the guard, executes and
is compared with gold), and runs it through ``ledger.harness.runner.run`` with
one call at a time. A replay answers instantly, so the time between two
progress callbacks is the harness's whole time for one attempt: prompt, parse,
guard, SQL execution in the sandboxed worker, comparison, scoring, encoding,
signing and one SQLite transaction (fsync included). The overhead of an
attempt is that time minus its ``sql_us`` (measured inside the worker, from
its SqlExecuted event). Target: overhead <= 20 ms per attempt at the median.

Wall-clock figures grow with the machine's load; the CPU time of the runner's
own process per attempt (``time.process_time``: no waiting, no SQL worker) is
printed too, as the figure that load changes least.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ledger import codec, events
from ledger.adapters import build_adapter
from ledger.bank.publish import publish
from ledger.bank.registry import builtin_banks
from ledger.cli_run import bank_context
from ledger.harness.runner import Progress, RunPlan, run
from ledger.keys import Signer
from ledger.store import Ledger

TARGET_MS = 20.0


def _answer(sql: str) -> str:
    plan = {k: [] for k in ("sources", "joins", "filters", "metrics", "steps", "risks")}
    body = {"plan": {"grain": "g", **plan}, "sql": sql, "summary": "", "assumptions": []}
    return json.dumps(body, ensure_ascii=False)


def _clock() -> str:
    import datetime as dt

    return codec.format_time(dt.datetime.now(dt.UTC))


def bench(folder: Path, bank_name: str, attempts: int) -> dict[str, object]:
    """Run the benchmark in ``folder``; returns the measurements."""
    signer = Signer.generate("bench-operator", role="operator")
    with Ledger.create(folder / "ledger.db", signer) as ledger:
        published = publish(ledger, signer, builtin_banks()[bank_name], folder, cwd=folder)
        bank = published.published
        refs = bank.references()
        replay = folder / "replay.jsonl"
        replay.write_text(
            "".join(
                json.dumps({"case": c, "attempt": n, "output": _answer(sql)}) + "\n"
                for c, sql in refs.items()
                for n in range(1, attempts + 1)
            )
        )
        adapter = build_adapter("replay", {"replay_file": str(replay)})
        ctx = bank_context(bank, ledger.path, folder)
        marks: list[int] = []
        cpu: list[int] = []

        def tick(_: Progress) -> None:
            marks.append(time.perf_counter_ns())
            cpu.append(time.process_time_ns())

        start = time.perf_counter_ns()
        summary = run(
            ledger,
            signer,
            ctx,
            adapter,
            RunPlan(run_id="bench", profile="bench", attempts=attempts),
            clock=_clock,
            on_progress=tick,
        )
        total_ns = time.perf_counter_ns() - start
        sql_us: list[int] = []
        for item in ledger.stream_events("bench"):
            event = item.event()
            if isinstance(event, events.SqlExecuted):
                sql_us.append(event.sql_us)
    # The first attempt also pays for the worker's start-up: measured apart.
    per_attempt_us = [(b - a) // 1000 for a, b in itertools.pairwise(marks)]
    overhead_us = [t - s for t, s in zip(per_attempt_us, sql_us[1:], strict=True)]
    cpu_us = [(b - a) // 1000 for a, b in itertools.pairwise(cpu)]
    return {
        "attempts": summary.planned,
        "correct": summary.correct,
        "total_s": total_ns / 1e9,
        "first_ms": (marks[0] - start) / 1e6,
        "per_attempt_ms": [u / 1000 for u in per_attempt_us],
        "sql_ms": [u / 1000 for u in sql_us[1:]],
        "overhead_ms": [u / 1000 for u in overhead_us],
        "cpu_ms": [u / 1000 for u in cpu_us],
    }


def _row(name: str, values: list[float]) -> str:
    q = statistics.quantiles(values, n=20)
    return (
        f"| {name} | {statistics.median(values):.2f} | {q[18]:.2f} | "
        f"{min(values):.2f} | {max(values):.2f} |"
    )


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit 1 when the median overhead misses the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bank", default="retail")
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="Keep the ledger in this (new) folder.")
    args = parser.parse_args(argv)
    if args.keep:
        args.keep.mkdir(parents=True)
        result = bench(args.keep, args.bank, args.attempts)
    else:
        with tempfile.TemporaryDirectory(prefix="caseledger-run-bench-") as tmp:
            result = bench(Path(tmp), args.bank, args.attempts)
    overhead = result["overhead_ms"]
    assert isinstance(overhead, list)
    print(
        f"replay run of {args.bank}: {result['attempts']} attempts "
        f"({result['correct']} result-correct) in {result['total_s']:.2f} s total; "
        f"first attempt {result['first_ms']:.1f} ms (includes the SQL worker's start-up)"
    )
    print()
    print("| per attempt (ms), attempts 2..N | median | p95 | min | max |")
    print("|---|---|---|---|---|")
    print(_row("harness + SQL (between progress callbacks)", result["per_attempt_ms"]))  # type: ignore[arg-type]
    print(_row("SQL execution alone (sql_us)", result["sql_ms"]))  # type: ignore[arg-type]
    print(_row("harness overhead (difference)", overhead))
    print(_row("harness CPU time of this process", result["cpu_ms"]))  # type: ignore[arg-type]
    median = statistics.median(overhead)
    verdict = "meets" if median <= TARGET_MS else "MISSES"
    print(f"\nmedian overhead {median:.2f} ms {verdict} the target of {TARGET_MS:.0f} ms")
    return 0 if median <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
