"""``caseledger demo`` refuses to overwrite a demo unless told, and moves a finished demo
into place (issue 14 item 6). The full demo runs in tests/cli/test_export_audit.py (slow);
these are immediate."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ledger.cli import main
from ledger.cli.demo import _move_into_place


def test_a_folder_holding_a_demo_is_refused_without_force(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    (out / "checkpoint.note").write_text("old\n", "utf-8")
    (out / "report.md").write_text("old\n", "utf-8")
    result = CliRunner().invoke(main, ["demo", "-o", str(out)])
    assert result.exit_code == 2
    # named in the order of the demo's files: ledger.db, checkpoint.note, report.json, .md
    assert result.stderr == (
        f"error: {out} already holds a demo (checkpoint.note, report.md)\n"
        "  hint: pass --force to replace it, or -o another folder\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]  # no work folder left
    assert (out / "report.md").read_text("utf-8") == "old\n"


def test_a_finished_demo_replaces_an_old_one_entry_by_entry(tmp_path: Path) -> None:
    # --force into a folder that holds other files too: the demo's entries replace the old
    # ones (a folder whole), the old ledger's WAL files go, anything else stays.
    work = tmp_path / ".demo.partial"
    (work / "keys").mkdir(parents=True)
    (work / "keys" / "operator.key").write_text("new key", "utf-8")
    (work / "ledger.db").write_text("new ledger", "utf-8")
    (work / "report.md").write_text("new report", "utf-8")
    out = tmp_path / "demo"
    (out / "keys").mkdir(parents=True)
    (out / "keys" / "old.key").write_text("old key", "utf-8")
    for name in ("ledger.db", "ledger.db-wal", "ledger.db-shm", "notes.txt"):
        (out / name).write_text(f"old {name}", "utf-8")
    _move_into_place(work, out)
    assert sorted(p.name for p in out.iterdir()) == ["keys", "ledger.db", "notes.txt", "report.md"]
    assert [p.name for p in (out / "keys").iterdir()] == ["operator.key"]
    assert (out / "ledger.db").read_text("utf-8") == "new ledger"
    assert (out / "notes.txt").read_text("utf-8") == "old notes.txt"
    assert list(work.iterdir()) == []


def test_a_finished_demo_is_renamed_into_a_new_or_empty_folder(tmp_path: Path) -> None:
    for out in (tmp_path / "new", tmp_path / "empty"):
        if out.name == "empty":
            out.mkdir()
        work = tmp_path / f".{out.name}.partial"
        work.mkdir()
        (work / "ledger.db").write_text("ledger", "utf-8")
        _move_into_place(work, out)
        assert [p.name for p in out.iterdir()] == ["ledger.db"]
        assert not work.exists()
