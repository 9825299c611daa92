"""Output protocol query-plan-v1: parse a model's raw answer into a plan, SQL and summary.

The verdict is one of three (DESIGN.md, fine print "Output"):

- strict: the whole raw text, surrounding whitespace aside, is one JSON object
  with exactly the contract's fields and types, no duplicate key at any depth
  and no NaN/Infinity -> ``protocol_strict=True``;
- recovered: surrounding whitespace, then exactly one fence opened by a line
  ```` ```json ```` and closed by ```` ``` ```` at the very end, no other fence
  inside, and a strict body -> ``protocol_strict=False, recovered_from_fence=True``;
- anything else is an output_contract_error: ``error`` holds the reason and
  nothing is extracted (plan, sql, summary and assumptions are None).

A fourth verdict is never given to a model's text: ``imported`` (see
:func:`imported`), for a public benchmark's prediction read from its own file
(``run --replay-format bird|spider``). That text is plain SQL, not an answer to
this contract, so it is neither strict (0 protocol points) nor a contract error
(its SQL is guarded, executed and scored like any other).

An answer over the run's output cap (``ledger.harness.limits``) is not parsed:
its error is ``output too large: ...`` (see :func:`too_large`), which the
scorer reads as ``failure_detail`` ``output_too_large``.

The reasons, checked in this order: ``empty output``, ``several fences``,
``unclosed fence``, ``text before the fence``, ``text after the fence``,
``fence is not opened by a ```json line``, ``empty fence``, ``text before the
object``, ``text after the object``, ``NaN/Infinity is not JSON``, ``not JSON: ...``,
``duplicate key K``, ``not an object: got T``, ``missing field(s) X``,
``extra field(s) X``, ``wrong type for X: expected E, got T``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from ledger.errors import broken
from ledger.events import Plan

__all__ = [
    "ANSWER_FIELDS",
    "OUTPUT_CONTRACT",
    "OUTPUT_TOO_LARGE",
    "PLAN_FIELDS",
    "QUERY_PLAN_V1_SCHEMA",
    "Answer",
    "Parsed",
    "extracted_texts",
    "imported",
    "output_schema",
    "parse_output",
    "too_large",
]

OUTPUT_CONTRACT: Final = "query-plan-v1"


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """query-plan-v1: the one definition of the answer object (``plan`` is ``events.Plan``).

    The protocol's field checks (``ANSWER_FIELDS``, ``PLAN_FIELDS``) and the JSON
    Schema shown to the model (``QUERY_PLAN_V1_SCHEMA``) are both derived from
    this struct and ``events.Plan``; the descriptions are the schema's text.
    """

    plan: Plan
    sql: Annotated[str, msgspec.Meta(description="One read-only DuckDB query answering it.")]
    summary: Annotated[str, msgspec.Meta(description="One or two sentences on the approach.")]
    assumptions: Annotated[
        tuple[str, ...],
        msgspec.Meta(description="Assumptions made where the question is ambiguous."),
    ]


# Descriptions of the plan's fields in the schema shown to the model. Plan is an
# event part (its JSON Schema is in docs/report.schema.json), so its prompt text
# lives here; output_schema() refuses a Plan field without one, or one too many.
PLAN_DESCRIPTIONS: dict[str, str] = {
    "grain": "What one result row stands for.",
    "sources": "Tables the query reads.",
    "joins": "Each join with its keys and type.",
    "filters": "Each filter, with time boundaries stated exactly.",
    "metrics": "Each computed measure and its business definition.",
    "steps": "The query's steps in order.",
    "risks": "What could make the answer wrong (grain, NULLs, ties...).",
}


def _unwrap(tp: msgspec.inspect.Type) -> tuple[msgspec.inspect.Type, str | None]:
    """A field's type without its ``Annotated`` metadata, and its description (or None)."""
    if isinstance(tp, msgspec.inspect.Metadata):
        return tp.type, (tp.extra_json_schema or {}).get("description")
    return tp, None


def _kind(tp: msgspec.inspect.Type) -> str:
    """The check kind of a field type: "string", "strings" (array of strings) or "object"."""
    tp = _unwrap(tp)[0]
    if isinstance(tp, msgspec.inspect.StrType):
        return "string"
    if isinstance(tp, msgspec.inspect.VarTupleType) and isinstance(
        tp.item_type, msgspec.inspect.StrType
    ):
        return "strings"
    if isinstance(tp, msgspec.inspect.StructType) and tp.cls is Plan:
        return "object"
    raise TypeError(f"query-plan-v1 has no field kind for {tp!r}")


def _struct_fields(cls: type[msgspec.Struct]) -> tuple[msgspec.inspect.Field, ...]:
    info = msgspec.inspect.type_info(cls)
    if not isinstance(info, msgspec.inspect.StructType):
        raise broken(f"{cls.__name__} is not a msgspec struct")
    return info.fields


def _field_kinds(cls: type[msgspec.Struct]) -> tuple[tuple[str, str], ...]:
    return tuple((f.name, _kind(f.type)) for f in _struct_fields(cls))


# The field lists the parser checks, in struct order (which is also the order
# of "missing field(s)" and "extra field(s)" reasons).
PLAN_FIELDS: tuple[tuple[str, str], ...] = _field_kinds(Plan)
ANSWER_FIELDS: tuple[tuple[str, str], ...] = _field_kinds(Answer)


def _property(tp: msgspec.inspect.Type, description: str | None) -> dict[str, Any]:
    kind = _kind(tp)
    if kind == "object":
        return _object_schema(Plan, PLAN_DESCRIPTIONS)
    prop: dict[str, Any] = (
        {"type": "string"} if kind == "string" else {"type": "array", "items": {"type": "string"}}
    )
    if description is not None:
        prop["description"] = description
    return prop


def _object_schema(
    cls: type[msgspec.Struct], descriptions: dict[str, str] | None = None
) -> dict[str, Any]:
    fields = _struct_fields(cls)
    if descriptions is not None and set(descriptions) != {f.name for f in fields}:
        raise TypeError(f"descriptions of {cls.__name__} do not match its fields")
    props: dict[str, Any] = {}
    for f in fields:
        tp, description = _unwrap(f.type)
        if descriptions is not None:
            description = descriptions[f.name]
        props[f.name] = _property(tp, description)
    return {
        "type": "object",
        "additionalProperties": False,
        "required": [f.name for f in fields],
        "properties": props,
    }


def output_schema() -> dict[str, Any]:
    """The query-plan-v1 JSON Schema (draft 2020-12) derived from ``Answer`` and ``events.Plan``.

    >>> output_schema()["required"]
    ['plan', 'sql', 'summary', 'assumptions']
    """
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": OUTPUT_CONTRACT,
        "description": "Answer with exactly one JSON object of this shape and nothing else.",
        **_object_schema(Answer),
    }


QUERY_PLAN_V1_SCHEMA: Final[dict[str, Any]] = output_schema()

# The start of the error of an answer over the output cap.
OUTPUT_TOO_LARGE = "output too large"

FENCE = "```"
_OPENER = "```json"
# JSON's own whitespace (RFC 8259); other Unicode spaces are text.
_WS = " \t\n\r"
_DECODER = msgspec.json.Decoder()


class Parsed(msgspec.Struct, frozen=True, kw_only=True):
    """The parse verdict: exactly the OutputParsed event's verdict fields.

    Build the event with ``OutputParsed(..., **msgspec.structs.asdict(parsed))``.
    ``error`` set means output_contract_error, and then every other field is
    empty (False or None): a contract error extracts no SQL. ``imported`` is True
    only for a benchmark's prediction (:func:`imported`) and UNSET otherwise, so
    every other OutputParsed keeps its bytes.
    """

    protocol_strict: bool
    recovered_from_fence: bool
    plan: Plan | None
    sql: str | None
    summary: str | None
    assumptions: tuple[str, ...] | None
    error: str | None
    imported: bool | UnsetType = UNSET


class _ContractError(Exception):
    """A reason the output breaks the contract (internal; becomes ``Parsed.error``)."""


def _json_kind(value: Any) -> str:
    """The JSON type name of a decoded value."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _ContractError(f"duplicate key {key}")
        seen.add(key)
    return dict(pairs)


def _refuse_constant(token: str) -> Any:
    raise _ContractError("NaN/Infinity is not JSON")


def _diagnose(text: str, error: msgspec.DecodeError) -> str:
    """Why text that starts with ``{`` is not one JSON document."""
    if "trailing characters" in str(error):
        return "text after the object"
    # msgspec rejects NaN/Infinity as a bad character; the stdlib parser, which
    # accepts them, tells the two cases apart.
    try:
        json.loads(text, parse_constant=_refuse_constant)
    except _ContractError as reason:
        return str(reason)
    except (ValueError, RecursionError):
        pass
    return f"not JSON: {error}"


def _decode(text: str) -> Any:
    """Decode one JSON document with msgspec; then look for duplicate keys at any depth."""
    try:
        value = _DECODER.decode(text.encode("utf-8", "surrogatepass"))
    except msgspec.DecodeError as error:
        raise _ContractError(_diagnose(text, error)) from None
    except RecursionError:
        raise _ContractError("not JSON: nested too deeply") from None
    # msgspec keeps the last of duplicate keys silently, so a second pass
    # with the stdlib parser (syntax already known to be valid) finds them.
    try:
        json.loads(text, object_pairs_hook=_refuse_duplicates)
    except RecursionError:
        raise _ContractError("not JSON: nested too deeply") from None
    except ValueError as error:  # never seen: msgspec accepted the same text
        raise _ContractError(f"not JSON: {error}") from None
    return value


def _check_object(value: dict[str, Any], fields: tuple[tuple[str, str], ...], path: str) -> None:
    names = [name for name, _ in fields]
    missing = [f"{path}{n}" for n in names if n not in value]
    if missing:
        raise _ContractError(f"missing field{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    extra = [f"{path}{k}" for k in value if k not in names]
    if extra:
        raise _ContractError(f"extra field{'s' if len(extra) > 1 else ''} {', '.join(extra)}")
    for name, kind in fields:
        _check_value(value[name], kind, f"{path}{name}")


def _check_value(value: Any, kind: str, path: str) -> None:
    if kind == "object":
        if not isinstance(value, dict):
            raise _ContractError(f"wrong type for {path}: expected object, got {_json_kind(value)}")
        _check_object(value, PLAN_FIELDS, f"{path}.")
    elif kind == "string":
        if not isinstance(value, str):
            raise _ContractError(f"wrong type for {path}: expected string, got {_json_kind(value)}")
    elif not isinstance(value, list):
        raise _ContractError(f"wrong type for {path}: expected array, got {_json_kind(value)}")
    else:
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise _ContractError(
                    f"wrong type for {path}[{index}]: expected string, got {_json_kind(item)}"
                )


def _strict(text: str) -> dict[str, Any]:
    """The answer object of a text that must be exactly one contract object."""
    if not text.startswith("{"):
        try:
            value = _DECODER.decode(text.encode("utf-8", "surrogatepass"))
        except (msgspec.DecodeError, RecursionError):
            if "{" in text:
                raise _ContractError("text before the object") from None
            if text.startswith(("NaN", "Infinity", "-Infinity")):
                raise _ContractError("NaN/Infinity is not JSON") from None
            raise _ContractError("not JSON") from None
        raise _ContractError(f"not an object: got {_json_kind(value)}")
    answer: dict[str, Any] = _decode(text)
    _check_object(answer, ANSWER_FIELDS, "")
    return answer


def _unfence(text: str) -> str:
    """The body of the one ```json fence that makes up the whole text."""
    count = text.count(FENCE)
    if count > 2:
        raise _ContractError("several fences")
    if count == 1:
        raise _ContractError("unclosed fence")
    if not text.startswith(FENCE):
        raise _ContractError("text before the fence")
    if not text.endswith(FENCE):
        raise _ContractError("text after the fence")
    opener, newline, rest = text.partition("\n")
    if opener.rstrip(" \t\r") != _OPENER or not newline:
        raise _ContractError("fence is not opened by a ```json line")
    body = rest[: -len(FENCE)].strip(_WS)
    if not body:
        raise _ContractError("empty fence")
    return body


def _answer(value: dict[str, Any], *, strict: bool) -> Parsed:
    plan = msgspec.convert(value["plan"], type=Plan)
    return Parsed(
        protocol_strict=strict,
        recovered_from_fence=not strict,
        plan=plan,
        sql=value["sql"],
        summary=value["summary"],
        assumptions=tuple(value["assumptions"]),
        error=None,
    )


def _contract_error(reason: str) -> Parsed:
    return Parsed(
        protocol_strict=False,
        recovered_from_fence=False,
        plan=None,
        sql=None,
        summary=None,
        assumptions=None,
        error=reason,
    )


def parse_output(raw: str) -> Parsed:
    """Judge a raw model output against query-plan-v1.

    Args:
        raw: the model's output, verbatim.

    Returns:
        Parsed: strict, recovered from a fence, or a contract error with its reason.

    Example:
        >>> plan = {"grain": "one row per store", "sources": ["stores"], "joins": [],
        ...         "filters": [], "metrics": [], "steps": [], "risks": []}
        >>> answer = {"plan": plan, "sql": "SELECT 1", "summary": "s", "assumptions": []}
        >>> text = json.dumps(answer)
        >>> parse_output(text).protocol_strict
        True
        >>> parse_output("```json\\n" + text + "\\n```").recovered_from_fence
        True
        >>> parse_output("Sure! " + text).error
        'text before the object'
    """
    text = raw.strip(_WS)
    if not text:
        return _contract_error("empty output")
    try:
        if text.startswith("{"):
            return _answer(_strict(text), strict=True)
        if FENCE in text:
            return _answer(_strict(_unfence(text)), strict=False)
        return _answer(_strict(text), strict=True)
    except _ContractError as reason:
        return _contract_error(str(reason))


def imported(sql: str) -> Parsed:
    """The verdict on a public benchmark's prediction: its SQL as it is, protocol ``imported``.

    Neither strict (no protocol points, never ``format_ok``) nor a contract error:
    the SQL (surrounding whitespace aside) is guarded, executed and compared like
    any answer's. An empty prediction (BIRD and Spider count it as wrong) extracts
    nothing: its error is ``empty output``, as for any empty answer.

    >>> v = imported(" SELECT 1\\n")
    >>> (v.sql, v.protocol_strict, v.recovered_from_fence, v.error, v.imported)
    ('SELECT 1', False, False, None, True)
    >>> (imported("  ").sql, imported("  ").error)
    (None, 'empty output')
    """
    sql = sql.strip(_WS)
    if not sql:
        return msgspec.structs.replace(_contract_error("empty output"), imported=True)
    return Parsed(
        protocol_strict=False,
        recovered_from_fence=False,
        plan=None,
        sql=sql,
        summary=None,
        assumptions=None,
        error=None,
        imported=True,
    )


def too_large(detail: str, *, imported: bool = False) -> Parsed:
    """The verdict on an answer over the output cap: a contract error, nothing extracted.

    ``imported``: the answer is a benchmark's prediction (:func:`imported`), and the
    verdict says so.

    >>> too_large("2000 bytes, over the 1024-byte cap").error
    'output too large: 2000 bytes, over the 1024-byte cap'
    """
    verdict = _contract_error(f"{OUTPUT_TOO_LARGE}: {detail}")
    return msgspec.structs.replace(verdict, imported=True) if imported else verdict


def extracted_texts(parsed: Parsed) -> list[str]:
    """Every string a parse extracted (plan fields, SQL, summary, assumptions), to size them.

    >>> plan = Plan(grain="g", sources=("s",), joins=(), filters=(), metrics=(), steps=(),
    ...             risks=())
    >>> extracted_texts(Parsed(protocol_strict=True, recovered_from_fence=False, plan=plan,
    ...                        sql="SELECT 1", summary="sum", assumptions=("a",), error=None))
    ['g', 's', 'SELECT 1', 'sum', 'a']
    """
    texts: list[str] = []
    if parsed.plan is not None:
        plan = parsed.plan
        texts.append(plan.grain)
        for items in (plan.sources, plan.joins, plan.filters, plan.metrics, plan.steps, plan.risks):
            texts.extend(items)
    texts.extend(t for t in (parsed.sql, parsed.summary) if t is not None)
    texts.extend(parsed.assumptions or ())
    return texts
