"""An 18-attempt run on ledgers of 10k, 100k and 1M events, with a second writer (issue 34).

Usage: python benchmarks/ledger_size_bench.py [--sizes 10000,100000,1000000] [--rounds 3]
       [--json] [--cache DIR] [--code CHECKOUT]

What grows with the ledger and what must not: a run's start and end read its own
stream through the verified tree index, and the checkpoint it signs at its end
extends the tree the index gave with the rows since, under the write lock (docs/
verification.md, "The tree index"). Each row of the table is one ledger size:

* the ledger is the growth ledger of ``benchmarks/projection_bench.py`` (copies of one
  real retail run, built once and cached in ``--cache``, default the growth cache),
  copied to a work folder; a first reader there builds its tree index once (its CPU is
  the ``index_build_cpu_s`` column: what a ledger whose index was deleted pays once);
* each round runs ``caseledger run --bank retail --adapter reference --attempts 1
  --no-variants`` (the retail bank's 18 cases, one attempt each) in a fresh process,
  while a second writer process appends one event every 0.5 s to the same ledger,
  waiting for the write lock up to ``CASELEDGER_LOCK_WAIT`` (10 s) as any writer does;
* ``run_cpu_s``: the run process's own CPU (user + system; its SQL worker excluded);
  ``first_call_s``: from starting the run process to the reference adapter's first
  call; ``lock_hold_s``: the longest write-lock hold of the run (timed inside the
  store: from the moment ``begin`` holds the lock to the end of ``commit`` or
  ``rollback``), and ``end_lock_hold_s`` that of its last batch (the RunFinished and
  the checkpoint); ``writer_wait_s``: the second writer's longest append (its wait for
  the lock included); ``busy``: appends of the second writer refused with ``ledger is
  busy``.

Each figure is the median (and range) of ``--rounds`` rounds; sizes are interleaved
(round 1 of every size, then round 2, ...). ``ratio`` divides each median by the
smallest size's. Wall-clock figures follow the machine's load; CPU is the steadier.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SIZES = (10_000, 100_000, 1_000_000)
#: How often the second writer appends (seconds).
WRITER_EVERY_S = 0.5
FIGURES = ("run_cpu_s", "first_call_s", "lock_hold_s", "end_lock_hold_s", "writer_wait_s")

# The run, in its own process: the store's begin/commit/rollback and the adapter's call
# are timed from outside the library (it reads no environment and keeps no trace).
_RUN_CHILD = """
import json, resource, sys, time
from ledger.adapters.reference import ReferenceAdapter
from ledger.stores.sqlite import SqliteBackend
from ledger.cli import main as cli_main

out, holds, since = sys.argv[1], [], []
first = []
begin, commit, rollback = SqliteBackend.begin, SqliteBackend.commit, SqliteBackend.rollback
call = ReferenceAdapter.call

def timed_begin(self):
    begin(self)
    since.append(time.perf_counter())

def ended(fn):
    def end(self):
        try:
            fn(self)
        finally:
            if since:
                holds.append(time.perf_counter() - since.pop())
    return end

def first_call(self, request):
    if not first:
        first.append(time.time())
    return call(self, request)

SqliteBackend.begin = timed_begin
SqliteBackend.commit = ended(commit)
SqliteBackend.rollback = ended(rollback)
ReferenceAdapter.call = first_call
code = 0
try:
    cli_main.main(sys.argv[2:], standalone_mode=False)
except SystemExit as exc:
    code = exc.code or 0
use = resource.getrusage(resource.RUSAGE_SELF)
with open(out, "w") as f:
    json.dump({"code": code, "cpu_s": use.ru_utime + use.ru_stime, "holds": holds,
               "first_call": first[0] if first else None}, f)
"""

# The second writer: one PromptSent every WRITER_EVERY_S on its own stream until its
# stdin closes; prints its longest append and how many were refused as busy.
_WRITER_CHILD = """
import json, select, sys, time
from pathlib import Path
from ledger.errors import StoreBusyError
from ledger.events import PromptSent
from ledger.keys import Signer
from ledger.store import Draft, Ledger

path, every, label = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
signer = Signer.load(path.parent / "keys" / "operator.key")
longest, busy, done, i = 0.0, 0, 0, 0
with Ledger.open(path) as ledger:
    print("ready", flush=True)
    while True:
        i += 1
        fields = {"case_id": f"case-{i:04d}", "attempt": 1, "prompt": f"writer {label} {i}",
                  "prompt_sha256": "sha256:" + format(i, "064x")}
        start = time.perf_counter()
        try:
            ledger.append([Draft(PromptSent, f"writer-{label}", fields)], signer)
            done += 1
        except StoreBusyError:
            busy += 1
        longest = max(longest, time.perf_counter() - start)
        if select.select([sys.stdin], [], [], every)[0]:
            break
print(json.dumps({"longest_s": longest, "busy": busy, "appended": done}), flush=True)
"""

_INDEX_CHILD = """
import json, resource, sys
from pathlib import Path
from ledger import tree_index
from ledger.store import Ledger
with Ledger.open(Path(sys.argv[1]), readonly=True) as ledger:
    index = tree_index.open_index(ledger)
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"size": None if index is None else index.size,
                  "cpu_s": use.ru_utime + use.ru_stime}))
"""


#: The checkout whose ``ledger`` the children run (``--code``: e.g. a git worktree of an
#: earlier commit, to measure the code before a change beside today's).
CODE = [REPO]


def _env() -> dict[str, str]:
    rest = os.environ.get("PYTHONPATH")
    code = CODE[0]
    return {**os.environ, "PYTHONPATH": str(code) if not rest else f"{code}{os.pathsep}{rest}"}


def source_ledger(size: int, cache: Path | None) -> Path:
    """The cached growth ledger of about ``size`` events (projection_bench builds it)."""
    sys.path.insert(0, str(BENCH))
    import projection_bench

    if cache is not None:
        os.environ["CASELEDGER_GROWTH_CACHE"] = str(cache.resolve())
    return projection_bench.growth_build(size)


def prepare(size: int, cache: Path | None, work: Path) -> tuple[Path, float, int]:
    """A work copy of the ledger of ``size``, its index built once: (path, CPU s, events)."""
    source = source_ledger(size, cache)
    folder = work / f"ledger-{size}"
    shutil.copytree(source.parent, folder)
    path = folder / "ledger.db"
    done = subprocess.run(
        [sys.executable, "-c", _INDEX_CHILD, str(path)],
        capture_output=True, text=True, check=True, env=_env(), cwd=folder,
    )  # fmt: skip
    built = json.loads(done.stdout.strip().splitlines()[-1])
    if built["size"] is None:
        raise SystemExit(f"{path}: no tree index (no stored checkpoint?)")
    return path, float(built["cpu_s"]), int(built["size"])


def one_round(path: Path, run_id: str) -> dict[str, Any]:
    """One run with the second writer appending beside it; its figures."""
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER_CHILD, str(path), str(WRITER_EVERY_S), run_id],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(), cwd=path.parent,
    )  # fmt: skip
    assert writer.stdout is not None
    if writer.stdout.readline().strip() != "ready":
        writer.kill()
        raise SystemExit("the second writer did not start")
    out = path.parent / f"{run_id}.json"
    argv = ["--ledger", str(path), "run", "--bank", "retail", "--adapter", "reference",
            "--attempts", "1", "--no-variants", "--run-id", run_id]  # fmt: skip
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-c", _RUN_CHILD, str(out), *argv],
        capture_output=True, text=True, env=_env(), cwd=path.parent,
    )  # fmt: skip
    time.sleep(2 * WRITER_EVERY_S)  # the writer's next append sees the run's last batch
    stdout, _ = writer.communicate("stop\n", timeout=120)
    if done.returncode or not out.exists():
        raise SystemExit(f"run {run_id} failed: {done.stderr[-2000:]}")
    ran = json.loads(out.read_text())
    if ran["code"]:
        raise SystemExit(f"run {run_id} exited {ran['code']}: {done.stderr[-2000:]}")
    lines = stdout.strip().splitlines()
    if writer.returncode or not lines:
        raise SystemExit(f"the second writer failed (exit {writer.returncode}): its error is above")
    wrote = json.loads(lines[-1])
    holds = ran["holds"]
    return {
        "run_cpu_s": ran["cpu_s"],
        "first_call_s": ran["first_call"] - started,
        "lock_hold_s": max(holds),
        "end_lock_hold_s": holds[-1],
        "writer_wait_s": wrote["longest_s"],
        "busy": wrote["busy"],
        "writer_appends": wrote["appended"],
    }


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def bench(sizes: tuple[int, ...], rounds: int, cache: Path | None) -> list[dict[str, Any]]:
    """The table's rows (see the module doc), one per size."""
    work = Path(tempfile.mkdtemp(prefix="ledger-size-bench-"))
    try:
        ledgers = {size: prepare(size, cache, work) for size in sizes}
        seen: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
        for r in range(rounds):
            for size in sizes:
                got = one_round(ledgers[size][0], f"size-bench-{r}")
                seen[size].append(got)
                print(f"{size:,} round {r + 1}: " + ", ".join(
                    f"{k} {v:.3f}" for k, v in got.items() if isinstance(v, float)),
                    file=sys.stderr)  # fmt: skip
        rows = []
        for size in sizes:
            _, index_cpu, indexed = ledgers[size]
            row: dict[str, Any] = {
                "size": size,
                "events": indexed,
                "rounds": rounds,
                "index_build_cpu_s": index_cpu,
                "busy": sum(x["busy"] for x in seen[size]),
                "writer_appends": sum(x["writer_appends"] for x in seen[size]),
            }
            for figure in FIGURES:
                row[figure] = _spread([x[figure] for x in seen[size]])
            rows.append(row)
        for row in rows:
            row["ratio"] = {
                f: row[f]["median"] / rows[0][f]["median"] if rows[0][f]["median"] else None
                for f in FIGURES
            }
        return rows
    finally:
        shutil.rmtree(work, ignore_errors=True)


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table: median (min-max) and the ratio to the first row."""
    head = ["events", "index build CPU s", *FIGURES, "busy"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [f"{row['events']:,}", f"{row['index_build_cpu_s']:.2f}"]
        for f in FIGURES:
            s, ratio = row[f], row["ratio"][f]
            cells.append(f"{s['median']:.3f} ({s['min']:.3f}-{s['max']:.3f}) "
                         f"{'-' if ratio is None else f'{ratio:.2f}x'}")  # fmt: skip
        cells.append(str(row["busy"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON object per row")
    parser.add_argument("--cache", type=Path, help="where the growth ledgers are built")
    parser.add_argument("--code", type=Path, help="run another checkout's ledger package")
    args = parser.parse_args(argv)
    if args.code is not None:
        CODE[0] = args.code.resolve()
    sizes = tuple(int(x) for x in args.sizes.split(","))
    rows = bench(sizes, args.rounds, args.cache)
    if args.json:
        for row in rows:
            print(json.dumps(row, sort_keys=True))
    else:
        print(table(rows))


if __name__ == "__main__":
    main()
