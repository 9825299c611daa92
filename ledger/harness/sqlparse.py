"""One sqlglot parse per SQL text, shared by the guard and the AST rules.

An attempt's SQL is read by the guard, by the AST capability rules and, with
variant diagnostics, again for every variant database; parsing it once saves
most of that work. The cache holds the parsed statements keyed by the exact
SQL text. The trees are shared, so callers only read them and copy them
(:func:`copy_tree`) before changing anything. A text that does not parse is not
cached: the error is raised afresh on every call, so each caller reports it as before.
"""

from __future__ import annotations

import functools
import re
from collections import deque
from copy import deepcopy

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

__all__ = ["CACHED_CHARS", "DIALECT", "copy_tree", "inside", "parse"]

DIALECT = "duckdb"


#: Texts longer than this are parsed every time: the cache must stay small.
CACHED_CHARS = 65536


def parse(sql: str, dialect: str = DIALECT) -> tuple[exp.Expr | None, ...]:
    """The statements of ``sql`` as sqlglot parses them (DuckDB dialect); read-only.

    Raises whatever ``sqlglot.parse`` raises (ParseError, TokenError, RecursionError).

    >>> [type(t).__name__ for t in parse("SELECT 1; SELECT 2")]
    ['Select', 'Select']
    >>> parse("SELECT 1") is parse("SELECT 1")
    True
    """
    return _cached(sql, dialect) if len(sql) <= CACHED_CHARS else _parse(sql, dialect)


def _parse(sql: str, dialect: str) -> tuple[exp.Expr | None, ...]:
    try:
        return tuple(sqlglot.parse(sql, read=dialect))
    except ParseError as exc:
        raise _in_a_fixed_order(exc) from exc


# sqlglot names one missing required argument of a node, the first of a set: which one
# depends on the process's string hash seed (PYTHONHASHSEED), so the same text got
# 'this' in one process and 'expression' in another, and a recorded parse violation
# could not be derived again (issue 34, found comparing two processes).
_MISSING = re.compile(r"Required keyword: '\w+' missing for <class '([\w.]+)'>")


def _in_a_fixed_order(exc: ParseError) -> ParseError:
    """``exc`` with each "Required keyword: 'x' missing for <class 'C'>" written the same
    in every process: "Required keyword missing for <class 'C'> (required: 'a', 'b')",
    C's required arguments in sorted order."""

    def fixed(match: re.Match[str]) -> str:
        node = getattr(exp, match[1].rsplit(".", 1)[-1], None)
        required = sorted(getattr(node, "required_args", ()))
        names = ", ".join(f"'{name}'" for name in required)
        return f"Required keyword missing for <class '{match[1]}'>" + (
            f" (required: {names})" if names else ""
        )

    if not any(_MISSING.search(str(e.get("description", ""))) for e in exc.errors):
        return exc
    errors = [
        {**e, "description": _MISSING.sub(fixed, str(e.get("description", "")))}
        if "description" in e
        else e
        for e in exc.errors
    ]
    return ParseError(_MISSING.sub(fixed, str(exc)), errors)


_cached = functools.lru_cache(maxsize=256)(_parse)


# Meta values shared by a copy as they are (immutable); anything else is deep-copied.
_ATOMS = frozenset({str, int, float, bool, type(None)})


def copy_tree(tree: exp.Expr) -> tuple[exp.Expr, list[exp.Expr]]:
    """A copy of ``tree`` equal in every attribute to ``tree.copy()``, and its nodes in
    breadth-first order (the order of ``walk()`` and ``find_all()``).

    Why: ``Expr.copy`` (sqlglot's ``__deepcopy__``) sends every string, flag, comment
    list and meta dict through ``copy.deepcopy``; that was a quarter of the judging's
    CPU time (issue 21). This builds the same tree with one constructor call per node,
    shares the immutable values (strings, numbers, flags), copies comment lists and
    meta dicts one level deep (deep-copying only a meta value that is not immutable, and
    a node's ``_type``), and links parents, keys and list indexes the way ``set`` and
    ``append`` do, including their clearing of the cached hash of a node that gets a
    child. The nodes come along so that a caller changing the copy need not walk it
    again. ``tests/harness/test_sqlparse_copy.py`` checks the equality attribute by
    attribute over every built-in bank's SQL and the benchmark workload.
    """
    root = tree.__class__()
    nodes: list[exp.Expr] = []
    queue: deque[tuple[exp.Expr, exp.Expr]] = deque([(tree, root)])
    while queue:
        node, copy = queue.popleft()
        nodes.append(copy)
        if node.comments is not None:
            copy.comments = list(node.comments)
        if node._type is not None:
            copy._type = deepcopy(node._type)
        meta = node._meta
        if meta is not None:
            copy._meta = (
                dict(meta) if all(type(v) in _ATOMS for v in meta.values()) else deepcopy(meta)
            )
        linked = False  # set() and append() clear the cached hash of the node they change
        args = copy.args
        for key, value in node.args.items():
            if isinstance(value, exp.Expr):
                child = value.__class__()
                child.parent, child.arg_key, child.index = copy, key, None
                args[key] = child
                queue.append((value, child))
                linked = True
            elif type(value) is list:
                items: list[object] = []
                args[key] = items
                for item in value:
                    if isinstance(item, exp.Expr):
                        child = item.__class__()
                        child.parent, child.arg_key, child.index = copy, key, len(items)
                        queue.append((item, child))
                        items.append(child)
                    else:
                        items.append(item)
                    linked = True
            else:
                args[key] = value
        if node._hash is not None and not linked:
            copy._hash = node._hash
    return root, nodes


def inside(node: exp.Expr, ancestor: exp.Expr) -> bool:
    """Whether ``ancestor`` is ``node`` or one of its parents.

    >>> tree = sqlglot.parse_one("SELECT a + 1 FROM t")
    >>> inside(tree.find(exp.Literal), tree.find(exp.Add)), inside(tree, tree.find(exp.Add))
    (True, False)
    """
    current: exp.Expr | None = node
    while current is not None:
        if current is ancestor:
            return True
        current = current.parent
    return False
