"""Export commands: copies of ledger evidence for people without the operator's files."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.app.audit import export_audit
from ledger.app.exchange import export_run
from ledger.app.export_caseruns import export_caseruns
from ledger.app.output import is_stdout, output_folder, write_output
from ledger.cli.common import Context, pass_ctx, withdrawn_note
from ledger.errors import UsageError
from ledger.keys import Signer
from ledger.store import Ledger

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
    output_folder(out_dir)
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


def _operator_key(ctx: Context) -> Signer | None:
    """The operator key in ``$CASELEDGER_HOME/keys``, if there is one: it attests the
    bundle's origin when it signed the run (docs/exchange.md); without it the bundle
    carries no attestation and an importing ledger records the origin as unattested."""
    path = ctx.home / "keys" / "operator.key"
    return Signer.load(path) if path.is_file() else None


@export.command("run")
@click.argument("run_id", metavar="RUN")
@click.option(
    "-o",
    "--output",
    "out_file",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="The bundle file to write (docs/exchange.md; - for stdout).",
)
@pass_ctx
def export_run_cmd(ctx: Context, run_id: str, out_file: Path) -> None:
    """One run's events exactly as signed here, with the verifier key and the bank.

    Another ledger takes it in with `caseledger import run FILE`.
    """
    attest = _operator_key(ctx)
    with Ledger.open(ctx.ledger, readonly=True) as ledger:  # names a missing ledger (exit 2)
        data = export_run(ledger, run_id, attest)
    write_output(out_file, [data])
    click.echo(
        f"wrote {out_file}: run {run_id} from {ctx.ledger_name} ({len(data)} bytes)",
        err=is_stdout(out_file),
    )


@export.command("caseruns")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["parquet", "csv"]),
    default=None,
    help="parquet or csv (default: from the -o file's suffix).",
)
@click.option(
    "-o",
    "--output",
    "out_file",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="The file to write (replaced whole if it exists; - for stdout).",
)
@click.option("--run", "runs", multiple=True, help="Only this run (repeatable; default: all).")
@click.option("--include-withdrawn", is_flag=True, help="Also withdrawn runs (their rows say why).")
@pass_ctx
def export_caseruns_cmd(
    ctx: Context, fmt: str | None, out_file: Path, runs: tuple[str, ...], include_withdrawn: bool
) -> None:
    """Every CaseRun with its score and items, one row each, for pandas, polars or DuckDB."""
    if fmt is None:
        fmt = {".parquet": "parquet", ".csv": "csv"}.get(out_file.suffix.lower())
        if fmt is None:
            raise UsageError(
                f"cannot tell the format of {out_file} from its suffix",
                hint="pass --format parquet or --format csv (or name the file .parquet / .csv)",
            )
    done = export_caseruns(
        ctx.ledger, out_file, fmt=fmt, runs=runs or None, include_withdrawn=include_withdrawn
    )
    if done.left_out:
        click.echo(withdrawn_note(list(done.left_out)), err=True)
    click.echo(
        f"wrote {out_file}: {done.rows} CaseRuns of {done.runs} run"
        f"{'' if done.runs == 1 else 's'} as {fmt} "
        f"(tree size {done.size}, root sha256:{done.root.hex()}; columns: docs/formats.md)",
        err=is_stdout(out_file),
    )


def register(group: click.Group) -> None:
    """Add the ``export`` group to the ``caseledger`` group."""
    group.add_command(export)
