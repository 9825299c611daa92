"""caseledger's own processes run with the collector's thresholds (issue 34, ledger.collector).

A SQL worker (every engine's ``serve``) and the ``caseledger`` command set them; a
program that imports the library keeps its own. Each is checked in a real process:
a worker started the way a pool starts one (spawn, a pipe, the worker protocol),
and the console command in a fresh interpreter.
"""

from __future__ import annotations

import gc
import multiprocessing
import subprocess
import sys
from multiprocessing.connection import Connection

import msgspec

from ledger import collector
from ledger.engines import process


def _session() -> None:
    return None


def _thresholds(session: None, req: process.Request) -> process.ExecResult:
    """Answer any query with this worker's collector thresholds (as the error message)."""
    return process.failure("sql_runtime", repr(gc.get_threshold()), 0)


def _close(session: None) -> None:
    return None


def _worker(conn: Connection) -> None:
    process.serve(conn, _session, _thresholds, _close, ())


def test_the_thresholds_are_the_documented_ones() -> None:
    assert collector.THRESHOLDS == (2000, 20, 100)


def test_a_sql_worker_runs_with_the_thresholds() -> None:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    worker = ctx.Process(target=_worker, args=(child,), daemon=True)
    worker.start()
    child.close()
    try:
        decoder = msgspec.msgpack.Decoder(process.Reply)
        assert parent.poll(60)
        assert decoder.decode(parent.recv_bytes()).kind == "ready"
        request = process.Request(sql="SELECT 1", max_rows=1, timeout_s=5.0)
        parent.send_bytes(msgspec.msgpack.encode(request))
        assert parent.poll(60)
        reply = decoder.decode(parent.recv_bytes())
        assert reply.kind == "result"
        assert reply.result is not None
        assert reply.result.error_message == "(2000, 20, 100)"
    finally:
        parent.close()
        worker.join(30)
    assert worker.exitcode == 0


def test_the_command_sets_them_and_importing_the_library_does_not() -> None:
    script = (
        "import gc, sys\n"
        "import ledger.api, ledger.cli\n"
        "before = gc.get_threshold()\n"
        "try:\n"
        "    ledger.cli.main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(before, gc.get_threshold(), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stderr.strip() == "(700, 10, 10) (2000, 20, 100)"
