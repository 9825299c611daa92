"""``caseledger run`` in real processes: kill and resume, Ctrl-C, reference self-test, bad
input, and the openai adapter end to end against a server on 127.0.0.1 (issue 6 items 2, 4, 5)."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from chatserver import Answer, ChatServer, Received, case_of, completion, json_answer
from click.testing import CliRunner

from ledger import events

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from runkit import (
    answer,
    bank_json,
    check_attempts,
    cli,
    count_type,
    fresh_home,
    head,
    spawn,
    stream,
)

SECRET = "sk-cli-run-SECRET-7f3a"  # noqa: S105 (a fake key the tests plant and look for)


@pytest.fixture
def home(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return fresh_home(tmp_path_factory, tmp_path)


def no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text, text


def planned(home: Path, bank: str, attempts: int) -> list[tuple[str, int]]:
    cases = bank_json(home, bank)["cases"]
    return [(c["id"], n) for c in cases for n in range(1, attempts + 1)]


def slow_model(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A shell 'model': records its pid, sleeps 0.15 s, answers. While the flag file
    exists and holds a number N, every call after the Nth hangs for 60 s instead (the
    script itself counts its calls, so no test races the run to set it in time).

    Returns (script, flag file, pid file).
    """
    flag, pids, out = tmp_path / "slow.flag", tmp_path / "pids", tmp_path / "answer.json"
    out.write_text(answer("SELECT count(*) AS n FROM orders"))
    script = tmp_path / "model.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"echo $$ >> '{pids}'\n"
        "cat > /dev/null\n"
        f"if [ -e '{flag}' ] && [ \"$(wc -l < '{pids}')\" -gt \"$(cat '{flag}')\" ]; then\n"
        "  sleep 60\n"
        "else\n"
        "  sleep 0.15\n"
        "fi\n"
        f"cat '{out}'\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, flag, pids


def wait_for(predicate: Any, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.05)


# ------------------------------------------------------------------ item 2: SIGKILL, resume


@pytest.mark.slow
def test_sigkill_halfway_then_resume_gives_one_chain_per_attempt(
    home: Path, tmp_path: Path
) -> None:
    script, _, _ = slow_model(tmp_path)
    args = ["run", "--bank", "sales-fixture", "--adapter", "command", "--command", str(script),
            "--attempts", "3", "--run-id", "killed"]  # fmt: skip
    proc = spawn(home, *args)
    wait_for(lambda: count_type(home, "score.computed.v1") >= 6)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    done_before = count_type(home, "score.computed.v1")
    assert 6 <= done_before < 21, "the kill must land halfway"
    assert count_type(home, "run.finished.v1") == 0

    resumed = cli(home, *args[:-2], "--resume", "killed")
    assert resumed.returncode == 0, resumed.stderr
    assert "run killed: completed" in resumed.stdout
    verified = cli(home, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    stored = stream(home, "killed")
    chains = check_attempts(stored, planned(home, "sales-fixture", 3))
    assert len(chains) == 21
    kinds = [type(s.event()) for s in stored]
    assert kinds.count(events.RunStarted) == 1
    assert kinds.count(events.RunFinished) == 1
    assert kinds.count(events.PromptSent) == 21  # no attempt was asked twice


# ------------------------------------------------------------------ Ctrl-C


@pytest.mark.slow
def test_ctrl_c_cancels_unfinished_attempts_and_resume_finishes_them(
    home: Path, tmp_path: Path
) -> None:
    script, flag, pids = slow_model(tmp_path)
    args = ["run", "--bank", "sales-fixture", "--adapter", "command", "--command", str(script),
            "--attempts", "2", "--run-id", "ctrlc"]  # fmt: skip
    flag.write_text("4")  # calls 1-4 answer, the 5th hangs for 60 s
    proc = spawn(home, *args)
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) >= 5)
    wait_for(lambda: count_type(home, "score.computed.v1") >= 4)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 10, "an interrupt must not wait for the model"
    assert proc.returncode == 2
    assert "interrupted: run ctrlc cancelled" in err
    assert "--resume ctrlc" in err
    no_traceback(out, err)
    hung = int(pids.read_text().split()[-1])
    # The model process was killed too (a loaded machine may take a while to show it).
    wait_for(lambda: not _alive(hung), timeout=30)

    stored = stream(home, "ctrlc")
    evs = [s.event() for s in stored]
    scored = {(e.case_id, e.attempt) for e in evs if isinstance(e, events.ScoreComputed)}
    interrupted = {
        (e.case_id, e.attempt)
        for e in evs
        if isinstance(e, events.AttemptCancelled) and e.reason == "interrupted"
    }
    plan = planned(home, "sales-fixture", 2)
    assert scored | interrupted == set(plan)
    assert not scored & interrupted
    assert isinstance(evs[-1], events.RunFinished)
    assert evs[-1].status == "cancelled"

    flag.unlink()
    resumed = cli(home, *args[:-2], "--resume", "ctrlc")
    assert resumed.returncode == 0, resumed.stderr
    assert "attempts: 14 planned, 14 done" in resumed.stdout
    assert cli(home, "verify").returncode == 0
    stored = stream(home, "ctrlc")
    check_attempts(stored, plan)
    last = stored[-1].event()
    assert isinstance(last, events.RunFinished)
    assert last.status == "completed"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# ------------------------------------------------------------------ item 4: reference


@pytest.mark.slow
@pytest.mark.parametrize(
    ("bank", "attempts", "n"), [("sales-fixture", 2, 14), ("retail", 1, 18)],
    ids=["sales-fixture", "retail"],
)  # fmt: skip
def test_reference_scores_100_on_every_attempt(
    home: Path, bank: str, attempts: int, n: int
) -> None:
    done = cli(home, "run", "--bank", bank, "--adapter", "reference", "--attempts",
               str(attempts), "--run-id", "self", "--concurrency", "2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"result-correct: {n}/{n} planned attempts" in done.stdout
    stored = stream(home, "self")
    chains = check_attempts(stored, planned(home, bank, attempts))
    totals = {c[-1].total for c in chains.values()}  # type: ignore[attr-defined]
    assert len(chains) == n
    assert totals == {Decimal("100.00")}
    started = stored[0].event()
    assert isinstance(started, events.RunStarted)
    assert started.run_kind == "self_test"
    assert cli(home, "verify").returncode == 0


# ------------------------------------------------------------------ item 5: bad input


def _replay(tmp_path: Path, text: str) -> str:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    return str(path)


OK = answer("SELECT 1")
BAD_INPUT = {
    "unknown case id": (
        ["--adapter", "replay", "--replay-file", "REPLAY"],
        json.dumps({"case": "sf-01", "attempt": 1, "output": OK}) + "\n"
        + json.dumps({"case": "zz-99", "attempt": 1, "output": OK}) + "\n",
        "line 2: unknown case id 'zz-99'",
    ),
    "duplicate attempt": (
        ["--adapter", "replay", "--replay-file", "REPLAY"],
        "\n".join(json.dumps({"case": "sf-01", "attempt": a, "output": OK}) for a in (1, 2, 1)),
        "line 3: duplicate recording for case 'sf-01' attempt 1 (first on line 1)",
    ),
    "invalid JSON": (
        ["--adapter", "replay", "--replay-file", "REPLAY"],
        json.dumps({"case": "sf-01", "attempt": 1, "output": OK}) + "\n\n{not json\n",
        "line 3: invalid JSON",
    ),
    "unknown adapter option": (
        ["--adapter", "replay", "--replay-file", "REPLAY", "--base-url", "http://127.0.0.1:1/v1"],
        json.dumps({"case": "sf-01", "attempt": 1, "output": OK}) + "\n",
        "the replay adapter does not take --base-url",
    ),
    "option of no adapter": (
        ["--adapter", "reference", "--model", "m"],
        "",
        "the reference adapter does not take --model",
    ),
    "unknown adapter": (["--adapter", "telepathy"], "", "unknown adapter kind 'telepathy'"),
    "unpublished bank": (
        ["--adapter", "reference", "--bank", "nosuch"],
        "",
        "no published bank 'nosuch'",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_INPUT), ids=list(BAD_INPUT))
def test_bad_input_exits_2_naming_it_and_appends_nothing(
    home: Path, tmp_path: Path, case: str
) -> None:
    options, text, message = BAD_INPUT[case]
    options = [_replay(tmp_path, text) if o == "REPLAY" else o for o in options]
    if "--bank" not in options:
        options = ["--bank", "sales-fixture", *options]
    before = head(home)
    done = cli(home, "run", *options)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert done.stderr.startswith("error: ")
    no_traceback(done.stdout, done.stderr)
    assert head(home) == before


@pytest.mark.slow
def test_existing_run_id_is_refused_unless_resumed(home: Path) -> None:
    args = ["run", "--bank", "sales-fixture", "--adapter", "reference", "--run-id", "mine"]
    assert cli(home, *args).returncode == 0
    before = head(home)
    again = cli(home, *args)
    assert again.returncode == 2
    assert "run mine already exists" in again.stderr
    assert "--resume mine" in again.stderr
    no_traceback(again.stderr)
    assert head(home) == before
    other = cli(home, "run", "--bank", "sales-fixture", "--adapter", "reference",
                "--run-id", "mine", "--resume", "yours")  # fmt: skip
    assert other.returncode == 2
    assert "name different runs" in other.stderr
    resumed = cli(home, "run", "--bank", "sales-fixture", "--adapter", "reference",
                  "--resume", "mine")  # fmt: skip
    assert resumed.returncode == 0
    assert "attempts: 7 planned, 7 done" in resumed.stdout
    assert head(home) == before  # a finished run: nothing to add


def test_missing_recordings_are_cancelled_and_stay_planned(home: Path, tmp_path: Path) -> None:
    lines = [{"case": "sf-01", "attempt": 1, "output": OK}, {"case": "sf-02", "attempt": 2,
             "output": OK}]  # fmt: skip
    replay = _replay(tmp_path, "\n".join(json.dumps(x) for x in lines))
    done = cli(home, "run", "--bank", "sales-fixture", "--adapter", "replay",
               "--replay-file", replay, "--run-id", "gaps")  # fmt: skip
    assert done.returncode == 0, done.stderr
    # attempts default to the largest in the file (2): 7 cases x 2 planned, 12 missing,
    # and a cancelled attempt is not done
    assert (
        "attempts: 14 planned, 2 done (0 correct, 2 wrong, 0 failed), 12 cancelled "
        "(missing_recording 12)"
    ) in done.stdout
    evs = [s.event() for s in stream(home, "gaps")]
    missing = [e for e in evs if isinstance(e, events.AttemptCancelled)]
    assert len(missing) == 12
    assert {e.reason for e in missing} == {"missing_recording"}
    assert sum(isinstance(e, events.PromptSent) for e in evs) == 2  # missing ones never prompted


def test_prompt_leak_through_the_cli_exits_2(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.app import evaluate as app_evaluate
    from ledger.harness.attempt import BankContext

    real = app_evaluate.bank_context

    def leaking(published: Any, ledger_path: Path, cwd: Path) -> BankContext:
        ctx = real(published, ledger_path, cwd)
        return BankContext(
            event=ctx.event, db_path=ctx.db_path, reference_sql=ctx.reference_sql,
            leak_check=ctx.leak_check,
            prompt_for=lambda case: ctx.prompt_for(case) + "\n" + ctx.reference_sql[case.id],
            prompt_contract_digest=ctx.prompt_contract_digest,
        )  # fmt: skip

    monkeypatch.setattr(app_evaluate, "bank_context", leaking)
    monkeypatch.chdir(tmp_path)
    from ledger.cli import main

    args = ["run", "--bank", "sales-fixture", "--adapter", "reference", "--run-id", "lk"]
    result = CliRunner().invoke(main, ["--ledger", str(home / "ledger.db"), *args])
    assert result.exit_code == 2, result.output
    assert "run lk failed: the prompt of case sf-01 leaks" in result.stderr
    assert isinstance(result.exception, SystemExit)
    evs = [s.event() for s in stream(home, "lk")]
    assert isinstance(evs[-1], events.RunFinished)
    assert evs[-1].status == "failed"
    assert not any(isinstance(e, events.PromptSent) for e in evs)


# ------------------------------------------------------------------ openai end to end


USAGE = {"prompt_tokens": 1000, "completion_tokens": 80, "total_tokens": 1080,
         "prompt_tokens_details": {"cached_tokens": 600},
         "completion_tokens_details": {"reasoning_tokens": 30}}  # fmt: skip


@pytest.fixture
def fake_openai(home: Path) -> Iterator[ChatServer]:
    """Answers each case by the question in the prompt: the reference SQL, except a wrong
    answer for sf-02 and sf-05 and HTTP 429 for sf-04; request id ``req-<case>``."""
    cases = bank_json(home, "sales-fixture")["cases"]

    def by_case(request: Received) -> Answer:
        case = case_of(request, cases)
        request_id = {"x-request-id": f"req-{case['id']}"}
        if case["id"] == "sf-04":
            return json_answer({"error": {"message": "rate limited, slow down"}}, 429, **request_id)
        sql = "SELECT 42 AS answer" if case["id"] in {"sf-02", "sf-05"} else case["reference_sql"]
        doc = completion(answer(sql), model="fake-model-2026-06", usage=USAGE, id="c")
        return json_answer(doc, **request_id)

    with ChatServer(by_case) as server:
        yield server


@pytest.mark.slow
def test_openai_end_to_end_against_a_local_server(home: Path, fake_openai: ChatServer) -> None:
    done = cli(home, "run", "--bank", "sales-fixture", "--adapter", "openai",
               "--base-url", fake_openai.url, "--model", "fake-model", "--api-key-env",
               "CLI_RUN_TEST_KEY", "--run-id", "oa", "--concurrency", "2",
               env={"CLI_RUN_TEST_KEY": SECRET})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "result-correct: 4/7 planned attempts" in done.stdout
    assert "provider 1" in done.stdout
    assert set(fake_openai.auth) == {f"Bearer {SECRET}"}
    stored = stream(home, "oa")
    chains = check_attempts(stored, plan_keys_of(home))
    for (cid, _), chain in chains.items():
        reply, score = chain[1], chain[-1]
        assert isinstance(score, events.ScoreComputed)
        if cid == "sf-04":
            assert isinstance(reply, events.ProviderFailed)
            assert (reply.kind, reply.http_status) == ("rate_limited", 429)
            assert reply.provider_request_id == "req-sf-04"
            assert (score.total, score.failure_kind) == (Decimal("0.00"), "provider")
            continue
        assert isinstance(reply, events.ModelResponded)
        assert reply.provider_request_id == f"req-{cid}"
        assert reply.resolved_model == "fake-model-2026-06"
        assert reply.invocation.model == "fake-model"
        assert reply.invocation.wire_protocol == "openai-chat-completions"
        usage = reply.usage
        assert usage is not None
        assert (usage.input, usage.cache_read, usage.output, usage.reasoning_output) == (
            400, 600, 80, 30,
        )  # fmt: skip
        assert usage.raw_json is not None
        assert '"cached_tokens":600' in usage.raw_json
        assert score.result_correct is (cid not in {"sf-02", "sf-05"})
    started = stored[0].event()
    assert isinstance(started, events.RunStarted)
    assert (started.requested_model, started.auth_mode) == ("fake-model", "api_key")
    # The key is nowhere: not in any file beside the ledger, not in the output.
    for path in home.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in done.stdout + done.stderr
    assert cli(home, "verify").returncode == 0


def plan_keys_of(home: Path) -> list[tuple[str, int]]:
    return planned(home, "sales-fixture", 1)


def test_a_taken_run_id_is_refused_before_the_variant_databases_are_built(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35 item 3: the run id is checked before anything expensive is prepared (the
    variant databases of sales-fixture, the SQL workers): the refusal comes first and
    nothing was built for it."""
    from ledger.app import evaluate as app_evaluate
    from ledger.cli import main

    built: list[str] = []
    real = app_evaluate.with_variants

    def counting(ctx: Any, published: Any, stack: Any) -> Any:
        built.append(published.ref)
        return real(ctx, published, stack)

    monkeypatch.setattr(app_evaluate, "with_variants", counting)
    monkeypatch.chdir(tmp_path)
    args = ["--ledger", str(home / "ledger.db"), "run", "--bank", "sales-fixture",
            "--adapter", "reference", "--run-id", "taken"]  # fmt: skip
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    assert built == ["sales-fixture@v1"]  # the first run built its variants
    size = len(stream(home, "taken"))
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 2
    assert "run taken already exists in" in again.stderr
    assert "use --resume taken to finish it, or pick another --run-id" in again.stderr
    assert built == ["sales-fixture@v1"]  # nothing was prepared for the refused run
    assert len(stream(home, "taken")) == size
    # and a resume of a run that is not there, likewise
    gone = CliRunner().invoke(main, [*args[:-2], "--resume", "nowhere"])
    assert gone.exit_code == 2
    assert "no run nowhere to resume in" in gone.stderr
    assert built == ["sales-fixture@v1"]
