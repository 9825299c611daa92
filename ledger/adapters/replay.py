"""The replay adapter: recorded outputs from a JSON Lines file, zero model calls.

One JSON object per line and per attempt::

    {"case": "r01", "attempt": 1, "output": "RAW TEXT", "usage": {"input": 900, "output": 120},
     "generation_ms": "1530.5", "model": "some-model-2025", "request_id": "req-1"}

or, to replay a provider failure, ``"error": {"kind": "timeout", "message": "..."}``
(with ``output`` optional). The whole file is checked when the adapter is
built; every error names its line. A recording's ``model`` is kept as
``recorded_model``, never as a resolved model id: nobody asked a provider.

``replay_format`` ``bird`` or ``spider`` (issue 16) reads a public benchmark's own
prediction file instead (``ledger.adapters.benchmark_files``): one prediction per
question, mapped to the bank's cases by their ``benchmark.index``, each answered
once (attempt 1) as plain SQL whose protocol verdict is ``imported``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import msgspec

from ledger import events
from ledger.adapters import base, benchmark_files, pricing
from ledger.adapters.base import Failure, Identity, MissingRecording, Reply, Request
from ledger.bounds import MAX_ATTEMPTS, MAX_DEPTH, decimal_problem, json_depth
from ledger.codec import sha256_hex
from ledger.errors import AdapterError, UsageError, broken

__all__ = [
    "ADAPTER_VERSION",
    "FORMATS",
    "PredictionReplay",
    "Recording",
    "ReplayAdapter",
    "build",
    "parse_replay",
]

ADAPTER_VERSION = "1"
HARNESS_KIND = "caseledger-replay"
WIRE_PROTOCOL = "replay"
_OPTIONS = ("replay_file", "replay_format", "model", "price_snapshot", "tools")
# --replay-format: this adapter's JSON Lines, or a benchmark's own prediction file.
FORMATS = ("jsonl", *benchmark_files.FORMATS)
# What a benchmark's prediction file can be replayed with (it has no usage to price).
_FORMAT_OPTIONS = ("replay_file", "replay_format", "allow_missing", "model", "tools")
# The tool state of the recorded calls, as declared by whoever recorded them
# (caseledger cannot see it): "unknown" unless --tools says otherwise.
_TOOLS = ("off", "on", "unknown")
_FIELDS = ("case", "attempt", "output", "usage", "generation_ms", "model", "request_id", "error")
_ERROR_FIELDS = ("kind", "message")
# Bounds of a recording (docs/adapters.md): integers fit in 64 bits, a generation
# time is under about 31 years.
_MAX_INT_DIGITS = 18
_MAX_GENERATION_MS = Decimal(10**12)


class Recording(msgspec.Struct, frozen=True):
    """One checked line of a replay file."""

    line: int
    case: str
    attempt: int
    output: str | None
    usage: events.Usage | None
    generation_us: int | None
    model: str | None
    request_id: str | None
    error_kind: str | None
    error_message: str | None


class _LineError(Exception):
    """A problem with one line; the caller adds the file name and line number."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _LineError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise _LineError(f"non-finite number {name}")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise _LineError(f"integer {text[:24]}... has more than {_MAX_INT_DIGITS} digits")
    return int(text)


def _string(obj: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = obj.get(key)
    if value is None:
        if key in obj:  # present but null: not the same mistake as a missing key
            what = (
                '; a failed call is recorded as \'error\': {"kind": ..., "message": ...}'
                if key == "output"
                else ""
            )
            raise _LineError(f"{key!r} must be a string, got null{what}")
        if required:
            raise _LineError(f"missing key {key!r}")
        return None
    if not isinstance(value, str):
        raise _LineError(f"{key!r} must be a string, got {type(value).__name__}")
    return value


def _generation_us(value: Any) -> int:
    # Integer milliseconds, or a decimal string with at most 3 decimals (exact us).
    if isinstance(value, int) and not isinstance(value, bool):
        number = Decimal(value)
    elif isinstance(value, str):
        try:
            number = Decimal(value)
        except InvalidOperation:
            raise _LineError(f"'generation_ms' is not a decimal number: {value!r:.60}") from None
    else:
        raise _LineError(
            f"'generation_ms' must be an integer or a decimal string, got {value!r:.60}"
        )
    why = decimal_problem(number, maximum=_MAX_GENERATION_MS)
    if why is not None:
        raise _LineError(f"'generation_ms' {why}, got {value!r:.60}")
    micros = number * 1000
    if not number.is_finite() or number < 0 or micros != micros.to_integral_value():
        raise _LineError(f"'generation_ms' must be >= 0 with at most 3 decimals, got {value!r:.60}")
    return int(micros)


def _recording(text: str, line: int) -> Recording:
    # The parser recurses once per level: the depth is checked on the text first.
    if json_depth(text) > MAX_DEPTH:
        raise _LineError(f"nested deeper than {MAX_DEPTH} levels")
    try:
        obj = json.loads(
            text,
            object_pairs_hook=_no_duplicate_keys,
            parse_float=Decimal,
            parse_int=_bounded_int,
            parse_constant=_reject_constant,
        )
    except json.JSONDecodeError as exc:
        raise _LineError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise _LineError("not a JSON object")
    for key in obj:
        if key not in _FIELDS:
            raise _LineError(f"unknown field {key!r} (allowed: {', '.join(_FIELDS)})")
    case = _string(obj, "case", required=True)
    if case is None:
        raise broken("a required field came back missing")
    if not case:
        raise _LineError("'case' is empty")
    attempt = obj.get("attempt")
    if "attempt" not in obj:
        raise _LineError("missing key 'attempt'")
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
        raise _LineError(f"'attempt' must be an integer >= 1, got {attempt!r:.60}")
    if attempt > MAX_ATTEMPTS:
        raise _LineError(f"'attempt' must be at most {MAX_ATTEMPTS}, got {attempt}")
    error_kind = error_message = None
    if "error" in obj:
        error = obj["error"]
        if not isinstance(error, dict):
            raise _LineError("'error' must be an object with 'kind' and 'message'")
        for key in error:
            if key not in _ERROR_FIELDS:
                raise _LineError(f"unknown field 'error.{key}' (allowed: kind, message)")
        for key in _ERROR_FIELDS:
            if not isinstance(error.get(key), str) or not error[key]:
                raise _LineError(f"'error.{key}' must be a non-empty string")
        if error["kind"] not in base.ADAPTER_FAILURE_KINDS:
            allowed = ", ".join(base.ADAPTER_FAILURE_KINDS)
            raise _LineError(f"unknown error kind {error['kind']!r} (allowed: {allowed})")
        error_kind, error_message = error["kind"], error["message"]
    output = _string(obj, "output", required=error_kind is None)
    usage = None
    if "usage" in obj:
        try:
            usage = base.usage_from_fields(obj["usage"])
        except ValueError as exc:
            raise _LineError(str(exc)) from None
    generation_us = _generation_us(obj["generation_ms"]) if "generation_ms" in obj else None
    return Recording(
        line=line,
        case=case,
        attempt=attempt,
        output=output,
        usage=usage,
        generation_us=generation_us,
        model=_string(obj, "model"),
        request_id=_string(obj, "request_id"),
        error_kind=error_kind,
        error_message=error_message,
    )


def parse_replay(data: bytes, name: str) -> dict[tuple[str, int], Recording]:
    """Check every line of a replay file; (case, attempt) -> Recording.

    Blank lines are skipped. Raises AdapterError naming the file and line.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AdapterError(f"replay file {name}: not UTF-8 (byte offset {exc.start})") from None
    recordings: dict[tuple[str, int], Recording] = {}
    # Split on "\n" only: an output may hold other line separators inside its string.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rec = _recording(line, number)
        except _LineError as exc:
            raise AdapterError(f"replay file {name} line {number}: {exc}") from None
        key = (rec.case, rec.attempt)
        if key in recordings:
            raise AdapterError(
                f"replay file {name} line {number}: duplicate recording for case "
                f"{rec.case!r} attempt {rec.attempt} (first on line {recordings[key].line})"
            )
        recordings[key] = rec
    if not recordings:
        raise AdapterError(f"replay file {name} holds no recordings")
    return recordings


class _FileReplay:
    """What both replays share: the identity of a file read (no model called) and its
    Invocation, which says what the replay did (read the file), nothing about the
    recorded calls."""

    def __init__(
        self,
        *,
        name: str,
        file_sha256: str,
        model: str | None,
        tools: str,
        wire_protocol: str,
        default_attempts: int,
        snapshot: pricing.PriceSnapshot | None = None,
    ) -> None:
        self._name = name
        self._tools = tools
        self._wire_protocol = wire_protocol
        self._client = base.client_version(ADAPTER_VERSION, "adapter-replay")
        self.identity = Identity(
            adapter_kind="replay",
            run_kind="model",
            harness_kind=HARNESS_KIND,
            requested_model=model,
            price_snapshot_digest=snapshot.digest if snapshot else None,
            replay_file_sha256=file_sha256,
            default_attempts=default_attempts,
        )

    def invocation(self, prompt_contract_digest: str, retries: int) -> events.Invocation:
        """A read of the file: wire protocol ``replay`` (JSON Lines), ``replay-bird`` or
        ``replay-spider`` (a benchmark's prediction file)."""
        return base.text_invocation(
            self.identity,
            tools=self._tools,
            wire_protocol=self._wire_protocol,
            client_version=self._client,
            prompt_contract_digest=prompt_contract_digest,
            retries=retries,
        )

    def close(self) -> None:
        """Nothing to release: the file was read whole at construction."""


class ReplayAdapter(_FileReplay):
    """Answers each planned attempt with its recorded line, or MissingRecording."""

    def __init__(
        self,
        *,
        recordings: dict[tuple[str, int], Recording],
        name: str,
        file_sha256: str,
        model: str | None,
        snapshot: pricing.PriceSnapshot | None,
        tools: str = "unknown",
    ) -> None:
        super().__init__(
            name=name,
            file_sha256=file_sha256,
            model=model,
            tools=tools,
            wire_protocol=WIRE_PROTOCOL,
            default_attempts=max(attempt for _, attempt in recordings),
            snapshot=snapshot,
        )
        self._recordings = recordings
        self._snapshot = snapshot

    def validate_cases(self, case_ids: Iterable[str]) -> None:
        """Refuse a file that names a case the bank does not have (first such line)."""
        known = set(case_ids)
        unknown = [r for r in self._recordings.values() if r.case not in known]
        if unknown:
            first = min(unknown, key=lambda r: r.line)
            raise AdapterError(
                f"replay file {self._name} line {first.line}: unknown case id {first.case!r} "
                "(not in the bank)",
                hint="check the bank and version given with --bank",
            )

    def call(self, request: Request) -> Reply | Failure | MissingRecording:
        """The recording of (case, attempt) as a Reply or Failure; MissingRecording if none."""
        rec = self._recordings.get((request.case_id, request.attempt))
        if rec is None:
            return MissingRecording(
                message=f"replay file {self._name} has no line for case "
                f"{request.case_id!r} attempt {request.attempt}"
            )
        if rec.error_kind is not None:
            return Failure(
                kind=rec.error_kind,
                message=f"replayed from line {rec.line}: {rec.error_message}",
                provider_request_id=rec.request_id,
                raw_output=rec.output,
                usage=rec.usage,
                generation_us=rec.generation_us,
            )
        if rec.output is None:
            raise broken("a recording with neither output nor failure")
        # A recording carries no bill, and a replay no auth mode: only an estimate.
        price = pricing.cost_of(
            rec.usage,
            self._snapshot,
            None,
            model=pricing.price_key(self._snapshot, self.identity.requested_model, rec.model),
            auth_mode=self.identity.auth_mode,
        )
        return Reply(
            raw_output=rec.output,
            provider_request_id=rec.request_id,
            resolved_model=None,
            recorded_model=rec.model,
            usage=rec.usage,
            cost=price.cost,
            estimated_cost=price.estimated_cost,
            generation_us=rec.generation_us,
        )


class PredictionReplay(_FileReplay):
    """A benchmark's prediction file (``--replay-format bird|spider``): attempt 1 of each
    case answered with its prediction, marked ``imported`` (parsed as plain SQL)."""

    def __init__(
        self,
        *,
        kind: str,
        answers: dict[str, str],
        missing: tuple[str, ...],
        name: str,
        file_sha256: str,
        model: str | None,
        tools: str = "unknown",
    ) -> None:
        super().__init__(
            name=name,
            file_sha256=file_sha256,
            model=model,
            tools=tools,
            wire_protocol=f"{WIRE_PROTOCOL}-{kind}",
            default_attempts=1,
        )
        self.kind = kind
        self.missing = missing
        self._answers = answers

    def validate_cases(self, case_ids: Iterable[str]) -> None:
        """Refuse a run on another bank than the one the file was mapped to."""
        other = [c for c in case_ids if c not in self._answers]
        if other:
            raise AdapterError(
                f"the {self.kind} prediction file {self._name} was mapped to another bank "
                f"(no case {other[0]!r})",
                hint="build the adapter with the bank the run is on",
            )

    def call(self, request: Request) -> Reply | Failure | MissingRecording:
        """The case's prediction as an imported Reply; attempt 2 and later have none."""
        sql = self._answers.get(request.case_id)
        if sql is None or request.attempt != 1:
            return MissingRecording(
                message=f"the {self.kind} prediction file {self._name} holds one prediction "
                f"per question: none for case {request.case_id!r} attempt {request.attempt}"
            )
        return Reply(
            raw_output=sql,
            provider_request_id=None,
            resolved_model=None,
            recorded_model=None,
            usage=None,
            cost=None,
            estimated_cost=None,
            generation_us=None,
            imported=True,
        )


def _read(given: dict[str, Any]) -> tuple[str, bytes]:
    name = str(given["replay_file"])
    try:
        return name, Path(name).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read replay file {name}: {exc.strerror}") from None


def _tools(given: dict[str, Any]) -> str:
    tools = given.get("tools", "unknown")
    if tools not in _TOOLS:
        raise UsageError(f"--tools must be one of {', '.join(_TOOLS)}, got {tools!r}")
    return str(tools)


def _build_format(kind: str, options: dict[str, Any], ctx: base.BuildContext) -> PredictionReplay:
    given = base.take_options("replay", options, _FORMAT_OPTIONS, required=("replay_file",))
    if ctx.bank is None:
        raise UsageError(f"--replay-format {kind} needs the bank of the run (build_adapter bank=)")
    name, data = _read(given)
    predictions = benchmark_files.parse_predictions(kind, data, name)
    allow_missing = given.get("allow_missing", False)
    if not isinstance(allow_missing, bool):
        raise UsageError(f"--allow-missing is a flag, got {allow_missing!r:.40}")
    answers, missing = benchmark_files.answers_for_bank(
        kind, predictions, ctx.bank, name, allow_missing=allow_missing
    )
    return PredictionReplay(
        kind=kind,
        answers=answers,
        missing=missing,
        name=name,
        file_sha256=sha256_hex(data),
        model=base.str_option("model", given["model"]) if "model" in given else None,
        tools=_tools(given),
    )


def build(options: dict[str, Any], ctx: base.BuildContext) -> ReplayAdapter | PredictionReplay:
    """Build the replay adapter from CLI options (see docs/adapters.md)."""
    kind = options.get("replay_format") or "jsonl"
    if kind not in FORMATS:
        raise UsageError(f"--replay-format must be one of {', '.join(FORMATS)}, got {kind!r:.40}")
    if kind != "jsonl":
        return _build_format(kind, options, ctx)
    if options.get("allow_missing"):
        raise UsageError(
            "--allow-missing goes with --replay-format bird|spider only",
            hint="a JSON Lines replay cancels an attempt it has no line for (missing_recording)",
        )
    options = {k: v for k, v in options.items() if k != "allow_missing"}
    given = base.take_options("replay", options, _OPTIONS, required=("replay_file",))
    name, data = _read(given)
    try:
        recordings = parse_replay(data, name)
    except AdapterError as exc:
        found = benchmark_files.sniff(data)
        if found is None:
            raise
        label = "BIRD" if found == "bird" else "Spider"
        raise UsageError(
            f"replay file {name} is a {label} prediction file, not caseledger's JSON Lines "
            f"replay (read as one: {str(exc).removeprefix(f'replay file {name} ')})",
            hint=f"add --replay-format {found}",
        ) from None
    model = base.str_option("model", given["model"]) if "model" in given else None
    snapshot = base.price_snapshot_option(given, model)
    tools = _tools(given)
    return ReplayAdapter(
        recordings=recordings,
        name=name,
        file_sha256=sha256_hex(data),
        model=model,
        snapshot=snapshot,
        tools=tools,
    )
