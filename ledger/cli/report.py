"""Report commands: report, runs, rebuild, rescore (thin: parse, call, print)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import msgspec

from ledger.app.evaluate import now
from ledger.app.output import STDOUT, write_output
from ledger.app.reporting import report_chunks
from ledger.app.rescore import rescore
from ledger.app.snapshot import RecordedRun, read_state, run_listing, run_snapshots
from ledger.cli.common import Context, pass_ctx, withdrawn_note
from ledger.cli.withdraw import withdraw_cmd
from ledger.keys import load_default_signer
from ledger.store import Ledger
from projections.report.build import Detail, recorded_overview, run_overview
from projections.report.jsonio import plain
from projections.report.render import FORMATS
from projections.report.totals import RunRow

#: ``--detail`` values (docs/reports.md "Versions").
DETAILS = ("stats", "compact", "full")

__all__ = ["register"]


@click.command()
@click.option("--run", "runs", multiple=True, help="Only this run (repeatable).")
@click.option("--scorer", help="View every run under this scorer version (default: as recorded).")
@click.option("--at-size", type=int, help="Build from the first N events (default: all).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="json", show_default=True)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Write here (- for stdout, the default).",
)
@click.option("--with-gold", is_flag=True, help="Internal view with gold rows (do not publish).")
@click.option(
    "--include-withdrawn", is_flag=True, help="Show withdrawn runs too, marked with the reason."
)
@click.option(
    "--detail",
    type=click.Choice(DETAILS),
    default="stats",
    show_default=True,
    help="stats: compact evidence with error bars, paired comparisons and a headline "
    "(caseledger-report/3); compact: caseledger-report/2; full: every event's evidence "
    "verbatim (caseledger-report/1). compact and full rebuild reports published under "
    "them byte for byte, md/html included.",
)
@pass_ctx
def report(
    ctx: Context,
    runs: tuple[str, ...],
    scorer: str | None,
    at_size: int | None,
    fmt: str,
    output: Path | None,
    with_gold: bool,
    include_withdrawn: bool,
    detail: Detail,
) -> None:
    """Build a report: the same tree size and options always give the same bytes."""
    with report_chunks(
        ctx.ledger,
        fmt=fmt,
        at_size=at_size,
        runs=runs or None,
        scorer=scorer,
        with_gold=with_gold,
        include_withdrawn=include_withdrawn,
        detail=detail,
    ) as (chunks, size, root):
        # Every event is checked before the first piece: a bad byte writes nothing.
        click.echo(f"report built at tree size {size}, root sha256:{root.hex()}", err=True)
        write_output(STDOUT if output is None else output, chunks)


# The header line of `caseledger runs` (docs/cli.md); the columns are aligned under it.
RUNS_HEADER = (
    "run", "bank", "adapter", "profile", "model", "status", "attempts", "correct", "score"
)  # fmt: skip


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="A JSON array of objects.")
@click.option(
    "--include-withdrawn", is_flag=True, help="List withdrawn runs too, marked with the reason."
)
# Fold every run, never reading a RunFinished's totals (what the tests compare with).
@click.option("--fold", is_flag=True, hidden=True)
@pass_ctx
def runs(ctx: Context, as_json: bool, include_withdrawn: bool, fold: bool) -> None:
    """One line per run: bank, adapter, profile, model, status, attempts, result-correct, score.

    Withdrawn runs are left out (one line on stderr names them) unless --include-withdrawn.
    """
    if click.get_current_context().invoked_subcommand is not None:
        return
    with Ledger.open(ctx.ledger, readonly=True) as ledger:
        # One run in memory at a time (through the tree index); the rows are all
        # collected before the first is printed, so a bad byte prints nothing.
        rows = run_rows(ledger, fold=fold)
    left_out = [(r.run, r.withdrawn) for r in rows if isinstance(r.withdrawn, str)]
    if not include_withdrawn:
        rows = [r for r in rows if not isinstance(r.withdrawn, str)]
        if left_out:
            click.echo(withdrawn_note(left_out), err=True)
    elif not as_json:  # the line marks a withdrawn run in its status column
        rows = [
            msgspec.structs.replace(r, status=f"{r.status}, withdrawn: {r.withdrawn}")
            if isinstance(r.withdrawn, str)
            else r
            for r in rows
        ]
    if as_json:
        click.echo(json.dumps(plain(rows), ensure_ascii=False, sort_keys=True, indent=1))
        return
    table = [RUNS_HEADER] + [
        (
            r.run,
            r.bank,
            r.adapter,
            r.profile,
            r.requested_model or "-",
            r.status,
            f"{r.done}/{r.planned}",
            r.result_correct_rate or "-",
            r.score or "-",
        )
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(RUNS_HEADER))]
    for line in table:
        cells = [str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)]
        click.echo("  ".join(cells).rstrip())


def run_rows(ledger: Ledger, *, fold: bool = False) -> list[RunRow]:
    """The ``runs`` rows, in run id order: a run whose last event is a RunFinished with
    totals (issue 22) from its RunStarted and that RunFinished, any other run folded;
    ``fold``: every run folded (the same rows, slower)."""
    if fold:
        return [row for snap in run_snapshots(ledger) for row in run_overview(snap.state)]
    rows: list[RunRow] = []
    for item in run_listing(ledger):
        if isinstance(item, RecordedRun):
            rows.append(recorded_overview(item.banks, item.started, item.finished))
        else:
            rows.extend(run_overview(item.state))
    return rows


@click.command()
@pass_ctx
def rebuild(ctx: Context) -> None:
    """Replay every event as a report does (bodies and chain checked); print the tree head."""
    with Ledger.open(ctx.ledger, readonly=True) as ledger:
        snap = read_state(ledger)
    old = ctx.local_path.with_name(ctx.local_path.stem + ".projections.db")
    click.echo(
        f"replayed {snap.size} events ({len(snap.state.runs)} runs), every body and the chain "
        f"checked; root sha256:{snap.root.hex()}"
    )
    if old.exists():
        click.echo(f"{old} is a projection store of an earlier release; nothing reads it now")


@click.command(name="rescore")
@click.option("--run", "runs", multiple=True, help="Only this run (repeatable).")
@click.option("--scorer", "version", required=True, help="The scorer version to score with.")
@click.option("--reexecute", is_flag=True, help="Run the SQL again instead of reading results.")
@pass_ctx
def rescore_cmd(ctx: Context, runs: tuple[str, ...], version: str, reexecute: bool) -> None:
    """Append new scores from recorded evidence (zero model calls)."""
    signer = load_default_signer(ctx.home)
    with Ledger.open(ctx.ledger) as ledger:
        summary = rescore(
            ledger,
            signer,
            ctx.home,
            version=version,
            runs=runs or None,
            reexecute=reexecute,
            clock=now,
        )
    click.echo(summary.summary())


def register(group: click.Group) -> None:
    """Add the report commands to the main group (``runs withdraw`` under ``runs``)."""
    runs.add_command(withdraw_cmd)
    for command in (report, runs, rebuild, rescore_cmd):
        group.add_command(command)
