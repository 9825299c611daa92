"""What every command module shares: the resolved global options and the way to exit.

Kept apart from ``ledger/cli/__init__.py`` (the group and the one mapping of
errors to exit codes) so the area modules (``ledger/cli/<area>.py``) and the group
import it without importing each other.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
from pathlib import Path
from typing import NoReturn

import click

from ledger.errors import UsageError
from ledger.stores import Location, redact

__all__ = [
    "DEFAULT_HOME",
    "DEFAULT_LEDGER",
    "Context",
    "exit_with",
    "pass_ctx",
    "program_name",
    "read_small_text",
    "withdrawn_note",
]

DEFAULT_HOME = Path(".caseledger")
DEFAULT_LEDGER = DEFAULT_HOME / "ledger.db"


class Context:
    """What the global options resolved to.

    ``ledger`` is a file (SQLite) or a ``postgresql://`` URL (docs/stores.md). Keys,
    built bank databases and caches always live in a local folder, ``home``: beside a
    ledger file, and for a ledger on a server ``$CASELEDGER_HOME`` or else
    ``.caseledger`` in the working directory.
    """

    def __init__(self, ledger: Location, server_home: Path = DEFAULT_HOME) -> None:
        self.ledger = ledger
        self._server_home = server_home

    @property
    def ledger_path(self) -> Path:
        """The ledger file, for the commands that only work on a file (UsageError otherwise)."""
        if isinstance(self.ledger, Path):
            return self.ledger
        raise UsageError(
            f"this command needs a ledger file; {redact(self.ledger)} is a database",
            hint="copy the ledger into a file first: caseledger ledger copy URL FILE.db",
        )

    @property
    def ledger_name(self) -> str:
        """How output names the ledger: the path, or the URL without its password."""
        return str(self.ledger) if isinstance(self.ledger, Path) else redact(self.ledger)

    @property
    def local_path(self) -> Path:
        """The ledger file, or the home folder for a ledger on a server (a private path)."""
        return self.ledger if isinstance(self.ledger, Path) else self.home

    @property
    def home(self) -> Path:
        """The local folder that holds keys, built databases and caches (see the class doc)."""
        return self.ledger.parent if isinstance(self.ledger, Path) else self._server_home


pass_ctx = click.make_pass_decorator(Context)


def exit_with(code: int) -> NoReturn:
    """End the command with ``code`` (the one way a command exits early or with 1).

    The group (``ledger.cli``) turns it into the process's exit status, as it does
    for every error it maps.
    """
    raise click.exceptions.Exit(code)


def program_name(argv0: str, *, cwd: Path, search_path: str | None) -> str:
    """How to type ``caseledger`` again in a fresh shell in ``cwd``, for printed hints.

    The README installs into ``.venv`` and runs ``.venv/bin/caseledger demo``: a new
    shell has no ``caseledger`` on its PATH, so a hint saying ``caseledger ...`` would
    not run. ``argv0`` is the running console script (``sys.argv[0]``); the result is
    ``caseledger`` when that name on ``search_path`` is this very program (or when we
    were not started as the console script), else the script's path relative to
    ``cwd`` (``.venv/bin/caseledger``), else its absolute path. Only for text shown
    to the user: never put it into an event or a report (they must not name paths).
    """
    script = Path(argv0)
    if script.name != "caseledger":
        return "caseledger"  # python -m, a test runner: the documented name
    script = script if script.is_absolute() else cwd / script
    found = shutil.which("caseledger", path=search_path)
    with contextlib.suppress(OSError):
        if found is not None and os.path.samefile(found, script):
            return "caseledger"
    try:
        shown = script.relative_to(cwd)
    except ValueError:
        return shlex.quote(str(script))
    return shlex.quote(str(shown)) if shown.parent != Path() else shlex.quote(f"./{shown}")


def read_small_text(path: Path, what: str, limit: int) -> str:
    """A small UTF-8 file (a checkpoint note, a key file) read no further than ``limit``
    bytes, so ``/dev/zero`` or a huge file is refused at once (exit 2) instead of read."""
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise UsageError(
                f"cannot read {what} {path}: longer than {limit:,} bytes "
                "(not a checkpoint note or key file)",
                hint=f"a {what} is a few hundred bytes: pass the file caseledger wrote",
            )
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {what} {path}: {exc}") from None


def withdrawn_note(left_out: list[tuple[str, str]]) -> str:
    """The one line that says which withdrawn runs a listing left out.

    >>> withdrawn_note([("r1", "wrong port")])
    'note: 1 withdrawn run left out: r1 (wrong port); --include-withdrawn shows it'
    """
    n = len(left_out)
    runs = ", ".join(f"{run} ({reason})" for run, reason in left_out)
    them = "it" if n == 1 else "them"
    return (
        f"note: {n} withdrawn run{'s' if n != 1 else ''} left out: {runs}; "
        f"--include-withdrawn shows {them}"
    )
