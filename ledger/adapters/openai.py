"""The openai adapter: any OpenAI-compatible Chat Completions endpoint over plain HTTP(S).

One POST ``{base_url}/chat/completions`` per attempt, with the prompt verbatim
as the only user message (plus an optional system prompt) and only the
generation parameters the user gave. Standard library only (http.client);
proxy environment variables are not used. The API key is read once, from the
environment variable the user names, and is never stored in evidence,
printed, logged or put in an error message: every text the provider sends
back (content, refusal, request id, model id, usage object, error body, the
reason of a connection or protocol error) is scrubbed of it in every form
(``ledger.secrets``) before it is cut, logged or returned.
"""

from __future__ import annotations

import json
import logging
import socket
import time
import urllib.parse
from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import msgspec

from ledger import events
from ledger.adapters import base, pricing
from ledger.adapters.base import Failure, Identity, Reply, Request
from ledger.codec import sha256_hex
from ledger.errors import AdapterError, UsageError
from ledger.secrets import SecretSet, env_secret

if TYPE_CHECKING:
    import http.client

__all__ = ["ADAPTER_VERSION", "OpenAIAdapter", "build", "status_kind"]

ADAPTER_VERSION = "1"
HARNESS_KIND = "caseledger-single-turn"
WIRE_PROTOCOL = "openai-chat-completions"
DEFAULT_TIMEOUT_S = Decimal(120)
MAX_BODY_BYTES = 32 * 1024 * 1024
EXCERPT = 300  # characters (bytes of an error body) kept of a provider's message
_OPTIONS = (
    "base_url",
    "model",
    "api_key_env",
    "auth",
    "timeout_s",
    "temperature",
    "reasoning_effort",
    "max_tokens",
    "price_snapshot",
    "system_prompt",
    "provider",
)
_AUTH_MODES = ("api_key", "oauth", "none")
_WIRE = msgspec.json.Encoder(decimal_format="number")
_log = logging.getLogger(__name__)


def status_kind(status: int) -> str:
    """The failure kind of a non-2xx HTTP status.

    >>> [status_kind(s) for s in (429, 503, 404, 401, 408)]
    ['rate_limited', 'server_error', 'bad_request', 'auth', 'timeout']
    >>> [status_kind(s) for s in (418, 302)]
    ['bad_request', 'server_error']
    """
    if status == 429:
        return "rate_limited"
    if status in (401, 403):
        return "auth"
    if status == 408:
        return "timeout"
    if 400 <= status < 500:
        return "bad_request"
    return "server_error"


class _Malformed(Exception):
    """The body of a 2xx response is not a Chat Completions response."""


def _reject_constant(name: str) -> Any:
    raise _Malformed(f"non-finite number {name} in response")


def _count(obj: Any, *keys: str) -> int | None:
    # A token count at obj[k1][k2]...; absent or not an integer -> None.
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj if isinstance(obj, int) and not isinstance(obj, bool) and obj >= 0 else None


class _UsageOnly(msgspec.Struct):
    # The usage value's bytes exactly as received (msgspec.Raw does not re-encode).
    usage: msgspec.Raw = msgspec.Raw(b"null")


def usage_from_response(
    body: bytes, raw_usage: Any, secrets: SecretSet | None = None
) -> events.Usage | None:
    """Map a Chat Completions ``usage`` object to Usage (input excludes cached tokens).

    ``raw_json`` is the canonical JSON of the usage object; when it holds a
    non-integer number (e.g. a billed ``cost``), canonical JSON would turn it
    into a string, so the object's JSON text is kept exactly as received.
    With ``secrets``, every string in the object is scrubbed first; an object
    that held a secret is kept as the canonical JSON of the scrubbed object.
    """
    if not isinstance(raw_usage, dict):
        return None

    def received() -> bytes | None:
        # The usage value's bytes in the body, only when a non-integer number needs them.
        return bytes(msgspec.json.decode(body, type=_UsageOnly).usage) if body else None

    raw_usage, raw_json = base.usage_raw_json(raw_usage, received, secrets)
    prompt = _count(raw_usage, "prompt_tokens")
    cached = _count(raw_usage, "prompt_tokens_details", "cached_tokens")
    cache_write = _count(raw_usage, "prompt_tokens_details", "cache_write_tokens")
    uncached = None
    if prompt is not None:
        # prompt_tokens already includes cached (and cache-write) tokens.
        uncached = max(prompt - (cached or 0) - (cache_write or 0), 0)
    return events.Usage(
        input=uncached,
        cache_read=cached,
        cache_write=cache_write,
        output=_count(raw_usage, "completion_tokens"),
        reasoning_output=_count(raw_usage, "completion_tokens_details", "reasoning_tokens"),
        raw_json=raw_json,
    )


class OpenAIAdapter:
    """Calls an OpenAI-compatible ``/chat/completions`` endpoint once per attempt."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        secret: str | None,
        auth: str,
        timeout_s: Decimal,
        params: events.GenerationParams,
        system_prompt: str | None,
        provider: str,
        snapshot: pricing.PriceSnapshot | None,
    ) -> None:
        split = urllib.parse.urlsplit(base_url)
        self._where = f"{split.scheme}://{split.netloc}"  # no path, no credentials asked
        self._https = split.scheme == "https"
        self._host = split.hostname or ""
        self._port = split.port
        self._path = split.path.rstrip("/") + "/chat/completions"
        self._model = model
        self._secret = secret
        self.secrets = SecretSet([secret])
        self._timeout_text = str(timeout_s)
        self._timeout_s = float(timeout_s)  # socket API only; never recorded
        self._system_prompt = system_prompt
        self._snapshot = snapshot
        self._auth = auth
        self._params = params
        self._wire_params = base.explicit_parameters(params)
        self._client = base.client_version(ADAPTER_VERSION, "adapter-openai")
        self.identity = Identity(
            adapter_kind="openai",
            run_kind="model",
            requested_model=model,
            provider=provider,
            auth_mode=auth,
            params=params,
            timeout_ms=base.timeout_ms(timeout_s),
            harness_kind=HARNESS_KIND,
            bridge_version=None,
            policy_version=None,
            system_prompt_digest=(
                sha256_hex(system_prompt.encode("utf-8")) if system_prompt is not None else None
            ),
            price_snapshot_digest=snapshot.digest if snapshot else None,
            replay_file_sha256=None,
            default_attempts=None,
        )

    def __repr__(self) -> str:
        return f"OpenAIAdapter(model={self._model!r}, provider={self.identity.provider!r})"

    def invocation(self, prompt_contract_digest: str, retries: int) -> events.Invocation:
        """The Invocation of every call: single turn, text, no tools, explicit params."""
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
        """Nothing to check: a live endpoint answers any case."""

    def close(self) -> None:
        """Nothing held between calls (one connection per call)."""

    def _body(self, prompt: str) -> bytes:
        messages = []
        if self._system_prompt is not None:
            messages.append({"role": "system", "content": self._system_prompt})
        messages.append({"role": "user", "content": prompt})
        return _WIRE.encode({"model": self._model, "messages": messages, **self._wire_params})

    def _scrub(self, text: str) -> str:
        # A provider may echo the key back anywhere; never pass it on.
        return self.secrets.scrub(text)

    def preflight(self) -> None:
        """Before a run prepares anything: the server's host and port accept a connection
        (issue 35). Nothing is sent. A server that cannot be reached at all is said at once
        (exit 2, nothing recorded) instead of after the run started and failed N calls.

        Raises:
            AdapterError: no connection within min(--timeout, 5 s).
        """
        port = self._port or (443 if self._https else 80)
        try:
            socket.create_connection(
                (self._host, port), timeout=min(float(self._timeout_s), 5.0)
            ).close()
        except OSError as exc:
            raise AdapterError(
                f"cannot reach the model server {self._where}: {exc.strerror or exc}; "
                "nothing was prepared or recorded",
                hint="start the server, or check --base-url",
            ) from None

    def call(self, request: Request) -> Reply | Failure:
        """POST the prompt; map the answer or the error (docs/adapters.md, "Failure kinds")."""
        body = self._body(request.prompt)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": self._client,
        }
        if self._secret is not None:
            headers["Authorization"] = "Bearer " + self._secret
        import http.client  # here: a run that calls no server never loads it (nor ssl)

        conn_cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        start = time.perf_counter_ns()
        deadline = time.monotonic() + self._timeout_s
        conn = conn_cls(self._host, self._port, timeout=self._timeout_s)
        try:
            conn.request("POST", self._path, body=body, headers=headers)
            response = conn.getresponse()
            request_id = self.secrets.scrub_optional(response.getheader("x-request-id"))
            retry_after = base.retry_after_ms(response.getheader("retry-after"))
            payload = _read_body(conn, response, deadline)
        except TimeoutError:
            return Failure(
                kind="timeout",
                message=f"no complete response within {self._timeout_text} s",
                generation_us=_elapsed_us(start),
            )
        except _Malformed as exc:
            return Failure(kind="malformed_response", message=self._scrub(str(exc)))
        except (http.client.RemoteDisconnected, ConnectionError) as exc:
            return Failure(kind="connection_error", message=self._scrub(f"connection: {exc}"))
        except http.client.HTTPException as exc:
            return Failure(
                kind="malformed_response", message=self._scrub(f"HTTP protocol error: {exc!r}")
            )
        except OSError as exc:
            return Failure(kind="connection_error", message=self._scrub(f"connection: {exc}"))
        finally:
            conn.close()
        generation_us = _elapsed_us(start)
        _log.debug(
            "POST %s status %s request id %s in %d us",
            self._path,
            response.status,
            request_id,
            generation_us,
        )
        if not 200 <= response.status < 300:
            # Scrubbed before the cut: a key straddling it leaves nothing behind.
            excerpt = self.secrets.excerpt_bytes(payload, EXCERPT)
            return Failure(
                kind=status_kind(response.status),
                message=f"HTTP {response.status}: {excerpt}",
                http_status=response.status,
                provider_request_id=request_id,
                generation_us=generation_us,
                retry_after_ms=msgspec.UNSET if retry_after is None else retry_after,
            )
        try:
            return self._answer(payload, request_id, generation_us, response.status)
        except _Malformed as exc:
            return Failure(
                kind="malformed_response",
                message=self._scrub(str(exc)),
                http_status=response.status,
                provider_request_id=request_id,
                generation_us=generation_us,
            )

    def _answer(
        self, payload: bytes, request_id: str | None, generation_us: int, status: int
    ) -> Reply | Failure:
        try:
            doc = json.loads(
                payload.decode("utf-8"), parse_float=Decimal, parse_constant=_reject_constant
            )
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _Malformed(f"response body is not JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise _Malformed("response body is not a JSON object")
        choices = doc.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _Malformed("response has no choices")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise _Malformed("choices[0] has no message object")
        content = message.get("content")
        refusal = message.get("refusal")
        if content is not None and not isinstance(content, str):
            raise _Malformed("choices[0].message.content is not a string")
        scrub = self.secrets.scrub_optional
        content, refusal = scrub(content), self.secrets.scrub_json(refusal)
        resolved = scrub(doc.get("model")) if isinstance(doc.get("model"), str) else None
        usage = usage_from_response(payload, doc.get("usage"), self.secrets)
        finish = choices[0].get("finish_reason")
        if refusal is not None or finish == "content_filter":
            why = f"model refused: {refusal}" if refusal is not None else "content filter"
            return Failure(
                kind="policy_refusal",
                message=self.secrets.excerpt(why, EXCERPT),
                http_status=status,
                provider_request_id=request_id,
                raw_output=content if content is not None else _text_or_none(refusal),
                usage=usage,
                generation_us=generation_us,
            )
        if content is None:
            raise _Malformed("choices[0].message.content is null")
        raw_usage = doc.get("usage")
        try:
            billed = pricing.bill(raw_usage.get("cost") if isinstance(raw_usage, dict) else None)
        except ValueError as exc:
            # A bill that is there but unusable is never replaced by an estimate.
            return Failure(
                kind="malformed_response",
                message=self.secrets.excerpt(f"usage.{exc}", EXCERPT),
                http_status=status,
                provider_request_id=request_id,
                raw_output=content,
                usage=usage,
                generation_us=generation_us,
            )
        price = pricing.cost_of(
            usage,
            self._snapshot,
            billed,
            model=pricing.price_key(self._snapshot, self._model, resolved),
            auth_mode=self._auth,
        )
        return Reply(
            raw_output=content,
            provider_request_id=request_id,
            resolved_model=resolved,
            recorded_model=None,
            usage=usage,
            cost=price.cost,
            estimated_cost=price.estimated_cost,
            generation_us=generation_us,
        )


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _elapsed_us(start_ns: int) -> int:
    return (time.perf_counter_ns() - start_ns) // 1000


def _read_body(
    conn: http.client.HTTPConnection, response: http.client.HTTPResponse, deadline: float
) -> bytes:
    # The socket timeout applies per read; re-arm it with what is left of the
    # total budget so a server that drips bytes cannot exceed the timeout.
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("deadline passed while reading the body")
        if conn.sock is not None:
            conn.sock.settimeout(remaining)
        chunk = response.read1(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _Malformed(f"response body larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)


def _base_url(value: Any) -> str:
    url = base.str_option("base_url", value).strip()
    split = urllib.parse.urlsplit(url)
    if split.scheme not in ("http", "https") or not split.hostname:
        raise UsageError(f"--base-url must be an http:// or https:// URL, got {url!r}")
    if split.username or split.password:
        raise UsageError("--base-url must not contain credentials; use --api-key-env")
    if split.query or split.fragment:
        raise UsageError(f"--base-url must not have a query or fragment, got {url!r}")
    try:
        split.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise UsageError(f"--base-url has an invalid port: {url!r}") from None
    return url


def build(options: dict[str, Any], ctx: base.BuildContext) -> OpenAIAdapter:
    """Build the openai adapter from CLI options (see docs/adapters.md)."""
    given = base.take_options("openai", options, _OPTIONS, required=("base_url", "model"))
    base_url = _base_url(given["base_url"])
    model = base.str_option("model", given["model"])
    env_name = given.get("api_key_env")
    auth = given.get("auth", "api_key" if env_name is not None else "none")
    if auth not in _AUTH_MODES:
        raise UsageError(f"--auth must be one of {', '.join(_AUTH_MODES)}, got {auth!r}")
    if auth == "none" and env_name is not None:
        raise UsageError("--api-key-env was given with --auth none; drop one of them")
    if auth != "none" and env_name is None:
        raise UsageError(f"--auth {auth} needs --api-key-env naming the variable holding the key")
    # Refused without echoing a value that is not a variable name (a key given by mistake).
    secret = env_secret(env_name, ctx.environ) if env_name is not None else None
    params = base.generation_params(given, lambda v: base.str_option("reasoning_effort", v))
    timeout_s = base.timeout_option(given, DEFAULT_TIMEOUT_S)
    snapshot = base.price_snapshot_option(given, model)
    system_prompt = given.get("system_prompt")
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise UsageError("--system-prompt must be a string")
    provider = given.get("provider") or urllib.parse.urlsplit(base_url).hostname or ""
    return OpenAIAdapter(
        base_url=base_url,
        model=model,
        secret=secret,
        auth=auth,
        timeout_s=timeout_s,
        params=params,
        system_prompt=system_prompt,
        provider=base.str_option("provider", provider),
        snapshot=snapshot,
    )
