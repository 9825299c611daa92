"""Regenerate docs/report.schema.json, docs/report-v2.schema.json,
docs/report-v3.schema.json and docs/gate-verdict.schema.json from the schema structs.

Usage: python tools/gen_report_schema.py [--check]
The files are generated from projections/report/schema.py (``Report``, ``ReportV2``,
``ReportV3`` and ``GateVerdict``) with ``msgspec.json.schema``; never edit them by hand.
``--check`` writes nothing and exits 1 when a checked-in file differs
(tests/projections/test_report_schema.py asserts the same).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from projections.report.schema import (  # noqa: E402
    report_schema,
    report_v2_schema,
    report_v3_schema,
    verdict_schema,
)

FILES = {
    REPO / "docs" / "report.schema.json": report_schema,
    REPO / "docs" / "report-v2.schema.json": report_v2_schema,
    REPO / "docs" / "report-v3.schema.json": report_v3_schema,
    REPO / "docs" / "gate-verdict.schema.json": verdict_schema,
}


def text(schema: dict[str, Any]) -> str:
    """The file text of a schema: sorted keys, two-space indent, final newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    """Write (or with --check, compare) every generated schema file."""
    check = "--check" in argv
    stale = []
    for path, make in FILES.items():
        wanted = text(make())
        if path.exists() and path.read_text("utf-8") == wanted:
            continue
        stale.append(path.relative_to(REPO))
        if not check:
            path.write_text(wanted, "utf-8")
    for path in stale:
        print(f"{'stale' if check else 'wrote'} {path}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
