"""The suite-wide ledger audit (tests/ledger_audit.py, issue 30) fails a passing test
whose ledger an auditor cannot re-derive, and only that test.

An inner pytest session runs four small tests that each publish the sales fixture and
record a reference run through the real CLI into their ``tmp_path``. In two of them the
test swaps what the sandboxed worker returned for one row fewer while the run records it
(``monkeypatch`` on the executor the run calls): the ledger is signed and its chain
holds, but the recorded results are not what the SQL returns, exactly the ledger an
answer reading the clock or a sample would leave. Re-executing it must fail the audit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ledger_audit import audit_ledger, ledger_state

TESTS = Path(__file__).resolve().parent

INNER = """
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from ledger.cli import main
from ledger.engines.process import ProcessExecutor


def cli(ledger, *args):
    result = CliRunner().invoke(main, ["--ledger", str(ledger), *args])
    assert result.exit_code == 0, result.output


def record(tmp_path, monkeypatch, lose_a_row):
    ledger = tmp_path / "ledger.db"
    cli(ledger, "init")
    cli(ledger, "bank", "publish", "sales-fixture")
    if lose_a_row:
        real = ProcessExecutor.execute

        def one_row_fewer(self, sql, **caps):
            got = real(self, sql, **caps)
            if not got.rows:
                return got
            return msgspec.structs.replace(got, rows=got.rows[:-1], row_count=got.row_count - 1)

        monkeypatch.setattr(ProcessExecutor, "execute", one_row_fewer)
    cli(ledger, "run", "--bank", "sales-fixture", "--adapter", "reference", "--no-variants")


def test_honest(tmp_path, monkeypatch):
    record(tmp_path, monkeypatch, lose_a_row=False)


def test_unreplayable(tmp_path, monkeypatch):
    record(tmp_path, monkeypatch, lose_a_row=True)


@pytest.mark.dishonest_ledger("records results the SQL does not return, on purpose")
def test_unreplayable_marked(tmp_path, monkeypatch):
    record(tmp_path, monkeypatch, lose_a_row=True)


@pytest.mark.dishonest_ledger("")
def test_marked_without_a_reason(tmp_path, monkeypatch):
    record(tmp_path, monkeypatch, lose_a_row=False)
"""


@pytest.fixture(scope="module")
def inner(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("inner")
    (folder / "test_inner.py").write_text(INNER)
    # loaded as tests/conftest.py loads it; the package is imported first, so that
    # tests/ledger/ (test folders) on the path cannot stand in for it
    (folder / "conftest.py").write_text(
        "import sys\nimport ledger.verify\n"
        f"sys.path.append({str(TESTS)!r})\npytest_plugins = ['ledger_audit']\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CASELEDGER_AUDIT_LEDGERS"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-rA",
            "--basetemp",
            str(folder / "base"),
            "test_inner.py",
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return folder / "base", done.stdout + done.stderr


# The inner session's ledgers are left unreplayable on purpose; the outer audit skips them.
INNER_LEDGERS = pytest.mark.dishonest_ledger("an inner session's ledgers, two made unreplayable")


@INNER_LEDGERS
@pytest.mark.slow
def test_an_unreplayable_ledger_fails_the_test_that_wrote_it(inner: tuple[Path, str]) -> None:
    base, out = inner
    # The test itself passed; the audit after its teardown is the error.
    assert "PASSED test_inner.py::test_unreplayable\n" in out, out
    assert "ERROR test_inner.py::test_unreplayable - AssertionError" in out, out
    assert "verify --recompute fails on a ledger this test wrote" in out, out
    ledger = base / "test_unreplayable0" / "ledger.db"
    assert f"  {ledger}: VerificationError: seq " in out, out


@INNER_LEDGERS
@pytest.mark.slow
def test_an_honest_or_marked_ledger_passes(inner: tuple[Path, str]) -> None:
    _, out = inner
    for name in ("test_honest", "test_unreplayable_marked"):
        assert f"PASSED test_inner.py::{name}\n" in out, out
        assert f"ERROR test_inner.py::{name}" not in out, out


@INNER_LEDGERS
@pytest.mark.slow
def test_a_mark_needs_a_reason(inner: tuple[Path, str]) -> None:
    _, out = inner
    assert "test_inner.py::test_marked_without_a_reason: @pytest.mark.dishonest_ledger " in out
    assert "needs a reason" in out, out


@INNER_LEDGERS
@pytest.mark.slow
def test_the_audit_names_the_first_answer_that_differs(inner: tuple[Path, str]) -> None:
    # The same check called directly. The first answer of the run is sf-01's reference
    # SQL; its one row is the acceptance method's literal (3 valid sales, 600.00 yuan)
    # and the run recorded it with that row dropped.
    base, _ = inner
    assert audit_ledger(base / "test_honest0" / "ledger.db") is None
    problem = audit_ledger(base / "test_unreplayable_marked0" / "ledger.db")
    assert problem is not None
    assert (
        ": the SqlExecuted of reference-0001 case sf-01 attempt 1 differs from re-executing "
        "its SQL on bank sales-fixture@v1: rows, row_count (rows: recorded [], re-executed "
        '[[3,"600.00"]])'
    ) in problem, problem


def test_an_audited_state_is_reused_only_for_identical_files(tmp_path: Path) -> None:
    """A ledger is not re-verified only when every file verify --recompute reads is the
    same: the ledger, its side files and the bank files beside it."""
    first = tmp_path / "a"
    (first / "banks" / "ab12").mkdir(parents=True)
    (first / "ledger.db").write_bytes(b"ledger bytes")
    (first / "ledger.db-wal").write_bytes(b"wal bytes")
    (first / "banks" / "ab12" / "seed.sql").write_bytes(b"INSERT 1")
    (first / "other.txt").write_bytes(b"not read by verify")
    copy = tmp_path / "b"
    shutil.copytree(first, copy)
    (copy / "other.txt").write_bytes(b"changed, still not read")
    assert ledger_state(copy / "ledger.db") == ledger_state(first / "ledger.db")
    for changed, data in (
        ("ledger.db", b"ledger bytez"),
        ("ledger.db-wal", b"wal bytez"),
        ("ledger.db.index.db", b"a new side file"),
        ("banks/ab12/seed.sql", b"INSERT 2"),
        ("banks/cd34/seed.sql", b"INSERT 1"),
    ):
        other = tmp_path / f"c-{changed.replace('/', '-')}"
        shutil.copytree(first, other)
        (other / changed).parent.mkdir(parents=True, exist_ok=True)
        (other / changed).write_bytes(data)
        assert ledger_state(other / "ledger.db") != ledger_state(first / "ledger.db"), changed
    # a bank file moved to another bank's folder is another state too
    moved = tmp_path / "moved"
    shutil.copytree(first, moved)
    (moved / "banks" / "ab12").rename(moved / "banks" / "ef56")
    assert ledger_state(moved / "ledger.db") != ledger_state(first / "ledger.db")
