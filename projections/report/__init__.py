"""Reports: canonical JSON built from the fold, and its Markdown and HTML views."""

from __future__ import annotations

from typing import Any

from projections.report.build import build_report, run_overview, to_json
from projections.report.html import render_html
from projections.report.markdown import render_markdown

__all__ = ["FORMATS", "build_report", "render", "run_overview"]

FORMATS = ("json", "md", "html")


def render(report: dict[str, Any], fmt: str) -> bytes:
    """The bytes of a report in ``json`` (canonical, the source), ``md`` or ``html``."""
    if fmt == "json":
        return to_json(report)
    if fmt == "md":
        return render_markdown(report).encode("utf-8")
    if fmt == "html":
        return render_html(report).encode("utf-8")
    raise ValueError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")
