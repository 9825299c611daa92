"""The ``caseledger`` command line: thin click commands (parse, call, print).

Exit codes, the same for every command: 0 done / verified / passed; 1 the
check ran and failed; 2 could not check (usage error, bad input, missing
ledger). Commands of each area live in ``ledger/cli_<area>.py`` and are
registered on the ``main`` group at the bottom of this file.

Only this layer reads environment variables and default paths; it passes
explicit values down to the library.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from ledger.cli_common import DEFAULT_LEDGER, Context, handle_errors, pass_ctx
from ledger.errors import LedgerError

__all__ = ["DEFAULT_LEDGER", "Context", "handle_errors", "main", "pass_ctx"]


class _Group(click.Group):
    """A group whose usage errors exit 2 (click's default) and whose LedgerErrors
    never show a traceback, whichever command raised them."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LedgerError as exc:
            click.echo(f"error: {exc.diagnostics()}", err=True)
            ctx.exit(exc.exit_code)
        except OSError as exc:
            # A path the user gave cannot be read or written (missing folder, permissions,
            # full disk): their environment, not a bug, so no traceback.
            where = f": {exc.filename}" if exc.filename else ""
            click.echo(f"error: {exc.strerror or exc}{where}", err=True)
            click.echo("  hint: check the path and its permissions", err=True)
            ctx.exit(2)


@click.group(cls=_Group)
@click.option(
    "--ledger",
    "ledger_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Ledger file (default: $CASELEDGER_LEDGER or .caseledger/ledger.db).",
)
@click.version_option(package_name="caseledger")
@click.pass_context
def main(ctx: click.Context, ledger_path: Path | None) -> None:
    """caseledger: evaluate text-to-SQL models with signed, hash-chained evidence."""
    if ledger_path is None:
        env = os.environ.get("CASELEDGER_LEDGER")
        ledger_path = Path(env) if env else DEFAULT_LEDGER
    ctx.obj = Context(ledger_path)


def _register() -> None:
    # Each area module defines click commands and a ``register(group)`` function.
    import importlib

    for area in ("ledger", "bank", "run", "report", "gate", "calibrate", "demo", "export"):
        try:
            module = importlib.import_module(f"ledger.cli_{area}")
        except ModuleNotFoundError as exc:
            if exc.name != f"ledger.cli_{area}":
                raise
            continue
        module.register(main)


_register()
