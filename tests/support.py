"""Paths every test may need (a uniquely named module: several conftest.py files exist)."""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: The public benchmark data (BIRD mini-dev, Spider concert_singer, sample databases):
#: ``$CASELEDGER_BENCHMARKS``, else ``../shared/benchmarks`` beside the clone. A fresh
#: clone has none; the tests that read it are then deselected (tests/conftest.py).
BENCHMARKS = Path(
    os.environ.get("CASELEDGER_BENCHMARKS") or REPO.parent / "shared" / "benchmarks"
).resolve()
#: Public test vectors (RFC 9162 Merkle trees, C2SP signed notes), vendored with their
#: sources and licences in tests/data/vectors/README.md.
VECTORS = REPO / "tests" / "data" / "vectors"

#: The tiny example bank (docs/examples/tiny-bank) and its rows as CSV data files
#: (issue 16): customer 3 has no city; completed September orders in Shanghai time
#: sum to 80.50 + 45.00 + 210.00 = 335.50.
TINY = REPO / "docs" / "examples" / "tiny-bank"
CUSTOMERS = (
    "customer_id,name,city\n1,Ann,Shanghai\n2,Bo,Beijing\n3,Chen,\n4,Dara,Shanghai\n"
    "5,Eve,Hangzhou\n"
)
ORDERS = (
    "order_id,customer_id,ordered_at,status,amount\n"
    "101,1,2026-08-31 23:30:00+08,completed,120.00\n"
    "102,1,2026-09-01 00:10:00+08,completed,80.50\n"
    "103,2,2026-09-15 12:00:00+08,cancelled,300.00\n"
    "104,2,2026-09-20 09:00:00+08,completed,45.00\n"
    "105,3,2026-09-30 23:59:59+08,completed,210.00\n"
    "106,3,2026-10-01 00:00:00+08,completed,99.00\n"
    "107,5,2026-09-05 10:00:00+08,cancelled,60.00\n"
)


def plain_cell(cell: Any) -> Any:
    """A gold cell as a comparable value: numbers (int, float, decimal string) as Decimal."""
    if isinstance(cell, bool) or cell is None:
        return cell
    if isinstance(cell, int | float):
        return Decimal(str(cell))
    if isinstance(cell, str):
        try:
            return Decimal(cell)
        except ArithmeticError:
            return cell
    return cell


def alive(pid: int) -> bool:
    """True when /proc shows the process and it is not a zombie (a worker process's check)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_dead(pid: int, within_s: float) -> bool:
    """True once ``pid`` has stopped running (gone, or a zombie not yet reaped)."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)


def made_once(factory: Any, name: str, build: Callable[[Path], None]) -> Path:
    """A folder ``build(folder)`` fills once per test session, for tests that only read it
    (or copy it first). Under pytest-xdist the first worker to ask builds it in the
    session's shared folder while the others wait on a lock, then all reuse it; without
    xdist it is a ``tmp_path_factory`` folder. ``factory`` is the ``tmp_path_factory``.
    A process asking again for the same name gets the folder it got before, unbuilt."""
    key = (str(factory.getbasetemp()), name)
    if key not in _MADE:
        _MADE[key] = _made(factory, name, build)
    return _MADE[key]


_MADE: dict[tuple[str, str], Path] = {}


def _made(factory: Any, name: str, build: Callable[[Path], None]) -> Path:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        folder: Path = factory.mktemp(name)
        build(folder)
        return folder
    shared: Path = factory.getbasetemp().parent / name  # this session's own
    shared.mkdir(exist_ok=True)
    folder = shared / "made"
    with (shared / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (shared / "done").exists():
            shutil.rmtree(folder, ignore_errors=True)  # a worker's build that failed
            folder.mkdir()
            build(folder)
            (shared / "done").touch()
    return folder
