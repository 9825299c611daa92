"""The ``calibrate`` command: how well a bank's oracle catches planted errors (thin shell)."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.calibration.report import format_text, to_json
from ledger.calibration.service import run_calibration
from ledger.cli.common import Context, exit_with, pass_ctx
from ledger.keys import load_default_signer
from ledger.store import Ledger

__all__ = ["register"]


@click.command("calibrate")
@click.option(
    "--bank",
    "bank_arg",
    required=True,
    help="Bank folder, built-in NAME (published first), or published NAME@VERSION / sha256.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@pass_ctx
def calibrate_cmd(ctx: Context, bank_arg: str, as_json: bool) -> None:
    """Run every mutant and positive control of a bank through the real oracle and record it.

    Exit 0 when every positive control passes, 1 when the oracle rejects one,
    2 when calibration could not run.
    """
    signer = load_default_signer(ctx.home)
    with Ledger.open(ctx.ledger) as ledger:
        done = run_calibration(ledger, signer, bank_arg, ctx.home, cwd=Path.cwd())
    click.echo(to_json(done.result) if as_json else format_text(done.result))
    click.echo(f"recorded as run {done.run_id}", err=True)
    exit_with(0 if done.result.passed else 1)


def register(group: click.Group) -> None:
    """Add the ``calibrate`` command to the main CLI."""
    group.add_command(calibrate_cmd)
