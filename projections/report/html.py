"""The HTML view of a report: ONE self-contained file made only from the report struct.

No external script, stylesheet, font or image, and a Content-Security-Policy
that forbids every fetch and allows exactly one inline script (by its SHA-256):
the page can be opened offline and makes no network request. Every table
comes from ``tables.py``; each wide table scrolls inside its own box, so the
page itself fits a laptop (1400 px) and a phone (400 px), and every column that
is a metric carries its one-line definition (on hover and under the table).

The evidence of the CaseRuns (prompt, raw output, SQL, guard, rows, diff,
score items, variants, events) is embedded ONCE as a compact JSON blob: long
texts that repeat (the prompt paragraphs every attempt of a case shares, the
same SQL or output) are stored once and referenced by index. The inline script
draws one CaseRun's evidence when its row is opened, with ``textContent`` only
(no markup is ever read from the data). This keeps the file near 3 KB per
CaseRun instead of 21 KB. The radar is inline SVG whose coordinates are
computed in Decimal with fixed places, so the bytes never depend on float
formatting; it has one axis per dimension the bank has.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal, localcontext
from typing import Any

import msgspec

from ledger.events import Column
from ledger.harness.score import SCORERS
from projections.aggregates import DIMENSIONS
from projections.report.diagnostic_tables import (
    benchmark_tables,
    caserun_diagnostics_table,
    claim_tables,
    slice_tables,
)
from projections.report.html_parts import (
    _CENTER,
    _CSP,
    _CSP_V3,
    _PALETTE,
    _PI,
    _RADIUS,
    _SCRIPT,
    _SCRIPT_V3,
    _STYLE,
    _STYLE_V3,
    _e,
    _hash,
    _is_number,
    _md,
    _plain,
    _q,
)
from projections.report.legend import column_definitions, how_to_read
from projections.report.schema import (
    CONTRACT_V3,
    CaseRun,
    Report,
    RunEntry,
    Score,
    Section,
    SectionStatistics,
)
from projections.report.tables import (
    CASERUNS_HEAD,
    FAILURES_HEAD,
    FAIRNESS_HEAD,
    INTRO,
    VARIANT_NOTE,
    Table,
    calibration_tables,
    caserun_row,
    cases_table,
    diagnostics_table,
    dimensions_table,
    efficiency_table,
    failure_rows,
    fairness_rows,
    fairness_sentences,
    model_runs,
    runs_table,
    sql_ran,
    statistics_tables,
    withdrawn_lines,
)

__all__ = ["render_html", "render_html_chunks"]


def numeric_columns(rows: list[list[Any]]) -> list[bool]:
    """Which columns hold numbers: every cell that is not empty (``None``) is a number
    and one is (issue 35: numbers align right in every table of the ``/3`` view)."""
    width = max((len(r) for r in rows), default=0)
    return [
        any(j < len(r) and r[j] is not None for r in rows)
        and all(_is_number(r[j]) for r in rows if j < len(r) and r[j] is not None)
        for j in range(width)
    ]


def _table(
    head: list[str],
    rows: list[list[Any]],
    numeric: int = 0,
    *,
    defined: list[tuple[str, str]] | None = None,
    first: list[str] | None = None,
    v3: bool = False,
) -> str:
    """A table in its own horizontally scrolling box. ``defined``: the column definitions
    (``legend.column_definitions``), shown on hover of each head and listed under the
    table. ``first``: raw HTML of an extra leading cell per row (the evidence buttons).
    ``v3``: the ``/3`` view, whose number columns align right whatever ``numeric`` says."""
    align = numeric_columns(rows) if v3 else None
    return "".join(_table_chunks(head, rows, numeric, defined=defined, first=first, align=align))


#: Table rows written at a time by :func:`_table_chunks`.
_ROWS = 512


def _table_chunks(
    head: list[str],
    rows: Iterable[list[Any]],
    numeric: int = 0,
    *,
    defined: list[tuple[str, str]] | None = None,
    first: Iterable[str] | None = None,
    align: Sequence[bool] | None = None,
) -> Iterator[str]:
    """:func:`_table` in pieces of ``_ROWS`` rows, the rows (and ``first`` cells, taken
    one per row) read as they are written. ``align``: per column, whether it aligns right
    (instead of every column from ``numeric`` on)."""
    defs = dict(defined or [])
    ths = []
    for h in (["evidence"] if first is not None else []) + head:
        text = defs.get(h) or next((t for k, t in defs.items() if h.endswith(k)), None)
        title = f' title="{_e(text)}"' if text else ""
        ths.append(f"<th{title}>{_e(h)}</th>")
    out = ['<div class="scroll"><table><thead><tr>', *ths, "</tr></thead><tbody>"]
    lead = None if first is None else iter(first)
    for row in rows:
        cells = [] if lead is None else [f"<td>{next(lead)}</td>"]
        for i, value in enumerate(row):
            right = (i < len(align) and align[i]) if align is not None else numeric and i >= numeric
            css = ' class="num"' if right else ""
            cells.append(f"<td{css}>{_e(value)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
        if len(out) >= _ROWS:
            yield "".join(out)
            out = []
    out.append("</tbody></table></div>")
    if defs:
        items = "".join(f"<dt>{_e(h)}</dt><dd>{_e(text)}</dd>" for h, text in defs.items())
        out.append(
            '<details class="defs"><summary>What the columns mean</summary>'
            f"<dl>{items}</dl></details>"
        )
    yield "".join(out)


def _t(table: Table, diagnostics: bool = False, v3: bool = False) -> str:
    """A table of ``tables.py`` with its column definitions."""
    defined = column_definitions(table.head, diagnostics)
    return _table(table.head, table.rows, numeric=table.numeric, defined=defined, v3=v3)


# ----------------------------------------------------------------- the radar


def _cos_sin(k: int, n: int) -> tuple[Decimal, Decimal]:
    """(cos, sin) of axis ``k`` of ``n``, clockwise from the top (y points down), by
    Taylor series in Decimal: the same digits on every machine."""
    with localcontext() as ctx:
        ctx.prec = 34
        x = 2 * _PI * k / n - _PI / 2
        while x > _PI:
            x -= 2 * _PI
        cos, sin, term, i = Decimal(0), Decimal(0), Decimal(1), 0
        while True:
            if i % 4 == 0:
                cos += term
            elif i % 4 == 1:
                sin += term
            elif i % 4 == 2:
                cos -= term
            else:
                sin -= term
            i += 1
            term = term * x / i
            if abs(term) < Decimal("1e-30"):
                return +cos, +sin


def _axes(section: Section) -> list[str]:
    """The dimensions of the section's bank: those of DIMENSIONS its cases have, in that
    order, then any other (``unassigned``)."""
    have = {c.dimension for c in section.cases}
    return [d for d in DIMENSIONS if d in have] + sorted(have - set(DIMENSIONS))


def _radar(run: RunEntry, color: str, dims: list[str]) -> str:
    """One axis per dimension the bank has (a bank's absent dimensions are left out; a
    dimension the run has no score in is marked n/a and skipped by the polygon)."""
    n = len(dims)
    units = [_cos_sin(k, n) for k in range(n)]
    grid = []
    for level in (Decimal("0.25"), Decimal("0.5"), Decimal("0.75"), Decimal(1)):
        pts = " ".join(
            f"{_q(_CENTER + dx * _RADIUS * level)},{_q(_CENTER + dy * _RADIUS * level)}"
            for dx, dy in units
        )
        grid.append(f'<polygon points="{pts}" fill="none" stroke="#d0d7de"/>')
    axes, labels, points = [], [], []
    for (dx, dy), name in zip(units, dims, strict=True):
        x, y = _CENTER + dx * _RADIUS, _CENTER + dy * _RADIUS
        axes.append(
            f'<line class="axis" x1="{_CENTER}" y1="{_CENTER}" x2="{_q(x)}" y2="{_q(y)}" '
            'stroke="#d0d7de"/>'
        )
        lx, ly = _CENTER + dx * (_RADIUS + 22), _CENTER + dy * (_RADIUS + 14)
        shown = run.scores.dimensions.get(name)
        labels.append(
            f'<text x="{_q(lx)}" y="{_q(ly)}" font-size="10" text-anchor="middle">'
            f"{_e(name)} {_e(shown) if shown is not None else 'n/a'}</text>"
        )
        if shown is not None:
            share = Decimal(shown) / 100
            points.append(
                f"{_q(_CENTER + dx * _RADIUS * share)},{_q(_CENTER + dy * _RADIUS * share)}"
            )
    shape = "polygon" if len(points) > 2 else "polyline"
    polygon = (
        f'<{shape} points="{" ".join(points)}" fill="{color}" fill-opacity="0.25" '
        f'stroke="{color}" stroke-width="2"/>'
    )
    title = (
        f"Dimension scores of run {run.run} (auxiliary, 0-100; one axis per dimension of "
        "the bank, n/a: no score)"
    )
    return (
        f'<figure class="radar"><svg width="460" height="380" data-axes="{n}" '
        f'viewBox="-40 0 460 380" role="img" aria-label="{_e(title)}"><title>{_e(title)}</title>'
        + "".join(grid + axes)
        + polygon
        + "".join(labels)
        + f"</svg><figcaption>{_e(run.run)} ({_e(run.profile)})</figcaption></figure>"
    )


# ----------------------------------------------------------------- section tables


#: The Models table's columns a reader compares first, leading in the ``/3`` view so a
#: phone (390 px) shows them before any scrolling (issue 35).
_MODELS_FIRST = ("rank", "run", "result-correct", "score (auxiliary)")


def _models_first(table: Table) -> Table:
    """The runs table with :data:`_MODELS_FIRST` leading, the rest in their order."""
    order = [table.head.index(h) for h in _MODELS_FIRST]
    order += [i for i in range(len(table.head)) if i not in order]
    return Table([table.head[i] for i in order], [[row[i] for i in order] for row in table.rows])


def _summary(section: Section, v3: bool = False) -> str:
    runs = _models_first(runs_table(section)) if v3 else runs_table(section)
    failures = column_definitions(FAILURES_HEAD, failures=v3)
    note = _md(VARIANT_NOTE) if v3 else _e(VARIANT_NOTE)
    return (
        '<h3>Models</h3><div id="summary">'
        + _t(runs, v3=v3)
        + "</div><h3>Failure classification (counts over planned attempts)</h3>"
        + _table(FAILURES_HEAD, failure_rows(section), defined=failures, v3=v3)
        + "<h3>Variant diagnostics (never change a score)</h3>"
        + f'<p class="muted">{note}</p><div id="variant-diagnostics">'
        + _t(diagnostics_table(section), diagnostics=True, v3=v3)
        + '</div><h3>Efficiency (efficiency-v2)</h3><div id="efficiency">'
        + _t(efficiency_table(section), v3=v3)
        + "</div>"
    )


def _calibration(section: Section, v3: bool = False) -> str:
    t = calibration_tables(section)

    def block(title: str, head: list[str], body: list[list[Any]]) -> str:
        return f"<h4>{_e(title)}</h4>" + (_table(head, body, v3=v3) if body else "<p>None.</p>")

    return "".join(
        [
            f'<p class="muted">{_e(INTRO)}</p>',
            '<div id="calibration">' + _table(t.head, t.rows, v3=v3) + "</div>",
            *(f'<p class="bad">{_e(line)}</p>' for line in t.failed_controls),
            *(block(title, head, body) for title, head, body in t.blocks),
        ]
    )


def _fairness(section: Section, v3: bool = False) -> str:
    f = section.fairness
    if f is None:
        return '<p class="muted">Not ranked: self-test and calibration runs are no models.</p>'
    if v3:  # issue 35: sentences true of the recorded controls (tables.fairness_sentences)
        said = "".join(f"<p>{_e(line)}</p>" for line in fairness_sentences(f))
        return said + _table(FAIRNESS_HEAD, fairness_rows(f), v3=v3)
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


def _gold(section: Section, v3: bool = False) -> str:
    if section.gold is None:
        return ""
    parts = ['<h3 class="bad">Gold results (internal view: do not publish)</h3>']
    for g in section.gold:
        parts.append(f"<h4>{_e(g.case)} ({_e(g.digest)})</h4>")
        head, shown, more = _rows(g.columns, g.rows, limit=200)
        parts.append(_table(head, shown, v3=v3))
        if more:
            parts.append(f'<p class="muted">{_e(more)}</p>')
    return "".join(parts)


def _benchmark(section: Section, v3: bool = False) -> str:
    t = benchmark_tables(section)
    if t is None:
        return ""
    out = f"<h3>{_e(t.title)}</h3><p>{_e(t.intro)}</p>" + _table(t.head, t.rows, 1, v3=v3)
    if t.detail:
        out += "<h4>Where they differ</h4>" + _table(t.detail_head, t.detail, v3=v3)
    return out


def _slices(section: Section, v3: bool = False) -> str:
    t = slice_tables(section)
    if t is None:
        return ""
    out = f'<h3>{_e(t.title)}</h3><p>{_e(t.intro)}</p><div id="slices">'
    out += _table(t.head, t.rows, numeric=1, v3=v3)
    out += "<h4>By dimension</h4>" + _table(t.dimension_head, t.dimension_rows, 2, v3=v3)
    if t.detail:
        out += "<h4>Not in the shares</h4>" + _table(t.detail_head, t.detail, v3=v3)
    return out + "</div>"


def _claims(section: Section, v3: bool = False) -> str:
    t = claim_tables(section)
    if t is None:
        return ""
    out = f'<h3>{_e(t.title)}</h3><p>{_e(t.intro)}</p><div id="claims">'
    return out + _table(t.head, t.rows, numeric=1, v3=v3) + "</div>"


def _drilldown(section: Section, v3: bool = False) -> str:
    t = caserun_diagnostics_table(section)
    if t is None:
        return ""
    return (
        "<h3>Per attempt: understanding slice and claims (diagnostic)</h3>"
        '<div id="attempt-diagnostics">' + _table(t.head, t.rows, v3=v3) + "</div>"
    )


# ----------------------------------------------------------------- CaseRun evidence


def _rows(
    columns: list[Column], rows: list[Any], limit: int = 50
) -> tuple[list[str], list[list[str]], str | None]:
    """Result rows as shown: ``name (type)`` heads, the first ``limit`` rows with each cell
    as JSON, and ``N more rows`` when cut."""
    head = [f"{c.name} ({c.type})" for c in columns]
    shown = [[json.dumps(v, ensure_ascii=False) for v in row] for row in rows[:limit]]
    more = f"{len(rows) - limit} more rows" if len(rows) > limit else None
    return head, shown, more


def _verdict(c: CaseRun) -> str:
    s = c.score
    if s:
        text = (
            f"total {s.total}, result-correct {_plain(s.result_correct)}, failure {s.failure_kind}"
        )
    else:
        text = f"cancelled: {c.cancel.reason}" if c.cancel else "no terminal event"
    if c.variants is not None and c.variants.flags:
        text += "; variant flags (diagnostic): " + ", ".join(c.variants.flags)
    return text


def score_items(score: Score) -> list[list[str]]:
    """A score's items as the drill-down lists them (issue 35): in the formula's order
    (docs/scoring.md, the order of ``ScoreItems``), each with its maximum under the
    score's scorer (``rows 0 of 45``), then the total of 100. A scorer this code does
    not know lists its items without a maximum."""
    scorer = SCORERS.get(score.scorer_version)
    items = msgspec.structs.asdict(score.items)
    if scorer is None:
        return [*([k.replace("_", " "), str(v)] for k, v in items.items()), ["total", score.total]]
    points = scorer.points
    rows = [[k.replace("_", " "), f"{v} of {getattr(points, k)}"] for k, v in items.items()]
    return [*rows, ["total", f"{score.total} of 100"]]


def _evidence(c: CaseRun, head: Any, v3: bool = False) -> list[Any]:
    """The blocks of one CaseRun's drill-down (see ``_SCRIPT``); ``head`` interns a
    table head and returns its index. Long texts are marked ``("pre", text)`` and
    interned later; a prompt is split into its paragraphs. ``v3`` (issue 35): the result
    diff only when the SQL ran, the score items with their maximum in the formula's order."""
    blocks: list[Any] = [["p", f"{c.run} / {c.case} / attempt {c.attempt}: {_verdict(c)}"]]

    def pre(label: str, text: str | None) -> None:
        if text is not None:
            blocks.extend([["h", label], ["pre", text]])

    if c.prompt is not None:
        blocks.extend([["h", "Prompt"], ["pre", c.prompt.split("\n\n")]])
    r = c.response
    if r is not None:
        pre("Raw output", r.raw_output)
        if r.resolved_model or r.recorded_model:
            blocks.append(
                [
                    "p",
                    f"Model: resolved {_plain(r.resolved_model)}, "
                    f"recorded {_plain(r.recorded_model)}",
                ]
            )
        if r.failure:
            pre("Provider failure", f"{r.failure.kind}: {r.failure.message}")
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
        blocks.append(["p", f"Protocol: {mode}; contract error: {p.error or '-'}"])
        pre("SQL", p.sql)
    g = c.guard
    if g is not None:
        why = "; ".join(f"{v.check}: {v.message}" for v in g.violations)
        blocks.append(["p", f"Guard: {'passed' if g.passed else 'rejected'} {why}".rstrip()])
    x = c.execution
    if x is not None:
        blocks.append(
            [
                "p",
                f"Execution: {'ok' if x.ok else x.error_kind}, {x.row_count} rows"
                f"{', truncated' if x.truncated else ''}, {x.sql_us} us, tries {x.tries}",
            ]
        )
        pre("Execution error", x.error_message)
        cols, shown, more = _rows(x.columns, x.rows)
        blocks.extend([["h", "The model's rows"], ["t", head(cols), shown]])
        if more:
            blocks.append(["p", more, "muted"])
    d = c.diff
    if d is not None and (sql_ran(c) or not v3):
        blocks.append(
            [
                "p",
                f"Result diff: {d.missing_rows} missing rows, {d.extra_rows} extra rows "
                f"({d.matched} matched of {d.expected_rows} expected, {d.actual_rows} "
                f"returned); alignment {d.alignment}; F1 {d.f1}; order ok {_plain(d.order_ok)}",
            ]
        )
    s = c.score
    if s is not None and v3:
        blocks.append(["h", f"Score items (scorer {s.scorer_version})"])
        blocks.append(["t", head(["item", "points of maximum"]), score_items(s)])
    elif s is not None:
        items = [[k, str(v)] for k, v in sorted(msgspec.structs.asdict(s.items).items())]
        blocks.append(["h", f"Score items (scorer {s.scorer_version})"])
        blocks.append(["t", head(["item", "points"]), [*items, ["total", s.total]]])
    if c.cancel is not None:
        blocks.append(["p", f"Cancelled: {c.cancel.reason}: {c.cancel.message}"])
    v = c.variants
    if v is not None:
        flags = ", ".join(v.flags) or "none"
        blocks.append(["p", f"Variant flags (diagnostic, never change the score): {flags}"])
        outcomes = [
            [
                o.variant,
                _plain(o.non_interfering),
                _plain(o.result_correct),
                _plain(o.moved),
                _plain(o.error_kind),
            ]
            for o in v.outcomes
        ]
        vhead = ["variant", "non-interfering", "result-correct", "answer moved", "error"]
        blocks.append(["t", head(vhead), outcomes])
    events = [[str(ev.seq), ev.type, ev.leaf_hash] for ev in c.events]
    blocks.extend([["h", "Events"], ["t", head(["seq", "type", "leaf hash"]), events]])
    return blocks


def _texts(block: list[Any]) -> list[str]:
    """The texts of a ``pre`` block (a prompt's paragraphs, or one text); none otherwise."""
    if block[0] != "pre":
        return []
    return block[1] if isinstance(block[1], list) else [block[1]]


def _key(text: str) -> bytes:
    """What the blob counts a text by: its SHA-256, so counting keeps 32 bytes a text."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def _script_json(text: str) -> str:
    """JSON text made safe inside ``<script>``: ``</`` and ``<!--`` escaped so the element
    cannot end early (applied to whole JSON values, so no pattern spans two pieces)."""
    return text.replace("</", "<\\/").replace("<!--", "<\\u0021--")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _Blob:
    """The CaseRuns' evidence of the whole page, with repeated long texts stored once.

    Built in bounded memory (issue 21): :meth:`add` (while the sections are written)
    keeps only how often each text occurs, by SHA-256; :meth:`chunks` then reads the
    CaseRuns twice more (from the report's spool, one run decoded at a time): once for
    the repeated texts, in order of first use, and once to write each CaseRun's blocks.
    """

    def __init__(self, v3: bool = False) -> None:
        self.v3 = v3
        self.count = 0
        self.heads: list[list[str]] = []
        self._head_index: dict[tuple[str, ...], int] = {}
        self._seen: dict[bytes, int] = {}

    def head(self, names: list[str]) -> int:
        key = tuple(names)
        if key not in self._head_index:
            self._head_index[key] = len(self.heads)
            self.heads.append(names)
        return self._head_index[key]

    def add(self, c: CaseRun) -> int:
        """Count the texts of one CaseRun's evidence; its index in the blob."""
        seen = self._seen
        for block in _evidence(c, self.head, self.v3):
            for text in _texts(block):
                key = _key(text)
                seen[key] = seen.get(key, 0) + 1
        self.count += 1
        return self.count - 1

    def chunks(self, caseruns: Iterable[CaseRun]) -> Iterator[str]:
        """The blob as JSON for a ``<script type="application/json">`` element, in pieces:
        ``{"s":[...],"h":[...],"c":[...]}``, where ``s`` holds the ``pre`` texts (and
        prompt paragraphs) that occur more than once, in order of first use, and each
        CaseRun's blocks refer to them by index. ``caseruns``: the CaseRuns added, in the
        same order (iterated twice)."""
        seen = self._seen
        strings: list[str] = []
        index: dict[bytes, int] = {}
        for c in caseruns:
            for block in _evidence(c, self.head, self.v3):
                for text in _texts(block):
                    key = _key(text)
                    if seen[key] >= 2 and key not in index:
                        index[key] = len(strings)
                        strings.append(text)
        yield _script_json('{"s":' + _dumps(strings) + ',"h":' + _dumps(self.heads) + ',"c":[')
        del strings

        def ref(text: str) -> int | str:
            found = index.get(_key(text))
            return text if found is None else found

        for n, c in enumerate(caseruns):
            out = []
            for b in _evidence(c, self.head, self.v3):
                if b[0] == "pre":
                    value = b[1]
                    b = ["pre", [ref(t) for t in value] if isinstance(value, list) else ref(value)]
                out.append(b)
            yield ("," if n else "") + _script_json(_dumps(out))
        yield "]}"


#: The CaseRuns columns that hold numbers (``/3``: aligned right).
_CASERUNS_NUMBERS = [h in ("attempt", "total", "missing rows", "extra rows") for h in CASERUNS_HEAD]


def _caseruns(section: Section, blob: _Blob) -> Iterator[str]:
    """The CaseRuns table (the same as the Markdown's) with a button per row that opens
    the CaseRun's evidence from the blob, in pieces: the section's CaseRuns are read
    once, as the rows are written. In the ``/3`` view an empty ``div.crf`` before it
    holds the filter and sort controls the page's script makes from its cells."""
    v3 = blob.v3
    pairs = ((blob.add(c), caserun_row(c, ran_only=v3)) for c in section.caseruns)
    rows, buttons = itertools.tee(pairs)  # read in step: at most one pair is buffered
    if v3:
        yield '<div class="crf" role="group" aria-label="Filter and sort the CaseRuns"></div>'
    yield '<div id="caseruns">'
    yield from _table_chunks(
        CASERUNS_HEAD,
        (row for _, row in rows),
        defined=column_definitions(CASERUNS_HEAD),
        align=_CASERUNS_NUMBERS if v3 else None,
        first=(
            f'<button type="button" class="cr" data-cr="{n}" aria-expanded="false">show</button>'
            for n, _ in buttons
        ),
    )
    yield "</div>"


def _statistics(stats: SectionStatistics | None) -> str:
    """Error bars, the pairwise table and rank groups (``caseledger-report/3`` only)."""
    if stats is None:
        return ""
    runs, pairs = statistics_tables(stats)
    out = (
        "<h3>Error bars (95% intervals; the case is the unit)</h3>"
        '<div id="error-bars">' + _t(runs, v3=True) + "</div>"
    )
    if pairs is not None:
        out += (
            "<h3>Paired comparisons (result-correct rate, paired by case)</h3>"
            '<div id="pairs">' + _t(pairs, v3=True) + "</div>"
        )
    return out


def _headline(report: Report, stats: Sequence[SectionStatistics | None] | None) -> str:
    """The headline of every models section, at the top (``caseledger-report/3`` only)."""
    if stats is None:
        return ""
    said = [
        f"<li><strong>{_e(section.title)}</strong>: {_e(s.headline)}</li>"
        for section, s in zip(report.sections, stats, strict=True)
        if s is not None and s.headline is not None
    ]
    return '<h2>Headline</h2><ul id="headline">' + "".join(said) + "</ul>" if said else ""


def _section(
    section: Section, blob: _Blob, stats: SectionStatistics | None = None
) -> Iterator[str]:
    """A section of the page in pieces (its CaseRuns table row by row); the ``/3`` view
    when the blob is (``blob.v3``)."""
    bank, v3 = section.bank, blob.v3
    head = [
        f"<section><h2>{_e(section.title)}</h2>",
        f"<p>Bank <code>{_e(bank.id)}</code> version <code>{_e(bank.version)}</code>, "
        f"hash {_hash(bank.hash, v3)}, published at seq {bank.published_seq}. "
        f"Scorer versions: {_e(', '.join(section.scorer_versions))}.</p>",
    ]
    if section.kind == "calibration":
        yield "".join([*head, _calibration(section, v3), _gold(section, v3), "</section>"])
        return
    runs = model_runs(section)
    dims = _axes(section)
    radars = "".join(_radar(r, _PALETTE[i % len(_PALETTE)], dims) for i, r in enumerate(runs))
    yield "".join(
        [
            *head,
            _summary(section, v3),
            _statistics(stats),
            _benchmark(section, v3),
            _slices(section, v3),
            _claims(section, v3),
            "<h3>Invocation controls and fairness</h3>",
            _fairness(section, v3),
            '<h3>Dimension and difficulty scores (auxiliary)</h3><div id="radar">' + radars,
            "</div>" + _t(dimensions_table(section), v3=v3),
            '<h3>Cases</h3><div id="cases">',
            _t(cases_table(section, questions=True), v3=v3),
            "</div><h3>CaseRuns</h3>",
            '<p class="muted">Show opens a CaseRun\'s evidence: its prompt, raw output, SQL, '
            "guard verdict, the model's rows, the result diff, the score items, variant "
            "outcomes and its events.</p>",
        ]
    )
    yield from _caseruns(section, blob)
    yield _drilldown(section, v3) + _gold(section, v3) + "</section>"


def render_html(
    report: Report, statistics: Sequence[SectionStatistics | None] | None = None
) -> str:
    """The self-contained HTML page of a report; ``statistics`` (one per section,
    ``caseledger-report/3``) adds the headline, error bars and pairwise tables (None:
    the bytes of ``/1`` and ``/2``)."""
    return "".join(render_html_chunks(report, statistics))


def render_html_chunks(
    report: Report, statistics: Sequence[SectionStatistics | None] | None = None
) -> Iterator[str]:
    """The page of :func:`render_html` in pieces, section by section and the evidence blob
    CaseRun by CaseRun, so a report whose CaseRuns are read from a spool is written in
    memory bounded by a section's tables, not by the evidence of every CaseRun."""
    cp = report.checkpoint
    scorer = report.scorer.requested or "as recorded by each run"
    # The views of /1 and /2 are one page (naming /1); /3 names itself (issue 32) and is
    # the only view issue 35 changed (filters, phone layout, sentences): /1 and /2 pages
    # keep their bytes.
    v3 = statistics is not None
    contract = CONTRACT_V3 if v3 else report.contract
    yield (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP_V3 if v3 else _CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>caseledger report (tree size {cp.tree_size})</title>"
        f"<style>{_STYLE + _STYLE_V3 if v3 else _STYLE}</style></head><body>"
    )
    yield (
        "<h1>caseledger report</h1>"
        f'<p class="notice">{_e(report.notice)}</p>'
        f"<p>Contract <code>{_e(contract)}</code>; built from the first "
        f"{cp.tree_size} events, root {_hash(cp.root_hash, v3)} (check it with "
        "<code>caseledger verify</code> and <code>caseledger prove</code>); scorer: "
        f"{_e(scorer)}.</p>"
    )
    yield _headline(report, statistics)
    notes = withdrawn_lines(report.withdrawn, len(report.sections))
    if notes:
        yield (
            '<div id="withdrawn">'
            + "".join(f'<p class="notice">{_md(n) if v3 else _e(n)}</p>' for n in notes)
            + "</div>"
        )
    if not report.sections and not notes:
        yield "<p>No runs in this ledger at this tree size.</p>"
    blob = _Blob(v3)
    for i, s in enumerate(report.sections):
        yield from _section(s, blob, None if statistics is None else statistics[i])
    yield '<h2>How to read this report</h2><ul id="how-to-read">'
    yield "".join(f"<li>{_e(item)}</li>" for item in how_to_read(report))
    yield "</ul>"
    if blob.count:
        yield '<script type="application/json" id="evidence">'
        yield from blob.chunks(_page_caseruns(report))
        yield "</script>"
        yield f"<script>{_SCRIPT_V3 if v3 else _SCRIPT}</script>"
    yield "</body></html>\n"


class _PageCaseRuns:
    """The CaseRuns of every section in page order, iterable more than once (each pass
    reads a spooled section's CaseRuns again, one run at a time)."""

    def __init__(self, report: Report) -> None:
        self._report = report

    def __iter__(self) -> Iterator[CaseRun]:
        for section in self._report.sections:
            yield from section.caseruns


def _page_caseruns(report: Report) -> Iterable[CaseRun]:
    return _PageCaseRuns(report)
