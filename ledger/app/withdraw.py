"""Withdraw a run: append a signed ``run.withdrawn.v1`` to the run's own stream.

A misconfigured run (a wrong port, a program that cannot start) otherwise stays
ranked in every later report. Withdrawing it deletes nothing: its events stay
and verify; reports, ``runs`` and the gate leave it out by default and say so,
and ``--include-withdrawn`` shows it marked with the reason (docs/events.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.app.snapshot import read_state
from ledger.errors import UsageError
from ledger.events import RunWithdrawn
from ledger.keys import Signer
from ledger.store import Draft, Ledger

__all__ = ["Withdrawn", "withdraw_run"]

#: The longest reason kept (a reason is one line for a person, not a log).
MAX_REASON = 500


@dataclass(frozen=True)
class Withdrawn:
    """What was appended: the run, its seq and the reason."""

    run: str
    seq: int
    reason: str


def withdraw_run(ledger: Ledger, signer: Signer, run_id: str, reason: str) -> Withdrawn:
    """Append the RunWithdrawn of ``run_id``, signed by ``signer`` (an operator key).

    A run is withdrawn once: a second withdrawal is refused, so the reason a
    report shows is the one first given.

    Raises:
        UsageError: an empty or multi-line reason, a key that is not an operator's,
            a run the ledger does not hold, or a run already withdrawn.
    """
    reason = reason.strip()
    if not reason or "\n" in reason or len(reason) > MAX_REASON:
        raise UsageError(
            "--reason must be one non-empty line of at most "
            f"{MAX_REASON} characters (it is shown beside the run in every report)",
            hint='e.g. --reason "wrong port: every attempt was refused"',
        )
    if signer.role != "operator":
        raise UsageError(
            f"key {signer.name} is a {signer.role} key; withdrawing a run takes the operator key"
        )
    runs = read_state(ledger).state.runs
    info = runs.get(run_id)
    if info is None:
        raise UsageError(
            f"no run {run_id!r} in {ledger.location}",
            hint="`caseledger runs --include-withdrawn` lists every run",
        )
    if info.withdrawn is not None:
        raise UsageError(
            f"run {run_id} is already withdrawn (seq {info.withdrawn_seq}, reason: "
            f"{info.withdrawn.reason}); nothing was appended",
            hint="a run is withdrawn once; its first reason stays",
        )
    (seq,) = ledger.append([Draft(RunWithdrawn, run_id, {"reason": reason})], signer)
    return Withdrawn(run_id, seq, reason)
