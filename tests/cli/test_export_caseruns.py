"""``caseledger export caseruns`` (issue 20): CaseRuns with scores and items as a flat table.

A small real ledger: sales-fixture (7 cases, in bank order sf-01..sf-07) with the
reference self-test (every answer is the case's own reference SQL: 100 points each)
and a replay whose only recording is a provider timeout for sf-01 (scored 0 with
failure kind ``provider``; the six cases without a recording are cancelled as
``missing_recording``). The file is read back with DuckDB and checked against values
worked out from docs/scoring.md, not from the exporter.
"""

from __future__ import annotations

import json
import re
import shutil
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st
from support import REPO

from ledger.app.snapshot import read_state
from ledger.cli import main
from ledger.store import Ledger
from projections.caseruns_table import COLUMNS, ITEM_COLUMNS, caserun_rows

CASES = [f"sf-0{n}" for n in range(1, 8)]
# docs/scoring.md: protocol 5, guard 5, executed 10, column count 5, column names 5,
# rows 45, order 10, AST 15 (no required_ast) -> 100.
FULL_ITEMS = (5, 5, 10, 5, 5, 45, 10, 15)


def cli(ledger: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--ledger", str(ledger), *args])


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("caseruns")
    path = home / "ledger.db"
    replay = home / "timeout.jsonl"
    replay.write_text(
        '{"case": "sf-01", "attempt": 1, "error": {"kind": "timeout", "message": "no answer"}}\n',
        "utf-8",
    )
    for args in (
        ["init"],
        ["bank", "publish", "sales-fixture"],
        ["run", "--bank", "sales-fixture", "--adapter", "reference", "--run-id", "ref",
         "--no-variants"],
        ["run", "--bank", "sales-fixture", "--adapter", "replay", "--replay-file", str(replay),
         "--run-id", "rp", "--no-variants"],
    ):  # fmt: skip
        done = cli(path, *args)
        assert done.exit_code == 0, done.output
    return path


def read(file: Path, fmt: str) -> tuple[list[str], list[dict[str, object]]]:
    """Column names and rows of the written file, read back by DuckDB."""
    query = {"parquet": "SELECT * FROM read_parquet(?)", "csv": "SELECT * FROM read_csv(?)"}
    with duckdb.connect() as db:
        cursor = db.execute(query[fmt], [str(file)])
        names = [d[0] for d in cursor.description]
        return names, [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def test_the_reference_run_as_parquet_scores_100_everywhere(ledger: Path, tmp_path: Path) -> None:
    out = tmp_path / "ref.parquet"
    done = cli(ledger, "export", "caseruns", "-o", str(out), "--run", "ref")
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith(f"wrote {out}: 7 CaseRuns of 1 run as parquet (tree size ")
    names, rows = read(out, "parquet")
    assert names == [name for name, _, _ in COLUMNS]
    assert [(r["run"], r["case_id"], r["attempt"]) for r in rows] == [
        ("ref", case, 1) for case in CASES
    ]
    for r in rows:
        assert r["outcome"] == "scored"
        assert r["total"] == Decimal("100.00")
        assert tuple(r[c] for c in ITEM_COLUMNS) == FULL_ITEMS
        assert (r["result_correct"], r["format_ok"], r["failure_kind"]) == (True, True, "none")
        assert (r["precision"], r["recall"], r["f1"]) == (1.0, 1.0, 1.0)
        assert r["matched"] == r["expected_rows"] == r["actual_rows"]
        assert r["bank"] == "sales-fixture@v1"
        assert (r["adapter"], r["run_kind"], r["scorer_version"]) == (
            "reference",
            "self_test",
            "2.0.0",
        )
        assert r["cancel_reason"] is None
    # score_seq names the ScoreComputed of that very case and attempt
    log = cli(ledger, "log", "--run", "ref", "--type", "score.computed", "--json").stdout
    scores = {json.loads(line)["event"]["case_id"]: json.loads(line)["seq"] for line in
              log.splitlines()}  # fmt: skip
    assert {r["case_id"]: r["score_seq"] for r in rows} == scores


def test_all_runs_as_csv_with_a_provider_failure_and_missing_recordings(
    ledger: Path, tmp_path: Path
) -> None:
    out = tmp_path / "all.csv"
    done = cli(ledger, "export", "caseruns", "-o", str(out))
    assert done.exit_code == 0, done.output
    assert "14 CaseRuns of 2 runs as csv" in done.stdout
    header = out.read_text("utf-8").splitlines()[0]
    assert header == ",".join(name for name, _, _ in COLUMNS)
    _, rows = read(out, "csv")
    # runs by id ("ref" < "rp"), then bank order
    assert [(r["run"], r["case_id"]) for r in rows] == [("ref", c) for c in CASES] + [
        ("rp", c) for c in CASES
    ]
    timeout = rows[7]
    assert (timeout["outcome"], timeout["failure_kind"], timeout["result_correct"]) == (
        "scored",
        "provider",
        None,
    )
    assert timeout["total"] == 0  # docs/scoring.md: a provider failure keeps no item: 0
    assert [timeout[c] for c in ITEM_COLUMNS] == [0] * 8
    assert timeout["sql"] is None
    for r in rows[8:]:
        assert (r["outcome"], r["cancel_reason"]) == ("cancelled", "missing_recording")
        assert r["total"] is None
        assert r["score_seq"] is None
        assert all(r[c] is None for c in ITEM_COLUMNS)


def test_the_same_ledger_gives_the_same_bytes(ledger: Path, tmp_path: Path) -> None:
    for fmt in ("parquet", "csv"):
        one, two = tmp_path / f"1.{fmt}", tmp_path / f"2.{fmt}"
        for out in (one, two):
            assert cli(ledger, "export", "caseruns", "-o", str(out)).exit_code == 0
        assert one.read_bytes() == two.read_bytes()


def test_format_from_the_option_over_the_suffix(ledger: Path, tmp_path: Path) -> None:
    out = tmp_path / "rows.data"
    done = cli(ledger, "export", "caseruns", "--format", "csv", "-o", str(out), "--run", "rp")
    assert done.exit_code == 0, done.output
    assert len(out.read_text("utf-8").splitlines()) == 1 + 7


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--run", "nope"], "error: no run 'nope' in the first "),
        (["-o", "x.txt"], "error: cannot tell the format of "),
        (["-o", "no-such-folder/x.csv"], "error: cannot write no-such-folder/x.csv: there is no "
         "folder no-such-folder"),
    ],
)  # fmt: skip
def test_what_cannot_be_exported_exits_2(
    ledger: Path, tmp_path: Path, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    command = ["export", "caseruns", *args]
    if "-o" not in args:
        command += ["-o", "x.csv"]
    done = cli(ledger, *command)
    assert done.exit_code == 2
    assert done.stderr.startswith(message), done.stderr
    assert "Traceback" not in done.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written, no temp file


def test_docs_list_the_columns_in_order() -> None:
    text = (REPO / "docs" / "cli.md").read_text("utf-8")
    start = text.index("### `caseledger export caseruns")
    table = re.findall(r"^\| `([a-z_0-9]+)` \| ([A-Z0-9(),]+) \| (.+) \|$",
                       text[start:], flags=re.MULTILINE)  # fmt: skip
    assert [tuple(row) for row in table[: len(COLUMNS)]] == [tuple(c) for c in COLUMNS]


@settings(max_examples=20, deadline=None)
@given(chosen=st.lists(st.sampled_from(["ref", "rp"]), min_size=1, max_size=4))
def test_rows_of_some_runs_are_those_runs_rows_of_all(ledger: Path, chosen: list[str]) -> None:
    # Any --run selection (repeats, any order) gives exactly the rows of those runs,
    # in the order of the whole table.
    with Ledger.open(ledger, readonly=True) as opened:
        everything = caserun_rows(read_state(opened).state)
        some = caserun_rows(read_state(opened, runs=chosen).state, chosen)
    assert some == [row for row in everything if row["run"] in set(chosen)]


def test_a_withdrawn_run_is_left_out_unless_asked_for(ledger: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(ledger.parent, copy)
    path = copy / "ledger.db"
    done = cli(path, "runs", "withdraw", "rp", "--reason", "wrong recording")
    assert done.exit_code == 0, done.output
    out = tmp_path / "left.csv"
    done = cli(path, "export", "caseruns", "-o", str(out))
    assert done.exit_code == 0, done.output
    assert "7 CaseRuns of 1 run as csv" in done.stdout
    assert done.stderr == (
        "note: 1 withdrawn run left out: rp (wrong recording); --include-withdrawn shows it\n"
    )
    _, rows = read(out, "csv")
    assert {r["run"] for r in rows} == {"ref"}
    assert {r["withdrawn"] for r in rows} == {None}
    # shown on request, each row saying why
    done = cli(path, "export", "caseruns", "-o", str(out), "--include-withdrawn")
    assert (done.exit_code, done.stderr) == (0, "")
    _, rows = read(out, "csv")
    assert [(r["run"], r["withdrawn"]) for r in rows] == [("ref", None)] * 7 + [
        ("rp", "wrong recording")
    ] * 7
    # named without --include-withdrawn: refused, nothing written
    named = tmp_path / "named.csv"
    done = cli(path, "export", "caseruns", "-o", str(named), "--run", "rp")
    assert done.exit_code == 2
    assert done.stderr.startswith("error: run rp is withdrawn (reason: wrong recording)\n")
    assert not named.exists()
