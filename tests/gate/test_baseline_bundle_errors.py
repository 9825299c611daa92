"""A frozen baseline that is not what it claims (issue 14 item 6): each way ``read_bundle``
and ``verify_bundle`` refuse a bundle, with the message naming the file, line or seq.

The bundles are copies of tests/baselines/demo/lumen-mini, edited one way each. All three
demo profiles were frozen from one ledger (origin caseledger/f5c0ca211a13786d, one demo
key), so a line taken from another profile's bundle carries a signature that verifies.
lumen-mini holds seq 0 (the genesis SignerRegistered), seq 1 (the retail BankPublished)
and seq 653..970, its run's 318 events: 320 lines.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.app import baseline
from ledger.cli import main
from ledger.errors import ChainBrokenError, SignatureError, UsageError, VerificationError

DEMO = Path(__file__).resolve().parents[1] / "baselines" / "demo"
RUN = "demo-lumen-mini"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    dst = tmp_path / "lumen-mini"
    shutil.copytree(DEMO / "lumen-mini", dst)
    return dst


def lines_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text("utf-8").splitlines()]


def write_lines(folder: Path, lines: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)
    (folder / "events.jsonl").write_text(text, "utf-8")


def manifest_of(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "manifest.json").read_bytes())


def verify(folder: Path) -> str:
    return baseline.verify_bundle(baseline.read_bundle(folder))


def test_the_copy_is_what_the_module_doc_says(bundle: Path) -> None:
    seqs = [line["seq"] for line in lines_of(bundle)]
    assert seqs == [0, 1, *range(653, 971)]
    assert verify(bundle).startswith("caseledger-demo-baseline+")


# ----------------------------------------------------------------- reading the folder


def test_no_folder_no_manifest_and_no_events_file(tmp_path: Path, bundle: Path) -> None:
    with pytest.raises(UsageError) as info:
        baseline.read_bundle(tmp_path / "nowhere")
    assert info.value.message == f"no baseline folder at {tmp_path / 'nowhere'}"
    (bundle / "events.jsonl").unlink()
    with pytest.raises(UsageError) as info:
        baseline.read_bundle(bundle)
    assert info.value.message == f"{bundle / 'events.jsonl'} is missing"
    (bundle / "manifest.json").unlink()
    with pytest.raises(UsageError) as info:
        baseline.read_bundle(bundle)
    assert info.value.message == f"{bundle / 'manifest.json'} is missing"
    assert info.value.hint == "is this a baseline folder?"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
              "(char 1))"),
        ('{"format": "caseledger-baseline/2"}', "not a caseledger-baseline/1 manifest"),
        ("[]", "not a caseledger-baseline/1 manifest"),
    ],
    ids=["not-json", "other-format", "a-list"],
)  # fmt: skip
def test_a_manifest_that_is_not_one(bundle: Path, text: str, message: str) -> None:
    (bundle / "manifest.json").write_text(text, "utf-8")
    with pytest.raises(UsageError) as info:
        baseline.read_bundle(bundle)
    assert info.value.message == f"{bundle / 'manifest.json'}: {message}"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"prev_chain": "sha256:00ff"}, "prev_chain must be a SHA-256 digest"),
        ({"seq": "0"}, "seq must be an integer and body a string"),
        ({"sig": "not base64!"}, "Only base64 data is allowed"),  # binascii's text
    ],
    ids=["short-prev-chain", "seq-text", "sig-not-base64"],
)
def test_a_line_that_is_no_bundle_line_names_its_line(
    bundle: Path, change: dict[str, Any], why: str
) -> None:
    lines = lines_of(bundle)
    lines[2].update(change)
    write_lines(bundle, lines)
    with pytest.raises(UsageError) as info:
        baseline.read_bundle(bundle)
    assert info.value.message == f"{bundle / 'events.jsonl'} line 3: not a bundle line ({why})"


def test_a_body_that_hashes_right_but_is_no_event(bundle: Path) -> None:
    body = '{"type":"no.such.event.v1"}'
    leaf = hashlib.sha256(b"\x00" + body.encode()).hexdigest()  # RFC 9162 leaf hash
    lines = lines_of(bundle)
    lines[0].update(body=body, leaf_hash=f"sha256:{leaf}")
    write_lines(bundle, lines)
    with pytest.raises(ChainBrokenError) as info:
        baseline.read_bundle(bundle)
    assert info.value.message.startswith("seq 0: body is no known event (")
    assert info.value.seq == 0


# ----------------------------------------------------------------- verifying the events


def test_lines_out_of_log_order(bundle: Path) -> None:
    lines = lines_of(bundle)
    lines[2], lines[3] = lines[3], lines[2]  # seq 654 before seq 653
    write_lines(bundle, lines)
    with pytest.raises(ChainBrokenError) as info:
        verify(bundle)
    assert info.value.message == "seq 653: out of order after seq 654"


def test_a_line_signed_by_an_unregistered_key(bundle: Path) -> None:
    lines = lines_of(bundle)
    lines[5]["key_id"] = "deadbeef"
    write_lines(bundle, lines)
    with pytest.raises(SignatureError) as info:
        verify(bundle)
    assert info.value.message == "seq 656: signed by unregistered key id deadbeef"


def test_an_empty_bundle_lacks_the_genesis(bundle: Path) -> None:
    write_lines(bundle, [])
    with pytest.raises(SignatureError) as info:
        verify(bundle)
    assert info.value.message == "seq 0: the bundle lacks the ledger's genesis registration"


def test_an_event_of_another_run_does_not_belong(bundle: Path) -> None:
    other = lines_of(DEMO / "harbor-coder-14b")
    started = next(line for line in other if line["seq"] == 328)  # harbor's RunStarted
    lines = lines_of(bundle)
    write_lines(bundle, [*lines[:2], started, *lines[2:]])
    with pytest.raises(ChainBrokenError) as info:
        verify(bundle)
    assert info.value.message == "seq 328: unexpected RunStarted in bundle"


def test_a_bundle_without_its_run(bundle: Path) -> None:
    write_lines(bundle, lines_of(bundle)[:2])
    with pytest.raises(VerificationError) as info:
        verify(bundle)
    assert info.value.message == f"the bundle holds no event of run {RUN}"


def test_a_bundle_without_its_bank(bundle: Path) -> None:
    lines = lines_of(bundle)
    write_lines(bundle, [lines[0], *lines[2:]])
    bank_hash = manifest_of(bundle)["bank"]["hash"]
    with pytest.raises(VerificationError) as info:
        verify(bundle)
    assert info.value.message == (
        f"the bundle must hold exactly one BankPublished, of bank {bank_hash}; found 0"
    )


def test_a_manifest_naming_another_stream_head(bundle: Path) -> None:
    manifest = manifest_of(bundle)
    head = manifest["stream_head"]
    manifest["stream_head"] = "sha256:" + "0" * 64
    (bundle / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    with pytest.raises(VerificationError) as info:
        verify(bundle)
    assert info.value.message == f"stream head is {head}, manifest says sha256:{'0' * 64}"


def test_a_manifest_that_miscounts_and_mishashes_names_every_difference(bundle: Path) -> None:
    manifest = manifest_of(bundle)
    events_sha = "sha256:" + hashlib.sha256((bundle / "events.jsonl").read_bytes()).hexdigest()
    assert events_sha == manifest["events_sha256"]
    manifest.update(events=319, events_sha256="sha256:x")
    manifest["bank"]["hash"] = "sha256:y"
    (bundle / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    with pytest.raises(VerificationError) as info:
        verify(bundle)
    assert info.value.message == (
        f"{bundle / 'manifest.json'}: events 319 != 320 lines; events_sha256 sha256:x != "
        f"{events_sha}; bank hash differs from the RunStarted"
    )
    # the command says the same and exits 1
    result = CliRunner().invoke(main, ["baseline", "check", str(bundle)])
    assert result.exit_code == 1
    assert info.value.message in result.output


# ----------------------------------------------------------------- scorecards


def test_an_unknown_scorer_version_is_a_usage_error(bundle: Path) -> None:
    with pytest.raises(UsageError) as info:
        baseline.rescored_state(baseline.read_bundle(bundle), version="0")
    assert info.value.message == "unknown scorer version '0'"


def test_stale_fields_name_each_difference() -> None:
    pinned = {
        "metrics": {"a": "0.5000", "b": "1.0000", "gone": "0.1000"},
        "denominators": {"n": 54},
        "run": "r",
    }
    recomputed = {
        "metrics": {"a": "0.5000", "b": "0.9000", "new": "0.2000"},
        "denominators": {"n": 53},
        "run": "r",
    }
    assert baseline.stale_fields(pinned, recomputed) == [
        'denominators: pinned {"n": 54}, recomputed {"n": 53}',
        "metrics.b: pinned 1.0000, recomputed 0.9000",
        "metrics.gone: pinned 0.1000, no longer computed",
        "metrics.new: not pinned, recomputed 0.2000",
    ]
    assert baseline.stale_fields(pinned, pinned) == []


def test_freeze_refuses_a_folder_holding_a_baseline_and_writes_nothing(
    gate_ledger: Path, tmp_path: Path
) -> None:
    out = tmp_path / "held"
    out.mkdir()
    (out / "manifest.json").write_text("{}", "utf-8")
    (out / "scorecard.json").write_text("{}", "utf-8")
    args = ["--ledger", str(gate_ledger), "baseline", "freeze", "base4", "-o", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {out} already holds a baseline (manifest.json, scorecard.json)\n"
        "  hint: freeze into an empty folder; re-pin with `caseledger baseline pin`\n"
    )
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "scorecard.json"]
    args[-3] = "no-such-run"
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: no run 'no-such-run' in {gate_ledger}\n  hint: list runs with `caseledger runs`\n"
    )


# ----------------------------------------------------------------- signed by the key itself

# The gate ledger's operator key (tests/gate/gatekit.py); the signatures below follow
# docs: event/v1 = Ed25519("caseledger/event/v1\n" || leaf), event/v2 = Ed25519(
# "caseledger/event/v2\n" || previous chain || leaf), made here with cryptography directly.
GATE_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))


def leaf_of(body: str) -> bytes:
    return hashlib.sha256(b"\x00" + body.encode()).digest()


@pytest.fixture
def frozen(gate_ledger: Path, tmp_path: Path) -> Path:
    """A bundle of the gate ledger's run base4, frozen now: every line signed under v2."""
    out = tmp_path / "base4"
    args = ["--ledger", str(gate_ledger), "baseline", "freeze", "base4", "-o", str(out)]
    assert CliRunner().invoke(main, args).exit_code == 0
    assert all("prev_chain" in line for line in lines_of(out))
    return out


def test_an_old_rule_signature_after_a_new_rule_one_is_refused(frozen: Path) -> None:
    # Valid under event/v1, but v1 covers no place in the log: after seq 0 was signed
    # under v2, a v1 line could have been moved, so it is refused (no downgrade).
    lines = lines_of(frozen)
    line = lines[3]
    leaf = bytes.fromhex(line["leaf_hash"].removeprefix("sha256:"))
    line["sig"] = base64.b64encode(GATE_KEY.sign(b"caseledger/event/v1\n" + leaf)).decode()
    del line["prev_chain"]
    write_lines(frozen, lines)
    with pytest.raises(SignatureError) as info:
        verify(frozen)
    assert info.value.message == (
        f"seq {line['seq']}: signed under rule event/v1 after seq 0 was signed under event/v2"
    )


def test_a_run_whose_first_event_is_not_run_started(frozen: Path) -> None:
    # A correctly signed and linked first event of the run that is its second one, the
    # first of its stored prompts (issue 22).
    lines = lines_of(frozen)
    first = next(i for i, line in enumerate(lines) if json.loads(line["body"])["stream"] == "base4")
    body = json.loads(lines[first + 1]["body"])
    assert body["type"] == "prompt.stored.v1"
    body.update(stream_seq=0, stream_prev=None)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    leaf = leaf_of(text)
    prev_chain = bytes.fromhex(lines[first]["prev_chain"].removeprefix("sha256:"))
    sig = GATE_KEY.sign(b"caseledger/event/v2\n" + prev_chain + leaf)
    lines[first].update(
        body=text, leaf_hash="sha256:" + leaf.hex(), sig=base64.b64encode(sig).decode()
    )
    write_lines(frozen, lines)
    with pytest.raises(ChainBrokenError) as info:
        verify(frozen)
    assert info.value.message == (
        f"seq {lines[first]['seq']}: stream base4 does not start with RunStarted"
    )
