"""Issue 21: the compact report contract ``caseledger-report/2`` (the default of
``caseledger report --format json``) and ``--detail full`` (``caseledger-report/1``, the
bytes of every report published before).

On the real sales-fixture ledger (7 cases; a reference run of 1 attempt and a replay
run of 3 attempts: 28 CaseRuns; report_testkit.build_real_ledger). The expected
evidence lists are the events each attempt writes, worked out from the runner's order
(prompt, response or provider failure, parse, guard, execution, score; a cancellation
before any prompt writes only its AttemptCancelled).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from ledger.app.reporting import report_bytes
from ledger.app.snapshot import read_state
from ledger.cli import main
from ledger.codec import canonical_json
from ledger.errors import UsageError
from ledger.store import Ledger
from projections import gate
from projections.report import schema as S
from projections.report.build import (
    build_report,
    build_report_v2,
    from_json_v2,
    splice_caseruns,
    to_json,
)

REPO = Path(__file__).resolve().parents[2]
SCORED = [
    "prompt.sent.v1",
    "model.responded.v1",
    "output.parsed.v1",
    "sql.guarded.v1",
    "sql.executed.v1",
    "score.computed.v1",
]


@pytest.fixture(scope="module")
def reports(real_ledger_master: Path) -> dict[str, bytes]:
    """The /2 and /1 JSON of the real ledger, streamed (as `caseledger report` writes them)."""
    compact, _, _ = report_bytes(real_ledger_master, fmt="json", detail="compact")
    full, _, _ = report_bytes(real_ledger_master, fmt="json", detail="full")
    return {"compact": compact, "full": full}


def _caseruns(document: dict[str, Any]) -> dict[tuple[str, str, int], dict[str, Any]]:
    return {
        (c["run"], c["case"], c["attempt"]): c for s in document["sections"] for c in s["caseruns"]
    }


def test_compact_report_shape_and_size(reports: dict[str, bytes]) -> None:
    data = reports["compact"]
    doc = json.loads(data)
    assert doc["contract"] == "caseledger-report/2"
    caseruns = _caseruns(doc)
    assert len(caseruns) == 7 * 1 + 7 * 3
    # The evidence: under 5 KB per CaseRun with the prompts table (7 prompts of about
    # 7.3 KB, each shared by only 4 CaseRuns here), each CaseRun under 3 KB; in /1 each
    # CaseRun repeats its 7.3 KB prompt (over 12 KB per CaseRun).
    evidence = len(canonical_json(doc["prompts"])) + sum(
        len(canonical_json(c)) for c in caseruns.values()
    )
    assert evidence / 28 < 5_000
    assert all(len(canonical_json(c)) < 3_000 for c in caseruns.values())
    full = _caseruns(json.loads(reports["full"]))
    assert sum(len(canonical_json(c)) for c in full.values()) / 28 > 12_000
    # Every CaseRun with a prompt names it by SHA-256; sf-07 attempt 3 has no recording.
    assert [k for k, c in caseruns.items() if c["prompt_sha256"] is None] == [
        ("model-a", "sf-07", 3)
    ]


def test_prompts_table_holds_each_distinct_prompt_once(reports: dict[str, bytes]) -> None:
    data = reports["compact"]
    doc = json.loads(data)
    prompts = doc["prompts"]
    # One prompt per case: both runs answered the same 7 questions with the same contract.
    assert len(prompts) == 7
    for sha, text in prompts.items():
        assert sha == "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
        assert data.count(canonical_json(text)) == 1
    named = {c["prompt_sha256"] for c in _caseruns(doc).values()} - {None}
    assert named == set(prompts)
    # The same texts /1 repeats in every CaseRun (27 of them: sf-07/3 has none).
    full = _caseruns(json.loads(reports["full"]))
    assert sum(c["prompt"] is not None for c in full.values()) == 27
    assert {c["prompt"] for c in full.values()} - {None} == set(prompts.values())
    assert list(prompts) == sorted(prompts)


def test_compact_evidence_by_hand(reports: dict[str, bytes]) -> None:
    compact = _caseruns(json.loads(reports["compact"]))
    full = _caseruns(json.loads(reports["full"]))

    def types(key: tuple[str, str, int]) -> list[str]:
        return [e["type"] for e in compact[key]["evidence"]]

    assert types(("model-a", "sf-01", 1)) == SCORED
    assert types(("self-test", "sf-04", 1)) == SCORED
    # Provider timeout: no parse, guard or execution.
    assert types(("model-a", "sf-02", 3)) == [
        "prompt.sent.v1",
        "provider.failed.v1",
        "score.computed.v1",
    ]
    # DROP TABLE refused by the guard: never executed.
    assert types(("model-a", "sf-03", 1)) == [*SCORED[:4], "score.computed.v1"]
    assert types(("model-a", "sf-07", 3)) == ["attempt.cancelled.v1"]
    for key, c in compact.items():
        # Each evidence event is one of the CaseRun's events in /1, seq and leaf hash alike,
        # in log order; the events of one attempt are consecutive in this ledger.
        assert all(e in full[key]["events"] for e in c["evidence"]), key
        seqs = [e["seq"] for e in c["evidence"]]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), key
        # What says why it scored what it scored is the same as in /1.
        for name in ("outcome", "score", "diff", "cancel", "prompt_sha256"):
            assert c[name] == full[key][name], (key, name)
    timeout = compact[("model-a", "sf-02", 3)]
    assert timeout["response"]["kind"] == "provider_failed"
    assert timeout["response"]["failure"]["kind"] == "timeout"
    assert timeout["score"]["failure_kind"] == "provider"
    refused = compact[("model-a", "sf-03", 1)]
    assert (refused["parsed"]["sql"], refused["guard"]["passed"]) == ("DROP TABLE sales", False)
    assert [v["check"] for v in refused["guard"]["violations"]] == [
        "read_only_root",
        "no_side_effects",
    ]
    assert refused["execution"] is None
    renamed = compact[("model-a", "sf-01", 1)]
    assert renamed["score"]["items"]["column_names"] == "0"
    assert renamed["execution"]["row_count"] == 1
    assert set(renamed["execution"]) == {
        "ok", "error_kind", "error_message", "row_count", "truncated", "sql_us", "tries"
    }  # fmt: skip
    assert "raw_output" not in renamed["response"]
    assert "plan" not in renamed["parsed"]


def test_compact_report_validates_and_round_trips(reports: dict[str, bytes]) -> None:
    schema = json.loads((REPO / "docs" / "report-v2.schema.json").read_text("utf-8"))
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    doc = json.loads(reports["compact"])
    assert [e.message for e in validator.iter_errors(doc)] == []
    assert to_json(from_json_v2(reports["compact"])) == reports["compact"]
    # A /1 report is not a /2 one, and the other way round.
    v1 = Draft202012Validator(json.loads((REPO / "docs" / "report.schema.json").read_text()))
    assert not v1.is_valid(doc)
    assert not validator.is_valid(json.loads(reports["full"]))
    with pytest.raises(UsageError, match="not a caseledger-report/2 report"):
        from_json_v2(reports["full"])


OPTIONS: list[dict[str, Any]] = [
    {},
    {"runs": ["model-a"]},
    {"runs": ["self-test", "model-a"], "with_gold": True},
    {"scorer": "2.1.0"},
    {"at_size": 70},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(map(str, o)) or "all")
def test_streamed_compact_report_equals_the_whole_one(
    real_ledger_master: Path, options: dict[str, Any]
) -> None:
    streamed, _, _ = report_bytes(real_ledger_master, fmt="json", detail="compact", **options)
    at_size = options.pop("at_size", None)
    with Ledger.open(real_ledger_master, readonly=True) as ledger:
        snap = read_state(ledger, at_size=at_size)
    whole = build_report_v2(snap.state, root_hash=snap.root, **options)
    assert streamed == to_json(whole)
    # --detail full is /1, exactly the whole /1 report (the bytes before issue 21).
    full, _, _ = report_bytes(
        real_ledger_master, fmt="json", detail="full", at_size=at_size, **options
    )
    assert full == to_json(build_report(snap.state, root_hash=snap.root, **options))


@pytest.mark.parametrize("run", ["model-a", "self-test"])
def test_gate_reads_both_contracts_alike(reports: dict[str, bytes], run: str) -> None:
    cards = {k: gate.scorecard(json.loads(v), run) for k, v in reports.items()}
    assert cards["compact"] == cards["full"]
    # model-a: 20 of 21 attempts scored, one cancelled: incomplete, as in both.
    if run == "model-a":
        assert cards["compact"].completeness.cancelled == {"missing_recording": 1}
        assert cards["compact"].controls.with_invocation == 20
    options = gate.GateOptions()
    a = gate.judge(cards["full"], cards["compact"], options)
    b = gate.judge(cards["compact"], cards["full"], options)
    assert a.verdict == b.verdict
    assert a.metrics == b.metrics


def test_cli_detail_compact_is_v2_and_detail_full_is_v1(real_ledger: Path) -> None:
    runner = CliRunner()

    def out(*args: str) -> bytes:
        done = runner.invoke(main, ["--ledger", str(real_ledger), "report", *args])
        assert done.exit_code == 0, done.output
        return done.stdout_bytes

    compact = out("--format", "json", "--detail", "compact")
    full = out("--format", "json", "--detail", "full")
    # Issue 32: the default is caseledger-report/3 (tests/projections/test_report_v3.py).
    assert json.loads(out("--format", "json"))["contract"] == "caseledger-report/3"
    assert json.loads(compact)["contract"] == "caseledger-report/2"
    assert full == report_bytes(real_ledger, fmt="json", detail="full")[0]
    assert json.loads(full)["contract"] == "caseledger-report/1"
    for fmt in ("md", "html"):  # the views carry no JSON evidence: the same under /1 and /2
        assert out("--format", fmt, "--detail", "compact") == out(
            "--format", fmt, "--detail", "full"
        )


_PIECE = st.sampled_from(['"', "\\", "{", "}", "[", "]", ":", ",", "a", "é", "\n", " "])
_TEXT = st.lists(_PIECE | st.sampled_from(['"prompts":{}', '"caseruns":[]']), max_size=12).map(
    "".join
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(_TEXT, min_size=0, max_size=5), keep=st.integers(0, 28))
def test_v2_round_trips_and_splices_with_any_prompt_text(
    reports: dict[str, bytes], texts: list[str], keep: int
) -> None:
    """Any prompt texts (quotes, the splice markers themselves) and any number of CaseRuns:
    the report decodes back to the same bytes, and the spliced bytes are the whole ones."""
    report = from_json_v2(reports["compact"])
    prompts = {"sha256:" + hashlib.sha256(t.encode()).hexdigest(): t for t in texts}
    sections: list[S.SectionV2] = []
    left = keep
    for s in report.sections:
        sections.append(msgspec.structs.replace(s, caseruns=s.caseruns[:left]))
        left -= len(sections[-1].caseruns)
    whole = msgspec.structs.replace(
        report, prompts=dict(sorted(prompts.items())), sections=sections
    )
    data = to_json(whole)
    assert to_json(from_json_v2(data)) == data
    skeleton = msgspec.structs.replace(
        whole,
        prompts={},
        sections=[msgspec.structs.replace(s, caseruns=[]) for s in sections],
    )
    pieces = [
        [b",".join(canonical_json(c) for c in s.caseruns)] if s.caseruns else [] for s in sections
    ]
    entries = b",".join(
        canonical_json(k) + b":" + canonical_json(v) for k, v in whole.prompts.items()
    )
    assert b"".join(splice_caseruns(skeleton, pieces, [entries] if entries else [])) == data


# ----------------------------------------------------------------- HTML in bounded memory


def _old_blob(caseruns: list[S.CaseRun]) -> str:
    """The evidence blob as the page wrote it before issue 21: every CaseRun's blocks kept,
    texts counted, then encoded at once (the oracle of the streamed blob)."""
    import collections

    from projections.report.html import _evidence

    heads: list[list[str]] = []
    where: dict[tuple[str, ...], int] = {}

    def head(names: list[str]) -> int:
        if tuple(names) not in where:
            where[tuple(names)] = len(heads)
            heads.append(names)
        return where[tuple(names)]

    every = [_evidence(c, head) for c in caseruns]

    def texts(b: list[Any]) -> list[str]:
        if b[0] != "pre":
            return []
        return b[1] if isinstance(b[1], list) else [b[1]]

    seen = collections.Counter(t for c in every for b in c for t in texts(b))
    strings: list[str] = []
    index: dict[str, int] = {}

    def ref(text: str) -> int | str:
        if seen[text] < 2:
            return text
        if text not in index:
            index[text] = len(strings)
            strings.append(text)
        return index[text]

    out = []
    for blocks in every:
        row = []
        for b in blocks:
            if b[0] == "pre":
                v = b[1]
                b = ["pre", [ref(t) for t in v] if isinstance(v, list) else ref(v)]
            row.append(b)
        out.append(row)
    text = json.dumps(
        {"s": strings, "h": heads, "c": out}, ensure_ascii=False, separators=(",", ":")
    )
    return text.replace("</", "<\\/").replace("<!--", "<\\u0021--")


_SQL = st.lists(
    st.sampled_from(["SELECT 1", "</script>", "<!--", "<", "/", "a", "\n\n", '"', "é"]),
    max_size=6,
).map("".join)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sqls=st.lists(_SQL, min_size=28, max_size=28))
def test_streamed_evidence_blob_is_the_one_built_at_once(
    reports: dict[str, bytes], sqls: list[str]
) -> None:
    """Whatever the texts (repeated or not, with ``</`` or ``<!--``, split at any piece),
    the blob written CaseRun by CaseRun over two more passes has the bytes of the blob
    built with every CaseRun in memory."""
    from projections.report.build import from_json
    from projections.report.html import _Blob

    report = from_json(reports["full"])
    caseruns = [c for s in report.sections for c in s.caseruns]
    edited = [
        msgspec.structs.replace(c, parsed=msgspec.structs.replace(c.parsed, sql=sql))
        if c.parsed is not None
        else c
        for c, sql in zip(caseruns, sqls, strict=True)
    ]
    blob = _Blob()
    for c in edited:
        blob.add(c)
    assert "".join(blob.chunks(edited)) == _old_blob(edited)
