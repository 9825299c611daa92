"""``caseledger slices``: where a run's wrong answers first departed from the reference SQL."""

from __future__ import annotations

import json

import click

from ledger.app.evaluate import now
from ledger.app.slices import SliceView, record_slices, slice_view
from ledger.cli.common import Context, exit_with, pass_ctx
from ledger.harness.score import SCORER_VERSION
from ledger.keys import load_default_signer
from ledger.store import Ledger
from projections.slices import NOT_RECORDED, ROWS

__all__ = ["register"]

_LABEL = {NOT_RECORDED: "not recorded"}


@click.command(name="slices")
@click.option("--run", "run_id", required=True, help="The run to slice.")
@click.option(
    "--scorer",
    default=SCORER_VERSION,
    show_default=True,
    help="Which attempts are wrong: their verdict under this scorer version.",
)
@click.option("--json", "as_json", is_flag=True, help="Every attempt, for machines.")
@pass_ctx
def slices(ctx: Context, run_id: str, scorer: str, as_json: bool) -> None:
    """Where each wrong answer first departs from the reference SQL (a diagnostic).

    Appends the missing slice events of the run (signed with the operator key),
    then counts the first divergence of every wrong attempt: tables, joins,
    filters, grouping, aggregates, projection, order, none or unknown. Exit 2
    when nothing could be checked.
    """
    with Ledger.open(ctx.ledger) as ledger:
        recorded = record_slices(
            ledger, lambda: load_default_signer(ctx.home), ctx.home, run_id=run_id, clock=now
        )
        view = slice_view(ledger, run_id, scorer)
    s = view.summary
    if as_json:
        doc = view.document(recorded.appended)
        click.echo(json.dumps(doc, ensure_ascii=False, sort_keys=True, indent=1))
    else:
        for line in _human(view, recorded.appended):
            click.echo(line)
    if s.checked == 0:
        why = (
            "the run has no executed wrong attempt"
            if s.wrong == 0
            else f"none of its {s.wrong} wrong attempts could be attributed"
        )
        click.echo(f"nothing could be checked: {why} (exit 2)", err=True)
        exit_with(2)


def _human(view: SliceView, appended: int) -> list[str]:
    s = view.summary
    lines = [
        f"run {view.run_id} ({view.bank}, scorer {view.scorer_version}): {s.wrong} wrong "
        f"of {view.planned} attempts, {s.checked} checked; slices "
        f"{', '.join(s.slicer_versions) or '-'} ({appended} recorded now)",
        "first divergence   count  share of checked",
    ]
    for row in ROWS:
        n = s.counts[row]
        share = s.shares.get(row)
        shown = share if share is not None else ("-" if row in s.shares else "(not in shares)")
        if n or row in ("none", "unknown"):
            lines.append(f"  {_LABEL.get(row, row):<15} {n:>5}  {shown}")
    dims = [
        f"{d}: " + ", ".join(f"{_LABEL.get(r, r)} {n}" for r, n in v.counts.items() if n)
        for d, v in s.dimensions.items()
    ]
    if dims:
        lines.append("by dimension: " + "; ".join(dims))
    for u in s.unattributed[:3]:
        lines.append(f"  {u.component}: {u.case} #{u.attempt}: {u.detail}")
    if len(s.unattributed) > 3:
        lines.append(f"  ... {len(s.unattributed) - 3} more (--json lists every attempt)")
    return lines


def register(group: click.Group) -> None:
    """Add the slices command to the main group."""
    group.add_command(slices)
