"""The evaluation service: a published bank and an adapter wired into the runner.

``caseledger run`` and the demo both start runs through these functions, so what
the demo does and what the commands it prints do cannot drift apart.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import re
from pathlib import Path
from typing import Any

from ledger import codec
from ledger.bank.leak import leak_findings
from ledger.harness import prompt as prompt_mod
from ledger.harness.attempt import BankContext
from ledger.harness.runner import RunSummary
from ledger.store import Ledger
from projections.runsummary import RetryFigures

__all__ = [
    "bank_context",
    "default_profile",
    "default_run_id",
    "now",
    "summary_text",
    "with_variants",
]


def bank_context(published: Any, ledger_path: Path, cwd: Path) -> BankContext:
    """What the runner needs of a published bank (prompts, leak check, references)."""
    leak_ctx = published.leak_context(ledger_path=ledger_path, cwd=cwd)
    event = published.event
    return BankContext(
        event=event,
        db_path=published.db_path,
        reference_sql=published.references(),
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
    taken = set(ledger.streams())
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
