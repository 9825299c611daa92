"""Bank validation shows progress (issue 16): ``bank validate`` and ``bank publish`` print
one line per step on stderr, and stdout keeps only the result.

The expected lines are written out for the tiny example bank (3 cases, built on
DuckDB; docs/examples/tiny-bank) and its CSV twin (tables customers and orders).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from ledger.bank.publish import validate_bank
from ledger.cli import main

TINY = Path(__file__).resolve().parents[2] / "docs" / "examples" / "tiny-bank"

STEPS = [
    "building tiny@v1 on duckdb",
    "freezing gold 1/3",
    "freezing gold 2/3",
    "freezing gold 3/3",
    "leak check",
]


def _cli(ledger: Path, *args: str):  # click.testing.Result
    return CliRunner().invoke(main, ["--ledger", str(ledger), *args], catch_exceptions=False)


def test_validate_prints_each_step_on_stderr(tiny: Path, tmp_path: Path) -> None:
    result = _cli(tmp_path / "ledger.db", "bank", "validate", str(tiny))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [f"reading {tiny}", *STEPS]
    (line,) = result.stdout.splitlines()
    assert line.startswith("ok: tiny@v1 sha256:")
    assert line.endswith(" (3 cases, 5 gold rows)")


def test_publish_prints_the_steps_once(tiny: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "home" / "ledger.db"
    assert _cli(ledger, "init").exit_code == 0
    first = _cli(ledger, "bank", "publish", str(tiny))
    assert first.exit_code == 0, first.output
    assert first.stderr.splitlines() == [f"reading {tiny}", *STEPS]
    assert first.stdout.startswith("published: tiny@v1 sha256:")
    again = _cli(ledger, "bank", "publish", str(tiny))
    assert again.stderr.splitlines() == [f"reading {tiny}"]  # nothing is built again
    assert again.stdout.startswith("already published: tiny@v1 sha256:")


def test_data_files_report_each_table_loaded(tmp_path: Path) -> None:
    folder = tmp_path / "csv"
    shutil.copytree(TINY, folder)
    (folder / "seed.sql").unlink()
    (folder / "data").mkdir()
    (folder / "data" / "customers.csv").write_text(
        "customer_id,name,city\n1,Ann,Shanghai\n3,Chen,\n", encoding="utf-8"
    )
    (folder / "data" / "orders.csv").write_text(
        "order_id,customer_id,ordered_at,status,amount\n"
        "102,1,2026-09-01 00:10:00+08,completed,80.50\n",
        encoding="utf-8",
    )
    lines: list[str] = []
    checked = validate_bank(folder, progress=lines.append)
    assert lines == [
        f"reading {folder}",
        "building tiny@v1 on duckdb",
        "loading table customers",
        "loading table orders",
        *STEPS[1:],
    ]
    # The progress callback changes nothing: the same gold as without one
    # (tiny-02: the one completed September order, 80.50).
    assert validate_bank(folder).fields["gold"] == checked.fields["gold"]
    gold = {g.case_id: g.rows for g in checked.fields["gold"]}
    assert gold["tiny-02"] == (("80.50",),)


def test_a_log_gets_about_ten_lines_of_a_counted_step(tmp_path: Path) -> None:
    """Issue 35: stderr that is not a terminal (a log) gets a counted step at its first
    case, at each further tenth, and at its last, not once per case. retail has 18 cases:
    k * 10 // 18 rises at k = 2, 4, 6, 8, 9, 11, 13, 15, 17 and 18 (worked out by hand)."""
    ledger = tmp_path / "home" / "ledger.db"
    assert _cli(ledger, "init").exit_code == 0
    result = _cli(ledger, "bank", "publish", "retail")
    assert result.exit_code == 0, result.output
    counted = [ln for ln in result.stderr.splitlines() if ln.startswith("freezing gold ")]
    shown = [1, 2, 4, 6, 8, 9, 11, 13, 15, 17, 18]
    assert counted == [f"freezing gold {k}/18" for k in shown]
    assert "leak check" in result.stderr.splitlines()


def test_a_terminal_sees_a_counted_step_redrawn_in_place(tmp_path: Path) -> None:
    """On a terminal (a pseudo-terminal here, a real caseledger process) the counted step
    is click's progress bar, one line redrawn with a carriage return, ended once at its
    last case."""
    import os
    import subprocess
    import sys

    caseledger = Path(sys.executable).parent / "caseledger"
    main_fd, term_fd = os.openpty()
    try:
        done = subprocess.run(
            [str(caseledger), "bank", "validate", "retail"],
            stdout=subprocess.PIPE, stderr=term_fd, cwd=tmp_path, timeout=300, check=False,
        )  # fmt: skip
        os.close(term_fd)
        seen = b""
        while True:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # the terminal's other side is closed: everything was read
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(main_fd)
    assert done.returncode == 0, seen
    text = seen.decode().replace("\r\n", "\n")
    # click's bar (36 cells: two per case of 18), each state drawn over the last one
    # after a carriage return (and the cursor hidden), ended once with the cursor shown.
    hide, show = "\x1b[?25l", "\x1b[?25h"
    first = f"\r{hide}freezing gold  [##{'.' * 34}]  1/18"
    second = f"\r{hide}freezing gold  [####{'.' * 32}]  2/18"
    assert first + second + "\r" in text
    assert f"\r{hide}freezing gold  [{'#' * 36}]  18/18{show}\nleak check\n" in text
    assert text.count("freezing gold") == 18
    assert "2/18\n" not in text
