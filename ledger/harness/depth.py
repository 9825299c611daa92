"""How deeply a SQL text nests, read from its tokens before any parser sees it.

The guard and the run's caps decide on these numbers, never on whether a parser
ran out of stack: the verdict on a deep text is the same whatever sqlglot build
or recursion limit is installed (issue 34). One linear scan, no parser:

- ``nesting``: the deepest nesting of brackets ``( [ {`` and ``CASE ... END``
  (``CAST(`` counts as its bracket);
- ``prefix``: the longest chain of prefix operators ``-``, ``+``, ``~`` and ``NOT``
  still waiting for their operand (``NOT (NOT (x))`` is a chain of 2; an operand,
  a name, a number or a literal, ends the chain);
- ``casts``: the longest chain of ``::type`` casts applied one after another
  (``x::int::text`` is 2).

String literals (``'...'``, ``E'...'`` with backslash escapes), quoted identifiers
(``"..."``), comments (``--``, ``/* */``) and dollar-quoted strings (``$$...$$``,
``$tag$...$tag$``) are skipped whole: nothing inside them counts.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from ledger.harness import sqlparse

__all__ = ["LIMITS", "Depth", "measure", "nesting_depth", "refusal"]


class Depth(NamedTuple):
    """The three depths of one SQL text (see the module doc)."""

    nesting: int
    prefix: int
    casts: int


_TOKENS = re.compile(
    r"""(?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))"""
    r"""|(?P<string>(?<![\w$])[eE]'(?:[^'\\]|\\.|'')*'?"""
    r"""|'(?:[^']|'')*'?"""
    r"""|"(?:[^"]|"")*"?"""
    r"""|\$(?P<tag>[A-Za-z_][A-Za-z0-9_]*)?\$.*?(?:\$(?P=tag)\$|\Z))"""
    r"""|(?P<open>[(\[{])|(?P<close>[)\]}])"""
    r"""|(?P<cast>::)"""
    r"""|(?P<word>[^\W\d][\w$]*)"""
    r"""|(?P<number>\d[\w.]*|\.\d[\w.]*)"""
    r"""|(?P<sign>[-+~])"""
    r"""|(?P<stop>[,;])"""
    r"""|(?P<op>[^\s\w'"$(){}\[\],;:\-+~]+|:)""",
    re.DOTALL,
)

# Words after which a ``-``, ``+``, ``~`` or ``NOT`` is a prefix operator (any other
# word is an operand). A word missing here costs the count at most one operator.
_EXPECT_OPERAND = frozenset(
    {
        *("select", "where", "and", "or", "not", "when", "then", "else", "case", "on"),
        *("by", "having", "is", "in", "like", "ilike", "glob", "between", "as", "return"),
        *("limit", "offset", "distinct", "all", "any", "some", "exists", "qualify", "using"),
        *("escape", "similar", "to", "interval", "from", "join", "union", "intersect"),
        *("except", "with", "values", "over", "partition", "filter", "within", "array"),
    }
)
# Words that go on a type name after ``::`` (``::timestamp with time zone``).
_TYPE_WORDS = frozenset({"with", "without", "time", "zone", "precision", "varying"})


def _scan(sql: str) -> Depth:
    """:func:`measure` without its cache (the scan itself)."""
    depth = brackets = cases = 0
    # Prefix operators waiting for their operand: those of the enclosing brackets
    # (``base``) and those of the current one; an operand ends only the current ones.
    prefix = chain = base = 0
    # Casts: the current chain, the deepest one inside the current bracket, and the
    # depth of the operand just read (a bracket whose inside is cast, cast again).
    casts = cast_chain = inner = operand = 0
    typed = -1  # words read of the type name of the last ``::`` (-1: none being read)
    stack: list[tuple[int, int] | None] = []  # None: a type's own bracket, decimal(9, 2)
    expect_operand = True
    for match in _TOKENS.finditer(sql):
        kind = match.lastgroup
        if kind == "comment":
            continue
        if kind == "open":
            brackets += 1
            depth = max(depth, brackets + cases)
            if typed > 0 or (stack and stack[-1] is None):
                stack.append(None)
                continue
            stack.append((base, inner))
            base, inner = chain, 0
            cast_chain = operand = 0
            typed, expect_operand = -1, True
            continue
        if stack and stack[-1] is None:  # inside a type's brackets nothing else counts
            if kind == "close":
                stack.pop()
                brackets -= 1
            continue
        if kind == "close":
            group = 0
            if stack:
                group = inner
                base, inner = stack.pop() or (0, 0)
                brackets -= 1
            chain, operand, cast_chain = base, group, 0
            typed, expect_operand = -1, False
            continue
        if kind == "cast":
            cast_chain = (cast_chain or operand) + 1
            inner = max(inner, cast_chain)
            casts = max(casts, cast_chain)
            typed, expect_operand = 0, False
            continue
        word = match.group().lower() if kind == "word" else ""
        if (typed == 0 and word) or (typed > 0 and word in _TYPE_WORDS):
            typed += 1  # the type's name: the chain of casts goes on
            continue
        typed, cast_chain, operand = -1, 0, 0
        if kind == "sign" or word == "not":
            if expect_operand:
                chain += 1
                prefix = max(prefix, chain)
            expect_operand = True
        elif kind in ("op", "stop") or word in _EXPECT_OPERAND:
            expect_operand = True
        else:  # an operand: a name, a number, a literal
            chain, expect_operand = base, False
        if word == "case":
            cases += 1
            depth = max(depth, brackets + cases)
        elif word == "end":  # a stray END is harmless here: the guard judges it
            cases = max(0, cases - 1)
    return Depth(depth, prefix, casts)


_scan_cached = functools.lru_cache(maxsize=256)(_scan)


def measure(sql: str) -> Depth:
    """The nesting, prefix-operator and cast depths of ``sql`` (linear; no parser).

    A run's caps and the guard both ask: a text of up to 64 KiB is scanned once.

    >>> measure("SELECT ((1))"), measure("SELECT CASE WHEN (a) THEN 1 END")
    (Depth(nesting=2, prefix=0, casts=0), Depth(nesting=2, prefix=0, casts=0))
    >>> measure("SELECT - - 1, NOT (NOT x) FROM t WHERE a::int::text = '1'")
    Depth(nesting=1, prefix=2, casts=2)
    >>> measure("SELECT NOT (a AND NOT (b)), (x::decimal(9, 2) + 1)::text")
    Depth(nesting=2, prefix=2, casts=2)
    >>> measure("SELECT '((((' AS s, \\"NOT NOT\\" -- - - (((( ")
    Depth(nesting=0, prefix=0, casts=0)
    """
    return _scan_cached(sql) if len(sql) <= sqlparse.CACHED_CHARS else _scan(sql)


def nesting_depth(sql: str) -> int:
    """The deepest nesting of brackets ``( [ {`` and ``CASE ... END`` in ``sql``, outside
    strings, quoted identifiers and comments (:func:`measure`'s ``nesting``).

    >>> nesting_depth("SELECT ((1))"), nesting_depth("SELECT '((((' AS s -- ((((")
    (2, 0)
    """
    return measure(sql).nesting


#: The guard's limits (issue 34), one per depth. The guard corpora and every built-in
#: bank's SQL reach 4, 1 and 1; sqlglot (pure Python, recursion limit 1000) first fails
#: near 50 brackets, 100 ``NOT`` and 330 ``-`` or ``::``, and sooner when they mix
#: (``NOT (`` 30 deep). At these limits the deepest mix known, ``NOT (`` 20 deep, needs
#: about 675 of Python's 1000 frames, which leaves room for the caller's own.
LIMITS = Depth(nesting=20, prefix=20, casts=20)

_WHAT = {
    "nesting": "levels of brackets and CASE",
    "prefix": "prefix operators (-, +, ~, NOT) in a row",
    "casts": "::type casts in a row",
}


def refusal(sql: str, limits: Depth = LIMITS) -> str | None:
    """Why ``sql`` nests too deeply to be read (one line: what, how deep, the limit), or
    None when every depth is within its limit.

    >>> refusal("SELECT " + "NOT " * 21 + "true")
    'nested too deeply: 21 prefix operators (-, +, ~, NOT) in a row, over the limit of 20'
    >>> refusal("SELECT -(-1)::int") is None
    True
    """
    found = measure(sql)
    for name, value, limit in zip(Depth._fields, found, limits, strict=True):
        if value > limit:
            return f"nested too deeply: {value} {_WHAT[name]}, over the limit of {limit}"
    return None
