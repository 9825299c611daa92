"""The ``caseledger`` group's own error mapping (issue 14 item 6), run in this process:
a closed stdout pipe, embedding the group without click's standalone mode, and a bug
(one line, or its traceback under ``--debug`` / ``CASELEDGER_DEBUG=1``; issue 33)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import main
from ledger.errors import InternalError


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


BUG_LINE = (
    "internal error: RuntimeError: deliberate bug in run_listing (this is a caseledger bug; "
    "run it again with --debug for the traceback)\n"
)


@pytest.mark.parametrize(
    ("options", "env"),
    [([], {}), ([], {"CASELEDGER_DEBUG": "0"}), ([], {"CASELEDGER_DEBUG": ""})],
    ids=["default", "debug-env-0", "debug-env-empty"],
)
def test_any_other_exception_is_a_bug_with_one_line(
    ledger: Path, monkeypatch: pytest.MonkeyPatch, options: list[str], env: dict[str, str]
) -> None:
    monkeypatch.setattr(
        "ledger.cli.report.run_listing", _raise(RuntimeError("deliberate bug in run_listing"))
    )
    result = CliRunner().invoke(main, [*options, "--ledger", str(ledger), "runs"], env=env)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", BUG_LINE)


@pytest.mark.parametrize(
    ("options", "env"),
    [(["--debug"], {}), ([], {"CASELEDGER_DEBUG": "1"}), (["--debug"], {"CASELEDGER_DEBUG": "0"})],
    ids=["--debug", "CASELEDGER_DEBUG=1", "--debug-wins-over-env-0"],
)
def test_a_bug_keeps_its_traceback_when_asked(
    ledger: Path, monkeypatch: pytest.MonkeyPatch, options: list[str], env: dict[str, str]
) -> None:
    def run_listing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("deliberate bug in run_listing")

    monkeypatch.setattr("ledger.cli.report.run_listing", run_listing)
    result = CliRunner().invoke(main, [*options, "--ledger", str(ledger), "runs"], env=env)
    assert (result.exit_code, result.stdout) == (1, "")
    lines = result.stderr.splitlines()
    # Python's own traceback first (the frames down to the faulty function), then the line.
    assert lines[0] == "Traceback (most recent call last):"
    assert any(line.endswith(", in run_listing") for line in lines)
    assert lines[-2:] == ["RuntimeError: deliberate bug in run_listing", BUG_LINE.rstrip("\n")]


def test_an_internal_error_shows_the_bug_inside_it_under_debug(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bug the code caught and named (runner, rescore, baseline): one line, and under
    # --debug the traceback of the bug it wraps, not of the InternalError.
    def run_listing(*args: object, **kwargs: object) -> None:
        try:
            {}["missing"]  # the deliberate bug
        except KeyError as exc:
            raise InternalError(exc, where="nothing was recorded") from exc

    monkeypatch.setattr("ledger.cli.report.run_listing", run_listing)
    line = "internal error: KeyError: 'missing' (this is a caseledger bug; nothing was recorded)"
    plain = CliRunner().invoke(main, ["--ledger", str(ledger), "runs"])
    assert (plain.exit_code, plain.stderr) == (1, line + "\n")
    debug = CliRunner().invoke(main, ["--debug", "--ledger", str(ledger), "runs"])
    lines = debug.stderr.splitlines()
    assert debug.exit_code == 1
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-2:] == ["KeyError: 'missing'", line]


def test_a_path_error_shows_its_traceback_only_under_debug(tmp_path: Path) -> None:
    ledger = tmp_path / "l" / "ledger.db"
    assert CliRunner().invoke(main, ["--ledger", str(ledger), "init"]).exit_code == 0
    out = tmp_path / "missing" / "report.md"
    args = ["--ledger", str(ledger), "report", "--format", "md", "-o", str(out)]
    expected = [
        f"error: No such file or directory: {out}",
        "  hint: check the path and its permissions",
    ]
    plain = CliRunner().invoke(main, args)
    # the report was built ("report built at ..."), then writing it failed
    assert (plain.exit_code, plain.stderr.splitlines()[1:]) == (2, expected)
    debug = CliRunner().invoke(main, ["--debug", *args])
    lines = debug.stderr.splitlines()
    assert debug.exit_code == 2
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[-3].startswith("FileNotFoundError: [Errno 2] No such file or directory: ")
    assert lines[-2:] == expected
