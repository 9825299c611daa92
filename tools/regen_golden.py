"""Regenerate golden files from the hand-written samples; review the diff before committing.

Usage: python tools/regen_golden.py
Writes tests/ledger/golden/events.jsonl: the canonical bytes of one instance of
every event type (tests/ledger/event_samples.py), one per line, in the order
of the samples. Any change to the encoding shows up as a diff of this file.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "ledger"))

from event_samples import SAMPLES  # noqa: E402

from ledger.codec import encode  # noqa: E402

GOLDEN = REPO / "tests" / "ledger" / "golden" / "events.jsonl"


def main() -> None:
    """Write the golden file and say how many lines changed."""
    lines = [encode(event) + b"\n" for event in SAMPLES]
    old = GOLDEN.read_bytes().splitlines(keepends=True) if GOLDEN.exists() else []
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_bytes(b"".join(lines))
    changed = sum(1 for i, line in enumerate(lines) if i >= len(old) or old[i] != line)
    print(f"wrote {GOLDEN.relative_to(REPO)}: {len(lines)} events, {changed} lines changed")


if __name__ == "__main__":
    main()
