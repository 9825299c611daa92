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

Result caps (docs/running.md "Limits"), applied by the SQL worker while it
reads rows: a cell whose stored size (its JSON form, UTF-8) is over
``max_cell_bytes`` is cut to a string prefix (:func:`truncate_cell`; counted in
``SqlExecuted.cells_truncated``), and :class:`ResultBudget` stops reading once
the columns and rows read so far are over ``max_result_bytes``.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import uuid
from decimal import Decimal
from typing import Any

import msgspec

__all__ = [
    "DEFAULT_MAX_CELL_BYTES",
    "DEFAULT_MAX_RESULT_BYTES",
    "INTEGER_TYPES",
    "NON_FINITE",
    "ResultBudget",
    "encode_cell",
    "encode_row",
    "is_integer_type",
    "stored_size",
    "truncate_cell",
    "type_class",
]

DEFAULT_MAX_RESULT_BYTES = 512 * 1024
DEFAULT_MAX_CELL_BYTES = 64 * 1024
_JSON = msgspec.json.Encoder()

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


def stored_size(text: str) -> int:
    """UTF-8 bytes of ``text`` as the ledger stores it: a JSON string, escapes included,
    without its two quotes.

    >>> stored_size("abc"), stored_size('say "hi"'), stored_size("\\x00"), stored_size("é")
    (3, 10, 6, 2)
    """
    try:
        return len(_JSON.encode(text)) - 2
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form: count it as escaped
        return len(text.encode("utf-8", "surrogatepass")) * 6


def prefix_within(text: str, limit: int) -> str:
    """The longest prefix of ``text`` whose stored size is at most ``limit``.

    >>> prefix_within("abcdef", 4), prefix_within("a\\tbc", 3)
    ('abcd', 'a\\t')
    """
    # Each character takes 1 to 6 stored bytes: bisect.
    low, high = 0, min(len(text), limit)
    while low < high:
        mid = (low + high + 1) // 2
        if stored_size(text[:mid]) <= limit:
            low = mid
        else:
            high = mid - 1
    return text[:low]


def _cell_size(cell: Any) -> int:
    try:
        return len(_JSON.encode(cell))
    except UnicodeEncodeError:
        return stored_size(str(cell)) + 2


def truncate_cell(cell: Any, cap: int) -> tuple[Any, int, bool]:
    """(cell, its stored size, truncated?) for an encoded cell and a per-cell cap.

    A cell within ``cap`` stored bytes is kept. Any other becomes the longest
    prefix of its text (a string cell's own text, else its JSON) that fits:
    a string, so it can never equal a gold cell of another type, and a
    truncated result is never result_correct.

    >>> truncate_cell("x" * 10, 8)
    ('xxxxxx', 8, True)
    >>> truncate_cell([1, 2, 3], 6)
    ('[1,2', 6, True)
    >>> truncate_cell(12, 8)
    (12, 2, False)
    """
    if isinstance(cell, str):
        if len(cell) * 6 + 2 <= cap:  # fits whatever it escapes
            return cell, stored_size(cell) + 2, False
        if len(cell) + 2 <= cap:
            size = stored_size(cell) + 2
            if size <= cap:
                return cell, size, False
        text = cell
    else:
        size = _cell_size(cell)
        if size <= cap:
            return cell, size, False
        text = _JSON.encode(cell).decode("utf-8")
    cut = prefix_within(text, cap - 2)
    return cut, stored_size(cut) + 2, True


class ResultBudget:
    """Counts a result's stored bytes while the worker reads it.

    Columns count as their names and types, rows as their encoded cells after
    truncation (JSON commas and brackets included). ``over`` turns true once
    the total passes ``max_result_bytes``; the reader then stops.
    """

    def __init__(self, max_result_bytes: int, max_cell_bytes: int) -> None:
        self.max_result_bytes = max_result_bytes
        self.max_cell_bytes = max_cell_bytes
        self.used = 0
        self.cells_truncated = 0

    @property
    def over(self) -> bool:
        """True once more than ``max_result_bytes`` were counted."""
        return self.used > self.max_result_bytes

    def add_columns(self, columns: list[tuple[str, str]]) -> None:
        """Count the column names and type names."""
        for name, type_name in columns:
            self.used += stored_size(name) + stored_size(type_name) + 22  # {"name":..,"type":..},

    def add_row(self, row: tuple[Any, ...] | list[Any]) -> list[Any]:
        """Encode one DuckDB row, truncating cells over the cap, and count it."""
        out = []
        size = 1 + max(len(row), 1)  # brackets and commas
        for value in row:
            cell, cell_size, cut = truncate_cell(encode_cell(value), self.max_cell_bytes)
            self.cells_truncated += cut
            size += cell_size
            out.append(cell)
        self.used += size
        return out
