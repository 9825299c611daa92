"""Export commands: copies of ledger evidence for people without the operator's files."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.common import Context, pass_ctx

__all__ = ["register"]


@click.group("export")
def export() -> None:
    """Write parts of the ledger to a folder for someone else."""


@export.command("audit")
@click.option(
    "-o",
    "--output",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A new (or empty) folder for the export.",
)
@click.option(
    "--banks",
    "banks_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the published bank files are (default: banks/ beside the ledger).",
)
@click.option(
    "--reports",
    "reports_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A folder with the published report.json (and report.md / report.html) to include.",
)
@pass_ctx
def export_audit_cmd(
    ctx: Context, out_dir: Path, banks_dir: Path | None, reports_dir: Path | None
) -> None:
    """Ledger snapshot, bank files, newest checkpoint, verifier key and README for an auditor."""
    from ledger.app.audit import export_audit

    done = export_audit(
        ctx.ledger_path,
        out_dir,
        banks_dir=ctx.home / "banks" if banks_dir is None else banks_dir,
        reports_dir=reports_dir,
    )
    click.echo(
        f"wrote {out_dir}/: ledger.db ({done.size} events), checkpoint.note (size "
        f"{done.checkpoint_size}), operator.pub, banks {', '.join(done.banks) or 'none'}"
        + (f", {', '.join(done.reports)}" if done.reports else "")
        + ", README.md"
    )
    click.echo("No private key is in it. The auditor runs, inside that folder:")
    for line in done.commands:
        click.echo(f"  {line}")


def register(group: click.Group) -> None:
    """Add the ``export`` group to the ``caseledger`` group."""
    group.add_command(export)
