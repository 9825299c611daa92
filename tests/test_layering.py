"""The read side stays pure: projections import nothing that does I/O or reads the clock."""

from __future__ import annotations

import ast

import pytest
from support import REPO

FORBIDDEN = {
    "duckdb",
    "sqlite3",
    "sqlite_utils",
    "click",
    "os",
    "time",
    "random",
    "socket",
    "subprocess",
    "urllib",
    "http",
    "ledger.store",
    "ledger.adapters",
    "ledger.engines.duckdb_worker",
    "ledger.run",
}
FILES = sorted((REPO / "projections").rglob("*.py"))


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_projection_module_imports_no_io(path) -> None:
    imported = _imports(ast.parse(path.read_text("utf-8")))
    bad = {
        name for name in imported if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
    }
    assert not bad, f"{path.name} imports {sorted(bad)}"


def test_there_are_projection_modules() -> None:
    assert len(FILES) >= 5
