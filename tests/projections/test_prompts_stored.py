"""Issue 22: each distinct prompt is stored once per run (PromptStored) and PromptSent
names it by SHA-256; reports read the verbatim text through that reference.

Real ledgers, real runs of the built-in sales-fixture bank (7 cases, so 7 distinct
prompts), the operator's real Ed25519 key. Tampering is done as the operator key's
holder would do it: a changed body re-signed, so chain and signatures hold and only
the content check can catch it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_audit import EARLIER_RELEASE, TAMPERED
from report_testkit import fixed_clock, operator, resign_from

from ledger import codec
from ledger.cli import main
from ledger.errors import VerificationError
from ledger.events import PromptSent, PromptStored
from ledger.run import runner
from ledger.run.session import Session
from ledger.store import Draft, Ledger
from ledger.verify import verify_ledger
from projections import caseruns
from projections.replay import replay

LEGACY = Path(__file__).resolve().parents[1] / "data" / "legacy-v2"
CASES = 7  # sales-fixture: sf-01 .. sf-07, one prompt each


def cli(ledger: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(ledger), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def rows(path: Path, kind: str | None = None) -> list[tuple[int, bytes]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        sql = "SELECT seq, body FROM events" + (" WHERE type = ?" if kind else "")  # noqa: S608
        return [
            (int(s), bytes(b))
            for s, b in conn.execute(sql + " ORDER BY seq", (kind,) if kind else ())
        ]
    finally:
        conn.close()


def test_each_run_stores_each_distinct_prompt_once(real_ledger_master: Path) -> None:
    # model-a: 7 cases x 3 attempts, one of which has no recording (MISSING_CASE: it is
    # cancelled without a call, so without a PromptSent)
    for run, prompted in (("self-test", CASES), ("model-a", CASES * 3 - 1)):
        with Ledger.open(real_ledger_master, readonly=True) as ledger:
            stream = [(s.body, s.event()) for s in ledger.stream_events(run)]
        kinds = [type(e).__name__ for _, e in stream]
        # RunStarted, then the 7 prompts in one batch, before the first attempt
        assert kinds[: 1 + CASES] == ["RunStarted"] + ["PromptStored"] * CASES
        assert kinds.count("PromptStored") == CASES
        stored = {e.prompt_sha256: e.prompt for _, e in stream if isinstance(e, PromptStored)}
        assert len(stored) == CASES
        for digest, text in stored.items():
            assert digest == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
        sent = [(b, e) for b, e in stream if isinstance(e, PromptSent)]
        assert len(sent) == prompted
        for body, event in sent:
            assert b'"prompt":' not in body  # the text is not repeated
            assert event.prompt is msgspec.UNSET
            assert event.prompt_sha256 in stored
        # every attempt of a case names the same text, and each case its own
        by_case: dict[str, set[str]] = {}
        for _, event in sent:
            by_case.setdefault(event.case_id, set()).add(event.prompt_sha256)
        assert all(len(v) == 1 for v in by_case.values())
        assert len({next(iter(v)) for v in by_case.values()}) == CASES


def test_views_read_the_verbatim_prompt_through_the_reference(real_ledger_master: Path) -> None:
    with Ledger.open(real_ledger_master, readonly=True) as ledger:
        items = [(s.seq, s.leaf_hash, s.event()) for s in ledger.iter_events(0, ledger.size())]
    texts = {e.prompt_sha256: e.prompt for _, _, e in items if isinstance(e, PromptStored)}
    state = replay(items)
    attempts = caseruns.attempts_of_run(state, "model-a", "2.0.0")
    assert len(attempts) == CASES * 3
    assert sum(a.prompt is None for a in attempts) == 1  # MISSING_CASE: never prompted
    for attempt in attempts:
        if attempt.prompt is None:
            continue
        assert attempt.prompt.prompt == texts[attempt.prompt.prompt_sha256]
        assert attempt.prompt.prompt.startswith("你是一名数据分析师")  # the template, verbatim


def _masked(value: Any) -> Any:
    """A report document without what names log positions, times or measured durations:
    evidence seqs and leaf hashes, the tree head, the runs' dates, SQL timings."""
    if isinstance(value, dict):
        return {
            k: "*" if k in _MASKED else _masked(v)
            for k, v in value.items()
            if k != "efficiency"  # measured times (p95 of sql_us)
        }
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


_MASKED = {"seq", "leaf_hash", "tree_size", "root_hash", "first_event", "last_event", "sql_us"}


@EARLIER_RELEASE
def test_a_new_run_reports_what_the_same_run_with_inline_prompts_reported(
    tmp_path: Path,
) -> None:
    """The run of tests/data/legacy-v2 (prompts inline, commit c9f356e) made again with
    the same commands: the reports differ only where the log's positions, clock and
    measured times enter; every prompt and prompt_sha256 is the same."""
    exe = str(Path(sys.executable).parent / "caseledger")
    for args in (
        ["init"],
        ["bank", "publish", "sales-fixture"],
        ["run", "--bank", "sales-fixture", "--adapter", "reference", "--attempts", "2"],
    ):
        done = subprocess.run(
            [exe, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
    new = tmp_path / ".caseledger" / "ledger.db"
    old = tmp_path / "legacy" / "ledger.db"
    shutil.copytree(LEGACY, old.parent)
    assert len(rows(new, "prompt.stored.v1")) == CASES
    assert len(rows(old, "prompt.stored.v1")) == 0
    # the texts the old ledger repeated per attempt are exactly the texts stored once
    inline = {json.loads(b)["prompt"] for _, b in rows(old, "prompt.sent.v1")}
    stored = {json.loads(b)["prompt"] for _, b in rows(new, "prompt.stored.v1")}
    assert len(inline) == CASES
    assert inline == stored
    code, a, err = cli(old, "report", "--format", "json")
    assert code == 0, err
    code, b, err = cli(new, "report", "--format", "json")
    assert code == 0, err
    assert _masked(json.loads(a)) == _masked(json.loads(b))
    assert _prompt_fields(a) == _prompt_fields(b)
    assert len(_prompt_fields(a)) >= 2 * CASES


def _prompt_fields(text: str) -> list[str]:
    """Every prompt text and prompt_sha256 a report shows, wherever its layout puts them."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for k, v in sorted(value.items()):
                if k in ("prompt", "prompt_sha256") and isinstance(v, str):
                    found.append(v)
                elif k == "prompts" and isinstance(v, dict):
                    found.extend(f"{h}={t}" for h, t in sorted(v.items()))
                else:
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(json.loads(text))
    return found


def test_store_prompts_appends_only_the_missing_ones(tmp_path: Path) -> None:
    """What --resume relies on: the texts already in the run's stream are not stored again."""
    signer = operator()
    with Ledger.create(tmp_path / "l.db", signer, clock=fixed_clock) as ledger:
        session = Session(ledger, signer, "r", fixed_clock)
        runner._store_prompts(session, [], ["a", "b", "a"])
        runner._store_prompts(session, ledger.stream_events("r"), ["b", "c", "a", "c"])
        runner._store_prompts(session, ledger.stream_events("r"), ["c", "b", "a"])
        runner._store_prompts(session, ledger.stream_events("r"), [])
        stream = [s.event() for s in ledger.stream_events("r")]
        verify_ledger(ledger, workers=1)
    assert [(e.stream_seq, e.prompt) for e in stream] == [(0, "a"), (1, "b"), (2, "c")]  # type: ignore[attr-defined]
    assert [e.prompt_sha256 for e in stream] == [  # type: ignore[attr-defined]
        "sha256:ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb",
        "sha256:3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d",
        "sha256:2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6",
    ]


# ----------------------------------------------------------------- tampering


def first_of(path: Path, kind: str, run: str = "model-a") -> tuple[int, dict[str, Any]]:
    for seq, body in rows(path, kind):
        decoded = json.loads(body)
        if decoded["stream"] == run:
            return seq, decoded
    raise AssertionError(kind)


@TAMPERED
def test_a_changed_stored_prompt_is_refused_by_verify_and_reports(real_ledger: Path) -> None:
    seq, body = first_of(real_ledger, "prompt.stored.v1")
    body["prompt"] = "X" + body["prompt"][1:]  # one character changed
    resign_from(real_ledger, seq, msgspec.json.encode(body, order="sorted"))
    code, _, err = cli(real_ledger, "verify")
    assert code == 1
    assert err.splitlines()[0].startswith(
        f"verification FAILED: seq {seq}: prompt.stored.v1 of stream model-a: the prompt "
        "hashes to sha256:"
    )
    assert f"not to its prompt_sha256 {body['prompt_sha256']}" in err
    for args in (("report", "--format", "json"), ("report", "--run", "model-a", "--format", "md")):
        code, out, err = cli(real_ledger, *args)
        assert code == 1, args
        assert f"seq {seq}: prompt.stored.v1" in err
        assert out == ""
    code, _, err = cli(real_ledger, "report", "--run", "self-test", "--format", "md")
    assert code == 0, err  # another run's prompts are not read (docs/verification.md)


@TAMPERED
def test_a_reference_that_points_nowhere_is_refused(real_ledger: Path) -> None:
    seq, body = first_of(real_ledger, "prompt.sent.v1")
    body["prompt_sha256"] = "sha256:" + "0" * 64
    resign_from(real_ledger, seq, msgspec.json.encode(body, order="sorted"))
    code, _, err = cli(real_ledger, "verify")
    assert code == 1
    assert err.splitlines()[0] == (
        f"verification FAILED: seq {seq}: prompt.sent.v1 of case {body['case_id']} attempt "
        f"{body['attempt']} names prompt sha256:{'0' * 64}, which no prompt.stored.v1 before "
        "it in stream model-a holds"
    )
    code, _, err = cli(real_ledger, "report", "--run", "model-a", "--format", "json")
    assert code == 1
    assert f"seq {seq}: prompt.sent.v1 of case {body['case_id']}" in err
    assert "Traceback" not in err


@TAMPERED
def test_another_run_s_prompt_is_no_reference(tmp_path: Path) -> None:
    """A PromptStored of stream r1 does not hold the text of a PromptSent of stream r2."""
    signer = operator()
    text = "How many orders?"
    digest = codec.sha256_hex(text.encode())
    sent = {"case_id": "c", "attempt": 1, "prompt_sha256": digest}
    with Ledger.create(tmp_path / "l.db", signer, clock=fixed_clock) as ledger:
        ledger.append(
            [Draft(PromptStored, "r1", {"prompt": text, "prompt_sha256": digest})], signer
        )
        ledger.append([Draft(PromptSent, "r1", sent)], signer)
        verify_ledger(ledger, workers=1)  # same stream: fine
        (seq,) = ledger.append([Draft(PromptSent, "r2", sent)], signer)
        with pytest.raises(VerificationError) as err:
            verify_ledger(ledger, workers=1)
        assert err.value.seq == seq == 3
        items = [(s.seq, s.leaf_hash, s.event()) for s in ledger.iter_events(0, ledger.size())]
    with pytest.raises(VerificationError) as folded:
        replay(items)
    assert folded.value.seq == 3


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    # a prompt is UTF-8 text (a bank's files): no lone surrogate, which has no UTF-8 form
    text=st.text(st.characters(codec="utf-8"), min_size=1, max_size=200),
    where=st.integers(min_value=0),
    other=st.characters(codec="utf-8"),
)
def test_any_changed_character_of_a_stored_prompt_is_caught(
    tmp_path: Path, text: str, where: int, other: str
) -> None:
    i = where % len(text)
    changed = text[:i] + other + text[i + 1 :]
    if changed == text:
        return
    signer = operator()
    path = tmp_path / f"h{abs(hash((text, i, other)))}.db"
    path.unlink(missing_ok=True)
    digest = codec.sha256_hex(text.encode())
    with Ledger.create(path, signer, clock=fixed_clock) as ledger:
        (seq,) = ledger.append(
            [Draft(PromptStored, "r", {"prompt": changed, "prompt_sha256": digest})], signer
        )
        with pytest.raises(VerificationError) as err:
            verify_ledger(ledger, workers=1)
        assert err.value.seq == seq == 1
        event = ledger.get(seq).event()  # type: ignore[union-attr]
    with pytest.raises(VerificationError):
        caseruns.apply(caseruns.initial(), (seq, bytes(32), event))
    path.unlink()


def test_the_pinned_bytes_of_a_text_less_prompt_sent() -> None:
    """A new PromptSent leaves ``prompt`` out of its body (written out by hand)."""
    event = PromptSent(
        stream="r", stream_seq=2, stream_prev=None, at="t", case_id="c", attempt=1,
        prompt_sha256="sha256:ab",
    )  # fmt: skip
    assert codec.encode(event) == (
        b'{"at":"t","attempt":1,"case_id":"c","prompt_sha256":"sha256:ab","stream":"r",'
        b'"stream_prev":null,"stream_seq":2,"type":"prompt.sent.v1"}'
    )
    assert codec.decode(codec.encode(event)) == event
