"""``caseledger demo`` refuses to overwrite a demo unless told (issue 14 item 6). The full
demo runs in tests/cli/test_export_audit.py (slow); this refusal is immediate."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ledger.cli import main


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
