"""Bounds on every number and every nesting a user's option or file can carry.

A number nobody means (``--attempts 10**20``, ``max_rows: 10**30``) or a
document nested 100,000 deep is refused where it is read, with a one-line
error naming where it came from, before anything allocates or recurses on
it. docs/cli.md and docs/bank-format.md list these caps.
"""

from __future__ import annotations

from decimal import Decimal

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_CONCURRENCY",
    "MAX_DECIMAL_DIGITS",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_LOCK_WAIT_S",
    "MAX_RETRIES",
    "MAX_ROWS",
    "MAX_SEQ",
    "MAX_WEIGHT",
    "MAX_WORKERS",
    "decimal_problem",
    "json_depth",
]

#: Attempts per case (``run --attempts``; the largest attempt of a replay file).
MAX_ATTEMPTS = 1000
#: Model calls at once (``run --concurrency``).
MAX_CONCURRENCY = 64
#: Retries of a failed call (``run --retries``).
MAX_RETRIES = 10
#: Seconds a writer waits for the write lock (``CASELEDGER_LOCK_WAIT``): a day.
MAX_LOCK_WAIT_S = 86_400
#: Signature-checking processes (``verify --workers``).
MAX_WORKERS = 64
#: A case's ``max_rows``.
MAX_ROWS = 1_000_000
#: A case's ``weight``.
MAX_WEIGHT = Decimal(1_000_000)
#: Digits before, and places after, the point of a bank's weight and tolerances.
MAX_DECIMAL_DIGITS = 30
#: Digits of any integer literal in a bank file (Python refuses more than 4300 anyway).
MAX_INT_DIGITS = 100
#: Nesting of lists and mappings in a YAML or JSON file a user gives.
MAX_DEPTH = 64
#: Sequence numbers and tree sizes (SQLite's INTEGER is 64-bit).
MAX_SEQ = 2**63 - 1


def json_depth(text: str, limit: int = MAX_DEPTH) -> int:
    """The deepest ``[``/``{`` nesting of a JSON text, outside strings (linear, no parser).

    Stops counting once ``limit`` is passed, so the answer is at most ``limit + 1``:
    a parser (which recurses) is only called on a text this said is shallow enough.

    >>> json_depth('{"a": [1, {"b": "[[["}]}')
    3
    >>> json_depth("[" * 10_000, limit=64)
    65
    """
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif char in "]}":
            depth -= 1
    return deepest


def decimal_problem(value: Decimal, *, maximum: Decimal | None = None) -> str | None:
    """Why a finite Decimal is outside the bounds of a bank or recording (None when it is in).

    >>> decimal_problem(Decimal("1.5")) is None
    True
    >>> decimal_problem(Decimal("1e999999999"))
    'has more than 30 digits before or after the point'
    >>> decimal_problem(Decimal("2000000"), maximum=MAX_WEIGHT)
    'is larger than 1000000'
    """
    if not value.is_finite():
        return "is not a finite number"
    _sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):  # only NaN and infinities have a str exponent
        return "is not a finite number"
    if len(digits) + max(exponent, 0) > MAX_DECIMAL_DIGITS or exponent < -MAX_DECIMAL_DIGITS:
        return f"has more than {MAX_DECIMAL_DIGITS} digits before or after the point"
    if maximum is not None and value > maximum:
        return f"is larger than {maximum}"
    return None
