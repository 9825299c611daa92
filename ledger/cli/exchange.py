"""``caseledger import run FILE``: a run exported from another machine (docs/exchange.md)."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.common import Context, pass_ctx
from ledger.errors import UsageError

__all__ = ["register"]


@click.group("import")
def import_group() -> None:
    """Take in evidence written on another machine."""


@import_group.command("run")
@click.argument(
    "bundle", metavar="FILE", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@pass_ctx
def import_run_cmd(ctx: Context, bundle: Path) -> None:
    """Append a run bundle (from `caseledger export run`) with its original signatures.

    Every signature, the bank, the run's completeness and this ledger's copy of the
    run (if any) are checked first; nothing is appended when a check fails. The
    bundle's signer is accepted by this ledger's operator key. Importing the same
    bundle again does nothing.
    """
    from ledger.app.exchange import import_run
    from ledger.keys import load_default_signer
    from ledger.store import Ledger

    if not Ledger.exists(ctx.ledger):
        raise UsageError(
            f"no ledger at {ctx.ledger_name}", hint="run `caseledger init` first (or --ledger)"
        )
    signer = load_default_signer(ctx.home)
    with Ledger.open(ctx.ledger) as ledger:
        done = import_run(ledger, signer, bundle.read_bytes(), str(bundle))
    if done.already:
        click.echo(
            f"run {done.run_id} from {done.origin} is already imported ({done.events} events): "
            "nothing to do"
        )
        return
    for name in done.registered:
        click.echo(
            f"accepted foreign signer {name} of {done.origin}, by {signer.name} ({signer.key_id})"
        )
    click.echo(
        f"imported run {done.run_id} from {done.origin}: {done.events} events, original "
        f"signatures checked, appended at seq {done.seqs[0]}-{done.seqs[-1]} of {ctx.ledger_name}"
    )


def register(group: click.Group) -> None:
    """Add the ``import`` group to the ``caseledger`` group."""
    group.add_command(import_group)
