"""The ``caseledger`` group's own error mapping (issue 14 item 6), run in this process:
a closed stdout pipe, and embedding the group without click's standalone mode."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import main


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    assert CliRunner().invoke(main, ["--ledger", str(path), "init"]).exit_code == 0
    return path


def test_a_reader_that_went_away_exits_141_quietly(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `caseledger log | head -0`: the read end of stdout is closed before anything is written.
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        with pytest.raises(SystemExit) as info:
            main.main(["--ledger", str(ledger), "log"], prog_name="caseledger")
        # 141 = 128 + SIGPIPE, as a shell reports a writer killed by the closed pipe
        # (docs/cli.md): under `set -o pipefail` a cut-off gate verdict never reads as 0
        assert info.value.code == 141
        # stdout now points at /dev/null: the interpreter's last flush cannot fail again
        print("more output", file=stdout, flush=True)


def test_without_standalone_mode_the_exit_code_is_returned(
    ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An embedding program gets the command's result, or the exit code instead of a
    # SystemExit; the error is still printed as one line.
    assert main.main(["--ledger", str(ledger), "verify"], standalone_mode=False) is None
    assert capsys.readouterr().out.startswith("verified: 1 events")
    missing = ledger.parent / "none.db"
    code = main.main(["--ledger", str(missing), "verify"], standalone_mode=False)
    assert code == 2
    assert capsys.readouterr().err.startswith(f"error: no ledger at {missing}")


# An interruption injected where `runs` reads the ledger: the user's Ctrl-C (Python's
# KeyboardInterrupt, or the RuntimeError DuckDB turns it into), an end of input, a bug.
INTERRUPTED = "interrupted (Ctrl-C): stopped; nothing half-done was recorded or written"


def _raise(exc: BaseException) -> Callable[..., None]:
    def reader(*args: object, **kwargs: object) -> None:
        raise exc

    return reader


@pytest.mark.parametrize(
    ("exc", "stderr"),
    [
        (KeyboardInterrupt(), f"\n{INTERRUPTED}\n"),
        (RuntimeError("Query interrupted"), f"\n{INTERRUPTED}\n"),
        (EOFError(), "\nerror: end of input while reading a reply\n"),
    ],
    ids=["ctrl-c", "duckdb-ctrl-c", "eof"],
)
def test_an_interruption_exits_2_with_one_line(
    ledger: Path, monkeypatch: pytest.MonkeyPatch, exc: BaseException, stderr: str
) -> None:
    monkeypatch.setattr("ledger.cli.report.run_listing", _raise(exc))
    result = CliRunner().invoke(main, ["--ledger", str(ledger), "runs"])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", stderr)


def test_any_other_exception_is_a_bug_and_keeps_its_traceback(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ledger.cli.report.run_listing", _raise(RuntimeError("boom")))
    result = CliRunner().invoke(main, ["--ledger", str(ledger), "runs"])
    assert result.exit_code == 1
    assert isinstance(result.exception, RuntimeError)
    assert str(result.exception) == "boom"
