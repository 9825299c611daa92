"""Writer processes for the concurrency tests: real ``python`` processes appending to one ledger.

Each writer opens the ledger at a location (a SQLite file path or a PostgreSQL URL),
says ``ready``, waits for a line on stdin so that all start together, then appends
``count`` prompts of its run in batches of ``batch``, printing ``committed N`` after
each batch.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTKIT = Path(__file__).parent

WRITER = """
import sys, time
sys.path.insert(0, {testkit!r})
from ledger_testkit import operator, prompt
from ledger.store import Ledger
from ledger.stores import parse_location
ledger = Ledger.open(parse_location({location!r}), busy_timeout_s={busy_timeout_s!r})
print("ready", flush=True)
sys.stdin.readline()  # start together
for i in range(0, {count}, {batch}):
    ledger.append([prompt({run!r}, j) for j in range(i, i + {batch})], operator())
    print("committed", i + {batch}, flush=True)
    time.sleep(0.002)  # a real writer does other work between batches: let the others in
ledger.close()
"""


def spawn(
    location: object, run: str, count: int, batch: int, *, busy_timeout_s: float = 120
) -> subprocess.Popen[str]:
    """Start one writer process on the ledger at ``location`` (it waits to be started)."""
    code = WRITER.format(
        testkit=str(TESTKIT),
        location=str(location),
        run=run,
        count=count,
        batch=batch,
        busy_timeout_s=busy_timeout_s,
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def start_together(writers: list[subprocess.Popen[str]]) -> None:
    """Wait until every writer is ready, then start them all."""
    for w in writers:
        assert w.stdout is not None
        assert w.stdout.readline().strip() == "ready"
    for w in writers:
        assert w.stdin is not None
        w.stdin.write("go\n")
        w.stdin.flush()
