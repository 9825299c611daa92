"""Build a report's bytes from a ledger file (the application layer around projections.report)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ledger.projstore import checkpoint_root, load_state
from ledger.store import Ledger
from projections.report import build_report, render

__all__ = ["report_bytes"]


def report_bytes(
    ledger_path: Path,
    *,
    fmt: str,
    at_size: int | None = None,
    runs: Sequence[str] | None = None,
    scorer: str | None = None,
    with_gold: bool = False,
) -> tuple[bytes, int, bytes]:
    """The report bytes, the tree size they were built at and that tree's root hash.

    The same ledger prefix, format and options always give the same bytes.
    """
    with Ledger.open(ledger_path, readonly=True) as ledger:
        state = load_state(ledger, at_size=at_size, runs=runs or None)
        root = checkpoint_root(ledger, state.size)
    report = build_report(
        state, root_hash=root, scorer=scorer, runs=runs or None, with_gold=with_gold
    )
    return render(report, fmt), state.size, root
