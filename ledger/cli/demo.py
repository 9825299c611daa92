"""``caseledger demo``: the main job on the built-in default."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from shlex import quote
from typing import Any

import click

from ledger.app.demo import DEMO_FILES, REPORT_FORMATS, run_demo
from ledger.app.output import output_folder
from ledger.cli.common import program_name
from ledger.errors import UsageError

__all__ = ["register", "report_commands"]


def report_commands(
    ledger_path: Path, out_dir: Path, tree_size: int, program: str = "caseledger"
) -> list[str]:
    """The exact commands that rebuild the demo's reports byte for byte.

    ``program`` is how the user types caseledger (``common.program_name``).
    """
    return [
        f"{program} --ledger {quote(str(ledger_path))} report --at-size {tree_size} "
        f"--format {fmt} | cmp - {quote(str(out_dir / ('report.' + fmt)))}"
        for fmt in REPORT_FORMATS
    ]


def _activation_hint(program: str) -> str | None:
    """A line saying how to get plain ``caseledger``, when the hints spell out a path."""
    if program == "caseledger":
        return None
    activate = Path(program).parent / "activate"
    if activate.is_file():
        return (
            f"The commands below start caseledger as {program}; after "
            f"`. {quote(str(activate))}` plain `caseledger` works too."
        )
    return None


def _move_into_place(work: Path, out_dir: Path) -> None:
    """Move the finished demo from ``work`` to ``out_dir`` (Ctrl-C held off meanwhile)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        if not out_dir.exists() or (out_dir.is_dir() and not any(out_dir.iterdir())):
            os.replace(work, out_dir)
            return
        # A folder with other files (or a demo replaced with --force): entry by entry.
        for stale in ("ledger.db-wal", "ledger.db-shm"):
            (out_dir / stale).unlink(missing_ok=True)
        for entry in sorted(work.iterdir()):
            target = out_dir / entry.name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            os.replace(entry, target)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@click.command("demo")
@click.option(
    "-o",
    "--output",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("caseledger-demo"),
    show_default=True,
    help="Folder for the demo's ledger, checkpoint and reports.",
)
@click.option("--force", is_flag=True, help="Replace a demo already in the folder.")
def demo(out_dir: Path, force: bool) -> None:
    """Publish the built-in banks, run the self-test and three recorded models, report."""
    output_folder(out_dir)
    present = [name for name in DEMO_FILES if (out_dir / name).exists()]
    if present and not force:
        raise UsageError(
            f"{out_dir} already holds a demo ({', '.join(present)})",
            hint="pass --force to replace it, or -o another folder",
        )
    # Built in a hidden folder beside the target and moved into place only when
    # complete: Ctrl-C or an error leaves no half-built demo (nor a changed old one).
    parent = out_dir.absolute().parent
    if not parent.exists():
        parent.mkdir(parents=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".partial", dir=parent))
    try:
        result = run_demo(
            work,
            force=True,
            echo=lambda line: click.echo(line, err=True),
        )
        _move_into_place(work, out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ledger_path = out_dir / "ledger.db"
    click.echo("")
    click.echo(f"The demo is in {out_dir}/:")
    for name, what in (
        ("ledger.db", "the signed, hash-chained event log (every prompt, answer, SQL, score)"),
        ("checkpoint.note", f"a signed tree head over the first {result.checkpoint_size} events"),
        ("report.html", "open this first: models, radar per dimension, every case run"),
        ("report.md", "the same report as Markdown"),
        ("report.json", "the canonical report; the other two are rendered from it"),
    ):
        click.echo(f"  {name:<16} {what}")
    click.echo("")
    # A fresh shell after the README's `.venv/bin/caseledger demo` has no `caseledger`
    # on PATH: the hints spell the program the way it was started.
    program = program_name(sys.argv[0], cwd=Path.cwd(), search_path=os.environ.get("PATH"))
    if (activation := _activation_hint(program)) is not None:
        click.echo(activation)
    click.echo("Check it yourself:")
    click.echo(
        f"  {program} --ledger {quote(str(ledger_path))} verify "
        f"--checkpoint {quote(str(out_dir / 'checkpoint.note'))}"
    )
    click.echo("Rebuild the reports and compare them byte for byte (cmp is silent if equal):")
    for line in report_commands(ledger_path, out_dir, result.report_size, program):
        click.echo(f"  {line}")
    click.echo("What to look at: harbor-coder-14b's joins-02 (a join that doubles rows),")
    click.echo("northwind-sql-pro's basic-02 attempt 2 (a date endpoint off by one),")
    click.echo("lumen-mini's provider failures, and the fairness line of the summary.")


def register(group: Any) -> None:
    """Add ``demo`` to the CLI."""
    group.add_command(demo)
