"""Reports: canonical JSON built from the fold, and its Markdown and HTML views.

``schema`` (the one report schema), ``build`` (the report from the fold state at a
tree size; its parts ``caserun_entry``: one CaseRun, ``totals``: a run's totals and
``runs`` row, ``jsonio``: the canonical JSON out and in), ``significance`` (a
section's statistics, ``caseledger-report/3``), ``tables`` (what both views show;
``diagnostic_tables``: the tables beside the score, ``legend``: the column
definitions and how-to-read notes), ``markdown`` and ``html`` (the views;
``html_parts``: the HTML view's style, scripts, CSP and value helpers).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from projections.report.schema import Report, SectionStatistics

if TYPE_CHECKING:
    from projections.report.build import build_report, run_overview

#: Loaded on first use, so that a fold (``projections.quality``, ...) can import
#: ``projections.report.schema`` to build its block without this package importing
#: ``build``, which imports the folds, first.
_LAZY = {"build_report": "projections.report.build", "run_overview": "projections.report.build"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FORMATS", "Report", "build_report", "render", "run_overview"]

FORMATS = ("json", "md", "html")


def render(
    report: Report | Mapping[str, Any],
    fmt: str,
    statistics: Sequence[SectionStatistics | None] | None = None,
) -> bytes:
    """The bytes of a report in ``json`` (canonical, the source), ``md`` or ``html``.

    ``report`` is a :class:`Report` or its JSON document (read back into the schema first);
    ``statistics`` (one per section) adds the ``caseledger-report/3`` views to md and html.
    """
    from projections.report.build import from_plain, to_json
    from projections.report.html import render_html
    from projections.report.markdown import render_markdown

    if not isinstance(report, Report):
        report = from_plain(report)
    if fmt == "json":
        return to_json(report)
    if fmt == "md":
        return render_markdown(report, statistics).encode("utf-8")
    if fmt == "html":
        return render_html(report, statistics).encode("utf-8")
    raise ValueError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")
