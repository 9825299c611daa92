"""The demo: the main job on the built-in default, for a new user with no model at hand.

It creates a fresh ledger in an output folder, publishes the built-in banks,
runs the harness's reference self-test on both and three recorded model
profiles (``ledger/demo/*.jsonl``, written for the demo with realistic faults)
on the retail bank, verifies the log, issues a checkpoint and writes the
reports. Everything goes through the same library calls as the CLI commands.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ledger.app.evaluate import Evaluator, now
from ledger.app.reporting import report_bytes
from ledger.bank.publish import publish
from ledger.bank.registry import builtin_banks
from ledger.errors import UsageError
from ledger.keys import Signer
from ledger.proofs import issue_checkpoint
from ledger.run.runner import RunPlan, RunSummary
from ledger.store import Ledger
from ledger.verify import verify_ledger

__all__ = ["DEMO_FILES", "PROFILES", "DemoResult", "recording", "run_demo", "write_reports"]

DATA = Path(__file__).resolve().parent.parent / "demo"
# Recorded profiles, in the order they run (file stem = profile name).
PROFILES = ("northwind-sql-pro", "harbor-coder-14b", "lumen-mini")
#: The built-in banks the demo publishes and runs.
DEMO_BANKS = ("retail", "sales-fixture")
DEMO_FILES = ("ledger.db", "checkpoint.note", "report.json", "report.md", "report.html")
REPORT_FORMATS = ("json", "md", "html")


def recording(profile: str) -> Path:
    """The replay file of a recorded demo profile."""
    return DATA / f"{profile}.jsonl"


@dataclass(frozen=True)
class DemoResult:
    """What the demo made."""

    out_dir: Path
    runs: tuple[RunSummary, ...]
    verified_size: int
    checkpoint_size: int
    report_size: int


def write_reports(ledger_path: Path, out_dir: Path, tree_size: int) -> None:
    """Write report.json, report.md and report.html built at ``tree_size`` into ``out_dir``,
    as ``caseledger report`` writes them by default (JSON: ``caseledger-report/3``), so the
    commands the demo prints rebuild them byte for byte."""
    for fmt in REPORT_FORMATS:
        data, _, _ = report_bytes(ledger_path, fmt=fmt, at_size=tree_size, detail="stats")
        (out_dir / f"report.{fmt}").write_bytes(data)


def run_demo(
    out_dir: Path,
    *,
    force: bool,
    echo: Callable[[str], None],
) -> DemoResult:
    """Run the whole demo into ``out_dir`` (see the module doc).

    Runs start through ``ledger.app.evaluate`` and reports are written by
    ``ledger.app.reporting``, as ``caseledger run`` and ``caseledger report`` do, so
    the demo and the commands it prints cannot drift apart.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    present = [name for name in DEMO_FILES if (out_dir / name).exists()]
    if present and not force:
        raise UsageError(
            f"{out_dir} already holds a demo ({', '.join(present)})",
            hint="pass --force to replace it, or -o another folder",
        )
    for name in (*DEMO_FILES, "ledger.db-wal", "ledger.db-shm", "keys/operator.key"):
        (out_dir / name).unlink(missing_ok=True)
    ledger_path = out_dir / "ledger.db"
    signer = Signer.generate("caseledger-demo-operator", role="operator")
    signer.save(out_dir / "keys" / "operator.key")
    summaries: list[RunSummary] = []
    with contextlib.ExitStack() as stack:
        ledger = stack.enter_context(Ledger.create(ledger_path, signer, clock=now))
        # Each bank's variant diagnostics start once and serve every run on it.
        evaluator = Evaluator(ledger, out_dir, local_path=ledger_path, signer=signer)
        stack.callback(evaluator.close)
        banks = {}
        # The banks the demo runs (not every built-in bank: a new one, such as
        # sales-fixture-v2, must not move the demo's log).
        for name, folder in sorted(builtin_banks().items()):
            if name not in DEMO_BANKS:
                continue
            result = publish(ledger, signer, folder, out_dir, cwd=Path.cwd())
            banks[name] = result.published
            echo(f"published bank {result.published.ref}")
        plans: list[tuple[str, str, dict[str, object]]] = [
            ("sales-fixture", "reference", {}),
            ("retail", "reference", {}),
        ]
        plans += [
            ("retail", "replay", {"replay_file": str(recording(p)), "tools": "off", "profile": p})
            for p in PROFILES
        ]
        for bank_name, kind, options in plans:
            profile = str(options.pop("profile", f"self-test-{bank_name}"))
            plan = RunPlan(run_id=f"demo-{profile}", profile=profile)
            summary = evaluator.evaluate(banks[bank_name], kind, plan, options=options)
            summaries.append(summary)
            echo(f"ran {plan.run_id}: {summary.correct}/{summary.planned} attempts result-correct")
        verified = verify_ledger(ledger)
        echo(f"verified {verified.size} events")
        note = issue_checkpoint(ledger, signer)
        (out_dir / "checkpoint.note").write_text(note, "utf-8")
        checkpoint_size = int(note.splitlines()[1])
        report_size = checkpoint_size  # the report names the checkpoint it was built from
    write_reports(ledger_path, out_dir, report_size)
    return DemoResult(
        out_dir=out_dir,
        runs=tuple(summaries),
        verified_size=verified.size,
        checkpoint_size=checkpoint_size,
        report_size=report_size,
    )
