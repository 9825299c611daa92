"""What a new user touches around the commands (issue 20, "Everything else the user touches").

The printed ``caseledger`` hints run in a fresh shell, a closed output pipe ends a
command quietly with 141, ``log --run`` of an unknown run is a usage error, ``runs``
has a header, every ``run`` option has a help text, and the messages a user met that
said the wrong thing (a race on one run id, ``output: null``, ``unknown value None``)
say what is wrong and what to do.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from support import TINY

import ledger.run.runner as runner_module
from ledger.cli import main
from ledger.cli.common import program_name
from ledger.cli.demo import _activation_hint, report_commands
from ledger.cli.run import run_cmd

CLI = str(Path(sys.executable).with_name("caseledger"))


def cli(ledger: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--ledger", str(ledger), *args])


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger with sales-fixture published and one reference run ``r`` (7 cases)."""
    path = tmp_path_factory.mktemp("papercuts") / "ledger.db"
    for args in (
        ["init"],
        ["bank", "publish", "sales-fixture"],
        ["run", "--bank", "sales-fixture", "--adapter", "reference", "--run-id", "r",
         "--no-variants"],
    ):  # fmt: skip
        done = cli(path, *args)
        assert done.exit_code == 0, done.output
    return path


# ----------------------------------------------------------------- printed hints


def _script(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "caseledger"
    script.write_text("#!/bin/sh\n", "utf-8")
    script.chmod(0o755)
    return script


def test_the_hint_names_the_script_as_typed_when_caseledger_is_not_on_path(
    tmp_path: Path,
) -> None:
    _script(tmp_path / ".venv" / "bin")
    other = _script(tmp_path / "elsewhere")  # another caseledger on PATH is not this one
    for search_path in ("/usr/bin", str(other.parent), None):
        got = program_name(".venv/bin/caseledger", cwd=tmp_path, search_path=search_path)
        assert got == ".venv/bin/caseledger"
    # the absolute path the kernel passes for a script found on PATH, under cwd
    absolute = str(tmp_path / ".venv" / "bin" / "caseledger")
    assert program_name(absolute, cwd=tmp_path, search_path="/usr/bin") == ".venv/bin/caseledger"


def test_the_hint_is_the_plain_name_when_path_finds_this_very_program(tmp_path: Path) -> None:
    script = _script(tmp_path / ".venv" / "bin")
    found = f"/usr/bin{os.pathsep}{script.parent}"
    assert program_name(".venv/bin/caseledger", cwd=tmp_path, search_path=found) == "caseledger"
    assert program_name(str(script), cwd=tmp_path, search_path=found) == "caseledger"


def test_the_hint_outside_the_working_directory(tmp_path: Path) -> None:
    script = _script(tmp_path / "venv" / "bin")
    cwd = tmp_path / "work"
    cwd.mkdir()
    # typed with ..: kept relative; an absolute path elsewhere: absolute; at cwd: ./
    assert (
        program_name("../venv/bin/caseledger", cwd=cwd, search_path="/usr/bin")
        == "../venv/bin/caseledger"
    )
    assert program_name(str(script), cwd=cwd, search_path="/usr/bin") == str(script)
    _script(cwd)
    assert program_name("caseledger", cwd=cwd, search_path="/usr/bin") == "./caseledger"
    spaced = _script(tmp_path / "my venv" / "bin")
    assert program_name(str(spaced), cwd=cwd, search_path="") == f"'{spaced}'"


def test_not_started_as_the_console_script_the_hint_is_the_documented_name(
    tmp_path: Path,
) -> None:
    for argv0 in ("/usr/lib/python3/pytest", "-c", ""):
        assert program_name(argv0, cwd=tmp_path, search_path="/usr/bin") == "caseledger"


def test_the_demo_commands_start_with_the_program_and_quote_paths(tmp_path: Path) -> None:
    out = Path("my demo")
    assert report_commands(out / "ledger.db", out, 12, ".venv/bin/caseledger") == [
        f".venv/bin/caseledger --ledger 'my demo/ledger.db' report --at-size 12 --format {f} "
        f"| cmp - 'my demo/report.{f}'"
        for f in ("json", "md", "html")
    ]
    # the default keeps the plain name (and no quotes where none are needed)
    assert report_commands(Path("d/ledger.db"), Path("d"), 3)[1] == (
        "caseledger --ledger d/ledger.db report --at-size 3 --format md | cmp - d/report.md"
    )
    _script(tmp_path / "bin")
    (tmp_path / "bin" / "activate").write_text("# venv\n", "utf-8")
    program = str(tmp_path / "bin" / "caseledger")
    assert _activation_hint(program) == (
        f"The commands below start caseledger as {program}; after "
        f"`. {tmp_path / 'bin' / 'activate'}` plain `caseledger` works too."
    )
    assert _activation_hint("caseledger") is None
    assert _activation_hint(str(tmp_path / "no-venv" / "caseledger")) is None


# ----------------------------------------------------------------- a closed output pipe


def _into_a_closed_pipe(*args: str) -> tuple[int, str]:
    """Run the real command with stdout a pipe nobody reads (``| head`` that has quit)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [CLI, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, check=False
        )
    finally:
        os.close(write_end)
    return done.returncode, done.stderr


@pytest.mark.parametrize(
    "args",
    [["log"], ["log", "--json"], ["runs"], ["runs", "--json"], ["keys", "list"],
     ["report", "--format", "md"]],
    ids=" ".join,
)  # fmt: skip
def test_a_closed_pipe_ends_the_command_quietly_with_141(ledger: Path, args: list[str]) -> None:
    code, err = _into_a_closed_pipe("--ledger", str(ledger), *args)
    assert code == 141  # 128 + SIGPIPE (13)
    lines = [ln for ln in err.splitlines() if not ln.startswith("report built at tree size")]
    assert lines == []  # no "Broken pipe", no traceback


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["bank", "--help"]], ids=" ".join)
def test_help_into_a_closed_pipe_is_141_too(args: list[str]) -> None:
    assert _into_a_closed_pipe(*args) == (141, "")


# ----------------------------------------------------------------- log, runs, run --help


def test_log_of_an_unknown_run_is_a_usage_error(ledger: Path) -> None:
    done = cli(ledger, "log", "--run", "no-such-run")
    assert done.exit_code == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"error: no run 'no-such-run' in {ledger}\n"
        "  hint: `caseledger runs` lists the runs; --run also takes the stream 'ledger'\n"
    )
    # with --type too: the run is unknown whatever the type
    assert cli(ledger, "log", "--run", "no-such-run", "--type", "run.started").exit_code == 2


def test_log_of_a_known_run_without_that_type_is_empty_and_fine(ledger: Path) -> None:
    done = cli(ledger, "log", "--run", "ledger", "--type", "run.started")
    assert (done.exit_code, done.output) == (0, "")
    # run r: RunStarted, its 7 prompts stored once (issue 22), 7 attempts x 6 events
    # (prompt, answer, parse, guard, execute, score), RunFinished
    listed = cli(ledger, "log", "--run", "r").stdout.splitlines()
    assert len(listed) == 1 + 7 + 7 * 6 + 1


def test_runs_prints_a_header_and_aligned_columns(ledger: Path) -> None:
    done = cli(ledger, "runs")
    assert done.exit_code == 0, done.output
    # worked out by hand: each column as wide as its widest cell, two spaces apart
    assert done.stdout == (
        "run  bank              adapter    profile    model  status     attempts  correct  "
        "score\n"
        "r    sales-fixture@v1  reference  reference  -      completed  7/7       1.0000   "
        "100.00\n"
    )


def test_runs_of_an_empty_ledger_prints_the_header_only(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    assert cli(path, "init").exit_code == 0
    done = cli(path, "runs")
    assert (done.exit_code, done.stdout) == (
        0,
        "run  bank  adapter  profile  model  status  attempts  correct  score\n",
    )


def test_every_run_option_has_a_help_text() -> None:
    bare = [
        p.opts[-1]
        for p in run_cmd.params
        if isinstance(p, click.Option) and not p.help and p.name != "help"
    ]
    assert bare == []
    shown = CliRunner().invoke(main, ["run", "--help"]).output
    for option in ("--concurrency", "--base-url", "--timeout", "--replay-file"):
        line = next(ln for ln in shown.splitlines() if ln.strip().startswith(option))
        assert len(line.split(None, 2)) == 3, line  # option, metavar, then a description


# ----------------------------------------------------------------- confusing messages


def test_output_null_in_a_replay_file_is_not_called_missing(ledger: Path, tmp_path: Path) -> None:
    replay = tmp_path / "answers.jsonl"
    replay.write_text('{"case": "sf-01", "attempt": 1, "output": null}\n', "utf-8")
    done = cli(ledger, "run", "--bank", "sales-fixture", "--adapter", "replay",
               "--replay-file", str(replay), "--no-variants")  # fmt: skip
    assert done.exit_code == 2
    assert (
        f"replay file {replay} line 1: 'output' must be a string, got null; a failed call is "
        'recorded as \'error\': {"kind": ..., "message": ...}'
    ) in done.stderr
    assert "missing" not in done.stderr


def test_an_empty_dimension_says_it_has_no_value(tmp_path: Path) -> None:
    bank = tmp_path / "bank"
    shutil.copytree(TINY, bank)
    cases = (bank / "cases.yaml").read_text("utf-8")
    assert cases.splitlines()[5] == "    dimension: basic"  # line 6
    (bank / "cases.yaml").write_text(cases.replace("dimension: basic", "dimension:", 1), "utf-8")
    done = CliRunner().invoke(main, ["bank", "validate", str(bank)])
    assert done.exit_code == 2
    assert (
        "cases.yaml:6: case tiny-01: field dimension: has no value: write one of basic, "
        "joins_grain, aggregation_metrics, time_window, complex, data_dev, or leave it out"
    ) in done.stderr
    assert "None" not in done.stderr


def _other_run(ledger: Path, run_id: str) -> subprocess.CompletedProcess[str]:
    """A second real ``caseledger run --run-id RUN_ID``."""
    return subprocess.run(
        [CLI, "--ledger", str(ledger), "run", "--bank", "sales-fixture", "--adapter",
         "reference", "--run-id", run_id, "--no-variants"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_two_runs_started_with_one_run_id_at_once(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other process wins the race right after this one checked that the run id is
    free (the run's own check, after the CLI's pre-flight one: issue 35)."""
    run_id = "twin-existing_run"
    original = runner_module._existing_run
    calls = [0]

    def lose_the_race(*args: Any, **kwargs: Any) -> Any:
        found = original(*args, **kwargs)
        calls[0] += 1
        if calls[0] == 2:
            other = _other_run(ledger, run_id)
            assert other.returncode == 0, other.stderr
        return found

    monkeypatch.setattr(runner_module, "_existing_run", lose_the_race)
    done = cli(ledger, "run", "--bank", "sales-fixture", "--adapter", "reference",
               "--run-id", run_id, "--no-variants")  # fmt: skip
    assert done.exit_code == 2, done.output
    assert done.stderr.splitlines()[-2:] == [
        f"error: run {run_id}: another process appended to this run at the same time; this "
        "process stopped and its last batch was not appended",
        "  hint: one process per run id: pick another --run-id, or wait for the other one "
        f"and check `caseledger runs`; --resume {run_id} finishes a run that is not completed",
    ]
    # the winner's run is whole and alone: RunStarted, 7 prompts stored, 7 x 6 events,
    # RunFinished
    listed = cli(ledger, "log", "--run", run_id).stdout.splitlines()
    assert len(listed) == 51
    assert sum("run.started" in line for line in listed) == 1
    assert sum("prompt.stored" in line for line in listed) == 7
    assert cli(ledger, "verify").exit_code == 0


def _stream_rows(ledger: Path, run_id: str) -> int:
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as con:
        query = "SELECT count(*) FROM events WHERE stream = ?"
        return int(con.execute(query, (run_id,)).fetchone()[0])


def test_a_second_run_while_the_first_starts_its_workers_is_refused(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While this run's SQL workers start, its RunStarted is recorded already (the model
    calls do not wait for the workers, issue 34): another process starting the same run
    id then is refused (exit 2, 'already exists') and this run completes."""
    run_id = "twin-executor_for"
    original = runner_module.executor_for
    once = threading.Lock()  # each SQL worker's start passes executor_for: once
    others: list[subprocess.CompletedProcess[str]] = []

    def start_another(*args: Any, **kwargs: Any) -> Any:
        found = original(*args, **kwargs)
        if once.acquire(blocking=False):
            # the workers start on their own threads while the run records RunStarted:
            # wait until it is stored (read from the file), then start the other process
            deadline = time.monotonic() + 120
            while not _stream_rows(ledger, run_id):
                assert time.monotonic() < deadline, "RunStarted was never stored"
                time.sleep(0.05)
            others.append(_other_run(ledger, run_id))
        return found

    monkeypatch.setattr(runner_module, "executor_for", start_another)
    done = cli(ledger, "run", "--bank", "sales-fixture", "--adapter", "reference",
               "--run-id", run_id, "--no-variants")  # fmt: skip
    assert done.exit_code == 0, done.output
    (other,) = others
    assert other.returncode == 2
    assert f"error: run {run_id} already exists in" in other.stderr
    listed = cli(ledger, "log", "--run", run_id).stdout.splitlines()
    assert len(listed) == 51
    assert sum("run.started" in line for line in listed) == 1
    assert cli(ledger, "verify").exit_code == 0


@pytest.mark.parametrize(
    ("args", "lines"),
    [
        (["run", "--bank", "x", "--reasoning-effort"],
         ["error: Option '--reasoning-effort' requires an argument.",
          "  hint: see `caseledger run --help`"]),
        (["--ledger", "l.db", "log", "--run"],
         ["error: Option '--run' requires an argument.", "  hint: see `caseledger log --help`"]),
        (["bank", "show", "retail", "--nope"],
         ["error: No such option '--nope'.", "  hint: see `caseledger bank show --help`"]),
        (["nosuch"], ["error: No such command 'nosuch'.", "  hint: see `caseledger --help`"]),
        (["--ledger"],
         ["error: Option '--ledger' requires an argument.", "  hint: see `caseledger --help`"]),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) and v and v[0][:6] != "error:" else "",
)  # fmt: skip
def test_a_usage_error_is_one_error_line_and_the_hint_of_its_command(
    args: list[str], lines: list[str]
) -> None:
    done = CliRunner().invoke(main, args, prog_name="caseledger")
    assert done.exit_code == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == lines
