"""Determinism: what the guard's ``deterministic`` check refuses, per engine (issue 30).

An auditor re-executing the log (``verify --recompute``) must get the rows the
run recorded, so an answer may not read the clock, the machine's time zone or
locale, a random or sampling source, or the physical layout of the data. Two
kinds of construct are refused, both fail closed:

- **by name**, through the engine's function allow-list: a call denied under
  the category ``non_reproducible`` for a clock or a random source
  (:func:`clock_or_random`; the guard's ``function_allowlist`` check reports
  it under ``deterministic``). Delays (``sleep_ms``, ``pg_sleep``) are in the
  same category but decide nothing about the rows, so they stay where they are;
- **by shape** (:func:`findings`): a sample (``TABLESAMPLE``, ``USING SAMPLE``,
  every method, with or without a seed), the one-argument ``age(x)`` (DuckDB
  and PostgreSQL: the age from today), and per engine:

  * SQLite: a date and time function (``date``, ``time``, ``datetime``,
    ``julianday``, ``unixepoch``, ``strftime``) needs a time value (no value
    means now), and the time value and every modifier must be values that can
    never be ``'now'`` (or ``'localtime'``/``'utc'``) at run time: a literal, a
    number, a column of a bank table, an arithmetic result, another date and
    time function, a CTE/subquery column defined by one of these, or a value
    made from the bank's data by functions that only rearrange characters
    (``substr(t.d, 1, 10)``). Anything that can make text of its own is refused
    (``'n' || 'ow'``, ``substr('xnow', 2)``, ``char(110, 111, 119)``); so is a
    literal ``'now'``, ``'localtime'`` or ``'utc'`` passed to any function;
  * PostgreSQL: a string literal (in any of its forms, escapes decoded) holding
    one of the special date/time inputs ``now``, ``today``, ``tomorrow``,
    ``yesterday`` (any case and spacing, also inside a longer literal such as
    ``'today 10:00'``), since PostgreSQL reads it as the clock wherever the
    literal becomes a date or time (a cast, ``DATE 'today'``, a comparison with a
    date column); a cast or function-style cast to a date/time type of anything
    else than such safe values; a time zone (``AT TIME ZONE``, ``timezone()``)
    that is ``'localtime'`` or computed at run time; a cast to ``money`` and
    ``to_char`` with the ``TM`` prefix or a computed format (the server's
    locale; the reader sessions pin it too, ``postgres.SESSION_PINS``).
    ``'epoch'``, ``'infinity'`` and ``'allballs'`` are fixed values and stay
    allowed. The session's ``TimeZone`` (``UTC``) and ``DateStyle`` (``ISO``)
    are pinned by the bank's reader role, so casts to ``timestamptz`` and its
    text are reproducible.

DuckDB needs no literal rule: it reads ``'now'``/``'today'`` as no date at all
(a conversion error, the same on every run). Its approximate aggregates
(``approx_*``, ``reservoir_*``) are denied by name (``ledger.engines.functions``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from ledger.engines import engine_rules, functions
from ledger.harness import function_calls, sqlparse

__all__ = [
    "CHECK",
    "POSTGRES_SPECIAL",
    "SQLITE_TIME_FUNCTIONS",
    "Finding",
    "changing_value",
    "clock_or_random",
    "findings",
    "refusals",
    "string_text",
]

CHECK = "deterministic"
WHY = "results would differ on re-execution"

#: SQLite's date and time functions; ``strftime``'s time value is its second argument.
SQLITE_TIME_FUNCTIONS = frozenset({"date", "time", "datetime", "julianday", "unixepoch"})
_SQLITE_STRFTIME = "strftime"
#: SQLite arguments that read the clock (a time value) or the host's zone (a modifier).
_SQLITE_CLOCK_WORDS = frozenset({"now", "localtime", "utc"})
#: PostgreSQL's special date/time inputs that read the clock.
POSTGRES_SPECIAL = re.compile(r"\b(now|today|tomorrow|yesterday)\b", re.IGNORECASE)
_LOCALTIME = re.compile(r"localtime", re.IGNORECASE)
#: PostgreSQL functions named like a date/time type: a function-style cast.
_POSTGRES_CAST_FUNCTIONS = frozenset({"date", "time", "timetz", "timestamp", "timestamptz"})
#: PostgreSQL functions whose value is a date, time or number, never text.
_POSTGRES_TEMPORAL_RESULTS = frozenset(
    {
        *("date_trunc", "date_bin", "date_part", "extract", "make_date", "make_time"),
        *("make_timestamp", "make_timestamptz", "to_date", "to_timestamp", "age"),
    }
)
# Denials of the non_reproducible category that are a delay, not a changing value.
_DELAYS = ("stalls",)
# Operators whose value is a number (or NULL) on every engine: never a clock word.
_ARITHMETIC = (
    *(exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.BitwiseAnd),
    *(exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseNot, exp.BitwiseLeftShift),
    exp.BitwiseRightShift,
)
# Values that are never text: NULL, booleans, comparisons, intervals and arithmetic.
_FIXED = (
    *(exp.Null, exp.Boolean, exp.Predicate, exp.Connector, exp.Not, exp.Interval, exp.Var),
    *(exp.DataType, *_ARITHMETIC),
)
# Calls whose text is made of their arguments' characters (or digits): a value computed
# with them from the bank's data spells no word the data does not hold. A call outside this
# list may make letters of its own (char(110), printf('%c', 110), typeof(NULL),
# to_char(d, 'Day')), so it is no safe time value.
_REARRANGING = frozenset(
    {
        *("substr", "substring", "trim", "ltrim", "rtrim", "btrim", "replace", "lower"),
        *("upper", "left", "right", "lpad", "rpad", "concat", "concat_ws", "reverse"),
        *("split_part", "length", "instr", "strpos", "round", "abs", "floor", "ceil"),
        *("ceiling", "sum", "avg", "total", "count", "iif", "greatest", "least"),
    }
)
# Calls whose value is one of their arguments' values.
_PASS_THROUGH = frozenset(
    {
        *("min", "max", "coalesce", "ifnull", "nullif", "lag", "lead", "first_value"),
        *("last_value", "nth_value", "any_value", "first", "last"),
    }
)
_DEPTH = 24
_STUB_NAME = re.compile(r"cl_arg_(\d+)")
_CALL_TEXT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\((.*)\)", re.DOTALL)


class Finding(NamedTuple):
    """A refused construct: the node (for its position), what it is, why it is refused."""

    node: exp.Expr
    construct: str
    why: str

    def message(self, where: str = "") -> str:
        """The violation's message, ``where`` being `` (line L, col C)`` or ''."""
        return f"{self.construct}{where} {self.why}; {WHY}"


def clock_or_random(cat: functions.Catalog, name: str) -> str | None:
    """The reason (``"the clock"``) when ``name`` is denied as a clock or a random source.

    >>> clock_or_random(functions.catalog(), "now"), clock_or_random(functions.catalog(), "lower")
    ('the clock', None)
    >>> clock_or_random(functions.catalog(), "sleep_ms") is None  # a delay, not a value
    True
    """
    found = cat.denied.get(functions.fold(name))
    if found is None or found[0] != "non_reproducible" or found[1].startswith(_DELAYS):
        return None
    return found[1]


# sqlglot's own nodes for the clock and random sources: a call of one is refused as such
# even where the engine's catalog has no function of that name (DuckDB's
# `current_timestamp` keyword is `get_current_timestamp()` in its catalog).
_CLOCK_NODES: tuple[type[exp.Expr], ...] = (
    *(exp.CurrentDate, exp.CurrentTime, exp.CurrentTimestamp, exp.CurrentDatetime),
    *(exp.Localtime, exp.Localtimestamp),
)
_RANDOM_NODES: tuple[type[exp.Expr], ...] = (exp.Rand, exp.Uuid)


def changing_value(cat: functions.Catalog, node: exp.Func, name: str) -> str | None:
    """Why a call the allow-list refuses (``name``: the name it refused) is a changing
    value: :func:`clock_or_random` of the name, else sqlglot's class of the node."""
    found = clock_or_random(cat, name)
    if found is None and isinstance(node, _CLOCK_NODES):
        found = "the clock"
    if found is None and isinstance(node, _RANDOM_NODES):
        found = "a random source"
    return found


def _names(node: exp.Func, dialect: str) -> tuple[str, ...]:
    return function_calls.sqlglot_names(node, dialect)


def _arguments(node: exp.Func, dialect: str) -> list[exp.Expr] | None:
    """The call's arguments in the order the engine receives them, or None when sqlglot
    writes an argument of its own (then nothing can be said: fail closed)."""
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    stubs: list[exp.Expr] = []

    def stub(value: object) -> object:
        if isinstance(value, exp.Expr):
            stubs.append(value)
            return exp.column(f"cl_arg_{len(stubs) - 1}")
        if isinstance(value, list):
            return [stub(v) for v in value]
        return value

    try:
        text = type(node)(**{k: stub(v) for k, v in node.args.items()}).sql(dialect=dialect)
    except (SqlglotError, ValueError, TypeError, KeyError, AttributeError):
        return None
    match = _CALL_TEXT.fullmatch(text)
    if match is None:
        return None
    inner = match.group(2).strip()
    found = []
    for part in inner.split(",") if inner else []:
        name = _STUB_NAME.fullmatch(part.strip())
        if name is None:
            return None
        found.append(stubs[int(name.group(1))])
    return found


def _unwrap(node: exp.Expr, dialect: str) -> exp.Expr:
    """The value under parentheses and nodes the engine writes as their argument alone."""
    while True:
        if isinstance(node, exp.Paren) or (
            isinstance(node, exp.Func)
            and not isinstance(node, exp.Anonymous)
            and isinstance(node.this, exp.Expr)
            and function_calls.transparent(node, dialect)
        ):
            node = node.this
        else:
            return node


class _Values:
    """Decides whether a value could be a clock word at run time (fail closed).

    ``bad(text)`` says whether a literal's text reads the clock; the scopes of the
    tree (built on first use) resolve a column to a bank table or to the expression
    that defines it in a CTE or a subquery.
    """

    def __init__(self, tree: exp.Expr, dialect: str, tables: frozenset[str] | None) -> None:
        self.tree = tree
        self.dialect = dialect
        self.tables = tables
        self._scope_of: dict[int, Scope] | None = None

    def _scopes(self) -> dict[int, Scope]:
        if self._scope_of is None:
            found: dict[int, Scope] = {}
            try:
                for scope in traverse_scope(self.tree):
                    for column in scope.columns:
                        found[id(column)] = scope
            except (SqlglotError, RecursionError):
                found = {}  # no column resolves: every one is refused
            self._scope_of = found
        return self._scope_of

    def safe(self, node: exp.Expr, bad: Callable[[str], bool], depth: int = 0) -> bool:
        """True when ``node``'s value can never be a text ``bad`` refuses."""
        if depth > _DEPTH:
            return False
        node = _unwrap(node, self.dialect)
        texts = _readings(node)
        if texts:
            return not any(bad(t) for t in texts)
        if isinstance(node, exp.Literal | exp.HexString | exp.BitString):
            return not isinstance(node, exp.HexString)  # a number; x'6e6f77' is text 'now'
        if isinstance(node, _FIXED):
            return True
        if isinstance(node, exp.Cast | exp.TryCast):
            to = node.args.get("to")
            text = not isinstance(to, exp.DataType) or to.is_type(*exp.DataType.TEXT_TYPES)
            return self.safe(node.this, bad, depth + 1) if text else True
        if isinstance(node, exp.DPipe):
            if self.dialect == "sqlite" and _numeric_prefix(node):
                return True
            return self._derived(node, depth)
        if isinstance(node, exp.Column):
            return self._column(node, bad, depth)
        if isinstance(node, exp.Case):
            branches = [i.args.get("true") for i in node.args.get("ifs") or []]
            branches.append(node.args.get("default"))
            return all(self.safe(b, bad, depth + 1) for b in branches if b is not None)
        if isinstance(node, exp.If):
            branches = [node.args.get("true"), node.args.get("false")]
            return all(self.safe(b, bad, depth + 1) for b in branches if b is not None)
        if isinstance(node, exp.Window):
            return self.safe(node.this, bad, depth + 1)
        if isinstance(node, exp.Func):
            return self._call(node, bad, depth)
        return False

    def _call(self, node: exp.Func, bad: Callable[[str], bool], depth: int) -> bool:
        names = set(_names(node, self.dialect))
        if self.dialect == "sqlite" and names & SQLITE_TIME_FUNCTIONS:
            return True  # a date, a time or a number (or NULL); its own arguments are judged
        if self.dialect == "sqlite" and _SQLITE_STRFTIME in names:
            args = _arguments(node, self.dialect)  # the format decides the text
            return args is not None and len(args) > 0 and _literal(_unwrap(args[0], self.dialect))
        if self.dialect == "postgres" and names & _POSTGRES_TEMPORAL_RESULTS:
            return True
        if names & _PASS_THROUGH:
            args = _arguments(node, self.dialect)
            return args is not None and all(self.safe(a, bad, depth + 1) for a in args)
        if names & _REARRANGING:
            return self._derived(node, depth)
        return False

    def _derived(self, node: exp.Expr, depth: int) -> bool:
        """A value computed from the bank's data: every input a column, a number or a text
        with no letter in it, so no text it makes can spell a clock word that the data
        does not already hold (``substr(t.d, 1, 10)``, ``y || '-01-01'``; not
        ``substr('xnow', 2)``)."""
        return all(self.safe(child, _has_letters, depth + 1) for child in node.iter_expressions())

    def _column(self, column: exp.Column, bad: Callable[[str], bool], depth: int) -> bool:
        scope = self._scopes().get(id(column))
        if scope is None:
            return False
        name = functions.fold(column.name)
        current: Scope | None = scope
        if column.table:
            qualifier = column.table
            while current is not None:
                source = current.sources.get(qualifier)
                if source is not None:
                    return self._source(source, name, bad, depth + 1)
                current = current.parent
            return False
        # Unqualified: the guard does not know the tables' columns, so every source that
        # may hold the name must be safe, in this scope and, for a subquery (which may
        # name a column of the query around it), in the scopes around it too.
        current = scope
        seen = False
        while current is not None:
            if not self._aliases_safe(current, column, name, bad, depth):
                return False
            sources = list(current.sources.values())
            seen = seen or bool(sources)
            if not all(self._source(s, name, bad, depth + 1, maybe=True) for s in sources):
                return False
            current = current.parent if current.can_be_correlated else None
        return seen

    def _aliases_safe(
        self, scope: Scope, column: exp.Column, name: str, bad: Callable[[str], bool], depth: int
    ) -> bool:
        # SQLite and PostgreSQL let WHERE, GROUP BY and ORDER BY name an output column.
        select = scope.expression
        if not isinstance(select, exp.Select):
            return True
        for projection in select.expressions:
            if (
                isinstance(projection, exp.Alias)
                and functions.fold(projection.alias) == name
                and not sqlparse.inside(column, projection)
                and not self.safe(projection.this, bad, depth + 1)
            ):
                return False
        return True

    def _source(
        self,
        source: exp.Expr | Scope,
        name: str,
        bad: Callable[[str], bool],
        depth: int,
        *,
        maybe: bool = False,
    ) -> bool:
        """Whether column ``name`` of ``source`` is safe (``maybe``: the column may come
        from another source of the scope, so a source without it is no objection)."""
        if depth > _DEPTH:
            return False
        call = source.this if isinstance(source, exp.Table) else source
        if isinstance(call, exp.Func):  # generate_series(...), unnest(...): by their inputs
            return all(self.safe(arg, bad, depth + 1) for arg in call.iter_expressions())
        if isinstance(source, exp.Table):
            return self.tables is None or functions.fold(source.name) in self.tables
        if not isinstance(source, Scope):
            return False
        branches = _branches(source)
        if not branches:
            return False
        first = branches[0]
        position = None
        # `WITH r(x) AS (...)`, `(...) AS t(x)`: the column list names the columns.
        owner = source.expression.parent
        alias = owner.args.get("alias") if isinstance(owner, exp.CTE | exp.Subquery) else None
        listed = alias.columns if isinstance(alias, exp.TableAlias) else []
        names = [c.name for c in listed] or [p.alias_or_name for p in first.expression.expressions]
        for i, written in enumerate(names):
            if functions.fold(written) == name:
                position = i
                break
        if position is None and listed:
            return maybe
        if position is None:
            if any(isinstance(p, exp.Star) for p in first.expression.expressions):
                return all(self._source(s, name, bad, depth + 1, maybe=True) for s in _all(first))
            return maybe
        for branch in branches:
            projections = branch.expression.expressions
            if position >= len(projections):
                return False
            projection = projections[position]
            value = projection.this if isinstance(projection, exp.Alias) else projection
            if not self.safe(value, bad, depth + 1):
                return False
        return True


def _all(scope: Scope) -> list[exp.Expr | Scope]:
    return list(scope.sources.values())


def _branches(scope: Scope) -> list[Scope]:
    """The SELECT scopes that produce a source's rows (both sides of a set operation)."""
    if isinstance(scope.expression, exp.Select):
        return [scope]
    found: list[Scope] = []
    for inner in scope.set_operation_scopes:
        found.extend(_branches(inner))
    return found


def _numeric_prefix(node: exp.DPipe) -> bool:
    """A concatenation whose first piece is a literal starting with a sign or a digit:
    its text (``'+' || n || ' days'``) can be no clock word and no zone modifier."""
    first: exp.Expr = node
    while isinstance(first, exp.DPipe | exp.Paren):
        first = first.this
    return (
        isinstance(first, exp.Literal) and first.is_string and first.name[:1] in set("+-0123456789")
    )


def _literal(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) or string_text(node) is not None


_E_ESCAPE = re.compile(
    r"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.DOTALL
)
_E_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _e_char(match: re.Match[str]) -> str:
    octal, hexa, u4, u8, other = match.groups()
    if other is not None:
        return _E_SIMPLE.get(other, other)
    code = int(octal, 8) if octal else int(hexa or u4 or u8, 16)
    return chr(code) if code <= 0x10FFFF else "\ufffd"


def _readings(node: exp.Expr) -> tuple[str, ...]:
    """Every text a string node may stand for: sqlglot's and :func:`string_text`'s (sqlglot
    already decodes ``E'...'`` escapes, so decoding again can only find more)."""
    decoded = string_text(node)
    if decoded is None:
        return ()
    return (decoded,) if decoded == node.name else (node.name, decoded)


def string_text(node: exp.Expr) -> str | None:
    """The text of a string literal as the engine reads it (escapes of ``E'...'`` and
    ``U&'...'`` decoded), or None when ``node`` is not one.

    >>> import sqlglot
    >>> string_text(sqlglot.parse_one("SELECT E'\\\\156ow'", read="postgres").expressions[0])
    'now'
    """
    if isinstance(node, exp.Literal):
        return node.name if node.is_string else None
    if isinstance(node, exp.RawString | exp.National):
        return node.name
    if isinstance(node, exp.ByteString):  # E'...': C-style escapes
        return _E_ESCAPE.sub(_e_char, node.name)
    if isinstance(node, exp.UnicodeString):  # U&'...' [UESCAPE 'c']
        escape = node.args.get("escape")
        mark = re.escape(escape.name if isinstance(escape, exp.Expr) and escape.name else "\\")
        unicode = re.compile(mark + r"(?:\+([0-9A-Fa-f]{6})|([0-9A-Fa-f]{4})|(" + mark + r"))")

        def char(match: re.Match[str]) -> str:
            long, short, same = match.groups()
            code = int(long or short, 16) if same is None else ord(same[0])
            return chr(code) if code <= 0x10FFFF else "\ufffd"

        return unicode.sub(char, node.name)
    return None


def _has_letters(text: str) -> bool:
    return re.search(r"[A-Za-z]", text) is not None


def _sqlite_word(*words: str) -> Callable[[str], bool]:
    wanted = frozenset(words)
    return lambda text: text.strip().casefold() in wanted


def _postgres_special(text: str) -> bool:
    return POSTGRES_SPECIAL.search(text) is not None


# ------------------------------------------------------------------- the rules


def _sample(node: exp.Expr) -> Iterator[Finding]:
    if isinstance(node, exp.TableSample):
        method = node.args.get("method")
        shown = f" {method.name.upper()}" if isinstance(method, exp.Expr) and method.name else ""
        yield Finding(
            node, f"TABLESAMPLE / USING SAMPLE{shown}", "reads a random sample of the rows"
        )


def _one_argument_age(node: exp.Func, dialect: str) -> Iterator[Finding]:
    # sqlglot has no class for age(): the name as written (a class would name its key).
    name = node.name if isinstance(node, exp.Anonymous) else node.key
    if functions.fold(name) == "age":
        args = _arguments(node, dialect)
        # DuckDB's method-call syntax: `x.age()` is age(x).
        method = isinstance(node.parent, exp.Dot) and node.arg_key == "expression"
        if args is not None and len(args) + method == 1:
            yield Finding(node, "age() with one argument", "is the age from today (the clock)")


def _sqlite_call(node: exp.Func, values: _Values) -> Iterator[Finding]:
    for arg in node.iter_expressions():
        if (
            isinstance(arg, exp.Literal)
            and arg.is_string
            and arg.name.strip().casefold() in _SQLITE_CLOCK_WORDS
        ):
            yield Finding(
                arg, f"the argument '{arg.name}'", "reads the clock or the host's time zone"
            )
    names = set(_names(node, "sqlite"))
    if names & SQLITE_TIME_FUNCTIONS:
        shown, first = sorted(names & SQLITE_TIME_FUNCTIONS)[0], 0
    elif _SQLITE_STRFTIME in names:
        shown, first = _SQLITE_STRFTIME, 1
    else:
        return
    args = _arguments(node, "sqlite")
    if args is None:
        yield Finding(node, f"{shown}()", "has arguments the guard cannot read")
        return
    if len(args) <= first:
        yield Finding(node, f"{shown}() without a time value", "reads the clock")
        return
    # A literal is judged above (a clock word is refused there; any other text is fixed).
    if not _literal(_unwrap(args[first], "sqlite")) and not values.safe(
        args[first], _sqlite_word("now")
    ):
        yield Finding(
            node,
            f"{shown}() with a time value computed at run time",
            "may read the clock ('now'); give a literal or a column of a table",
        )
    for modifier in args[first + 1 :]:
        if not _literal(_unwrap(modifier, "sqlite")) and not values.safe(
            modifier, _sqlite_word("localtime", "utc")
        ):
            yield Finding(
                node,
                f"{shown}() with a modifier computed at run time",
                "may read the host's time zone ('localtime', 'utc'); give a literal",
            )
            break


def _postgres_node(node: exp.Expr, values: _Values) -> Iterator[Finding]:
    text = next((t for t in _readings(node) if _postgres_special(t)), None)
    if text is not None:
        word = POSTGRES_SPECIAL.search(text)
        special = word.group(1).lower() if word is not None else "now"
        yield Finding(
            node,
            f"the string '{text[:40]}'",
            f"holds PostgreSQL's special date/time input '{special}', which reads the clock "
            "wherever the string becomes a date or time",
        )
        return
    if isinstance(node, exp.Cast | exp.TryCast):
        to = node.args.get("to")
        if isinstance(to, exp.DataType) and to.is_type(exp.DataType.Type.MONEY):
            yield Finding(node, "a cast to money", "is written by the server's lc_monetary")
        elif (
            isinstance(to, exp.DataType)
            and to.is_type(*exp.DataType.TEMPORAL_TYPES)
            # a literal is judged on its own (above): a special input is refused there
            and not _literal(_unwrap(node.this, "postgres"))
            and not values.safe(node.this, _postgres_special)
        ):
            yield Finding(
                node,
                f"a cast to {to.sql(dialect='postgres')} of a value computed at run time",
                "may read the clock ('now', 'today'); cast a literal or a column of a table",
            )
    elif isinstance(node, exp.AtTimeZone):
        yield from _zone(node, node.args.get("zone"), values)
    elif isinstance(node, exp.Func):
        names = set(_names(node, "postgres"))
        if isinstance(node, exp.Date) or (
            isinstance(node, exp.Anonymous) and names & _POSTGRES_CAST_FUNCTIONS
        ):
            args = _arguments(node, "postgres")
            if args is None:
                yield Finding(node, f"{sorted(names)[0]}()", "has arguments the guard cannot read")
            elif (
                len(args) == 1
                and not _literal(_unwrap(args[0], "postgres"))
                and not values.safe(args[0], _postgres_special)
            ):
                yield Finding(
                    node,
                    f"{sorted(names)[0]}() of a value computed at run time",
                    "may read the clock ('now', 'today'); give a literal or a column of a table",
                )
        elif "timezone" in names:
            args = _arguments(node, "postgres")
            yield from _zone(node, args[0] if args else None, values)
        elif "to_char" in names:
            yield from _to_char(node)


def _to_char(node: exp.Func) -> Iterator[Finding]:
    """``to_char`` with the ``TM`` prefix writes month and day names in the server's
    ``lc_time``; a format computed at run time could ask for it."""
    args = _arguments(node, "postgres")
    fmt = _unwrap(args[1], "postgres") if args is not None and len(args) == 2 else None
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        yield Finding(node, "to_char() with a format computed at run time", _LOCALE)
        return
    text = fmt.name
    if not isinstance(node, exp.Anonymous):
        # sqlglot keeps the pattern in its own notation ('TMMonth' is '%B', 'Month' stays
        # 'Month'): PostgreSQL's text is what the node writes, its other arguments stubbed.
        stubbed = {k: v if v is fmt else exp.column("x") for k, v in node.args.items()}
        found = re.search(r"'((?:[^']|'')*)'\)$", type(node)(**stubbed).sql(dialect="postgres"))
        text = found.group(1) if found is not None else "TM"
    if "tm" in _unquoted(text).casefold():
        yield Finding(node, f"to_char() with the format '{text}'", _LOCALE)


_LOCALE = "may write names in the server's locale (TM follows lc_time)"


def _unquoted(pattern: str) -> str:
    """A to_char pattern without its double-quoted literal text."""
    return re.sub(r'"(?:[^"\\]|\\.)*"', "", pattern)


def _zone(node: exp.Expr, zone: exp.Expr | None, values: _Values) -> Iterator[Finding]:
    if isinstance(zone, exp.Literal) and zone.is_string:
        if _LOCALTIME.search(zone.name):
            yield Finding(node, f"the time zone '{zone.name}'", "is the server's own time zone")
    elif zone is None or not values.safe(zone, lambda text: bool(_LOCALTIME.search(text))):
        yield Finding(
            node,
            "a time zone computed at run time",
            "may be the server's own ('localtime'); give a literal or a column of a table",
        )


def findings(
    tree: exp.Expr,
    nodes: Iterable[exp.Expr],
    dialect: str,
    tables: frozenset[str] | None,
) -> Iterator[Finding]:
    """Every construct of ``tree`` (``nodes``: its nodes in walk order) that the rules of
    ``dialect``'s engine refuse by shape; ``tables``: the bank's tables (folded), or
    None when every table the tree names is one (reference SQL)."""
    values = _Values(tree, dialect, tables)
    for node in nodes:
        yield from _sample(node)
        if isinstance(node, exp.Func) and dialect in ("duckdb", "postgres"):
            yield from _one_argument_age(node, dialect)
        if dialect == "sqlite" and isinstance(node, exp.Func):
            yield from _sqlite_call(node, values)
        elif dialect == "postgres":
            yield from _postgres_node(node, values)


def _calls(nodes: Iterable[exp.Expr], dialect: str, cat: functions.Catalog) -> Iterator[Finding]:
    for node in nodes:
        if not isinstance(node, exp.Func):
            continue
        refused = function_calls.sqlglot_call_refusal(node, cat, dialect)
        if refused is not None:
            why = changing_value(cat, node, refused[0])
            if why is not None:
                yield Finding(node, f"function {refused[0]}()", f"depends on {why}")


def refusals(sql: str, engine: str) -> tuple[str, ...]:
    """One line per construct of ``sql`` that the ``deterministic`` rule refuses on
    ``engine`` (the reference SQL's check at publish and import); () when it is clean
    or does not parse (the gold's own execution reports that).

    >>> refusals("SELECT random()", "sqlite")
    ('function random() depends on a random number; results would differ on re-execution',)
    >>> refusals("SELECT count(*) FROM t", "duckdb")
    ()
    """
    dialect, cat = engine_rules(engine)
    try:
        statements = [s for s in sqlparse.parse(sql, dialect) if s is not None]
    except (SqlglotError, RecursionError):
        return ()
    found: list[str] = []
    try:
        for tree in statements:
            nodes = tuple(tree.walk())
            for finding in (*_calls(nodes, dialect, cat), *findings(tree, nodes, dialect, None)):
                line = finding.message()
                if line not in found:
                    found.append(line)
    except RecursionError:
        return ()
    return tuple(found)
