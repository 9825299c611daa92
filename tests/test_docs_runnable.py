"""The command examples in docs/ that are marked runnable run as written (issue 20).

A block is runnable when the line ``<!-- runnable -->`` (invisible once rendered)
comes right before its ```` ```sh ```` fence. Each page's runnable blocks run in
order, as one user would type them, with ``bash -euo pipefail`` and the
installed ``caseledger`` on PATH (an activated venv), in a fresh folder:

* docs/quickstart.md starts from an empty folder (it makes its own demo);
* every other page starts from a folder holding a fresh demo, as
  ``./caseledger-demo/`` and as the default ledger ``./.caseledger/`` (ledger,
  operator key and bank files), so ``caseledger rescore`` and the like work on it.

Every block must exit 0. The demo itself is started as the README starts it
(``.venv/bin/caseledger demo`` with nothing on PATH), and the commands it prints
must run, as printed, in that fresh shell.

A runnable block may be followed by the output it prints: the line
``<!-- output -->`` right before a ```` ``` ```` fence after it (issue 35). The
block's stdout must then be those lines, one for one; ``…`` in a line stands for
any text within that line (a hash, a time). So a page cannot show output the
program no longer prints.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import REPO, made_once

from ledger.harness.score import SCORERS

DOCS = REPO / "docs"
MARKER = "<!-- runnable -->"
OUTPUT = "<!-- output -->"
VENV_BIN = Path(sys.executable).parent
# Clean of anything that would point a command at another ledger or server.
UNSET = ("CASELEDGER_LEDGER", "CASELEDGER_HOME", "CASELEDGER_PG_DSN", "CASELEDGER_PI")


@dataclass(frozen=True)
class Block:
    """One runnable ```sh block: its page, the line of its fence, its text."""

    doc: str
    line: int
    text: str
    #: The output the page shows after it (``<!-- output -->``), or None.
    expected: str | None = None


def runnable_blocks(path: Path) -> list[Block]:
    """The runnable blocks of one page, in order (a marker before anything else fails)."""
    lines = path.read_text("utf-8").splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = i + 1
        following = lines[fence] if fence < len(lines) else ""
        assert following == "```sh", f"{path.name}:{i + 1}: {MARKER} must precede a ```sh fence"
        end = lines.index("```", fence + 1)
        blocks.append(
            Block(
                path.name,
                fence + 1,
                "\n".join(lines[fence + 1 : end]) + "\n",
                _shown_output(path, lines, end + 1),
            )
        )
    return blocks


def _shown_output(path: Path, lines: list[str], start: int) -> str | None:
    """The ``<!-- output -->`` block after line ``start`` (blank lines between), or None."""
    at = start
    while at < len(lines) and not lines[at].strip():
        at += 1
    if at >= len(lines) or lines[at].strip() != OUTPUT:
        return None
    assert lines[at + 1].startswith("```"), f"{path.name}:{at + 1}: {OUTPUT} must precede a fence"
    end = lines.index("```", at + 2)
    return "\n".join(lines[at + 2 : end]) + "\n"


def output_matches(shown: str, printed: str) -> bool:
    """Whether ``printed`` is the ``shown`` output, line for line, ``…`` matching any text
    within its line.

    >>> output_matches("a …\nb\n", "a sha256:ff\nb\n"), output_matches("a\n", "a\nb\n")
    (True, False)
    """
    want, got = shown.splitlines(), printed.splitlines()
    if len(want) != len(got):
        return False
    for w, g in zip(want, got, strict=True):
        pattern = ".*?".join(re.escape(part) for part in w.split("…"))
        if re.fullmatch(pattern, g) is None:
            return False
    return True


PAGES = {p.name: runnable_blocks(p) for p in sorted(DOCS.glob("*.md"))}


def _path_without_venv() -> str:
    """PATH of a fresh shell: the venv that runs the tests is not on it."""
    parts = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(p for p in parts if p and Path(p) != VENV_BIN)


def _env(*, activated: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    plain = _path_without_venv()
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{plain}" if activated else plain
    return env


def _bash(script: str, cwd: Path, *, activated: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=_env(activated=activated),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


# ----------------------------------------------------------------- fast checks


def test_the_quickstart_is_runnable_from_the_demo_on() -> None:
    blocks = PAGES["quickstart.md"]
    assert len(blocks) >= 3
    assert blocks[0].text.startswith("caseledger demo ")
    assert any("caseledger run --bank retail --adapter reference" in b.text for b in blocks)


def test_scorer_examples_name_a_shipped_version() -> None:
    # `--scorer 2.1.0` examples did not run: there is no such version.
    for path in sorted(DOCS.glob("*.md")):
        for version in re.findall(r"--scorer (\d+\.\d+\.\d+)\b", path.read_text("utf-8")):
            assert version in SCORERS, f"{path.name}: --scorer {version} is not a scorer version"


def test_shown_outputs_are_read_and_matched() -> None:
    # The slices page shows what `caseledger slices` prints, checked by the run below.
    (block,) = [b for b in PAGES["slices.md"] if b.expected is not None]
    assert block.text.startswith("caseledger --ledger caseledger-demo/ledger.db slices")
    assert block.expected.startswith("run demo-harbor-coder-14b (retail@v4, scorer ")
    assert output_matches("x …, y\n", "x 1, 2, y\n")
    assert not output_matches("x …, y\n", "x 1, 2, z\n")
    assert not output_matches("x\n", "x\ny\n")


def test_no_variants_is_documented() -> None:
    text = (DOCS / "cli.md").read_text("utf-8")
    assert re.search(r"^\| `--no-variants` \| skip the variant diagnostics", text, re.MULTILINE)


# ----------------------------------------------------------------- running them


@pytest.fixture(scope="session")
def readme_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``.venv/bin/caseledger demo`` as the README runs it: a fresh shell, no PATH entry.
    Made once per test session (tests/support.made_once) and only read: each test copies
    what it runs commands in."""

    def build(home: Path) -> None:
        (home / ".venv").symlink_to(VENV_BIN.parent, target_is_directory=True)
        done = _bash(".venv/bin/caseledger demo", home, activated=False)
        assert done.returncode == 0, done.stderr
        (home / "stdout.txt").write_text(done.stdout, "utf-8")

    home = made_once(tmp_path_factory, "readme", build)
    return home, (home / "stdout.txt").read_text("utf-8")


@pytest.mark.slow
def test_the_demo_prints_commands_that_run_in_a_fresh_shell(
    readme_demo: tuple[Path, str], tmp_path: Path
) -> None:
    made, printed = readme_demo
    home = tmp_path / "home"  # a copy: the commands may write beside the ledger
    home.mkdir()
    (home / ".venv").symlink_to(VENV_BIN.parent, target_is_directory=True)
    shutil.copytree(made / "caseledger-demo", home / "caseledger-demo")
    assert _bash("command -v caseledger || true", home, activated=False).stdout == ""
    assert (
        "The commands below start caseledger as .venv/bin/caseledger; after "
        "`. .venv/bin/activate` plain `caseledger` works too."
    ) in printed
    commands = [ln.strip() for ln in printed.splitlines() if ln.startswith("  .venv/bin/")]
    assert len(commands) == 4  # verify, and the three report rebuilds
    assert commands[0] == (
        ".venv/bin/caseledger --ledger caseledger-demo/ledger.db verify "
        "--checkpoint caseledger-demo/checkpoint.note"
    )
    for command in commands:
        done = _bash(command, home, activated=False)
        assert done.returncode == 0, (command, done.stderr)
        if "| cmp -" in command:
            assert done.stdout == ""  # byte for byte the published report


@pytest.mark.slow
@pytest.mark.parametrize("page", [page for page, blocks in PAGES.items() if blocks])
def test_runnable_doc_commands_exit_0(
    readme_demo: tuple[Path, str], tmp_path: Path, page: str
) -> None:
    # One test per page (issue 33: two test workers share the pages), each on its own
    # copies of the README's demo.
    demo = readme_demo[0] / "caseledger-demo"
    failures = []
    work = tmp_path / page.removesuffix(".md")
    work.mkdir()
    if page != "quickstart.md":
        shutil.copytree(demo, work / "caseledger-demo")
        shutil.copytree(demo, work / ".caseledger")
    for block in PAGES[page]:
        done = _bash(block.text, work, activated=True)
        if done.returncode != 0:
            failures.append(
                f"docs/{page}:{block.line}: exit {done.returncode}\n{block.text}"
                f"{done.stderr[-2000:]}"
            )
            break  # the page's later blocks build on this one
        if block.expected is not None and not output_matches(block.expected, done.stdout):
            failures.append(
                f"docs/{page}:{block.line}: the page shows\n{block.expected}"
                f"the program printed\n{done.stdout}"
            )
    assert failures == [], "\n\n".join(failures)


def test_every_page_with_commands_is_run() -> None:
    # The parametrisation above runs every page that has runnable blocks: at least the
    # quickstart and the slices page (whose shown output is matched).
    pages = [page for page, blocks in PAGES.items() if blocks]
    assert {"quickstart.md", "slices.md"} <= set(pages)
