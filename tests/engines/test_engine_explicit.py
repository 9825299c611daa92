"""Issue 31: the engine is explicit. A bank published on two engines is not run on the one
published last: ``run --bank NAME`` is refused (exit 2) with the publications listed,
``--engine E`` (or ``NAME@VERSION --engine E``) selects one, and the run's progress
lines and summary name the engine. Real CLI processes, real DuckDB and SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest
from runkit import cli
from support import TINY


@pytest.mark.slow
def test_a_bank_on_two_engines_needs_the_engine_named(tmp_path: Path) -> None:
    home = tmp_path / "led"
    home.mkdir()
    assert cli(home, "init").returncode == 0
    # The tiny bank's three cases give the same gold on DuckDB and SQLite.
    for extra in ([], ["--engine", "sqlite"]):
        done = cli(home, "bank", "publish", str(TINY), *extra)
        assert done.returncode == 0, done.stderr

    refused = cli(home, "run", "--bank", "tiny", "--adapter", "reference", "--run-id", "r0")
    assert refused.returncode == 2
    assert (
        "bank 'tiny' is published on more than one engine (duckdb, sqlite): "
        "tiny@v1 --engine duckdb; tiny@v1 --engine sqlite"
    ) in refused.stderr
    assert "--bank NAME@VERSION --engine E, or --engine E" in refused.stderr
    assert "Traceback" not in refused.stderr
    # Nothing ran.
    assert "run.started" not in cli(home, "log").stdout
    # With a version but no engine: still two publications.
    refused = cli(home, "run", "--bank", "tiny@v1", "--adapter", "reference", "--run-id", "r0")
    assert refused.returncode == 2
    assert "published on more than one engine" in refused.stderr

    on_lite = cli(home, "run", "--bank", "tiny", "--engine", "sqlite", "--adapter", "reference",
                  "--run-id", "r1")  # fmt: skip
    assert on_lite.returncode == 0, on_lite.stderr
    assert on_lite.stdout.splitlines()[:2] == ["run r1: completed", "  bank: tiny@v1 on sqlite"]
    assert "result-correct: 3/3 planned attempts" in on_lite.stdout
    # Progress lines (stderr is not a terminal here: plain lines) name the engine.
    assert "starting the SQL workers on sqlite, 0/3 attempts" in on_lite.stderr
    assert "3/3 attempts on sqlite, 3 correct, 0 wrong, 0 failed" in on_lite.stderr

    on_duck = cli(home, "run", "--bank", "tiny@v1", "--engine", "duckdb", "--adapter",
                  "reference", "--run-id", "r2")  # fmt: skip
    assert on_duck.returncode == 0, on_duck.stderr
    assert "  bank: tiny@v1 on duckdb" in on_duck.stdout.splitlines()
    assert "3/3 attempts on duckdb, 3 correct" in on_duck.stderr
    # The NAME:ENGINE spelling selects too.
    suffix = cli(home, "run", "--bank", "tiny:sqlite", "--adapter", "reference", "--run-id", "r3")
    assert suffix.returncode == 0, suffix.stderr
    assert "  bank: tiny@v1 on sqlite" in suffix.stdout.splitlines()

    missing = cli(home, "run", "--bank", "tiny", "--engine", "postgres", "--adapter", "reference",
                  "--run-id", "r4")  # fmt: skip
    assert missing.returncode == 2
    assert "no published bank 'tiny --engine postgres'" in missing.stderr


@pytest.mark.slow
def test_a_bank_on_one_engine_runs_without_naming_it(tmp_path: Path) -> None:
    home = tmp_path / "led"
    home.mkdir()
    assert cli(home, "init").returncode == 0
    assert cli(home, "bank", "publish", str(TINY), "--engine", "sqlite").returncode == 0
    done = cli(home, "run", "--bank", "tiny", "--adapter", "reference", "--run-id", "r")
    assert done.returncode == 0, done.stderr
    assert "  bank: tiny@v1 on sqlite" in done.stdout.splitlines()
