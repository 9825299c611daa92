"""A path the user gave that cannot be written is a usage error: exit 2, one line, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import main


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


@pytest.mark.parametrize(
    "module",
    [f"ledger.cli_{area}" for area in ("ledger", "bank", "run", "report", "gate", "calibrate")]
    + ["ledger.cli_demo"],
)
def test_each_command_module_imports_first_in_a_fresh_process(module: str) -> None:
    # Importing an area module before ledger.cli must not be a circular import.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import {module}; import ledger.cli as c; print(len(c.main.commands))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # As many commands as when ledger.cli is imported first (areas may add commands).
    assert int(done.stdout) == len(main.commands)
