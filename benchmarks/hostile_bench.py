"""Time, memory and ledger growth of a run of hostile answers (issue 13 section 2).

Usage:
    python benchmarks/hostile_bench.py [--keep DIR]

Builds a fresh ledger in a temporary folder through the real CLI (``caseledger
init``, ``bank publish sales-fixture``), writes the replay file of
tests/harness/hostile.py (18 hostile answers: 600,000 columns, 100,000 nested
parentheses, a 1 MiB + 1 output, a 50 MB summary, SQL of 64 KiB + 1, a 100 MB
cell, a cross join over 16 MiB, deep CASE, deep subqueries, a 5,000-deep unary
minus, 200,000 control characters, a huge IN list, a long UNION ALL, many CTEs,
a pathological regexp, ... plus 10 ordinary answers) and runs ``caseledger run
--adapter replay`` in a child process under the default caps.

Printed: the wall time of the whole run (target: at most 60 s on 2 cores), the
peak RSS of the run and of every process it waited for, its SQL workers
included (target: under 1 GiB), the ledger growth, and per attempt its outcome,
the bytes it added to the ledger (target: at most 2 MB per hostile attempt) and
its duration from its PromptSent to its ScoreComputed (the events' ``at``
claims: the CLI's wall clock). Wall-clock figures grow with the machine's load.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "harness"))

import hostile  # noqa: E402  (tests/harness: the corpus the test uses)

from ledger import events  # noqa: E402
from ledger.store import Ledger  # noqa: E402

CASELEDGER = [sys.executable, "-c", "from ledger.cli import main; main()"]
_MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:])
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def _cli(ledger: Path, *args: str) -> str:
    done = subprocess.run(
        [*CASELEDGER, "--ledger", str(ledger), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"caseledger {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def _seconds(start: str, end: str) -> float:
    def parse(at: str) -> dt.datetime:
        return dt.datetime.strptime(at, "%Y-%m-%dT%H:%M:%S.%fZ")

    return (parse(end) - parse(start)).total_seconds()


def bench(folder: Path) -> None:
    """Run the hostile replay in ``folder`` and print the tables."""
    ledger = folder / "ledger.db"
    _cli(ledger, "init")
    _cli(ledger, "bank", "publish", "sales-fixture")
    bank = json.loads(_cli(ledger, "bank", "show", "sales-fixture", "--with-reference", "--json"))
    refs = {c["id"]: c["reference_sql"] for c in bank["cases"]}
    replay = folder / "hostile.jsonl"
    names = hostile.write_replay(replay, refs)
    before = sum(p.stat().st_size for p in folder.glob("ledger.db*"))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *CASELEDGER, "--ledger", str(ledger), "run",
         "--bank", "sales-fixture", "--adapter", "replay", "--replay-file", str(replay),
         "--run-id", "hostile", "--no-variants"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - start
    code, peak = done.stdout.strip().splitlines()[-1].split()
    growth = sum(p.stat().st_size for p in folder.glob("ledger.db*")) - before

    size: dict[tuple[str, int], int] = {}
    first: dict[tuple[str, int], str] = {}
    last: dict[tuple[str, int], events.EventBase] = {}
    with Ledger.open(ledger, readonly=True) as led:
        for item in led.stream_events("hostile"):
            event = item.event()
            if not hasattr(event, "case_id"):
                continue
            key = (event.case_id, event.attempt)
            size[key] = size.get(key, 0) + len(item.body) + len(item.sig)
            first.setdefault(key, event.at)
            if isinstance(event, events.ScoreComputed | events.AttemptCancelled):
                last[key] = event

    print(f"run exit code {code}; replay file {replay.stat().st_size / 1e6:.1f} MB")
    print(f"wall time      {wall:8.1f} s   (target <= 60 s on 2 cores)")
    print(f"peak RSS       {int(peak) / 2**20:8.0f} MiB (target < 1024 MiB; workers included)")
    print(f"ledger growth  {growth / 1e6:8.2f} MB for {len(size)} attempts\n")
    print(f"{'case':6} {'try':>3} {'answer':28} {'outcome':34} {'ledger':>10} {'time':>7}")
    for key in sorted(size):
        end = last.get(key)
        if isinstance(end, events.ScoreComputed):
            detail = end.failure_detail if isinstance(end.failure_detail, str) else ""
            outcome = f"{end.failure_kind} {detail}".strip()
            if end.result_correct:
                outcome += " (correct)"
        else:
            outcome = f"cancelled {getattr(end, 'reason', '?')}"
        took = _seconds(first[key], end.at) if end is not None else float("nan")
        print(
            f"{key[0]:6} {key[1]:>3} {names[key][:28]:28} {outcome[:34]:34} "
            f"{size[key] / 1e3:>8.1f}kB {took:>6.2f}s"
        )


def main() -> None:
    """Parse the arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="run in DIR and keep it")
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        bench(args.keep)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            bench(Path(tmp))


if __name__ == "__main__":
    main()
