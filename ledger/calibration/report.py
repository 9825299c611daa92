"""The calibration report: one deterministic JSON object, and a short text view of it.

No path, clock, run id or float appears in it: two calibrations of the same
bank and calibration.yaml give the same bytes. It is written by the one
canonical encoder (``ledger.codec.canonical_json``), so ``kill_rate`` is a
decimal string with 4 places (``"1.0000"``), as in reports and events
(DESIGN: ratios are decimal strings).
"""

from __future__ import annotations

from typing import Any

from ledger.calibration.calibrate import CalibrationResult, MutantRecord, pattern_of
from ledger.calibration.operators import OPERATORS
from ledger.calibration.variants import BASE
from ledger.codec import canonical_json

__all__ = ["DEFINITIONS", "format_text", "report_dict", "to_json"]

DEFINITIONS = {
    "killed": (
        "the scorer says result_correct = false on the base database, or on a variant "
        "against the reference SQL's result on that variant (stale_snapshot: the reference "
        "on a stale variant against the base gold)"
    ),
    "survived": "result_correct = true on the base database and every variant",
    "kill_rate": "killed / (applicable - equivalent - blocked) = killed / (killed + survived)",
}


def _mutant(rec: MutantRecord) -> dict[str, Any]:
    return {
        "case": rec.mutant.case_id,
        "mutant": rec.mutant.id,
        "operator": rec.mutant.operator,
        "pattern": pattern_of(rec.mutant.operator),
        "status": rec.status,
        "killed_by": list(rec.killed_by),
        "reason": rec.reason,
    }


def report_dict(result: CalibrationResult) -> dict[str, Any]:
    """The report as a plain tree (``kill_rate`` a decimal string or None)."""
    counts = {s: result.count(s) for s in ("killed", "survived", "equivalent", "blocked")}
    applicable = sum(counts.values())
    operators = []
    for op in OPERATORS:
        mine = [m for m in result.mutants if m.mutant.operator == op.name]
        row: dict[str, Any] = {
            "name": op.name,
            "pattern": op.pattern,
            "description": op.description,
        }
        for status in ("killed", "survived", "equivalent", "blocked", "unsupported"):
            row[status] = sum(1 for m in mine if m.status == status)
        row["not_applicable_cases"] = sum(1 for m in mine if m.status == "not_applicable")
        operators.append(row)
    survivors = [
        {**_mutant(m), "description": m.reason, "sql": m.mutant.sql} for m in result.survivors
    ]
    failed = [
        {
            "case": c.case_id,
            "index": c.index,
            "databases": [
                {"database": v.database, "result_correct": v.result_correct, "error": v.error_kind}
                for v in c.verdicts
                if v.result_correct is not True
            ],
        }
        for c in result.controls
        if not c.passed
    ]
    cal = result.calibration
    return {
        "bank": result.bank.ref,
        "bank_hash": result.bank.content_sha256,
        "calibration_sha256": cal.sha256 if cal else None,
        "scorer_version": result.scorer_version,
        "definitions": DEFINITIONS,
        "kill_rate": None if result.kill_rate is None else str(result.kill_rate),
        **counts,
        "applicable": applicable,
        "unsupported": result.count("unsupported"),
        "not_applicable": result.count("not_applicable"),
        "survivors": survivors,
        "equivalents": [
            {**_mutant(m), "review": m.review} for m in result.mutants if m.status == "equivalent"
        ],
        "blocked_mutants": [_mutant(m) for m in result.mutants if m.status == "blocked"],
        "unused_reviews": [{"case": c, "operator": o} for c, o in result.unused_reviews],
        "positive_controls": {
            "passed": result.controls_passed,
            "total": len(result.controls),
            "failed": failed,
        },
        "databases": [BASE, *(v.id for v in result.variants)],
        "variants": [
            {
                "id": v.id,
                "stale": v.variant.stale,
                "description": v.variant.description,
                "tables_digest": v.tables_digest,
                "gold_digest": v.gold_digest,
            }
            for v in result.variants
        ],
        "operators": operators,
        "mutants": [_mutant(m) for m in result.mutants],
        "passed": result.passed,
    }


def to_json(result: CalibrationResult) -> str:
    """The report as canonical JSON (sorted keys, no whitespace, no floats), one line."""
    return canonical_json(report_dict(result)).decode("utf-8")


def format_text(result: CalibrationResult) -> str:
    """A short human view: totals, survivors with their SQL, failed controls, per operator."""
    r = report_dict(result)
    rate = "n/a" if r["kill_rate"] is None else f"{r['kill_rate']}"
    pc = r["positive_controls"]
    lines = [
        f"calibration of {r['bank']} ({r['bank_hash']})",
        f"calibration.yaml {r['calibration_sha256'] or '(none)'}; scorer {r['scorer_version']}",
        f"databases: {', '.join(r['databases'])}",
        f"kill rate {rate}: killed {r['killed']} of {r['applicable']} applicable "
        f"(equivalent {r['equivalent']}, blocked {r['blocked']}, survived {r['survived']}); "
        f"unsupported {r['unsupported']}, not applicable {r['not_applicable']}",
        f"positive controls: {pc['passed']}/{pc['total']} passed",
        "",
        "operator                  pattern  killed  survived  equivalent  blocked  unsupported",
    ]
    for op in r["operators"]:
        lines.append(
            f"{op['name']:<26}{op['pattern']:<9}{op['killed']:>6}{op['survived']:>10}"
            f"{op['equivalent']:>12}{op['blocked']:>9}{op['unsupported']:>13}"
        )
    if r["survivors"]:
        lines += ["", "survivors (review each: kill it with a variant, or declare it equivalent):"]
        for s in r["survivors"]:
            lines.append(f"- {s['case']} {s['mutant']}: {s['description']}")
            lines += [f"    {line}" for line in (s["sql"] or "").splitlines()]
    for f in pc["failed"]:
        where = ", ".join(
            f"{d['database']} ({d['error'] or 'wrong result'})" for d in f["databases"]
        )
        lines.append(f"FAILED positive control {f['case']} alternative_sql[{f['index']}]: {where}")
    for u in r["unused_reviews"]:
        lines.append(f"note: review {u['operator']} of case {u['case']} matches no survivor")
    lines.append("calibration passed" if r["passed"] else "calibration FAILED")
    return "\n".join(lines)
