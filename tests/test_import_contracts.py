"""Import contracts (issue 33): the packages form layers, in data-flow order.

Every module under ``ledger/`` and ``projections/`` is parsed (never imported) and
each import of the project's own modules is resolved to the module it names. A
*unit* is a subpackage of ``ledger`` (``ledger.engines``), a top-level ``ledger``
module (``ledger.store``), or ``projections`` as a whole. Three contracts:

1. layer order: a unit imports only units of its own layer or of a layer before it
   (``LAYERS``, lowest first; docs/architecture.md explains each);
2. no cycle between units (in one layer too: the core's modules import each other
   one way);
3. no import of the project's own modules inside a function or method: an import is
   at module level, so the graph above is the whole truth. The one lazy loading of
   the project's modules is the CLI's command loader (``ledger.cli._Group.load_area``),
   which names its area module to ``importlib.import_module`` and is no import
   statement.

Imports under ``if TYPE_CHECKING:`` count like any other: a type a lower layer names
belongs in that layer, and mypy follows these imports as Python follows the rest.

While the layering is being put right, ``KNOWN_UPWARD`` and ``KNOWN_LOCAL`` list the
violations that remain, each with its reason. The lists only shrink: a violation not
on them fails, and so does a listed one that no longer exists (the list stays true).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from runkit import fresh_home
from support import REPO

from ledger.events import RunStarted
from ledger.store import Ledger

ROOTS = ("ledger", "projections")

#: The layers, lowest first. ``core`` is every top-level module of ``ledger`` not named
#: elsewhere (``ledger.verify`` too: it reads only the core, and ``demo`` verifies), and
#: ``ledger.stores``.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("core", frozenset()),
    ("engines", frozenset({"ledger.engines"})),
    ("adapters", frozenset({"ledger.adapters"})),
    ("harness", frozenset({"ledger.harness"})),
    ("bank", frozenset({"ledger.bank"})),
    ("projections", frozenset({"projections"})),
    ("run", frozenset({"ledger.run"})),
    ("calibration", frozenset({"ledger.calibration"})),
    ("app", frozenset({"ledger.app"})),
    ("entry", frozenset({"ledger.cli", "ledger.api"})),
)

#: (importing unit, imported unit) pairs that still point up a layer, with why.
KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()

#: (module, imported module) pairs still imported inside a function, with why.
KNOWN_LOCAL: frozenset[tuple[str, str]] = frozenset(
    {
        # the engine registry imports an engine (and its driver) only when it is asked for
        ("ledger.engines", "ledger.engines.duckdb"),
        ("ledger.engines", "ledger.engines.postgres"),
        ("ledger.engines", "ledger.engines.sqlite"),
        # psycopg is imported only for a ledger on a server
        ("ledger.store", "ledger.stores.postgres"),
        ("ledger.cli.log", "ledger.stores.postgres"),
        # ``caseledger run`` does not import calibration unless a run asks for variants
        # (tests/cli/test_lazy_commands.py)
        ("ledger.app.evaluate", "ledger.calibration.diagnostics"),
        # ``import ledger.cli`` (every command, every SQL worker) loads no msgspec or
        # cryptography: the store only when CASELEDGER_LOCK_WAIT is set
        # (tests/cli/test_lazy_commands.py, HEAVY)
        ("ledger.cli", "ledger.store"),
        # init, log, verify, checkpoint, prove and keys do not import the bank builder,
        # the projections (DuckDB, sqlglot: ~0.45 s measured) unless ``verify --recompute``
        # asks for them
        ("ledger.cli.log", "ledger.app.rescore"),
    }
)


def _module_files() -> dict[str, Path]:
    """Dotted name -> file of every module and package under the roots."""
    found: dict[str, Path] = {}
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _module_files()


def unit(module: str) -> str:
    """The unit a module belongs to (see the module docstring)."""
    parts = module.split(".")
    if parts[0] == "projections":
        return "projections"
    if len(parts) == 1:
        return module
    if len(parts) > 2 or f"{module}.__init__" in _PACKAGES:
        return ".".join(parts[:2])
    return module


_PACKAGES = {f"{name}.__init__" for name, path in MODULES.items() if path.name == "__init__.py"}


def layer(of_unit: str) -> int:
    """The index in ``LAYERS`` of a unit's layer."""
    for number, (_, units) in enumerate(LAYERS):
        if of_unit in units:
            return number
    return 0


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The project's modules one import statement names (a package's module when
    ``from package import module``, else the package or module itself)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in MODULES]
    if node.level:
        base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    out = []
    for alias in node.names:
        name = f"{source}.{alias.name}"
        if name in MODULES:
            out.append(name)
        elif source in MODULES:
            out.append(source)
    return out


def _imports() -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    """(module -> modules it imports at module level, {(module, module imported in a
    function)}) over every module of the roots."""
    top: dict[str, set[str]] = defaultdict(set)
    local: set[tuple[str, str]] = set()
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text("utf-8"), str(path))
        in_function: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                in_function.update(id(sub) for sub in ast.walk(node))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(module, path, node):
                if target == module:
                    continue
                if id(node) in in_function:
                    local.add((module, target))
                else:
                    top[module].add(target)
    return top, local


TOP, LOCAL = _imports()


def unit_graph() -> dict[str, set[str]]:
    """unit -> the other units it imports at module level."""
    graph: dict[str, set[str]] = defaultdict(set)
    for module, targets in TOP.items():
        for target in targets:
            if unit(module) != unit(target):
                graph[unit(module)].add(unit(target))
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_layer_names_existing_units() -> None:
    units = {unit(m) for m in MODULES}
    for name, members in LAYERS:
        assert members <= units, (name, members - units)


def test_units_import_only_their_layer_or_below() -> None:
    upward = {(a, b) for a, targets in unit_graph().items() for b in targets if layer(b) > layer(a)}
    new = sorted(upward - KNOWN_UPWARD)
    gone = sorted(KNOWN_UPWARD - upward)
    assert new == [], "imports pointing up a layer"
    assert gone == [], "no longer imported: remove from KNOWN_UPWARD"


def test_no_cycle_between_units() -> None:
    graph = unit_graph()
    for a, b in KNOWN_UPWARD:  # each is reported above; a cycle without them is not
        graph[a].discard(b)
    assert _cycles(graph) == []


def test_no_function_local_import_of_own_modules() -> None:
    new = sorted(LOCAL - KNOWN_LOCAL)
    gone = sorted(KNOWN_LOCAL - LOCAL)
    assert new == [], "import these at module level"
    assert gone == [], "no longer imported in a function: remove from KNOWN_LOCAL"


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        ("ledger", "ledger"),
        ("ledger.store", "ledger.store"),
        ("ledger.stores.sqlite", "ledger.stores"),
        ("ledger.stores", "ledger.stores"),
        ("ledger.engines.duckdb", "ledger.engines"),
        ("projections.report.build", "projections"),
        ("ledger.cli", "ledger.cli"),
    ],
)
def test_unit_of_a_module(module: str, expected: str) -> None:
    assert unit(module) == expected


def test_a_cycle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_a_sql_worker_that_only_executes_loads_no_parser(tmp_path: Path) -> None:
    """Issue 34: the engines are data and processes, the parser is the harness's. A SQL
    worker imports its engine's modules and, only at its first request to read a text,
    the harness's reader: importing every module of ``ledger.engines`` but ``transpile``
    (a DuckDB bank's SQL rewritten for another engine when it is published: sqlglot's
    work, never a worker's) in a fresh interpreter leaves sqlglot unloaded, and no
    worker module imports ``transpile``."""
    engines = sorted(
        f"ledger.engines.{p.stem}"
        for p in (REPO / "ledger" / "engines").glob("*.py")
        if p.stem != "transpile"
    )
    code = (
        "import importlib, sys\n"
        f"for name in {engines!r}:\n"
        "    importlib.import_module(name)\n"
        "loaded = {m.split('.')[0] for m in sys.modules} & {'sqlglot', 'yaml', 'click'}\n"
        "print(sorted(loaded), 'ledger.engines.transpile' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert len(engines) >= 15
    assert done.stdout.strip() == "[] False"


def test_a_run_loads_no_engine_or_http_module_it_does_not_use(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """Issue 34: a run's own process starts its SQL workers and calls its adapter; it
    executes nothing itself and a reference run calls no server, so it never imports
    DuckDB (its workers do) nor ``http.client`` and ``ssl`` (the OpenAI adapter's, at its
    first call). The run's versions are read from the installed distributions. (With
    variant diagnostics the run builds its variant databases itself: DuckDB then.)"""
    home = fresh_home(tmp_path_factory, tmp_path)
    code = (
        "import sys\n"
        "from ledger.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit as stop:\n"
        "    assert stop.code == 0, stop.code\n"
        "loaded = {m.split('.')[0] for m in sys.modules} & {'duckdb', '_duckdb', 'ssl', 'http'}\n"
        "print('loaded:', sorted(loaded))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--ledger", str(home / "ledger.db"), "run", "--bank",
         "sales-fixture", "--adapter", "reference", "--attempts", "1", "--no-variants",
         "--run-id", "lean"],
        capture_output=True, text=True, check=True, cwd=home.parent,
    )  # fmt: skip
    assert done.stdout.strip().splitlines()[-1] == "loaded: []"
    with Ledger.open(home / "ledger.db", readonly=True) as ledger:
        started = ledger.stream_events("lean")[0].event()
    assert isinstance(started, RunStarted)
    assert started.versions.duckdb == "1.5.5"  # the pinned DuckDB, as it was imported
