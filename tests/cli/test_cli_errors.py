"""A path the user gave that cannot be written is a usage error: exit 2, one line, no traceback."""

from __future__ import annotations

import pkgutil
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

import ledger.cli as cli_package
from ledger.cli import load_all, main


def test_demo_into_a_path_below_a_file_exits_2(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", "utf-8")
    result = CliRunner().invoke(main, ["demo", "-o", str(blocker / "demo")])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert result.output.startswith("error: Not a directory: ")
    assert "hint: check the path and its permissions" in result.output


def test_report_into_a_missing_folder_exits_2(tmp_path: Path) -> None:
    ledger = tmp_path / "l" / "ledger.db"
    assert CliRunner().invoke(main, ["--ledger", str(ledger), "init"]).exit_code == 0
    out = tmp_path / "missing" / "report.md"
    result = CliRunner().invoke(
        main, ["--ledger", str(ledger), "report", "--format", "md", "-o", str(out)]
    )
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert f"error: No such file or directory: {out}" in result.output


# Read from the package, so a command module added later is checked too.
CLI_MODULES = sorted(f"ledger.cli.{m.name}" for m in pkgutil.iter_modules(cli_package.__path__))


def test_the_module_list_is_read_from_the_package() -> None:
    # Not empty by accident: at least the modules there are today (more may come).
    assert set(CLI_MODULES) >= {
        "ledger.cli.bank",
        "ledger.cli.calibrate",
        "ledger.cli.common",
        "ledger.cli.demo",
        "ledger.cli.export",
        "ledger.cli.gate",
        "ledger.cli.log",
        "ledger.cli.report",
        "ledger.cli.run",
    }


@pytest.mark.parametrize("module", CLI_MODULES)
def test_each_command_module_imports_first_in_a_fresh_process(module: str) -> None:
    # Importing an area module before ledger.cli must not be a circular import.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import {module}; import ledger.cli as c; print(' '.join(sorted(c.load_all())))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # The same commands as when ledger.cli is imported first (every area loaded: the
    # group loads them lazily, so main.commands alone may hold only a few).
    assert done.stdout.split() == sorted(load_all())


# ----------------------------------------------------------------- Ctrl-C (issue 13 section 4)

CLI = str(Path(sys.executable).with_name("caseledger"))


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def _interrupt_when(proc: subprocess.Popen[str], ready: Callable[[], bool]) -> tuple[int, str]:
    """Send SIGINT once ``ready()`` (the command is mid-work), then collect its exit."""
    deadline = time.monotonic() + 300
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the command finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def _assert_interrupted(code: int, err: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert "Aborted!" not in err
    assert "interrupted" in err.splitlines()[-1]


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger with the retail bank published."""
    ledger = tmp_path_factory.mktemp("sigint") / "ledger.db"
    for args in (["init"], ["bank", "publish", "retail"]):
        done = subprocess.run(
            [CLI, "--ledger", str(ledger), *args], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
    return ledger


def _verifies(ledger: Path) -> bool:
    done = subprocess.run(
        [CLI, "--ledger", str(ledger), "verify"], capture_output=True, text=True, check=False
    )
    return done.returncode == 0


@pytest.mark.slow
def test_ctrl_c_in_demo_leaves_no_folder(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.Popen(
        [CLI, "demo", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    # Wait for the first progress line: the demo is building.
    first = proc.stderr.readline()
    assert first.startswith("published bank"), first
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    _assert_interrupted(proc.returncode, first + err)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.slow
def test_ctrl_c_in_calibrate_exits_2_and_keeps_the_ledger(published: Path) -> None:
    proc = subprocess.Popen(
        [CLI, "--ledger", str(published), "calibrate", "--bank", "retail"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Judging mutants: the oracle's SQL workers are up (its work is in them, so the
    # CPU time of this process alone says little about how far it got).
    code, err = _interrupt_when(proc, lambda: bool(_children(proc.pid)))
    _assert_interrupted(code, err)
    assert _verifies(published)


def test_ctrl_c_in_bank_publish_exits_2_and_publishes_nothing(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    assert subprocess.run([CLI, "--ledger", str(ledger), "init"], check=False).returncode == 0
    banks = tmp_path / "banks"
    proc = subprocess.Popen(
        [CLI, "--ledger", str(ledger), "bank", "publish", "retail"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The bank database is being built while its hidden .build-* folder exists.
    code, err = _interrupt_when(
        proc, lambda: banks.is_dir() and any(p.name.startswith(".") for p in banks.iterdir())
    )
    _assert_interrupted(code, err)
    log = subprocess.run(
        [CLI, "--ledger", str(ledger), "log"], capture_output=True, text=True, check=False
    )
    assert log.returncode == 0
    assert "bank.published" not in log.stdout
    assert not (banks / "retail").exists()
    assert _verifies(ledger)


@pytest.mark.slow
def test_ctrl_c_in_verify_recompute_exits_2(published: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    shutil.copytree(published.parent, tmp_path, dirs_exist_ok=True)
    run = subprocess.run(
        [
            CLI,
            "--ledger",
            str(ledger),
            "run",
            "--bank",
            "retail",
            "--adapter",
            "reference",
            "--no-variants",
            "--attempts",
            "20",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    proc = subprocess.Popen(
        [CLI, "--ledger", str(ledger), "verify", "--recompute"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Re-executing: its SQL workers are up (360 executions follow, seconds of work).
    code, err = _interrupt_when(proc, lambda: bool(_children(proc.pid)))
    _assert_interrupted(code, err)
