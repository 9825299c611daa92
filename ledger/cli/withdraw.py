"""``caseledger runs withdraw RUN --reason TEXT`` (thin: parse, call, print)."""

from __future__ import annotations

import click

from ledger.cli.common import Context, pass_ctx

__all__ = ["withdraw_cmd", "withdrawn_note"]


@click.command("withdraw")
@click.argument("run")
@click.option(
    "--reason", required=True, help="Why (one line, shown beside the run in every report)."
)
@pass_ctx
def withdraw_cmd(ctx: Context, run: str, reason: str) -> None:
    """Withdraw RUN: reports, runs and the gate leave it out by default; its events stay."""
    from ledger.app.withdraw import withdraw_run
    from ledger.keys import load_default_signer
    from ledger.store import Ledger

    signer = load_default_signer(ctx.home)
    with Ledger.open(ctx.ledger) as ledger:
        done = withdraw_run(ledger, signer, run, reason)
    click.echo(
        f"withdrew run {done.run} at seq {done.seq} (reason: {done.reason}); its events stay. "
        "Reports, `runs` and the gate leave it out; --include-withdrawn shows it"
    )


def withdrawn_note(left_out: list[tuple[str, str]]) -> str:
    """The one line that says which withdrawn runs a listing left out.

    >>> withdrawn_note([("r1", "wrong port")])
    'note: 1 withdrawn run left out: r1 (wrong port); --include-withdrawn shows it'
    """
    n = len(left_out)
    runs = ", ".join(f"{run} ({reason})" for run, reason in left_out)
    them = "it" if n == 1 else "them"
    return (
        f"note: {n} withdrawn run{'s' if n != 1 else ''} left out: {runs}; "
        f"--include-withdrawn shows {them}"
    )
