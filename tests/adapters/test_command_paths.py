"""The command adapter's process bookkeeping and the usage-file and option refusals its
other tests do not reach (issue 14 item 6). Real programs, real process groups.

A running model's group is recorded as ``<folder>/<pgid>`` holding "harness-pid
harness-start pgid leader-start" (start times in clock ticks since boot, field 22 of
/proc/PID/stat); ``sweep_stale_children`` kills a group only when its harness is gone and
its leader still runs with the recorded start time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.adapters import Failure, Reply, Request, build_adapter
from ledger.adapters.command import sweep_stale_children
from ledger.errors import UsageError


def start_ticks(pid: int) -> int:
    """Field 22 (starttime) of /proc/PID/stat, read here from the proc(5) layout."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def command(argv: list[str], **options: Any) -> Any:
    return build_adapter(
        "command", {"command": argv, **options}, environ={"PATH": os.environ["PATH"]}
    )


def ask(adapter: Any) -> Any:
    return adapter.call(Request(case_id="r01", attempt=1, prompt="q"))


def wait_until(check: Any, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.02)
    return check()


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process leading its own group, as the adapter starts a model."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    yield proc
    proc.kill()
    proc.wait()


# ----------------------------------------------------------------- the sweep


def test_no_folder_sweeps_nothing(tmp_path: Path) -> None:
    assert sweep_stale_children(tmp_path / "none") == 0


def test_a_record_of_a_live_harness_is_left_alone(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    me = os.getpid()
    record = tmp_path / str(sleeper.pid)
    record.write_text(f"{me} {start_ticks(me)} {sleeper.pid} {start_ticks(sleeper.pid)}\n")
    assert sweep_stale_children(tmp_path) == 0
    assert record.exists()
    assert sleeper.poll() is None


def test_a_stale_record_kills_its_group_once(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    # The harness pid is ours but with another start time: a recycled pid, so the
    # caseledger that wrote the record is gone.
    me = os.getpid()
    record = tmp_path / str(sleeper.pid)
    record.write_text(f"{me} {start_ticks(me) + 1} {sleeper.pid} {start_ticks(sleeper.pid)}\n")
    assert sweep_stale_children(tmp_path) == 1
    assert sleeper.wait(timeout=10) == -9  # SIGKILL
    assert not record.exists()


def test_a_recycled_leader_pid_is_never_killed(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    # The leader pid runs, but started at another time: not the recorded model.
    me = os.getpid()
    record = tmp_path / str(sleeper.pid)
    start = start_ticks(sleeper.pid)
    record.write_text(f"{me} {start_ticks(me) + 1} {sleeper.pid} {start + 1}\n")
    assert sweep_stale_children(tmp_path) == 0
    assert not record.exists()
    assert sleeper.poll() is None


@pytest.mark.parametrize("content", ["not numbers\n", "1 2 3\n", ""])
def test_a_record_that_is_not_ours_is_removed(tmp_path: Path, content: str) -> None:
    (tmp_path / "12345").write_text(content)
    assert sweep_stale_children(tmp_path) == 0
    assert list(tmp_path.iterdir()) == []


def test_a_record_of_a_dead_harness_and_a_gone_leader_is_removed(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / str(gone.pid)).write_text(f"{gone.pid} 1 {gone.pid} 1\n")
    assert sweep_stale_children(tmp_path) == 0
    assert list(tmp_path.iterdir()) == []


def test_a_zombie_runs_nothing(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    # A harness that exited but was not reaped yet (state Z) is gone: its record is stale.
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        stat = Path(f"/proc/{zombie.pid}/stat")
        assert wait_until(lambda: stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")
        record = tmp_path / str(sleeper.pid)
        ticks = start_ticks(zombie.pid)
        record.write_text(f"{zombie.pid} {ticks} {sleeper.pid} {start_ticks(sleeper.pid)}\n")
        assert sweep_stale_children(tmp_path) == 1
        assert sleeper.wait(timeout=10) == -9
    finally:
        zombie.wait()


# ----------------------------------------------------------------- records of a call


LISTS_RECORDS = """\
import os, sys
sys.stdin.read()
print(sorted(os.listdir(sys.argv[1])), os.getpgid(0))
"""


def test_a_call_is_recorded_while_it_runs_and_not_after(tmp_path: Path) -> None:
    program = tmp_path / "m.py"
    program.write_text(LISTS_RECORDS)
    records = tmp_path / "children"
    adapter = command([sys.executable, str(program), str(records)])
    adapter.track_children(records)
    adapter.validate_cases(["anything"])  # the program answers any case
    reply = ask(adapter)
    assert isinstance(reply, Reply)
    listed, group = reply.raw_output.rsplit(" ", 1)
    assert listed == f"['{group.strip()}']"  # its own group's record, and only that
    assert list(records.iterdir()) == []
    adapter.close()


SLEEPS = "import sys, time\nsys.stdin.read()\nopen(sys.argv[1], 'w').write('up')\ntime.sleep(60)\n"


def test_close_kills_a_call_that_is_still_running(tmp_path: Path) -> None:
    program = tmp_path / "m.py"
    program.write_text(SLEEPS)
    flag = tmp_path / "flag"
    adapter = command([sys.executable, str(program), str(flag)], timeout_s=60)
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(ask(adapter)))
    started = time.monotonic()
    worker.start()
    assert wait_until(flag.exists)
    adapter.close()
    worker.join(timeout=10)
    assert time.monotonic() - started < 10  # not the program's 60 s
    (failure,) = results
    assert isinstance(failure, Failure)
    assert failure.kind == "command_failed"
    assert failure.message.startswith("command failed (killed by signal 9)")
    adapter.close()  # idempotent: nothing left to kill


# ----------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("usage_text", "message"),
    [
        ('{"input": NaN}', "non-finite number NaN"),
        ('{"model": 7}', "model must be a string, got 7"),
        ('{"cost": 0.5}', "cost must be a decimal string, not a JSON float, got 0.5"),
    ],
    ids=["nan", "model-number", "cost-float"],
)
def test_a_usage_file_the_adapter_refuses(tmp_path: Path, usage_text: str, message: str) -> None:
    program = tmp_path / "m.py"
    program.write_text(
        "import os, sys\nsys.stdin.read()\nprint('out')\n"
        f"open(os.environ['CASELEDGER_USAGE_FILE'], 'w').write({usage_text!r})\n"
    )
    failure = ask(command([sys.executable, str(program)]))
    assert isinstance(failure, Failure)
    assert (failure.kind, failure.message) == (
        "malformed_response",
        f"usage file (CASELEDGER_USAGE_FILE): {message}",
    )
    assert failure.raw_output == "out\n"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"command": 5}, "--command must be a string or a list of strings"),
        ({"command": ["cat", 1]}, "--command must be a string or a list of strings"),
        ({"command": ["cat"], "auth": "token"}, "--auth must be one of api_key, oauth, none, "
                                                "got 'token'"),
    ],
    ids=["number", "list-with-number", "auth"],
)  # fmt: skip
def test_options_of_the_wrong_kind(options: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as info:
        build_adapter("command", options, environ={"PATH": os.environ["PATH"]})
    assert info.value.message == message


# ------------------------------------------------------------------ the quickstart's example

MY_MODEL = """import json, sys

prompt = sys.stdin.read()
plan = {k: [] for k in ("sources", "joins", "filters", "metrics", "steps", "risks")}
sql = "SELECT COUNT(*) AS orders FROM orders" if "orders" in prompt else "SELECT 1 AS x"
print(json.dumps({"plan": {"grain": "one row", **plan}, "sql": sql, "summary": "s",
                  "assumptions": []}))
"""


def test_the_quickstart_command_example_runs_from_the_callers_folder(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """docs/quickstart.md: `--adapter command --command "python my_model.py"`, run from the
    folder holding my_model.py. The program runs in an empty private folder, so the
    relative file argument is made absolute first (issue 35 item 2)."""
    from runkit import cli, fresh_home

    home = fresh_home(tmp_path_factory, tmp_path)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "my_model.py").write_text(MY_MODEL)
    # `python` as the quickstart types it: this interpreter, first on PATH
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = cli(home, "run", "--bank", "sales-fixture", "--adapter", "command",
               "--command", "python my_model.py", "--run-id", "mine", "--no-variants",
               env=env, cwd=folder)  # fmt: skip
    assert done.returncode == 0, done.stderr
    # sales-fixture has 7 cases, one attempt each: every answer was parsed and executed
    assert "7/7 attempts" in done.stdout + done.stderr
    assert "can't open file" not in done.stdout + done.stderr


def test_an_argument_naming_a_file_is_made_absolute_and_others_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.adapters.command import _resolved

    (tmp_path / "model.py").write_text("")
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    assert _resolved("model.py") == str(tmp_path / "model.py")
    assert _resolved("data") == str(tmp_path / "data")
    for kept in ("--flag", "-v", "no-such-file.py", "/abs/path", "", "SELECT 1"):
        assert _resolved(kept) == kept
