"""``baseline check``: a frozen baseline verifies, is whole, reconciles and still pins true.

Checks, in order (docs/gate.md "baseline check"): the bundle verifies
(ledger/app/baseline.py steps 1-6); every case of the bank is planned and every
planned attempt has a terminal event (a warning, an error with
``require_full``); ids reconcile (planned cases are bank cases, attempt events
name planned attempts, score evidence names events of the same attempt, gold
digests match the bank); no attempt has two verdicts under one scorer version;
the metrics are computable and equal the pinned scorecard; field coverage
(``require_fields`` turns a gap in the named fields into an error).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ledger.app.baseline import (
    FIELDS,
    SCORECARD_FILE,
    Bundle,
    items_of,
    read_bundle,
    recompute_scorecard,
    stale_fields,
    verify_bundle,
)
from ledger.errors import InternalError, LedgerError, UsageError, VerificationError
from ledger.events import BankPublished, RunStarted, ScoreComputed
from ledger.harness import score as score_mod
from projections.caseruns import ATTEMPT_EVENTS, attempts_of_run
from projections.efficiency import attempt_figures
from projections.fairness import invocation_of
from projections.replay import replay

__all__ = ["CheckResult", "check_baseline", "parse_fields"]


@dataclass
class CheckResult:
    """Findings of one check; ``ok`` when there is no error."""

    folder: Path
    run: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    coverage: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No error found."""
        return not self.errors

    def text(self) -> str:
        """Lines for people, ending with the outcome."""
        lines = [f"baseline {self.folder} (run {self.run})", *self.notes]
        if self.coverage:
            lines.append("field coverage (attempts with the field / planned attempts):")
            for name, (have, total) in self.coverage.items():
                lines.append(f"  {name:<14} {have}/{total}")
        lines += [f"warning: {w}" for w in self.warnings]
        lines += [f"error: {e}" for e in self.errors]
        outcome = "OK" if self.ok else f"FAILED ({len(self.errors)} errors)"
        lines.append(f"baseline check: {outcome}")
        return "\n".join(lines) + "\n"


def parse_fields(text: str | None) -> tuple[str, ...]:
    """``"tokens,generation_ms"`` -> names, each one of FIELDS.

    Raises:
        UsageError: an unknown field name.
    """
    if not text:
        return ()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in FIELDS]
    if unknown:
        raise UsageError(
            f"--require-fields: unknown field {unknown[0]!r}", hint="fields: " + ", ".join(FIELDS)
        )
    return names


def _started(bundle: Bundle) -> RunStarted:
    ev = bundle.stream()[0].event
    if not isinstance(ev, RunStarted):  # verify_bundle checked it
        raise VerificationError("the bundle's run does not start with RunStarted")
    return ev


def _bank(bundle: Bundle) -> BankPublished:
    return next(e.event for e in bundle.events if isinstance(e.event, BankPublished))


def _completeness(bundle: Bundle, result: CheckResult, require_full: bool) -> None:
    started, bank = _started(bundle), _bank(bundle)
    found = result.errors if require_full else result.warnings
    planned = set(started.case_ids)
    missing = [c.id for c in bank.cases if c.id not in planned]
    if missing:
        found.append(
            f"{len(missing)} of {len(bank.cases)} bank cases are not in the run: "
            + ", ".join(missing)
        )
    state = replay(items_of(bundle))
    attempts = attempts_of_run(state, bundle.run_id, started.versions.scorer)
    open_ = [f"{a.case_id}#{a.attempt}" for a in attempts if a.outcome == "unscored"]
    cancelled = [f"{a.case_id}#{a.attempt}" for a in attempts if a.outcome == "cancelled"]
    if open_:
        found.append(f"{len(open_)} planned attempts have no terminal event: " + ", ".join(open_))
    if cancelled:
        found.append(f"{len(cancelled)} planned attempts were cancelled: " + ", ".join(cancelled))
    result.notes.append(
        f"{len(started.case_ids)} cases x {started.attempts} attempts planned, "
        f"{len(attempts) - len(open_) - len(cancelled)} scored"
    )
    coverage = dict.fromkeys(FIELDS, 0)
    for a in attempts:
        figures = attempt_figures(a)
        response = a.response or a.failure
        coverage["tokens"] += figures.tokens is not None
        coverage["cost"] += figures.cost is not None
        coverage["generation_ms"] += figures.generation_us is not None
        coverage["sql_exec_ms"] += figures.sql_us is not None
        coverage["invocation"] += invocation_of(a) is not None
        coverage["request_id"] += response is not None and response.provider_request_id is not None
    result.coverage = {k: (v, len(attempts)) for k, v in coverage.items()}


def _reconcile(bundle: Bundle, result: CheckResult) -> None:
    started, bank = _started(bundle), _bank(bundle)
    bank_ids = {c.id for c in bank.cases}
    gold = {g.case_id: g.digest for g in bank.gold}
    planned = set(started.case_ids)
    for case_id in started.case_ids:
        if case_id not in bank_ids:
            result.errors.append(f"run plans case {case_id!r}, which bank {bank.bank_id} lacks")
    seen: dict[str, tuple[str, int]] = {}
    verdicts: dict[tuple[str, int, str], int] = {}
    for e in bundle.stream():
        ev = e.event
        if not isinstance(ev, ATTEMPT_EVENTS):
            continue
        where = f"seq {e.seq}: {type(ev).__name__} case {ev.case_id!r} attempt {ev.attempt}"
        if ev.case_id not in planned or not 1 <= ev.attempt <= started.attempts:
            result.errors.append(f"{where} is not a planned attempt")
        seen["sha256:" + e.leaf_hash.hex()] = (ev.case_id, ev.attempt)
        if isinstance(ev, ScoreComputed):
            for link in ev.evidence:
                if seen.get(link) != (ev.case_id, ev.attempt):
                    result.errors.append(f"{where}: evidence {link} is not an earlier event of it")
            if gold.get(ev.case_id) not in (None, ev.gold_digest):
                result.errors.append(f"{where}: gold digest differs from the bank's")
            key = (ev.case_id, ev.attempt, ev.scorer_version)
            if key in verdicts:
                result.errors.append(
                    f"{where}: duplicate verdict under scorer {ev.scorer_version} "
                    f"(first at seq {verdicts[key]})"
                )
            else:
                verdicts[key] = e.seq


def check_baseline(
    folder: Path, *, require_full: bool = False, require_fields: Sequence[str] = ()
) -> CheckResult:
    """Run every check on a baseline folder (see the module doc).

    Raises:
        UsageError: the folder is not a baseline (could not check).
    """
    bundle = read_bundle(folder)  # a structural problem cannot be checked further
    result = CheckResult(folder, bundle.run_id)
    try:
        genesis = verify_bundle(bundle)
    except LedgerError as exc:
        result.errors.append(f"bundle does not verify: {exc.message}")
        return result
    result.notes.append(f"{len(bundle.events)} events verified; genesis operator key {genesis}")
    _reconcile(bundle, result)
    _completeness(bundle, result, require_full)
    for name in require_fields:
        have, total = result.coverage[name]
        if have < total:
            result.errors.append(
                f"--require-fields {name}: only {have} of {total} attempts have it"
            )
    try:
        failures: list[str] = []
        recomputed = recompute_scorecard(bundle, failures)
    except InternalError:
        raise  # a caseledger bug, not a finding about the baseline
    except LedgerError as exc:
        result.errors.append(f"metrics are not computable: {exc.message}")
        return result
    result.notes.append(
        f"metrics recomputed by scorer {score_mod.SCORER_VERSION}: {len(recomputed.metrics)}"
    )
    if failures:
        result.errors.append(
            f"{len(failures)} recorded scores cannot be re-derived by the current scorer: "
            + "; ".join(failures[:5])
        )
    if bundle.pinned is None:
        result.errors.append(f"no pinned {SCORECARD_FILE}; run `caseledger baseline pin {folder}`")
        return result
    stale = stale_fields(bundle.pinned, recomputed)
    if stale:
        result.errors.append(
            "the pinned scorecard is not what the current code computes from the frozen "
            f"events ({len(stale)} differences): "
            + "; ".join(stale)
            + f". If the change is intended, re-pin: caseledger baseline pin {folder}"
        )
    else:
        result.notes.append("pinned scorecard equals the recomputed one")
    return result
