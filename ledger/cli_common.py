"""What every command module shares: the resolved global options and error mapping.

Kept apart from ``ledger/cli.py`` so an area module (``ledger/cli_<area>.py``)
can be imported on its own without importing the group that registers it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ledger.errors import LedgerError

__all__ = ["DEFAULT_LEDGER", "Context", "handle_errors", "pass_ctx", "write_atomic"]

DEFAULT_LEDGER = Path(".caseledger") / "ledger.db"
F = TypeVar("F", bound=Callable[..., Any])


class Context:
    """What the global options resolved to."""

    def __init__(self, ledger_path: Path) -> None:
        self.ledger_path = ledger_path

    @property
    def home(self) -> Path:
        """The folder beside the ledger that holds keys, built databases and caches."""
        return self.ledger_path.parent


pass_ctx = click.make_pass_decorator(Context)


def handle_errors(func: F) -> F:
    """Turn a LedgerError into its message on stderr and its exit code (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except LedgerError as exc:
            click.echo(exc.cli_line(), err=True)
            sys.exit(exc.exit_code)

    return wrapper  # type: ignore[return-value]


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
