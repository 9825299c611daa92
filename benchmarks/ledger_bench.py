"""Ledger speed and memory: Ed25519 ceilings, durable append, full and chain-only verify.

Usage: python benchmarks/ledger_bench.py [--events N] [--batch B] [--workers W]

Prints one table measured in one run. Targets (issue 2): append >= 70 % of the
single-core sign ceiling; full verify >= 80 % of the all-core verify ceiling;
chain-only verify >= 300,000 events/s; verify peak memory flat in ledger size
(<= 200 MB at 1,000,000 events). The machine may be shared: compare ratios.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.events import PromptSent
from ledger.keys import EVENT_SIGNING_PREFIX, Signer
from ledger.store import Draft, Ledger
from ledger.verify import verify_chain

SEED = bytes(range(32))
N_CRYPTO = 20_000


def _messages(n: int) -> list[bytes]:
    return [EVENT_SIGNING_PREFIX + hashlib.sha256(i.to_bytes(8, "big")).digest() for i in range(n)]


def _sign_loop(n: int) -> float:
    key = Ed25519PrivateKey.from_private_bytes(SEED)
    msgs = _messages(n)
    start = time.perf_counter()
    for m in msgs:
        key.sign(m)
    return time.perf_counter() - start


def _verify_loop(n: int) -> float:
    key = Ed25519PrivateKey.from_private_bytes(SEED)
    pub = key.public_key()
    pairs = [(key.sign(m), m) for m in _messages(n)]
    start = time.perf_counter()
    for sig, m in pairs:
        pub.verify(sig, m)
    return time.perf_counter() - start


def _ceiling(fn: object, workers: int) -> float:
    """Operations per second of ``fn`` on one core, or on ``workers`` processes at once."""
    if workers == 1:
        return N_CRYPTO / fn(N_CRYPTO)  # type: ignore[operator]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers) as pool:
        pool.map(fn, [100] * workers)  # warm up the processes
        # Each process times only its own loop (message setup excluded); they run at
        # the same time, so the ceiling is the sum of their rates.
        rates = [N_CRYPTO / t for t in pool.map(fn, [N_CRYPTO] * workers, chunksize=1)]
    return sum(rates)


def _draft(i: int) -> Draft:
    fields = {
        "case_id": f"case-{i % 500:04d}",
        "attempt": 1 + i % 3,
        "prompt": "Given the schema orders(id, region, amount, placed_at), how many orders "
        f"were placed per region in week {i % 52}? Answer with one query-plan-v1 object.",
        "prompt_sha256": "sha256:" + hashlib.sha256(i.to_bytes(8, "big")).hexdigest(),
    }
    return Draft(PromptSent, f"run-{i // 10_000}", fields)


def _build(path: Path, events: int, batch: int) -> float:
    signer = Signer.from_seed("bench-operator", SEED)
    ledger = Ledger.create(path, signer, clock=lambda: "2026-12-02T10:00:00.000000Z")
    start = time.perf_counter()
    done = 1
    while done < events:
        n = min(batch, events - done)
        ledger.append([_draft(done + i) for i in range(n)], signer)
        done += n
    elapsed = time.perf_counter() - start
    ledger.close()
    return (events - 1) / elapsed


_VERIFY_CHILD = """
import json, resource, sys, time
from pathlib import Path
from ledger.verify import verify_ledger
start = time.perf_counter()
result = verify_ledger(Path(sys.argv[1]), workers=int(sys.argv[2]))
elapsed = time.perf_counter() - start
# VmHWM belongs to this address space; ru_maxrss would carry the parent's peak over
# fork + exec on Linux.
status = Path("/proc/self/status").read_text()
own = int(next(x for x in status.splitlines() if x.startswith("VmHWM:")).split()[1])
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps([result.size / elapsed, own, kids]))
"""


def _verify_in_fresh_process(path: Path, workers: int) -> tuple[float, int, int]:
    """(events/s, peak RSS KB of the verifier, peak RSS KB of its largest worker)."""
    done = subprocess.run(
        [sys.executable, "-c", _VERIFY_CHILD, str(path), str(workers)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rate, own, kids = json.loads(done.stdout)
    return rate, own, kids


def main(argv: list[str] | None = None) -> None:
    """Run every measurement once and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    cores = args.workers

    sign1, sign_all = _ceiling(_sign_loop, 1), _ceiling(_sign_loop, cores)
    verify1, verify_all = _ceiling(_verify_loop, 1), _ceiling(_verify_loop, cores)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        append = _build(path, args.events, args.batch)
        # A fresh process: a fork of this one would inherit the builder's memory.
        full, rss_main_kb, rss_worker_kb = _verify_in_fresh_process(path, cores)
        start = time.perf_counter()
        chain_size = verify_chain(path).size
        chain = chain_size / (time.perf_counter() - start)
        db_mb = path.stat().st_size / 1e6

    rows = [
        ("Ed25519 sign, 1 core", f"{sign1:,.0f} /s", ""),
        (f"Ed25519 sign, {cores} cores", f"{sign_all:,.0f} /s", ""),
        ("Ed25519 verify, 1 core", f"{verify1:,.0f} /s", ""),
        (f"Ed25519 verify, {cores} cores", f"{verify_all:,.0f} /s", ""),
        (
            f"append (durable, batch {args.batch})",
            f"{append:,.0f} ev/s",
            f"{append / sign1:.0%} of 1-core sign (target >= 70%)",
        ),
        (
            f"full verify ({cores} workers)",
            f"{full:,.0f} ev/s",
            f"{full / verify_all:.0%} of all-core verify (target >= 80%)",
        ),
        ("chain-only verify", f"{chain:,.0f} ev/s", "target >= 300,000 ev/s"),
        (
            "full verify peak RSS",
            f"{rss_main_kb / 1024:,.0f} MB",
            f"main process; each worker <= {rss_worker_kb / 1024:,.0f} MB (target <= 200 MB)",
        ),
    ]
    print(
        f"caseledger ledger benchmark: {args.events:,} events ({db_mb:,.0f} MB file), "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    width = max(len(r[0]) for r in rows)
    print(f"| {'measure':<{width}} | {'result':>14} | note")
    print(f"|{'-' * (width + 2)}|{'-' * 16}|------")
    for name, value, note in rows:
        print(f"| {name:<{width}} | {value:>14} | {note}")


if __name__ == "__main__":
    main()
