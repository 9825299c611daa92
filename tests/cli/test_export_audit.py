"""``caseledger export audit`` and ``verify --recompute --banks`` (issue 12 section 4).

An auditor gets one folder from the operator, moves it anywhere, and with no
private key verifies the ledger, recomputes every score and rebuilds every
published report byte for byte, running the commands the export's README lists.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_audit import COPIED_WITHOUT_BANKS, TAMPERED

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "projections"))
from report_testkit import OPERATOR_SEED, build_real_ledger, operator

from ledger.app.audit import check_bank_files, published_references
from ledger.app.rescore import score_fields
from ledger.cli import main
from ledger.errors import VerificationError
from ledger.events import BankPublished, ScoreComputed, SqlExecuted
from ledger.keys import Signer
from ledger.store import Draft, Ledger, link_of

BIN = Path(sys.executable).parent
FORMATS = ("json", "md", "html")
BANK_FILES = {"cases.yaml", "prompt.md", "schema.sql", "seed.sql", "semantic.json"}
EXPORT_NAMES = {"README.md", "banks", "checkpoint.note", "ledger.db", "operator.pub"}


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def shell(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """One README command in a real shell, with only the venv's console script on PATH."""
    env = {k: v for k, v in os.environ.items() if k != "CASELEDGER_LEDGER"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", line],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def readme_commands(export: Path) -> list[str]:
    lines = (export / "README.md").read_text("utf-8").splitlines()
    start = lines.index("```sh") + 1
    return lines[start : lines.index("```", start)]


def verifier_key(name: str, seed: bytes) -> str:
    """The C2SP verifier key of an Ed25519 seed, computed here from the spec."""
    public = Ed25519PrivateKey.from_private_bytes(seed).public_key()
    raw = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    key_id = hashlib.sha256(name.encode() + b"\n\x01" + raw).digest()[:4].hex()
    encoded = base64.b64encode(b"\x01" + raw).decode()
    return f"{name}+{key_id}+{encoded}"


def leaf_hashes(db: Path) -> list[bytes]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [bytes(r[0]) for r in con.execute("SELECT leaf_hash FROM events ORDER BY seq")]
    finally:
        con.close()


def published_bank(db: Path) -> tuple[BankPublished, int]:
    with Ledger.open(db, readonly=True) as ledger:
        row = next(ledger.events_of_type(BankPublished))
        event = row.event()
    assert isinstance(event, BankPublished)
    return event, row.seq


@pytest.fixture(scope="module")
def operator_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run ledger (sales-fixture, reference + replay runs), a checkpoint, the reports."""
    home = tmp_path_factory.mktemp("operator") / "home"
    ledger = build_real_ledger(home)
    size = len(leaf_hashes(ledger))
    code, _, err = cli("--ledger", str(ledger), "checkpoint", "-o", str(home / "cp.note"))
    assert code == 0, err
    (home / "published").mkdir()
    for fmt in FORMATS:
        out = home / "published" / f"report.{fmt}"
        code, _, err = cli("--ledger", str(ledger), "report", "--format", fmt, "-o", str(out))
        assert code == 0, err
    # the note printed covers every event, its own CheckpointIssued (seq size) included
    assert (home / "cp.note").read_text("utf-8").splitlines()[1] == str(size + 1)
    return home


@pytest.fixture
def home(operator_home: Path, tmp_path: Path) -> Path:
    """A private copy of the operator's folder."""
    dst = tmp_path / "operator"
    shutil.copytree(operator_home, dst, ignore=shutil.ignore_patterns("*.projections.db"))
    return dst


def export(home: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    line = [str(BIN / "caseledger"), "--ledger", str(home / "ledger.db"), "export", "audit"]
    return subprocess.run(
        [*line, "-o", str(out), *extra], capture_output=True, text=True, check=False
    )


@TAMPERED
def test_walkthrough_in_a_moved_export_with_no_key(home: Path, tmp_path: Path) -> None:
    done = export(home, tmp_path / "out", "--reports", str(home / "published"))
    assert done.returncode == 0, done.stderr
    stored_bank = next(p for p in (home / "banks").iterdir() if p.is_dir())
    source_leaves = leaf_hashes(home / "ledger.db")
    # Move it away and take the operator's folder (keys, bank store) out of reach.
    auditor = tmp_path / "auditor"
    auditor.mkdir()
    moved = Path(shutil.move(tmp_path / "out", auditor / "audit"))
    home.rename(tmp_path / "operator-gone")
    gone = tmp_path / "operator-gone"

    assert {p.name for p in moved.iterdir()} == EXPORT_NAMES | {"reports"}
    files = [p for p in moved.rglob("*") if p.is_file()]
    assert not [p for p in files if b"PRIVATE+KEY" in p.read_bytes()]
    assert not [p for p in moved.rglob("*") if p.name == "keys" or p.suffix == ".key"]
    # ledger.db holds the same events, in the same order, as the operator's ledger
    assert leaf_hashes(moved / "ledger.db") == source_leaves
    assert not (moved / "ledger.db-wal").exists()
    assert (moved / "operator.pub").read_text("utf-8") == (
        verifier_key("test-operator", OPERATOR_SEED) + "\n"
    )
    assert (moved / "checkpoint.note").read_text("utf-8") == (gone / "cp.note").read_text("utf-8")
    # the bank files are the operator's stored (published) bytes, under bank@version
    bank = moved / "banks" / "sales-fixture@v1"
    assert [p.name for p in (moved / "banks").iterdir()] == ["sales-fixture@v1"]
    assert {p.name for p in bank.iterdir()} == BANK_FILES | {"calibration.yaml"}
    for name in BANK_FILES | {"calibration.yaml"}:
        assert (bank / name).read_bytes() == (gone / "banks" / stored_bank.name / name).read_bytes()
    for fmt in FORMATS:
        assert (moved / "reports" / f"report.{fmt}").read_bytes() == (
            gone / "published" / f"report.{fmt}"
        ).read_bytes()

    commands = readme_commands(moved)
    size = len(source_leaves)  # the checkpoint covers them all, its CheckpointIssued too
    assert commands == [
        "caseledger --ledger ledger.db verify --key operator.pub --checkpoint checkpoint.note "
        "--banks banks --recompute",
        *(
            f"caseledger --ledger ledger.db report --at-size {size} --format {fmt} "
            f"| cmp - reports/report.{fmt}"
            for fmt in FORMATS
        ),
    ]
    verified = shell(commands[0], moved)
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith(f"verified: {size} events, 3 streams, 1 signers")
    assert f"checkpoints at size {size}" in verified.stdout
    # sales-fixture has 7 cases: the reference run scores 7 and executes 7; the replay
    # answers 20 of 21 (one missing recording: cancelled), 1 a provider timeout and 1 a
    # DROP TABLE (scored, never executed): 27 scores, 25 executions re-run.
    assert verified.stdout.splitlines()[0].endswith("; scores recomputed")
    assert verified.stdout.splitlines()[1:] == [
        "recompute: 27 scores re-derived; 25 executions re-run, 25 equal, "
        "0 not comparable (timeout or memory stop)"
    ]
    for line in commands[1:]:
        rebuilt = shell(line, moved)
        assert rebuilt.returncode == 0, (line, rebuilt.stdout, rebuilt.stderr)
        assert rebuilt.stdout == ""  # cmp is silent when the bytes are equal

    # One published bank file changed in the export: exit 1 naming the bank and the file.
    seed = bank / "seed.sql"
    seed.chmod(0o644)
    with seed.open("a", encoding="utf-8") as fh:
        fh.write("INSERT INTO regions VALUES ('R9', 'Atlantis');\n")
    tampered = shell(commands[0], moved)
    assert tampered.returncode == 1, tampered.stderr
    first = tampered.stderr.splitlines()[0]
    assert first.startswith("verification FAILED: seq 1: bank sales-fixture@v1: seed.sql in ")
    assert "differs from what BankPublished recorded" in first
    assert "Traceback" not in tampered.stderr


def test_readme_without_reports_rebuilds_at_the_checkpoint(home: Path, tmp_path: Path) -> None:
    done = export(home, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    assert {p.name for p in out.iterdir()} == EXPORT_NAMES
    size = int((home / "cp.note").read_text("utf-8").splitlines()[1])
    commands = readme_commands(out)
    assert commands[1:] == [
        f"caseledger --ledger ledger.db report --at-size {size} --format {fmt} -o report.{fmt}"
        for fmt in FORMATS
    ]
    # the reports were published at the full size, which the checkpoint covers (its own
    # CheckpointIssued included), so the rebuild at the checkpoint's size is their bytes
    assert shell(commands[1], out).returncode == 0
    assert (out / "report.json").read_bytes() == (home / "published" / "report.json").read_bytes()
    assert f'"tree_size":{size}' in (out / "report.json").read_text("utf-8")


def test_a_stored_checkpoint_newer_than_the_last_checkpoint_event_is_exported(
    home: Path, tmp_path: Path
) -> None:
    ledger = str(home / "ledger.db")
    code, _, err = cli(
        "--ledger", ledger, "run", "--bank", "sales-fixture@v1", "--adapter", "reference",
        "--run-id", "later", "--no-variants",
    )  # fmt: skip
    assert code == 0, err
    con = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        stored = [int(r[0]) for r in con.execute("SELECT size FROM checkpoints")]
    finally:
        con.close()
    size = len(leaf_hashes(home / "ledger.db"))
    issued = int((home / "cp.note").read_text("utf-8").splitlines()[1])
    assert max(stored) == size > issued  # the run's last batch was checkpointed
    done = export(home, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "checkpoint.note").read_text("utf-8").splitlines()[1] == str(size)
    verified = shell(readme_commands(tmp_path / "out")[0], tmp_path / "out")
    assert verified.returncode == 0, verified.stderr
    assert f"checkpoints at size {size}" in verified.stdout


@COPIED_WITHOUT_BANKS
def test_a_ledger_open_for_writing_is_exported_as_of_its_last_commit(
    home: Path, tmp_path: Path
) -> None:
    # While a writer keeps the ledger open, its last batches live in ledger.db-wal only:
    # a copy of ledger.db alone would lose them, the backup API must not.
    before = leaf_hashes(home / "ledger.db")
    with Ledger.open(home / "ledger.db") as ledger:
        seq = ledger.register(
            Signer.from_seed("runner-1", bytes(32), role="adapter"), by=operator()
        )
        assert seq == len(before)
        wal = home / "ledger.db-wal"
        assert wal.is_file()
        assert wal.stat().st_size > 0
        naive = tmp_path / "naive.db"
        shutil.copyfile(home / "ledger.db", naive)
        assert len(leaf_hashes(naive)) < len(before) + 1
        done = export(home, tmp_path / "out")
        assert done.returncode == 0, done.stderr
    exported = leaf_hashes(tmp_path / "out" / "ledger.db")
    assert exported[:-1] == before
    assert len(exported) == len(before) + 1
    verified = shell(readme_commands(tmp_path / "out")[0], tmp_path / "out")
    assert verified.returncode == 0, verified.stderr
    assert "2 signers" in verified.stdout


def test_no_checkpoint_means_could_not_export(tmp_path: Path) -> None:
    ledger = tmp_path / "fresh" / "ledger.db"
    assert cli("--ledger", str(ledger), "init")[0] == 0
    code, _, err = cli("--ledger", str(ledger), "export", "audit", "-o", str(tmp_path / "out"))
    assert code == 2
    assert err.splitlines() == [
        f"error: {ledger} holds no signed checkpoint to give the auditor",
        "  hint: sign one first: caseledger checkpoint",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh"]  # nothing left behind


@TAMPERED
def test_a_changed_stored_bank_file_is_refused_and_nothing_written(
    home: Path, tmp_path: Path
) -> None:
    stored = next(p for p in (home / "banks").iterdir() if p.is_dir())
    prompt = stored / "prompt.md"
    prompt.chmod(0o644)
    prompt.write_bytes(prompt.read_bytes() + b"Answer fast.\n")
    done = export(home, tmp_path / "out")
    assert done.returncode == 1
    assert done.stderr.startswith("error: seq 1: bank sales-fixture@v1: prompt.md in ")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.partial")]


def test_a_report_the_ledger_does_not_rebuild_is_refused(home: Path, tmp_path: Path) -> None:
    md = home / "published" / "report.md"
    md.write_bytes(md.read_bytes().replace(b"sales-fixture", b"sales-fixtura", 1))
    done = export(home, tmp_path / "out", "--reports", str(home / "published"))
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {md} is not what this ledger rebuilds at tree size ")
    assert not (tmp_path / "out").exists()


def test_bad_output_and_report_folders_exit_2(home: Path, tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("keep me", "utf-8")
    done = export(home, busy)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {busy} already exists and is not an empty folder")
    assert [p.name for p in busy.iterdir()] == ["mine.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    done = export(home, tmp_path / "out", "--reports", str(empty))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {empty} holds no report.json")
    assert "Traceback" not in done.stderr


def test_recompute_without_bank_files_could_not_check(home: Path, tmp_path: Path) -> None:
    ledger = str(home / "ledger.db")
    nowhere = tmp_path / "nowhere"
    code, _, err = cli("--ledger", ledger, "verify", "--recompute", "--banks", str(nowhere))
    assert code == 2
    assert err.startswith(f"error: the files of bank sales-fixture@v1 (seq 1) are not in {nowhere}")
    assert "caseledger export audit" in err
    assert "bank publish" not in err
    code, _, err = cli("--ledger", ledger, "verify", "--banks", str(nowhere))
    assert code == 2
    assert "--banks is only read with --recompute" in err
    # the operator's own layout (banks/<hex>/ beside the ledger) is the default
    code, out, err = cli("--ledger", ledger, "verify", "--recompute")
    assert code == 0, err
    assert out.splitlines()[0].endswith("; scores recomputed")
    assert out.splitlines()[1].startswith("recompute: 27 scores re-derived; 25 executions re-run")


def forge_execution(home: Path, case_id: str, **change: object) -> int:
    """Append, signed with the operator's own key, a changed copy of the self-test run's
    SqlExecuted of ``case_id`` attempt 1 and a ScoreComputed naming it, re-derived from it
    by the scorer: a consistent lie the score check alone accepts. Returns the forged seq."""
    with Ledger.open(home / "ledger.db") as ledger:
        rows = ledger.stream_events("self-test")
        on_case = [r for r in rows if getattr(r.event(), "case_id", None) == case_id]
        executed = next(r for r in on_case if isinstance(r.event(), SqlExecuted))
        score = next(r.event() for r in on_case if isinstance(r.event(), ScoreComputed))
        fields = msgspec.structs.asdict(executed.event())
        for name in ("stream", "stream_seq", "stream_prev", "at"):
            fields.pop(name)
        (seq,) = ledger.append([Draft(SqlExecuted, "self-test", {**fields, **change})], operator())
        forged = ledger.stream_events("self-test")[-1]
        old, new = link_of(executed.leaf_hash), link_of(forged.leaf_hash)
        evidence = tuple(new if link == old else link for link in score.evidence)
        by_link = {link_of(r.leaf_hash): r.event() for r in [*on_case, forged]}
        bank, bank_seq = published_bank(home / "ledger.db")
        refs = published_references(home / "banks", bank, bank_seq)
        derived = score_fields(bank, refs, case_id, [by_link[x] for x in evidence], "2.0.0")
        ledger.append(
            [Draft(ScoreComputed, "self-test", {"case_id": case_id, "attempt": 1,
                                                "evidence": evidence, **derived})],
            operator(),
        )  # fmt: skip
    return seq


@TAMPERED
def test_recompute_re_executes_and_names_a_forged_result(home: Path) -> None:
    ledger = str(home / "ledger.db")
    seq = forge_execution(home, "sf-01", rows=((99, "1.00"),))
    code, _, err = cli("--ledger", ledger, "verify")
    assert code == 0, err  # signed by the registered operator: every signature holds
    code, _, err = cli("--ledger", ledger, "verify", "--recompute", "--banks", str(home / "banks"))
    assert code == 1
    assert err.startswith(
        f"verification FAILED: seq {seq}: the SqlExecuted of self-test case sf-01 attempt 1 "
        "differs from re-executing its SQL on bank sales-fixture@v1: rows "
        '(rows: recorded [[99,"1.00"]], re-executed '
    )
    assert "Traceback" not in err


def test_a_recorded_timeout_is_counted_not_compared(home: Path) -> None:
    stopped = {"ok": False, "error_kind": "timeout", "error_message": "stopped after 5 s"}
    forge_execution(home, "sf-02", **stopped, columns=(), rows=(), row_count=0)
    code, out, err = cli("--ledger", str(home / "ledger.db"), "verify", "--recompute")
    assert code == 0, err
    # one more score (the forged one); its timeout is not re-run, the 25 others are
    assert out.splitlines()[1] == (
        "recompute: 28 scores re-derived; 25 executions re-run, 25 equal, "
        "1 not comparable (timeout or memory stop)"
    )


EDITABLE = ("schema.sql", "seed.sql", "prompt.md", "cases.yaml", "semantic.json")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edits=st.dictionaries(
        st.sampled_from(EDITABLE),
        st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20),
        min_size=1,
    )
)
def test_every_changed_file_is_named(operator_home: Path, edits: dict[str, str]) -> None:
    event, seq = published_bank(operator_home / "ledger.db")
    stored = operator_home / "banks" / event.content_sha256.removeprefix("sha256:")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "bank"
        shutil.copytree(stored, folder)
        for name, text in edits.items():
            path = folder / name
            path.chmod(0o644)
            if name in ("cases.yaml", "semantic.json"):  # parsed: add a key to the mapping
                data = path.read_text("utf-8").rstrip("\n")[:-1]
                path.write_text(f'{data},"x":{len(text)}}}\n', "utf-8")
            else:  # a line of text after the last one
                path.write_text(path.read_text("utf-8") + f"-- {text}\n", "utf-8")
        with pytest.raises(VerificationError) as info:
            check_bank_files(folder, event, seq)
        message = info.value.message
        named = message.split(": ", 2)[2].split(" in ", 1)[0]
        assert named.split(", ") == sorted(edits)
        assert message.startswith(f"seq {seq}: bank sales-fixture@v1: ")
    assert info.value.exit_code == 1


def test_a_reformatted_but_equal_bank_passes(operator_home: Path, tmp_path: Path) -> None:
    # CRLF line endings are normalised away: the content hash, and so the check, ignore them.
    event, seq = published_bank(operator_home / "ledger.db")
    stored = operator_home / "banks" / event.content_sha256.removeprefix("sha256:")
    folder = tmp_path / "bank"
    shutil.copytree(stored, folder)
    for name in ("seed.sql", "prompt.md"):
        path = folder / name
        path.chmod(0o644)
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    source = check_bank_files(folder, event, seq)
    assert source.content_sha256 == event.content_sha256


def test_an_unpublished_calibration_file_that_does_not_load_is_named(
    operator_home: Path, tmp_path: Path
) -> None:
    event, seq = published_bank(operator_home / "ledger.db")
    bare = msgspec.structs.replace(event, calibration_sha256=None)  # published without one
    stored = operator_home / "banks" / event.content_sha256.removeprefix("sha256:")
    folder = tmp_path / "bank"
    shutil.copytree(stored, folder)
    assert check_bank_files(folder, bare, seq).content_sha256 == event.content_sha256
    calibration = folder / "calibration.yaml"
    calibration.chmod(0o644)
    calibration.write_text("variants: [unclosed\n", "utf-8")
    with pytest.raises(VerificationError) as info:
        check_bank_files(folder, bare, seq)
    assert info.value.message == (
        f"seq {seq}: bank sales-fixture@v1: calibration.yaml in {folder} was not published "
        "with this bank and does not load"
    )
    with pytest.raises(VerificationError) as info:
        check_bank_files(folder, event, seq)  # published with one: this one differs
    assert info.value.message.startswith(f"seq {seq}: bank sales-fixture@v1: calibration.yaml in ")


@TAMPERED
@pytest.mark.slow
def test_demo_export_walkthrough(
    demo_made: tuple[Path, str], demo_copy: Path, tmp_path: Path
) -> None:
    """The issue's test on the demo itself: two banks, its checkpoint and its reports."""
    # `caseledger demo` made in this process once per session (tests/conftest.py; the
    # export and the auditor's commands run in real ones below), so the demo's own code is
    # measured by the coverage run; this test works on its own copy.
    made, out = demo_made
    assert f"  caseledger --ledger {made / 'ledger.db'} verify --checkpoint " in out
    demo = demo_copy
    done = export(demo, tmp_path / "out", "--reports", str(demo))
    assert done.returncode == 0, done.stderr
    moved = Path(shutil.move(tmp_path / "out", tmp_path / "far" / "audit"))
    shutil.rmtree(demo / "keys")
    assert sorted(p.name for p in (moved / "banks").iterdir()) == [
        "retail@v4",
        "sales-fixture@v1",
    ]
    assert (moved / "checkpoint.note").read_text("utf-8").splitlines()[1] == (
        (demo / "checkpoint.note").read_text("utf-8").splitlines()[1]
    )
    for line in readme_commands(moved):
        ran = shell(line, moved)
        assert ran.returncode == 0, (line, ran.stderr)
    seed = moved / "banks" / "retail@v4" / "seed.sql"
    seed.chmod(0o644)
    seed.write_text(seed.read_text("utf-8") + "-- edited\n", "utf-8")
    ran = shell(readme_commands(moved)[0], moved)
    assert ran.returncode == 1
    assert "bank retail@v4: seed.sql in " in ran.stderr
