"""A report's canonical JSON, out and in, and the plain values it is made of.

Part of the report build (``build.py``): :func:`to_json` gives a report's canonical
bytes (sorted keys, no floats), :func:`splice_caseruns` the same bytes with the
CaseRuns streamed in, ``from_json*`` and :func:`from_plain` read a report back into
the schema (a UsageError naming the JSON path otherwise); :func:`plain` turns a
struct into JSON-ready builtins. The folds build the schema's structs directly, and
msgspec does not check a struct's constraints when it is constructed (a ``Count``
>= 0, a ``Dec`` string): :func:`to_json` checks the bytes it gives against the
report's schema, the one place a report is encoded.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from ledger.codec import canonical_json
from ledger.errors import InternalError, UsageError
from projections.report import schema as S
from projections.report.schema import CONTRACT, CONTRACT_V2, CONTRACT_V3

__all__ = [
    "caserun_json",
    "from_json",
    "from_json_v2",
    "from_json_v3",
    "from_plain",
    "plain",
    "splice_caseruns",
    "to_json",
    "to_plain",
]

T = TypeVar("T")


def plain(value: Any) -> Any:
    return msgspec.to_builtins(value, order="sorted", builtin_types=())


def caserun_json(caserun: S.CaseRun | S.CompactCaseRun) -> bytes:
    """The canonical bytes of one CaseRun as it appears in a report's ``caseruns`` list."""
    return canonical_json(caserun)


_EMPTY_CASERUNS = b'"caseruns":[]'


_EMPTY_PROMPTS = b'"prompts":{}'


def splice_caseruns(
    skeleton: S.Report | S.ReportV2 | S.ReportV3,
    caseruns: Sequence[Iterable[bytes]],
    prompts: Iterable[bytes] = (),
) -> Iterator[bytes]:
    """The canonical bytes of ``skeleton`` (every section's ``caseruns`` empty) with
    section i's CaseRuns taken from ``caseruns[i]`` (chunks of canonical CaseRun bytes
    already joined by commas): the same bytes :func:`to_json` gives for the whole report.
    For a ``caseledger-report/2`` skeleton (its ``prompts`` table empty), ``prompts``
    gives the table's entries (``"sha256:...":"text"`` pieces in key order, joined by
    commas).

    Keys are sorted and strings escape every quote, so ``"caseruns":[]`` occurs in the
    skeleton's bytes exactly once per section, in section order, and nowhere else. The
    first ``"prompts":{}`` is the table's: only the checkpoint, the contract, the
    reading notes and the notice come before it, and none of them holds a map.
    """
    data = to_json(skeleton)
    if len(caseruns) != len(skeleton.sections):
        raise InternalError(ValueError("one CaseRun source per section"), where="splice")
    start = 0
    if isinstance(skeleton, S.ReportV2 | S.ReportV3):
        at = data.index(_EMPTY_PROMPTS) + len(_EMPTY_PROMPTS) - 1
        yield data[:at]
        yield from prompts
        start = at
    for chunks in caseruns:
        at = data.index(_EMPTY_CASERUNS, start)
        yield data[start : at + len(_EMPTY_CASERUNS) - 1]
        yield from chunks
        start = at + len(_EMPTY_CASERUNS) - 1
    if data.find(_EMPTY_CASERUNS, start) >= 0:
        raise InternalError(ValueError("more sections than CaseRun sources"), where="splice")
    yield data[start:]


def to_json(report: S.Report | S.ReportV2 | S.ReportV3) -> bytes:
    """Canonical JSON bytes of a report (sorted keys, no floats), with a final newline.

    The bytes are decoded against the report's schema before they are given (what the
    folds built is checked here, once).

    Raises:
        InternalError: the report does not match its schema (names the JSON path).
    """
    data = canonical_json(report)
    try:
        msgspec.json.decode(data, type=type(report))
    except msgspec.ValidationError as exc:
        raise InternalError(exc, where=f"a report does not match {type(report).__name__}") from None
    return data + b"\n"


def from_json(data: bytes | str) -> S.Report:
    """Decode report JSON into the schema (the inverse of :func:`to_json`).

    Raises:
        UsageError: the bytes are not a ``caseledger-report/1`` report; names the JSON path.
    """
    return _decode(data, S.Report, CONTRACT, "docs/report.schema.json")


def from_json_v2(data: bytes | str) -> S.ReportV2:
    """Decode ``caseledger-report/2`` JSON into its schema (the inverse of :func:`to_json`).

    Raises:
        UsageError: the bytes are not a ``caseledger-report/2`` report; names the JSON path.
    """
    return _decode(data, S.ReportV2, CONTRACT_V2, "docs/report-v2.schema.json")


def from_json_v3(data: bytes | str) -> S.ReportV3:
    """Decode ``caseledger-report/3`` JSON into its schema (the inverse of :func:`to_json`).

    Raises:
        UsageError: the bytes are not a ``caseledger-report/3`` report; names the JSON path.
    """
    return _decode(data, S.ReportV3, CONTRACT_V3, "docs/report-v3.schema.json")


def _decode(data: bytes | str, kind: type[T], contract: str, schema: str) -> T:
    try:
        return msgspec.json.decode(data, type=kind)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise UsageError(
            f"not a {contract} report: {exc}",
            hint=f"build one with `caseledger report --format json` ({schema})",
        ) from None


def to_plain(report: S.Report) -> dict[str, Any]:
    """The report as the JSON document it encodes to (dicts, lists, str, int, bool, None)."""
    plain: dict[str, Any] = msgspec.json.decode(to_json(report))
    return plain


def from_plain(document: Mapping[str, Any]) -> S.Report:
    """A report JSON document (as :func:`to_plain` gives) read back into the schema.

    Raises:
        UsageError: the document does not match ``caseledger-report/1``; names the path.
    """
    try:
        return msgspec.convert(document, S.Report)
    except msgspec.ValidationError as exc:
        raise UsageError(
            f"not a {CONTRACT} report: {exc}",
            hint="build one with `caseledger report --format json` (docs/report.schema.json)",
        ) from None
