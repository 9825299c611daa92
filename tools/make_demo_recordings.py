"""Write the demo's recorded model profiles (ledger/demo/*.jsonl). Maintainer script.

The three profiles are fictional models whose answers were written for the demo:
mostly the bank's correct queries, phrased as a model would phrase them, plus
realistic faults taken from the retail bank's proven traps (tests/banks/traps.py):
a join that doubles rows, a date endpoint off by one, a fenced JSON answer, a
guard violation, a query that runs into the timeout, provider failures.

Run from the repository root: ``python tools/make_demo_recordings.py``. The
output is deterministic; review the diff before committing.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "banks"))
from traps import RETAIL_TRAPS  # noqa: E402

OUT = ROOT / "ledger" / "demo"
ATTEMPTS = 3

# A query that never finishes in time: the stop condition of the recursive month
# spine can never be met (months step from the 1st; the 15th never comes).
ENDLESS = (
    "WITH RECURSIVE months(m) AS (SELECT DATE '2025-11-01' UNION ALL "
    "SELECT CAST(m + INTERVAL 1 MONTH AS DATE) FROM months WHERE m <> DATE '2026-02-15') "
    "SELECT m AS month, 0 AS revenue FROM months"
)
# Two statements: the guard refuses anything but exactly one read-only query.
TWO_STATEMENTS = (
    "SELECT oi.order_id, oi.line_no, oi.product_id FROM order_items AS oi "
    "WHERE oi.product_id NOT IN (SELECT product_id FROM products); "
    "SELECT COUNT(*) FROM order_items"
)
# Refers to a column that does not exist: passes the guard, fails in DuckDB.
UNKNOWN_COLUMN = (
    "SELECT c.customer_id, c.customer_name, SUM(o.order_amount) AS increase "
    "FROM orders AS o JOIN customers AS c ON c.customer_id = o.customer_id "
    "GROUP BY c.customer_id, c.customer_name"
)

# (case, attempt) -> fault; every other attempt answers correctly.
PROFILES: dict[str, dict] = {
    "northwind-sql-pro": {
        "model": "northwind-sql-pro-2026-10",
        "cached": True,
        "faults": {
            ("joins-03", 1): ("fence",),
            ("basic-02", 2): ("trap", "inclusive_cross_year_endpoint"),
            ("time-02", 3): ("trap", "row_number_drops_tie"),
        },
    },
    "harbor-coder-14b": {
        "model": "harbor-coder-14b-q4",
        "cached": False,
        "faults": {
            ("joins-02", 1): ("trap", "count_rows_after_item_join"),
            ("joins-02", 2): ("trap", "count_rows_after_item_join"),
            ("joins-02", 3): ("trap", "count_rows_after_item_join"),
            ("data-01", 1): ("trap", "fan_out_join"),
            ("agg-03", 2): ("trap", "duplicate_returns_counted"),
            ("complex-02", 1): ("trap", "not_in_meets_null"),
            ("basic-01", 1): ("trap", "empty_string_not_null"),
            ("data-03", 3): ("sql", TWO_STATEMENTS),
            ("time-01", 2): ("sql", ENDLESS),
            ("complex-03", 3): ("sql", UNKNOWN_COLUMN),
        },
    },
    "lumen-mini": {
        "model": "lumen-mini-0901",
        "cached": False,
        "faults": {
            ("time-03", 1): ("error", "rate_limited", "429 Too Many Requests"),
            ("data-02", 2): ("error", "server_error", "502 Bad Gateway from upstream"),
            ("agg-01", 1): ("trap", "overlapping_between_bands"),
            ("agg-01", 2): ("trap", "overlapping_between_bands"),
            ("agg-01", 3): ("trap", "gap_between_strict_bands"),
            ("agg-02", 1): ("trap", "mean_of_product_means"),
            ("agg-02", 2): ("trap", "mean_of_product_means"),
            ("time-01", 1): ("trap", "no_calendar_spine"),
            ("joins-01", 3): ("trap", "inner_join_drops_unsold_categories"),
            ("complex-01", 1): ("prose",),
            ("basic-03", 2): ("fence",),
        },
    },
}


def _answer(case: dict, sql: str) -> str:
    body = {
        "plan": {
            "grain": f"one row per result of: {case['question_en']}",
            "sources": ["see sql"],
            "joins": [],
            "filters": [],
            "metrics": [],
            "steps": ["read the schema and the semantic layer", "write one DuckDB query"],
            "risks": [],
        },
        "sql": sql,
        "summary": case["question_en"],
        "assumptions": [],
    }
    return json.dumps(body, ensure_ascii=False, indent=2)


def _number(*parts: object) -> int:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()
    return int(digest[:8], 16)


def _line(profile: str, spec: dict, case: dict, attempt: int, index: int) -> dict:
    fault = spec["faults"].get((case["id"], attempt))
    sql = case["reference_sql"].strip()
    line: dict = {"case": case["id"], "attempt": attempt}
    if fault is None:
        output = _answer(case, sql)
    elif fault[0] == "trap":
        output = _answer(case, dict(RETAIL_TRAPS[case["id"]])[fault[1]])
    elif fault[0] == "sql":
        output = _answer(case, fault[1])
    elif fault[0] == "fence":
        output = "```json\n" + _answer(case, sql) + "\n```"
    elif fault[0] == "prose":
        output = "Here is the query you asked for:\n" + _answer(case, sql)
    else:
        _, kind, message = fault
        line["error"] = {"kind": kind, "message": message}
        line["generation_ms"] = 300 + _number(profile, case["id"], attempt) % 400
        line["model"] = spec["model"]
        line["request_id"] = f"req-{profile}-{case['id']}-{attempt}"
        return line
    prompt_tokens = 2600 + 41 * index
    cached = 2048 if spec["cached"] and attempt > 1 else 0
    out_tokens = len(output) // 3
    line["output"] = output
    line["usage"] = {
        "input": prompt_tokens - cached,
        "cache_read": cached,
        "cache_write": 0,
        "output": out_tokens,
        "reasoning_output": out_tokens // 2 if spec["cached"] else 0,
    }
    line["generation_ms"] = 900 + _number(profile, case["id"], attempt) % 4000
    line["model"] = spec["model"]
    line["request_id"] = f"req-{profile}-{case['id']}-{attempt}"
    return line


def main() -> None:
    """Write one JSON Lines file per profile."""
    cases = yaml.safe_load((ROOT / "ledger/banks/retail/cases.yaml").read_text("utf-8"))["cases"]
    OUT.mkdir(parents=True, exist_ok=True)
    for profile, spec in PROFILES.items():
        lines = [
            _line(profile, spec, case, attempt, i)
            for i, case in enumerate(cases)
            for attempt in range(1, ATTEMPTS + 1)
        ]
        text = "".join(json.dumps(x, ensure_ascii=False, sort_keys=True) + "\n" for x in lines)
        (OUT / f"{profile}.jsonl").write_text(text, "utf-8")
        print(f"wrote {OUT / (profile + '.jsonl')} ({len(lines)} attempts)")


if __name__ == "__main__":
    main()
