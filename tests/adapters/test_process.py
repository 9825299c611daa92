"""ledger.adapters.process: real programs under the real supervisor (no mocks)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from ledger.adapters.process import CannotStart, Finished, ProcessGroups


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_stdin_goes_in_and_output_and_exit_status_come_back(tmp_path: Path) -> None:
    code = (
        "import sys; d = sys.stdin.read(); print(d[::-1], end='')\n"
        "print('e', end='', file=sys.stderr); sys.exit(3)"
    )
    done = ProcessGroups().run(
        python(code), cwd=tmp_path, env=dict(os.environ), timeout_s=60, stdin=b"abc"
    )
    assert done is not None
    assert (done.returncode, done.out, done.err, done.timed_out) == (3, b"cba", b"e", False)
    assert done.wall_us > 0


def test_without_stdin_the_program_reads_end_of_file(tmp_path: Path) -> None:
    done = ProcessGroups().run(
        python("import sys; print(repr(sys.stdin.read()))"),
        cwd=tmp_path,
        env=dict(os.environ),
        timeout_s=60,
    )
    assert done is not None
    assert (done.returncode, done.out) == (0, b"''\n")


GRANDCHILD = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
with open(sys.argv[1] + ".part", "w") as f:
    f.write(str(child.pid))
os.replace(sys.argv[1] + ".part", sys.argv[1])  # whole or absent
time.sleep(300)
"""


def test_a_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    # The kill only shows something once the grandchild exists (its pid file is
    # written). On a busy machine the two Python starts can outlast a short timeout,
    # so a run that timed out before that is repeated with a longer one: the test
    # waits about 2 s on a quiet machine, never a fixed 15.
    pid_file = tmp_path / "grandchild.pid"
    for timeout_s in (2, 8, 30):
        started = time.monotonic()
        done = ProcessGroups().run(
            [*python(GRANDCHILD), str(pid_file)],
            cwd=tmp_path,
            env=dict(os.environ),
            timeout_s=timeout_s,
        )
        assert done is not None
        assert time.monotonic() - started < timeout_s + 30  # not the program's 300 s
        if pid_file.exists():
            break
    assert pid_file.exists(), "the grandchild never started within 30 s"
    assert done.timed_out
    assert done.returncode == -9  # the supervisor itself was killed by SIGKILL
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def test_close_kills_a_running_program_and_refuses_later_ones(tmp_path: Path) -> None:
    groups = ProcessGroups()
    flag = tmp_path / "up"
    code = "import sys, time; open(sys.argv[1], 'w').write('up'); time.sleep(300)"
    results: list[Finished | None] = []
    worker = threading.Thread(
        target=lambda: results.append(
            groups.run(
                [*python(code), str(flag)], cwd=tmp_path, env=dict(os.environ), timeout_s=300
            )
        )
    )
    worker.start()
    deadline = time.monotonic() + 60
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert flag.exists()
    groups.close()
    worker.join(timeout=30)
    (done,) = results
    assert done is not None
    assert (done.returncode, done.timed_out) == (-9, False)
    assert groups.run(python("pass"), cwd=tmp_path, env=dict(os.environ), timeout_s=60) is None
    groups.close()  # idempotent


def test_kill_all_lets_later_programs_start(tmp_path: Path) -> None:
    groups = ProcessGroups()
    groups.kill_all()
    done = groups.run(python("print(7)"), cwd=tmp_path, env=dict(os.environ), timeout_s=60)
    assert done is not None
    assert (done.returncode, done.out) == (0, b"7\n")


def test_a_supervisor_that_cannot_start_is_cannot_start(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    with pytest.raises(CannotStart) as exc:
        ProcessGroups().run(python("pass"), cwd=missing, env=dict(os.environ), timeout_s=60)
    assert isinstance(exc.value, OSError)
    assert str(missing) in str(exc.value)
