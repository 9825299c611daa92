"""The runner's own time per attempt on a replay run, against the time of the SQL executions.

Usage:
    python benchmarks/run_bench.py [--attempts 3] [--bank retail] [--keep DIR]
        [--variants both|on|off] [--distinct-sql]

Builds a fresh ledger in a temporary folder (a new operator key, the bank
published from the built-in folder), writes a replay file answering every case
with its reference SQL (so every attempt parses, passes the guard, executes and
is compared with gold), and runs it through ``ledger.run.runner.run`` with
one call at a time. A replay answers instantly, so the time between two
progress callbacks is the harness's whole time for one attempt: prompt, parse,
guard, SQL execution in the sandboxed worker, comparison, scoring, encoding,
signing and one SQLite transaction (fsync included). The overhead of an
attempt is that time minus its ``sql_us`` (measured inside the worker, from
its SqlExecuted event). Target: overhead <= 20 ms per attempt at the median.

Model runs also execute each SQL on the bank's calibration variants (VariantChecked
diagnostics, as ``caseledger run`` does unless ``--no-variants``). Both modes are
measured, each on its own fresh ledger: "variants off" is the harness alone;
"variants on" adds, per attempt, the guard, execution and scoring of the SQL on
every variant database, which count as harness time here (only the base
execution's ``sql_us`` is subtracted).

By default attempts 2..N of a case repeat attempt 1's SQL text, as a model often
does; the guard and the AST rules then reuse their cached parse. With
``--distinct-sql`` every attempt's SQL starts with its own comment
(``/* attempt N */``), so no attempt reuses another's work: the figure for a
model that writes new SQL every time.

Wall-clock figures grow with the machine's load; the CPU time of the runner's
own process per attempt (``time.process_time``: no waiting, no SQL worker) is
printed too, as the figure that load changes least.
"""

from __future__ import annotations

import argparse
import contextlib
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
from ledger.cli.run import bank_context, with_variants
from ledger.keys import Signer
from ledger.run.runner import Progress, RunPlan, run
from ledger.store import Ledger

TARGET_MS = 20.0


def _answer(sql: str) -> str:
    plan = {k: [] for k in ("sources", "joins", "filters", "metrics", "steps", "risks")}
    body = {"plan": {"grain": "g", **plan}, "sql": sql, "summary": "", "assumptions": []}
    return json.dumps(body, ensure_ascii=False)


def _sql(sql: str, attempt: int, distinct: bool) -> str:
    return f"/* attempt {attempt} */ {sql}" if distinct else sql


def _clock() -> str:
    import datetime as dt

    return codec.format_time(dt.datetime.now(dt.UTC))


def bench(
    folder: Path, bank_name: str, attempts: int, *, variants: bool = False, distinct: bool = False
) -> dict[str, object]:
    """Run the benchmark in ``folder`` (variant diagnostics on or off); returns the measurements."""
    signer = Signer.generate("bench-operator", role="operator")
    with Ledger.create(folder / "ledger.db", signer) as ledger, contextlib.ExitStack() as stack:
        published = publish(ledger, signer, builtin_banks()[bank_name], folder, cwd=folder)
        bank = published.published
        refs = bank.references()
        replay = folder / "replay.jsonl"
        replay.write_text(
            "".join(
                json.dumps({"case": c, "attempt": n, "output": _answer(_sql(sql, n, distinct))})
                + "\n"
                for c, sql in refs.items()
                for n in range(1, attempts + 1)
            )
        )
        adapter = build_adapter("replay", {"replay_file": str(replay)})
        ctx = bank_context(bank, ledger.path, folder)
        if variants:
            ctx = with_variants(ctx, bank, stack)
            if ctx.variant_check is None:
                raise SystemExit(f"bank {bank_name} has no calibration variants")
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
        checked = 0
        for item in ledger.stream_events("bench"):
            event = item.event()
            if isinstance(event, events.SqlExecuted):
                sql_us.append(event.sql_us)
            elif isinstance(event, events.VariantChecked):
                checked = max(checked, len(event.outcomes))
    # The first attempt also pays for the worker's start-up: measured apart.
    per_attempt_us = [(b - a) // 1000 for a, b in itertools.pairwise(marks)]
    overhead_us = [t - s for t, s in zip(per_attempt_us, sql_us[1:], strict=True)]
    cpu_us = [(b - a) // 1000 for a, b in itertools.pairwise(cpu)]
    return {
        "variants": checked,
        "attempts": summary.planned,
        "correct": summary.correct,
        "total_s": total_ns / 1e9,
        "first_ms": (marks[0] - start) / 1e6,
        "per_attempt_ms": [u / 1000 for u in per_attempt_us],
        "sql_ms": [u / 1000 for u in sql_us[1:]],
        "overhead_ms": [u / 1000 for u in overhead_us],
        "cpu_ms": [u / 1000 for u in cpu_us],
    }


def _row(name: str, mode: str, values: list[float]) -> str:
    q = statistics.quantiles(values, n=20)
    return (
        f"| {name} | {mode} | {statistics.median(values):.2f} | {q[18]:.2f} | "
        f"{min(values):.2f} | {max(values):.2f} |"
    )


def _measure(args: argparse.Namespace, variants: bool) -> dict[str, object]:
    if args.keep:
        folder = args.keep / ("variants-on" if variants else "variants-off")
        folder.mkdir(parents=True)
        return bench(
            folder, args.bank, args.attempts, variants=variants, distinct=args.distinct_sql
        )
    with tempfile.TemporaryDirectory(prefix="caseledger-run-bench-") as tmp:
        return bench(
            Path(tmp), args.bank, args.attempts, variants=variants, distinct=args.distinct_sql
        )


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit 1 when a median overhead misses the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bank", default="retail")
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="Keep the ledgers in this (new) folder.")
    parser.add_argument(
        "--variants",
        choices=("both", "on", "off"),
        default="both",
        help="Measure with variant diagnostics, without, or both (default).",
    )
    parser.add_argument(
        "--distinct-sql",
        action="store_true",
        help="Give every attempt its own SQL text (a leading comment): no reuse across attempts.",
    )
    args = parser.parse_args(argv)
    if args.keep:
        args.keep.mkdir(parents=True)
    modes = {"both": (False, True), "on": (True,), "off": (False,)}[args.variants]
    results = [(v, _measure(args, v)) for v in modes]
    for variants, result in results:
        label = (
            f"variants on ({result['variants']} variant databases)"
            if variants
            else ("variants off (--no-variants)")
        )
        print(
            f"replay run of {args.bank}, {label}: {result['attempts']} attempts "
            f"({result['correct']} result-correct) in {result['total_s']:.2f} s total; "
            f"first attempt {result['first_ms']:.1f} ms (includes the SQL worker's start-up); "
            + (
                "every attempt's SQL text distinct"
                if args.distinct_sql
                else "attempts 2..N repeat attempt 1's SQL"
            )
        )
    print()
    print("| per attempt (ms), attempts 2..N | variants | median | p95 | min | max |")
    print("|---|---|---|---|---|---|")
    verdicts = []
    for variants, result in results:
        mode = "on" if variants else "off"
        overhead = result["overhead_ms"]
        assert isinstance(overhead, list)
        print(_row("harness + SQL (between progress callbacks)", mode, result["per_attempt_ms"]))  # type: ignore[arg-type]
        print(_row("SQL execution alone (sql_us)", mode, result["sql_ms"]))  # type: ignore[arg-type]
        print(_row("harness overhead (difference)", mode, overhead))
        print(_row("harness CPU time of this process", mode, result["cpu_ms"]))  # type: ignore[arg-type]
        verdicts.append((mode, statistics.median(overhead)))
    print()
    for mode, median in verdicts:
        verdict = "meets" if median <= TARGET_MS else "MISSES"
        print(
            f"variants {mode}: median overhead {median:.2f} ms {verdict} the target of "
            f"{TARGET_MS:.0f} ms"
        )
    return 0 if all(m <= TARGET_MS for _, m in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
