"""Regenerate tests/baselines/demo/: the demo's three recorded profiles, frozen and pinned.

Builds a throwaway ledger the way ``caseledger demo`` does (the built-in retail
bank, the three recordings in ledger/demo/, tools declared off) but with a
fixed test key and a fixed clock, then runs ``baseline freeze`` on each run.
The bytes are reproducible except the measured SQL times (``sql_us``), which
the worker really measures: a regeneration moves ``sql_exec_p95_ms``.
Run it only on purpose, and review the diff:

    python tools/regen_demo_baseline.py

A scorer or metric change that only moves numbers needs ``caseledger baseline
pin tests/baselines/demo/<profile>`` instead (the events stay frozen).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "baselines" / "demo"
SEED = b"caseledger-demo-baseline-seed-01"  # a public test key: these bundles prove nothing


def main() -> int:
    """Build the ledger, freeze every profile, print what was written."""
    from ledger import codec
    from ledger.adapters.base import build_adapter
    from ledger.app.baseline import freeze
    from ledger.app.demo import PROFILES, recording
    from ledger.bank.publish import publish
    from ledger.bank.registry import builtin_banks
    from ledger.cli.run import bank_context
    from ledger.keys import Signer
    from ledger.run.runner import RunPlan, run
    from ledger.store import Ledger

    signer = Signer.from_seed("caseledger-demo-baseline", SEED)

    def clock() -> str:
        return codec.format_time(dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC))

    with tempfile.TemporaryDirectory(prefix="caseledger-baseline-") as tmp:
        home = Path(tmp)
        with Ledger.create(home / "ledger.db", signer, clock=clock) as ledger:
            folder = builtin_banks()["retail"]
            published = publish(ledger, signer, folder, home, cwd=home).published
            ctx = bank_context(published, home / "ledger.db", home)
            for profile in PROFILES:
                options = {"replay_file": str(recording(profile)), "tools": "off"}
                adapter = build_adapter(
                    "replay", options, cases=None, environ=os.environ, hidden_paths=()
                )
                try:
                    plan = RunPlan(
                        run_id=f"demo-{profile}",
                        profile=profile,
                        attempts=adapter.identity.default_attempts,
                    )
                    run(ledger, signer, ctx, adapter, plan, clock=clock)
                finally:
                    adapter.close()
            for profile in PROFILES:
                target = OUT / profile
                shutil.rmtree(target, ignore_errors=True)
                card = freeze(ledger, f"demo-{profile}", target)
                rate = card["metrics"]["result_correct_rate"]
                print(f"{target.relative_to(REPO)}: result_correct_rate {rate}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
