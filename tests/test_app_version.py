"""``ledger.__version__``: the installed version, read from the package metadata on first use.

``importlib.metadata`` costs about 20 ms of CPU to import. Every SQL worker process
imports ``ledger``, and so does every command, but a worker that only executes (variant
diagnostics, a SQLite bank's), the command line before it picks a command, and the
``log`` commands (``init``, ``verify``, ``checkpoint``, ...) never need the version
(issue 34). sqlglot and psycopg import it themselves, so a worker that reads SQL or
serves PostgreSQL still pays it. Each check runs in a fresh interpreter (the test
process has long imported everything).
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap
import tomllib

import pytest
from support import REPO

import ledger

# The entry points of the DuckDB and SQLite workers, the command line before it chooses a
# command, and the log commands' area.
WITHOUT_METADATA = (
    "ledger", "ledger.cli", "ledger.cli.log", "ledger.engines.duckdb_worker",
    "ledger.engines.sqlite_worker",
)  # fmt: skip


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
    )


def test_the_version_is_pyprojects() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == "0.1.0"
    assert ledger.__version__ == "0.1.0"
    assert importlib.metadata.version("caseledger") == "0.1.0"


def test_it_is_importable_by_name() -> None:
    from ledger import __version__

    assert __version__ == "0.1.0"


def test_another_missing_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'ledger' has no attribute 'versions'"):
        ledger.versions  # noqa: B018 (the access is the test)


def test_executing_workers_and_the_cli_do_not_import_the_metadata_reader() -> None:
    done = _python(
        f"""
        import importlib, sys
        for name in {WITHOUT_METADATA!r}:
            importlib.import_module(name)
        print("importlib.metadata" in sys.modules)
        import ledger
        print(ledger.__version__, "importlib.metadata" in sys.modules)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["False", "0.1.0 True"]
