"""What every command module shares: the resolved global options and the way to exit.

Kept apart from ``ledger/cli/__init__.py`` (the group and the one mapping of
errors to exit codes) so the area modules (``ledger/cli/<area>.py``) and the group
import it without importing each other.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import NoReturn

import click

__all__ = ["DEFAULT_LEDGER", "Context", "exit_with", "pass_ctx", "write_atomic"]

DEFAULT_LEDGER = Path(".caseledger") / "ledger.db"


class Context:
    """What the global options resolved to."""

    def __init__(self, ledger_path: Path) -> None:
        self.ledger_path = ledger_path

    @property
    def home(self) -> Path:
        """The folder beside the ledger that holds keys, built databases and caches."""
        return self.ledger_path.parent


pass_ctx = click.make_pass_decorator(Context)


def exit_with(code: int) -> NoReturn:
    """End the command with ``code`` (the one way a command exits early or with 1).

    The group (``ledger.cli``) turns it into the process's exit status, as it does
    for every error it maps.
    """
    raise click.exceptions.Exit(code)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file renamed into place.

    Ctrl-C or a full disk leaves either the old file or the whole new one, never a
    half-written one. An error names ``path`` (not the temporary file).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
