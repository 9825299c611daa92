"""``caseledger ledger copy SRC DST`` and ``ledger upgrade``: whole ledgers.

``ledger copy`` moves a whole ledger from one store into another; ``ledger upgrade``
brings a PostgreSQL ledger made by an older caseledger to the current schema.

SRC and DST are each a ledger file or a ``postgresql://`` URL (docs/stores.md). The
copy holds the same rows byte for byte (bodies, leaf hashes, chain, signatures) and
the stored checkpoints, so it verifies on its own and every report built from it is
the same bytes as the source's.
"""

from __future__ import annotations

import click

from ledger.cli.common import Context, exit_with, pass_ctx
from ledger.errors import UsageError, VerificationError
from ledger.store import Ledger
from ledger.stores import Location, is_url, parse_location, redact
from ledger.stores.postgres import upgrade as upgrade_postgres
from ledger.verify import verify_ledger

__all__ = ["register"]


def _name(location: Location) -> str:
    return redact(location) if isinstance(location, str) else str(location)


@click.group("ledger")
def ledger_group() -> None:
    """Whole ledgers: copy between a file and a PostgreSQL database; upgrade a database."""


@ledger_group.command("copy")
@click.argument("source", metavar="SRC")
@click.argument("dest", metavar="DST")
def copy_cmd(source: str, dest: str) -> None:
    """Copy every event of SRC into a new ledger DST, then verify DST.

    SRC and DST are ledger files or postgresql:// URLs. DST must not hold a ledger
    yet (an empty database, or a file that does not exist).
    """
    src, dst = parse_location(source), parse_location(dest)
    if Ledger.exists(dst):
        raise UsageError(
            f"a ledger already exists at {_name(dst)}", hint="copy into a new file or database"
        )
    with Ledger.open(src, readonly=True) as origin:
        size = origin.size()
        Ledger.create_copy(dst, origin).close()
    try:
        result = verify_ledger(dst)
    except VerificationError as exc:
        click.echo(f"copy FAILED to verify: {exc.diagnostics()}", err=True)
        exit_with(1)
    click.echo(f"copied {size} events from {_name(src)} to {_name(dst)}; {result.summary()}")


@ledger_group.command("upgrade")
@pass_ctx
def upgrade_cmd(ctx: Context) -> None:
    """Bring a PostgreSQL ledger made by an older caseledger to the current schema.

    Run it once, as the role that ran `init` (the schema's owner). A SQLite file needs
    nothing: exit 0.
    """
    location = ctx.ledger
    if not is_url(location):
        with Ledger.open(location, readonly=True) as ledger:
            click.echo(f"{ledger.location}: a ledger file needs no upgrade")
        return
    click.echo(upgrade_postgres(str(location)))


def register(group: click.Group) -> None:
    """Add the ``ledger`` commands to the ``caseledger`` group."""
    group.add_command(ledger_group)
