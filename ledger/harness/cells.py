"""Typed result cells: the one JSON-safe encoding of a DuckDB value, and type classes.

A result (gold or a model's) travels in events as column (name, DuckDB type
name) pairs plus rows of *encoded cells*.  The encoding carries no floats, so it
can be hashed and signed:

====================  =====================================================
Python value          encoded cell
====================  =====================================================
None                  null
bool                  true / false
int                   int when |x| < 2**53, else its decimal string
Decimal               str(d), scale kept (``"12.40"``)
float                 shortest round-trip digits (``repr``), or ``"NaN"``,
                      ``"Infinity"``, ``"-Infinity"``
date                  ``"2026-09-30"``
datetime (naive)      ``"2026-09-30T16:00:00.000000"`` (read as UTC)
datetime (aware)      converted to UTC, ``"2026-09-30T16:00:00.000000Z"``
time                  ``"12:00:00.000000"`` (``+hh:mm`` kept when aware)
timedelta             ``"<days>d<seconds>s<microseconds>us"``
bytes                 ``"\\x"`` + lowercase hex
UUID                  its canonical string
list / tuple / dict   the same rules applied inside (dict keys as strings)
anything else         ``str(value)``
====================  =====================================================

Comparison never reads Python values straight from DuckDB: gold and actual
results both pass through this encoding first, so a rescore from recorded
events sees exactly what the live comparison saw.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import uuid
from decimal import Decimal
from typing import Any

__all__ = [
    "INTEGER_TYPES",
    "NON_FINITE",
    "encode_cell",
    "encode_row",
    "is_integer_type",
    "type_class",
]

_SAFE_INT = 2**53
NON_FINITE = frozenset({"NaN", "Infinity", "-Infinity"})

INTEGER_TYPES = frozenset(
    {
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "UHUGEINT",
        # aliases DuckDB may print
        "INT1",
        "INT2",
        "INT4",
        "INT8",
        "INT",
        "INT128",
        "UINT128",
    }
)
_FLOAT_TYPES = frozenset({"FLOAT", "DOUBLE", "REAL", "FLOAT4", "FLOAT8"})
_STRING_TYPES = frozenset({"VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR"})
_TIMESTAMP_TYPES = frozenset(
    {
        "TIMESTAMP",
        "TIMESTAMP WITH TIME ZONE",
        "TIMESTAMPTZ",
        "TIMESTAMP_S",
        "TIMESTAMP_MS",
        "TIMESTAMP_NS",
        "DATETIME",
    }
)
_TIME_TYPES = frozenset({"TIME", "TIME WITH TIME ZONE", "TIMETZ"})


def _base(type_name: str) -> str:
    return re.sub(r"\(.*\)$", "", type_name.strip().upper()).strip()


def is_integer_type(type_name: str) -> bool:
    """True for TINYINT..HUGEINT and the unsigned variants (not DECIMAL(p,0)).

    >>> is_integer_type("BIGINT"), is_integer_type("DECIMAL(18,0)")
    (True, False)
    """
    return _base(type_name) in INTEGER_TYPES


def type_class(type_name: str) -> str:
    """The comparison class of a DuckDB type name.

    One of numeric, string, boolean, date, timestamp, time, interval, blob,
    or ``other:<TYPE>`` (compared only with the same type name).

    >>> type_class("DECIMAL(12,2)"), type_class("TIMESTAMP WITH TIME ZONE"), type_class("DATE")
    ('numeric', 'timestamp', 'date')
    >>> type_class("INTEGER[]")
    'other:INTEGER[]'
    """
    base = _base(type_name)
    if type_name.strip().endswith("]"):
        return f"other:{type_name.strip().upper()}"
    if base in INTEGER_TYPES or base in _FLOAT_TYPES or base in ("DECIMAL", "NUMERIC"):
        return "numeric"
    if base in _STRING_TYPES or base.startswith("ENUM") or base.startswith("VARCHAR"):
        return "string"
    if base in ("BOOLEAN", "BOOL"):
        return "boolean"
    if base == "DATE":
        return "date"
    if base in _TIMESTAMP_TYPES:
        return "timestamp"
    if base in _TIME_TYPES:
        return "time"
    if base == "INTERVAL":
        return "interval"
    if base in ("BLOB", "BYTEA", "VARBINARY"):
        return "blob"
    return f"other:{type_name.strip().upper()}"


def encode_cell(value: Any) -> Any:
    """Encode one DuckDB value as a JSON-safe, float-free cell (table in the module doc).

    >>> encode_cell(Decimal("12.40")), encode_cell(0.1), encode_cell(float("inf"))
    ('12.40', '0.1', 'Infinity')
    >>> encode_cell(_dt.datetime(2026, 9, 30, 16, 0, tzinfo=_dt.timezone.utc))
    '2026-09-30T16:00:00.000000Z'
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -_SAFE_INT < value < _SAFE_INT else str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            utc = value.astimezone(_dt.UTC).replace(tzinfo=None)
            return utc.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, _dt.time):
        return value.isoformat(timespec="microseconds")
    if isinstance(value, _dt.timedelta):
        return f"{value.days}d{value.seconds}s{value.microseconds}us"
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple):
        return [encode_cell(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode_cell(v) for k, v in value.items()}
    return str(value)


def encode_row(row: tuple[Any, ...] | list[Any]) -> list[Any]:
    """Encode every cell of one row."""
    return [encode_cell(v) for v in row]
