"""Build a report's bytes from a ledger file (the application layer around projections.report)."""

from __future__ import annotations

from collections.abc import Sequence

from ledger.app.snapshot import read_state
from ledger.store import Ledger
from ledger.stores import Location
from projections.report import build_report, render

__all__ = ["report_bytes"]


def report_bytes(
    ledger_path: Location,
    *,
    fmt: str,
    at_size: int | None = None,
    runs: Sequence[str] | None = None,
    scorer: str | None = None,
    with_gold: bool = False,
    include_withdrawn: bool = False,
) -> tuple[bytes, int, bytes]:
    """The report bytes, the tree size they were built at and that tree's root hash.

    The same ledger prefix, format and options always give the same bytes. Every
    event the report is built from is checked against its leaf hash and the chain
    while it is read, and the root is the tree head of exactly those leaves.
    """
    with Ledger.open(ledger_path, readonly=True) as ledger:
        snap = read_state(ledger, at_size=at_size, runs=runs or None)
    report = build_report(
        snap.state,
        root_hash=snap.root,
        scorer=scorer,
        runs=runs or None,
        with_gold=with_gold,
        include_withdrawn=include_withdrawn,
    )
    return render(report, fmt), snap.size, snap.root
