"""Record a calibration as a run in the ledger: RunStarted (run_kind calibration), one event
per mutant and positive control, CalibrationFinished, RunFinished — one signed batch.

Mutated SQL is recorded by its SHA-256 only (it is derived from reference SQL,
which never enters the log); the report printed by ``caseledger calibrate``
shows it.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import duckdb

from ledger import __version__
from ledger.bank.registry import PublishedBank
from ledger.calibration.calibrate import CalibrationResult, pattern_of
from ledger.calibration.oracle import Judged
from ledger.calibration.report import report_dict
from ledger.codec import digest, sha256_hex
from ledger.events import (
    CalibrationControlChecked,
    CalibrationFinished,
    CalibrationMutantJudged,
    DatabaseVerdict,
    GenerationParams,
    RunFinished,
    RunStarted,
    VariantSummary,
    Versions,
)
from ledger.harness.protocol import OUTPUT_CONTRACT
from ledger.keys import Signer
from ledger.store import Draft, Ledger
from projections.report.schema import CONTRACT as REPORT_CONTRACT

__all__ = ["ADAPTER_KIND", "next_run_id", "record_calibration"]

ADAPTER_KIND = "calibration"


def next_run_id(ledger: Ledger, bank_hash: str) -> str:
    """``calibration-<12 hex of the bank hash>-<n>``: n counts this bank's calibration runs.

    Derived from the ledger, not from a clock or randomness.
    """
    n = 1
    for stored in ledger.events_of_type(RunStarted):
        event = stored.event()
        if isinstance(event, RunStarted) and event.run_kind == "calibration":
            n += event.bank_hash == bank_hash
    return f"calibration-{bank_hash.removeprefix('sha256:')[:12]}-{n}"


def _verdicts(judged: tuple[Judged, ...]) -> tuple[DatabaseVerdict, ...]:
    return tuple(
        DatabaseVerdict(
            database=j.database,
            result_correct=j.result_correct,
            error_kind=j.error_kind,
            result_digest=j.result_digest,
        )
        for j in judged
    )


def _started(result: CalibrationResult, published: PublishedBank, run_id: str) -> dict[str, Any]:
    event = published.event
    return {
        "run_id": run_id,
        "run_kind": "calibration",
        "bank_id": event.bank_id,
        "bank_version": event.version,
        "bank_hash": event.content_sha256,
        "adapter_kind": ADAPTER_KIND,
        "profile": "calibration",
        "requested_model": None,
        "provider": None,
        "auth_mode": None,
        "params": GenerationParams(),
        "timeout_ms": 5000,
        "harness_kind": "calibration",
        "bridge_version": None,
        "policy_version": None,
        "response_mode": "text",
        "single_turn": True,
        "tools": "off",
        "retries": 0,
        "context_isolation": "no-model",
        "system_prompt_digest": None,
        # No prompt is sent in a calibration: the contract is the calibration file.
        "prompt_contract_digest": result.calibration.sha256 if result.calibration else "none",
        "attempts": 1,
        "case_ids": tuple(c.id for c in event.cases),
        "versions": Versions(
            app=__version__,
            scorer=result.scorer_version,
            duckdb=duckdb.__version__,
            sqlglot=importlib.metadata.version("sqlglot"),
            output_contract=OUTPUT_CONTRACT,
            report_contract=REPORT_CONTRACT,
        ),
    }


def _finished(result: CalibrationResult) -> dict[str, Any]:
    return {
        "calibration_sha256": result.calibration.sha256 if result.calibration else None,
        "scorer_version": result.scorer_version,
        "variants": tuple(
            VariantSummary(
                variant_id=v.id,
                stale=v.variant.stale,
                tables_digest=v.tables_digest,
                gold_digest=v.gold_digest,
            )
            for v in result.variants
        ),
        "killed": result.count("killed"),
        "survived": result.count("survived"),
        "equivalent": result.count("equivalent"),
        "blocked": result.count("blocked"),
        "unsupported": result.count("unsupported"),
        "not_applicable": result.count("not_applicable"),
        "kill_rate": result.kill_rate,
        "controls_passed": result.controls_passed,
        "controls_total": len(result.controls),
        "passed": result.passed,
        "report_digest": digest(report_dict(result)),
    }


def record_calibration(
    ledger: Ledger,
    signer: Signer,
    result: CalibrationResult,
    published: PublishedBank,
    *,
    run_id: str | None = None,
) -> str:
    """Append the calibration run in one batch and return its run id."""
    if published.event.content_sha256 != result.bank.content_sha256:
        raise ValueError("the calibration result is for another bank than the published one")
    run_id = run_id or next_run_id(ledger, published.event.content_sha256)
    drafts = [Draft(RunStarted, run_id, _started(result, published, run_id))]
    for rec in result.mutants:
        m = rec.mutant
        sql_hash = sha256_hex(m.sql.encode("utf-8")) if m.sql is not None else None
        # Draft.fields is dict[str, Any]; the control loop below reuses the name.
        fields: dict[str, Any] = {
            "case_id": m.case_id,
            "mutant_id": m.id,
            "operator": m.operator,
            "pattern": pattern_of(m.operator),
            "status": rec.status,
            "reason": rec.reason,
            "sql_sha256": sql_hash,
            "verdicts": _verdicts(rec.verdicts),
            "review": rec.review,
        }
        drafts.append(Draft(CalibrationMutantJudged, run_id, fields))
    for c in result.controls:
        fields = {
            "case_id": c.case_id,
            "index": c.index,
            "sql_sha256": sha256_hex(c.sql.encode("utf-8")),
            "passed": c.passed,
            "verdicts": _verdicts(c.verdicts),
        }
        drafts.append(Draft(CalibrationControlChecked, run_id, fields))
    drafts.append(Draft(CalibrationFinished, run_id, _finished(result)))
    status = "completed" if result.passed else "failed"
    message = "" if result.passed else "a positive control was rejected by the oracle"
    drafts.append(Draft(RunFinished, run_id, {"status": status, "message": message}))
    ledger.append(drafts, signer)
    return run_id
