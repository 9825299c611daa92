"""Issue 22 (item 1): a report of one run reads that run through a verified tree index.

The ledger is real (sales-fixture, a self-test, model-a, then model-b after model-a's
automatic checkpoint). The oracle for the report bytes is the read of every row
(``snapshot._read_all``, the path every report took before the index); the oracle for
the tree head is the RFC 9162 root over every stored leaf hash (``merkle.root_hash``).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_audit import COPIED_WITHOUT_BANKS, TAMPERED, TEST_SCORER
from report_testkit import build_real_ledger, fixed_clock, operator

from ledger import tree_index
from ledger.app import snapshot
from ledger.app.rescore import rescore
from ledger.cli import main
from ledger.harness import score as score_mod
from ledger.keys import Signer
from ledger.merkle import root_hash
from ledger.store import Ledger
from projections.report.build import build_report
from projections.report.render import render

RUNS = ("model-a", "model-b", "self-test")


def cli(ledger: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(ledger), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(autouse=True, params=[3, 8], ids=["blocks-of-8", "blocks-of-256"])
def block_height(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """The ledger has 214 events: blocks of 8 make most of it full blocks."""
    monkeypatch.setattr(tree_index, "BLOCK_HEIGHT", request.param)
    monkeypatch.setattr(tree_index, "BLOCK", 1 << request.param)
    return int(request.param)


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = build_real_ledger(tmp_path_factory.mktemp("tree-index") / "home")
    replay = str(path.parent / "model-a.jsonl")
    code, _, err = cli(
        path, "run", "--bank", "sales-fixture", "--adapter", "replay", "--replay-file", replay,
        "--tools", "off", "--run-id", "model-b", "--attempts", "1",
    )  # fmt: skip
    assert code == 0, err
    return path


@pytest.fixture
def copy(master: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "home"
    shutil.copytree(master.parent, dst)
    for junk in dst.glob("ledger.index.db*"):
        junk.unlink()
    return dst / "ledger.db"


def leaves_of(path: Path) -> list[bytes]:
    conn = sqlite3.connect(path)
    out = [bytes(r[0]) for r in conn.execute("SELECT leaf_hash FROM events ORDER BY seq")]
    conn.close()
    return out


def checkpoint_sizes(path: Path) -> list[int]:
    conn = sqlite3.connect(path)
    out = [int(r[0]) for r in conn.execute("SELECT size FROM checkpoints ORDER BY size")]
    conn.close()
    return out


def full_report(path: Path, run: str, fmt: str, at_size: int | None = None) -> bytes:
    """The report as the read of every row gives it (the path without an index)."""
    with Ledger.open(path, readonly=True) as ledger:
        stop = ledger.size() if at_size is None else at_size
        snap = snapshot._read_all(ledger, stop, frozenset([run]))
    return render(build_report(snap.state, root_hash=snap.root, runs=[run]), fmt)


def test_a_run_is_read_through_the_index_with_the_same_bytes(copy: Path, block_height: int) -> None:
    leaves = leaves_of(copy)
    sizes = checkpoint_sizes(copy)
    assert sizes[-1] == len(leaves)  # model-b's RunFinished stored the newest checkpoint
    for run in RUNS:
        for fmt in ("json", "md", "html"):
            code, out, err = cli(copy, "report", "--run", run, "--format", fmt, "--detail", "full")
            assert code == 0, err
            assert out.encode() == full_report(copy, run, fmt)
            assert f"root sha256:{root_hash(leaves).hex()}" in err
    index = copy.with_name("ledger.index.db")
    assert index.is_file()
    conn = sqlite3.connect(index)
    assert conn.execute("SELECT value FROM meta WHERE key = 'size'").fetchone()[0] == str(
        len(leaves)
    )
    blocks = conn.execute(
        "SELECT block, node, length(leaves) FROM blocks ORDER BY block"
    ).fetchall()
    streams = {r[0] for r in conn.execute("SELECT stream FROM streams")}
    conn.close()
    width = 1 << block_height
    full, rest = divmod(len(leaves), width)
    assert [b[0] for b in blocks] == list(range(full + (1 if rest else 0)))
    assert [b[2] for b in blocks] == [width * 32] * full + ([rest * 32] if rest else [])
    for block, node, _ in blocks[:full]:
        assert node == root_hash(leaves[block * width : (block + 1) * width])
    assert streams == {"ledger", *RUNS}


class _Halved(score_mod.Scorer):
    version = "2.1.0-test"

    def ast_points(self, rules):  # type: ignore[no-untyped-def]
        return super().ast_points(rules) / 2


@TEST_SCORER
def test_events_after_the_newest_checkpoint_are_read_in_full(
    copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(score_mod.SCORERS, _Halved.version, _Halved())
    assert cli(copy, "report", "--run", "model-a")[0] == 0  # the index at the checkpoint
    with Ledger.open(copy) as ledger:
        summary = rescore(ledger, operator(), copy.parent, version=_Halved.version,
                          runs=["model-a"], clock=fixed_clock)  # fmt: skip
        ledger.register(Signer.generate("auditor", role="auditor"), by=operator())
    assert summary.appended > 0
    leaves = leaves_of(copy)
    assert checkpoint_sizes(copy)[-1] == len(leaves) - summary.appended - 1  # none stored
    for run in ("model-a", "model-b"):
        for scorer in ("2.0.0", _Halved.version):
            args = (
                "report",
                "--run",
                run,
                "--scorer",
                scorer,
                "--format",
                "md",
                "--detail",
                "full",
            )
            code, out, err = cli(copy, *args)
            assert code == 0, err
            assert f"tree size {len(leaves)}, root sha256:{root_hash(leaves).hex()}" in err
            with Ledger.open(copy, readonly=True) as ledger:
                snap = snapshot._read_all(ledger, len(leaves), frozenset([run]))
            want = build_report(snap.state, root_hash=snap.root, runs=[run], scorer=scorer)
            assert out.encode() == render(want, "md")


@pytest.mark.parametrize("back", [1, 37, 150])
def test_an_older_tree_size_gives_the_bytes_and_root_of_that_prefix(copy: Path, back: int) -> None:
    leaves = leaves_of(copy)
    size = len(leaves) - back
    for run in ("model-a", "self-test"):
        code, out, err = cli(
            copy,
            "report",
            "--run",
            run,
            "--at-size",
            str(size),
            "--format",
            "md",
            "--detail",
            "full",
        )
        if code == 2:  # model-a may start after that size
            assert "no run model-a" in err
            continue
        assert code == 0, err
        assert out.encode() == full_report(copy, run, "md", size)
        assert f"tree size {size}, root sha256:{root_hash(leaves[:size]).hex()}" in err


@COPIED_WITHOUT_BANKS
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(
    edit=st.sampled_from(["flip", "drop_block", "drop_stream", "size", "head", "junk"]),
    where=st.floats(min_value=0, max_value=1, exclude_max=True),
    bit=st.integers(min_value=0, max_value=7),
)
def test_an_edited_index_never_changes_a_report(
    master: Path, tmp_path_factory: pytest.TempPathFactory, edit: str, where: float, bit: int
) -> None:
    home = tmp_path_factory.mktemp("edit")
    path = home / "ledger.db"
    shutil.copyfile(master, path)
    honest = full_report(path, "model-a", "json")
    code, out, _ = cli(path, "report", "--run", "model-a", "--detail", "full")  # builds the index
    assert code == 0
    assert out.encode() == honest
    index = home / "ledger.index.db"
    if edit == "junk":
        data = bytearray(index.read_bytes())
        data[int(len(data) * where)] ^= 1 << bit
        index.write_bytes(bytes(data))
    else:
        conn = sqlite3.connect(index)
        blocks = conn.execute("SELECT block, leaves FROM blocks ORDER BY block").fetchall()
        if edit == "flip":
            block, leaves = blocks[int(len(blocks) * where)]
            data = bytearray(leaves)
            data[int(len(data) * where)] ^= 1 << bit
            conn.execute("UPDATE blocks SET leaves = ? WHERE block = ?", (bytes(data), block))
        elif edit == "drop_block":
            dropped = blocks[int(len(blocks) * where)][0]
            conn.execute("DELETE FROM blocks WHERE block = ?", (dropped,))
        elif edit == "drop_stream":
            conn.execute("DELETE FROM streams WHERE stream = 'model-a'")
        elif edit == "size":
            conn.execute("UPDATE meta SET value = value - 1 WHERE key = 'size'")
        else:
            conn.execute("UPDATE streams SET stream_seq = stream_seq - 1 WHERE stream = 'model-a'")
        conn.commit()
        conn.close()
    code, out, err = cli(path, "report", "--run", "model-a", "--detail", "full")
    assert "Traceback" not in err
    assert code == 0, err
    assert out.encode() == honest


@TAMPERED
def test_a_stream_column_edited_under_the_index_is_refused(copy: Path) -> None:
    # The index was built from the checked bodies; then the attacker relabels model-a's
    # last event so the ledger's stream index no longer finds it. The report fails
    # instead of showing model-a without it.
    assert cli(copy, "report", "--run", "model-a")[0] == 0
    conn = sqlite3.connect(copy)
    last = conn.execute(
        "SELECT seq FROM events WHERE stream = 'model-a' ORDER BY stream_seq DESC LIMIT 1"
    ).fetchone()[0]
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("UPDATE events SET stream = 'elsewhere' WHERE seq = ?", (last,))
    conn.commit()
    conn.close()
    for command in (["report", "--run", "model-a"], ["runs"]):
        code, out, err = cli(copy, *command)
        assert code == 1
        assert out == ""
        assert f"error: seq {last}: the row's columns say stream 'elsewhere'" in err, err
        assert "Traceback" not in err


def test_a_ledger_without_a_stored_checkpoint_is_read_in_full(copy: Path) -> None:
    conn = sqlite3.connect(copy)
    conn.execute("DROP TABLE checkpoints")
    conn.commit()
    conn.close()
    with Ledger.open(copy, readonly=True) as ledger:
        assert tree_index.open_index(ledger) is None
    code, out, _ = cli(copy, "report", "--run", "model-b", "--format", "md", "--detail", "full")
    assert code == 0
    assert out.encode() == full_report(copy, "model-b", "md")
    assert not copy.with_name("ledger.index.db").exists()


def test_runs_reads_one_run_at_a_time_with_the_same_lines(copy: Path) -> None:
    from projections.report.build import run_overview
    from projections.report.jsonio import plain

    with Ledger.open(copy, readonly=True) as ledger:
        want = run_overview(snapshot._read_all(ledger, ledger.size(), None).state)
        snaps = list(snapshot.run_snapshots(ledger))
    assert [list(s.state.runs) for s in snaps] == [[r] for r in sorted(RUNS)]
    code, out, err = cli(copy, "runs", "--json")
    assert code == 0, err
    assert json.loads(out) == plain(want)
    assert [row.run for row in want] == sorted(RUNS)


@pytest.mark.parametrize("window", [1, 4096])
def test_recompute_looks_evidence_up_by_leaf_hash(
    copy: Path, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A window of 1 keeps only the newest evidence event in memory: every other one a
    # score names is found by its leaf hash in the ledger.
    from ledger.app import rescore as rescore_mod
    from ledger.app.rescore import recompute_hook
    from ledger.verify import verify_ledger

    monkeypatch.setattr(rescore_mod, "_WINDOW", window)

    conn = sqlite3.connect(copy)
    scores = conn.execute("SELECT COUNT(*) FROM events WHERE type = 'score.computed.v1'").fetchone()
    conn.close()
    bound = recompute_hook(copy.parent / "banks", reexecute=False)
    verify_ledger(copy, recompute=bound, workers=1)
    assert bound.ledger is not None  # verify handed it the ledger it walked
    assert bound.scores == scores[0]
    unbound = recompute_hook(copy.parent / "banks", reexecute=False)
    with Ledger.open(copy, readonly=True) as ledger:
        unbound(ledger.iter_events())
    assert unbound.ledger is None
    assert unbound.scores == scores[0]
