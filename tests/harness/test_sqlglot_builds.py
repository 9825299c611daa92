"""The compiled sqlglot and the pure one read every corpus text the same (issue 34).

caseledger depends on sqlglotc (sqlglot's own mypyc build, installed over the pure
modules) where its wheels exist and on pure sqlglot elsewhere, so a verdict must not
depend on which build a machine has. This test reads every SQL text of the corpus of
tests/harness/test_sqlparse_copy.py (the built-in banks, the traps, the guard corpora,
the throughput workload) in each engine's dialect, against a reference text, twice:
in a process that imports the installed (compiled) build and in one that imports a
pure copy of the same sqlglot version (the installed package without its compiled
modules, put first on ``PYTHONPATH``). The guard's verdict, every violation's check
and message, the AST digest, the AST rules and the structural match must be the same
JSON, byte for byte.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_sqlparse_copy import CORPUS

# Run in a child process: reads texts.json, prints which build it imported and, for each
# text and engine, the reading as judge_sql and the scorer's two calls give it.
_PROBE = r"""
import json, sys
import msgspec
import sqlglot.parser
from ledger.harness import ast_rules, limits

texts = json.load(open(sys.argv[1]))
rules = tuple(sorted(ast_rules.KNOWN_RULES))
tables = ("customers", "order_items", "orders", "products", "sales", "stores", "visits")
out = {"parser": sqlglot.parser.__file__.rsplit(".", 1)[-1], "readings": []}
for engine, dialect in (("duckdb", "duckdb"), ("sqlite", "sqlite"), ("postgres", "postgres")):
    for n, sql in enumerate(texts):
        reference = texts[n - 1] if n % 3 else "  " + sql.replace("select", "SELECT") + "  "
        judged = limits.judge_sql(sql, tables, rules=rules, reference_sql=reference,
                                  limits=limits.DEFAULT_LIMITS, spent_ns=lambda: 0,
                                  engine=engine)
        try:
            match = ast_rules.structural_match(sql, reference, dialect)
        except RecursionError:
            match = "recursion"
        try:
            found = ast_rules.check_rules(sql, rules, dialect) if judged.passed else None
        except RecursionError:
            found = "recursion"
        out["readings"].append(msgspec.to_builtins(
            [engine, n, judged.passed, judged.violations, judged.ast_digest, match, found]))
sys.stdout.write(json.dumps(out, sort_keys=True))
"""


def _read_all(texts: Path, pythonpath: list[str]) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(pythonpath))
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(texts)],
        capture_output=True, text=True, check=False, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout)
    return result


def _pure_copy(into: Path) -> Path:
    """The installed sqlglot package without its compiled modules (the pure build)."""
    import sqlglot

    source = Path(sqlglot.__file__).parent
    shutil.copytree(
        source, into / "sqlglot", ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__")
    )
    return into


@pytest.mark.slow
def test_compiled_and_pure_sqlglot_give_the_same_verdicts_checks_and_digests(
    tmp_path: Path,
) -> None:
    # The compiled build is installed here (pyproject.toml pins it where wheels exist,
    # which includes every machine CI runs on), with the pure build's exact version.
    assert importlib.metadata.version("sqlglotc") == importlib.metadata.version("sqlglot")
    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps(CORPUS), encoding="utf-8")
    tests_dirs = [str(Path(__file__).parent.parent)]
    compiled = _read_all(texts, tests_dirs)
    pure = _read_all(texts, [str(_pure_copy(tmp_path / "pure")), *tests_dirs])
    # Each process imported the build it was meant to (a compiled module is a .so/.pyd).
    assert compiled["parser"] in ("so", "pyd")
    assert pure["parser"] == "py"
    readings = compiled["readings"]
    assert isinstance(readings, list)
    assert len(readings) == 3 * len(CORPUS) > 900
    # Not a corpus that all fails or all passes: both sides of the guard were compared.
    passed = sum(1 for r in readings if r[2] is True)
    assert 0 < passed < len(readings)
    for mine, theirs in zip(readings, pure["readings"], strict=True):
        assert mine == theirs, f"{mine[0]} text {mine[1]}: {CORPUS[mine[1]]!r}"
