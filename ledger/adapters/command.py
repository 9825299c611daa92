"""The command adapter: any executable as the model, prompt on stdin, raw output on stdout.

Each call runs the program once, in a fresh empty temporary working
directory, in its own process group, with an environment stripped of every
``CASELEDGER*`` variable, of PWD/OLDPWD and of any variable naming a hidden
path (the ledger, the bank). The program may write its token usage as one
JSON object to the file named by ``CASELEDGER_USAGE_FILE``. This keeps an
honest program away from gold; it is not a sandbox: full isolation needs an
OS sandbox (a container, bubblewrap, a separate user).

With ``--api-key-env NAME`` the key the program uses (the value of NAME, which
stays in its environment) is scrubbed in every form from all it returns
(stdout, stderr, the usage file) before anything is cut, stored or printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from ledger import events
from ledger.adapters import base, pricing
from ledger.adapters.base import Failure, Identity, Reply, Request
from ledger.codec import canonical_json
from ledger.errors import UsageError, broken
from ledger.secrets import SecretSet, env_secret

__all__ = [
    "ADAPTER_VERSION",
    "USAGE_FILE_ENV",
    "CommandAdapter",
    "build",
    "child_environment",
    "sweep_stale_children",
]

ADAPTER_VERSION = "1"
HARNESS_KIND = "caseledger-command"
WIRE_PROTOCOL = "stdin-stdout"
USAGE_FILE_ENV = "CASELEDGER_USAGE_FILE"
DEFAULT_TIMEOUT_S = Decimal(120)
STDERR_TAIL = 500
_OPTIONS = (
    "command",
    "timeout_s",
    "model",
    "provider",
    "auth",
    "tools",
    "price_snapshot",
    "api_key_env",
)
_TOOLS = ("off", "on", "unknown")
_AUTH_MODES = ("api_key", "oauth", "none")
_USAGE_EXTRA = ("model", "cost")


def child_environment(environ: Mapping[str, str], hidden_paths: Sequence[str]) -> dict[str, str]:
    """The model program's environment: ``environ`` minus caseledger variables and paths.

    >>> child_environment({"PATH": "/bin", "CASELEDGER_LEDGER": "x", "DB": "/s/l.db",
    ...                    "PWD": "/s"}, ["/s/l.db"])
    {'PATH': '/bin'}
    """
    hidden = {p for p in hidden_paths if p}
    hidden |= {os.path.realpath(p) for p in hidden}
    return {
        key: value
        for key, value in environ.items()
        if not key.upper().startswith("CASELEDGER")
        and key not in ("PWD", "OLDPWD")
        and not any(p in value for p in hidden)
    }


# The supervisor every model program runs under (``python -I -S -c``, argv: the
# harness pid, then the program's argv). It leads the program's process group and
# asks Linux for a signal when the harness dies (PR_SET_PDEATHSIG), even by
# SIGKILL; on it, it kills the whole group (itself, the program, its children).
# It forks the program rather than exec'ing it so that grandchildren die too, and
# relays the program's exit status or signal. A tiny separate process instead of
# a preexec_fn: preexec_fn is unsafe in a process with threads, as the runner is.
_SUPERVISOR = r"""
import os, signal, sys
def die(*_):
    os.killpg(0, signal.SIGKILL)
signal.signal(signal.SIGTERM, die)
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
except (ImportError, OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    die()
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as exc:
        os.write(2, ("cannot start the command: %s" % exc).encode())
    os._exit(127)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
status = os.waitpid(pid, 0)[1]
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
"""


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(process group, start time in clock ticks since boot) of a live process, else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # a zombie runs nothing
        return None
    return int(fields[2]), int(fields[19])


class _ChildRecord:
    """``<folder>/<pgid>``: one running model's group, so a later run can sweep it.

    The file holds the harness pid and start time and the group leader's pid and
    start time. A pid is only trusted with its start time, so a recycled pid is
    never killed.
    """

    def __init__(self, folder: Path, pgid: int) -> None:
        self.path = folder / str(pgid)
        me, leader = _proc_stat(os.getpid()), _proc_stat(pgid)
        if me is None or leader is None:
            self.path = None  # type: ignore[assignment]
            return
        folder.mkdir(parents=True, exist_ok=True)
        self.path.write_text(f"{os.getpid()} {me[1]} {pgid} {leader[1]}\n", "ascii")

    def remove(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def sweep_stale_children(folder: Path) -> int:
    """Kill the model process groups a dead caseledger left behind; returns how many.

    A record is stale when its harness process is gone (or is another process
    with a recycled pid). Its group is killed only when the group leader still
    runs with the recorded start time. Records of live harnesses are left alone.
    """
    if not folder.is_dir():
        return 0
    killed = 0
    for path in sorted(folder.iterdir()):
        try:
            harness, harness_start, pgid, leader_start = map(int, path.read_text("ascii").split())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)  # not one of ours, or half-written: nothing to trust
            continue
        alive = _proc_stat(harness)
        if alive is not None and alive[1] == harness_start:
            continue  # a run in progress
        leader = _proc_stat(pgid)
        if leader is not None and leader == (pgid, leader_start):
            _kill_group(pgid)
            killed += 1
        path.unlink(missing_ok=True)
    return killed


def _kill_group(pgid: int) -> None:
    # ProcessLookupError: the group is already gone.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _tail(data: bytes, secrets: SecretSet) -> str:
    # Scrubbed before the cut, so no part of a key survives at its edge.
    text = data.decode("utf-8", errors="replace").strip()
    return secrets.tail(text, STDERR_TAIL)


class CommandAdapter:
    """Runs one program per attempt; see the module docstring for its isolation."""

    def __init__(
        self,
        *,
        argv: Sequence[str],
        timeout_s: Decimal,
        env: Mapping[str, str],
        model: str | None,
        provider: str | None,
        auth: str | None,
        tools: str,
        snapshot: pricing.PriceSnapshot | None,
        secrets: SecretSet | None = None,
    ) -> None:
        self._argv = list(argv)
        self.secrets = secrets or SecretSet()
        self._timeout_text = str(timeout_s)
        self._timeout_s = float(timeout_s)  # subprocess API only; never recorded
        self._env = dict(env)
        self._tools = tools
        self._snapshot = snapshot
        self._client = base.client_version(ADAPTER_VERSION, "adapter-command")
        # Process groups of running calls: close() kills them, so a model started
        # by an interrupted run never outlives caseledger.
        self._live: set[int] = set()
        self._children_dir: Path | None = None
        self._live_lock = threading.Lock()
        self.identity = Identity(
            adapter_kind="command",
            run_kind="model",
            requested_model=model,
            provider=provider,
            auth_mode=auth,
            params=events.GenerationParams(),
            timeout_ms=base.timeout_ms(timeout_s),
            harness_kind=HARNESS_KIND,
            bridge_version=None,
            policy_version=None,
            system_prompt_digest=None,
            price_snapshot_digest=snapshot.digest if snapshot else None,
            replay_file_sha256=None,
            default_attempts=None,
        )

    def invocation(self, prompt_contract_digest: str, retries: int) -> events.Invocation:
        """One process per attempt; nothing but the prompt is sent, so no parameters."""
        return base.text_invocation(
            self.identity,
            tools=self._tools,
            wire_protocol=WIRE_PROTOCOL,
            client_version=self._client,
            prompt_contract_digest=prompt_contract_digest,
            retries=retries,
        )

    def validate_cases(self, case_ids: Iterable[str]) -> None:
        """Nothing to check: the program answers any case."""

    def track_children(self, folder: Path) -> None:
        """Record each running program's group under ``folder`` for :func:`sweep_stale_children`."""
        self._children_dir = folder

    def close(self) -> None:
        """Kill the process group of every call still running (idempotent)."""
        with self._live_lock:
            live, self._live = self._live, set()
        for pgid in live:
            _kill_group(pgid)

    def call(self, request: Request) -> Reply | Failure:
        """Run the program once on the prompt; map its exit, output and usage file."""
        parent = tempfile.mkdtemp(prefix="caseledger-cmd-")
        try:
            work = os.path.join(parent, "work")
            os.mkdir(work)
            usage_path = os.path.join(parent, "usage.json")
            env = {**self._env, USAGE_FILE_ENV: usage_path}
            return self._run(request.prompt.encode("utf-8"), work, env, usage_path)
        finally:
            shutil.rmtree(parent, ignore_errors=True)

    def _run(
        self, prompt: bytes, work: str, env: dict[str, str], usage_path: str
    ) -> Reply | Failure:
        start = time.perf_counter_ns()
        try:
            # Running the user's configured model program is this adapter's job: an
            # argument list (no shell), through our supervisor (docs/adapters.md).
            proc = subprocess.Popen(  # noqa: S603
                [sys.executable, "-I", "-S", "-c", _SUPERVISOR, str(os.getpid()), *self._argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=work,
                env=env,
                start_new_session=True,  # own process group: a timeout kills all of it
            )
        except OSError as exc:
            return Failure(
                kind="command_failed",
                message=self.secrets.scrub(f"cannot start the command: {exc}"),
            )
        with self._live_lock:
            self._live.add(proc.pid)
        record = _ChildRecord(self._children_dir, proc.pid) if self._children_dir else None
        timed_out = False
        try:
            out, err = proc.communicate(prompt, timeout=self._timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            out, err = _drain(proc)
        finally:
            # A finished program may leave children behind; none outlives its job.
            _kill_group(proc.pid)
            with self._live_lock:
                self._live.discard(proc.pid)
            if record is not None:
                record.remove()
        generation_us = (time.perf_counter_ns() - start) // 1000
        text: str | None = None
        bad_utf8 = ""
        try:
            text = self.secrets.scrub(out.decode("utf-8"))
        except UnicodeDecodeError as exc:
            bad_utf8 = f"stdout is not valid UTF-8 at byte offset {exc.start}"
        if timed_out:
            return Failure(
                kind="timeout",
                message=f"command did not finish within {self._timeout_text} s; "
                "its process group was killed",
                raw_output=text or None,
                generation_us=generation_us,
            )
        if proc.returncode != 0:
            how = (
                f"killed by signal {-proc.returncode}"
                if proc.returncode < 0
                else f"exit status {proc.returncode}"
            )
            return Failure(
                kind="command_failed",
                message=f"command failed ({how}); stderr: {_tail(err, self.secrets)}",
                raw_output=text or None,
                generation_us=generation_us,
            )
        if text is None:
            return Failure(kind="malformed_response", message=bad_utf8, generation_us=generation_us)
        try:
            usage, reported_model, billed = _read_usage(usage_path, self.secrets)
        except ValueError as exc:
            return Failure(
                kind="malformed_response",
                message=self.secrets.scrub(f"usage file ({USAGE_FILE_ENV}): {exc}"),
                raw_output=text,
                generation_us=generation_us,
            )
        price = pricing.cost_of(
            usage,
            self._snapshot,
            billed,
            model=pricing.price_key(self._snapshot, self.identity.requested_model, reported_model),
            auth_mode=self.identity.auth_mode,
        )
        return Reply(
            raw_output=text,
            provider_request_id=None,
            resolved_model=reported_model,
            recorded_model=None,
            usage=usage,
            cost=price.cost,
            estimated_cost=price.estimated_cost,
            generation_us=generation_us,
        )


def _drain(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    # After the group was killed; a grandchild that left the group could still
    # hold the pipes open, so do not wait for it forever.
    try:
        return proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait()
        return b"", b""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def _read_usage(
    path: str, secrets: SecretSet
) -> tuple[events.Usage | None, str | None, Decimal | None]:
    """Usage, reported model and billed cost from the usage file (all None if absent).

    Every string in it is scrubbed of ``secrets`` first.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None, None, None
    try:
        obj = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not one JSON object: {exc}") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    obj = secrets.scrub_json(obj)
    if not isinstance(obj, dict):
        raise broken("scrubbing a JSON object gave something else")
    model = obj.get("model")
    if model is not None and not isinstance(model, str):
        raise ValueError(f"model must be a string, got {model!r}")
    cost = obj.get("cost")
    # A float is not exact: this file's bill is a decimal string (or an integer).
    billed = pricing.bill(None if isinstance(cost, float) else cost)
    if isinstance(cost, float):
        raise ValueError(f"cost must be a decimal string, not a JSON float, got {cost!r:.60}")
    counts = {k: v for k, v in obj.items() if k not in _USAGE_EXTRA}
    usage = base.usage_from_fields(counts)
    raw = canonical_json(obj).decode("utf-8")
    return (
        events.Usage(
            input=usage.input,
            cache_read=usage.cache_read,
            cache_write=usage.cache_write,
            output=usage.output,
            reasoning_output=usage.reasoning_output,
            raw_json=raw,
        ),
        model,
        billed,
    )


def _argv(value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise UsageError(f"--command cannot be split into words: {exc}") from None
    elif isinstance(value, list | tuple) and all(isinstance(a, str) for a in value):
        argv = list(value)
    else:
        raise UsageError("--command must be a string or a list of strings")
    if not argv or not argv[0]:
        raise UsageError("--command is empty")
    return argv


def build(options: dict[str, Any], ctx: base.BuildContext) -> CommandAdapter:
    """Build the command adapter from CLI options (see docs/adapters.md)."""
    given = base.take_options("command", options, _OPTIONS, required=("command",))
    argv = _argv(given["command"])
    env = child_environment(ctx.environ, ctx.hidden_paths)
    # The program runs in an empty folder, so a relative program path is made
    # absolute now; a bare name is looked up on the (stripped) PATH.
    if os.sep in argv[0]:
        argv[0] = os.path.abspath(argv[0])
    if shutil.which(argv[0], path=env.get("PATH")) is None:
        raise UsageError(
            f"--command: {argv[0]!r} is not an executable file (or not on PATH)",
            hint="give the program's path; arguments naming files must be absolute paths",
        )
    auth = given.get("auth")
    if auth is not None and auth not in _AUTH_MODES:
        raise UsageError(f"--auth must be one of {', '.join(_AUTH_MODES)}, got {auth!r}")
    tools = given.get("tools", "unknown")
    if tools not in _TOOLS:
        raise UsageError(f"--tools must be one of {', '.join(_TOOLS)}, got {tools!r}")
    model = base.str_option("model", given["model"]) if "model" in given else None
    snapshot = None
    if "price_snapshot" in given:
        snapshot = pricing.load_snapshot(given["price_snapshot"])
        pricing.check_priced(snapshot, model, str(given["price_snapshot"]))
    timeout_s = (
        base.decimal_option("timeout_s", given["timeout_s"], positive=True)
        if "timeout_s" in given
        else DEFAULT_TIMEOUT_S
    )
    # The key the program uses: it stays in the program's environment, and is
    # scrubbed from everything the program returns.
    env_name = given.get("api_key_env")
    secret = env_secret(env_name, ctx.environ) if env_name is not None else None
    return CommandAdapter(
        argv=argv,
        timeout_s=timeout_s,
        env=env,
        model=model,
        provider=base.str_option("provider", given["provider"]) if "provider" in given else None,
        auth=auth,
        tools=tools,
        snapshot=snapshot,
        secrets=SecretSet([secret]),
    )
