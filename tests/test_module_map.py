"""The map stays true: every module of ``ledger/`` and ``projections/`` is on the map.

docs/architecture.md draws the tree one line per module (a package is ``name/``, a
module ``name.py``, each followed by what it does), and each package's ``__init__.py``
docstring names its modules and subpackages. A module added without a line in both
fails here, and so does a line naming a module that is gone.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support import REPO

ROOTS = ("ledger", "projections")
ENTRY = re.compile(r"^(?P<indent> *)(?P<name>[A-Za-z_]\w*(?:\.py|/))(?: {2,}(?P<what>\S.*))?$")


def _packages() -> list[Path]:
    """Every importable package under the roots (a folder with ``__init__.py``)."""
    inits = [init for root in ROOTS for init in (REPO / root).rglob("__init__.py")]
    return sorted(init.parent.relative_to(REPO) for init in inits)


def _children(package: Path) -> list[str]:
    """The modules (``name.py``) and subpackages (``name/``) directly in ``package``."""
    out = []
    for path in sorted((REPO / package).iterdir()):
        if path.suffix == ".py" and path.name != "__init__.py":
            out.append(path.name)
        elif (path / "__init__.py").is_file():
            out.append(f"{path.name}/")
    return out


def _modules() -> set[str]:
    """``ledger/bank/`` and ``ledger/bank/source.py`` style paths of every package and module."""
    found = {f"{p.as_posix()}/" for p in _packages()}
    for package in _packages():
        found |= {f"{package.as_posix()}/{c}" for c in _children(package) if c.endswith(".py")}
    return found


def _tree() -> list[tuple[str, str]]:
    """(path, description) of each line of the tree in docs/architecture.md, in order.

    Every line of the block is one entry; its indent (two spaces a level) says which
    folder it is in. A line that is not one entry (two names, a wrapped description)
    fails: the map is one line per module.
    """
    text = (REPO / "docs" / "architecture.md").read_text("utf-8")
    start = text.index("```\nledger/ ") + len("```\n")
    block = text[start : text.index("```", start)].splitlines()
    entries: list[tuple[str, str]] = []
    folders: list[str] = []
    for number, line in enumerate(block, 1):
        match = ENTRY.match(line)
        assert match, f"tree line {number} is not one module and what it does: {line!r}"
        depth, rest = divmod(len(match["indent"]), 2)
        assert rest == 0, f"tree line {number} is not indented by two spaces a level: {line!r}"
        assert depth <= len(folders), f"tree line {number} is deeper than its folder: {line!r}"
        del folders[depth:]
        path = "".join(folders) + match["name"]
        entries.append((path, match["what"] or ""))
        if path.endswith("/"):
            folders.append(match["name"])
    return entries


def test_the_tree_is_read_as_paths() -> None:
    tree = dict(_tree())
    assert tree["ledger/harness/guard.py"] == "static decision: may this SQL run?"
    assert tree["projections/report/schema.py"].startswith("THE report schema")
    assert "ledger/cli/__init__.py" in tree


def test_every_module_has_one_line_with_what_it_does() -> None:
    entries = _tree()
    paths = [p for p, _ in entries]
    assert len(paths) == len(set(paths)), "a module is named twice in the tree"
    missing = sorted(_modules() - set(paths))
    assert missing == [], f"docs/architecture.md does not name {missing}"
    assert [p for p, what in entries if not what] == []


def test_every_line_names_a_real_module_or_data_folder() -> None:
    # Package data (banks/, demo/) are folders without Python; __init__.py may have its
    # own line where the package's __init__ holds more than imports.
    gone = [p for p, _ in _tree() if not (REPO / p).exists()]
    assert gone == []


@pytest.mark.parametrize("package", _packages(), ids=lambda p: p.as_posix())
def test_each_package_docstring_lists_its_modules(package: Path) -> None:
    source = (REPO / package / "__init__.py").read_text("utf-8")
    doc = ast.get_docstring(ast.parse(source)) or ""
    dotted = ".".join(package.parts)
    unnamed = [
        child
        for child in _children(package)
        if not re.search(
            rf"``(?:{re.escape(dotted)}\.)?{re.escape(child.removesuffix('.py').rstrip('/'))}/?``",
            doc,
        )
    ]
    assert unnamed == [], f"{package}/__init__.py's docstring does not name {unnamed}"


#: Issue 33: no module of the roots is over this many lines, but the declarative ones.
MAX_LINES = 800
DECLARATIVE = frozenset({"ledger/events.py", "projections/report/schema.py"})


def test_no_module_is_over_800_lines_but_the_declarative_ones() -> None:
    sizes = {
        str(path.relative_to(REPO)): len(path.read_text("utf-8").splitlines())
        for root in ROOTS
        for path in (REPO / root).rglob("*.py")
    }
    assert all(name in sizes for name in DECLARATIVE)  # the exceptions still exist
    over = {name: n for name, n in sizes.items() if n > MAX_LINES and name not in DECLARATIVE}
    assert over == {}
