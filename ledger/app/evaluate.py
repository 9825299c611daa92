"""The evaluation service: a published bank and an adapter wired into the runner.

``evaluate`` is the one sequence that starts a run: ``caseledger run``, the demo and
the Python API (``ledger.api``) all call it, so what the demo does, what the commands
it prints do and what a program does through the API cannot drift apart. The CLI
only parses options into a plan and prints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ledger import codec, stream_read
from ledger.adapters.base import Adapter, Identity, build_adapter
from ledger.adapters.command import CommandAdapter, sweep_stale_children
from ledger.adapters.pi import PiAdapter
from ledger.bank.leak import leak_findings
from ledger.bank.registry import PublishedBank, find_published
from ledger.errors import UsageError
from ledger.harness import prompt as prompt_mod
from ledger.harness.attempt import BankContext
from ledger.keys import Signer, load_default_signer
from ledger.run.runner import Progress, RunPlan, RunSummary, preflight, run
from ledger.store import Ledger
from projections.runsummary import RetryFigures

__all__ = [
    "Evaluator",
    "bank_context",
    "default_profile",
    "default_run_id",
    "evaluate",
    "now",
    "summary_text",
    "with_variants",
]


def evaluate(
    ledger: Ledger,
    home: Path,
    bank: str | PublishedBank,
    adapter: str | Adapter,
    plan: RunPlan | None = None,
    *,
    local_path: Path,
    options: Mapping[str, Any] | None = None,
    engine: str | None = None,
    variants: bool = True,
    signer: Signer | None = None,
    environ: Mapping[str, str] | None = None,
    clock: Callable[[], str] | None = None,
    on_bank: Callable[[PublishedBank], None] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    around_run: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
) -> RunSummary:
    """Run ``plan`` of ``adapter`` on ``bank`` and append it to ``ledger``: one run of
    :class:`Evaluator` (see :meth:`Evaluator.evaluate`), whose variant diagnostics
    stop before this returns."""
    evaluator = Evaluator(
        ledger, home, local_path=local_path, signer=signer, environ=environ, clock=clock
    )
    try:
        return evaluator.evaluate(
            bank,
            adapter,
            plan,
            options=options,
            engine=engine,
            variants=variants,
            on_bank=on_bank,
            on_progress=on_progress,
            around_run=around_run,
        )
    finally:
        evaluator.close()


class Evaluator:
    """Runs on one open ledger, each through the same steps (:meth:`evaluate`).

    ``home``: the local folder of the operator key (``keys/operator.key``, unless
    ``signer`` is given), the built banks and the records of model processes
    (``children/``). ``local_path``: the ledger file, or ``home`` for a ledger on a
    server; kept out of prompts (leak check) and out of a model program's
    environment. ``clock``: the event clock (default :func:`now`).

    A bank's variant diagnostics (their SQL workers) start at its first run and
    serve every later run on it until :meth:`close` (the demo runs four times on
    retail).
    """

    def __init__(
        self,
        ledger: Ledger,
        home: Path,
        *,
        local_path: Path,
        signer: Signer | None = None,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], str] | None = None,
    ) -> None:
        self.ledger, self.home, self.local_path = ledger, home, local_path
        self._signer, self._environ = signer, environ
        self._clock = now if clock is None else clock
        # The variant check of each bank run so far (None: it has no variants), by the
        # seq of its publication.
        self._variants: dict[int, Callable[..., dict[str, Any]] | None] = {}
        self._stack = contextlib.ExitStack()

    def evaluate(
        self,
        bank: str | PublishedBank,
        adapter: str | Adapter,
        plan: RunPlan | None = None,
        *,
        options: Mapping[str, Any] | None = None,
        engine: str | None = None,
        variants: bool = True,
        on_bank: Callable[[PublishedBank], None] | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        around_run: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
    ) -> RunSummary:
        """Run ``plan`` and append it as signed events; the summary of the whole run.

        In this order (each check before anything more expensive is prepared):

        1. ``bank``: a published bank, or ``NAME[@VERSION][:ENGINE]`` resolved as
           ``run --bank`` does (with ``engine``; a bank on several engines and no
           engine named is an error); ``on_bank`` hears it.
        2. ``adapter``: an adapter object (yours: it is not closed), or a kind built
           here from ``options`` (``build_adapter``; closed when the run ends).
        3. Model programs a killed caseledger left running die (``home/children``);
           a command or pi adapter records its own there.
        4. ``plan``: None is a new run named after the adapter kind
           (``<kind>-<n>``). Its run id is checked (taken, or nothing to resume)
           before the variant databases are built and the SQL workers start.
        5. The adapter's own pre-flight check, when it has one (openai: the
           server's host and port accept a connection).
        6. The operator key; the bank's variant diagnostics unless ``variants`` is
           False (``--no-variants``).
        7. The run (``ledger.run.runner.run``) inside ``around_run()`` when
           given: the CLI's words for an interrupt, a full disk, a second writer.

        Raises:
            UsageError: ``adapter`` is not an adapter; a plan the ledger refuses.
            LedgerError: whatever resolving, building, checking or running raises.
        """
        if not isinstance(adapter, str) and (
            not isinstance(adapter, Adapter)
            or not isinstance(getattr(adapter, "identity", None), Identity)
        ):
            raise UsageError(
                f"{type(adapter).__name__} is not an adapter",
                hint="it needs identity (an Identity), invocation, validate_cases, call, close",
            )
        ledger = self.ledger
        published = (
            find_published(ledger, self.home, bank, engine=engine, one_engine=True)
            if isinstance(bank, str)
            else bank
        )
        if on_bank is not None:
            on_bank(published)
        ctx = bank_context(published, self.local_path, Path.cwd())
        model = (
            build_adapter(
                adapter,
                dict(options or {}),
                cases=ctx.reference_sql if adapter == "reference" else None,
                environ=self._environ,
                hidden_paths=(self.local_path, self.home),
                bank=ctx.event,
            )
            if isinstance(adapter, str)
            else adapter
        )
        try:
            # Model programs a killed caseledger left running die now (docs/adapters.md).
            children = self.home / "children"
            sweep_stale_children(children)
            if isinstance(model, CommandAdapter | PiAdapter):
                model.track_children(children)
            if plan is None:
                kind = model.identity.adapter_kind
                plan = RunPlan(run_id=default_run_id(ledger, kind), profile=kind)
            # A taken run id (or nothing to resume) is said now, before the variant
            # databases are built and the SQL workers start (issue 35).
            preflight(ledger, plan)
            # one pre-flight call where the adapter can make one (openai: the server's
            # host and port accept a connection)
            check = getattr(model, "preflight", None)
            if callable(check):
                check()
            signer = load_default_signer(self.home) if self._signer is None else self._signer
            if variants:
                ctx = self._with_variants(ctx, published)
            with around_run() if around_run is not None else contextlib.nullcontext():
                summary = run(
                    ledger, signer, ctx, model, plan, clock=self._clock, on_progress=on_progress
                )
        finally:
            if model is not adapter:  # built here from a kind: ours to close
                model.close()
        return summary

    def _with_variants(self, ctx: BankContext, published: PublishedBank) -> BankContext:
        """``ctx`` with the bank's variant check, started once per bank (see the class doc)."""
        if published.seq not in self._variants:
            held = with_variants(ctx, published, self._stack)
            self._variants[published.seq] = held.variant_check
        return dataclasses.replace(ctx, variant_check=self._variants[published.seq])

    def close(self) -> None:
        """Stop the variant diagnostics' SQL workers."""
        self._variants.clear()
        self._stack.close()


def bank_context(published: Any, ledger_path: Path, cwd: Path) -> BankContext:
    """What the runner needs of a published bank (prompts, leak check, references)."""
    references = published.references()  # the stored files loaded and hashed once
    leak_ctx = published.leak_context(ledger_path=ledger_path, cwd=cwd, references=references)
    event = published.event
    return BankContext(
        event=event,
        db_path=published.db_path,
        reference_sql=references,
        # Each prompt is checked as its own case's (issue 16).
        leak_check=lambda case_id, text: leak_findings(text, leak_ctx, case_id=case_id),
        prompt_for=lambda case: prompt_mod.render_prompt(event, case),
        prompt_contract_digest=prompt_mod.prompt_contract_digest(event),
    )


def with_variants(ctx: BankContext, published: Any, stack: contextlib.ExitStack) -> BankContext:
    """The bank context with variant diagnostics when the bank has calibration variants.

    The variant workers live until ``stack`` closes.
    """
    from ledger.calibration.diagnostics import as_event_check, open_for_published

    diagnostics = open_for_published(published)
    if diagnostics is None:
        return ctx
    stack.enter_context(diagnostics)
    return dataclasses.replace(ctx, variant_check=as_event_check(diagnostics))


def default_run_id(ledger: Ledger, profile: str) -> str:
    """``<profile>-<n>``: n counts the runs already in the log (deterministic, never random)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", profile).strip("-") or "run"
    taken = stream_read.stream_names(ledger)  # through the verified tree index (issue 34)
    n = len(taken)
    while f"{slug}-{n:04d}" in taken:
        n += 1
    return f"{slug}-{n:04d}"


def default_profile(kind: str, replay_format: str | None, replay_file: str | None) -> str:
    """The profile of a run given no ``--profile``: the adapter's name, except for a
    benchmark's own prediction file (``--replay-format bird|spider``), which is named by
    its file (issue 35): ``predict_mini_dev_gpt-4_sqlite.json`` gives profile
    ``predict_mini_dev_gpt-4_sqlite`` (and so run id ``predict_mini_dev_gpt-4_sqlite-<n>``).

    >>> default_profile("replay", "bird", "preds/predict_dev.json")
    'predict_dev'
    >>> default_profile("replay", "spider", "out/pred example.sql")
    'pred-example'
    >>> default_profile("replay", None, "answers.jsonl")
    'replay'
    """
    if kind == "replay" and replay_format in ("bird", "spider") and replay_file:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(replay_file).stem).strip("-.")
        if slug:
            return slug
    return kind


def now() -> str:
    """The event clock of a live run: UTC now in the log's time format."""
    return codec.format_time(dt.datetime.now(dt.UTC))


def summary_text(s: RunSummary, ledger_path: Path | str, bank: str = "") -> str:
    """The one-screen summary printed at the end of a run (docs/running.md).

    ``bank``: ``NAME@VERSION on ENGINE``, the bank and the engine the run's SQL ran on
    (issue 31), shown under the first line.

    The figures are the report's (``RunSummary`` filled in by ``summarise`` with the
    bank): ``done`` counts scored attempts only, split into correct, wrong (the SQL
    ran, the result differs) and failed, cancelled ones are listed by reason beside
    it; retried model calls get a line of their own (issue 35); failures are the
    report's categories, each sub-kind with its count and the first message
    (``projections.runsummary``).
    """
    done = s.done if s.scored is None else s.scored
    attempts = f"  attempts: {s.planned} planned, {done} done"
    if s.wrong is not None:  # every scored attempt is one of the three
        attempts += f" ({s.correct} correct, {s.wrong} wrong, {done - s.correct - s.wrong} failed)"
    if s.cancelled:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(s.cancelled.items()))
        attempts += f", {sum(s.cancelled.values())} cancelled ({reasons})"
    lines = [f"run {s.run_id}: {s.status}"]
    if bank:
        lines.append(f"  bank: {bank}")
    if s.status != "completed" and s.message:
        lines.append(f"  stopped: {s.message}")
    lines += [
        attempts,
        f"  result-correct: {s.correct}/{s.planned} planned attempts{_rate(s.result_correct_rate)}",
    ]
    if s.format_ok_na is not None:
        lines.append(f"  format-ok: {s.format_ok_na}")
    elif s.format_ok is not None:
        lines.append(
            f"  format-ok: {s.format_ok}/{s.planned} planned attempts{_rate(s.format_ok_rate)}"
        )
    score = "see the report" if s.scored is None else "n/a (no case)"
    lines.append(f"  score (weighted): {score if s.total_score is None else s.total_score}")
    if s.scored is None:
        failures = ", ".join(f"{k} {v}" for k, v in sorted(s.failures.items())) or "none"
        lines.append(f"  failures: {failures}")
    else:
        by_category: dict[str, int] = {}
        for g in s.groups:
            if g.category != "cancelled":
                by_category[g.category] = by_category.get(g.category, 0) + g.attempts
        failures = ", ".join(f"{k} {v}" for k, v in sorted(by_category.items())) or "none"
        lines.append(f"  failures: {failures}")
        for g in s.groups:
            first = f", first: {g.first_message}" if g.first_message else ""
            lines.append(f"    {g.category} {g.sub_kind}: {g.attempts}{first}")
    if s.retries is not None:
        lines.append(f"  retries: {retries_text(s.retries)}")
    lines.append(f"  report: caseledger --ledger {ledger_path} report --run {s.run_id} --format md")
    return "\n".join(lines)


def retries_text(r: RetryFigures) -> str:
    """The summary's retries line: attempts retried, the extra tries, what the failed
    tries were, and the time waited (the server's Retry-After counted apart).

    >>> text = retries_text(RetryFigures(2, 3, {"rate_limited": 2, "server_error": 1},
    ...                                  3_250_000, 2))
    >>> for part in text.split("; "):
    ...     print(part)
    2 attempts tried again (3 more tries
    failed tries: rate_limited 2, server_error 1)
    waited 3.2 s, 2 waits as the server's Retry-After asked
    """
    kinds = ", ".join(f"{k} {v}" for k, v in r.failed_tries.items()) or "none"
    tenths = r.waited_us // 100_000
    said = (
        f"{r.attempts} attempts tried again ({r.extra_tries} more tries; failed tries: "
        f"{kinds}); waited {tenths // 10}.{tenths % 10} s"
    )
    if r.retry_after:
        said += f", {r.retry_after} waits as the server's Retry-After asked"
    return said


def _rate(value: str | None) -> str:
    return "" if value is None else f" (rate {value})"
