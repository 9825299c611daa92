"""Hostile model outputs for the cost caps (issue 13 section 2), as a replay file.

Shared by tests/harness/test_hostile_outputs.py and benchmarks/hostile_bench.py.
Every output is built by code here; ``EXPECTED`` says, worked out from the
documented default caps (docs/running.md "Limits"), which stage and cap each
one must end in. The bank is the built-in sales-fixture (7 cases, 4 attempts
each): 18 hostile outputs and 10 ordinary ones (the case's reference SQL).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
PLAN = {
    "grain": "one row per answer",
    "sources": ["sales"],
    "joins": [],
    "filters": [],
    "metrics": [],
    "steps": ["write one query"],
    "risks": [],
}


def answer(sql: str, *, summary: str = "answer", assumptions: list[str] | None = None) -> str:
    """A strict query-plan-v1 answer."""
    body = {"plan": PLAN, "sql": sql, "summary": summary, "assumptions": assumptions or []}
    return json.dumps(body, ensure_ascii=False)


def _exactly(size: int) -> str:
    """A strict answer whose raw output is exactly ``size`` UTF-8 bytes (summary padding)."""
    bare = answer("SELECT 1", summary="")
    return answer("SELECT 1", summary="p" * (size - len(bare.encode("utf-8"))))


def _sql_of(size: int) -> str:
    """SQL text of exactly ``size`` UTF-8 bytes: a valid query padded with spaces."""
    head = "SELECT count(*) AS n FROM sales"
    return head + " " * (size - len(head))


def _wide_rows() -> str:
    # 30 cells of 65,000 bytes per row: ~1.95 MB a row, so the result cap (512 KiB since
    # issue 30, 16 MiB before) is passed on the first row of the 36-row cross join.
    pads = ", ".join(f"repeat('x', 65000) AS p{i}" for i in range(30))
    return f"SELECT a.sale_id, b.sale_id, {pads} FROM sales a CROSS JOIN sales b"


# (case, attempt) -> (name, raw output); the reference answers are added by replay_lines.
def hostile_outputs() -> dict[tuple[str, int], tuple[str, str]]:
    """The hostile outputs by (case, attempt)."""
    return {
        # 600,000 selected columns: 1.2 MB of SQL, so the answer is over the output cap.
        ("sf-01", 2): ("600k columns", answer("SELECT " + ",".join(["1"] * 600_000))),
        # 100,000 nested parentheses: 200 KB of SQL, over the SQL cap before any parser.
        ("sf-01", 3): ("100k parentheses", answer("SELECT " + "(" * 100_000 + "1" + ")" * 100_000)),
        ("sf-02", 2): ("cross join > 16 MiB", answer(_wide_rows())),
        ("sf-02", 3): ("50 MB summary", answer("SELECT 1", summary="s" * (50 * 1000 * 1000))),
        ("sf-03", 1): ("1 MiB + 1 output", _exactly(MIB + 1)),
        ("sf-03", 2): ("SQL of 64 KiB + 1", answer(_sql_of(64 * 1024 + 1))),
        ("sf-03", 3): ("100 MB cell", answer("SELECT repeat('x', 100000000) AS x")),
        ("sf-02", 4): ("10 MB cell", answer("SELECT repeat('x', 10000000) AS x")),
        ("sf-04", 1): (
            "100 nested CASE",
            answer("SELECT " + "CASE WHEN 1 = 1 THEN " * 100 + "1" + " END" * 100 + " AS x"),
        ),
        ("sf-04", 2): (
            "IN list of 9,000",
            answer(
                "SELECT count(*) AS n FROM sales WHERE store_id IN ("
                + ", ".join(str(i) for i in range(9000))
                + ")"
            ),
        ),
        ("sf-04", 3): (
            "UNION ALL of 800",
            answer(" UNION ALL ".join(f"SELECT {i} AS x" for i in range(800))),
        ),
        ("sf-05", 1): (
            "60 nested subqueries",
            answer("SELECT * FROM " + "(SELECT * FROM " * 60 + "sales" + ") t" * 60),
        ),
        ("sf-05", 2): (
            "1,500 CTEs",
            answer(
                "WITH "
                + ", ".join(f"c{i} AS (SELECT {i} AS x)" for i in range(1500))
                + " SELECT x FROM c1499"
            ),
        ),
        ("sf-05", 3): (
            "pathological regexp",
            answer(
                "SELECT count(*) AS n FROM range(200000000) t(i) "
                "WHERE regexp_matches(repeat('a', 40) || i::VARCHAR, '(a+)+b')"
            ),
        ),
        # Unary minus does not nest brackets: sqlglot itself runs out of recursion.
        ("sf-06", 2): ("5,000 unary minus", answer("SELECT " + "- " * 5000 + "1 AS x")),
        # 200,000 control characters: 200 KB of UTF-8, 1.2 MB once JSON-escaped in the ledger.
        ("sf-06", 3): ("200k control characters", "\x01" * 200_000),
        # 70,000 assumptions: 0.77 MB stored as raw output (over the 512 KiB cap on its own).
        ("sf-07", 2): ("70k assumptions", answer("SELECT 1", assumptions=["aaaaa"] * 70_000)),
        ("sf-07", 3): (
            "1,000 nested parentheses",
            answer("SELECT " + "(" * 1000 + "1" + ")" * 1000),
        ),
    }


# (case, attempt) -> (failure_kind, failure_detail or None, SqlExecuted error_kind or None)
EXPECTED: dict[tuple[str, int], tuple[str, str | None, str | None]] = {
    ("sf-01", 2): ("protocol", "output_too_large", None),
    ("sf-01", 3): ("guard", "sql_too_large", None),
    ("sf-02", 2): ("execution", "result_too_large", "result_too_large"),
    ("sf-02", 3): ("protocol", "output_too_large", None),
    ("sf-03", 1): ("protocol", "output_too_large", None),
    ("sf-03", 2): ("guard", "sql_too_large", None),
    # Executed, the cell cut to 64 KiB. DuckDB alone takes 1.5 s to build 100 MB on an
    # idle machine: on a loaded one this may end as a timeout (ALSO_ACCEPTED).
    ("sf-03", 3): ("none", None, None),
    ("sf-02", 4): ("none", None, None),  # executed, the cell cut to 64 KiB
    ("sf-04", 1): ("guard", "too_complex", None),
    ("sf-04", 2): ("none", None, None),
    ("sf-04", 3): ("none", None, None),
    ("sf-05", 1): ("guard", "too_complex", None),
    ("sf-05", 2): ("execution", None, "sql_runtime"),  # DuckDB: max expression depth
    ("sf-05", 3): ("execution", None, "timeout"),
    ("sf-06", 2): ("guard", "too_complex", None),
    ("sf-06", 3): ("protocol", "output_too_large", None),
    ("sf-07", 2): ("protocol", "output_too_large", None),
    ("sf-07", 3): ("guard", "too_complex", None),
}
ALSO_ACCEPTED = {("sf-03", 3): ("execution", None, "timeout")}
NORMAL = (
    *(("sf-01", 1), ("sf-02", 1), ("sf-06", 1), ("sf-07", 1)),
    *((f"sf-0{n}", 4) for n in (1, 3, 4, 5, 6, 7)),
)


def write_replay(path: Path, references: dict[str, str]) -> dict[tuple[str, int], str]:
    """Write the replay file (hostile outputs plus reference answers); returns names by key."""
    names: dict[tuple[str, int], str] = {}
    lines: list[dict[str, Any]] = []
    for key in NORMAL:
        lines.append({"case": key[0], "attempt": key[1], "output": answer(references[key[0]])})
        names[key] = "reference SQL"
    for key, (name, output) in hostile_outputs().items():
        lines.append({"case": key[0], "attempt": key[1], "output": output})
        names[key] = name
    with path.open("w", encoding="utf-8") as out:
        for line in lines:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    return names
