"""The docs cover the code: every CLI command in docs/cli.md, every event tag in docs/events.md."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner
from support import REPO

from ledger import events
from ledger.cli import load_all, main

DOCS = REPO / "docs"


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        path = (*prefix, name)
        out.append(path)
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, path))
    return out


load_all()  # main.commands holds only the areas loaded so far (lazy loading)
COMMANDS = _commands(main)


def test_there_are_commands() -> None:
    top = {c[0] for c in COMMANDS}
    assert {"init", "verify", "bank", "run", "demo"} <= top


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p))
def test_every_command_is_documented_and_has_help(path: tuple[str, ...]) -> None:
    text = (DOCS / "cli.md").read_text("utf-8")
    assert f"caseledger {' '.join(path)}" in text, f"docs/cli.md does not mention {path}"
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


@pytest.mark.parametrize("cls", events.EVENT_TYPES, ids=lambda c: c.__name__)
def test_every_event_tag_is_documented(cls: type) -> None:
    text = (DOCS / "events.md").read_text("utf-8")
    assert f"`{events.tag_of(cls)}`" in text


def test_readme_starts_with_the_two_commands() -> None:
    lines = (REPO / "README.md").read_text("utf-8").splitlines()
    block = lines[lines.index("```sh") + 1 : lines.index("```sh") + 3]
    assert block[0].endswith("caseledger demo")
    assert "pytest" in block[1]
    assert re.search(r"pip install -e '\.\[test\]'", block[1])
