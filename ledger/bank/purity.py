"""The seed (and schema) must be pure SQL: no clock, no randomness, no files, no settings.

Two passes, both conservative. A token scan (sqlglot's DuckDB tokenizer, so
comments and string contents are never mistaken for code) names the file and
line of every forbidden word; an AST pass (sqlglot parse, where it parses)
catches what the parser recognises as a clock, random or file node under
another spelling. A clean bank never trips either; a false alarm is fixed by
renaming or quoting the word.

Data rows never reach sqlglot (issue 16: a 1,000,000-row seed took minutes and
gigabytes). A linear scan (compiled regular expressions, lexing strings,
quoted names and comments as DuckDB's tokenizer does) splits the text into
statements. A plain ``INSERT INTO t [(cols)] VALUES (...), ...`` of literals
(numbers, strings, NULL, TRUE, FALSE, ``DATE '...'`` and the like) is judged
here: its header by the token scan (once per distinct header), its strings by
the same file-reference rule, each with its line. Every other statement goes
through both sqlglot passes as before. Wherever the scan cannot be sure it
lexes as sqlglot does (a lone carriage return, ``$`` quoting, ``E'...'``
strings, nested comments, a statement boundary sqlglot sees elsewhere), the
whole text takes the old path, so the verdicts are today's in every case.
"""

from __future__ import annotations

import re
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import Token, TokenType

from ledger.bank.problems import Problems

__all__ = ["check_purity"]

# Forbidden wherever they appear unquoted (keywords without parentheses included).
_CLOCK_KEYWORDS = frozenset(
    {
        "current_date",
        "current_time",
        "current_timestamp",
        "current_localtime",
        "current_localtimestamp",
        "localtime",
        "localtimestamp",
        "sample",
        "tablesample",
    }
)
# Forbidden as function calls (names that are also plausible column names).
_FUNCTIONS = frozenset(
    {
        "now",
        "today",
        "get_current_time",
        "get_current_timestamp",
        "transaction_timestamp",
        "statement_timestamp",
        "epoch_ms_now",
        "random",
        "rand",
        "setseed",
        "uuid",
        "uuidv4",
        "uuidv7",
        "gen_random_uuid",
        "glob",
        "sniff_csv",
        "getenv",
        "query",
        "query_table",
        "current_setting",
    }
)
_FUNCTION_PATTERNS = (re.compile(r"read_\w*"), re.compile(r"\w*_scan"))
# Forbidden as the first word of a statement.
_STATEMENTS = frozenset(
    {
        "attach",
        "detach",
        "copy",
        "install",
        "force",
        "load",
        "export",
        "import",
        "pragma",
        "set",
        "reset",
        "call",
        "use",
        "checkpoint",
        "vacuum",
        "execute",
        "prepare",
    }
)
_PATHLIKE = re.compile(
    r"^(?:/|~|\.{1,2}/|[A-Za-z]:\\|[a-z][a-z0-9+.-]*://)"
    r"|\.(?:csv|tsv|parquet|json|jsonl|ndjson|txt|xlsx|db|duckdb|sqlite|gz|zst|arrow)$",
    re.IGNORECASE,
)
_AST_NODES: tuple[type[exp.Expression], ...] = (
    exp.CurrentDate,
    exp.CurrentTime,
    exp.CurrentTimestamp,
    exp.CurrentDatetime,
    exp.Localtime,
    exp.Localtimestamp,
    exp.Rand,
    exp.Uuid,
    exp.TableSample,
    exp.Copy,
    exp.Attach,
    exp.Detach,
    exp.Pragma,
    exp.Set,
    exp.Use,
    exp.Install,
    exp.Export,
    exp.ReadCSV,
    exp.ReadParquet,
)


# A finding: the message and its line (None where the parse tree keeps no line).
Finding = tuple[str, int | None]


def _is_function_name(word: str) -> bool:
    return word in _FUNCTIONS or any(p.fullmatch(word) for p in _FUNCTION_PATTERNS)


def _scan_tokens(tokens: list[Token]) -> list[Finding]:
    found: list[Finding] = []
    statement_start = True
    for i, tok in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        prev = tokens[i - 1] if i > 0 else None
        word = tok.text.lower()
        reason = None
        if tok.token_type == TokenType.STRING:
            if _PATHLIKE.search(tok.text) or (prev and prev.token_type in _FROMISH):
                reason = f"string {tok.text!r} looks like a file reference"
        elif tok.token_type == TokenType.IDENTIFIER:
            if prev and prev.token_type in _FROMISH and _PATHLIKE.search(tok.text):
                reason = f"quoted name {tok.text!r} looks like a file reference"
        elif statement_start and word in _STATEMENTS:
            reason = f"{word.upper()} statement is not allowed"
        elif word in _CLOCK_KEYWORDS:
            reason = f"{word} reads the clock or samples at random"
        elif nxt is not None and nxt.token_type == TokenType.L_PAREN and _is_function_name(word):
            reason = f"{word}() reads the clock, random numbers, files or the environment"
        if reason:
            found.append((f"impure SQL: {reason}", tok.line))
        statement_start = tok.token_type == TokenType.SEMICOLON
    return found


_FROMISH = frozenset({TokenType.FROM, TokenType.JOIN})
_TOO_DEEP = "nested too deeply to check its purity (simplify the SQL)"


def _ast_hit(statements: list[exp.Expr | None]) -> str | None:
    """The first node that reads the clock, random numbers, files or settings, named."""
    for statement in statements:
        if statement is None:
            continue
        for node in statement.walk():
            if isinstance(node, _AST_NODES):
                return type(node).__name__
            if isinstance(node, exp.Anonymous) and _is_function_name(str(node.name).lower()):
                return f"{node.name}()"
            if isinstance(node, exp.Command) and str(node.this).lower() in _STATEMENTS:
                return str(node.this).upper()
    return None


def _scan_ast(text: str) -> list[Finding]:
    try:
        statements = sqlglot.parse(text, read="duckdb")
    except SqlglotError:
        return []  # DuckDB syntax sqlglot does not know: the token scan stands alone.
    except RecursionError:
        # Fail closed: SQL nested deeper than the parser can follow is not checked pure.
        return [(_TOO_DEEP, None)]
    hit = _ast_hit(statements)
    return [] if hit is None else [(f"impure SQL: {hit} is not allowed in a pure seed", None)]


def _full_findings(text: str) -> list[Finding]:
    """Both sqlglot passes over the whole text (the path every statement took before issue 16)."""
    try:
        tokens = sqlglot.tokenize(text, read="duckdb")
    except SqlglotError as exc:
        return [(f"cannot tokenize SQL: {exc}", None)]
    return _scan_tokens(tokens) or _scan_ast(text)


def check_purity(text: str, name: str, problems: Problems) -> None:
    """Record a problem for every clock, random, file, environment or settings use in ``text``.

    Linear in the size of ``text``: the data rows of plain INSERT statements are
    judged by :func:`_fast_findings` without sqlglot; the verdicts are those of
    the two sqlglot passes over the whole text.
    """
    found = _fast_findings(text)
    if found is None:
        found = _full_findings(text)
    for message, line in found:
        problems.add(name, message, line=line)


# --- The linear scan -------------------------------------------------------------------
#
# Whitespace and comments as sqlglot skips them inside a plain INSERT: no nested block
# comment, no /*+ hint (either makes the statement not plain, so sqlglot judges it).
_SP = r"[ \t\n\r]*+(?:(?:--[^\n\r]*+|/\*(?!\+)(?:[^*/]++|\*(?!/)|/(?!\*))*+\*/)[ \t\n\r]*+)*+"
_STRING = r"'[^']*+(?:''[^']*+)*+'"
_NAME = r'(?:[A-Za-z_][A-Za-z0-9_]*+|"[^"]*+(?:""[^"]*+)*+")'
_LITERAL = (
    rf"(?:{_STRING}"
    r"|-?+\d++(?:\.\d*+)?+(?:[eE][+-]?+\d++)?+"
    rf"|(?i:DATE|TIMESTAMPTZ|TIMESTAMP|TIME|INTERVAL)[ \t\n\r]++{_STRING}"
    r"|(?i:NULL|TRUE|FALSE)(?![A-Za-z0-9_$]))"
)
_ROW = rf"\({_SP}{_LITERAL}{_SP}(?:,{_SP}{_LITERAL}{_SP})*+\)"
_PLAIN = re.compile(
    rf"{_SP}(?P<header>(?i:INSERT){_SP}(?i:INTO){_SP}{_NAME}(?:{_SP}\.{_SP}{_NAME})*+"
    rf"(?:{_SP}\({_SP}{_NAME}(?:{_SP},{_SP}{_NAME})*+{_SP}\))?+{_SP}(?i:VALUES))"
    rf"{_SP}(?P<rows>{_ROW}(?:{_SP},{_SP}{_ROW})*+){_SP}(?:;|\Z)"
)
# Inside the rows of a plain INSERT: a string (its content in group 1) or a comment.
_ROW_TOKEN = re.compile(r"'([^']*+(?:''[^']*+)*+)'|--[^\n\r]*+|/\*(?:[^*/]++|\*(?!/)|/(?!\*))*+\*/")
# A string _PATHLIKE can flag opens with a path's start ('/ '~ './ '../ X:\ scheme://) or
# closes with a file extension ($ also matches before a final newline); rows without
# any of these need no string scan. Plain substring searches are the fastest test.
_PATH_STARTS = ("'/", "'~", "'.", ":\\", ":/")
_PATH_ENDS = re.compile(
    r"\.(?i:csv|tsv|parquet|json|jsonl|ndjson|txt|xlsx|db|duckdb|sqlite|gz|zst|arrow)\n?'"
)
# What can hide a semicolon, outside a plain INSERT.
_SPECIAL = re.compile(r"[;'\"$]|--|/\*")
_LONE_CR = re.compile(r"\r(?!\n)")
_NAME_TOKENS = frozenset({TokenType.DOT, TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA})


class _Lines:
    """Line numbers as sqlglot counts them (``\\n`` or ``\\r\\n``), for increasing offsets."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0
        self._line = 1

    def at(self, pos: int) -> int:
        self._line += self._text.count("\n", self._pos, pos)
        self._pos = pos
        return self._line


@lru_cache(maxsize=1024)
def _header(header: str) -> tuple[tuple[str, int], ...] | None:
    """The token scan's findings in a plain INSERT's header (lines from 1), or None when
    sqlglot reads it otherwise than as ``INSERT INTO name [(names)] VALUES``, or when
    its parse tree holds an impure node: then the statement is not plain."""
    try:
        tokens = sqlglot.tokenize(header, read="duckdb")
        parsed = sqlglot.parse(header + " (1)", read="duckdb")
    except (SqlglotError, RecursionError):
        return None
    kinds = [t.token_type for t in tokens]
    if kinds[:2] != [TokenType.INSERT, TokenType.INTO] or kinds[-1:] != [TokenType.VALUES]:
        return None
    middle = tokens[2:-1]
    names = [t for t in middle if t.token_type not in _NAME_TOKENS]
    if any(t.token_type in (TokenType.STRING, TokenType.NUMBER) for t in names):
        return None
    if len(parsed) != 1 or not isinstance(parsed[0], exp.Insert) or _ast_hit(parsed):
        return None
    return tuple((message, int(line or 1)) for message, line in _scan_tokens(tokens))


def _row_findings(text: str, start: int, end: int, lines: _Lines) -> list[Finding]:
    """The strings of a plain INSERT's rows that look like a file reference, at the line
    of their closing quote (where sqlglot puts a string token)."""
    if _PATH_ENDS.search(text, start, end) is None and not any(
        text.find(hint, start, end) != -1 for hint in _PATH_STARTS
    ):
        return []
    found: list[Finding] = []
    for m in _ROW_TOKEN.finditer(text, start, end):
        raw = m.group(1)
        if raw is None:
            continue
        value = raw.replace("''", "'")
        if _PATHLIKE.search(value):
            message = f"impure SQL: string {value!r} looks like a file reference"
            found.append((message, lines.at(m.end() - 1)))
    return found


def _quoted_end(text: str, start: int, quote: str) -> int | None:
    """The offset after the string or quoted name opened at ``start`` (doubled quotes
    escape), or None when it is not closed."""
    pos = start + 1
    while True:
        close = text.find(quote, pos)
        if close == -1:
            return None
        if text.startswith(quote, close + 1):
            pos = close + 2
            continue
        return close + 1


def _statement_end(text: str, pos: int) -> tuple[int, int | None] | None:
    """Where the statement starting at ``pos`` ends, and the offset of its semicolon (None
    at the end of the text); None where this lexer might not agree with sqlglot."""
    while True:
        m = _SPECIAL.search(text, pos)
        if m is None:
            return len(text), None
        at, what = m.start(), m.group()
        if what == ";":
            return at + 1, at
        if what == "$":
            return None  # $$ strings and $1 parameters
        if what in ("'", '"'):
            if what == "'" and at > 0 and (text[at - 1].isalnum() or text[at - 1] in "_$"):
                return None  # E'...' and other prefixed strings
            end = _quoted_end(text, at, what)
            if end is None:
                return None
            pos = end
        elif what == "--":
            ends = [i for i in (text.find("\n", at), text.find("\r", at)) if i != -1]
            pos = min(ends) if ends else len(text)
        else:
            close = text.find("*/", at + 2)
            if close == -1 or text.find("/*", at + 2, close) != -1 or text[at - 1 : at] == "/":
                return None  # unclosed or nested, or the second half of //
            pos = close + 2


def _segment_findings(
    text: str, start: int, end: int, semis: list[int], first_line: int
) -> list[Finding] | None:
    """The token scan over statements ``start..end`` that are not plain (None if sqlglot
    does not end them at the semicolons the linear scan found)."""
    try:
        tokens = sqlglot.tokenize(text[start:end], read="duckdb")
    except SqlglotError:
        return None
    if [start + t.start for t in tokens if t.token_type == TokenType.SEMICOLON] != semis:
        return None
    shift = first_line - 1
    return [(message, (line or 1) + shift) for message, line in _scan_tokens(tokens)]


def _fast_findings(text: str) -> list[Finding] | None:
    """What :func:`_full_findings` finds, without giving plain INSERT rows to sqlglot; None
    where the linear scan cannot be sure (the caller then takes the full path)."""
    if _LONE_CR.search(text):
        return None  # sqlglot counts a lone \r as a line break in some places only
    lines = _Lines(text)
    found: list[Finding] = []
    rest: list[str] = []
    segment: tuple[int, list[int]] | None = None  # start, semicolons of pending statements
    pos, size = 0, len(text)

    def flush(end: int) -> bool:
        nonlocal segment
        if segment is None:
            return True
        start, semis = segment
        segment = None
        scanned = _segment_findings(text, start, end, semis, lines.at(start))
        if scanned is None:
            return False
        found.extend(scanned)
        rest.append(text[start:end])
        return True

    while pos < size:
        m = _PLAIN.match(text, pos)
        header = _header(m.group("header")) if m else None
        if m is not None and header is not None:
            if not flush(pos):
                return None
            first = lines.at(m.start("header")) - 1
            found.extend((message, line + first) for message, line in header)
            found.extend(_row_findings(text, m.start("rows"), m.end("rows"), lines))
            pos = m.end()
            continue
        ended = _statement_end(text, pos)
        if ended is None:
            return None
        if segment is None:
            segment = (pos, [])
        if ended[1] is not None:
            segment[1].append(ended[1])
        pos = ended[0]
    if not flush(size):
        return None
    return found or _scan_ast("\n".join(rest))
