"""Issue 17, plug-ins: adapters found through the entry-point group ``caseledger.adapters``.

The example plug-in is the one docs/adapters.md shows (both files are read from the
page, so the docs and the test cannot drift). It is built by pip from its folder
(``--no-build-isolation --no-index``: offline, with the setuptools of the test
extras) into a throwaway ``--target`` folder put on PYTHONPATH, and run through the
real CLI on the built-in sales-fixture bank. Its expected scores are worked out by
hand from the bank's seed rows (see ``test_example_plugin_installs_lists_and_runs``).

The registry tests use real package metadata too: ``*.dist-info`` folders written
to a temporary directory and read with ``importlib.metadata.distributions``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from support import REPO

from ledger.adapters import build_adapter
from ledger.adapters.registry import (
    BUILTIN_ADAPTERS,
    ENTRY_POINT_GROUP,
    find_adapters,
    load_entry,
    lookup,
)
from ledger.errors import AdapterError, UsageError

CASELEDGER = [str(Path(sys.executable).parent / "caseledger")]
DOCS = REPO / "docs" / "adapters.md"


# ------------------------------------------------------------------ real metadata


def _dist_info(root: Path, name: str, version: str, entries: dict[str, str]) -> None:
    """A minimal installed distribution: METADATA and entry_points.txt."""
    folder = root / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    folder.joinpath("METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", "utf-8"
    )
    lines = [f"[{ENTRY_POINT_GROUP}]", *(f"{k} = {v}" for k, v in entries.items())]
    folder.joinpath("entry_points.txt").write_text("\n".join(lines) + "\n", "utf-8")


def _scan(root: Path):
    def entry_points() -> list[metadata.EntryPoint]:
        return [
            ep
            for dist in metadata.distributions(path=[str(root)])
            for ep in dist.entry_points
            if ep.group == ENTRY_POINT_GROUP
        ]

    return entry_points


def test_pyproject_declares_exactly_the_builtin_adapters() -> None:
    doc = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    table = doc["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert table == {
        "openai": "ledger.adapters.openai:build",
        "command": "ledger.adapters.command:build",
        "replay": "ledger.adapters.replay:build",
        "reference": "ledger.adapters.reference:build",
        "pi": "ledger.adapters.pi:build",
    }
    assert {k: f"{m}:build" for k, m in BUILTIN_ADAPTERS.items()} == table


def test_installed_metadata_lists_the_builtins_and_each_loads() -> None:
    installed = {
        ep.name: ep.value
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
        if ep.dist is not None and ep.dist.metadata["Name"] == "caseledger"
    }
    assert set(installed) == {"openai", "command", "replay", "reference", "pi"}
    registry = find_adapters()
    for name in installed:
        entry = registry.adapters[name]
        assert entry.builtin
        assert (entry.distribution, entry.module) == ("caseledger", f"ledger.adapters.{name}")
        assert load_entry(entry) is __import__(entry.module, fromlist=["build"]).build


def test_stale_or_missing_metadata_still_finds_every_builtin(tmp_path: Path) -> None:
    # No metadata at all.
    assert set(find_adapters(_scan(tmp_path / "empty")).adapters) == set(BUILTIN_ADAPTERS)
    # caseledger's own metadata from an older checkout: one built-in missing, one gone.
    _dist_info(tmp_path, "caseledger", "0.0.1", {"openai": "ledger.adapters.openai:build",
                                                 "gone": "ledger.adapters.gone:build"})  # fmt: skip
    registry = find_adapters(_scan(tmp_path))
    assert sorted(registry.adapters) == ["command", "openai", "pi", "reference", "replay"]
    assert registry.refused == ()
    assert build_adapter("reference", {}, cases={"a": "SELECT 1"}).identity.adapter_kind == (
        "reference"
    )


def test_a_plugin_may_not_replace_a_builtin_and_duplicates_are_refused(tmp_path: Path) -> None:
    _dist_info(tmp_path, "evil-openai", "2.0", {"openai": "evil:build", "fine": "fine_mod:build"})
    _dist_info(tmp_path, "dup-a", "1.0", {"dup": "dup_a:build"})
    _dist_info(tmp_path, "dup-b", "3.1", {"dup": "dup_b:build"})
    registry = find_adapters(_scan(tmp_path))
    assert registry.adapters["openai"].builtin
    assert registry.adapters["openai"].value == "ledger.adapters.openai:build"
    fine = registry.adapters["fine"]
    assert (fine.distribution, fine.version, fine.module, fine.builtin) == (
        "evil-openai",
        "2.0",
        "fine_mod",
        False,
    )
    assert "dup" not in registry.adapters
    refused = sorted((e.name, e.distribution, why) for e, why in registry.refused)
    assert refused == [
        ("dup", "dup-a", "the name 'dup' is declared by dup-a 1.0, dup-b 3.1"),
        ("dup", "dup-b", "the name 'dup' is declared by dup-a 1.0, dup-b 3.1"),
        ("openai", "evil-openai", "the name 'openai' is a built-in adapter; a plug-in may "
                                  "not replace it"),
    ]  # fmt: skip
    with pytest.raises(UsageError) as err:
        lookup("dup", registry)
    assert err.value.message == (
        "adapter plug-in 'dup' from dup-a 1.0 is refused: the name 'dup' is declared by "
        "dup-a 1.0, dup-b 3.1"
    )
    with pytest.raises(UsageError) as err:
        lookup("nope", registry)
    assert err.value.message == "unknown adapter kind 'nope'"
    assert err.value.hint == "use one of: command, fine, openai, pi, reference, replay"


def test_a_plugin_that_fails_to_load_is_named_with_its_distribution(tmp_path: Path) -> None:
    _dist_info(tmp_path, "broken-plugin", "0.3", {"broken": "no_such_module_xyz:build"})
    entry = find_adapters(_scan(tmp_path)).adapters["broken"]
    with pytest.raises(AdapterError) as err:
        load_entry(entry)
    assert err.value.message == (
        "adapter plug-in 'broken' (no_such_module_xyz:build, from broken-plugin 0.3) failed "
        "to load: ModuleNotFoundError: No module named 'no_such_module_xyz'"
    )
    assert err.value.exit_code == 2
    # An attribute that is not callable.
    _dist_info(tmp_path / "b", "odd", "1", {"odd": "json:__doc__"})
    odd = find_adapters(_scan(tmp_path / "b")).adapters["odd"]
    with pytest.raises(AdapterError) as err:
        load_entry(odd)
    assert err.value.message == (
        "adapter plug-in 'odd' (json:__doc__, from odd 1) is not a build(options, ctx) callable"
    )


# ------------------------------------------------------------------ the docs' example


def _example_files() -> dict[str, str]:
    text = DOCS.read_text("utf-8")
    section = text.split("### A complete example: `caseledger-rules`", 1)[1]
    section = section.split("\n## ", 1)[0]
    toml = re.search(r"`pyproject.toml`:\n\n```toml\n(.*?)```", section, re.S)
    module = re.search(r"`caseledger_rules.py`:\n\n```python\n(.*?)```", section, re.S)
    assert toml is not None, "the example's pyproject.toml block moved"
    assert module is not None, "the example's module block moved"
    return {"pyproject.toml": toml.group(1), "caseledger_rules.py": module.group(1)}


def test_the_docs_example_is_about_40_lines() -> None:
    lines = _example_files()["caseledger_rules.py"].splitlines()
    assert 30 <= len(lines) <= 50


def _install_example(tmp_path: Path) -> Path:
    package = tmp_path / "caseledger-rules"
    package.mkdir()
    for name, text in _example_files().items():
        package.joinpath(name).write_text(text, "utf-8")
    target = tmp_path / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(package),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return target


def _cli(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CASELEDGER, "--ledger", str(home / "ledger.db"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=home.parent,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_example_plugin_installs_lists_and_runs(tmp_path: Path) -> None:
    target = _install_example(tmp_path)
    home = tmp_path / "led"
    home.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    listed = _cli(home, env, "adapters")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert rows[0] == ["NAME", "MODULE", "DISTRIBUTION", "VERSION", "SOURCE"]
    assert ["rules", "caseledger_rules", "caseledger-rules", "0.1.0", "plug-in"] in rows
    assert ["openai", "ledger.adapters.openai", "caseledger", "0.1.0", "built-in"] in rows
    assert len(rows) == 7
    checked = _cli(home, env, "adapters", "--check", "--json")
    assert checked.returncode == 0, checked.stderr
    assert {a["name"] for a in json.loads(checked.stdout)["adapters"]} == {
        "openai", "command", "replay", "reference", "pi", "rules"}  # fmt: skip

    for args in (["init"], ["bank", "publish", "sales-fixture"]):
        done = _cli(home, env, *args)
        assert done.returncode == 0, done.stderr
    run = ["run", "--bank", "sales-fixture", "--adapter", "rules", "--model", "demo-rules"]
    done = _cli(home, env, *run)
    assert done.returncode == 0, done.stderr
    assert "run rules-0001: completed" in done.stdout
    assert "result-correct: 1/7 planned attempts" in done.stdout
    assert "failures: protocol 5" in done.stdout

    report = tmp_path / "report.json"
    done = _cli(home, env, "report", "--format", "json", "-o", str(report))
    assert done.returncode == 0, done.stderr
    (run_doc,) = [r for s in json.loads(report.read_text("utf-8"))["sections"] for r in s["runs"]]
    assert (run_doc["adapter_kind"], run_doc["run_kind"]) == ("rules", "model")
    # By hand, from seed.sql (September 2026 in Asia/Shanghai):
    # sf-01 region 甲, valid: S01 100 + S02 200 + S03 300 = 3 orders, 600.00, as gold: 100.
    # sf-04 the rule forgets valid = 'Y': S01-S04 and S06 = 5 orders, 10100.00 against
    #   gold's 4, 9600.00; one row each, F1 0: protocol 5 + guard 5 + executed 10 +
    #   column count 5 + names 5 + rows 0 + order 0 + AST 15 (no required_ast) = 45.
    # The five others get "No rule for this question.": a protocol failure, 0.
    totals = {c["case"]: c["totals"] for c in run_doc["cases"]}
    assert totals == {
        "sf-01": ["100.00"],
        "sf-02": ["0.00"],
        "sf-03": ["0.00"],
        "sf-04": ["45.00"],
        "sf-05": ["0.00"],
        "sf-06": ["0.00"],
        "sf-07": ["0.00"],
    }
    # Seven cases of weight 1: (100 + 45) / 7 = 20.714... -> 20.71.
    assert run_doc["scores"]["model_score"] == "20.71"
    assert _cli(home, env, "verify").returncode == 0

    # The plug-in's module disappears (a half-uninstalled package): named, exit 2, no trace.
    (target / "caseledger_rules.py").unlink()
    done = _cli(home, env, *run)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        "error: adapter plug-in 'rules' (caseledger_rules:build, from caseledger-rules 0.1.0) "
        "failed to load: ModuleNotFoundError: No module named 'caseledger_rules'"
    )
    assert "Traceback" not in done.stderr
    checked = _cli(home, env, "adapters", "--check")
    assert checked.returncode == 1
    assert "failed to load" in checked.stderr
    # The built-ins still work.
    done = _cli(home, env, "run", "--bank", "sales-fixture", "--adapter", "reference")
    assert done.returncode == 0, done.stderr
    assert "result-correct: 7/7 planned attempts" in done.stdout
