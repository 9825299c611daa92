"""The gate's verdict as text: the table of metrics and the lines that explain it.

Part of ``projections.gate``: :func:`render_text` is the human view of a verdict
(who is compared, problems, the metric table, warnings, the verdict).
"""

from __future__ import annotations

from decimal import Decimal

import msgspec

from projections.report.schema import GateVerdict, Interval

__all__ = ["render_text"]


# ----------------------------------------------------------------- text


_COLUMNS = ("metric", "direction", "baseline", "current", "delta", "tolerance", "verdict")


def _ci(interval: Interval | msgspec.UnsetType) -> str:
    return "-" if isinstance(interval, msgspec.UnsetType) else f"{interval.low}-{interval.high}"


def render_text(verdict: GateVerdict) -> str:
    """The human view: who is compared, problems, the metric table, warnings, the verdict."""
    b, c = verdict.baseline, verdict.current
    lines = [
        f"baseline: {b.run} ({b.profile}), {b.judged} judged of {b.n}, scorer {b.scorer_version}",
        f"current:  {c.run} ({c.profile}), {c.judged} judged of {c.n}, scorer {c.scorer_version}",
        "",
    ]
    rows = verdict.metrics
    # Issue 32: each side's 95% interval beside the metric (when some side has one) and,
    # under --significance, the rule that decided each row.
    unset = msgspec.UNSET
    ci = any(r.baseline_interval is not unset or r.current_interval is not unset for r in rows)
    p = verdict.significance
    rule = not isinstance(p, msgspec.UnsetType)
    columns = [
        *_COLUMNS,
        *(["95% CI baseline / current"] if ci else []),
        *(["rule"] if rule else []),
    ]
    table = [columns]
    for r in rows:
        cells = ["-" if v is None else str(v) for v in (getattr(r, k) for k in _COLUMNS)]
        if not r.gating and r.verdict in ("pass", "regression"):
            cells[-1] += " (advisory)"
        if ci:
            cells.append(f"{_ci(r.baseline_interval)} / {_ci(r.current_interval)}")
        if rule:
            cells.append("-" if isinstance(r.rule, msgspec.UnsetType) else r.rule)
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    for row in table:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    lines.append("")
    for r in rows:
        if r.verdict != "pass" and r.note:
            advisory = r.verdict == "regression" and not r.gating
            lines.append(f"{'advisory ' if advisory else ''}{r.verdict}: {r.metric}: {r.note}")
    for w in verdict.warnings:
        lines.append(f"warning: {w}")
    for problem in verdict.problems:
        lines.append(f"could not judge: {problem}")
    summary = {
        "pass": "PASS: no metric significantly worse beyond its tolerance"
        if rule
        else "PASS: no metric worse than its tolerance",
        "regression": "REGRESSION: " + ", ".join(verdict.regressions),
        "could_not_judge": "COULD NOT JUDGE: the runs are not comparable",
    }[verdict.verdict]
    if not isinstance(p, msgspec.UnsetType):
        alpha = str(verdict.alpha)
        worse = Decimal(p.difference or 0) > 0 and Decimal(p.p_value) < Decimal(alpha)
        lines.append(
            "significance: paired result-correct difference baseline - current "
            f"{p.difference} over {p.cases} cases, p = {p.p_value} ({p.test}), "
            f"alpha {alpha}: "
            + ("a significant worsening" if worse else "not a significant worsening")
        )
    lines.append(f"gate: {summary} (exit {verdict.exit_code})")
    return "\n".join(lines) + "\n"
