"""The HTML view of a report: ONE self-contained file made only from the report struct.

No script, no external stylesheet, font or image, and a Content-Security-Policy
that forbids every fetch: the page can be opened offline and makes no network
request. Every text from the log (prompts, raw output, SQL, rows) is escaped.
The radar is inline SVG whose coordinates are computed in Decimal with fixed
places, so the bytes never depend on float formatting.
"""

from __future__ import annotations

import html
import json
from decimal import Decimal
from typing import Any

import msgspec

from ledger.events import Column
from projections.aggregates import DIMENSIONS
from projections.report.schema import CaseRun, Report, RunEntry, Section
from projections.report.tables import (
    FAILURES_HEAD,
    FAIRNESS_HEAD,
    INTRO,
    VARIANT_NOTE,
    Table,
    benchmark_tables,
    calibration_tables,
    caserun_diagnostics_table,
    cases_table,
    claim_tables,
    diagnostics_table,
    dimensions_table,
    efficiency_table,
    failure_rows,
    fairness_rows,
    model_runs,
    runs_table,
    slice_tables,
    withdrawn_lines,
)

__all__ = ["render_html"]

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_PALETTE = ("#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0a7c86")
_HALF_SQRT3 = Decimal("0.86602540378443864676")
# Unit vectors of the six axes, clockwise from the top (cos, sin) with y pointing down.
_AXES = (
    (Decimal(0), Decimal(-1)),
    (_HALF_SQRT3, Decimal("-0.5")),
    (_HALF_SQRT3, Decimal("0.5")),
    (Decimal(0), Decimal(1)),
    (-_HALF_SQRT3, Decimal("0.5")),
    (-_HALF_SQRT3, Decimal("-0.5")),
)
_CENTER, _RADIUS = Decimal(190), Decimal(110)
_PLACES = Decimal("0.01")

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1f2328}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px}table{border-collapse:collapse;margin:8px 0 16px}
th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f6f8fa;padding:8px;overflow:auto;white-space:pre-wrap;max-height:360px}
details{margin:4px 0;border:1px solid #d0d7de;border-radius:4px;padding:4px 8px}
summary{cursor:pointer}.ok{color:#1a7f37}.bad{color:#d1242f}.muted{color:#656d76}
.notice{padding:6px 10px;border:1px solid #d0d7de;background:#fff8c5}
.radar{display:inline-block;margin:0 12px 12px 0;text-align:center}
"""


def _e(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return html.escape(str(value), quote=True)


def _q(value: Decimal) -> str:
    return str(value.quantize(_PLACES))


def _table(head: list[str], rows: list[list[Any]], numeric: int = 0) -> str:
    out = ["<table><thead><tr>", *(f"<th>{_e(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            css = ' class="num"' if i >= numeric and numeric else ""
            cells.append(f"<td{css}>{_e(value)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _radar(run: RunEntry, color: str) -> str:
    dims = run.scores.dimensions
    grid = []
    for level in (Decimal("0.25"), Decimal("0.5"), Decimal("0.75"), Decimal(1)):
        pts = " ".join(
            f"{_q(_CENTER + dx * _RADIUS * level)},{_q(_CENTER + dy * _RADIUS * level)}"
            for dx, dy in _AXES
        )
        grid.append(f'<polygon points="{pts}" fill="none" stroke="#d0d7de"/>')
    axes, labels, points = [], [], []
    for (dx, dy), name in zip(_AXES, DIMENSIONS, strict=True):
        x, y = _CENTER + dx * _RADIUS, _CENTER + dy * _RADIUS
        axes.append(
            f'<line x1="{_CENTER}" y1="{_CENTER}" x2="{_q(x)}" y2="{_q(y)}" stroke="#d0d7de"/>'
        )
        lx, ly = _CENTER + dx * (_RADIUS + 22), _CENTER + dy * (_RADIUS + 14)
        shown = dims.get(name)
        labels.append(
            f'<text x="{_q(lx)}" y="{_q(ly)}" font-size="10" text-anchor="middle">'
            f"{_e(name)} {_e(shown)}</text>"
        )
        share = Decimal(shown) / 100 if shown is not None else Decimal(0)
        points.append(f"{_q(_CENTER + dx * _RADIUS * share)},{_q(_CENTER + dy * _RADIUS * share)}")
    polygon = (
        f'<polygon points="{" ".join(points)}" fill="{color}" fill-opacity="0.25" '
        f'stroke="{color}" stroke-width="2"/>'
    )
    title = f"Dimension scores of run {run.run} (auxiliary, 0-100; a missing dimension is 0)"
    return (
        f'<figure class="radar"><svg width="380" height="380" '
        f'viewBox="0 0 380 380" role="img" aria-label="{_e(title)}"><title>{_e(title)}</title>'
        + "".join(grid + axes)
        + polygon
        + "".join(labels)
        + f"</svg><figcaption>{_e(run.run)} ({_e(run.profile)})</figcaption></figure>"
    )


def _t(table: Table) -> str:
    return _table(table.head, table.rows, numeric=table.numeric)


def _summary(section: Section) -> str:
    return (
        '<h3>Models</h3><div id="summary">'
        + _t(runs_table(section))
        + "</div><h3>Failure classification (counts over planned attempts)</h3>"
        + _table(FAILURES_HEAD, failure_rows(section))
        + "<h3>Variant diagnostics (never change a score)</h3>"
        + f'<p class="muted">{_e(VARIANT_NOTE)}</p><div id="variant-diagnostics">'
        + _t(diagnostics_table(section))
        + "</div><h3>Efficiency (efficiency-v2)</h3>"
        + _t(efficiency_table(section))
    )


def _calibration(section: Section) -> str:
    t = calibration_tables(section)

    def block(title: str, head: list[str], body: list[list[Any]]) -> str:
        return f"<h4>{_e(title)}</h4>" + (_table(head, body) if body else "<p>None.</p>")

    return "".join(
        [
            f'<p class="muted">{_e(INTRO)}</p>',
            '<div id="calibration">' + _table(t.head, t.rows) + "</div>",
            *(f'<p class="bad">{_e(line)}</p>' for line in t.failed_controls),
            *(block(title, head, body) for title, head, body in t.blocks),
        ]
    )


def _fairness(section: Section) -> str:
    f = section.fairness
    if f is None:
        return '<p class="muted">Not ranked: self-test and calibration runs are no models.</p>'
    parts = [f"<p>Fairness class: <strong>{_e(f.class_)}</strong>"]
    if f.differing_controls:
        parts.append("; controls that differ: " + _e(", ".join(f.differing_controls)))
    if f.missing_invocation_evidence:
        parts.append(
            "; invocation evidence missing for: " + _e(", ".join(f.missing_invocation_evidence))
        )
    if f.disclosed_differences:
        parts.append("; disclosed variables that differ: ")
        parts.append(_e(", ".join(f.disclosed_differences)))
    parts.append("</p>")
    return "".join(parts) + _table(FAIRNESS_HEAD, fairness_rows(f))


def _cases(section: Section) -> str:
    return '<div id="cases">' + _t(cases_table(section, questions=True)) + "</div>"


def _pre(label: str, text: Any) -> str:
    if text is None:
        return ""
    return f"<h4>{_e(label)}</h4><pre>{_e(text)}</pre>"


def _rows_table(columns: list[Column], rows: list[Any], limit: int = 50) -> str:
    head = [f"{c.name} ({c.type})" for c in columns]
    shown = [[json.dumps(v, ensure_ascii=False) for v in row] for row in rows[:limit]]
    more = f'<p class="muted">{len(rows) - limit} more rows</p>' if len(rows) > limit else ""
    return _table(head, shown) + more


def _caserun(c: CaseRun) -> str:
    s = c.score
    verdict = (
        f"total {s.total}, result-correct {_e(s.result_correct)}, failure {s.failure_kind}"
        if s
        else (f"cancelled: {c.cancel.reason}" if c.cancel else "no terminal event")
    )
    if c.variants is not None and c.variants.flags:
        verdict += "; variant flags (diagnostic): " + ", ".join(c.variants.flags)
    css = "ok" if s and s.result_correct else "bad"
    parts = [
        f'<details class="caserun"><summary><span class="{css}">{_e(c.run)} / '
        f"{_e(c.case)} / attempt {c.attempt}</span>: {_e(verdict)}</summary>",
        _pre("Prompt", c.prompt),
    ]
    r = c.response
    if r is not None:
        parts.append(_pre("Raw output", r.raw_output))
        if r.failure:
            parts.append(_pre("Provider failure", f"{r.failure.kind}: {r.failure.message}"))
    p = c.parsed
    if p is not None:
        mode = (
            "strict"
            if p.protocol_strict
            else "fence recovered"
            if p.recovered_from_fence
            else "imported (a benchmark's prediction: plain SQL)"
            if p.imported is True
            else "not strict"
        )
        parts.append(f"<p>Protocol: {_e(mode)}; contract error: {_e(p.error)}</p>")
        parts.append(_pre("SQL", p.sql))
    g = c.guard
    if g is not None:
        why = "; ".join(f"{v.check}: {v.message}" for v in g.violations)
        word = "passed" if g.passed else "rejected"
        parts.append(f"<p>Guard: {_e(word)} {_e(why) if why else ''}</p>")
    x = c.execution
    if x is not None:
        parts.append(
            f"<p>Execution: {'ok' if x.ok else _e(x.error_kind)}, {x.row_count} rows"
            f"{', truncated' if x.truncated else ''}, {x.sql_us} us, tries {x.tries}</p>"
        )
        if x.error_message:
            parts.append(_pre("Execution error", x.error_message))
        parts.append("<h4>The model's rows</h4>" + _rows_table(x.columns, x.rows))
    d = c.diff
    if d is not None:
        parts.append(
            f"<p>Result diff: {d.missing_rows} missing rows, {d.extra_rows} extra rows "
            f"({d.matched} matched of {d.expected_rows} expected, {d.actual_rows} "
            f"returned); alignment {_e(d.alignment)}; F1 {_e(d.f1)}; "
            f"order ok {_e(d.order_ok)}</p>"
        )
    if s is not None:
        items: list[list[Any]] = [
            [k, v] for k, v in sorted(msgspec.structs.asdict(s.items).items())
        ]
        parts.append("<h4>Score items (scorer " + _e(s.scorer_version) + ")</h4>")
        parts.append(_table(["item", "points"], [*items, ["total", s.total]], numeric=1))
    if c.cancel is not None:
        parts.append(f"<p>Cancelled: {_e(c.cancel.reason)}: {_e(c.cancel.message)}</p>")
    v = c.variants
    if v is not None:
        flags = ", ".join(v.flags) or "none"
        parts.append(
            f'<p class="variant-flags">Variant flags (diagnostic, never change the score): '
            f"<strong>{_e(flags)}</strong></p>"
        )
        outcomes = [
            [o.variant, o.non_interfering, o.result_correct, o.moved, o.error_kind]
            for o in v.outcomes
        ]
        head = ["variant", "non-interfering", "result-correct", "answer moved", "error"]
        parts.append(_table(head, outcomes))
    events = [[ev.seq, ev.type, ev.leaf_hash] for ev in c.events]
    parts.append("<h4>Events</h4>" + _table(["seq", "type", "leaf hash"], events))
    parts.append("</details>")
    return "".join(parts)


def _gold(section: Section) -> str:
    if section.gold is None:
        return ""
    parts = ['<h3 class="bad">Gold results (internal view: do not publish)</h3>']
    for g in section.gold:
        parts.append(f"<h4>{_e(g.case)} ({_e(g.digest)})</h4>")
        parts.append(_rows_table(g.columns, g.rows, limit=200))
    return "".join(parts)


def _benchmark(section: Section) -> str:
    t = benchmark_tables(section)
    if t is None:
        return ""
    out = f"<h3>{_e(t.title)}</h3><p>{_e(t.intro)}</p>" + _table(t.head, t.rows, numeric=1)
    if t.detail:
        out += "<h4>Where they differ</h4>" + _table(t.detail_head, t.detail)
    return out


def _slices(section: Section) -> str:
    t = slice_tables(section)
    if t is None:
        return ""
    out = f'<h3>{_e(t.title)}</h3><p>{_e(t.intro)}</p><div id="slices">'
    out += _table(t.head, t.rows, numeric=1)
    out += "<h4>By dimension</h4>" + _table(t.dimension_head, t.dimension_rows, numeric=2)
    if t.detail:
        out += "<h4>Not in the shares</h4>" + _table(t.detail_head, t.detail)
    return out + "</div>"


def _claims(section: Section) -> str:
    t = claim_tables(section)
    if t is None:
        return ""
    out = f'<h3>{_e(t.title)}</h3><p>{_e(t.intro)}</p><div id="claims">'
    return out + _table(t.head, t.rows, numeric=1) + "</div>"


def _drilldown(section: Section) -> str:
    t = caserun_diagnostics_table(section)
    if t is None:
        return ""
    return (
        "<h3>Per attempt: understanding slice and claims (diagnostic)</h3>"
        '<div id="attempt-diagnostics">' + _table(t.head, t.rows) + "</div>"
    )


def _section(section: Section) -> str:
    bank = section.bank
    if section.kind == "calibration":
        return "".join(
            [
                f"<section><h2>{_e(section.title)}</h2>",
                f"<p>Bank <code>{_e(bank.id)}</code> version <code>{_e(bank.version)}"
                f"</code>, hash <code>{_e(bank.hash)}</code>, published at seq "
                f"{bank.published_seq}. Scorer versions: "
                f"{_e(', '.join(section.scorer_versions))}.</p>",
                _calibration(section),
                _gold(section),
                "</section>",
            ]
        )
    runs = model_runs(section)
    radars = "".join(_radar(r, _PALETTE[i % len(_PALETTE)]) for i, r in enumerate(runs))
    return "".join(
        [
            f"<section><h2>{_e(section.title)}</h2>",
            f"<p>Bank <code>{_e(bank.id)}</code> version <code>{_e(bank.version)}</code>, "
            f"hash <code>{_e(bank.hash)}</code>, published at seq {bank.published_seq}. "
            f"Scorer versions: {_e(', '.join(section.scorer_versions))}.</p>",
            _summary(section),
            _benchmark(section),
            _slices(section),
            _claims(section),
            "<h3>Invocation controls and fairness</h3>",
            _fairness(section),
            '<h3>Dimension and difficulty scores (auxiliary)</h3><div id="radar">' + radars,
            "</div>" + _t(dimensions_table(section)),
            "<h3>Cases</h3>",
            _cases(section),
            "<h3>CaseRuns</h3>",
            "".join(_caserun(c) for c in section.caseruns),
            _drilldown(section),
            _gold(section),
            "</section>",
        ]
    )


def render_html(report: Report) -> str:
    """The self-contained HTML page of a report."""
    cp = report.checkpoint
    scorer = report.scorer.requested or "as recorded by each run"
    body = [
        "<h1>caseledger report</h1>",
        f'<p class="notice">{_e(report.notice)}</p>',
        f"<p>Contract <code>{_e(report.contract)}</code>; built from the first "
        f"{cp.tree_size} events, root <code>{_e(cp.root_hash)}</code> (check it with "
        "<code>caseledger verify</code> and <code>caseledger prove</code>); scorer: "
        f"{_e(scorer)}.</p>",
    ]
    notes = withdrawn_lines(report.withdrawn, len(report.sections))
    if notes:
        body.append(
            '<div id="withdrawn">'
            + "".join(f'<p class="notice">{_e(n)}</p>' for n in notes)
            + "</div>"
        )
    if not report.sections and not notes:
        body.append("<p>No runs in this ledger at this tree size.</p>")
    body += [_section(s) for s in report.sections]
    body.append("<h2>How to read this report</h2><ul>")
    body += [f"<li>{_e(item)}</li>" for item in report.how_to_read]
    body.append("</ul>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>caseledger report (tree size {cp.tree_size})</title>"
        f"<style>{_STYLE}</style></head><body>" + "".join(body) + "</body></html>\n"
    )
