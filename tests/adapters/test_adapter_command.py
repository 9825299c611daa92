"""The command adapter with real small Python programs as the model."""

from __future__ import annotations

import json
import os
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ledger.adapters import Failure, Reply, Request, build_adapter
from ledger.errors import UsageError

CONTRACT = "sha256:" + "c" * 64

MODEL = """\
import json, os, sys
prompt = sys.stdin.read()
answer = {"sql": "SELECT " + str(len(prompt)), "echo": prompt}
sys.stdout.write(json.dumps(answer))
with open(os.environ["CASELEDGER_USAGE_FILE"], "w") as fh:
    json.dump({"input": 900, "cache_read": 100, "output": 50, "reasoning_output": 20,
               "model": "tiny-model-v2"}, fh)
"""

ENV_DUMP = """\
import json, os, sys
sys.stdin.read()
print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "files": os.listdir(".")}))
"""

FAILING = """\
import sys
sys.stdin.read()
print("partial answer")
sys.stderr.write("loading...\\nboom: the model crashed\\n")
sys.exit(3)
"""

SLOW_WITH_CHILD = """\
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open(sys.argv[1], "w") as fh:
    fh.write(f"{child.pid}")
time.sleep(60)
"""


def script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def command(argv: list[str], environ: dict[str, str] | None = None, **options: Any) -> Any:
    env = environ if environ is not None else {"PATH": os.environ["PATH"]}
    return build_adapter("command", {"command": argv, **options}, environ=env)


def ask(adapter: Any, prompt: str = "how many orders?") -> Any:
    return adapter.call(Request(case_id="r01", attempt=1, prompt=prompt))


def test_prompt_in_output_and_usage_out(tmp_path: Path) -> None:
    a = command([sys.executable, script(tmp_path, "model.py", MODEL)], model="tiny-model")
    reply = ask(a, "héllo\nworld")
    assert isinstance(reply, Reply)
    assert json.loads(reply.raw_output) == {"sql": "SELECT 11", "echo": "héllo\nworld"}
    assert reply.usage is not None
    assert (reply.usage.input, reply.usage.cache_read, reply.usage.cache_write) == (900, 100, None)
    assert (reply.usage.output, reply.usage.reasoning_output) == (50, 20)
    assert reply.usage.raw_json == (
        '{"cache_read":100,"input":900,"model":"tiny-model-v2","output":50,"reasoning_output":20}'
    )
    assert reply.resolved_model == "tiny-model-v2"
    assert reply.cost is None
    assert reply.estimated_cost is None
    assert reply.generation_us is not None
    assert reply.generation_us > 0
    inv = a.invocation(CONTRACT, 0)
    assert (inv.harness_kind, inv.wire_protocol, inv.tools) == (
        "caseledger-command",
        "stdin-stdout",
        "unknown",
    )
    assert inv.client_version == "caseledger/0.1.0 adapter-command/1"
    assert (inv.model, inv.parameters, inv.single_call) == ("tiny-model", {}, True)
    assert a.identity.requested_model == "tiny-model"
    assert a.identity.timeout_ms == 120000


def test_environment_is_stripped_and_cwd_is_empty(tmp_path: Path) -> None:
    ledger = tmp_path / "home" / ".caseledger" / "ledger.db"
    environ = {
        "PATH": os.environ["PATH"],
        "KEEP": "yes",
        "CASELEDGER_LEDGER": "/anything/ledger.db",
        "CASELEDGER_SECRET_BANK": "x",
        "caseledger_lower": "x",
        "MY_DB": f"sqlite:///{ledger}",
        "PWD": str(tmp_path),
        "OLDPWD": "/",
    }
    a = build_adapter(
        "command",
        {"command": [sys.executable, script(tmp_path, "dump.py", ENV_DUMP)]},
        environ=environ,
        hidden_paths=[ledger.parent],
    )
    first = json.loads(ask(a).raw_output)
    second = json.loads(ask(a).raw_output)
    env = dict(first["env"])
    usage_file = env.pop("CASELEDGER_USAGE_FILE")
    # Python itself may add LC_CTYPE when the locale is C; nothing else is added.
    env.pop("LC_CTYPE", None)
    assert env == {"PATH": os.environ["PATH"], "KEEP": "yes"}
    assert first["files"] == []
    assert first["cwd"] != second["cwd"]  # a fresh folder per call
    assert not Path(first["cwd"]).exists()  # removed afterwards
    assert not Path(usage_file).exists()
    assert str(tmp_path) not in first["cwd"]


def test_non_zero_exit_is_command_failed(tmp_path: Path) -> None:
    failure = ask(command([sys.executable, script(tmp_path, "fail.py", FAILING)]))
    assert isinstance(failure, Failure)
    assert failure.kind == "command_failed"
    assert failure.message == (
        "command failed (exit status 3); stderr: loading...\nboom: the model crashed"
    )
    assert failure.raw_output == "partial answer\n"


def test_a_silent_non_zero_exit_says_stderr_was_empty(tmp_path: Path) -> None:
    silent = script(tmp_path, "silent.py", "import sys\nsys.exit(4)\n")
    failure = ask(command([sys.executable, silent]))
    assert isinstance(failure, Failure)
    assert failure.kind == "command_failed"
    assert failure.message == "command failed (exit status 4); it wrote nothing to stderr"


def _gone(pid: int) -> bool:
    # Gone, or a zombie waiting for init to reap it: either way no longer running.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    argv = [sys.executable, script(tmp_path, "slow.py", SLOW_WITH_CHILD), str(pid_file)]
    a = command(argv, timeout_s="1.5")
    start = time.monotonic()
    failure = ask(a)
    assert time.monotonic() - start < 4
    assert isinstance(failure, Failure)
    assert failure.kind == "timeout"
    assert failure.message == "command did not finish within 1.5 s; its process group was killed"
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 3
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child), "the model's child process outlived the timeout"


@pytest.mark.parametrize(
    ("usage_text", "message"),
    [
        ("{not json", "usage file (CASELEDGER_USAGE_FILE): not one JSON object: Expecting"),
        ("[1, 2]", "usage file (CASELEDGER_USAGE_FILE): not a JSON object"),
        (
            '{"input": 1.5}',
            "usage file (CASELEDGER_USAGE_FILE): usage.input must be a non-negative integer "
            "or null, got 1.5",
        ),
        (
            '{"tokens": 3}',
            "usage file (CASELEDGER_USAGE_FILE): usage has unknown field 'tokens'",
        ),
    ],
    ids=["not-json", "array", "float-count", "unknown-field"],
)
def test_bad_usage_file(tmp_path: Path, usage_text: str, message: str) -> None:
    program = (
        "import os, sys\nsys.stdin.read()\nprint('out')\n"
        f"open(os.environ['CASELEDGER_USAGE_FILE'], 'w').write({usage_text!r})\n"
    )
    failure = ask(command([sys.executable, script(tmp_path, "m.py", program)]))
    assert isinstance(failure, Failure)
    assert failure.kind == "malformed_response"
    assert failure.message.startswith(message)
    assert failure.raw_output == "out\n"


def test_stdout_not_utf8(tmp_path: Path) -> None:
    program = "import sys\nsys.stdin.read()\nsys.stdout.buffer.write(b'ok \\xff')\n"
    failure = ask(command([sys.executable, script(tmp_path, "m.py", program)]))
    assert isinstance(failure, Failure)
    assert (failure.kind, failure.message) == (
        "malformed_response",
        "stdout is not valid UTF-8 at byte offset 3",
    )


def test_cost_billed_estimated_and_oauth(tmp_path: Path) -> None:
    snap = tmp_path / "prices.json"
    snap.write_text(
        json.dumps(
            {
                "format": "caseledger-prices/1",
                "currency": "EUR",
                "models": {"tiny-model": {"input": "1", "cached_input": "0.5", "output": "4"}},
            }
        )
    )
    argv = [sys.executable, script(tmp_path, "model.py", MODEL)]
    reply = ask(command(argv, model="tiny-model", price_snapshot=str(snap)))
    # 900 x 1 + 100 x 0.5 + 50 x 4 = 900 + 50 + 200 = 1150 per million
    assert reply.estimated_cost == Decimal("0.00115")
    assert reply.cost is None
    oauth = ask(command(argv, model="tiny-model", price_snapshot=str(snap), auth="oauth"))
    assert oauth.estimated_cost is None
    assert oauth.cost is None
    billed_program = (
        "import json, os, sys\nsys.stdin.read()\nprint('x')\n"
        "json.dump({'input': 1, 'output': 2, 'cost': '0.0031'}, "
        "open(os.environ['CASELEDGER_USAGE_FILE'], 'w'))\n"
    )
    billed = ask(command([sys.executable, script(tmp_path, "b.py", billed_program)]))
    assert billed.cost == Decimal("0.0031")
    assert billed.estimated_cost is None


def test_relative_program_path_is_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    program = tmp_path / "model.sh"
    program.write_text("#!/bin/sh\ncat\n")
    program.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    reply = ask(command(["./model.sh"]), "echo me")
    assert isinstance(reply, Reply)
    assert reply.raw_output == "echo me"
    assert reply.usage is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"command": "/no/such/program --x"},
            "--command: '/no/such/program' is not an executable file (or not on PATH)",
        ),
        ({"command": "'unclosed"}, "--command cannot be split into words: No closing quotation"),
        ({"command": ""}, "--command is empty"),
        (
            {"command": "cat", "temperature": 0.2},
            "the command adapter does not take --temperature (option 'temperature')",
        ),
        (
            {"command": "cat", "tools": "maybe"},
            "--tools must be one of off, on, unknown, got 'maybe'",
        ),
        (
            {"replay_file": "x"},
            "the command adapter does not take --replay-file (option 'replay_file')",
        ),
    ],
    ids=["missing-program", "bad-quote", "empty", "temperature", "tools", "replay-file"],
)
def test_bad_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as exc:
        build_adapter("command", options, environ={"PATH": os.environ["PATH"]})
    assert exc.value.message == message
