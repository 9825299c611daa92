"""Public benchmarks' own prediction files, read as they are (``run --replay-format``).

Two formats (issue 16), both keyed by the question's **index**: its position,
from 0, in the benchmark's question file, which ``caseledger bank import``
records per case as ``CaseSpec.benchmark.index``:

- ``bird``: one JSON object ``{"<index>": "<sql>\\t----- bird -----\\t<db_id>", ...}``
  (BIRD's ``predict_*.json``). A ``null`` value is an explicit "no prediction"
  (BIRD's evaluator scores it as wrong). A file covers every question of the
  question file, so most entries belong to other databases.
- ``spider``: one SQL per line in question order (Spider's predicted-SQL file):
  line n (from 1) is the prediction for index n - 1. As in Spider's
  ``evaluation.py`` a line is stripped and its SQL ends at the first tab. A blank
  line is an empty prediction for its index (Spider's script drops blank lines,
  which would shift every later prediction onto the wrong question).

Both parsers check the whole file and raise :class:`~ledger.errors.AdapterError`
naming the file and the key (bird) or line (spider). :func:`write_bird` and
:func:`write_spider` are their inverses (tests, and tools that produce files in
the benchmarks' formats). :func:`bank_id_for` is the one rule from a benchmark's
database id to a bank id (``caseledger bank import`` names its banks by it; a BIRD
prediction's database is checked against the bank by it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ledger.errors import AdapterError, UsageError
from ledger.events import BankPublished, BenchmarkCase, BenchmarkSource

__all__ = [
    "BIRD_SEPARATOR",
    "FORMATS",
    "Prediction",
    "answers_for_bank",
    "bank_id_for",
    "parse_bird",
    "parse_predictions",
    "parse_spider",
    "sniff",
    "write_bird",
    "write_spider",
]

#: The separator between SQL and database id in a BIRD prediction value.
BIRD_SEPARATOR = "\t----- bird -----\t"
#: The prediction-file formats ``--replay-format`` takes besides ``jsonl``.
FORMATS = ("bird", "spider")
# A key is an index written as BIRD writes it (str(int)): no sign, no leading zero.
_KEY = re.compile(r"0|[1-9][0-9]{0,8}")
_WS = " \t\n\r"
_LABELS = {"bird": "BIRD", "spider": "Spider"}
# What a database id has that a bank id may not (bank_id_for).
_NOT_IN_BANK_ID = re.compile(r"[^a-z0-9_-]+")


class Prediction(msgspec.Struct, frozen=True):
    """One question's prediction: ``sql`` as the file has it ('' when there is none).

    ``where`` names its place for messages (``key "239"``, ``line 240``);
    ``db_id`` is BIRD's database id (None for Spider, and for a BIRD ``null``).
    """

    index: int
    sql: str
    db_id: str | None
    where: str


def _error(kind: str, name: str, where: str, what: str, hint: str | None = None) -> AdapterError:
    return AdapterError(f"{kind} prediction file {name} {where}: {what}", hint=hint)


def _decode(data: bytes, kind: str, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AdapterError(
            f"{kind} prediction file {name}: not UTF-8 (byte offset {exc.start})"
        ) from None


class _Object(list[tuple[str, Any]]):
    """A JSON object as its (key, value) pairs, so duplicate keys stay visible."""


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    return _Object(pairs)


def _json_kind(value: Any) -> str:
    if isinstance(value, _Object):
        return "object"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "array" if isinstance(value, list) else "string"


def parse_bird(data: bytes, name: str) -> dict[int, Prediction]:
    """Every entry of a BIRD prediction file, by index.

    Raises:
        AdapterError: not UTF-8, not one JSON object, a duplicate key, a key that is
            not an index, a value that is neither a string holding the separator
            once (with a database id after it) nor null; the message names the key.
    """
    text = _decode(data, "BIRD", name)
    hint = 'BIRD writes {"<index>": "<sql>\\t----- bird -----\\t<db_id>", ...}'
    try:
        # Objects are kept as pair lists, so nothing nested can hide a duplicate key.
        doc = json.loads(text, object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        raise AdapterError(
            f"BIRD prediction file {name}: invalid JSON: {exc.msg} (line {exc.lineno}, "
            f"column {exc.colno})",
            hint=hint,
        ) from None
    except RecursionError:
        raise AdapterError(f"BIRD prediction file {name}: nested too deeply", hint=hint) from None
    except ValueError as exc:  # a number past Python's integer-digit limit
        raise AdapterError(f"BIRD prediction file {name}: invalid JSON: {exc}", hint=hint) from None
    if not isinstance(doc, _Object):
        got = _json_kind(doc)
        raise AdapterError(
            f"BIRD prediction file {name}: not one JSON object (got {got})", hint=hint
        )
    out: dict[int, Prediction] = {}
    for key, value in doc:
        where = f"key {json.dumps(key)}"
        if not _KEY.fullmatch(key):
            raise _error(
                "BIRD",
                name,
                where,
                "not a question index (an integer from 0, as BIRD writes it)",
                hint,
            )
        index = int(key)
        if index in out:
            raise _error("BIRD", name, where, "duplicate key", "keep one prediction per question")
        if value is None:
            out[index] = Prediction(index, "", None, where)
            continue
        if not isinstance(value, str):
            got = _json_kind(value)
            raise _error("BIRD", name, where, f"value must be a string or null, got {got}", hint)
        if value.count(BIRD_SEPARATOR) != 1:
            found = value.count(BIRD_SEPARATOR)
            raise _error(
                "BIRD",
                name,
                where,
                f"the value must hold the separator '\\t----- bird -----\\t' once, found {found}",
                hint,
            )
        sql, _, db_id = value.partition(BIRD_SEPARATOR)
        db_id = db_id.strip(_WS)
        if not db_id:
            raise _error("BIRD", name, where, "no database id after the separator", hint)
        out[index] = Prediction(index, sql, db_id, where)
    if not out:
        raise AdapterError(f"BIRD prediction file {name} holds no predictions", hint=hint)
    return out


def parse_spider(data: bytes, name: str) -> dict[int, Prediction]:
    """Every line of a Spider predicted-SQL file, by index (line n -> index n - 1).

    The last line break ends the last line (it opens no empty line); ``\\r\\n``
    counts as one break.

    Raises:
        AdapterError: not UTF-8, or no line at all.
    """
    text = _decode(data, "Spider", name)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise AdapterError(
            f"Spider prediction file {name} holds no predictions",
            hint="Spider's format is one SQL per line, in the question file's order",
        )
    out: dict[int, Prediction] = {}
    for number, line in enumerate(lines, start=1):
        sql = line.strip(_WS).split("\t", 1)[0]
        out[number - 1] = Prediction(number - 1, sql, None, f"line {number}")
    return out


_SQL_START = re.compile(r"\s*(select|with)\b", re.IGNORECASE)


def sniff(data: bytes) -> str | None:
    """``"bird"`` or ``"spider"`` when ``data`` reads as that benchmark's prediction file
    (for a file given without ``--replay-format``, issue 31); None otherwise.

    BIRD: the whole file parses as BIRD's format. Spider: no line is a JSON value and
    the first line that is not blank starts with SELECT or WITH.

    >>> sniff(write_bird({0: ("SELECT 1", "superhero")})), sniff(b"SELECT 1\\nselect 2\\n")
    ('bird', 'spider')
    >>> sniff(b'{"case": "c1", "output": "{}"}\\n') is None
    True
    """
    try:
        parse_bird(data, "")
    except AdapterError:
        pass
    else:
        return "bird"
    try:
        lines = [line for line in data.decode("utf-8").split("\n") if line.strip()]
    except UnicodeDecodeError:
        return None
    if not lines or not _SQL_START.match(lines[0]):
        return None
    return (
        "spider" if not any(line.lstrip().startswith(("{", "[", '"')) for line in lines) else None
    )


def parse_predictions(kind: str, data: bytes, name: str) -> dict[int, Prediction]:
    """``parse_bird`` or ``parse_spider`` by format name (one of :data:`FORMATS`)."""
    if kind == "bird":
        return parse_bird(data, name)
    if kind == "spider":
        return parse_spider(data, name)
    raise ValueError(f"unknown prediction format {kind!r}")


def write_bird(entries: Mapping[int, tuple[str, str] | None]) -> bytes:
    """A BIRD prediction file: index -> (sql, db_id), or None for an explicit null.

    >>> write_bird({0: ("SELECT 1", "superhero")})
    b'{"0": "SELECT 1\\\\t----- bird -----\\\\tsuperhero"}'
    """
    doc = {
        str(index): None if entry is None else entry[0] + BIRD_SEPARATOR + entry[1]
        for index, entry in sorted(entries.items())
    }
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


def write_spider(sqls: Sequence[str]) -> bytes:
    """A Spider predicted-SQL file: one SQL per line (none may hold a line break).

    >>> write_spider(["SELECT 1", "SELECT 2"])
    b'SELECT 1\\nSELECT 2\\n'
    """
    for sql in sqls:
        if "\n" in sql or "\r" in sql:
            raise ValueError("a Spider prediction is one line")
    return "".join(sql + "\n" for sql in sqls).encode("utf-8")


def _names(ids: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def answers_for_bank(
    kind: str,
    predictions: Mapping[int, Prediction],
    bank: BankPublished,
    name: str,
    *,
    allow_missing: bool = False,
) -> tuple[dict[str, str], tuple[str, ...]]:
    """Each case's prediction SQL, by the case's ``benchmark.index``; and the cases without one.

    Entries for indexes no case has are ignored (a benchmark's file covers every
    question, a bank one database). A BIRD entry of one of the bank's questions
    must name the bank's database: the bank id, compared case-insensitively (an
    imported bank's id is the database id in lower case, see
    :func:`bank_id_for`). A case without a prediction is refused,
    or with ``allow_missing`` answered with '' (scored as a wrong, empty answer, as
    BIRD's and Spider's evaluators count a missing prediction).

    Raises:
        UsageError: the bank has no benchmark indexes, or was imported from the other
            benchmark.
        AdapterError: a prediction names another database, or (without
            ``allow_missing``) a case has none; the message names the key or line.
    """
    label = _LABELS[kind]
    ref = f"{bank.bank_id}@{bank.version}"
    source = bank.benchmark
    if isinstance(source, BenchmarkSource) and source.name != kind:
        raise UsageError(
            f"bank {ref} was imported from {_LABELS.get(source.name, source.name)}, "
            f"not {label}: --replay-format {kind} does not fit it",
            hint=f"use --replay-format {source.name}",
        )
    indexes: dict[str, int] = {}
    without: list[str] = []
    for case in bank.cases:
        if isinstance(case.benchmark, BenchmarkCase):
            indexes[case.id] = case.benchmark.index
        else:
            without.append(case.id)
    if without:
        raise UsageError(
            f"bank {ref} has no benchmark index on case {_names(without)}: --replay-format "
            f"{kind} reads a prediction file keyed by the question's index in {label}'s "
            "question file, which only an imported bank records",
            hint=f"import the bank with `caseledger bank import {kind} ...` and publish it",
        )
    answers: dict[str, str] = {}
    missing: list[str] = []
    for case_id, index in indexes.items():
        found = predictions.get(index)
        if found is None:
            missing.append(case_id)
            answers[case_id] = ""
            continue
        db_id = found.db_id
        if db_id is not None and bank.bank_id.lower() not in (db_id.lower(), bank_id_for(db_id)):
            raise AdapterError(
                f"{label} prediction file {name} {found.where} (case {case_id}): the "
                f"prediction is for database {db_id!r}, but bank {ref} is database "
                f"{bank.bank_id!r}",
                hint=f"this file was written for another database or question file; give "
                f"the prediction file for the questions bank {bank.bank_id} was imported from",
            )
        answers[case_id] = found.sql
    if missing and not allow_missing:
        first = missing[0]
        where = (
            f"no line {indexes[first] + 1}" if kind == "spider" else f'no key "{indexes[first]}"'
        )
        others = f" (nor for {_names(missing[1:])})" if len(missing) > 1 else ""
        named = sorted({p.db_id for p in predictions.values() if p.db_id is not None})
        seen = (
            f"; its entries are for database {_names(named)}"
            if len(missing) == len(indexes) and named
            else ""
        )
        raise AdapterError(
            f"{label} prediction file {name} has {where} for case {first} (index "
            f"{indexes[first]}){others}{seen}",
            hint=f"give the prediction file for the question file bank {bank.bank_id} was "
            "imported from, or pass --allow-missing to count each missing prediction as "
            f"a wrong, empty answer (as {label}'s evaluator does)",
        )
    return answers, tuple(missing)


def bank_id_for(db_id: str) -> str:
    """A bank id from a benchmark database id (lower case; other characters become ``-``)."""
    text = _NOT_IN_BANK_ID.sub("-", db_id.lower()).strip("-_")
    return text or "imported"
