"""The gate's verdict as text: the table of metrics and the lines that explain it.

Part of ``projections.gate``: :func:`render_text` is the human view of a verdict
(who is compared, problems, the metric table, warnings, the verdict).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

__all__ = ["render_text"]


# ----------------------------------------------------------------- text


_COLUMNS = ("metric", "direction", "baseline", "current", "delta", "tolerance", "verdict")


def _ci(interval: Mapping[str, str] | None) -> str:
    return "-" if interval is None else f"{interval['low']}-{interval['high']}"


def render_text(verdict: Mapping[str, Any]) -> str:
    """The human view: who is compared, problems, the metric table, warnings, the verdict."""
    b, c = verdict["baseline"], verdict["current"]
    lines = [
        f"baseline: {b['run']} ({b['profile']}), {b['judged']} judged of {b['n']}, "
        f"scorer {b['scorer_version']}",
        f"current:  {c['run']} ({c['profile']}), {c['judged']} judged of {c['n']}, "
        f"scorer {c['scorer_version']}",
        "",
    ]
    rows = verdict["metrics"]
    # Issue 32: each side's 95% interval beside the metric (when some side has one) and,
    # under --significance, the rule that decided each row.
    ci = any("baseline_interval" in r or "current_interval" in r for r in rows)
    rule = "significance" in verdict
    columns = [
        *_COLUMNS,
        *(["95% CI baseline / current"] if ci else []),
        *(["rule"] if rule else []),
    ]
    table = [columns]
    for r in rows:
        cells = ["-" if r[k] is None else str(r[k]) for k in _COLUMNS]
        if not r.get("gating", True) and r["verdict"] in ("pass", "regression"):
            cells[-1] += " (advisory)"
        if ci:
            cells.append(f"{_ci(r.get('baseline_interval'))} / {_ci(r.get('current_interval'))}")
        if rule:
            cells.append(r.get("rule", "-"))
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    for row in table:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    lines.append("")
    for r in verdict["metrics"]:
        if r["verdict"] != "pass" and r["note"]:
            advisory = r["verdict"] == "regression" and not r.get("gating", True)
            lines.append(
                f"{'advisory ' if advisory else ''}{r['verdict']}: {r['metric']}: {r['note']}"
            )
    for w in verdict["warnings"]:
        lines.append(f"warning: {w}")
    for p in verdict["problems"]:
        lines.append(f"could not judge: {p}")
    summary = {
        "pass": "PASS: no metric significantly worse beyond its tolerance"
        if rule
        else "PASS: no metric worse than its tolerance",
        "regression": "REGRESSION: " + ", ".join(verdict["regressions"]),
        "could_not_judge": "COULD NOT JUDGE: the runs are not comparable",
    }[verdict["verdict"]]
    if rule:
        p = verdict["significance"]
        worse = Decimal(p["difference"] or 0) > 0 and Decimal(p["p_value"]) < Decimal(
            verdict["alpha"]
        )
        lines.append(
            "significance: paired result-correct difference baseline - current "
            f"{p['difference']} over {p['cases']} cases, p = {p['p_value']} ({p['test']}), "
            f"alpha {verdict['alpha']}: "
            + ("a significant worsening" if worse else "not a significant worsening")
        )
    lines.append(f"gate: {summary} (exit {verdict['exit_code']})")
    return "\n".join(lines) + "\n"
