"""``caseledger run``: evaluate one adapter on a published bank."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import click
import msgspec

from ledger.adapters.base import build_adapter
from ledger.adapters.command import CommandAdapter, sweep_stale_children
from ledger.adapters.pi import PiAdapter
from ledger.app.evaluate import bank_context, default_run_id, now, summary_text, with_variants
from ledger.bank.registry import find_published
from ledger.bounds import MAX_ATTEMPTS, MAX_CONCURRENCY, MAX_RETRIES
from ledger.cli.common import exit_with
from ledger.errors import StoreConflictError, UsageError
from ledger.harness.limits import BOUNDS, DEFAULT_LIMITS, validate
from ledger.harness.runner import Progress, RunPlan, run
from ledger.keys import load_default_signer
from ledger.store import Ledger

__all__ = ["register"]


class _Reporter:
    """A progress bar on a terminal, plain lines otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()

    def __call__(self, p: Progress) -> None:
        elapsed = time.monotonic() - self.start
        eta = elapsed / p.done * (p.planned - p.done) if p.done else 0.0
        text = (
            f"{p.done}/{p.planned} attempts, {p.correct} correct, "
            f"elapsed {elapsed:.1f}s, eta {eta:.1f}s"
        )
        if self.tty:
            width = 24
            filled = int(width * p.done / max(p.planned, 1))
            click.echo(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}", err=True, nl=False)
            if p.done == p.planned:
                click.echo("", err=True)
        else:
            click.echo(text, err=True)


@click.command("run")
@click.option("--bank", "bank_ref", required=True, help="Published bank NAME[@VERSION].")
@click.option("--adapter", "kind", required=True, help="openai, pi, command, replay or reference.")
@click.option(
    "--attempts", type=click.IntRange(1, MAX_ATTEMPTS), default=None, help="Attempts per case."
)
@click.option("--profile", default=None, help="Display name of this model profile.")
@click.option("--run-id", default=None, help="Run id (default: <profile>-<n>).")
@click.option("--resume", "resume", default=None, metavar="RUN", help="Finish run RUN.")
@click.option(
    "--concurrency",
    type=click.IntRange(1, MAX_CONCURRENCY),
    default=1,
    help="Model calls at once (default 1; the ledger keeps one writer).",
)
@click.option(
    "--retries", type=click.IntRange(0, MAX_RETRIES), default=0, help="Retries of a failure."
)
@click.option(
    "--base-url", default=None, help="openai: the endpoint, e.g. http://127.0.0.1:8080/v1."
)
@click.option("--model", default=None, help="The requested model id (recorded).")
@click.option(
    "--api-key-env", default=None, help="Name of the environment variable holding the key."
)
@click.option("--auth", default=None, help="api_key, oauth (a subscription; cost null) or none.")
@click.option("--temperature", default=None, help="Sampling temperature (default: not sent).")
@click.option(
    "--reasoning-effort", default=None, help="e.g. low, medium, high (default: not sent)."
)
@click.option("--max-tokens", default=None, help="Output token limit (default: not sent).")
@click.option(
    "--timeout", "timeout_s", default=None, help="Seconds for one whole call (default 120)."
)
@click.option(
    "--price-snapshot", default=None, help="Prices JSON file to estimate cost from tokens."
)
@click.option("--provider", default=None, help="Provider display name (openai, command).")
@click.option("--system-prompt", default=None, help="System message text (openai, pi).")
@click.option(
    "--command", default=None, help="command: the program (prompt on stdin, answer on stdout)."
)
@click.option("--replay-file", default=None, help="replay: the file of recorded answers.")
@click.option(
    "--replay-format",
    type=click.Choice(["jsonl", "bird", "spider"]),
    default=None,
    help="replay: jsonl (default), or a benchmark's own prediction file (bird, spider).",
)
@click.option(
    "--allow-missing",
    is_flag=True,
    default=None,
    help="replay bird|spider: a question without a prediction is a wrong, empty answer.",
)
@click.option("--tools", default=None, help="Declared tool state: off, on or unknown.")
@click.option("--pi", default=None, help="The pi executable (pi; default $CASELEDGER_PI or PATH).")
@click.option("--pi-models", default=None, help="pi's models.json with custom providers (pi).")
@click.option("--pi-auth-file", default=None, help="pi's auth.json for --auth oauth (pi).")
@click.option(
    "--no-variants",
    is_flag=True,
    help="Skip the variant diagnostics (running each SQL on the bank's calibration variants).",
)
@click.option(
    "--max-output-bytes",
    type=click.IntRange(*BOUNDS["max_output_bytes"]),
    help=f"Cap on an answer as stored (default {DEFAULT_LIMITS.max_output_bytes}).",
)
@click.option(
    "--max-sql-bytes",
    type=click.IntRange(*BOUNDS["max_sql_bytes"]),
    help=f"Cap on the SQL text (default {DEFAULT_LIMITS.max_sql_bytes}).",
)
@click.option(
    "--max-nesting",
    type=click.IntRange(*BOUNDS["max_nesting"]),
    help=f"Cap on SQL nesting depth (default {DEFAULT_LIMITS.max_nesting}).",
)
@click.option(
    "--max-result-bytes",
    type=click.IntRange(*BOUNDS["max_result_bytes"]),
    help=f"Cap on one result as stored (default {DEFAULT_LIMITS.max_result_bytes}).",
)
@click.option(
    "--max-cell-bytes",
    type=click.IntRange(*BOUNDS["max_cell_bytes"]),
    help=f"Cells over this are cut (default {DEFAULT_LIMITS.max_cell_bytes}).",
)
@click.option(
    "--judge-budget-ms",
    type=click.IntRange(*BOUNDS["judge_budget_ms"]),
    help=f"CPU ms to judge one answer (default {DEFAULT_LIMITS.judge_budget_ms}).",
)
@click.pass_obj
def run_cmd(obj: Any, /, bank_ref: str, kind: str, **options: Any) -> None:
    """Run KIND on a published bank; every step becomes a signed event."""
    if not Ledger.exists(obj.ledger):
        raise UsageError(
            f"no ledger at {obj.ledger_name}", hint="run `caseledger init` first (or pass --ledger)"
        )
    resume = options.pop("resume")
    no_variants = options.pop("no_variants")
    attempts, profile = options.pop("attempts"), options.pop("profile")
    run_id, concurrency, retries = (
        options.pop("run_id"),
        options.pop("concurrency"),
        options.pop("retries"),
    )
    if resume and run_id and resume != run_id:
        raise UsageError(f"--resume {resume} and --run-id {run_id} name different runs")
    if options["replay_format"] in ("bird", "spider") and (attempts or 1) > 1:
        raise UsageError(
            f"--attempts {attempts} with --replay-format {options['replay_format']}: the "
            "benchmark's prediction file holds one prediction per question",
            hint="leave out --attempts (one attempt per case)",
        )
    options["allow_missing"] = options["allow_missing"] or None  # not given: None
    caps = {name: options.pop(name) for name in BOUNDS}
    given = {name: value for name, value in caps.items() if value is not None}
    # None: the defaults, or on --resume the original run's caps.
    limits = validate(msgspec.structs.replace(DEFAULT_LIMITS, **given)) if given else None
    with Ledger.open(obj.ledger) as ledger:
        published = find_published(ledger, obj.home, bank_ref)
        ctx = bank_context(published, obj.local_path, Path.cwd())
        refs = ctx.reference_sql if kind == "reference" else None
        adapter = build_adapter(
            kind,
            options,
            cases=refs,
            environ=os.environ,
            hidden_paths=(obj.local_path, obj.home),
            bank=ctx.event,
        )
        # Model programs a killed caseledger left running die now (docs/adapters.md).
        children = obj.home / "children"
        sweep_stale_children(children)
        if isinstance(adapter, CommandAdapter | PiAdapter):
            adapter.track_children(children)
        stack = contextlib.ExitStack()
        try:
            if not no_variants:
                ctx = with_variants(ctx, published, stack)
            plan = RunPlan(
                run_id=resume or run_id or default_run_id(ledger, profile or kind),
                profile=profile or kind,
                attempts=attempts,
                concurrency=concurrency,
                retries=retries,
                resume=resume is not None,
                limits=limits,
            )
            signer = load_default_signer(obj.home)
            try:
                summary = run(
                    ledger,
                    signer,
                    ctx,
                    adapter,
                    plan,
                    clock=now,
                    on_progress=_Reporter(),
                )
            except KeyboardInterrupt:
                click.echo(
                    f"\ninterrupted: run {plan.run_id} cancelled, its unfinished attempts "
                    f"recorded as interrupted; finish it with the same command plus "
                    f"--resume {plan.run_id}",
                    err=True,
                )
                exit_with(2)
            except StoreConflictError:
                # Two processes appended to one run at once (the same --run-id started
                # twice, or two --resume): the store's own words name stream heads.
                raise UsageError(
                    f"run {plan.run_id}: another process appended to this run at the same "
                    "time; this process stopped and its last batch was not appended",
                    hint="one process per run id: pick another --run-id, or wait for the "
                    f"other one and check `caseledger runs`; --resume {plan.run_id} "
                    "finishes a run that is not completed",
                ) from None
        finally:
            stack.close()
            adapter.close()
    click.echo(summary_text(summary, obj.ledger_name))


def register(group: click.Group) -> None:
    """Add ``run`` to the CLI."""
    group.add_command(run_cmd)
