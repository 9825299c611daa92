"""What Spider's evaluator reads in an SQL text before it compares results (issue 31).

Spider's execution match (test-suite-sql-eval, ``exec_eval.py`` ``eval_exec_match``;
docs/benchmarks.md "Spider's rule") does not only compare rows: it rewrites "> =",
"< =", "! =" and YEAR(CURDATE()), deletes every DISTINCT token of both queries (its
default ``keep_distinct=False``) and keeps row order when the gold's text holds
"order by". These functions say which of that applies to one text: the importer
records them for each gold (``BenchmarkCase``), the benchmark projection applies them
to predictions.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

__all__ = ["spider_distinct", "spider_order_by", "spider_rewritten"]

# Spider's evaluator (test-suite-sql-eval, exec_eval.py ``eval_exec_match``) reads the
# SQL text itself before it compares results (docs/benchmarks.md "Spider's rule"): it
# rewrites "> =", "< =", "! =" and YEAR(CURDATE()), deletes every DISTINCT token of both
# queries (its default keep_distinct=False) and keeps row order when the gold's text
# holds "order by". These three functions say which of that applies to one text.

_DISTINCT = re.compile(r"\bdistinct\b", re.IGNORECASE)
_SPACED = ("> =", "< =", "! =")
_CUR_YEAR = re.compile(r"YEAR\s*\(\s*CURDATE\s*\(\s*\)\s*\)", re.IGNORECASE)


def spider_order_by(sql: str) -> bool:
    """True when Spider keeps row order for this gold: its text holds "order by".

    >>> spider_order_by("SELECT a FROM t ORDER BY a"), spider_order_by("SELECT a FROM t")
    (True, False)
    """
    return "order by" in sql.lower()


def spider_distinct(sql: str) -> str | None:
    """Where DISTINCT stands in ``sql``: None (nowhere), ``"select"`` (only as the
    outermost ``SELECT DISTINCT``: deleting it keeps the set of rows and can only add
    duplicates) or ``"other"`` (anywhere else, or not sure: a count or a subquery may
    change when it goes). The word in a string or a quoted name counts too: it errs
    towards "other", never towards None.

    >>> spider_distinct("SELECT a FROM t"), spider_distinct("select distinct a from t")
    (None, 'select')
    >>> spider_distinct("SELECT count(DISTINCT a) FROM t")
    'other'
    """
    found = len(_DISTINCT.findall(sql))
    if not found:
        return None
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except Exception:  # sqlglot raises several kinds; any means "not sure"
        return "other"
    if (
        found == 1
        and isinstance(tree, exp.Select)
        and tree.args.get("distinct") is not None
        and sum(1 for _ in tree.find_all(exp.Distinct)) == 1
    ):
        return "select"
    return "other"


def spider_rewritten(sql: str) -> bool:
    """True when Spider's evaluator runs another text than ``sql``: it replaces "> =",
    "< =", "! =" by ">=", "<=", "!=" and YEAR(CURDATE()) by 2020 first.

    >>> spider_rewritten("SELECT a FROM t WHERE a > = 1"), spider_rewritten("SELECT 1")
    (True, False)
    """
    return any(s in sql for s in _SPACED) or _CUR_YEAR.search(sql) is not None
