"""Replay throughput of the projections against msgspec decoding alone, report time, peak memory.

Usage:
    python benchmarks/projection_bench.py                    # 100,000 and 10,000 CaseRuns
    python benchmarks/projection_bench.py --caseruns 20000 --small 2000 --dir /tmp/bench

A synthetic ledger is written with the real store (real signatures): one bank,
runs of 1,000 CaseRuns (100 cases x 10 attempts),
each CaseRun PromptSent, ModelResponded, OutputParsed, SqlGuarded, SqlExecuted,
ScoreComputed, plus every tenth attempt a second SqlExecuted (worker crash
retry), about 6.1 events per CaseRun. Each measurement runs in its own child
process so its peak RSS (``ru_maxrss``) is its own:

- decode only: ``codec.decode`` over every body, the bodies already in memory;
- rebuild: ``ProjectionStore.rebuild`` (read from SQLite, file each attempt event's
  seq under its CaseRun from its envelope, decode and fold the other events, write
  the seq lists to the store file), events/s and share of decode-only (target >= 25 %);
- in-memory replay: ``replay_ledger`` (the whole state in memory);
- report: ``load_state`` from the caught-up store (it reads and decodes the run's
  events by seq) + ``build_report`` + canonical JSON + HTML, for one run (1,000 CaseRuns).

Peak memory of the rebuild is measured at two ledger sizes (target: flat).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

PER_RUN = 1000
CASES = 100


def _clock() -> str:
    return "2026-12-02T10:00:00.000000Z"


def build(path: Path, caseruns: int) -> int:
    """Write a synthetic ledger of ``caseruns`` CaseRuns; returns its size."""
    from ledger import codec
    from ledger import events as ev
    from ledger.keys import Signer
    from ledger.store import Ledger, link_of

    signer = Signer.from_seed("bench-operator", bytes(range(32)), role="operator")
    ledger = Ledger.create(path, signer, clock=_clock)
    h = "sha256:" + "ab" * 32
    cases = tuple(
        ev.CaseSpec(
            id=f"c{i:03d}",
            dimension=("basic", "joins_grain", "aggregation_metrics", "time_window", "complex",
                       "data_dev")[i % 6],
            difficulty=("easy", "medium", "hard")[i % 3],
            weight=Decimal(1 + i % 3),
            question=f"question {i}",
            max_rows=100,
            reference_sql_sha256=h,
        )
        for i in range(CASES)
    )  # fmt: skip
    col = (ev.Column(name="n", type="BIGINT"),)
    gold = tuple(ev.GoldResult(case_id=c.id, columns=col, rows=((1,),), digest=h) for c in cases)
    bank = ev.BankPublished(
        stream="ledger", stream_seq=1, stream_prev=link_of(ledger.get(0).leaf_hash), at=_clock(),
        bank_id="bench", version="v1", content_sha256=h, files={},
        build=ev.BuildSettings(duckdb_version="1.5.5", timezone="UTC", threads=1,
                               external_access=False),
        schema_sql="", tables=(), semantic_json="{}", prompt_template="{{question}}",
        cases=cases, gold=gold, gold_digest=h,
    )  # fmt: skip
    ledger.append([bank], signer)
    inv = ev.Invocation(
        harness_kind="bench", response_mode="text", single_call=True, tools="off", retries=0,
        prompt_contract_digest=h, system_prompt_digest=None, wire_protocol="replay",
        client_version="bench/1",
    )  # fmt: skip
    versions = ev.Versions(
        app="0.1.0", scorer="2.0.0", duckdb="1.5.5", sqlglot="30.31.0",
        output_contract="query-plan-v1", report_contract="caseledger-report/1",
    )  # fmt: skip
    prompt = "You are given a DuckDB schema ... " * 20
    plan = ev.Plan(grain="g", sources=("t",), joins=(), filters=(), metrics=(), steps=(), risks=())
    items = ev.ScoreItems(protocol=Decimal(5), guard=Decimal(5), executed=Decimal(10),
                          column_count=Decimal(5), column_names=Decimal(5), rows=Decimal(45),
                          order=Decimal(10), ast=Decimal(15))  # fmt: skip
    for r in range(caseruns // PER_RUN):
        run_id = f"run-{r:04d}"
        seq, prev = -1, None
        batch = []

        def make(cls, _stream=run_id, _batch=batch, **fields):
            nonlocal seq, prev
            seq += 1
            event = cls(stream=_stream, stream_seq=seq, stream_prev=prev, at=_clock(), **fields)
            prev = link_of(codec.leaf_hash(codec.encode(event)))
            _batch.append(event)
            return prev

        make(ev.RunStarted, run_id=run_id, run_kind="model", bank_id="bench", bank_version="v1",
             bank_hash=h, adapter_kind="replay", profile=f"p{r}", requested_model=f"m{r % 5}",
             provider=None, auth_mode=None, params=ev.GenerationParams(), timeout_ms=1000,
             harness_kind="bench", bridge_version=None, policy_version=None,
             response_mode="text", single_turn=True, tools="off", retries=0,
             context_isolation="fresh", system_prompt_digest=None, prompt_contract_digest=h,
             attempts=PER_RUN // CASES, case_ids=tuple(c.id for c in cases),
             versions=versions)  # fmt: skip
        for i in range(PER_RUN):
            case, n = cases[i % CASES].id, i // CASES + 1
            ids = {"case_id": case, "attempt": n}
            sql = f"SELECT COUNT(*) AS n FROM t WHERE k = {i}"
            ev_links = [
                make(ev.PromptSent, **ids, prompt=prompt + case, prompt_sha256=h),
                make(ev.ModelResponded, **ids, raw_output='{"sql": "' + sql + '"}',
                     provider_request_id=None, resolved_model=None, invocation=inv,
                     usage=ev.Usage(input=900, output=120), generation_us=1000 + i),
                make(ev.OutputParsed, **ids, protocol_strict=True, recovered_from_fence=False,
                     plan=plan, sql=sql, summary="s", assumptions=(), error=None),
                make(ev.SqlGuarded, **ids, passed=True, violations=(), ast_digest=h),
            ]  # fmt: skip
            for worker_try in (1, 2) if i % 10 == 0 else (1,):
                ev_links.append(
                    make(ev.SqlExecuted, **ids, ok=True, error_kind=None, error_message=None,
                         columns=col, rows=((i,),), row_count=1, truncated=False, sql_us=300 + i,
                         worker_try=worker_try)
                )  # fmt: skip
            correct = i % 4 != 0
            make(ev.ScoreComputed, **ids, scorer_version="2.0.0", evidence=tuple(ev_links),
                 gold_digest=h, alignment="names", column_mapping=(0,), matched=int(correct),
                 expected_rows=1, actual_rows=1, precision=Decimal(int(correct)),
                 recall=Decimal(int(correct)), f1=Decimal(int(correct)), order_ok=correct,
                 non_finite=False, ast_rules=(), items=items,
                 total=Decimal("100.00") if correct else Decimal("55.00"),
                 result_correct=correct, format_ok=True, failure_kind="none",
                 sql_structural_match=None)  # fmt: skip
        for start in range(0, len(batch), 5000):
            ledger.append(batch[start : start + 5000], signer)
    size = ledger.size()
    ledger.close()
    return size


# ----------------------------------------------------------------- child measurements


def _child(mode: str, path: Path) -> dict[str, float]:
    from ledger import codec
    from ledger.projstore import (
        ProjectionStore,
        checkpoint_root,
        load_state,
        replay_ledger,
        store_path,
    )
    from ledger.store import Ledger
    from projections.report import build_report, render

    out: dict[str, float] = {}
    with Ledger.open(path, readonly=True) as ledger:
        n = ledger.size()
        if mode == "decode":
            bodies = [row.body for row in ledger.iter_events()]
            t = time.perf_counter()
            decode = codec.decode
            for body in bodies:
                decode(body)
            out["seconds"] = time.perf_counter() - t
        elif mode == "rebuild":
            t = time.perf_counter()
            with ProjectionStore(store_path(path)) as store:
                store.rebuild(ledger)
            out["seconds"] = time.perf_counter() - t
        elif mode == "replay":
            t = time.perf_counter()
            replay_ledger(ledger)
            out["seconds"] = time.perf_counter() - t
        elif mode == "report":
            t = time.perf_counter()
            state = load_state(ledger, runs=["run-0000"])
            report = build_report(
                state, root_hash=checkpoint_root(ledger, state.size), runs=["run-0000"]
            )
            out["json_bytes"] = len(render(report, "json"))
            out["html_bytes"] = len(render(report, "html"))
            out["seconds"] = time.perf_counter() - t
        out["events"] = n
    out["peak_mb"] = _peak_mb()
    return out


def _peak_mb() -> float:
    """This process's peak RSS: VmHWM (ru_maxrss can carry the parent's peak over exec)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _measure(mode: str, path: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caseruns", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child[0], Path(args.child[1]))))
        return
    folder = args.dir or Path(tempfile.mkdtemp(prefix="projection-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for caseruns in (args.small, args.caseruns):
        path = folder / f"bench-{caseruns}.db"
        if not path.exists():
            t = time.perf_counter()
            build(path, caseruns)
            print(f"built {path.name} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        decode = _measure("decode", path)
        rebuild = _measure("rebuild", path)
        replay = _measure("replay", path)
        report = _measure("report", path)
        n = decode["events"]
        rows.append((caseruns, n, decode, rebuild, replay, report))
    print("| CaseRuns | events | decode only ev/s | rebuild ev/s | rebuild / decode | "
          "in-memory replay ev/s | report (1 run) s | peak MB decode | peak MB rebuild | "
          "peak MB replay | peak MB report |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for caseruns, n, d, rb, rp, rep in rows:
        print(
            f"| {caseruns:,} | {int(n):,} | {n / d['seconds']:,.0f} | {n / rb['seconds']:,.0f} | "
            f"{d['seconds'] / rb['seconds']:.0%} | {n / rp['seconds']:,.0f} | "
            f"{rep['seconds']:.2f} | {d['peak_mb']:.0f} | {rb['peak_mb']:.0f} | "
            f"{rp['peak_mb']:.0f} | {rep['peak_mb']:.0f} |"
        )


if __name__ == "__main__":
    main()
