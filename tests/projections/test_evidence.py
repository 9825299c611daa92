"""Issue 12 sections 1 and 2: a report shows only what the log proves; any deletion is caught.

The ledger is real (sales-fixture published, a self-test, a replayed model run, then a
second model run ``model-b`` appended after model-a's automatic checkpoint). Attacks are
made as an attacker with the file and no private key would make them: triggers dropped,
rows rewritten with plain SQL, the hash chain recomputed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_audit import EARLIER_RELEASE, TAMPERED
from report_testkit import build_real_ledger

from ledger.cli import main
from ledger.cli.report import RUNS_HEADER

LEGACY = Path(__file__).resolve().parents[1] / "data" / "legacy-v1"
COLUMNS = "seq, body, leaf_hash, chain, key_id, sig, stream, stream_seq, type"


def cli(ledger: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(ledger), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = build_real_ledger(tmp_path_factory.mktemp("evidence") / "home")
    code, _, err = cli(
        path,
        "run",
        "--bank",
        "sales-fixture",
        "--adapter",
        "replay",
        "--replay-file",
        str(path.parent / "model-a.jsonl"),
        "--tools",
        "off",
        "--run-id",
        "model-b",
        "--attempts",
        "1",
    )
    assert code == 0, err
    return path


@pytest.fixture
def copy(master: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "home"
    shutil.copytree(master.parent, dst)
    return dst / "ledger.db"


@pytest.fixture(scope="module")
def honest(master: Path) -> dict[str, bytes]:
    # --detail full: caseledger-report/1, the whole evidence (issue 21 made /2 the default).
    return {
        fmt: cli(master, "report", "--format", fmt, "--detail", "full")[1].encode()
        for fmt in ("json", "md")
    }


def rows(path: Path) -> list[list[object]]:
    conn = sqlite3.connect(path)
    # S608: COLUMNS is this module's constant list of column names
    out = [list(r) for r in conn.execute(f"SELECT {COLUMNS} FROM events ORDER BY seq")]  # noqa: S608
    conn.close()
    return out


def rewrite(
    path: Path,
    new_rows: list[list[object]],
    *,
    drop_checkpoints: bool = False,
    rechain: bool = True,
) -> None:
    """Replace every row, renumbering seq and recomputing the chain (needs no key;
    ``rechain=False`` keeps each row's stored chain)."""
    chain = bytes(32)
    for seq, row in enumerate(new_rows):
        row[0] = seq
        chain = hashlib.sha256(chain + row[2]).digest()  # type: ignore[operator]
        if rechain:
            row[3] = chain
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER events_refuse_delete")
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("DELETE FROM events")
    conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", new_rows)
    if drop_checkpoints:
        conn.execute("DROP TABLE checkpoints")
    conn.commit()
    conn.close()


def first_seq_of(all_rows: list[list[object]], stream: str) -> int:
    return next(int(r[0]) for r in all_rows if r[6] == stream)  # type: ignore[call-overload]


def key_of(path: Path) -> str:
    code, out, _ = cli(path, "keys", "list")
    assert code == 0
    return next(
        line.strip() for line in out.splitlines() if "+" in line and " " not in line.strip()
    )


def failed_at(err: str, seq: int, what: str = "") -> bool:
    """``verify`` names the first bad seq on its first line."""
    first = err.splitlines()[0] if err else ""
    return first.startswith("verification FAILED: ") and f"seq {seq}: {what}" in first


def checkpoint_note(path: Path, size: int) -> str:
    conn = sqlite3.connect(path)
    note = conn.execute("SELECT note FROM checkpoints WHERE size = ?", (size,)).fetchone()[0]
    conn.close()
    return str(note)


# ----------------------------------------------------------------- section 1


def test_reports_are_bound_to_the_log(copy: Path, honest: dict[str, bytes]) -> None:
    code, out, err = cli(copy, "report", "--format", "json", "--detail", "full")
    assert code == 0
    assert out.encode() == honest["json"]
    size = len(rows(copy))
    conn = sqlite3.connect(copy)
    leaves = [r[0] for r in conn.execute("SELECT leaf_hash FROM events ORDER BY seq")]
    conn.close()
    from ledger.merkle import root_hash

    assert f"report built at tree size {size}, root sha256:{root_hash(leaves).hex()}" in err


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(junk=st.binary(min_size=0, max_size=4096), name=st.sampled_from(["projections", "x"]))
@pytest.mark.no_cover  # see pyproject.toml: repeats covered paths
def test_a_file_beside_the_ledger_never_changes_a_report(
    copy: Path, honest: dict[str, bytes], junk: bytes, name: str
) -> None:
    # The projection store of earlier releases (or anything else beside the ledger) is
    # not read: whatever it holds, the report is the honest one.
    (copy.parent / f"ledger.{name}.db").write_bytes(junk)
    code, out, _ = cli(copy, "report", "--format", "md", "--detail", "full")
    assert code == 0
    assert out.encode() == honest["md"]


@TAMPERED
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(
    which=st.floats(min_value=0, max_value=1, exclude_max=True),
    column=st.sampled_from([1, 2, 3]),
    where=st.floats(min_value=0, max_value=1, exclude_max=True),
    bit=st.integers(min_value=0, max_value=7),
    fmt=st.sampled_from(["json", "md", "html"]),
)
def test_one_flipped_bit_in_a_body_leaf_or_chain_makes_report_exit_1(
    master: Path, tmp_path_factory: pytest.TempPathFactory, which, column, where, bit, fmt
) -> None:
    home = tmp_path_factory.mktemp("flip")
    path = home / "ledger.db"
    shutil.copyfile(master, path)
    all_rows = rows(path)
    seq = int(len(all_rows) * which)
    value = bytearray(all_rows[seq][column])  # type: ignore[arg-type]
    value[int(len(value) * where)] ^= 1 << bit
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER events_refuse_update")
    name = ["seq", "body", "leaf_hash", "chain"][column]  # S608: a name from this list
    conn.execute(f"UPDATE events SET {name} = ? WHERE seq = ?", (bytes(value), seq))  # noqa: S608
    conn.commit()
    conn.close()
    code, out, err = cli(path, "report", "--format", fmt)
    assert code == 1
    assert out == ""
    lines = err.strip().splitlines()
    # the first bad seq: the flipped row, except that a flipped chain is noticed at the
    # row itself too (its stored chain is not the hash of the previous chain and leaf)
    assert lines[0].startswith(f"error: seq {seq}: "), err
    assert "Traceback" not in err
    for command in (
        ["runs"],
        ["rebuild"],
        ["gate", "--baseline", f"{path}:model-a", "--current", f"{path}:b"],
    ):
        code, _, err = cli(path, *command)
        assert code == 1, (command, err)
        assert f"seq {seq}: " in err, (command, err)


@TAMPERED
def test_the_report_of_an_older_size_checks_only_its_prefix(copy: Path) -> None:
    # bytes after the tree size a report was built at cannot change it
    all_rows = rows(copy)
    last = len(all_rows) - 1
    conn = sqlite3.connect(copy)
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("UPDATE events SET body = X'00' WHERE seq = ?", (last,))
    conn.commit()
    conn.close()
    assert cli(copy, "report", "--at-size", str(last), "--format", "md")[0] == 0
    code, _, err = cli(copy, "report", "--format", "md")
    assert code == 1
    assert f"seq {last}: body hashes to" in err


# ----------------------------------------------------------------- section 2


def test_the_honest_copy_verifies_with_stored_checkpoints(copy: Path) -> None:
    code, out, err = cli(copy, "verify", "--key", key_of(copy))
    assert code == 0, err
    # bank published (2 events), self-test ends at 53, model-a at 179, model-b at 235:
    # 7 cases x 1 attempt and 7 x 3 (+ RunStarted/RunFinished) counted by hand in the fixture,
    # and each run's 7 prompts stored once (issue 22: +7 events per run)
    assert "4 stored checkpoints, newest at size 235" in out
    assert "signatures seq 0-234 event/v2 (content and place)" in out


@TAMPERED
def test_whole_run_deleted_and_chain_recomputed(copy: Path) -> None:
    all_rows = rows(copy)
    start = first_seq_of(all_rows, "model-a")
    kept = [r for r in all_rows if r[6] != "model-a"]
    rewrite(copy, kept, drop_checkpoints=True)
    code, _, err = cli(copy, "verify", "--key", key_of(copy))
    assert code == 1
    # the first row after the hole now follows another chain value than it signed
    assert failed_at(err, start, "signature does not verify"), err


@TAMPERED
def test_run_tail_deleted_in_the_middle_of_the_log(copy: Path) -> None:
    all_rows = rows(copy)
    model_a = [i for i, r in enumerate(all_rows) if r[6] == "model-a"]
    cut = set(model_a[-5:])  # RunFinished and the last attempt's events
    kept = [r for i, r in enumerate(all_rows) if i not in cut]
    rewrite(copy, kept, drop_checkpoints=True)
    code, _, err = cli(copy, "verify", "--key", key_of(copy))
    assert code == 1
    assert failed_at(err, min(cut), "signature does not verify")


@TAMPERED
def test_two_runs_reordered(copy: Path) -> None:
    all_rows = rows(copy)
    a = [r for r in all_rows if r[6] == "model-a"]
    b = [r for r in all_rows if r[6] == "model-b"]
    rest = [r for r in all_rows if r[6] not in ("model-a", "model-b")]
    start = first_seq_of(all_rows, "model-a")
    rewrite(copy, rest + b + a, drop_checkpoints=True)
    code, _, err = cli(copy, "verify", "--key", key_of(copy))
    assert code == 1, err
    assert failed_at(err, start, "signature does not verify"), err


@TAMPERED
@pytest.mark.parametrize(
    ("column", "value"),
    [("stream", "model-x"), ("stream_seq", 999), ("type", "signer.retired.v1"), ("key_id", "0000")],
)
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_each_column_beside_the_body_is_checked(
    copy: Path, column: str, value: object, where: str
) -> None:
    size = len(rows(copy))
    seq = {"first": 1, "middle": size // 2, "last": size - 1}[where]
    conn = sqlite3.connect(copy)
    conn.execute("DROP TRIGGER events_refuse_update")
    # S608: the column is one of the four names in the parametrisation above
    conn.execute(f"UPDATE events SET {column} = ? WHERE seq = ?", (value, seq))  # noqa: S608
    conn.commit()
    conn.close()
    code, _, err = cli(copy, "verify", "--key", key_of(copy))
    assert code == 1, err
    assert failed_at(err, seq, ""), err


@TAMPERED
def test_resume_never_trusts_edited_columns(copy: Path) -> None:
    # hide model-b's last events from the stream column: a resume must not see a
    # shorter run, call the model again and sign a fork
    all_rows = rows(copy)
    tail = [int(r[0]) for r in all_rows if r[6] == "model-b"][-4:]  # type: ignore[call-overload]
    conn = sqlite3.connect(copy)
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.executemany("UPDATE events SET stream = 'elsewhere' WHERE seq = ?", [(s,) for s in tail])
    conn.commit()
    conn.close()
    code, _, err = cli(
        copy,
        "run",
        "--bank",
        "sales-fixture",
        "--adapter",
        "replay",
        "--replay-file",
        str(copy.parent / "model-a.jsonl"),
        "--tools",
        "off",
        "--resume",
        "model-b",
    )
    edited = f"seq {tail[0]}: the row's columns say stream 'elsewhere'"
    assert code == 1, err
    assert edited in err, err
    assert len(rows(copy)) == len(all_rows)  # nothing appended
    # bank list and runs check every row of the log before listing (issue 33), though
    # they list from the ledger stream and from each run's first and last rows.
    for command in (["runs"], ["report"], ["bank", "list"]):
        code, _, err = cli(copy, *command)
        assert code == 1, (command, err)
        assert edited in err, (command, err)


def leaf_of(body: bytes) -> bytes:
    """RFC 9162 leaf hash: SHA-256 of 0x00 and the body."""
    return hashlib.sha256(b"\0" + body).digest()


def damage_inside(path: Path, row: list[object], damage: str, bit: int) -> str:
    """Damage ``row`` (a row of ``path``) in one way; the error line it must cause,
    worked out from the rows (``runs``/``bank list`` check every row, issue 33)."""
    seq, body, leaf, stream, stream_seq, kind = (row[i] for i in (0, 1, 2, 6, 7, 8))
    assert isinstance(seq, int)
    assert isinstance(body, bytes)
    assert isinstance(leaf, bytes)
    assert isinstance(stream_seq, int)
    all_rows = rows(path)
    columns = {"type": "signer.retired.v1", "stream": "elsewhere", "stream_seq": 999}
    if damage in columns:
        edited = {"stream": stream, "stream_seq": stream_seq, "type": kind}
        edited[damage] = columns[damage]
        conn = sqlite3.connect(path)
        conn.execute("DROP TRIGGER events_refuse_update")
        # S608: the column is a key of the dict above
        conn.execute(f"UPDATE events SET {damage} = ? WHERE seq = ?", (columns[damage], seq))  # noqa: S608
        conn.commit()
        conn.close()
        return (
            f"error: seq {seq}: the row's columns say stream {edited['stream']!r}, stream_seq "
            f"{edited['stream_seq']!r}, type {edited['type']!r}; its body says {stream!r}, "
            f"{stream_seq}, {kind!r} (the columns were edited)"
        )
    if damage == "body":  # one bit of the body flipped, nothing else changed
        flipped = bytearray(body)
        flipped[len(body) // 2] ^= 1 << bit
        all_rows[seq][1] = bytes(flipped)
        rewrite(path, all_rows, rechain=False)
        return (
            f"error: seq {seq}: body hashes to sha256:{leaf_of(bytes(flipped)).hex()}, "
            f"stored leaf hash is sha256:{leaf.hex()}"
        )
    if damage == "forged":  # another body, its leaf hash and every chain after it made again
        other = body.replace(b'"at":"2', b'"at":"1', 1)  # the year 2xxx made 1xxx
        assert other != body
        all_rows[seq][1:3] = [other, leaf_of(other)]
        rewrite(path, all_rows)
        return (
            f"error: seq {seq}: leaf hash sha256:{leaf_of(other).hex()} is not the one the "
            f"signed checkpoint at size {len(all_rows)} holds there (the log was rewritten)"
        )
    deleted = all_rows[:seq] + all_rows[seq + 1 :]
    before, after = all_rows[seq - 1], all_rows[seq + 1]
    if damage == "deleted":  # the rows after it renumbered, their stored chains kept
        rewrite(path, deleted, rechain=False)
        expected = hashlib.sha256(before[3] + after[2]).digest()  # type: ignore[operator]
        return (
            f"error: seq {seq}: chain is sha256:{after[3].hex()}, expected "  # type: ignore[union-attr]
            f"sha256:{expected.hex()} (SHA-256 of the previous chain and this leaf)"
        )
    # deleted, the chain made again: the run's next event names the deleted one
    rewrite(path, deleted)
    return (
        f"error: seq {seq}: stream {stream}: stream_seq {stream_seq + 1} after "
        f"sha256:{leaf.hex()}, expected stream_seq {stream_seq} after "
        f"sha256:{before[2].hex()}"  # type: ignore[union-attr]
    )


DAMAGES = ("body", "type", "stream", "stream_seq", "deleted", "deleted-rechained", "forged")


@TAMPERED
@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(
    run=st.sampled_from(["self-test", "model-a", "model-b"]),
    where=st.floats(min_value=0, max_value=1, exclude_max=True),
    damage=st.sampled_from(DAMAGES),
    bit=st.integers(min_value=0, max_value=7),
    command=st.sampled_from([("runs",), ("runs", "--json"), ("bank", "list")]),
)
def test_a_damaged_row_inside_a_finished_run_stops_runs_and_bank_list(
    master: Path,
    tmp_path_factory: pytest.TempPathFactory,
    run: str,
    where: float,
    damage: str,
    bit: int,
    command: tuple[str, ...],
) -> None:
    # runs lists a finished run from its RunStarted and RunFinished and bank list reads
    # the ledger stream, both through the verified tree index; neither folds the row
    # damaged here (strictly between the run's first and last), yet both refuse it.
    home = tmp_path_factory.mktemp("inside")
    path = home / "ledger.db"
    shutil.copyfile(master, path)
    assert cli(path, "runs")[0] == 0  # its tree index, verified at the last checkpoint
    inside = [r for r in rows(path) if r[6] == run][1:-1]
    line = damage_inside(path, inside[int(len(inside) * where)], damage, bit)
    code, out, err = cli(path, *command)
    assert code == 1, err
    errors = [x for x in err.splitlines() if x.startswith("error: ")]
    assert errors == [line], err
    assert err.endswith(f"{line}\n  hint: run `caseledger verify` on this ledger\n"), err
    assert "published:" in out if command == ("bank", "list") else out == ""


def test_runs_and_bank_list_of_an_honest_ledger(master: Path) -> None:
    # the whole log is checked, nothing is said: the same rows as a fold of every run
    code, out, err = cli(master, "runs")
    assert (code, err) == (0, "")
    assert cli(master, "runs", "--fold") == (0, out, "")
    assert out.splitlines()[0].split() == list(RUNS_HEADER)
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["model-a", "model-b", "self-test"]
    code, out, err = cli(master, "bank", "list")
    assert (code, err) == (0, "")
    published = out.split("published:\n")[1].splitlines()
    assert len(published) == 1
    assert published[0].split()[0] == "sales-fixture@v1"
    # seq 0 registers the operator's key (Ledger.create); cases.yaml has sf-01 .. sf-07
    assert published[0].endswith("  seq 1  7 cases"), published


def test_cut_tail_caught_by_the_stored_checkpoint_or_an_exported_one(copy: Path) -> None:
    all_rows = rows(copy)
    start = first_seq_of(all_rows, "model-b")
    exported = copy.parent / "exported.note"
    exported.write_text(checkpoint_note(copy, len(all_rows)))
    rewrite(copy, all_rows[:start])  # a suffix: the chain of the prefix is untouched
    code, _, err = cli(copy, "verify", "--key", key_of(copy))
    assert code == 1
    assert f"seq {start}: the ledger ends at size {start}" in err
    assert "tail cut off" in err
    # the attacker also removes the stored checkpoints past the cut: only an exported
    # checkpoint catches it now
    conn = sqlite3.connect(copy)
    conn.execute("DROP TRIGGER checkpoints_refuse_delete")
    conn.execute("DELETE FROM checkpoints WHERE size > ?", (start,))
    conn.commit()
    conn.close()
    assert cli(copy, "verify", "--key", key_of(copy))[0] == 0
    code, _, err = cli(copy, "verify", "--key", key_of(copy), "--checkpoint", str(exported))
    assert code == 1
    assert "tail cut off" in err


@EARLIER_RELEASE
def test_a_ledger_of_the_previous_release_verifies_and_renders_the_same(tmp_path: Path) -> None:
    home = tmp_path / "legacy"
    shutil.copytree(LEGACY, home)
    path = home / "ledger.db"
    key = (home / "operator.pub").read_text().strip()
    code, out, err = cli(
        path, "verify", "--key", key, "--checkpoint", str(home / "checkpoint.note")
    )
    assert code == 0, err
    assert "signatures seq 0-102 event/v1 (content only)" in out
    digests = {}
    for line in (home / "reports.sha256").read_text().splitlines():
        digest, name = line.split()
        digests[name] = digest
    for fmt in ("json", "md"):  # that release's contract: caseledger-report/1
        code, out, _ = cli(path, "report", "--format", fmt, "--detail", "full")
        assert code == 0
        assert hashlib.sha256(out.encode()).hexdigest() == digests[f"report.{fmt}"], fmt
    # The HTML page changed in issue 20 (a view, not the report contract: docs/reports.md),
    # so it is no longer that release's bytes; it is still made from exactly the same
    # report, the one whose JSON bytes are pinned above.
    from projections.report.render import render

    _, page, _ = cli(path, "report", "--format", "html", "--detail", "full")
    _, text, _ = cli(path, "report", "--format", "json", "--detail", "full")
    assert page.encode() == render(json.loads(text), "html")
    assert hashlib.sha256(page.encode()).hexdigest() != digests["report.html"]


@TAMPERED
def test_a_v1_signature_after_a_v2_one_is_refused(copy: Path) -> None:
    # The older rule (leaf only) cannot be used to re-sign a moved event once the log
    # uses the newer one: even the operator's own v1 signature is refused after v2.
    from report_testkit import operator

    all_rows = rows(copy)
    seq = len(all_rows) - 1
    sig = operator().sign(b"caseledger/event/v1\n" + all_rows[seq][2])  # type: ignore[operator]
    conn = sqlite3.connect(copy)
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("UPDATE events SET sig = ? WHERE seq = ?", (sig, seq))
    conn.commit()
    conn.close()
    code, _, err = cli(copy, "verify", "--key", key_of(copy))
    assert code == 1
    assert failed_at(err, seq, "signed under rule event/v1 (leaf only) after seq 0")
