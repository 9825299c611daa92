"""Issue 30: ``verify --recompute`` passes on every ledger the test suite writes.

A pytest plugin (loaded by tests/conftest.py). When a test has passed, every SQLite
ledger under the temporary folders it created (its ``tmp_path`` and any
``tmp_path_factory.mktemp`` folder made while it set up or ran) is verified as an
auditor would: ``verify_ledger`` with the ``--recompute`` check over the bank files
beside it (``banks/``), re-deriving every score and re-executing every scored SQL in
the sandboxed worker. A ledger that fails fails the test, naming the ledger and the
first bad seq: an honest run that recorded an answer whose result changes between
executions (the clock, a sample, a random source) is caught here, wherever the suite
wrote it.

A test that writes a damaged, forged or incomplete ledger on purpose (tampering
tests, a ledger copied without its bank files, a run stopped halfway by a fault the
test injects) carries ``@pytest.mark.dishonest_ledger("why")``; the reason is
required. ``CASELEDGER_AUDIT_LEDGERS=0`` turns the audit off for a quick local run
(never in CI). A ledger whose files (with its side files and ``banks/``) are identical to
one that passed earlier in the same process is not verified again (see ``ledger_state``).

Left out: PostgreSQL ledgers (they live in the test cluster, not in a file; the
store contract suite runs the same verification on them) and ledgers a test writes
outside pytest's temporary folders.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.app.rescore import recompute_hook
from ledger.errors import LedgerError
from ledger.verify import verify_ledger

_MARK = "dishonest_ledger"
_BEFORE = pytest.StashKey[frozenset[str]]()
_PASSED = pytest.StashKey[bool]()
_DSN = pytest.StashKey[str]()
_DSN_VAR = "CASELEDGER_PG_DSN"
_SQLITE_HEADER = b"SQLite format 3\x00"
# Files beside a ledger that are never ledgers themselves (the tree index, projection
# caches, SQLite's own side files).
_NOT_LEDGERS = (".index.db", ".projections.db", "-wal", "-shm", "-journal")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{_MARK}(reason): the test leaves a damaged, forged or incomplete ledger on "
        "purpose; the suite-wide verify --recompute audit (tests/ledger_audit.py) skips it",
    )


def _enabled() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("CASELEDGER_AUDIT_LEDGERS", "1") != "0"


def _basetemp(config: pytest.Config) -> Path:
    factory: pytest.TempPathFactory = config._tmp_path_factory  # type: ignore[attr-defined]
    return factory.getbasetemp()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Note the temporary folders that exist before the test sets up."""
    if _enabled():
        item.stash[_BEFORE] = frozenset(os.listdir(_basetemp(item.config)))
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[pytest.TestReport]:
    """Note whether the test itself passed: only then are its ledgers audited. Note
    too the PostgreSQL server the test ran on (its ``pg_dsn``, or the
    ``CASELEDGER_PG_DSN`` a fixture set for the CLI): a bank on that engine
    re-executes there."""
    report: pytest.TestReport = yield
    if call.when == "call" and report.passed:
        item.stash[_PASSED] = True
        dsn = getattr(item, "funcargs", {}).get("pg_dsn") or os.environ.get(_DSN_VAR)
        if isinstance(dsn, str) and dsn:
            item.stash[_DSN] = dsn
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a test that passed: verify --recompute every ledger it wrote.

    The audit runs once the test's fixtures are torn down, so what it checks is the
    code as shipped, not a fault or a scorer the test patched in (``monkeypatch``).
    After the last test of a worker the session's fixtures go too: a last test that
    ran on the PostgreSQL cluster (a bank on that engine re-executes on it) is audited
    just before.
    """
    if nextitem is None and _DSN in item.stash:
        _audit(item)
        return (yield)
    result = yield
    _audit(item)
    return result


def _audit(item: pytest.Item) -> None:
    before = item.stash.get(_BEFORE, None)
    if before is None or not item.stash.get(_PASSED, False):
        return
    marker = item.get_closest_marker(_MARK)
    if marker is not None:
        reason = marker.args[0] if marker.args else None
        if not (isinstance(reason, str) and reason.strip()):
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{_MARK} needs a reason")
        return
    base = _basetemp(item.config)
    # pytest's "<name>current" links point at folders listed already
    made = sorted(f for f in set(os.listdir(base)) - before if not (base / f).is_symlink())
    # A bank on the PostgreSQL engine re-executes on the test's cluster (the test hands
    # its DSN to the CLI it runs; the audit reads it the same way).
    dsn = item.stash.get(_DSN, None)
    with pytest.MonkeyPatch.context() as env:
        if dsn is not None:
            env.setenv(_DSN_VAR, dsn)
        problems = [p for f in made for p in _audit_folder(base / f, reuse=dsn is None)]
    if problems:
        raise AssertionError(
            "verify --recompute fails on a ledger this test wrote (issue 30; mark the test "
            f"@pytest.mark.{_MARK}('why') if that is on purpose):\n" + "\n".join(problems)
        )


def _audit_folder(folder: Path, *, reuse: bool = True) -> list[str]:
    problems = []
    for path in _ledgers(folder):
        key = ledger_state(path) if reuse else None
        if key is not None and key in _PASSED_STATES:
            continue
        problem = audit_ledger(path)
        if problem:
            problems.append(problem)
        elif key is not None:
            _PASSED_STATES.add(key)
    return problems


# The states (see ledger_state) of the ledgers that passed the audit in this process: a copy
# of a ledger already audited (a fixture's template copied per test and only read) is
# not verified again. verify --recompute reads nothing but these files (and, for a bank
# on PostgreSQL, the test's cluster: such tests are never skipped this way).
_PASSED_STATES: set[str] = set()


def ledger_state(path: Path) -> str:
    """A digest of all verify --recompute reads for ``path``: the ledger file and its
    side files (``-wal``, the tree index, projection caches) and every file of the
    ``banks/`` folder beside it, each with its name relative to the ledger's folder."""
    digest = hashlib.sha256()
    folder = path.parent
    side = sorted(
        f
        for f in folder.iterdir()
        # -shm is SQLite's shared-memory index of the WAL, made and removed as
        # connections come and go (the audit's own too): never content
        if f.name.startswith(path.name) and not f.name.endswith("-shm") and f.is_file()
    )
    banks = folder / "banks"
    bank_files = sorted(f for f in banks.rglob("*") if f.is_file()) if banks.is_dir() else []
    for f in side + bank_files:
        digest.update(str(f.relative_to(folder)).encode() + b"\0")
        try:
            with f.open("rb") as data:
                digest.update(hashlib.file_digest(data, "sha256").digest())
        except FileNotFoundError:  # a -wal checkpointed away meanwhile: its name stays in
            digest.update(b"gone\0")
    return digest.hexdigest()


def _ledgers(folder: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(folder):  # symlinks are not followed
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            # only regular files: a test's named pipe would block the read
            if name.endswith(_NOT_LEDGERS) or not stat.S_ISREG(path.lstat().st_mode):
                continue
            if _is_ledger(path):
                yield path


def _is_ledger(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            if f.read(16) != _SQLITE_HEADER:
                return False
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        finally:
            con.close()
    except (OSError, sqlite3.Error):
        return False
    return {"meta", "events"} <= {name for (name,) in rows}


def audit_ledger(path: Path) -> str | None:
    """``verify --recompute`` of one ledger file with the banks beside it; None when it
    passes, else one line naming the ledger and what failed."""
    hook = recompute_hook(path.parent / "banks")
    try:
        verify_ledger(path, workers=1, recompute=hook)
    except LedgerError as exc:
        return f"  {path}: {type(exc).__name__}: {exc}"
    return None


# The reasons tests give most often, one spelling each (``@TAMPERED`` above a test).
TAMPERED = pytest.mark.dishonest_ledger("tampers with the ledger or its bank files on purpose")
HAND_MADE = pytest.mark.dishonest_ledger(
    "hand-made events on a bank whose files were never written: nothing to re-execute"
)
EARLIER_RELEASE = pytest.mark.dishonest_ledger(
    "a vendored ledger of an earlier release, copied without its bank files"
)
COPIED_WITHOUT_BANKS = pytest.mark.dishonest_ledger("copies the ledger without its bank files")
TEST_SCORER = pytest.mark.dishonest_ledger("records scores under a scorer only the test registers")
