"""``caseledger runs withdraw RUN --reason TEXT`` (thin: parse, call, print)."""

from __future__ import annotations

import click

from ledger.app.withdraw import withdraw_run
from ledger.cli.common import Context, pass_ctx
from ledger.keys import load_default_signer
from ledger.store import Ledger

__all__ = ["withdraw_cmd"]


@click.command("withdraw")
@click.argument("run")
@click.option(
    "--reason", required=True, help="Why (one line, shown beside the run in every report)."
)
@pass_ctx
def withdraw_cmd(ctx: Context, run: str, reason: str) -> None:
    """Withdraw RUN: reports, runs and the gate leave it out by default; its events stay."""
    signer = load_default_signer(ctx.home)
    with Ledger.open(ctx.ledger) as ledger:
        done = withdraw_run(ledger, signer, run, reason)
    click.echo(
        f"withdrew run {done.run} at seq {done.seq} (reason: {done.reason}); its events stay. "
        "Reports, `runs` and the gate leave it out; --include-withdrawn shows it"
    )
