"""``caseledger gate`` and ``caseledger baseline freeze|check|pin`` (thin: parse, call, print)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import msgspec

from ledger.app.baseline import freeze, pin, read_bundle, stale_fields
from ledger.app.baseline_check import check_baseline, parse_fields
from ledger.app.gate_inputs import load_config, load_side_entry
from ledger.app.output import output_folder
from ledger.cli.common import Context, exit_with, pass_ctx
from ledger.errors import UsageError
from ledger.store import Ledger
from projections.gate import GateOptions, check_metric_names, judge, parse_alpha, render_text
from projections.metrics import parse_tolerance
from projections.report.jsonio import plain

__all__ = ["register"]


def _tolerances(values: tuple[str, ...]) -> dict[str, object]:
    out: dict[str, object] = {}
    for value in values:
        name, sep, tol = value.partition("=")
        if not sep or not name:
            raise UsageError(f"--tol {value!r}: write METRIC=VALUE, e.g. result_correct_rate=0.02")
        try:
            out[name.strip()] = parse_tolerance(tol.strip())
        except ValueError as exc:
            raise UsageError(f"--tol {value!r}: {exc}") from None
    return out


def _alpha(text: str, parse: Any) -> Any:
    try:
        return parse(text)
    except ValueError as exc:
        raise UsageError(f"--alpha {text!r}: {exc}") from None


@click.command()
@click.option("--baseline", "baseline", required=True, help="REPORT[:RUN], LEDGER:RUN or DIR.")
@click.option("--current", "current", required=True, help="REPORT[:RUN], LEDGER:RUN or DIR.")
@click.option("--tol", "tols", multiple=True, help="METRIC=VALUE (0.02 or 0.10-r); repeatable.")
@click.option("--ignore", "ignores", multiple=True, help="Do not gate METRIC; repeatable.")
@click.option("--min-n", type=click.IntRange(min=0), help="Fewer judged attempts: exit 2.")
@click.option("--json", "as_json", is_flag=True, help="The verdict as JSON (gate-verdict schema).")
@click.option(
    "--ci", is_flag=True, help="Refuse (exit 2) when the configuration disables the gate."
)
@click.option(
    "--gate-timing",
    is_flag=True,
    help="Timing metrics (wall time) gate too, as gate_timing = true in the configuration.",
)
@click.option(
    "--include-withdrawn", is_flag=True, help="Judge a withdrawn run too (refused otherwise)."
)
@click.option(
    "--significance",
    is_flag=True,
    help="A quality metric beyond its tolerance fails only when the paired result-correct "
    "difference is significant too (as gate_significance = true; docs/gate.md).",
)
@click.option("--alpha", help="The significance level of --significance (default 0.05).")
def gate(
    baseline: str,
    current: str,
    tols: tuple[str, ...],
    ignores: tuple[str, ...],
    min_n: int | None,
    as_json: bool,
    ci: bool,
    gate_timing: bool,
    include_withdrawn: bool,
    significance: bool,
    alpha: str | None,
) -> None:
    """Compare two runs metric by metric: exit 0 pass, 1 regression, 2 could not judge."""
    config = load_config(Path.cwd())
    if not config.enabled:
        where = config.source or "the configuration"
        if ci:
            click.echo(f"gate: disabled in {where}; --ci refuses to pass a switched-off gate")
            exit_with(2)
        click.echo(f"note: the gate is disabled in {where}; judging because asked", err=True)
    cli_tols = _tolerances(tols)
    check_metric_names([*cli_tols, *ignores], "command line")
    options = GateOptions(
        tolerances={**config.tolerances, **cli_tols},  # type: ignore[dict-item]
        ignore=frozenset(config.ignore) | frozenset(ignores),
        min_n=min_n if min_n is not None else config.min_n,
        drift_warn=config.drift_warn,
        gate_timing=gate_timing or config.gate_timing,
        significance=significance or config.gate_significance,
        alpha=config.alpha if alpha is None else _alpha(alpha, parse_alpha),
    )
    base_card, base_from, base_entry = load_side_entry(
        baseline, include_withdrawn=include_withdrawn
    )
    cur_card, cur_from, cur_entry = load_side_entry(current, include_withdrawn=include_withdrawn)
    verdict = judge(base_card, cur_card, options, (base_entry, cur_entry))
    verdict = msgspec.structs.replace(
        verdict,
        baseline=msgspec.structs.replace(verdict.baseline, source=base_from),
        current=msgspec.structs.replace(verdict.current, source=cur_from),
    )
    if as_json:
        click.echo(json.dumps(plain(verdict), indent=2, sort_keys=True))
    else:
        click.echo(f"baseline from {base_from}; current from {cur_from}")
        click.echo(render_text(verdict), nl=False)
    exit_with(verdict.exit_code)


@click.group()
def baseline() -> None:
    """Frozen baselines: freeze a run, check it, re-pin its scorecard on purpose."""


@baseline.command("freeze")
@click.argument("run")
@click.option(
    "-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path)
)
@pass_ctx
def freeze_cmd(ctx: Context, run: str, out_dir: Path) -> None:
    """Write RUN's signed events and its pinned scorecard into a baseline folder."""
    output_folder(out_dir)
    with Ledger.open(ctx.ledger, readonly=True) as ledger:
        card = freeze(ledger, run, out_dir)
    shown = card.metrics.get("result_correct_rate")
    click.echo(
        f"froze run {run} into {out_dir}: {card.completeness.planned} planned attempts, "
        f"{len(card.metrics)} metrics pinned (result_correct_rate {shown})"
    )
    click.echo(f"check it: caseledger baseline check {out_dir} --require-full")


@baseline.command("check")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--require-full", is_flag=True, help="A bank case or attempt missing is an error.")
@click.option("--require-fields", help="Comma-separated fields every attempt must have.")
def check_cmd(folder: Path, require_full: bool, require_fields: str | None) -> None:
    """Verify a baseline, check it is whole and that its pinned scorecard still holds."""
    fields = parse_fields(require_fields)
    result = check_baseline(folder, require_full=require_full, require_fields=fields)
    click.echo(result.text(), nl=False)
    exit_with(0 if result.ok else 1)


@baseline.command("pin")
@click.argument("folder", type=click.Path(path_type=Path))
def pin_cmd(folder: Path) -> None:
    """Re-pin the scorecard from the frozen events with the current code (on purpose)."""
    before = read_bundle(folder).pinned
    card = pin(folder)
    changes = stale_fields(before, card) if before is not None else ["(first pin)"]
    click.echo(f"pinned {folder}: {len(changes)} changes")
    for line in changes:
        click.echo(f"  {line}")


def register(group: click.Group) -> None:
    """Add ``gate`` and ``baseline`` to the CLI."""
    group.add_command(gate)
    group.add_command(baseline)
