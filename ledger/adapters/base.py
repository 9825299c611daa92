"""The one small interface every model adapter implements, and build_adapter().

An adapter turns one prompt into a ``Reply`` (becomes ModelResponded), a
``Failure`` (becomes ProviderFailed) or, for replays only, a
``MissingRecording`` (the runner cancels the attempt). A model's or a
provider's failure is data, never an exception: ``call`` raises only for
faults of the harness itself. Configuration mistakes raise ``UsageError`` or
``AdapterError`` (exit 2) when the adapter is built, before anything is
appended to the ledger.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

import msgspec

from ledger import __version__ as _APP_VERSION
from ledger import events
from ledger.adapters.pricing import PriceSnapshot, check_priced, load_snapshot
from ledger.adapters.registry import BUILTIN_ADAPTERS, load_entry, lookup
from ledger.codec import canonical_json
from ledger.errors import AdapterError, LedgerError, UsageError, broken
from ledger.secrets import SecretSet

__all__ = [
    "ADAPTER_FAILURE_KINDS",
    "ADAPTER_KINDS",
    "RETRYABLE_KINDS",
    "RUNNER_OPTIONS",
    "Adapter",
    "Answer",
    "Failure",
    "Identity",
    "MissingRecording",
    "Reply",
    "Request",
    "RetryPolicy",
    "adapter_secrets",
    "build_adapter",
    "call_with_retries",
    "client_version",
    "retry_after_ms",
    "retryable",
    "storable",
    "usage_from_fields",
]

# kind -> module of each built-in adapter (ledger.adapters.registry; plug-ins are found
# through the entry-point group ``caseledger.adapters``).
ADAPTER_KINDS: dict[str, str] = BUILTIN_ADAPTERS

# Options of ``caseledger run`` that belong to the runner, not to an adapter.
# build_adapter ignores them so the CLI may pass its whole option dict.
RUNNER_OPTIONS = frozenset(
    {"attempts", "bank", "profile", "run_id", "concurrency", "retries", "resume", "adapter"}
)

# Every Failure.kind an adapter produces (a replay file may name only these). Not the
# report's failure categories (projections.quality.FAILURE_CATEGORIES): all of these
# but policy_refusal count as the category "provider".
ADAPTER_FAILURE_KINDS = (
    "timeout",
    "rate_limited",
    "server_error",
    "bad_request",
    "auth",
    "policy_refusal",
    "connection_error",
    "malformed_response",
    "command_failed",
    "tool_use",
)

# Option name -> the CLI flag a user typed, for error messages.
_FLAGS = {"timeout_s": "--timeout"}
# Largest value of a numeric option (docs/cli.md): a number nobody means is refused
# before it reaches a socket, a subprocess or an event.
_MAXIMA: dict[str, Decimal] = {"timeout_s": Decimal(86400), "temperature": Decimal(100)}
_INT_MAXIMA: dict[str, int] = {"max_tokens": 10_000_000}


class Request(msgspec.Struct, frozen=True):
    """One attempt to answer: the case, the attempt number (1..N) and the prompt verbatim."""

    case_id: str
    attempt: int
    prompt: str


class Reply(msgspec.Struct, frozen=True):
    """A usable answer; the runner copies these fields into ModelResponded.

    ``imported`` (not copied): the raw output is a public benchmark's prediction,
    plain SQL read from the benchmark's own file (``--replay-format bird|spider``),
    so it is parsed as protocol verdict ``imported``, not as query-plan-v1.
    """

    raw_output: str
    provider_request_id: str | None
    resolved_model: str | None
    recorded_model: str | None
    usage: events.Usage | None
    cost: Decimal | None
    estimated_cost: Decimal | None
    generation_us: int | None
    imported: bool = False


class Failure(msgspec.Struct, frozen=True):
    """No usable answer; the runner copies these fields into ProviderFailed.

    ``kind`` is one of ``ADAPTER_FAILURE_KINDS``.
    """

    kind: str
    message: str
    http_status: int | None = None
    provider_request_id: str | None = None
    raw_output: str | None = None
    usage: events.Usage | None = None
    generation_us: int | None = None
    # How long the server asked to wait before calling again (HTTP Retry-After), in ms;
    # UNSET (left out of ProviderFailed's bytes) when it did not say.
    retry_after_ms: int | msgspec.UnsetType = msgspec.UNSET


class MissingRecording(msgspec.Struct, frozen=True):
    """Replay only: no recording for this attempt (cancelled, reason missing_recording)."""

    message: str


class Identity(msgspec.Struct, frozen=True, kw_only=True):
    """What RunStarted records about the adapter (None: not known to the adapter)."""

    adapter_kind: str
    run_kind: str
    harness_kind: str
    requested_model: str | None = None
    provider: str | None = None
    auth_mode: str | None = None
    params: events.GenerationParams = msgspec.field(default_factory=events.GenerationParams)
    timeout_ms: int = 0
    bridge_version: str | None = None
    policy_version: str | None = None
    system_prompt_digest: str | None = None
    price_snapshot_digest: str | None = None
    replay_file_sha256: str | None = None
    default_attempts: int | None = None


@runtime_checkable
class Adapter(Protocol):
    """A model source. ``call`` is safe to use from several threads at once."""

    identity: Identity

    def invocation(self, prompt_contract_digest: str, retries: int) -> events.Invocation:
        """What is actually sent per call (the evidence fairness reads)."""
        ...

    def validate_cases(self, case_ids: Iterable[str]) -> None:
        """Refuse (AdapterError) input that names cases the bank does not have."""
        ...

    def call(self, request: Request) -> Reply | Failure | MissingRecording:
        """Answer one prompt. Never raises for a model's or provider's failure."""
        ...

    def close(self) -> None:
        """Release whatever the adapter holds (idempotent)."""
        ...


class BuildContext(msgspec.Struct, frozen=True):
    """What build_adapter hands a module besides the options.

    ``bank``: the published bank the run is on, when the caller gives it (a replay
    of a benchmark's prediction file maps its question indexes to the bank's cases).
    """

    cases: Mapping[str, str] | None
    environ: Mapping[str, str]
    hidden_paths: tuple[str, ...]
    bank: events.BankPublished | None = None


def build_adapter(
    kind: str,
    options: Mapping[str, Any],
    *,
    cases: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    hidden_paths: Sequence[str | Path] = (),
    bank: events.BankPublished | None = None,
) -> Adapter:
    """Build the adapter ``kind`` from the CLI's adapter options (by name).

    Options whose value is None are treated as not given, and the runner's own
    options (``RUNNER_OPTIONS``) are ignored. ``cases`` (case id -> reference
    SQL) may only be given to the reference adapter. ``environ`` is the
    environment the CLI read (the openai adapter takes its key from it, the
    command adapter gives the model a stripped copy of it); it defaults to
    ``os.environ``. ``hidden_paths`` (the ledger, bank folders) are removed
    from the command adapter's environment. ``bank`` is the published bank of the
    run (the replay adapter's ``--replay-format bird|spider`` needs it).

    ``kind`` is a built-in adapter or a plug-in of the entry-point group
    ``caseledger.adapters`` (``ledger.adapters.registry``). A plug-in that fails to
    import, raises something other than a LedgerError while it is built, or returns
    no adapter is an AdapterError naming it and its distribution.

    Raises:
        UsageError: unknown kind, an option the adapter does not take, a bad value.
        AdapterError: the adapter's input (replay file, price snapshot) is invalid,
            or a plug-in is broken (see above).
    """
    entry = lookup(kind)
    if cases is not None and kind != "reference":
        raise UsageError(f"the {kind} adapter must not receive reference SQL")
    if environ is None:
        import os

        environ = os.environ
    ctx = BuildContext(
        cases=cases,
        environ=environ,
        hidden_paths=tuple(str(p) for p in hidden_paths),
        bank=bank,
    )
    build: Callable[[dict[str, Any], BuildContext], Adapter] = load_entry(entry)
    if entry.builtin:
        return build(dict(options), ctx)
    where = f"adapter plug-in {kind!r} ({entry.value}, from {entry.origin()})"
    try:
        adapter = build(dict(options), ctx)
    except LedgerError:
        raise
    except Exception as exc:
        # A plug-in's bug, not caseledger's: named, no traceback (exit 2).
        detail = str(exc).splitlines()[0] if str(exc) else ""
        raise AdapterError(
            f"{where} failed to build: {type(exc).__name__}: {detail}",
            hint=f"report it to the maintainers of {entry.distribution or 'the plug-in'}",
        ) from None
    if not isinstance(adapter, Adapter) or not isinstance(
        getattr(adapter, "identity", None), Identity
    ):
        raise AdapterError(
            f"{where} returned {type(adapter).__name__}, not an adapter",
            hint="build(options, ctx) must return an object with identity (an Identity), "
            "invocation, validate_cases, call and close (docs/adapters.md)",
        )
    return adapter


def adapter_secrets(adapter: object) -> SecretSet:
    """The secrets an adapter was configured with (its ``secrets``; empty when it has none).

    The runner registers them with the store before the first call, so an event
    holding one is refused even if an adapter failed to scrub a text.
    """
    found = getattr(adapter, "secrets", None)
    return found if isinstance(found, SecretSet) else SecretSet()


# ---------------------------------------------------------------- option helpers


def text_invocation(
    identity: Identity,
    *,
    tools: str,
    wire_protocol: str,
    client_version: str,
    prompt_contract_digest: str,
    retries: int,
    parameters: Mapping[str, str] | None = None,
) -> events.Invocation:
    """The Invocation of a single-turn text call, the disclosed variables from ``identity``.

    Every adapter makes one call per attempt with a text response; what differs is
    the tool state, the wire protocol, the client and the parameters on the wire.
    """
    return events.Invocation(
        harness_kind=identity.harness_kind,
        response_mode="text",
        single_call=True,
        tools=tools,
        retries=retries,
        prompt_contract_digest=prompt_contract_digest,
        system_prompt_digest=identity.system_prompt_digest,
        wire_protocol=wire_protocol,
        client_version=client_version,
        bridge_version=identity.bridge_version,
        policy_version=identity.policy_version,
        provider=identity.provider,
        auth_mode=identity.auth_mode,
        model=identity.requested_model,
        parameters=dict(parameters or {}),
    )


def client_version(module_version: str, name: str) -> str:
    """``caseledger/<app> <name>/<module version>``, the Invocation's client_version."""
    return f"caseledger/{_APP_VERSION} {name}/{module_version}"


def flag(name: str) -> str:
    """The CLI flag of an option name (``api_key_env`` -> ``--api-key-env``)."""
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def take_options(
    kind: str, options: Mapping[str, Any], allowed: Iterable[str], required: Iterable[str] = ()
) -> dict[str, Any]:
    """The given options of an adapter; refuse any it does not take or a missing one."""
    allowed = tuple(allowed)
    given = {
        k: v for k, v in options.items() if v is not None and v != () and k not in RUNNER_OPTIONS
    }
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        takes = ", ".join(flag(a) for a in allowed) or "no options"
        raise UsageError(
            f"the {kind} adapter does not take {flag(unknown[0])} (option {unknown[0]!r})",
            hint=f"the {kind} adapter takes: {takes}",
        )
    for name in required:
        if name not in given:
            raise UsageError(f"the {kind} adapter needs {flag(name)}")
    return given


def decimal_option(name: str, value: Any, *, positive: bool = False) -> Decimal:
    """A finite, non-negative Decimal from an int, a decimal string, a Decimal or a float."""
    if isinstance(value, bool):
        raise UsageError(f"{flag(name)} must be a number, got {value!r}")
    try:
        # str() of a float is its shortest round-trip form: 0.2 -> Decimal("0.2").
        number = value if isinstance(value, Decimal) else Decimal(str(value).strip())
    except InvalidOperation:
        raise UsageError(f"{flag(name)} must be a number, got {value!r}") from None
    if not number.is_finite() or number < 0 or (positive and number == 0):
        need = "a positive" if positive else "a non-negative"
        raise UsageError(f"{flag(name)} must be {need} number, got {value!r:.60}")
    maximum = _MAXIMA.get(name)
    if maximum is not None and number > maximum:
        raise UsageError(f"{flag(name)} must be at most {maximum}, got {value!r:.60}")
    if name == "timeout_s" and number < Decimal("0.001"):
        raise UsageError(f"{flag(name)} must be at least 0.001 (1 ms), got {value!r:.60}")
    return number


def int_option(name: str, value: Any, *, minimum: int = 1) -> int:
    """An integer option (an int or its decimal string) of at least ``minimum``."""
    if isinstance(value, bool):
        raise UsageError(f"{flag(name)} must be an integer, got {value!r}")
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 18:
        value = int(value)
    if not isinstance(value, int) or value < minimum:
        raise UsageError(f"{flag(name)} must be an integer >= {minimum}, got {value!r:.60}")
    maximum = _INT_MAXIMA.get(name)
    if maximum is not None and value > maximum:
        raise UsageError(f"{flag(name)} must be at most {maximum}, got {value}")
    return value


def str_option(name: str, value: Any) -> str:
    """A non-empty string option."""
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{flag(name)} must be a non-empty string, got {value!r}")
    return value


def timeout_ms(value: Decimal) -> int:
    """Seconds (Decimal) to whole milliseconds, for Identity.timeout_ms."""
    return int(value * 1000)


def timeout_option(given: Mapping[str, Any], default: Decimal) -> Decimal:
    """The ``--timeout`` of an adapter's given options (positive seconds), else ``default``."""
    if "timeout_s" not in given:
        return default
    return decimal_option("timeout_s", given["timeout_s"], positive=True)


def generation_params(
    given: Mapping[str, Any], read_effort: Callable[[Any], str]
) -> events.GenerationParams:
    """The explicit generation parameters of an adapter's given options.

    ``--temperature`` and ``--max-tokens`` are read here, ``--reasoning-effort``
    by the adapter's ``read_effort`` (each adapter checks it against what its
    provider takes); in that order, so the first bad one is the one named. An
    option not given stays None: it is never sent, so the provider's default
    applies and the evidence says so.
    """
    return events.GenerationParams(
        temperature=(
            decimal_option("temperature", given["temperature"]) if "temperature" in given else None
        ),
        reasoning_effort=(
            read_effort(given["reasoning_effort"]) if "reasoning_effort" in given else None
        ),
        max_tokens=(
            int_option("max_tokens", given["max_tokens"]) if "max_tokens" in given else None
        ),
    )


def price_snapshot_option(given: Mapping[str, Any], model: str | None) -> PriceSnapshot | None:
    """The ``--price-snapshot`` of an adapter's given options, checked to price ``model``."""
    if "price_snapshot" not in given:
        return None
    snapshot = load_snapshot(given["price_snapshot"])
    check_priced(snapshot, model, str(given["price_snapshot"]))
    return snapshot


def explicit_parameters(params: events.GenerationParams) -> dict[str, Any]:
    """The generation parameters the user gave, by their wire name, in a fixed order.

    What an adapter puts into the provider request, and (as text) the
    Invocation's ``parameters``: a parameter that is None is left out.

    >>> explicit_parameters(events.GenerationParams(max_tokens=5, reasoning_effort="low"))
    {'max_tokens': 5, 'reasoning_effort': 'low'}
    """
    given: dict[str, Any] = {}
    if params.temperature is not None:
        given["temperature"] = params.temperature
    if params.max_tokens is not None:
        given["max_tokens"] = params.max_tokens
    if params.reasoning_effort is not None:
        given["reasoning_effort"] = params.reasoning_effort
    return given


def invocation_parameters(params: events.GenerationParams) -> dict[str, str]:
    """The Invocation's ``parameters``: each explicit generation parameter as text.

    >>> invocation_parameters(events.GenerationParams(temperature=Decimal("0.2"), max_tokens=9))
    {'temperature': '0.2', 'max_tokens': '9'}
    """
    return {k: str(v) for k, v in explicit_parameters(params).items()}


def has_decimal(value: Any) -> bool:
    """Whether a JSON value decoded with ``parse_float=Decimal`` holds a non-integer number."""
    if isinstance(value, Decimal):
        return True
    if isinstance(value, dict):
        return any(has_decimal(v) for v in value.values())
    if isinstance(value, list):
        return any(has_decimal(v) for v in value)
    return False


def usage_raw_json(
    usage: dict[str, Any], received: Callable[[], bytes | None], secrets: SecretSet | None
) -> tuple[dict[str, Any], str]:
    """A provider's usage object scrubbed of ``secrets``, and the text kept as ``raw_json``.

    ``raw_json`` is the canonical JSON of the object, except when it holds a
    non-integer number (a billed or catalog ``cost``): canonical JSON would turn
    that into a string, so the object's JSON text is kept exactly as received
    (``received()``, called only then; None when that text is not at hand). An
    object that held a secret is always kept as the canonical JSON of the
    scrubbed object: the text as received held the secret.
    """
    clean = secrets.scrub_json(usage) if secrets else usage
    if not isinstance(clean, dict):
        raise broken("scrubbing a JSON object gave something else")
    if clean == usage and has_decimal(usage):
        text = received()
        if text:
            return clean, text.decode("utf-8")
    return clean, canonical_json(clean).decode("utf-8")


USAGE_FIELDS = ("input", "cache_read", "cache_write", "output", "reasoning_output")


def usage_from_fields(obj: Any) -> events.Usage:
    """Usage from an object with the keys of ``USAGE_FIELDS`` (each a count or null).

    Raises:
        ValueError: not an object, an unknown key, or a value that is not a count.
    """
    if not isinstance(obj, dict):
        raise ValueError("usage must be a JSON object")
    for key, value in obj.items():
        if key not in USAGE_FIELDS:
            raise ValueError(
                f"usage has unknown field {key!r} (allowed: {', '.join(USAGE_FIELDS)})"
            )
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            raise ValueError(f"usage.{key} must be a non-negative integer or null, got {value!r}")
    return events.Usage(**{k: obj.get(k) for k in USAGE_FIELDS})


# ---------------------------------------------------------------- retries

#: Failure kinds worth another try: the provider or the machine may answer next time.
#: Never a refusal or a tool request (the model's answer), never ``auth`` or
#: ``bad_request`` (the same request fails the same way).
RETRYABLE_KINDS = frozenset(
    {
        "timeout",
        "rate_limited",
        "server_error",
        "connection_error",
        "malformed_response",
        "command_failed",
    }
)


def retryable(failure: Failure) -> bool:
    """Whether a failed call may be tried again: a kind of ``RETRYABLE_KINDS``, and
    never an HTTP 4xx other than 408 (timeout) and 429 (rate limited).

    >>> retryable(Failure(kind="rate_limited", message="", http_status=429))
    True
    >>> retryable(Failure(kind="bad_request", message="", http_status=400))
    False
    >>> retryable(Failure(kind="malformed_response", message="", http_status=404))
    False
    """
    status = failure.http_status
    if status is not None and 400 <= status < 500 and status not in (408, 429):
        return False
    return failure.kind in RETRYABLE_KINDS


def retry_after_ms(value: str | None, now: dt.datetime | None = None) -> int | None:
    """An HTTP ``Retry-After`` value (delay-seconds or an HTTP-date) in ms; None when
    absent or unreadable. A date in the past is 0.

    >>> retry_after_ms("2")
    2000
    >>> now = dt.datetime(2026, 12, 3, 10, 0, 0, tzinfo=dt.UTC)
    >>> retry_after_ms("Thu, 03 Dec 2026 10:00:07 GMT", now)
    7000
    >>> retry_after_ms("soon") is None
    True
    """
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return int(text) * 1000 if len(text) <= 9 else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    delta = when - (now or dt.datetime.now(dt.UTC))
    return max(0, int(delta.total_seconds() * 1000))


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed call is tried again (docs/running.md "Retries").

    At most ``retries`` more tries, only for a ``retryable`` failure. Before try
    n+1 the policy waits what the server asked for (``Retry-After``), else an
    exponential backoff with jitter: half of ``min(cap_s, base_s * 2**(n-1))`` plus
    a random share of the other half. A Retry-After longer than ``max_wait_s`` is
    not waited for: the failure is final. The jitter is never hashed or recorded
    as a rule, only the wait it gave (``CallTry.waited_us``).
    """

    retries: int = 0
    base_s: float = 1.0
    cap_s: float = 30.0
    max_wait_s: float = 120.0

    def wait_s(self, tries: int, failure: Failure, rng: random.Random) -> float | None:
        """Seconds to wait before the next try after ``tries`` tries ended in ``failure``;
        None: no further try.

        >>> p = RetryPolicy(retries=3, base_s=1.0, cap_s=3.0)
        >>> class Half(random.Random):
        ...     def uniform(self, a, b): return b
        >>> f = Failure(kind="server_error", message="", http_status=503)
        >>> [p.wait_s(n, f, Half()) for n in (1, 2, 3, 4)]
        [1.0, 2.0, 3.0, None]
        >>> p.wait_s(1, Failure(kind="rate_limited", message="", retry_after_ms=1500), Half())
        1.5
        """
        if tries > self.retries or not retryable(failure):
            return None
        if isinstance(failure.retry_after_ms, int):
            asked = failure.retry_after_ms / 1000
            return asked if asked <= self.max_wait_s else None
        step = min(self.cap_s, self.base_s * 2.0 ** (tries - 1))
        return step / 2 + rng.uniform(0, step / 2)


class Answer(NamedTuple):
    """What one attempt's call came to: the outcome of its last try, and every try
    when there was more than one. ``cut_short``: a stop (Ctrl-C, an early stop)
    ended the wait before a retry; ``outcome`` is then the last try's failure."""

    outcome: Reply | Failure | MissingRecording
    tries: tuple[events.CallTry, ...] = ()
    cut_short: bool = False


def _try_record(
    outcome: Reply | Failure | MissingRecording, at: str, took_ns: int, waited_ns: int
) -> events.CallTry:
    if not isinstance(outcome, Failure):
        return events.CallTry(
            outcome="ok", at=at, duration_us=took_ns // 1000, waited_us=waited_ns // 1000
        )
    return events.CallTry(
        outcome=outcome.kind,
        http_status=outcome.http_status,
        at=at,
        duration_us=took_ns // 1000,
        waited_us=waited_ns // 1000,
        retry_after_ms=outcome.retry_after_ms if isinstance(outcome.retry_after_ms, int) else None,
        message=outcome.message,
    )


def _surrogate(value: object) -> str | None:
    r"""Where the first lone surrogate of a text (or of the texts of a Struct) is, or None.

    JSON lets a string carry ``\ud800`` alone; Python decodes it to a str that has no
    UTF-8 form, so no event can hold it.

    >>> _surrogate("ok") is None
    True
    >>> _surrogate("a\ud800")
    '\\ud800 at character 1'
    """
    try:
        msgspec.json.encode(value)
    except UnicodeEncodeError as exc:
        return f"\\u{ord(str(exc.object)[exc.start]):04x} at character {exc.start}"
    return None


def storable(
    outcome: Reply | Failure | MissingRecording,
) -> Reply | Failure | MissingRecording:
    r"""``outcome``, or a ``malformed_response`` Failure when a text of it is not valid
    Unicode (a lone surrogate: no UTF-8 form, so no event could store it verbatim).

    The verdict the openai adapter gives a response body that is not UTF-8: the
    provider's answer could not be read as text. Every adapter's answer passes here
    (``call_with_retries``), so none ends a run as an internal error.

    >>> print(storable(Reply("x\ud800", None, None, None, None, None, None, 5)).message)
    the answer is not valid Unicode text: raw_output holds a lone surrogate (\ud800 at character 1)
    """
    if isinstance(outcome, MissingRecording):
        return outcome
    for name in outcome.__struct_fields__:
        value = getattr(outcome, name)
        where = _surrogate(value) if isinstance(value, str | msgspec.Struct) else None
        if where is not None:
            break
    else:
        return outcome
    request_id, usage = outcome.provider_request_id, outcome.usage
    return Failure(
        kind="malformed_response",
        message=f"the answer is not valid Unicode text: {name} holds a lone surrogate ({where})",
        http_status=outcome.http_status if isinstance(outcome, Failure) else None,
        provider_request_id=None if _surrogate(request_id) else request_id,
        usage=None if _surrogate(usage) else usage,
        generation_us=outcome.generation_us,
    )


def call_with_retries(
    adapter: Adapter,
    request: Request,
    policy: RetryPolicy,
    *,
    clock: Callable[[], str],
    stop: threading.Event | None = None,
    rng: random.Random | None = None,
) -> Answer:
    """Call ``adapter`` for ``request`` under ``policy``, recording every try.

    ``clock`` gives each try's ``at`` (the event clock of the run); ``stop``, once
    set, ends a wait between tries at once (``Answer.cut_short``). Exceptions of
    the adapter go on unchanged (a harness fault, never a model's).
    """
    stop = stop or threading.Event()
    tries: list[events.CallTry] = []
    waited_ns = 0
    while True:
        at = clock()
        start = time.monotonic_ns()
        outcome = storable(adapter.call(request))
        tries.append(_try_record(outcome, at, time.monotonic_ns() - start, waited_ns))
        recorded = tuple(tries) if len(tries) > 1 else ()
        if not isinstance(outcome, Failure):
            return Answer(outcome, recorded)
        # Made only for a failure (seeding one from the OS costs more than a model call
        # from a replay file, issue 34).
        rng = rng or random.Random()  # noqa: S311 (jitter, never a secret or a hash input)
        wait = policy.wait_s(len(tries), outcome, rng)
        if wait is None:
            return Answer(outcome, recorded)
        begin = time.monotonic_ns()
        if stop.wait(wait):
            return Answer(outcome, recorded, cut_short=True)
        waited_ns = time.monotonic_ns() - begin
