"""``caseledger claims``: is what each summary of a run says true of its own result?"""

from __future__ import annotations

import json

import click

from ledger.app.claims import ClaimsView, claims_view, record_claims
from ledger.app.evaluate import now
from ledger.cli.common import Context, exit_with, pass_ctx
from ledger.harness.claims import CONTRADICTED
from ledger.harness.score import SCORER_VERSION
from ledger.keys import load_default_signer
from ledger.store import Ledger

__all__ = ["register"]


@click.command(name="claims")
@click.option("--run", "run_id", required=True, help="The run whose summaries to check.")
@click.option(
    "--scorer",
    default=SCORER_VERSION,
    show_default=True,
    help="Which results are correct: their verdict under this scorer version.",
)
@click.option("--json", "as_json", is_flag=True, help="Every attempt and claim, for machines.")
@pass_ctx
def claims(ctx: Context, run_id: str, scorer: str, as_json: bool) -> None:
    """Check the claims of each summary against its executed result (a diagnostic).

    Appends the missing claim events of the run (signed with the operator key), then
    counts supported, contradicted and unverifiable claims: faithfulness rate,
    contradicted-claim rate, and the share of correct results whose summary
    contradicts them. Exit 2 when no claim could be checked.
    """
    with Ledger.open(ctx.ledger) as ledger:
        recorded = record_claims(
            ledger, lambda: load_default_signer(ctx.home), run_id=run_id, clock=now
        )
        view = claims_view(ledger, run_id, scorer)
    s = view.summary
    if as_json:
        doc = view.document(recorded.appended)
        click.echo(json.dumps(doc, ensure_ascii=False, sort_keys=True, indent=1))
    else:
        for line in _human(view, recorded.appended):
            click.echo(line)
    if s.checkable == 0:
        if s.attempts_checked == 0:
            why = "no executed attempt has a summary"
        elif s.claims == 0:
            why = f"no claim could be read from its {s.attempts_checked} summaries"
        else:
            why = f"none of the {s.claims} claims read could be decided"
        click.echo(f"nothing could be checked: {why} (exit 2)", err=True)
        exit_with(2)


def _show(value: str | None) -> str:
    return "-" if value is None else value


def _human(view: ClaimsView, appended: int) -> list[str]:
    s = view.summary
    c = s.counts
    lines = [
        f"run {view.run_id} ({view.bank}, scorer {view.scorer_version}): "
        f"{s.attempts_checked} summaries of {view.planned} attempts checked; claims "
        f"{', '.join(s.claims_versions) or '-'} ({appended} recorded now)",
        f"claims read {s.claims}: supported {c.supported}, contradicted "
        f"{c.contradicted}, unverifiable {c.unverifiable}",
        f"faithfulness rate (supported / checkable {s.checkable})   {_show(s.faithfulness_rate)}",
        f"contradicted-claim rate (contradicted / read)   {_show(s.contradicted_rate)}",
        f"correct results whose summary contradicts them   {s.correct_contradicted} of "
        f"{s.correct_checked}  {_show(s.correct_contradicted_share)}",
    ]
    if s.kinds:
        lines.append(
            "by kind: "
            + "; ".join(
                f"{k} {v.supported}/{v.contradicted}/{v.unverifiable}" for k, v in s.kinds.items()
            )
            + " (supported/contradicted/unverifiable)"
        )
    bad = [(a, x) for a in view.attempts for x in (a.claims or []) if x.verdict == CONTRADICTED]
    for a, x in bad[:3]:
        lines.append(f"  contradicted: {a.case} #{a.attempt}: {x.reading} ({x.detail})")
    if len(bad) > 3:
        lines.append(f"  ... {len(bad) - 3} more (--json lists every claim)")
    return lines


def register(group: click.Group) -> None:
    """Add the claims command to the main group."""
    group.add_command(claims)
