"""Lazy command loading (issue 21): ``import ledger.cli`` imports no command module.

``caseledger run`` imports ledger/cli/run.py and nothing else of the CLI, and the SQL
workers it starts (``spawn`` children, which re-run the ``caseledger`` script as
``__mp_main__``) import neither the bank builder, calibration nor the projections.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest

import ledger.cli as cli_package
from ledger.cli import AREAS, COMMAND_AREAS, INTERRUPTED, load_all, main

CLI = str(Path(sys.executable).with_name("caseledger"))


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


# ------------------------------------------------------------------ the table


def _registered_by(area: str) -> set[str]:
    group = click.Group()
    importlib.import_module(f"ledger.cli.{area}").register(group)
    return set(group.commands)


def test_the_table_is_what_the_areas_register() -> None:
    # Registered the old, eager way, one area at a time on a group of its own.
    eager = {name: area for area in AREAS for name in _registered_by(area)}
    assert eager == COMMAND_AREAS
    assert set(load_all()) == set(COMMAND_AREAS)


def test_every_command_module_with_register_is_an_area() -> None:
    # A new ledger/cli/<area>.py with a register() that AREAS forgot would never load.
    modules = [m.name for m in pkgutil.iter_modules(cli_package.__path__)]
    with_register = {
        m for m in modules if hasattr(importlib.import_module(f"ledger.cli.{m}"), "register")
    }
    assert with_register == set(AREAS)
    assert len(AREAS) == len(set(AREAS)) == 14


def test_the_table_by_hand() -> None:
    # Read from docs/cli.md and the register() functions, not from the table.
    assert sorted(COMMAND_AREAS) == [
        "adapters", "bank", "baseline", "calibrate", "checkpoint", "claims", "compare", "demo",
        "export", "gate", "import", "init", "keys", "ledger", "log", "prove",
        "rebuild", "report", "rescore", "run", "runs", "signers", "slices", "verify",
    ]  # fmt: skip
    assert (COMMAND_AREAS["init"], COMMAND_AREAS["import"], COMMAND_AREAS["ledger"]) == (
        "log",
        "exchange",
        "stores",
    )
    assert COMMAND_AREAS["signers"] == "exchange"


# ------------------------------------------------------------------ what gets imported

LIGHT = [
    "ledger", "ledger.bounds", "ledger.cli", "ledger.cli.common", "ledger.collector",
    "ledger.errors", "ledger.stores",
]  # fmt: skip
HEAVY = ["duckdb", "sqlglot", "cryptography", "msgspec", "ledger.bank", "projections"]


def test_importing_the_cli_imports_no_command_module() -> None:
    done = _python(
        f"""
        import sys
        import ledger.cli
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("ledger", "projections")))
        print([m for m in {HEAVY!r} if m in sys.modules])
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [repr(LIGHT), "[]"]


@pytest.mark.parametrize(
    ("words", "modules"),
    [
        (["run"], ["run"]),
        (["init"], ["log"]),
        (["import"], ["exchange"]),
        # ledger/cli/report.py imports the withdraw command it puts under ``runs``.
        (["runs", "withdraw"], ["report", "withdraw"]),
    ],
)
def test_a_command_imports_only_its_area(words: list[str], modules: list[str]) -> None:
    done = _python(
        f"""
        import sys
        from ledger.cli import main
        try:
            main({[*words, "--help"]!r}, prog_name="caseledger")
        except SystemExit as exc:
            assert exc.code == 0, exc.code
        areas = {{m.split(".")[2] for m in sys.modules if m.startswith("ledger.cli.")}}
        print(sorted(areas - {{"common"}}))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: caseledger {' '.join(words)} [OPTIONS]")
    assert done.stdout.splitlines()[-1] == repr(modules)


def test_an_unknown_name_loads_every_area_and_suggests() -> None:
    done = subprocess.run([CLI, "rn"], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "error: No such command 'rn'. (Did you mean one of: 'run', 'runs'?)\n"
        "  hint: see `caseledger --help`\n"
    )


@pytest.mark.parametrize("globals_", [[], ["--debug"], ["--ledger", "x.db", "--debug"]])
def test_the_usage_hint_names_a_lazily_loaded_command(globals_: list[str]) -> None:
    # Click raises "requires an argument" without a context: the hint path is read from
    # the arguments (global options skipped), through the lazy lookup.
    done = subprocess.run(
        [CLI, *globals_, "run", "--attempts"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert done.stderr == (
        "error: Option '--attempts' requires an argument.\n  hint: see `caseledger run --help`\n"
    )


def test_each_area_registers_once(monkeypatch: pytest.MonkeyPatch) -> None:
    load_all()

    def again(group: click.Group) -> None:
        raise AssertionError(f"registered a second time on {group.name}")

    for area in AREAS:
        monkeypatch.setattr(f"ledger.cli.{area}.register", again)
    ctx = click.Context(main)
    for name in COMMAND_AREAS:
        assert main.get_command(ctx, name) is not None
    assert main.list_commands(ctx) == sorted(COMMAND_AREAS)
    assert main.get_command(ctx, "no-such-command") is None
    assert sorted(load_all()) == sorted(COMMAND_AREAS)


def test_ctrl_c_while_a_command_module_is_imported() -> None:
    # A real SIGINT, sent by the import system when it is asked for ledger/cli/run.py
    # (keyed on the module's name): the lazy import is inside main() now.
    done = _python(
        """
        import os, signal, sys

        class CtrlC:
            def find_spec(self, name, path=None, target=None):
                if name == "ledger.cli.run":
                    os.kill(os.getpid(), signal.SIGINT)
                return None

        sys.meta_path.insert(0, CtrlC())
        from ledger.cli import main
        main(["run", "--help"], prog_name="caseledger")
        """
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == INTERRUPTED


# ------------------------------------------------------------------ the SQL workers

# Loaded through PYTHONPATH by every process of the run: a spawn child writes the
# modules it holds when its target starts (after re-running the caseledger script as
# __mp_main__ and unpickling its target), PID.txt, and when its target returns (the
# worker saw its pipe close), PID.end.txt.
SITECUSTOMIZE = """
import os
import sys

_OUT = os.environ.get("LAZY_CLI_MODULES_DIR")
if _OUT:
    import multiprocessing.process

    _run = multiprocessing.process.BaseProcess.run

    def _run_and_record(self):
        with open(os.path.join(_OUT, f"{os.getpid()}.txt"), "w", encoding="utf-8") as f:
            f.write("\\n".join(sorted(sys.modules)))
        try:
            _run(self)
        finally:
            with open(os.path.join(_OUT, f"{os.getpid()}.end.txt"), "w", encoding="utf-8") as f:
                f.write("\\n".join(sorted(sys.modules)))

    multiprocessing.process.BaseProcess.run = _run_and_record
"""


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger with the sales-fixture bank (7 cases) published."""
    ledger = tmp_path_factory.mktemp("lazy") / "ledger.db"
    for args in (["init"], ["bank", "publish", "sales-fixture"]):
        done = subprocess.run(
            [CLI, "--ledger", str(ledger), *args], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
    return ledger


@pytest.mark.slow
def test_the_sql_workers_of_a_run_import_no_command_module(published: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, "utf-8")
    out = tmp_path / "modules"
    out.mkdir()
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "LAZY_CLI_MODULES_DIR": str(out)}
    args = ["run", "--bank", "sales-fixture", "--adapter", "reference", "--no-variants"]
    done = subprocess.run(
        [CLI, "--ledger", str(published), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # The run itself is unchanged: the reference answers the 7 cases of sales-fixture
    # (sf-01 .. sf-07 in its cases.yaml), each right, one attempt each.
    assert done.stdout.splitlines() == [
        "run reference-0001: completed",
        "  bank: sales-fixture@v1 on duckdb",  # the engine, named (issue 31)
        "  attempts: 7 planned, 7 done (7 correct, 0 wrong, 0 failed)",
        "  result-correct: 7/7 planned attempts (rate 1.0000)",
        "  format-ok: 7/7 planned attempts (rate 1.0000)",
        "  score (weighted): 100.00",
        "  failures: none",
        f"  report: caseledger --ledger {published} report --run reference-0001 --format md",
    ]
    started = sorted(out.glob("*[0-9].txt"))
    assert started, "no SQL worker started"
    # A worker the parent had to kill at close (2 s grace) writes no end record; each
    # one that ended is checked too (what its work imported later).
    for record in [*started, *sorted(out.glob("*.end.txt"))]:
        modules = set(record.read_text("utf-8").split("\n"))
        # The child did re-run the caseledger script, which imported the CLI package.
        assert {"__mp_main__", "ledger.cli", "ledger.cli.common"} <= modules
        assert sorted(m for m in modules if m.startswith("ledger.cli")) == [
            "ledger.cli",
            "ledger.cli.common",
        ], record
        for package in ("ledger.bank", "ledger.calibration", "projections", "ledger.app"):
            held = [m for m in modules if m == package or m.startswith(package + ".")]
            assert held == [], (record, package)
