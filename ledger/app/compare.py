"""Two runs of one bank compared case by case (``caseledger compare``; docs/statistics.md)."""

from __future__ import annotations

from ledger.app.snapshot import read_state
from ledger.errors import UsageError
from ledger.store import Ledger
from ledger.stores import Location
from projections.report import schema as S
from projections.report.build import run_part, scorer_major, unknown_error
from projections.report.significance import run_comparison

__all__ = ["compare_runs"]


def compare_runs(
    ledger_path: Location, run_a: str, run_b: str, *, scorer: str | None = None
) -> S.RunComparison:
    """Runs ``run_a`` and ``run_b`` paired by case over the cases both planned, each under
    its recorded scorer (or ``scorer``), at the ledger's current size; every event read
    is checked as a report checks it.

    Raises:
        UsageError: a run is unknown, the two are one run, a run is a calibration run, the
            runs are on different banks or (without ``scorer``) scorer majors (exit 2).
    """
    if run_a == run_b:
        raise UsageError(f"compare needs two runs; both are {run_a}")
    with Ledger.open(ledger_path, readonly=True) as ledger:
        snap = read_state(ledger, runs=[run_a, run_b])
    state = snap.state
    unknown = [r for r in (run_a, run_b) if r not in state.runs]
    if unknown:
        raise unknown_error(unknown, snap.size)
    parts = [run_part(state, run, scorer) for run in (run_a, run_b)]
    entries = [p.entry for p in parts if isinstance(p.entry, S.RunEntry)]
    for part in parts:
        if not isinstance(part.entry, S.RunEntry):
            raise UsageError(
                f"run {part.run} is a calibration run: it has no attempts to compare",
                hint="compare model or self-test runs (`caseledger runs` lists them)",
            )
    a, b = entries
    hashes = [state.runs[r].started.bank_hash for r in (run_a, run_b)]
    if hashes[0] != hashes[1]:
        raise UsageError(
            f"run {run_a} answered bank {hashes[0]}, run {run_b} bank {hashes[1]}: runs are "
            "paired by case only on the same bank (content hash)",
            hint="compare two runs of one bank version",
        )
    majors = [scorer_major(p.version) for p in parts]
    if majors[0] != majors[1]:
        raise UsageError(
            f"run {run_a} is scored by scorer {parts[0].version}, run {run_b} by "
            f"{parts[1].version}: different scorer majors are never compared",
            hint="view both under one scorer with --scorer VERSION",
        )
    bank = state.banks[hashes[0]].event
    engine = bank.build.engine
    card_bank = S.ScorecardBank(
        id=bank.bank_id,
        version=bank.version,
        hash=hashes[0],
        **({} if engine == "duckdb" else {"engine": engine}),
    )
    return run_comparison(a, b, card_bank, snap.size)
