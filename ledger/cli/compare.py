"""compare RUN_A RUN_B: two runs of one bank, paired by case (thin: parse, call, print)."""

from __future__ import annotations

import click

from ledger.app.compare import compare_runs
from ledger.cli.common import Context, pass_ctx
from ledger.codec import canonical_json
from projections.report.significance import comparison_lines

__all__ = ["register"]


@click.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--scorer", help="View both runs under this scorer version (default: as recorded).")
@click.option("--json", "as_json", is_flag=True, help="The comparison as one JSON object.")
@pass_ctx
def compare(ctx: Context, run_a: str, run_b: str, scorer: str | None, as_json: bool) -> None:
    """Compare two runs of one bank case by case: difference, 95% interval, p-value,
    wins and losses, and the cases that differ (docs/statistics.md)."""
    found = compare_runs(ctx.ledger, run_a, run_b, scorer=scorer)
    if as_json:
        click.echo(canonical_json(found).decode("utf-8"))
        return
    for line in comparison_lines(found):
        click.echo(line)


def register(group: click.Group) -> None:
    """Add ``compare`` to the main group."""
    group.add_command(compare)
