"""The seed (and schema) must be pure SQL: no clock, no randomness, no files, no settings.

Two passes, both conservative. A token scan (sqlglot's DuckDB tokenizer, so
comments and string contents are never mistaken for code) names the file and
line of every forbidden word; an AST pass (sqlglot parse, where it parses)
catches what the parser recognises as a clock, random or file node under
another spelling. A clean bank never trips either; a false alarm is fixed by
renaming or quoting the word.
"""

from __future__ import annotations

import re

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


def _is_function_name(word: str) -> bool:
    return word in _FUNCTIONS or any(p.fullmatch(word) for p in _FUNCTION_PATTERNS)


def _scan_tokens(tokens: list[Token], name: str, problems: Problems) -> int:
    found = 0
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
            problems.add(name, f"impure SQL: {reason}", line=tok.line)
            found += 1
        statement_start = tok.token_type == TokenType.SEMICOLON
    return found


_FROMISH = frozenset({TokenType.FROM, TokenType.JOIN})


def _scan_ast(text: str, name: str, problems: Problems) -> None:
    try:
        statements = sqlglot.parse(text, read="duckdb")
    except SqlglotError:
        return  # DuckDB syntax sqlglot does not know: the token scan stands alone.
    except RecursionError:
        # Fail closed: SQL nested deeper than the parser can follow is not checked pure.
        problems.add(name, "nested too deeply to check its purity (simplify the SQL)")
        return
    for statement in statements:
        if statement is None:
            continue
        for node in statement.walk():
            hit = None
            if isinstance(node, _AST_NODES):
                hit = type(node).__name__
            elif isinstance(node, exp.Anonymous) and _is_function_name(str(node.name).lower()):
                hit = f"{node.name}()"
            elif isinstance(node, exp.Command) and str(node.this).lower() in _STATEMENTS:
                hit = str(node.this).upper()
            if hit:
                problems.add(name, f"impure SQL: {hit} is not allowed in a pure seed")
                return


def check_purity(text: str, name: str, problems: Problems) -> None:
    """Record a problem for every clock, random, file, environment or settings use in ``text``."""
    try:
        tokens = sqlglot.tokenize(text, read="duckdb")
    except SqlglotError as exc:
        problems.add(name, f"cannot tokenize SQL: {exc}")
        return
    if _scan_tokens(tokens, name, problems) == 0:
        _scan_ast(text, name, problems)
