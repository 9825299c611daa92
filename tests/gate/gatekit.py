"""Real ledgers for gate tests: replay runs on the built-in sales-fixture bank.

``build_gate_ledger`` publishes sales-fixture (and a copy of it under another
version, so another bank hash), writes replay files answering every case with
its reference SQL (case sf-02 answered wrongly on every attempt, so the rates
are not all 1) and runs:

* ``base4``: 4 attempts per case, tools declared off;
* ``cur3``: the same recordings, 3 attempts per case;
* ``tools-unknown``: the same recordings, tools state not declared;
* ``gaps``: a replay file without attempt 2 of sf-01 (cancelled: missing recording);
* ``other-bank``: the same recordings on the copied bank (another content hash).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ledger.keys import Signer
from ledger.store import Ledger

CLOCK = "2026-12-02T10:00:00.000000Z"
WRONG_CASE = "sf-02"


def fixed_clock() -> str:
    """Every event claims the same time."""
    return CLOCK


def _answer(sql: str) -> str:
    return json.dumps(
        {
            "plan": {
                "grain": "one row per answer",
                "sources": ["see sql"],
                "joins": [],
                "filters": [],
                "metrics": [],
                "steps": ["write one query"],
                "risks": [],
            },
            "sql": sql,
            "summary": "answer",
            "assumptions": [],
        }
    )


def replay_lines(refs: dict[str, str], attempts: int, skip: set[tuple[str, int]]) -> str:
    """One recording per (case, attempt): reference SQL, except a wrong count for WRONG_CASE."""
    lines = []
    for case_id in sorted(refs):
        sql = "SELECT 1 AS wrong" if case_id == WRONG_CASE else refs[case_id]
        for n in range(1, attempts + 1):
            if (case_id, n) in skip:
                continue
            line: dict[str, Any] = {
                "case": case_id,
                "attempt": n,
                "output": _answer(sql),
                "generation_ms": 1000 + n,
                "usage": {"input": 1000, "output": 100},
                "request_id": f"req-{case_id}-{n}",
            }
            lines.append(json.dumps(line) + "\n")
    return "".join(lines)


def build_gate_ledger(folder: Path) -> Path:
    """Build the ledger described in the module doc under ``folder``; returns its path."""
    from ledger.adapters.base import build_adapter
    from ledger.app.evaluate import bank_context
    from ledger.bank.publish import publish
    from ledger.bank.registry import BUILTIN_DIR
    from ledger.run.runner import RunPlan, run

    folder.mkdir(parents=True, exist_ok=True)
    signer = Signer.from_seed("gate-test-operator", bytes(range(32)))
    path = folder / "ledger.db"
    copy = folder / "sales-fixture-v2"
    shutil.copytree(BUILTIN_DIR / "sales-fixture", copy)
    cases = copy / "cases.yaml"
    cases.write_text(cases.read_text("utf-8").replace('version: "v1"', 'version: "v2"', 1), "utf-8")
    with Ledger.create(path, signer, clock=fixed_clock) as ledger:
        main = publish(ledger, signer, BUILTIN_DIR / "sales-fixture", folder, cwd=folder)
        other = publish(ledger, signer, copy, folder, cwd=folder)
        ctx = bank_context(main.published, path, folder)
        ctx2 = bank_context(other.published, path, folder)
        refs = main.published.references()
        full = folder / "full.jsonl"
        full.write_text(replay_lines(refs, 4, set()), "utf-8")
        gaps = folder / "gaps.jsonl"
        gaps.write_text(replay_lines(refs, 3, {("sf-01", 2)}), "utf-8")
        plans = [
            ("base4", ctx, full, "off", 4),
            ("cur3", ctx, full, "off", 3),
            ("tools-unknown", ctx, full, None, 3),
            ("gaps", ctx, gaps, "off", 3),
            ("other-bank", ctx2, full, "off", 3),
        ]
        for run_id, bank, replay, tools, attempts in plans:
            options: dict[str, Any] = {"replay_file": str(replay)}
            if tools is not None:
                options["tools"] = tools
            adapter = build_adapter("replay", options, cases=None)
            try:
                plan = RunPlan(run_id=run_id, profile=run_id, attempts=attempts)
                run(ledger, signer, bank, adapter, plan, clock=fixed_clock)
            finally:
                adapter.close()
    return path


def report_of(ledger_path: Path) -> dict[str, Any]:
    """The canonical report dict of every run of the ledger."""
    from ledger.app.snapshot import read_state
    from projections.report.build import build_report, to_plain

    with Ledger.open(ledger_path, readonly=True) as ledger:
        snap = read_state(ledger)
    return to_plain(build_report(snap.state, root_hash=snap.root))


def run_entry(report: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The run entry of ``run_id`` in a report (for editing a real report)."""
    for section in report["sections"]:
        for entry in section["runs"]:
            if entry["run"] == run_id:
                return entry
    raise KeyError(run_id)


def only_run(report: dict[str, Any], run_id: str) -> dict[str, Any]:
    """A copy of the report that keeps only ``run_id`` (its section, entry and CaseRuns)."""
    out = json.loads(json.dumps(report))
    sections = []
    for section in out["sections"]:
        section["runs"] = [e for e in section["runs"] if e["run"] == run_id]
        section["caseruns"] = [c for c in section["caseruns"] if c["run"] == run_id]
        if section["runs"]:
            sections.append(section)
    out["sections"] = sections
    return out
