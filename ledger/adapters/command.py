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

import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from ledger import events
from ledger.adapters import base, pricing
from ledger.adapters.base import Failure, Identity, Reply, Request
from ledger.adapters.process import CannotStart, ProcessGroups, sweep_stale_children
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
        self._groups = ProcessGroups()
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
        self._groups.track_children(folder)

    def close(self) -> None:
        """Kill the process group of every call still running (idempotent)."""
        self._groups.kill_all()

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
        try:
            # Running the user's configured model program is this adapter's job: an
            # argument list (no shell), through the supervisor (ledger.adapters.process).
            proc = self._groups.run(
                self._argv, cwd=work, env=env, timeout_s=self._timeout_s, stdin=prompt
            )
        except CannotStart as exc:
            return Failure(
                kind="command_failed",
                message=self.secrets.scrub(f"cannot start the command: {exc}"),
            )
        if proc is None:
            raise broken("the command adapter's process groups were closed")
        out, err, generation_us = proc.out, proc.err, proc.wall_us
        text: str | None = None
        bad_utf8 = ""
        try:
            text = self.secrets.scrub(out.decode("utf-8"))
        except UnicodeDecodeError as exc:
            bad_utf8 = f"stdout is not valid UTF-8 at byte offset {exc.start}"
        if proc.timed_out:
            return Failure(
                kind="timeout",
                message=f"command did not finish within {self._timeout_text} s; "
                "its process group was killed",
                raw_output=text or None,
                generation_us=generation_us,
            )
        if proc.returncode != 0:
            tail = _tail(err, self.secrets)
            said = f"stderr: {tail}" if tail else "it wrote nothing to stderr"
            return Failure(
                kind="command_failed",
                message=f"command failed ({proc.how()}); {said}",
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


def _resolved(arg: str) -> str:
    """``arg`` made absolute when it names an existing file or folder relative to the
    working folder (not an option, not already absolute); else ``arg`` unchanged."""
    if not arg or arg.startswith("-") or os.path.isabs(arg) or not os.path.exists(arg):
        return arg
    return os.path.abspath(arg)


def build(options: dict[str, Any], ctx: base.BuildContext) -> CommandAdapter:
    """Build the command adapter from CLI options (see docs/adapters.md)."""
    given = base.take_options("command", options, _OPTIONS, required=("command",))
    argv = _argv(given["command"])
    env = child_environment(ctx.environ, ctx.hidden_paths)
    # The program runs in an empty folder, so a relative program path is made
    # absolute now; a bare name is looked up on the (stripped) PATH. So is every
    # argument that names an existing file or folder relative to the caller's working
    # folder (`python my_model.py`, issue 35): it would not be found from the empty one.
    if os.sep in argv[0]:
        argv[0] = os.path.abspath(argv[0])
    argv[1:] = [_resolved(arg) for arg in argv[1:]]
    if shutil.which(argv[0], path=env.get("PATH")) is None:
        raise UsageError(
            f"--command: {argv[0]!r} is not an executable file (or not on PATH)",
            hint="give the program's path (relative to this folder, or absolute)",
        )
    auth = given.get("auth")
    if auth is not None and auth not in _AUTH_MODES:
        raise UsageError(f"--auth must be one of {', '.join(_AUTH_MODES)}, got {auth!r}")
    tools = given.get("tools", "unknown")
    if tools not in _TOOLS:
        raise UsageError(f"--tools must be one of {', '.join(_TOOLS)}, got {tools!r}")
    model = base.str_option("model", given["model"]) if "model" in given else None
    snapshot = base.price_snapshot_option(given, model)
    timeout_s = base.timeout_option(given, DEFAULT_TIMEOUT_S)
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
