"""The runner with real ledgers, real banks, real SQL workers and real keys (issue 6 item 3 and
the runner's stops: prompt leak, adapter fault, missing recordings, resume)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest
from runkit import answer, bank_json, check_attempts, fenced, fresh_home, head

from ledger import events, stream_read
from ledger.adapters import build_adapter
from ledger.adapters.base import Reply, Request
from ledger.app.evaluate import bank_context
from ledger.bank.leak import leak_findings
from ledger.bank.registry import PublishedBank, find_published
from ledger.engines.duckdb_worker import WorkerPool
from ledger.errors import AdapterError, BankError, UsageError
from ledger.harness import pipeline, protocol
from ledger.harness.attempt import BankContext
from ledger.keys import load_default_signer
from ledger.run.runner import RunPlan, plan_keys, run, summarise
from ledger.store import Ledger

AT = "2026-12-02T10:00:00.000000Z"
ENV = {"stream": "direct", "stream_seq": 0, "stream_prev": None, "at": AT}


def clock() -> str:
    return AT


@pytest.fixture
def home(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return fresh_home(tmp_path_factory, tmp_path)


@pytest.fixture
def ledger(home: Path) -> Iterator[Ledger]:
    with Ledger.open(home / "ledger.db") as led:
        yield led


def published(ledger: Ledger, home: Path, name: str) -> PublishedBank:
    return find_published(ledger, home, name)


def go(ledger: Ledger, home: Path, ctx: BankContext, adapter: Any, **plan: Any) -> Any:
    plan.setdefault("profile", "test")
    return run(ledger, load_default_signer(home), ctx, adapter, RunPlan(**plan), clock=clock)


def write_replay(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(msgspec.json.encode(x).decode() for x in lines) + "\n")
    return path


# ------------------------------------------------------------------ item 3: replay == scorer


# (case, attempt) -> what the recorded model answered; refs are filled in from the bank.
def retail_outputs(refs: dict[str, str]) -> dict[tuple[str, int], dict[str, Any]]:
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for cid in (
        "basic-01",
        "basic-02",
        "basic-03",
        "joins-01",
        "joins-02",
        "complex-03",
        "data-03",
    ):
        out[(cid, 1)] = {"output": answer(refs[cid])}
    out[("joins-03", 1)] = {"output": fenced(refs["joins-03"])}
    out[("agg-01", 1)] = {"output": fenced(refs["agg-01"])}
    out[("agg-02", 1)] = {"output": answer("SELECT 1 AS x")}
    out[("agg-03", 1)] = {"output": "Here is the query: " + answer(refs["agg-03"])}
    out[("time-01", 1)] = {"output": answer("DROP TABLE customers")}
    out[("time-02", 1)] = {"output": answer("SELECT * FROM read_csv('/etc/passwd')")}
    out[("time-03", 1)] = {"output": answer("SELECT no_such_column FROM customers")}
    out[("complex-01", 1)] = {"error": {"kind": "timeout", "message": "took 120 s"}}
    out[("complex-02", 1)] = {"output": answer(refs["complex-02"]) + answer("SELECT 1")}
    out[("data-01", 1)] = {"output": answer(refs["data-01"].strip().rstrip(";") + " LIMIT 2")}
    # data-02 attempt 1 has no line: missing_recording
    for cid in refs:
        out[(cid, 2)] = {"output": answer(refs[cid])}
    out[("agg-02", 2)] = {"output": fenced("SELECT 1 AS x")}
    del out[("basic-02", 2)]  # missing_recording again
    return out


# Totals worked out by hand from the 100-point table (DESIGN.md "Score").
HAND_TOTALS = {
    ("basic-01", 1): "100.00",  # the reference answer, strict
    ("joins-03", 1): "95.00",  # fenced: no protocol points
    ("agg-03", 1): "0.00",  # prose around the JSON: contract error
    ("complex-02", 1): "0.00",  # two objects: contract error
    ("time-01", 1): "5.00",  # strict, guard rejects: protocol only
    ("time-02", 1): "5.00",
    ("time-03", 1): "10.00",  # runtime error: protocol 5 + guard 5, AST window_function 0/1
    ("complex-01", 1): "0.00",  # provider failure
    ("time-01", 2): "100.00",
}


def direct_score(
    bank: PublishedBank, pool: WorkerPool, case_id: str, line: dict[str, Any]
) -> dict[str, Any]:
    """The score of one recorded line from the library's own judge, without the runner: the
    runner must record exactly what the judge says (AttemptWriter only makes events)."""
    ids = {"case_id": case_id, "attempt": 1}
    parsed = failed = None
    if "error" in line:
        inv = events.Invocation(
            harness_kind="x", response_mode="text", single_call=True, tools="off", retries=0,
            prompt_contract_digest="sha256:0", system_prompt_digest=None, wire_protocol="x",
            client_version="x",
        )  # fmt: skip
        failed = events.ProviderFailed(
            **ENV, **ids, kind=line["error"]["kind"], message="m", invocation=inv
        )
    else:
        verdict_p = protocol.parse_output(line["output"])
        parsed = events.OutputParsed(**ENV, **ids, **msgspec.structs.asdict(verdict_p))
    judged = pipeline.judge(
        pipeline.Bench.of(bank.event, case_id, bank.references()),
        parsed=parsed,
        failure=failed,
        pool=pool,
    )
    assert judged.score is not None, judged.cancelled
    return judged.score


@pytest.mark.slow
@pytest.mark.no_cover  # see pyproject.toml: repeats covered paths
def test_replay_scores_equal_the_scorer_case_by_case(
    home: Path, ledger: Ledger, tmp_path: Path
) -> None:
    refs = {c["id"]: c["reference_sql"] for c in bank_json(home, "retail")["cases"]}
    assert len(refs) == 18
    outputs = retail_outputs(refs)
    lines = [{"case": c, "attempt": n, **v} for (c, n), v in outputs.items()]
    replay = write_replay(tmp_path / "retail.jsonl", lines)
    bank = published(ledger, home, "retail")
    adapter = build_adapter("replay", {"replay_file": str(replay)})
    summary = go(ledger, home, bank_context(bank, ledger.path, tmp_path), adapter, run_id="rp")

    stored = ledger.stream_events("rp")
    recorded = {}
    cancelled = {}
    for item in stored:
        event = item.event()
        if isinstance(event, events.ScoreComputed):
            recorded[(event.case_id, event.attempt)] = event
        elif isinstance(event, events.AttemptCancelled):
            cancelled[(event.case_id, event.attempt)] = event.reason
    assert cancelled == {("data-02", 1): "missing_recording", ("basic-02", 2): "missing_recording"}
    assert set(recorded) == set(outputs)
    with WorkerPool(bank.db_path) as pool:
        for key, line in outputs.items():
            expected = direct_score(bank, pool, key[0], line)
            got = {k: getattr(recorded[key], k) for k in expected}
            assert got == expected, key
    for key, total in HAND_TOTALS.items():
        assert recorded[key].total == Decimal(total), key
    assert recorded[("complex-01", 1)].failure_kind == "provider"
    assert recorded[("agg-03", 1)].failure_kind == "protocol"
    assert recorded[("time-02", 1)].failure_kind == "guard"
    assert recorded[("time-03", 1)].failure_kind == "execution"
    # Every planned attempt stays planned, the missing ones included.
    assert (summary.planned, summary.done, summary.status) == (36, 36, "completed")
    assert summary.failures["missing_recording"] == 2
    # The run's summary takes its figures from the fold its end made for the totals
    # (issue 34): equal to folding the finished stream afresh, failure groups and all.
    assert summary == summarise(stored, plan_keys(bank.event.cases, 2), bank.event)
    assert {g.category for g in summary.groups} >= {"provider", "protocol", "guard"}
    started = stored[0].event()
    assert isinstance(started, events.RunStarted)
    assert started.attempts == 2
    assert started.replay_file_sha256 is not None


def test_a_run_reads_the_log_once_at_its_start_and_once_at_its_end(
    home: Path, ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run reads its stream back once at the end, for the RunFinished totals, and
    # sums up that stream and the RunFinished it appended: the summary must be the one
    # a fresh read of the finished stream gives. Each read goes through the verified
    # tree index (issue 34): the whole log (Ledger.scan_rows, which Ledger.stream_events
    # reads) is never read, at the start, at the end or for the checkpoint.
    bank = published(ledger, home, "retail")
    reads: list[str] = []
    whole: list[int | None] = []
    through_index = stream_read.stream_events
    scan_rows = Ledger.scan_rows

    def counted(ledger: Ledger, stream: str) -> list[Any]:
        reads.append(stream)
        return through_index(ledger, stream)

    def scanned(self: Ledger, stop: int | None = None) -> Any:
        whole.append(stop)
        return scan_rows(self, stop)

    monkeypatch.setattr(stream_read, "stream_events", counted)
    monkeypatch.setattr(Ledger, "scan_rows", scanned)
    summary = go(ledger, home, bank_context(bank, ledger.path, tmp_path), reference(bank),
                 run_id="once", attempts=1)  # fmt: skip
    # One read at the start (the run id checked; the writer starts from what it read),
    # one at the end; before, the writer read the whole log again at the start and the
    # summary a fourth time at the end.
    assert reads == ["once", "once"]
    assert whole == []
    monkeypatch.undo()
    stored = ledger.stream_events("once")
    finished = stored[-1].event()
    assert isinstance(finished, events.RunFinished)
    assert finished.status == "completed"
    again = summarise(stored, plan_keys(bank.event.cases, 1), bank.event)
    assert summary == again
    assert (summary.planned, summary.done, summary.correct) == (18, 18, 18)


# ------------------------------------------------------------------ prompt leak


class Counting:
    """Wraps a real adapter and counts its calls (to prove nothing was sent)."""

    def __init__(self, inner: Any, fail_on: str | None = None) -> None:
        self.inner, self.fail_on = inner, fail_on
        self.identity = inner.identity
        self.calls = 0
        self.answered: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def invocation(self, digest: str, retries: int) -> events.Invocation:
        return self.inner.invocation(digest, retries)

    def validate_cases(self, ids: Any) -> None:
        self.inner.validate_cases(ids)

    def close(self) -> None:
        self.inner.close()

    def call(self, request: Request) -> Any:
        with self._lock:
            self.calls += 1
        if request.case_id == self.fail_on:
            raise RuntimeError(f"adapter bug on {request.case_id}")
        reply = self.inner.call(request)
        with self._lock:
            self.answered.append((request.case_id, request.attempt))
        return reply


def reference(bank: PublishedBank, **kw: Any) -> Counting:
    return Counting(build_adapter("reference", {}, cases=bank.references()), **kw)


@pytest.mark.parametrize(
    "leak", ["path", "words"], ids=["prompt names the bank database", "prompt says reference_sql"]
)
def test_prompt_leak_cancels_fails_the_run_and_sends_nothing(
    home: Path, ledger: Ledger, tmp_path: Path, leak: str
) -> None:
    bank = published(ledger, home, "sales-fixture")
    real = bank_context(bank, ledger.path, tmp_path)
    extra = str(bank.db_path) if leak == "path" else "Do not look at reference_sql."
    leak_ctx = bank.leak_context(ledger_path=ledger.path, cwd=tmp_path)
    leaky = BankContext(
        event=real.event,
        db_path=real.db_path,
        reference_sql=real.reference_sql,
        # publish's own check, bypassed
        leak_check=lambda case_id, text: leak_findings(text, leak_ctx, case_id=case_id),
        prompt_for=lambda case: real.prompt_for(case) + "\n" + extra,
        prompt_contract_digest=real.prompt_contract_digest,
    )
    adapter = reference(bank)
    with pytest.raises(BankError) as err:
        go(ledger, home, leaky, adapter, run_id="leaky", attempts=2)
    assert err.value.exit_code == 2
    assert "leaks" in err.value.message
    assert "prompt.md" in (err.value.hint or "")
    assert adapter.calls == 0
    kinds = [type(s.event()).__name__ for s in ledger.stream_events("leaky")]
    assert kinds == ["RunStarted"] + ["AttemptCancelled"] * 14 + ["RunFinished"]
    stored = ledger.stream_events("leaky")
    reasons = {s.event().reason for s in stored[1:-1]}  # type: ignore[union-attr]
    assert reasons == {"prompt_leak"}
    assert stored[-1].event().status == "failed"  # type: ignore[union-attr]
    # The cancellation says what leaked, never the leaked text itself.
    body = b"".join(s.body for s in stored)
    assert str(bank.db_path).encode() not in body
    assert str(home).encode() not in body


# ------------------------------------------------------------------ adapter fault


@pytest.mark.parametrize("concurrency", [1, 3], ids=["one call at a time", "three at once"])
def test_adapter_exception_keeps_every_answer_and_resume_finishes(
    home: Path, ledger: Ledger, tmp_path: Path, concurrency: int
) -> None:
    bank = published(ledger, home, "sales-fixture")
    ctx = bank_context(bank, ledger.path, tmp_path)
    case_ids = [c.id for c in bank.event.cases]
    broken = reference(bank, fail_on=case_ids[3])
    with pytest.raises(RuntimeError, match="adapter bug"):
        go(ledger, home, ctx, broken, run_id="fault", attempts=1, concurrency=concurrency)
    stored = ledger.stream_events("fault")
    scored = {
        (e.case_id, e.attempt)
        for e in (s.event() for s in stored)
        if isinstance(e, events.ScoreComputed)
    }
    # Every answer the adapter returned is recorded, none is lost.
    assert scored == set(broken.answered)
    if concurrency == 1:
        assert scored == {(c, 1) for c in case_ids[:3]}
    finished = stored[-1].event()
    assert isinstance(finished, events.RunFinished)
    assert finished.status == "failed"
    assert f"case {case_ids[3]} attempt 1" in finished.message
    summary = go(
        ledger, home, ctx, reference(bank), run_id="fault", resume=True, concurrency=concurrency
    )
    assert (summary.planned, summary.done, summary.correct) == (7, 7, 7)
    check_attempts(ledger.stream_events("fault"), plan_keys(bank.event.cases, 1))


# ------------------------------------------------------------------ resume rules


def test_resume_rules(home: Path, ledger: Ledger, tmp_path: Path) -> None:
    bank = published(ledger, home, "sales-fixture")
    ctx = bank_context(bank, ledger.path, tmp_path)
    summary = go(ledger, home, ctx, reference(bank), run_id="r1", attempts=2)
    assert (summary.planned, summary.done, summary.correct, summary.status) == (
        14, 14, 14, "completed",
    )  # fmt: skip
    # Every attempt scores 100, so the weighted mean of the case means is 100.
    assert summary.total_score == Decimal("100.00")
    before = head(home)
    with pytest.raises(UsageError, match="already exists"):
        go(ledger, home, ctx, reference(bank), run_id="r1")
    with pytest.raises(UsageError, match="attempts was 2, now 3"):
        go(ledger, home, ctx, reference(bank), run_id="r1", attempts=3, resume=True)
    with pytest.raises(UsageError, match="no run nope to resume"):
        go(ledger, home, ctx, reference(bank), run_id="nope", resume=True)
    with pytest.raises(UsageError, match="bad run id"):
        go(ledger, home, ctx, reference(bank), run_id="ledger")
    with pytest.raises(UsageError, match="bad run id"):
        go(ledger, home, ctx, reference(bank), run_id="has space")
    # A finished run resumed: nothing to do, nothing appended, no call made.
    idle = reference(bank)
    again = go(ledger, home, ctx, idle, run_id="r1", resume=True)
    assert idle.calls == 0
    assert again.done == 14
    assert head(home) == before


def test_replay_file_of_the_wrong_bank_appends_nothing(
    home: Path, ledger: Ledger, tmp_path: Path
) -> None:
    bank = published(ledger, home, "sales-fixture")
    ctx = bank_context(bank, ledger.path, tmp_path)
    replay = write_replay(tmp_path / "r.jsonl", [{"case": "basic-01", "attempt": 1, "output": "x"}])
    before = head(home)
    with pytest.raises(AdapterError, match="line 1: unknown case id 'basic-01'") as exc:
        go(ledger, home, ctx, build_adapter("replay", {"replay_file": str(replay)}), run_id="w")
    assert exc.value.message == (
        f"replay file {replay} line 1: unknown case id 'basic-01' (not in the bank)"
    )
    assert exc.value.hint == "check the bank and version given with --bank"
    assert head(home) == before


def test_retries_call_again_and_record_the_last_answer(
    home: Path, ledger: Ledger, tmp_path: Path
) -> None:
    bank = published(ledger, home, "sales-fixture")
    ctx = bank_context(bank, ledger.path, tmp_path)
    inner = reference(bank)
    from ledger.adapters.base import Failure

    class Flaky(Counting):
        def call(self, request: Request) -> Any:
            with self._lock:
                self.calls += 1
                first = self.calls % 2 == 1
            if first:
                return Failure(kind="rate_limited", message="slow down", http_status=429)
            return Reply(**msgspec.structs.asdict(inner.call(request)))

    flaky = Flaky(inner.inner)
    summary = go(ledger, home, ctx, flaky, run_id="flaky", retries=1)
    assert flaky.calls == 14
    assert summary.correct == 7
    started = ledger.stream_events("flaky")[0].event()
    assert isinstance(started, events.RunStarted)
    assert started.retries == 1
    chains = check_attempts(ledger.stream_events("flaky"), plan_keys(bank.event.cases, 1))
    assert all(isinstance(c[1], events.ModelResponded) for c in chains.values())
    assert all(c[1].invocation.retries == 1 for c in chains.values())  # type: ignore[union-attr]


# ---------------------------------------------------------------- caps (issue 13 section 2)


def test_caps_are_recorded_applied_and_kept_on_resume(
    home: Path, ledger: Ledger, tmp_path: Path
) -> None:
    bank = published(ledger, home, "retail")
    ctx = bank_context(bank, ledger.path, tmp_path)
    caps = events.Limits(
        max_output_bytes=1024 * 1024, max_sql_bytes=65536, max_nesting=32,
        max_result_bytes=4096, max_cell_bytes=1024, judge_budget_ms=5000,
    )  # fmt: skip
    two_wide = "SELECT repeat('y', 900) AS a, repeat('z', 900) AS b FROM range(3)"
    replay = write_replay(tmp_path / "caps.jsonl", [
        {"case": "basic-01", "attempt": 1, "output": answer("SELECT repeat('x', 5000) AS x")},
        {"case": "basic-02", "attempt": 1, "output": answer(two_wide)},
        {"case": "basic-03", "attempt": 1, "output": "e" * 2_000_000,
         "error": {"kind": "server_error", "message": "HTTP 500"}},
    ])  # fmt: skip
    adapter = build_adapter("replay", {"replay_file": str(replay)})
    go(ledger, home, ctx, adapter, run_id="caps", limits=caps)
    stored = [s.event() for s in ledger.stream_events("caps")]
    assert isinstance(stored[0], events.RunStarted)
    assert stored[0].limits == caps
    by_key = {}
    for e in stored:
        if hasattr(e, "case_id"):
            by_key.setdefault((e.case_id, e.attempt), []).append(e)

    # A 5,000-byte cell under a 1,024-byte cap: 1,022 x's and two quotes, counted.
    cell = next(e for e in by_key[("basic-01", 1)] if isinstance(e, events.SqlExecuted))
    assert (cell.ok, cell.rows, cell.cells_truncated) == (True, (("x" * 1022,),), 1)
    # Columns take 2 x (1 + 7 + 22) = 60 bytes, each row 3 + 2 x 902 = 1,807: the third row
    # brings the result to 5,481 bytes, over 4,096.
    wide = next(e for e in by_key[("basic-02", 1)] if isinstance(e, events.SqlExecuted))
    assert (wide.ok, wide.error_kind, wide.rows) == (False, "result_too_large", ())
    assert wide.error_message == (
        "the result is over the 4096-byte cap (stopped reading after 3 rows of 2 columns)"
    )
    score = by_key[("basic-02", 1)][-1]
    assert isinstance(score, events.ScoreComputed)
    assert (score.failure_kind, score.failure_detail) == ("execution", "result_too_large")
    # A provider failure's raw output over the output cap: its first 16 KiB, length, hash.
    failed = next(e for e in by_key[("basic-03", 1)] if isinstance(e, events.ProviderFailed))
    assert failed.raw_output == "e" * 16384
    assert failed.raw_output_bytes == 2_000_000
    assert failed.raw_output_sha256 == "sha256:" + hashlib.sha256(b"e" * 2_000_000).hexdigest()

    # A resume keeps the recorded caps; other caps are another experiment.
    again = build_adapter("replay", {"replay_file": str(replay)})
    go(ledger, home, ctx, again, run_id="caps", resume=True)
    before = head(home)
    other = msgspec.structs.replace(caps, max_cell_bytes=2048)
    with pytest.raises(UsageError, match=r"limits\.max_cell_bytes was 1024, now 2048"):
        go(ledger, home, ctx, again, run_id="caps", resume=True, limits=other)
    assert head(home) == before
