"""A report's bytes in one of its formats: canonical JSON (the source), Markdown, HTML."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from projections.report.build import from_plain, to_json
from projections.report.html import render_html
from projections.report.markdown import render_markdown
from projections.report.schema import Report, SectionStatistics

__all__ = ["FORMATS", "render"]

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
    if not isinstance(report, Report):
        report = from_plain(report)
    if fmt == "json":
        return to_json(report)
    if fmt == "md":
        return render_markdown(report, statistics).encode("utf-8")
    if fmt == "html":
        return render_html(report, statistics).encode("utf-8")
    raise ValueError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")
