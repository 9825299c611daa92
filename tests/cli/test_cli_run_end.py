"""Issue 20, "The run": the end-of-run summary, the early stop, retries with backoff and
Retry-After, answers received during an interrupt, and the progress display.

Real parts only: a real ledger and bank, real SQL workers, real HTTP servers on
127.0.0.1, real ``caseledger`` processes and signals.
"""

from __future__ import annotations

import collections
import email.utils
import json
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chatserver import Answer, ChatServer, Received, case_of, completion
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import UNSET

from ledger import events
from ledger.adapters import Failure, Request, build_adapter
from ledger.app.evaluate import bank_context, summary_text
from ledger.bank.registry import find_published
from ledger.cli.run import Reporter, duration_text, fit, progress_text
from ledger.keys import load_default_signer
from ledger.run.runner import Progress, RunPlan, run
from ledger.store import Ledger

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from runkit import (
    answer,
    bank_json,
    check_attempts,
    cli,
    count_type,
    fresh_home,
    spawn,
    stream,
)

AT = "2026-12-03T10:00:00.000000Z"


@pytest.fixture
def home(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return fresh_home(tmp_path_factory, tmp_path)


@pytest.fixture
def refs(home: Path) -> dict[str, str]:
    return {c["id"]: c["reference_sql"] for c in bank_json(home, "sales-fixture")["cases"]}


def _of(stored: Any, cls: type) -> list[Any]:
    return [e for e in (s.event() for s in stored) if isinstance(e, cls)]


# ------------------------------------------------------------------ a Chat Completions server


class Chat(ChatServer):
    """The tests' Chat Completions server answering each case with its reference SQL.

    ``script`` is a list of (status, headers, body) answers given to the first calls,
    in order (None: the usual answer); after it every call gets 200 and the case's
    reference SQL. Every answer waits ``delay`` seconds.
    """

    def __init__(self, cases: list[dict[str, Any]], delay: float = 0.0) -> None:
        self.cases = cases
        self.delay = delay
        self.script: collections.deque[tuple[int, dict[str, str], bytes] | None] = (
            collections.deque()
        )
        super().__init__(self._next)

    def _next(self, request: Received) -> Answer:
        scripted = self.script.popleft() if self.script else None
        if scripted is None:
            sql = case_of(request, self.cases)["reference_sql"]
            body = json.dumps(completion(answer(sql), model="fake")).encode()
            return Answer(200, body, {}, self.delay)
        status, headers, body = scripted
        return Answer(status, body, headers, self.delay)

    def served_cases(self) -> collections.Counter[str]:
        """Per case, the responses written out completely."""
        return collections.Counter(case_of(r, self.cases)["id"] for r in self.served)


@pytest.fixture
def chat(home: Path) -> Iterator[Chat]:
    server = Chat(bank_json(home, "sales-fixture")["cases"])
    yield server
    server.close()


def _go(home: Path, url: str, **plan: Any) -> Any:
    """Run the openai adapter on sales-fixture in this process (one attempt per case)."""
    with Ledger.open(home / "ledger.db") as ledger:
        bank = find_published(ledger, home, "sales-fixture")
        ctx = bank_context(bank, ledger.path, home)
        adapter = build_adapter("openai", {"base_url": url, "model": "m", "timeout_s": 10})
        plan.setdefault("run_id", "r")
        return run(ledger, load_default_signer(home), ctx, adapter,
                   RunPlan(profile="t", **plan), clock=lambda: AT)  # fmt: skip


def _reply(home: Path, run_id: str, case: str) -> Any:
    found = [e for e in _of(stream(home, run_id), events.ModelResponded | events.ProviderFailed)
             if e.case_id == case]  # fmt: skip
    assert len(found) == 1
    return found[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def hangup() -> Iterator[str]:
    """The URL of a server on 127.0.0.1 that accepts each connection and closes it at once
    (the run's pre-flight connection succeeds; every call fails as connection_error)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def test_an_unreachable_server_is_said_before_anything_is_prepared(home: Path) -> None:
    """Issue 35 item 3: the openai adapter's pre-flight connection to a port nothing
    listens on fails at once: exit 2, one error line, nothing recorded."""
    port = _free_port()
    done = cli(home, "run", "--bank", "sales-fixture", "--adapter", "openai", "--base-url",
               f"http://127.0.0.1:{port}/v1", "--model", "m", "--run-id", "nowhere")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert (
        f"error: cannot reach the model server http://127.0.0.1:{port}: Connection refused; "
        "nothing was prepared or recorded"
    ) in done.stderr
    assert "  hint: start the server, or check --base-url" in done.stderr
    assert "starting the SQL workers" not in done.stderr
    assert "Traceback" not in done.stderr
    assert stream(home, "nowhere") == []


# ------------------------------------------------------------------ retries


def test_429_with_retry_after_then_200_is_one_attempt_with_two_tries(
    home: Path, chat: Chat
) -> None:
    chat.script.append((429, {"Retry-After": "1"}, b'{"error": "slow down"}'))
    summary = _go(home, chat.url, retries=2)
    assert summary.status == "completed"
    assert len(chat.received) == 8  # 7 cases, the first one asked twice
    assert chat.received[1].at - chat.received[0].at >= 1.0  # Retry-After: 1 was honoured
    first = _reply(home, "r", "sf-01")
    assert isinstance(first, events.ModelResponded)
    assert isinstance(first.tries, tuple)
    rate, ok = first.tries
    assert (rate.outcome, rate.http_status, rate.retry_after_ms, rate.waited_us) == (
        "rate_limited", 429, 1000, 0,
    )  # fmt: skip
    assert rate.message == 'HTTP 429: {"error": "slow down"}'
    assert (ok.outcome, ok.http_status, ok.retry_after_ms, ok.message) == ("ok", None, None, None)
    assert ok.waited_us >= 1_000_000
    assert rate.at == ok.at == AT  # the run's event clock
    assert rate.duration_us > 0
    assert ok.duration_us > 0
    # One try: no tries field, the event keeps the bytes it always had.
    other = stream(home, "r")
    second = _reply(home, "r", "sf-02")
    assert second.tries is UNSET
    raw = next(s.body for s in other if s.event() == second)
    assert b'"tries"' not in raw
    assert summary.correct == 7
    # the summary says one attempt was tried again, after a 429, waiting as asked
    r = summary.retries
    assert r is not None
    assert (r.attempts, r.extra_tries, r.failed_tries, r.retry_after) == (
        1, 1, {"rate_limited": 1}, 1,
    )  # fmt: skip
    assert r.waited_us == ok.waited_us
    tenths = ok.waited_us // 100_000
    assert (
        f"  retries: 1 attempts tried again (1 more tries; failed tries: rate_limited 1); "
        f"waited {tenths // 10}.{tenths % 10} s, 1 waits as the server's Retry-After asked"
    ) in summary_text(summary, home / "ledger.db").splitlines()


def test_retry_after_as_an_http_date(home: Path, chat: Chat) -> None:
    question = bank_json(home, "sales-fixture")["cases"][0]["question"]
    adapter = build_adapter("openai", {"base_url": chat.url, "model": "m", "timeout_s": 10})
    when = email.utils.formatdate(time.time() + 30, usegmt=True)  # whole seconds
    chat.script.append((503, {"Retry-After": when}, b"later"))
    failed = adapter.call(Request(case_id="sf-01", attempt=1, prompt=question))
    assert isinstance(failed, Failure)
    assert (failed.kind, failed.http_status) == ("server_error", 503)
    # 30 s ahead, less the fraction of a second the date drops and the time the call
    # took (seconds on a loaded machine).
    assert isinstance(failed.retry_after_ms, int)
    assert 20_000 <= failed.retry_after_ms <= 30_000


def test_400_is_never_retried(home: Path, chat: Chat) -> None:
    chat.script.append((400, {}, b'{"error": "bad model"}'))
    _go(home, chat.url, retries=3)
    assert len(chat.received) == 7
    failed = _reply(home, "r", "sf-01")
    assert isinstance(failed, events.ProviderFailed)
    assert (failed.kind, failed.http_status, failed.message) == (
        "bad_request", 400, 'HTTP 400: {"error": "bad model"}',
    )  # fmt: skip
    raw = next(s.body for s in stream(home, "r") if s.event() == failed)
    assert b'"tries"' not in raw
    assert b"retry_after_ms" not in raw


def test_503_three_times_is_retried_up_to_the_limit_and_every_try_recorded(
    home: Path, chat: Chat
) -> None:
    for _ in range(3):
        chat.script.append((503, {}, b"busy"))
    summary = _go(home, chat.url, retries=2, backoff_s=0.2)
    assert len(chat.received) == 9  # sf-01 three times, then one call per other case
    failed = _reply(home, "r", "sf-01")
    assert isinstance(failed, events.ProviderFailed)
    assert (failed.kind, failed.http_status) == ("server_error", 503)
    assert isinstance(failed.tries, tuple)
    assert [(t.outcome, t.http_status, t.message) for t in failed.tries] == [
        ("server_error", 503, "HTTP 503: busy")
    ] * 3
    waits = [t.waited_us for t in failed.tries]
    # Backoff: no wait before the first try; then half of 0.2 s plus up to its other
    # half; then half of 0.4 s plus up to its other half.
    assert waits[0] == 0
    assert 100_000 <= waits[1] <= 400_000
    assert 200_000 <= waits[2] <= 700_000
    assert summary.retries is not None
    assert summary.retries._replace(waited_us=0) == (1, 2, {"server_error": 3}, 0, 0)
    assert summary.retries.waited_us == sum(waits)


# ------------------------------------------------------------------ early stop


def test_streak_is_broken_by_an_answer(home: Path, chat: Chat) -> None:
    busy = (503, {}, b"busy")
    chat.script.extend([busy, busy, None, busy, busy])
    # Two in a row, an answer, two in a row: never three.
    summary = _go(home, chat.url, max_consecutive_failures=3)
    assert summary.status == "completed"
    assert (summary.planned, summary.done, summary.correct) == (7, 7, 3)
    assert summary.failures == {"provider": 4}


def test_a_server_that_hangs_up_stops_after_five_and_exits_1(home: Path, hangup: str) -> None:
    url = hangup
    done = cli(home, "run", "--bank", "sales-fixture", "--adapter", "openai", "--base-url", url,
               "--model", "m", "--run-id", "dead")  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    stored = stream(home, "dead")
    failed = _of(stored, events.ProviderFailed)
    # Five in a row stop the run; a call already under way (concurrency 1: at most one)
    # is recorded too.
    assert 5 <= len(failed) <= 6
    assert {f.kind for f in failed} == {"connection_error"}
    finished = _of(stored, events.RunFinished)
    assert len(finished) == 1
    assert finished[0].status == "failed"
    reason = f"5 attempts in a row failed the same way, connection_error: {failed[0].message}"
    assert finished[0].message == reason
    assert f"error: run dead stopped as failed: {reason}" in done.stderr
    assert "run dead: failed" in done.stdout
    assert f"  stopped: {reason}" in done.stdout


def test_zero_never_stops(home: Path, hangup: str) -> None:
    url = hangup
    done = cli(home, "run", "--bank", "sales-fixture", "--adapter", "openai", "--base-url", url,
               "--model", "m", "--run-id", "all", "--max-consecutive-failures", "0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "attempts: 7 planned, 7 done" in done.stdout
    assert "failures: provider 7" in done.stdout
    assert "    provider connection_error: 7, first: connection: " in done.stdout


# ------------------------------------------------------------------ the summary


def test_summary_has_the_reports_figures(home: Path, tmp_path: Path, refs: dict[str, str]) -> None:
    lines = [{"case": c, "attempt": 1, "output": answer(refs[c])}
             for c in ("sf-01", "sf-02", "sf-03", "sf-05")]  # fmt: skip
    lines.append({"case": "sf-04", "attempt": 1,
                  "error": {"kind": "rate_limited", "message": "slow down"}})  # fmt: skip
    lines.append({"case": "sf-06", "attempt": 1, "output": "no json here"})
    replay = tmp_path / "answers.jsonl"
    replay.write_text("".join(json.dumps(x) + "\n" for x in lines))
    done = cli(home, "run", "--bank", "sales-fixture", "--adapter", "replay", "--replay-file",
               str(replay), "--run-id", "sum")  # fmt: skip
    assert done.returncode == 0, done.stderr
    stored = stream(home, "sum")
    contract = next(e for e in _of(stored, events.OutputParsed) if e.case_id == "sf-06")
    missing = _of(stored, events.AttemptCancelled)[0].message
    # 7 cases of weight 1: four score 100, the rest 0 -> 400 / 7 = 57.142857...
    assert done.stdout.splitlines()[:10] == [
        "run sum: completed",
        "  bank: sales-fixture@v1 on duckdb",  # the engine, named (issue 31)
        "  attempts: 7 planned, 6 done (4 correct, 0 wrong, 2 failed), 1 cancelled "
        "(missing_recording 1)",
        "  result-correct: 4/7 planned attempts (rate 0.5714)",
        "  format-ok: 4/7 planned attempts (rate 0.5714)",
        "  score (weighted): 57.14",
        "  failures: protocol 1, provider 1",
        f"    cancelled missing_recording: 1, first: {missing}",
        f"    protocol contract_error: 1, first: {contract.error}",
        "    provider rate_limited: 1, first: replayed from line 5: slow down",
    ]
    assert "sf-07" in missing


# ------------------------------------------------------------------ interrupt


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_every_answer_served_before_an_interrupt_is_recorded(home: Path, signum: int) -> None:
    server = Chat(bank_json(home, "sales-fixture")["cases"], delay=0.4)
    try:
        proc = spawn(home, "run", "--bank", "sales-fixture", "--adapter", "openai", "--base-url",
                     server.url, "--model", "m", "--attempts", "3", "--concurrency", "4",
                     "--run-id", "int")  # fmt: skip
        end = time.monotonic() + 120
        while count_type(home, "model.responded.v1") < 6:
            assert time.monotonic() < end, "the run did not start"
            time.sleep(0.05)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, err
        assert "interrupted: run int cancelled" in err
        assert "Traceback" not in out + err
        time.sleep(0.5)  # the server thread counts a response after writing it
        stored = stream(home, "int")
        recorded = collections.Counter(e.case_id for e in _of(stored, events.ModelResponded))
        served = server.served_cases()
        assert sum(served.values()) < 21, "the interrupt must land mid-run"
        assert recorded == served  # no call the server answered is unrecorded
        finished = _of(stored, events.RunFinished)
        assert [f.status for f in finished] == ["cancelled"]
        plan = [(c["id"], n) for c in bank_json(home, "sales-fixture")["cases"]
                for n in (1, 2, 3)]  # fmt: skip
        scored = {(e.case_id, e.attempt) for e in _of(stored, events.ScoreComputed)}
        cancelled = {(e.case_id, e.attempt) for e in _of(stored, events.AttemptCancelled)}
        assert scored | cancelled == set(plan)
        assert not scored & cancelled
        assert cli(home, "verify").returncode == 0
        resumed = cli(home, "run", "--bank", "sales-fixture", "--adapter", "openai",
                      "--base-url", server.url, "--model", "m", "--attempts", "3",
                      "--resume", "int")  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        check_attempts(stream(home, "int"), plan)
    finally:
        server.close()


# ------------------------------------------------------------------ progress


def test_duration_and_eta_text() -> None:
    assert [duration_text(s) for s in (0, 0.99, 9.6, 59.9, 60, 65, 3599, 3600, 7380)] == [
        "0s", "0s", "9s", "59s", "1m00s", "1m05s", "59m59s", "1h00m", "2h03m",
    ]  # fmt: skip
    p = Progress(planned=54, done=12, correct=7, failures={"guard": 2, "provider": 1})
    assert progress_text(p, 75, 290) == (
        "12/54 attempts, 7 correct, 0 wrong, 3 failed, elapsed 1m15s, eta 4m50s"
    )
    assert progress_text(p, 75, None) == (
        "12/54 attempts, 7 correct, 0 wrong, 3 failed, elapsed 1m15s, eta --"
    )
    assert progress_text(None, 3, None) == "preparing the run, elapsed 3s"
    starting = Progress(planned=54, phase="starting")
    assert progress_text(starting, 4, None) == "starting the SQL workers, 0/54 attempts, elapsed 4s"


#: What click's bar writes around its line on a POSIX terminal: carriage return and
#: DECTCEM "hide cursor" before each drawing, "show cursor" and a newline after the last.
DRAW, END = "\r\x1b[?25l", "\x1b[?25h\n"


def drawn(p: Progress | None, elapsed: float, eta: float | None, columns: int) -> str:
    """The line click's progress bar draws for ``p`` on a terminal of ``columns``."""
    out: list[str] = []
    clock = _Clock()
    r = Reporter(tty=True, write=out.append, clock=clock, columns=lambda: columns)
    r.eta = lambda now: eta  # type: ignore[method-assign]  # the ETA this line shows
    clock.now += elapsed
    r.progress = p
    r.tick()
    (line,) = out  # a first line is drawn without padding
    assert line.startswith(DRAW)
    return line[len(DRAW) :]


@pytest.mark.parametrize("columns", [20, 40, 60, 79, 80, 120])
def test_the_line_never_reaches_the_last_column(columns: int) -> None:
    big = Progress(planned=99999, done=12345, correct=9999, failures={"provider": 2345})
    for p in (None, Progress(planned=7, phase="starting"), Progress(planned=7, done=3), big):
        for elapsed, eta in ((0, None), (5000, 360000), (86399, 86399)):
            assert len(drawn(p, elapsed, eta, columns)) <= columns - 1


@settings(deadline=None)
@given(
    planned=st.integers(0, 10**7),
    done=st.integers(0, 10**7),
    failed=st.integers(0, 10**7),
    elapsed=st.floats(0, 10**7),
    eta=st.none() | st.floats(0, 10**8),
    columns=st.integers(1, 400),
    phase=st.sampled_from(["starting", "running", None]),
)
def test_no_line_is_ever_wider_than_the_terminal_minus_one(
    planned: int,
    done: int,
    failed: int,
    elapsed: float,
    eta: float | None,
    columns: int,
    phase: str | None,
) -> None:
    p = None if phase is None else Progress(planned, done, done, {"guard": failed}, phase)
    line = drawn(p, elapsed, eta, columns)
    assert len(line) <= columns - 1
    assert "\n" not in line
    width, text = fit(p, elapsed, eta, columns)
    assert line == (f"[{line[1 : width + 1]}] {text}" if width else text).rstrip()


def test_the_line_at_80_columns() -> None:
    p = Progress(planned=10, done=5)
    # The full text is 69 characters: 79 - 69 - 3 = 7 is too little for a bar, so the
    # next form (52 characters) is used; its bar gets 79 - 52 - 3 = 24, half filled.
    assert drawn(p, 65, 65, 80) == (
        "[############............] 5/10, 0 correct, 0 wrong, 0 failed, 1m05s, eta 1m05s"
    )
    # At 100 columns the full text fits: a bar of 99 - 69 - 3 = 27, 13 of it filled.
    assert drawn(p, 65, 65, 100) == (
        "[" + "#" * 13 + "." * 14 + "] 5/10 attempts, 0 correct, 0 wrong, 0 failed, "
        "elapsed 1m05s, eta 1m05s"
    )


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _reporter(tty: bool) -> tuple[Reporter, list[str], _Clock]:
    out: list[str] = []
    clock = _Clock()
    return Reporter(tty=tty, write=out.append, clock=clock, columns=lambda: 80), out, clock


def test_plain_lines_when_not_a_terminal() -> None:
    r, out, clock = _reporter(tty=False)
    clock.now = 112.0
    r.tick()  # preparing: no line (a usage error then stays alone on stderr)
    r(Progress(planned=4, phase="starting"))
    clock.now = 114.0
    r(Progress(planned=4))
    clock.now = 116.0
    r(Progress(planned=4, done=1, correct=1))  # not due
    clock.now = 124.0
    r(Progress(planned=4, done=2, correct=1, failures={"guard": 1}))
    r.tick()  # not due
    clock.now = 130.0
    r(Progress(planned=4, done=4, correct=3, failures={"guard": 1}))
    assert out == [
        "starting the SQL workers, 0/4 attempts, elapsed 12s\n",
        "0/4 attempts, 0 correct, 0 wrong, 0 failed, elapsed 14s, eta --\n",
        # 10 s since the calls started, 2 of 4 done: 5 s each, 2 left.
        "2/4 attempts, 1 correct, 0 wrong, 1 failed, elapsed 24s, eta 10s\n",
        "4/4 attempts, 3 correct, 0 wrong, 1 failed, elapsed 30s, eta 0s\n",
    ]
    r.end()
    assert len(out) == 4


def test_terminal_line_of_a_run_that_never_started_is_erased() -> None:
    r, out, _ = _reporter(tty=True)
    r.tick()
    r.end()
    # "preparing the run, elapsed 0s" is 29 characters: a bar of 30 fits, 62 in all.
    assert out == [
        DRAW + "[" + "." * 30 + "] preparing the run, elapsed 0s",
        "\r" + " " * 62 + "\r\x1b[?25h",  # a usage error then starts a clean line
    ]


def test_terminal_redraws_one_padded_line() -> None:
    out: list[str] = []
    clock, columns = _Clock(), [80]
    r = Reporter(tty=True, write=out.append, clock=clock, columns=lambda: columns[0])
    r.tick()
    clock.now = 101.0
    r(Progress(planned=7, phase="starting"))
    clock.now = 103.0
    r(Progress(planned=7))
    clock.now = 107.0
    r(Progress(planned=7, done=2, correct=2))
    r.tick()  # the same line: not written again
    columns[0] = 40  # the terminal narrowed: a shorter line, padded over the longer one
    r.tick()
    r.end()
    assert out == [
        DRAW + "[" + "." * 30 + "] preparing the run, elapsed 0s",
        # 50 characters of text leave 79 - 50 - 3 = 26 for the bar.
        DRAW + "[" + "." * 26 + "] starting the SQL workers, 0/7 attempts, elapsed 1s",
        # 62 characters: a bar of 14.
        DRAW + "[" + "." * 14 + "] 0/7 attempts, 0 correct, 0 wrong, 0 failed, elapsed 3s, eta --",
        # 4 s for 2 attempts, 5 left: 10 s; 63 characters: a bar of 13, 2/7 of it is 3.
        DRAW
        + "["
        + "#" * 3
        + "." * 10
        + "] 2/7 attempts, 2 correct, 0 wrong, 0 failed, elapsed 7s, eta 10s",
        # At 40 columns the third form "2/7, 2 ok, eta 10s" (18 characters) leaves
        # 39 - 18 - 3 = 18 for the bar, 5 of it filled (18 * 2/7 = 5.1): 39 characters,
        # and 79 - 39 = 40 spaces over the longer line before.
        DRAW + "[" + "#" * 5 + "." * 13 + "] 2/7, 2 ok, eta 10s" + " " * 40,
        END,  # the line is ended
    ]
