"""Whole runs through the real pi CLI on the sales fixture: scores, evidence and fairness.

The fake model behind pi answers each case with the bank's own reference SQL
(found by the case's question in the prompt): strictly for every case but the
fenced ones, which get the same answer inside one ```json fence. Hand-worked
totals: a strict, correct answer scores 100.00; the fenced one loses exactly the
5 protocol points (95.00). Two such runs of two model names are
``controlled_harness``; the same evidence with one control changed (a retry,
another prompt contract, tools on or unknown) is not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from chatserver import Answer, ChatServer, Received, case_of, json_answer, sse_answer
from pikit import KEY, KEY_ENV, chunks, models_json
from runkit import answer, bank_json, check_attempts, cli, fenced, fresh_home, stream

from ledger import events
from ledger.app.snapshot import read_state
from ledger.store import Ledger
from projections import fairness
from projections.caseruns import attempts_of_run

pytestmark = pytest.mark.slow

# Cases answered inside a fence (recovered, 0 protocol points); the rest strictly.
FENCED = ("sf-02", "sf-05")


class _Home:
    def __init__(self, home: Path, server: ChatServer, pi: str, models: Path) -> None:
        self.home, self.server, self.pi, self.models = home, server, pi, models

    def run(self, run_id: str, model: str, *extra: str) -> Any:
        env = {KEY_ENV: KEY, "CASELEDGER_PI": self.pi}
        return cli(
            self.home,
            "run",
            "--bank",
            "sales-fixture",
            "--adapter",
            "pi",
            "--provider",
            "fake",
            "--model",
            model,
            "--api-key-env",
            KEY_ENV,
            "--pi-models",
            str(self.models),
            "--temperature",
            "0",
            "--timeout",
            "120",
            "--run-id",
            run_id,
            "--concurrency",
            "4",
            "--no-variants",
            *extra,
            env=env,
        )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, pi_path: str) -> Iterator[_Home]:
    """A ledger with two pi runs of the sales fixture (model-a, model-b). Its 7 cases,
    not the 18 of retail: every case is one real pi process per run, and what is checked
    (each score, the evidence of each call, the fairness class) holds case by case."""
    tmp = tmp_path_factory.mktemp("pi-runs")
    home = fresh_home(tmp_path_factory, tmp)
    bank = bank_json(home, "sales-fixture")

    def script(request: Received) -> Answer:
        case = case_of(request, bank["cases"])
        sql = case["reference_sql"]
        text = fenced(sql) if case["id"] in FENCED else answer(sql)
        return sse_answer(chunks(text, usage={"prompt_tokens": 900, "completion_tokens": 100}))

    server = ChatServer(script)
    models = models_json(server, tmp / "models.json")
    h = _Home(home, server, pi_path, models)
    for run_id, model in (("pi-a", "model-a"), ("pi-b", "model-b")):
        done = h.run(run_id, model)
        assert done.returncode == 0, done.stderr
    yield h
    server.close()


def _report(home: Path, *runs: str) -> dict[str, Any]:
    args = [a for r in runs for a in ("--run", r)]
    done = cli(home, "report", "--format", "json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_strict_answers_score_and_fenced_ones_are_recovered(runs):
    bank = bank_json(runs.home, "sales-fixture")
    case_ids = [c["id"] for c in bank["cases"]]
    assert set(FENCED) <= set(case_ids)
    stored = stream(runs.home, "pi-a")
    chains = check_attempts(stored, [(c, 1) for c in case_ids])
    for (case_id, _), chain in chains.items():
        responded = chain[1]
        parsed = chain[2]
        score = chain[-1]
        assert isinstance(responded, events.ModelResponded)
        assert isinstance(parsed, events.OutputParsed)
        assert isinstance(score, events.ScoreComputed)
        if case_id in FENCED:
            assert (parsed.protocol_strict, parsed.recovered_from_fence) == (False, True)
            assert str(score.total) == "95.00"
        else:
            assert (parsed.protocol_strict, parsed.recovered_from_fence) == (True, False)
            assert str(score.total) == "100.00"
        assert score.result_correct is True
    # every model call: one user turn, no tools, temperature 0 on the wire
    assert len(runs.server.received) == 2 * len(case_ids)
    for request in (r.json() for r in runs.server.received):
        assert "tools" not in request
        assert [m["role"] for m in request["messages"]] == ["system", "user"]
        assert request["temperature"] == 0


def test_recorded_identity_and_usage(runs):
    stored = stream(runs.home, "pi-a")
    started = stored[0].event()
    assert isinstance(started, events.RunStarted)
    assert (started.adapter_kind, started.harness_kind) == ("pi", "pi")
    assert (started.provider, started.requested_model, started.auth_mode) == (
        "fake",
        "model-a",
        "api_key",
    )
    assert started.bridge_version == "caseledger-pi-bridge/1"
    assert started.policy_version == "caseledger-pi-policy/1"
    assert started.timeout_ms == 120_000
    assert started.params.temperature == 0
    responses = [e for s in stored if isinstance(e := s.event(), events.ModelResponded)]
    assert responses
    for r in responses:
        assert r.resolved_model is None
        assert r.provider_request_id == "chatcmpl-fake-1"
        assert r.invocation is not None
        assert r.invocation.harness_kind == "pi"
        assert r.invocation.client_version.endswith("pi/0.73.1")
        assert r.invocation.parameters == {"temperature": "0"}
        # 900 prompt tokens, none cached; 100 output tokens
        assert r.usage is not None
        assert (r.usage.input, r.usage.cache_read, r.usage.cache_write, r.usage.output) == (
            900,
            0,
            0,
            100,
        )
        assert r.usage.reasoning_output is None
        assert (r.cost, r.estimated_cost) == (None, None)


def test_two_pi_models_are_a_controlled_harness(runs):
    report = _report(runs.home, "pi-a", "pi-b")
    (section,) = report["sections"]
    f = section["fairness"]
    assert f["class"] == "controlled_harness"
    assert f["differing_controls"] == []
    assert f["disclosed_differences"] == ["model"]
    assert f["controls"]["pi-a"]["harness_kind"] == "pi"
    assert f["disclosed"]["pi-b"]["model"] == "model-b"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("retries", 1),
        ("prompt_contract_digest", "sha256:" + "e" * 64),
        ("tools", "on"),
        ("tools", "unknown"),
    ],
)
def test_other_controls_break_it_in_the_recorded_evidence(runs, field, value):
    with Ledger.open(runs.home / "ledger.db", readonly=True) as ledger:
        state = read_state(ledger).state
    version = state.runs["pi-a"].started.versions.scorer
    left = attempts_of_run(state, "pi-a", version)
    right = [
        msgspec.structs.replace(
            a,
            response=msgspec.structs.replace(
                a.response,
                invocation=msgspec.structs.replace(a.response.invocation, **{field: value}),
            ),
        )
        for a in attempts_of_run(state, "pi-b", version)
        if a.response is not None and a.response.invocation is not None
    ]
    assert len(right) == len(left)
    f = fairness.classify([("pi-a", left), ("pi-b", right)])
    assert f.class_ == "not_controlled"
    assert f.differing_controls == [field]


def test_a_server_that_does_not_stream_stops_the_run_as_a_provider_failure(runs, tmp_path):
    """Issue 35 item 1: behind pi, a server answering with a whole JSON body instead of an
    event stream gives pi no text and no tokens. Each attempt is a provider failure
    (malformed_response), never 'protocol: empty output', and the early stop fires."""
    plain = json.dumps(
        {
            "id": "chatcmpl-plain",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "SELECT 1"}}],
        }
    ).encode()
    server = ChatServer(json_answer(plain))
    try:
        models = models_json(server, tmp_path / "models.json")
        h = _Home(runs.home, server, runs.pi, models)
        done = h.run("pi-plain", "model-a", "--max-consecutive-failures", "3")
    finally:
        server.close()
    assert done.returncode == 1, done.stderr
    assert "3 attempts in a row failed the same way, malformed_response" in done.stderr
    assert "no text and no output tokens" in done.stderr
    with Ledger.open(runs.home / "ledger.db", readonly=True) as ledger:
        stored = [row.event() for row in ledger.stream_events("pi-plain")]
    kinds = {e.kind for e in stored if isinstance(e, events.ProviderFailed)}
    assert kinds == {"malformed_response"}
    # no answer of the model was read, so none was scored as a protocol failure
    assert not [e for e in stored if isinstance(e, events.OutputParsed)]
