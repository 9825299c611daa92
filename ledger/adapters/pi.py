"""The pi adapter: the ``pi`` coding-agent CLI as a single-turn, tool-free text harness.

Each attempt runs the real ``pi`` program (npm ``@mariozechner/pi-coding-agent``,
exactly version ``PI_VERSION``) once, non-interactively, in JSON event-stream
mode, and reads its events (never its text output):

- a fresh in-memory session (``--no-session``), an empty working directory and an
  empty ``HOME`` per attempt; pi's configuration folder (``PI_CODING_AGENT_DIR``)
  is one caseledger writes for the run: the fixed policy settings, the user's
  ``models.json`` (custom providers) and, for a subscription, a link to the
  user's ``auth.json``;
- every tool, extension, skill, prompt template, theme and context file
  (AGENTS.md) off, pi's retries and the provider SDK's retries off, offline;
- one small extension of our own, the *bridge* (``BRIDGE_JS``): it replaces the
  placeholder message with the prompt read verbatim from a file, sets the
  system prompt to exactly the recorded one (pi would append the date and the
  working directory), puts the explicit temperature and max tokens into the
  provider request, refuses a second provider request, blocks any tool call, and
  writes what it did (the request's tool count, the values it set, timings) to
  an evidence file the adapter checks after the call.

Token usage is pi's: ``input`` already excludes cached tokens (pi subtracts
them), so nothing is subtracted again; pi reports no reasoning count (reasoning
is inside ``output``), so ``reasoning_output`` is null. The cost pi prints is
its catalog price times the tokens, not a provider's bill: it is kept in
``raw_json`` only; the recorded cost is an estimate from ``--price-snapshot``
(labelled), or null, and always null for a subscription (``--auth oauth``).
pi names only the model it asked for, so the resolved model id is null.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

from ledger import events
from ledger.adapters import base, pricing
from ledger.adapters.base import Failure, Identity, Reply, Request
from ledger.adapters.command import child_environment
from ledger.adapters.openai import status_kind
from ledger.adapters.process import Finished, ProcessGroups
from ledger.codec import sha256_hex
from ledger.errors import AdapterError, UsageError
from ledger.secrets import SecretSet, env_secret

__all__ = [
    "ADAPTER_VERSION",
    "BRIDGE_VERSION",
    "DEFAULT_SYSTEM_PROMPT",
    "PI_ENV",
    "PI_PACKAGE",
    "PI_VERSION",
    "POLICY_VERSION",
    "PiAdapter",
    "build",
    "classify_error",
]

PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_VERSION = "0.73.1"
PI_ENV = "CASELEDGER_PI"
ADAPTER_VERSION = "1"
HARNESS_KIND = "pi"
WIRE_PROTOCOL = "pi-json-event-stream"
BRIDGE_VERSION = "caseledger-pi-bridge/1"
POLICY_VERSION = "caseledger-pi-policy/1"
DEFAULT_TIMEOUT_S = Decimal(120)
DEFAULT_SYSTEM_PROMPT = "Follow the instructions in the user's message exactly."
THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
# Providers whose output limit the provider manages (a subscription): no --max-tokens.
NO_MAX_TOKENS = frozenset({"openai-codex"})
STDERR_TAIL = 500
EXCERPT = 300
_AUTH_MODES = ("api_key", "oauth")
_OPTIONS = (
    "pi",
    "provider",
    "model",
    "auth",
    "api_key_env",
    "pi_models",
    "pi_auth_file",
    "timeout_s",
    "temperature",
    "reasoning_effort",
    "max_tokens",
    "price_snapshot",
    "system_prompt",
)
# The message pi is started with; the bridge replaces it with the prompt (a file, so
# the prompt reaches the model byte for byte: pi trims stdin, and argv is size-limited).
PLACEHOLDER = "caseledger: the prompt is supplied by the caseledger bridge extension"

# The fixed part of every pi command line (the policy; POLICY_VERSION names it).
POLICY_FLAGS = (
    "--mode",
    "json",
    "--no-session",
    "--no-tools",
    "--no-extensions",
    "--no-skills",
    "--no-prompt-templates",
    "--no-themes",
    "--no-context-files",
    "--offline",
)
# pi's settings.json for the run (the rest of the policy): no retries of either kind,
# no compaction, no telemetry.
POLICY_SETTINGS: dict[str, Any] = {
    "retry": {"enabled": False, "provider": {"maxRetries": 0}},
    "compaction": {"enabled": False},
    "enableInstallTelemetry": False,
    "quietStartup": True,
}

BRIDGE_JS = r"""// caseledger-pi-bridge/1, written by caseledger for one run of pi.
import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";

export default function caseledgerBridge(pi) {
  const dir = process.env.CASELEDGER_PI_ATTEMPT_DIR;
  const config = JSON.parse(readFileSync(join(dir, "bridge.json"), "utf8"));
  const prompt = readFileSync(join(dir, "prompt.txt"), "utf8");
  const system = readFileSync(join(dir, "system.txt"), "utf8");
  const record = (entry) =>
    appendFileSync(join(dir, "evidence.jsonl"), JSON.stringify(entry) + "\n");
  const MAX_FIELDS = ["max_tokens", "max_completion_tokens", "max_output_tokens", "maxTokens"];
  let requests = 0;
  record({ loaded: true });
  pi.on("input", () => ({ action: "transform", text: prompt }));
  pi.on("before_agent_start", () => ({ systemPrompt: system }));
  pi.on("before_provider_request", (event, ctx) => {
    requests += 1;
    const payload = event.payload;
    const plain = payload !== null && typeof payload === "object" && !Array.isArray(payload);
    const entry = {
      request: requests,
      at_ms: performance.now(),
      api: ctx.model ? ctx.model.api : null,
      tools: plain && Array.isArray(payload.tools) ? payload.tools.length : 0,
      set: {},
      errors: [],
    };
    if (requests > 1) {
      entry.errors.push("a second provider request in one attempt");
      record(entry);
      ctx.abort();
      throw new Error("caseledger bridge: a second provider request was refused");
    }
    if (config.temperature !== null) {
      if (plain && payload.generationConfig === undefined && payload.config === undefined) {
        payload.temperature = config.temperature;
        entry.set.temperature = payload.temperature;
      } else {
        entry.errors.push("cannot set the temperature in a request of api " + entry.api);
      }
    }
    if (config.max_tokens !== null) {
      const field = plain ? MAX_FIELDS.find((k) => k in payload) : undefined;
      if (field !== undefined) {
        payload[field] = config.max_tokens;
        entry.set.max_tokens = payload[field];
        entry.max_tokens_field = field;
      } else {
        entry.errors.push("cannot set max tokens in a request of api " + entry.api);
      }
    }
    record(entry);
    return payload;
  });
  pi.on("after_provider_response", (event) => {
    record({ response_status: event.status, at_ms: performance.now() });
  });
  pi.on("tool_call", () => ({ block: true, reason: "caseledger: tools are off" }));
  pi.on("message_end", (event, ctx) => {
    const m = event.message;
    if (!m || m.role !== "assistant") return;
    record({ message_end: true, at_ms: performance.now() });
    if (Array.isArray(m.content) && m.content.some((b) => b && b.type === "toolCall")) {
      ctx.abort();
    }
  });
}
"""


# ---------------------------------------------------------------- failure kinds

_STATUS = re.compile(r"^\s*(\d{3})\b")


def classify_error(message: str) -> str:
    """The failure kind of the ``errorMessage`` pi records on a failed model call.

    pi's providers put the HTTP status first (``429 Rate limit reached``).

    >>> [classify_error(m) for m in ("429 slow down", "500 oops", "401 bad key")]
    ['rate_limited', 'server_error', 'auth']
    >>> [classify_error(m) for m in ("Connection error.", "Request timed out.")]
    ['connection_error', 'timeout']
    >>> [classify_error(m) for m in ("No API key for provider: x", "finish_reason: content_filter")]
    ['auth', 'policy_refusal']
    >>> classify_error("something else")
    'server_error'
    """
    found = _STATUS.match(message)
    if found:
        return status_kind(int(found.group(1)))
    low = message.lower()
    if "content_filter" in low or "refus" in low:
        return "policy_refusal"
    if "timed out" in low or "timeout" in low:
        return "timeout"
    if "connection" in low or "econnrefused" in low or "fetch failed" in low:
        return "connection_error"
    if "api key" in low or "authentication" in low or "unauthorized" in low:
        return "auth"
    return "server_error"


# ---------------------------------------------------------------- the event stream


class _Bad(Exception):
    """pi's output is not the event stream the adapter expects (malformed_response)."""


class _Message(msgspec.Struct):
    # One message of agent_end; usage kept as the exact bytes pi wrote.
    role: str
    usage: msgspec.Raw = msgspec.Raw(b"null")


class _AgentEnd(msgspec.Struct):
    type: str
    messages: list[_Message]


def _reject_constant(name: str) -> Any:
    raise _Bad(f"non-finite number {name} in pi's event stream")


def _agent_end(out: bytes) -> tuple[list[dict[str, Any]], list[bytes]]:
    """The messages of pi's agent_end event and each one's usage bytes."""
    found: bytes | None = None
    for number, line in enumerate(out.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise _Bad(f"line {number} of pi's event stream is not JSON") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            raise _Bad(f"line {number} of pi's event stream is not an event object")
        if obj["type"] == "agent_end":
            found = line
    if found is None:
        raise _Bad("pi's event stream has no agent_end event")
    try:
        typed: _AgentEnd = msgspec.json.decode(found, type=_AgentEnd)
    except msgspec.DecodeError as exc:
        raise _Bad(f"pi's agent_end event: {exc}") from None
    loose = json.loads(found.decode("utf-8"), parse_float=Decimal)
    messages = loose["messages"]
    if not all(isinstance(m, dict) for m in messages):
        raise _Bad("pi's agent_end event has a message that is not an object")
    return messages, [bytes(m.usage) for m in typed.messages]


def _texts(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _Bad(f"a {message.get('role')} message has no content list")
    return "".join(
        b["text"]
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _has_tool_call(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "toolCall" for b in content
    )


def _count(obj: Mapping[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _usage(message: Mapping[str, Any], raw: bytes, secrets: SecretSet) -> events.Usage | None:
    """pi's usage object: input (already without cached tokens), cacheRead, cacheWrite, output.

    ``raw_json`` is the canonical JSON of the object when it holds only integers
    (and strings); pi writes its catalog cost as JSON numbers, so an object with a
    non-integer number is kept as the text pi wrote.
    """
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None
    _, raw_json = base.usage_raw_json(usage, lambda: raw, secrets)
    return events.Usage(
        input=_count(usage, "input"),
        cache_read=_count(usage, "cacheRead"),
        cache_write=_count(usage, "cacheWrite"),
        output=_count(usage, "output"),
        reasoning_output=None,  # pi reports none; reasoning is inside output
        raw_json=raw_json,
    )


def _evidence(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return []
    entries = []
    for line in text.splitlines():
        try:
            entry = json.loads(line, parse_float=Decimal)
        except json.JSONDecodeError:
            raise _Bad("the bridge's evidence file is not JSON Lines") from None
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


class PiAdapter:
    """Runs ``pi`` once per attempt; see the module docstring for the policy."""

    def __init__(
        self,
        *,
        pi_path: str,
        pi_version: str,
        provider: str,
        model: str,
        auth: str,
        secret: str | None,
        env: Mapping[str, str],
        agent_dir: Path,
        root: Path,
        timeout_s: Decimal,
        params: events.GenerationParams,
        system_prompt: str,
        snapshot: pricing.PriceSnapshot | None,
    ) -> None:
        self._pi = pi_path
        self._model = model
        self._provider = provider
        self._auth = auth
        self.secrets = SecretSet([secret])
        self._env = dict(env)
        self._agent_dir = agent_dir
        self._root = root
        self._timeout_text = str(timeout_s)
        self._timeout_s = float(timeout_s)  # subprocess API only; never recorded
        self._params = params
        self._system_prompt = system_prompt
        self._snapshot = snapshot
        self._client = base.client_version(ADAPTER_VERSION, "adapter-pi") + f" pi/{pi_version}"
        self._bridge_config = (
            "{"
            f'"temperature": {params.temperature if params.temperature is not None else "null"}, '
            f'"max_tokens": {params.max_tokens if params.max_tokens is not None else "null"}'
            "}"
        )
        self._argv = [
            pi_path,
            *POLICY_FLAGS,
            "-e",
            str(root / "bridge.mjs"),
            "--provider",
            provider,
            "--model",
            model,
        ]
        if params.reasoning_effort is not None:
            self._argv += ["--thinking", params.reasoning_effort]
        self._argv.append(PLACEHOLDER)
        # pi runs as the command adapter's programs do (ledger.adapters.process): in its own
        # process group, killed whole on a timeout and when caseledger dies (docs/adapters.md).
        self._groups = ProcessGroups()
        self.identity = Identity(
            adapter_kind="pi",
            run_kind="model",
            harness_kind=HARNESS_KIND,
            requested_model=model,
            provider=provider,
            auth_mode=auth,
            params=params,
            timeout_ms=base.timeout_ms(timeout_s),
            bridge_version=BRIDGE_VERSION,
            policy_version=POLICY_VERSION,
            system_prompt_digest=sha256_hex(system_prompt.encode("utf-8")),
            price_snapshot_digest=snapshot.digest if snapshot else None,
        )

    def __repr__(self) -> str:
        return f"PiAdapter(provider={self._provider!r}, model={self._model!r})"

    def invocation(self, prompt_contract_digest: str, retries: int) -> events.Invocation:
        """Single turn, text, tools off, and exactly the explicit parameters the bridge sets."""
        return base.text_invocation(
            self.identity,
            tools="off",
            wire_protocol=WIRE_PROTOCOL,
            client_version=self._client,
            prompt_contract_digest=prompt_contract_digest,
            retries=retries,
            parameters=base.invocation_parameters(self._params),
        )

    def validate_cases(self, case_ids: Iterable[str]) -> None:
        """Nothing to check: pi answers any case."""

    def track_children(self, folder: Path) -> None:
        """Record each running pi's process group under ``folder`` (see command adapter)."""
        self._groups.track_children(folder)

    def close(self) -> None:
        """Kill every pi still running and remove the run's pi folders (idempotent)."""
        self._groups.close()
        shutil.rmtree(self._root, ignore_errors=True)

    # ------------------------------------------------------------ one attempt

    def call(self, request: Request) -> Reply | Failure:
        """Run pi once on the prompt; map its events and the bridge's evidence."""
        attempt = Path(tempfile.mkdtemp(prefix="attempt-", dir=self._root))
        try:
            (attempt / "prompt.txt").write_bytes(request.prompt.encode("utf-8"))
            (attempt / "system.txt").write_bytes(self._system_prompt.encode("utf-8"))
            (attempt / "bridge.json").write_text(self._bridge_config, "utf-8")
            for name in ("home", "work"):
                (attempt / name).mkdir()
            env = {
                **self._env,
                "HOME": str(attempt / "home"),
                "CASELEDGER_PI_ATTEMPT_DIR": str(attempt),
            }
            proc = self._groups.run(
                self._argv, cwd=attempt / "work", env=env, timeout_s=self._timeout_s
            )
            if proc is None:
                return Failure(kind="command_failed", message="the run is closing; pi not started")
            try:
                return self._outcome(request.prompt, proc, _evidence(attempt / "evidence.jsonl"))
            except _Bad as exc:
                return Failure(
                    kind="malformed_response",
                    message=self.secrets.excerpt(str(exc), EXCERPT),
                    generation_us=proc.wall_us,
                )
        finally:
            shutil.rmtree(attempt, ignore_errors=True)

    def _stderr(self, err: bytes) -> str:
        text = err.decode("utf-8", errors="replace").strip()
        return self.secrets.tail(text, STDERR_TAIL)

    def _outcome(
        self, prompt: str, proc: Finished, evidence: list[dict[str, Any]]
    ) -> Reply | Failure:
        if proc.timed_out:
            return Failure(
                kind="timeout",
                message=f"pi did not finish within {self._timeout_text} s; "
                "its process group was killed",
                generation_us=proc.wall_us,
            )
        if proc.returncode != 0:
            return Failure(
                kind="command_failed",
                message=f"pi failed ({proc.how()}); stderr: {self._stderr(proc.err)}",
                generation_us=proc.wall_us,
            )
        messages, raws = _agent_end(proc.out)
        if not any(e.get("loaded") is True for e in evidence):
            raise _Bad(
                "the caseledger bridge extension did not load in pi; stderr: "
                + self._stderr(proc.err)
            )
        if not messages or messages[0].get("role") != "user" or _texts(messages[0]) != prompt:
            raise _Bad("pi's user message is not the prompt verbatim")
        users = [m for m in messages if m.get("role") == "user"]
        assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        if len(users) != 1 or not assistants:
            raise _Bad(f"pi recorded {len(users)} user and {len(assistants)} assistant messages")
        first = messages[assistants[0]]
        used = (first.get("provider"), first.get("model"))
        if used != (self._provider, self._model):
            raise _Bad(
                f"pi called {used[0]}/{used[1]}, not the requested {self._provider}/{self._model}"
            )
        usage = _usage(first, raws[assistants[0]], self.secrets)
        text = self.secrets.scrub(_texts(first))
        request_id = first.get("responseId")
        request_id = self.secrets.scrub(request_id) if isinstance(request_id, str) else None
        generation_us = _generation_us(evidence, proc.wall_us)

        def failure(kind: str, message: str) -> Failure:
            return Failure(
                kind=kind,
                message=self.secrets.excerpt(message, EXCERPT),
                provider_request_id=request_id,
                raw_output=text or None,
                usage=usage,
                generation_us=generation_us,
            )

        requests = [e for e in evidence if "request" in e]
        if any(_has_tool_call(m) for m in messages) or any(
            m.get("role") == "toolResult" for m in messages
        ):
            names = sorted(
                str(b.get("name"))
                for m in messages
                if isinstance(m.get("content"), list)
                for b in m["content"]
                if isinstance(b, dict) and b.get("type") == "toolCall"
            )
            return failure(
                "tool_use",
                "the model asked for a tool although tools are off "
                f"({', '.join(names) or 'unnamed'}); the attempt was stopped after one call",
            )
        offered = [e.get("tools") for e in requests if e.get("tools")]
        if offered:
            return failure("tool_use", f"pi offered {offered[0]} tools to the model")
        if len(requests) != 1 or len(assistants) != 1:
            raise _Bad(
                f"pi made {len(requests)} provider requests and {len(assistants)} "
                "assistant messages; one of each was expected"
            )
        problems = [str(p) for e in requests for p in e.get("errors", [])]
        if problems:
            return failure("bad_request", "the bridge could not apply: " + "; ".join(problems))
        self._check_set(requests[0])
        stop = first.get("stopReason")
        if stop == "error":
            why = first.get("errorMessage")
            why = why if isinstance(why, str) else "pi reports an error without a message"
            return failure(classify_error(why), self.secrets.scrub(why))
        if stop == "aborted":
            return failure("server_error", "pi aborted the model call")
        if stop not in ("stop", "length"):
            raise _Bad(f"pi's answer has an unknown stopReason {stop!r}")
        if not text and (usage is None or not usage.output):
            # pi ends a reply it could not read (not an event stream, an empty stream, a
            # cut connection) as a normal stop with no text and no tokens: the transport
            # failed, not the model (issue 35); the early stop counts it.
            return failure(
                "malformed_response",
                "the provider returned no text and no output tokens: a reply pi could not "
                "read (not a streamed Chat Completions answer, an empty stream, or a cut "
                "connection), not the model's answer",
            )
        price = pricing.cost_of(
            usage,
            self._snapshot,
            None,  # pi reports no bill (its cost is its own catalog price)
            model=pricing.price_key(self._snapshot, self._model, None),
            auth_mode=self._auth,
        )
        return Reply(
            raw_output=text,
            provider_request_id=request_id,
            resolved_model=None,  # pi names only the requested catalog model
            recorded_model=None,
            usage=usage,
            cost=price.cost,
            estimated_cost=price.estimated_cost,
            generation_us=generation_us,
        )

    def _check_set(self, request: Mapping[str, Any]) -> None:
        # What the bridge put into the request must be what the invocation records.
        sent = request.get("set", {})
        want: dict[str, Any] = {}
        if self._params.temperature is not None:
            want["temperature"] = self._params.temperature
        if self._params.max_tokens is not None:
            want["max_tokens"] = self._params.max_tokens
        got = {k: sent.get(k) for k in want}
        if got != want:
            raise _Bad(f"the bridge set {got}, not {want}")


def _generation_us(evidence: list[dict[str, Any]], fallback: int) -> int:
    """From the provider request to the end of the answer (the bridge's clock), in µs."""
    starts = [e["at_ms"] for e in evidence if "request" in e and "at_ms" in e]
    ends = [e["at_ms"] for e in evidence if e.get("message_end") and "at_ms" in e]
    if not starts or not ends:
        return fallback
    spent = ends[0] - starts[0]
    if not isinstance(spent, Decimal | int) or spent < 0:
        return fallback
    return int(Decimal(spent) * 1000)


# ---------------------------------------------------------------- build


def _pi_path(given: Mapping[str, Any], environ: Mapping[str, str], path: str | None) -> str:
    hint = (
        f"install it: npm install --prefix ~/.caseledger-pi {PI_PACKAGE}@{PI_VERSION}, then "
        f"pass --pi ~/.caseledger-pi/node_modules/.bin/pi (or set {PI_ENV}, or put pi on PATH)"
    )
    if "pi" in given:
        name, source = base.str_option("pi", given["pi"]), "--pi"
    elif environ.get(PI_ENV):
        name, source = environ[PI_ENV], PI_ENV
    else:
        name, source = "pi", "PATH"
    if os.sep in name:
        name = os.path.abspath(os.path.expanduser(name))
    found = shutil.which(name, path=path)
    if found is None:
        raise UsageError(f"pi is not installed: no executable {name!r} (from {source})", hint=hint)
    return found


def _pi_version(pi_path: str, env: Mapping[str, str], cwd: Path) -> str:
    hint = (
        f"npm install --prefix DIR {PI_PACKAGE}@{PI_VERSION} and pass --pi DIR/node_modules/.bin/pi"
    )
    try:
        done = subprocess.run(  # noqa: S603 - an argument list, no shell
            [pi_path, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            cwd=cwd,
            env=dict(env),
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"cannot run {pi_path} --version: {exc}", hint=hint) from None
    # pi prints its version on stderr when stdin is not a terminal.
    version = (done.stdout or done.stderr).decode("utf-8", errors="replace").strip()
    if done.returncode != 0 or not version:
        tail = done.stderr.decode("utf-8", errors="replace").strip()[-300:]
        raise UsageError(
            f"{pi_path} --version failed (exit status {done.returncode}): {tail}",
            hint="pi needs Node.js 20.6 or newer on PATH; " + hint,
        )
    if version != PI_VERSION:
        raise UsageError(
            f"{pi_path} is pi {version}; caseledger's pi adapter needs exactly {PI_VERSION}",
            hint=hint,
        )
    return version


def _models_json(given: Mapping[str, Any], provider: str, env_name: str | None) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    if "pi_models" in given:
        path = Path(base.str_option("pi_models", given["pi_models"])).expanduser()
        try:
            loaded = json.loads(path.read_text("utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot read --pi-models {path}: {exc.strerror}") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise AdapterError(f"--pi-models {path} is not valid JSON: {exc}") from None
        if not isinstance(loaded, dict) or not isinstance(loaded.get("providers", {}), dict):
            raise AdapterError(f"--pi-models {path} must be an object with a 'providers' object")
        doc = loaded
    if env_name is not None:
        providers = doc.setdefault("providers", {})
        entry = providers.setdefault(provider, {})
        if not isinstance(entry, dict):
            raise AdapterError(f"--pi-models: providers.{provider} must be an object")
        # pi reads a models.json apiKey that is a variable name from the environment.
        entry["apiKey"] = env_name
    return doc


def _auth_file(given: Mapping[str, Any], environ: Mapping[str, str]) -> Path:
    if "pi_auth_file" in given:
        path = Path(base.str_option("pi_auth_file", given["pi_auth_file"])).expanduser()
    else:
        path = Path(environ.get("HOME", "~")).expanduser() / ".pi" / "agent" / "auth.json"
    if not path.is_file():
        raise UsageError(
            f"--auth oauth needs pi's login file, and {path} is not a file",
            hint="log in once with `pi` then `/login`, or pass --pi-auth-file PATH",
        )
    return path.resolve()


def build(options: dict[str, Any], ctx: base.BuildContext) -> PiAdapter:
    """Build the pi adapter from CLI options (see docs/adapters.md, "pi")."""
    given = base.take_options("pi", options, _OPTIONS, required=("provider", "model"))
    provider = base.str_option("provider", given["provider"])
    model = base.str_option("model", given["model"])
    auth = given.get("auth", "api_key")
    if auth not in _AUTH_MODES:
        raise UsageError(f"--auth must be one of {', '.join(_AUTH_MODES)} for pi, got {auth!r}")
    env_name = given.get("api_key_env")
    if auth == "api_key" and env_name is None:
        raise UsageError("--auth api_key needs --api-key-env naming the variable holding the key")
    if auth == "oauth" and env_name is not None:
        raise UsageError("--api-key-env was given with --auth oauth; drop one of them")
    if auth == "oauth" and "pi_auth_file" not in given and "HOME" not in ctx.environ:
        raise UsageError("--auth oauth needs --pi-auth-file (HOME is not set)")
    if auth == "api_key" and "pi_auth_file" in given:
        raise UsageError("--pi-auth-file is for --auth oauth only")
    secret = env_secret(env_name, ctx.environ) if env_name is not None else None
    effort = given.get("reasoning_effort")
    if effort is not None and effort not in THINKING_LEVELS:
        raise UsageError(
            f"--reasoning-effort must be one of pi's thinking levels "
            f"({', '.join(THINKING_LEVELS)}), got {effort!r}"
        )
    if "max_tokens" in given and provider in NO_MAX_TOKENS:
        raise UsageError(f"--max-tokens is not accepted for {provider}: the provider sets it")
    params = base.generation_params(given, str)  # a thinking level, checked above
    timeout_s = base.timeout_option(given, DEFAULT_TIMEOUT_S)
    system_prompt = given.get("system_prompt", DEFAULT_SYSTEM_PROMPT)
    if not isinstance(system_prompt, str) or not system_prompt:
        raise UsageError("--system-prompt must be a non-empty string for pi")
    snapshot = base.price_snapshot_option(given, model)
    models_doc = _models_json(given, provider, env_name)
    auth_file = _auth_file(given, ctx.environ) if auth == "oauth" else None

    # pi sees the caller's environment minus caseledger's, pi's own and hidden paths.
    env = {
        k: v
        for k, v in child_environment(ctx.environ, ctx.hidden_paths).items()
        if not k.startswith("PI_")
    }
    pi_path = _pi_path(given, ctx.environ, env.get("PATH"))
    root = Path(tempfile.mkdtemp(prefix="caseledger-pi-"))
    try:
        agent = root / "agent"
        agent.mkdir()
        (agent / "settings.json").write_text(json.dumps(POLICY_SETTINGS, indent=2), "utf-8")
        if models_doc:
            (agent / "models.json").write_text(json.dumps(models_doc, indent=2), "utf-8")
        if auth_file is not None:
            (agent / "auth.json").symlink_to(auth_file)
        (root / "bridge.mjs").write_text(BRIDGE_JS, "utf-8")
        (root / "home").mkdir()
        env.update(
            {
                "PI_CODING_AGENT_DIR": str(agent),
                "PI_OFFLINE": "1",
                "PI_SKIP_VERSION_CHECK": "1",
                "PI_TELEMETRY": "0",
            }
        )
        if env_name is not None and secret is not None:
            env[env_name] = secret
        version = _pi_version(pi_path, {**env, "HOME": str(root / "home")}, root / "home")
        return PiAdapter(
            pi_path=pi_path,
            pi_version=version,
            provider=provider,
            model=model,
            auth=auth,
            secret=secret,
            env=env,
            agent_dir=agent,
            root=root,
            timeout_s=timeout_s,
            params=params,
            system_prompt=system_prompt,
            snapshot=snapshot,
        )
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
