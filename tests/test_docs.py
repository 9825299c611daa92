"""The docs cover the code: every CLI command in docs/cli.md, every event tag in docs/events.md.

docs/cli.md and ``--help`` are checked both ways: every option a command's ``--help``
lists is named in that command's section of the page, and every option a section's
heading names is one the command has (the global options likewise).
"""

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
CLI_MD = (DOCS / "cli.md").read_text("utf-8")
# A command's heading: ### `caseledger bank show NAME[@VERSION] [--json] ...`
HEADING = re.compile(r"^### `caseledger ([^`]+)`$", re.MULTILINE)
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    for word in path:
        assert isinstance(command, click.Group)
        command = command.commands[word]
    return command


def _listed_options(command: click.Command) -> list[list[str]]:
    """The names of each option ``--help`` lists for ``command`` (hidden ones it does not)."""
    ctx = click.Context(command, info_name=command.name)
    return [
        [*p.opts, *p.secondary_opts]
        for p in command.get_params(ctx)
        if isinstance(p, click.Option) and p.get_help_record(ctx) and "--help" not in p.opts
    ]


def _sections() -> dict[tuple[str, ...], list[tuple[str, str]]]:
    """command path -> [(heading, section text)] of docs/cli.md, a section running to the
    next heading of level 1 to 3. A heading belongs to the longest command path its words
    start with (``verify --recompute [--banks DIR]`` is ``verify``'s)."""
    ends = [m.start() for m in re.finditer(r"^#{1,3} ", CLI_MD, re.MULTILINE)] + [len(CLI_MD)]
    out: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for match in HEADING.finditer(CLI_MD):
        words = tuple(match[1].split())
        path = next((words[:n] for n in range(len(words), 0, -1) if words[:n] in COMMANDS), ())
        end = min(e for e in ends if e > match.start())
        out.setdefault(path, []).append((match[1], CLI_MD[match.start() : end]))
    return out


SECTIONS = _sections()


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


def test_every_heading_names_a_command() -> None:
    assert SECTIONS.get(()) is None, [h for h, _ in SECTIONS[()]]
    # a heading the parser must read (the gate section is whole: one heading, one text)
    assert [h.split()[0] for h, _ in SECTIONS[("gate",)]] == ["gate"]
    assert "`gate: PASS|REGRESSION|COULD NOT JUDGE" in SECTIONS[("gate",)][0][1]


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p))
def test_every_option_help_lists_is_in_the_commands_section(path: tuple[str, ...]) -> None:
    options = _listed_options(_command(path))
    if not options:
        return  # a group such as `bank`: its commands have the sections
    assert path in SECTIONS, f"docs/cli.md has no ### `caseledger {' '.join(path)} ...` heading"
    text = "".join(body for _, body in SECTIONS[path])
    named = set(OPTION.findall(text))
    missing = [names for names in options if not named & set(names)]
    assert missing == [], f"docs/cli.md's section of {' '.join(path)} does not name {missing}"


@pytest.mark.parametrize(
    ("path", "heading"),
    [(path, h) for path, found in SECTIONS.items() for h, _ in found],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_option_a_heading_names_exists(path: tuple[str, ...], heading: str) -> None:
    known = {name for names in _listed_options(_command(path)) for name in names}
    unknown = [o for o in OPTION.findall(heading) if o not in known]
    assert unknown == [], f"`caseledger {heading}`: {' '.join(path)} has no {unknown}"


def test_global_options_and_the_page_agree() -> None:
    # The list under "Global options come before the command:", up to the next heading.
    start = CLI_MD.index("Global options come before the command:")
    block = CLI_MD[start : CLI_MD.index("\n## ", start)]
    documented = {o for line in block.splitlines() if line.startswith("- ") for o in
                  OPTION.findall(line.split(":")[0])}  # fmt: skip
    listed = {name for names in _listed_options(main) for name in names}
    assert documented == listed | {"--help"}
    assert {"--ledger", "--debug", "--version"} <= listed
