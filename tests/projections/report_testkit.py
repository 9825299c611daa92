"""Helpers for projection and report tests: hand-made event ledgers and a real run ledger.

``HandLedger`` appends hand-made event sequences to a real Ledger (real keys,
real store) so tests control every number. ``real_ledger`` runs the real
runner on the built-in ``sales-fixture`` bank with the reference adapter and a
replay file holding faults (renamed column, fenced answer, guard violation,
provider timeout, missing recording).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

from ledger import codec
from ledger import events as ev
from ledger.calibration import kill_rate
from ledger.checkpoint import format_checkpoint
from ledger.keys import EVENT_SIGNING_PREFIX_V2, Signer
from ledger.merkle import TreeAccumulator
from ledger.store import GENESIS_CHAIN, Draft, Ledger, link_of

CLOCK = "2026-12-02T10:00:00.000000Z"
STATUSES = ("killed", "survived", "equivalent", "blocked", "unsupported", "not_applicable")
OPERATOR_SEED = bytes(range(32))


def fixed_clock() -> str:
    """Every event claims the same time: the bytes depend on content only."""
    return CLOCK


def operator() -> Signer:
    return Signer.from_seed("test-operator", OPERATOR_SEED, role="operator")


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class HandLedger:
    """Builds a ledger event by event. ``cases``: (id, dimension, difficulty, weight)."""

    def __init__(self, path: Path, cases: list[tuple[str, str, str, str]]) -> None:
        self.signer = operator()
        self.ledger = Ledger.create(path, self.signer, clock=fixed_clock)
        self.cases = cases
        specs = tuple(
            ev.CaseSpec(
                id=c,
                dimension=dim,
                difficulty=diff,
                weight=Decimal(w),
                question=f"question {c}?",
                max_rows=10,
                reference_sql_sha256=_sha(c),
            )
            for c, dim, diff, w in cases
        )
        gold = tuple(
            ev.GoldResult(
                case_id=c,
                columns=(ev.Column(name="n", type="BIGINT"),),
                rows=((1,),),
                digest=_sha(c),
            )
            for c, *_ in cases
        )
        fields = {
            "bank_id": "hand",
            "version": "v1",
            "content_sha256": "sha256:" + "ab" * 32,
            "files": {},
            "build": ev.BuildSettings(
                duckdb_version="1.5.5", timezone="UTC", threads=1, external_access=False
            ),
            "schema_sql": "CREATE TABLE t (n BIGINT);",
            "tables": (),
            "semantic_json": "{}",
            "prompt_template": "{{question}}",
            "cases": specs,
            "gold": gold,
            "gold_digest": _sha("gold"),
        }
        self.append(Draft(ev.BankPublished, ev.LEDGER_STREAM, fields))

    def append(self, *drafts: Draft) -> list[int]:
        return self.ledger.append(list(drafts), self.signer)

    def run(
        self,
        run_id: str,
        *,
        attempts: int = 3,
        kind: str = "model",
        model: str = "model-x",
        scorer: str = "2.0.0",
    ) -> None:
        fields = {
            "run_id": run_id,
            "run_kind": kind,
            "bank_id": "hand",
            "bank_version": "v1",
            "bank_hash": "sha256:" + "ab" * 32,
            "adapter_kind": "replay",
            "profile": f"profile-{run_id}",
            "requested_model": model,
            "provider": "prov",
            "auth_mode": "api_key",
            "params": ev.GenerationParams(),
            "timeout_ms": 1000,
            "harness_kind": "caseledger-replay",
            "bridge_version": None,
            "policy_version": None,
            "response_mode": "text",
            "single_turn": True,
            "tools": "off",
            "retries": 0,
            "context_isolation": "fresh-context-per-attempt",
            "system_prompt_digest": None,
            "prompt_contract_digest": "sha256:" + "cd" * 32,
            "attempts": attempts,
            "case_ids": tuple(c for c, *_ in self.cases),
            "versions": ev.Versions(
                app="0.1.0",
                scorer=scorer,
                duckdb="1.5.5",
                sqlglot="30.31.0",
                output_contract="query-plan-v1",
                report_contract="caseledger-report/1",
            ),
        }
        self.append(Draft(ev.RunStarted, run_id, fields))

    @staticmethod
    def invocation(**overrides: Any) -> ev.Invocation:
        fields: dict[str, Any] = {
            "harness_kind": "caseledger-replay",
            "response_mode": "text",
            "single_call": True,
            "tools": "off",
            "retries": 0,
            "prompt_contract_digest": "sha256:" + "cd" * 32,
            "system_prompt_digest": None,
            "wire_protocol": "replay",
            "client_version": "test/1",
            "provider": "prov",
            "auth_mode": "api_key",
            "model": "model-x",
            "parameters": {},
        }
        fields.update(overrides)
        return ev.Invocation(**fields)

    def scored(
        self,
        run_id: str,
        case: str,
        n: int,
        total: str,
        *,
        correct: bool | None = True,
        failure: str = "none",
        format_ok: bool = True,
        usage: tuple[int, int] | None = (100, 20),
        generation_us: int | None = 1000,
        sql_us: int | None = 500,
        cost: str | None = None,
        invocation: ev.Invocation | None = None,
        scorer: str = "2.0.0",
    ) -> None:
        """One complete attempt ending in a ScoreComputed with this total."""
        ids = {"case_id": case, "attempt": n}
        inv = invocation or self.invocation()
        drafts = [
            Draft(
                ev.PromptSent, run_id, {**ids, "prompt": f"p {case}", "prompt_sha256": _sha(case)}
            ),
            Draft(
                ev.ModelResponded,
                run_id,
                {
                    **ids,
                    "raw_output": f"out {case} {n}",
                    "provider_request_id": None,
                    "resolved_model": None,
                    "invocation": inv,
                    "usage": None if usage is None else ev.Usage(input=usage[0], output=usage[1]),
                    "cost": None if cost is None else Decimal(cost),
                    "generation_us": generation_us,
                },
            ),
        ]
        if sql_us is not None:
            drafts.append(
                Draft(
                    ev.SqlExecuted,
                    run_id,
                    {
                        **ids,
                        "ok": failure != "execution",
                        "error_kind": "sql_runtime" if failure == "execution" else None,
                        "error_message": None,
                        "columns": (ev.Column(name="n", type="BIGINT"),),
                        "rows": ((1,),),
                        "row_count": 1,
                        "truncated": False,
                        "sql_us": sql_us,
                    },
                )
            )
        seqs = self.append(*drafts)
        evidence = tuple(link_of(self.ledger.get(s).leaf_hash) for s in seqs)  # type: ignore[union-attr]
        t = Decimal(total)
        score = {
            **ids,
            "scorer_version": scorer,
            "evidence": evidence,
            "gold_digest": _sha(case),
            "alignment": "names",
            "column_mapping": (0,),
            "matched": 1 if correct else 0,
            "expected_rows": 1,
            "actual_rows": 1,
            "precision": Decimal(1),
            "recall": Decimal(1),
            "f1": Decimal(1),
            "order_ok": bool(correct),
            "non_finite": False,
            "ast_rules": (),
            "items": ev.ScoreItems(
                protocol=Decimal(0),
                guard=Decimal(0),
                executed=Decimal(0),
                column_count=Decimal(0),
                column_names=Decimal(0),
                rows=t,
                order=Decimal(0),
                ast=Decimal(0),
            ),
            "total": t,
            "result_correct": correct,
            "format_ok": format_ok,
            "failure_kind": failure,
            "sql_structural_match": None,
        }
        self.append(Draft(ev.ScoreComputed, run_id, score))

    def variant_checked(
        self,
        run_id: str,
        case: str,
        n: int,
        flags: tuple[str, ...] = (),
        *,
        calibration: str = "sha256:" + "ca" * 32,
    ) -> None:
        """The variant diagnostics of one attempt (after its ScoreComputed, as the runner does)."""
        outcomes = (
            ev.VariantOutcome(
                variant_id="third-region",
                non_interfering=True,
                result_correct="variant_mismatch" not in flags,
                moved="scope_leak" in flags,
            ),
        )
        fields = {
            "case_id": case,
            "attempt": n,
            "calibration_sha256": calibration,
            "flags": flags,
            "outcomes": outcomes,
        }
        self.append(Draft(ev.VariantChecked, run_id, fields))

    def calibrated(
        self,
        run_id: str,
        mutants: list[tuple[str, str, str]],
        controls: list[tuple[str, bool]],
        *,
        finished: bool = True,
    ) -> None:
        """A calibration run's verdict events. ``mutants``: (case, mutant id, status);
        ``controls``: (case, passed). Totals in CalibrationFinished are counted here; the kill
        rate is ``ledger.calibration.kill_rate``, as ``calibrate`` records it."""
        drafts = []
        for case, mutant, status in mutants:
            fields = {
                "case_id": case,
                "mutant_id": mutant,
                "operator": mutant.split("#")[0],
                "pattern": "5",
                "status": status,
                "reason": f"planted {mutant}",
                "sql_sha256": _sha(f"SELECT mutated {case} {mutant}"),
                "verdicts": (ev.DatabaseVerdict(database="base", result_correct=True),),
                "review": "reviewed: same rows" if status == "equivalent" else None,
            }
            drafts.append(Draft(ev.CalibrationMutantJudged, run_id, fields))
        for i, (case, passed) in enumerate(controls):
            fields = {
                "case_id": case,
                "index": i,
                "sql_sha256": _sha(f"SELECT control {case} {i}"),
                "passed": passed,
                "verdicts": (ev.DatabaseVerdict(database="base", result_correct=passed),),
            }
            drafts.append(Draft(ev.CalibrationControlChecked, run_id, fields))
        if finished:
            count = {s: sum(1 for m in mutants if m[2] == s) for s in STATUSES}
            killed, survived = count["killed"], count["survived"]
            fields = {
                "calibration_sha256": "sha256:" + "ca" * 32,
                "scorer_version": "2.0.0",
                "variants": (
                    ev.VariantSummary(
                        variant_id="third-region",
                        stale=False,
                        tables_digest=_sha("tables"),
                        gold_digest=_sha("variant gold"),
                    ),
                ),
                **count,
                # the recorder's one definition; tests pin the value they expect by hand
                "kill_rate": kill_rate(killed, survived),
                "controls_passed": sum(1 for _, p in controls if p),
                "controls_total": len(controls),
                "passed": all(p for _, p in controls),
                "report_digest": _sha("report"),
            }
            drafts.append(Draft(ev.CalibrationFinished, run_id, fields))
        self.append(*drafts)

    def cancelled(self, run_id: str, case: str, n: int, reason: str = "interrupted") -> None:
        fields = {"case_id": case, "attempt": n, "reason": reason, "message": reason}
        self.append(Draft(ev.AttemptCancelled, run_id, fields))

    def finish(self, run_id: str, status: str = "completed") -> None:
        self.append(Draft(ev.RunFinished, run_id, {"status": status}))


# ----------------------------------------------------------------- a real run


RENAMED_CASE = ("sf-01", 1)  # column renamed: only the names item fails
FENCED_CASE = ("sf-01", 2)  # a ```json fence: protocol 0, not format_ok
GUARD_CASE = ("sf-03", 1)  # DROP TABLE: guard failure
TIMEOUT_CASE = ("sf-02", 3)  # provider timeout
MISSING_CASE = ("sf-07", 3)  # no recording: cancelled, missing_recording


def _replay_lines(references: dict[str, str]) -> list[dict[str, Any]]:
    from ledger.adapters.reference import reference_output

    lines = []
    for i, case in enumerate(sorted(references)):
        for n in (1, 2, 3):
            key = (case, n)
            if key == MISSING_CASE:
                continue
            sql = references[case]
            output = reference_output(sql)
            line: dict[str, Any] = {
                "case": case,
                "attempt": n,
                "usage": {"input": 900 + i, "output": 100 + n},
                "generation_ms": str(1000 + 100 * i + n),
                "model": "demo-model-1",
            }
            if key == RENAMED_CASE:
                output = reference_output(sql.replace("AS order_count", "AS n_orders"))
            elif key == FENCED_CASE:
                output = "```json\n" + output + "\n```"
            elif key == GUARD_CASE:
                output = reference_output("DROP TABLE sales")
            if key == TIMEOUT_CASE:
                line["error"] = {"kind": "timeout", "message": "no answer within 60 s"}
            else:
                line["output"] = output
            lines.append(line)
    return lines


def build_real_ledger(folder: Path) -> Path:
    """Publish sales-fixture, run the reference adapter (1 attempt) and a replay (3 attempts)."""
    from ledger.adapters.base import build_adapter
    from ledger.app.evaluate import bank_context
    from ledger.bank.publish import publish
    from ledger.bank.registry import BUILTIN_DIR
    from ledger.run import runner

    folder.mkdir(parents=True, exist_ok=True)
    signer = operator()
    signer.save(folder / "keys" / "operator.key")  # `caseledger rescore` signs with it
    path = folder / "ledger.db"
    with Ledger.create(path, signer, clock=fixed_clock) as ledger:
        published = publish(ledger, signer, BUILTIN_DIR / "sales-fixture", folder, cwd=folder)
        pb = published.published
        bank = bank_context(pb, path, folder)
        refs = bank.reference_sql
        reference = build_adapter("reference", {}, cases=refs)
        plan = runner.RunPlan(run_id="self-test", profile="reference", attempts=1)
        runner.run(ledger, signer, bank, reference, plan, clock=fixed_clock)
        replay_file = folder / "model-a.jsonl"
        replay_file.write_text(
            "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in _replay_lines(refs)),
            encoding="utf-8",
        )
        adapter = build_adapter("replay", {"replay_file": str(replay_file), "tools": "off"})
        plan = runner.RunPlan(run_id="model-a", profile="model-a", attempts=3)
        runner.run(ledger, signer, bank, adapter, plan, clock=fixed_clock)
    return path


def resign_from(path: Path, seq: int, body: bytes) -> None:
    """Put ``body`` at ``seq`` and re-sign it and every later row with the operator key:
    every later body that names a changed leaf (``stream_prev``, a score's ``evidence``)
    names the new one; leaf hashes, chain, signatures and the stored checkpoints after it
    are made again. What the key's holder could do: every chain, stream chain, signature
    and checkpoint holds, so only a check of the content can catch the change."""
    signer = operator()
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER events_refuse_update")
    table = conn.execute("SELECT seq, body, leaf_hash, chain FROM events ORDER BY seq").fetchall()
    prev = GENESIS_CHAIN if seq == 0 else bytes(table[seq - 1][3])
    moved: dict[bytes, bytes] = {}
    for s, old, old_leaf, _ in table[seq:]:
        new = body if s == seq else bytes(old)
        for was, now in moved.items():
            new = new.replace(was, now)
        leaf = codec.leaf_hash(new)
        if leaf != bytes(old_leaf):
            moved[f"sha256:{bytes(old_leaf).hex()}".encode()] = f"sha256:{leaf.hex()}".encode()
        sig = signer.sign(EVENT_SIGNING_PREFIX_V2 + prev + leaf)
        prev = codec.chain_hash(prev, leaf)
        conn.execute(
            "UPDATE events SET body = ?, leaf_hash = ?, chain = ?, sig = ? WHERE seq = ?",
            (new, leaf, prev, sig, s),
        )
    # the checkpoints stored after it, signed again over the new tree
    conn.execute("DROP TRIGGER checkpoints_refuse_update")
    leaves = [bytes(leaf) for (leaf,) in conn.execute("SELECT leaf_hash FROM events ORDER BY seq")]
    with Ledger.open(path, readonly=True) as ledger:
        origin = ledger.origin()
    for (size,) in conn.execute("SELECT size FROM checkpoints WHERE size > ?", (seq,)).fetchall():
        tree = TreeAccumulator()
        for leaf in leaves[:size]:
            tree.append(leaf)
        note = signer.sign_note(format_checkpoint(origin, size, tree.root()))
        conn.execute("UPDATE checkpoints SET note = ? WHERE size = ?", (note, size))
    conn.commit()
    conn.close()
    path.with_name(path.stem + ".index.db").unlink(missing_ok=True)
