"""Shared test fixtures: repository paths, the public vectors, the benchmark data.

Tests that read the public benchmark data (``../shared/benchmarks``, or
``$CASELEDGER_BENCHMARKS``) carry the ``benchmark_data`` mark. A fresh clone has
no such folder: they are then deselected, and one line at the end of the run says
how many and how to run them. In CI (``CI`` set) a missing folder fails the run
instead, so CI always runs them.
"""

from __future__ import annotations

import compileall
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import coverage
import pytest
from click.testing import CliRunner
from support import BENCHMARKS, VECTORS, made_once

# Every ledger a passing test writes is verified with --recompute (issue 30).
pytest_plugins = ["ledger_audit"]

_DESELECTED = pytest.StashKey[int]()
_HOW = (
    "{n} tests need the public benchmark data, not found at {path}: deselected. Run them "
    "with ../shared/benchmarks beside the clone, or CASELEDGER_BENCHMARKS=/path/to/benchmarks"
)


def pytest_configure(config: pytest.Config) -> None:
    """Give Ctrl-C back to the processes the tests start when the suite itself was
    started with SIGINT ignored (a shell's ``cmd &`` without job control does that).
    Python leaves an inherited ``SIG_IGN`` in place and every child inherits it, so the
    tests that press Ctrl-C on a ``caseledger`` process would see it ignored. A handler
    (unlike ``SIG_IGN``) is reset to the default in a child at exec."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile the packages under test once, before any test starts a process.

    The README installs the clone in editable mode, so pip compiles none of its modules,
    and where ``PYTHONDONTWRITEBYTECODE`` is set (as on this project's machines) no
    process writes what it compiled: each of the suite's ~1,000 ``caseledger`` and SQL
    worker processes would compile every module it imports from source again (50-110 ms
    of CPU each). ``compileall`` writes the files whatever that variable says, and skips
    those that are up to date; under ``-n`` only the controller does it."""
    if hasattr(session.config, "workerinput"):
        return
    root = Path(__file__).resolve().parents[1]
    for package in ("ledger", "projections"):
        compileall.compile_dir(root / package, quiet=2)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Make ``@pytest.mark.no_cover`` hold under ``-n`` too (see pyproject.toml).

    pytest-cov pauses its own coverage for such a test, but in an xdist worker it has
    started a second one earlier (pytest-cov 7.1.0), which then takes over the tracing:
    the test ran as slowly as without the mark. This runs inside pytest-cov's pause and
    stops whatever coverage is still started, then starts it again after the call."""
    if item.get_closest_marker("no_cover") is None:
        return (yield)
    stopped = []
    while (running := coverage.Coverage.current()) is not None:
        running.stop()
        stopped.append(running)
    try:
        return (yield)
    finally:
        for again in reversed(stopped):
            again.start()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the ``benchmark_data`` tests when the data is not here (never in CI).

    Under ``--no-cov`` the ``no_cover`` marks are taken off: there is nothing to pause,
    and pytest-cov 7.1.0 would still pause its missing coverage for a marked test
    (``AttributeError: 'NoneType' object has no attribute 'pause'``), failing it."""
    if config.getoption("no_cov", default=False):
        for item in items:
            item.own_markers[:] = [m for m in item.own_markers if m.name != "no_cover"]
    if BENCHMARKS.is_dir():
        return
    needing = [item for item in items if item.get_closest_marker("benchmark_data")]
    if not needing:
        return
    if os.environ.get("CI"):
        raise pytest.UsageError(
            f"the public benchmark data is missing at {BENCHMARKS}; CI must run the "
            f"{len(needing)} tests that read it (lay shared/ beside the clone)"
        )
    config.hook.pytest_deselected(items=needing)
    items[:] = [item for item in items if not item.get_closest_marker("benchmark_data")]
    config.stash[_DESELECTED] = len(needing)
    if hasattr(config, "workeroutput"):  # an xdist worker: the controller prints the line
        config.workeroutput["benchmark_deselected"] = len(needing)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """Under ``-n``, collection happens in the workers: each tells the controller how
    many tests it deselected (every worker collects the same tests)."""
    config: pytest.Config = node.config
    n = getattr(node, "workeroutput", {}).get("benchmark_deselected", 0)
    config.stash[_DESELECTED] = max(n, config.stash.get(_DESELECTED, 0))


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """The one line saying which tests were left out for want of the benchmark data."""
    n = config.stash.get(_DESELECTED, 0)
    if n:
        terminalreporter.write_line(_HOW.format(n=n, path=BENCHMARKS))


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    """The public test vectors vendored in tests/data/vectors (README.md there: sources)."""
    assert VECTORS.is_dir(), f"public test vectors not found at {VECTORS}"
    return VECTORS


@pytest.fixture(scope="session")
def demo_made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``caseledger demo -o <folder>/demo`` run once per test session (in this process, so
    the coverage run measures it; tests/support.made_once): the demo folder and what the
    command printed. Tests never write to it: they take a copy (``demo_copy``)."""
    from ledger.cli import main

    def build(folder: Path) -> None:
        result = CliRunner().invoke(main, ["demo", "-o", str(folder / "demo")])
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        assert result.exit_code == 0, result.stderr
        (folder / "stdout.txt").write_text(result.stdout, "utf-8")

    made = made_once(tmp_path_factory, "demo", build)
    return made / "demo", (made / "stdout.txt").read_text("utf-8")


@pytest.fixture
def demo_copy(demo_made: tuple[Path, str], tmp_path: Path) -> Path:
    """This test's own copy of the session's demo (ledger, keys, banks, reports), at
    ``tmp_path / "demo"``."""
    return Path(shutil.copytree(demo_made[0], tmp_path / "demo"))
