"""The ``caseledger`` command line: thin click commands (parse, call, print).

Exit codes, the same for every command: 0 done / verified / passed; 1 the
check ran and failed; 2 could not check (usage error, bad input, missing
ledger). Commands of each area live in ``ledger/cli/<area>.py``; the ``main``
group imports an area module only when one of its commands is asked for
(``COMMAND_AREAS`` at the bottom of this file), so ``caseledger run`` does not pay for
the bank builder, calibration or the report builder, and neither does each SQL worker
process (a ``spawn`` child re-runs the ``caseledger`` script, importing this package).

The areas: ``log`` (init, log, verify, checkpoint, prove, keys), ``stores`` (ledger
copy, ledger upgrade), ``bank``, ``run``, ``adapters``, ``report`` (report, runs,
rebuild, rescore), ``withdraw`` (runs withdraw), ``compare``, ``gate`` (gate,
baseline), ``calibrate``, ``demo``, ``export``, ``exchange`` (import run, signers),
``slices`` and ``claims``; ``common`` holds what they share (the resolved global
options, ``exit_with``, the withdrawn-runs note). An area module imports what its
commands need at its top; only ``log`` keeps ``verify --recompute``'s machinery for
that command (tests/test_import_contracts.py says why).

Only this layer reads environment variables and default paths; it passes
explicit values down to the library.
"""

from __future__ import annotations

import errno
import importlib
import os
import signal
import sqlite3
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import click

from ledger import collector
from ledger.bounds import MAX_LOCK_WAIT_S
from ledger.cli.common import DEFAULT_HOME, DEFAULT_LEDGER, Context, exit_with, pass_ctx
from ledger.errors import InternalError, LedgerError, StoreError, UsageError
from ledger.stores import parse_location

__all__ = ["DEFAULT_LEDGER", "Context", "exit_with", "load_all", "main", "pass_ctx"]


# What DuckDB raises (as a plain RuntimeError) when a SIGINT stops a statement.
DUCKDB_INTERRUPTED = "Query interrupted"
INTERRUPTED = "interrupted (Ctrl-C): stopped; nothing half-done was recorded or written"
# The exit status of a command whose stdout reader went away: 128 + SIGPIPE.
BROKEN_PIPE_EXIT = 128 + signal.SIGPIPE
# Set to anything but "" or "0", it does what the global --debug option does.
DEBUG_ENV = "CASELEDGER_DEBUG"
# What the one line of a bug the code did not name says after the exception.
BUG_WHERE = "run it again with --debug for the traceback"


def _fail(line: str, code: int, hint: str | None = None) -> NoReturn:
    click.echo(line, err=True)
    if hint:
        click.echo(f"  hint: {hint}", err=True)
    sys.exit(code)


def _debug_from(environ: Mapping[str, str]) -> bool:
    """Whether ``CASELEDGER_DEBUG`` asks for tracebacks (set, and neither empty nor ``0``)."""
    return environ.get(DEBUG_ENV, "") not in ("", "0")


def _print_traceback(error: BaseException) -> None:
    """The traceback of ``error`` on stderr, as Python would print it (``--debug``)."""
    click.echo("".join(traceback.format_exception(error)).rstrip("\n"), err=True)


def _interrupted() -> NoReturn:
    click.echo(err=True)
    _fail(INTERRUPTED, 2)


def _broken_pipe() -> NoReturn:
    """The reader of our stdout went away (``caseledger log | head``): stop quietly.

    Exit 128 + SIGPIPE (141), what a shell reports for ``seq 1 1000000 | head``'s
    writer, so ``set -o pipefail`` sees it and a gate whose verdict could not be printed
    is never taken for a pass (docs/cli.md "Exit codes").
    """
    _silence_stdout()
    sys.exit(BROKEN_PIPE_EXIT)


def _silence_stdout() -> None:
    # The reader of our stdout went away (``caseledger log | head``): point stdout at
    # /dev/null so the interpreter's final flush does not print a second error.
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (CliRunner): nothing will be flushed to a closed pipe


class _Group(click.Group):
    """The ``caseledger`` group: the one place where errors become exit codes.

    Every command, whichever module defines it, ends in :meth:`main`: a LedgerError
    prints its line and exits with its code; a click usage error prints ``error: ...``
    and a hint (2); Ctrl-C (also the one DuckDB reports as RuntimeError while it runs a
    statement) prints one line (2); a closed stdout pipe (``caseledger log | head``)
    exits quietly with 141, as a program killed by SIGPIPE does (never 0: a check whose
    verdict could not be printed must not read as passed); a path that cannot be read or
    written is "could not check" (2). Anything else is a bug: one line ``internal
    error: <Type>: <message> (this is a caseledger bug; ...)`` and exit 1, its traceback
    printed first under ``--debug`` or ``CASELEDGER_DEBUG=1`` (as is the bug inside an
    InternalError, and the OSError behind a path error). :meth:`invoke` only turns a
    ledger file SQLite cannot read into a StoreError, naming the file it knows.

    Commands are loaded lazily: ``get_command`` imports only the area module that
    ``COMMAND_AREAS`` names for a command (every area for a name it does not know),
    ``list_commands`` (``--help``, completion) imports them all. Each area registers
    once. The import runs inside ``main()``, so a Ctrl-C during it is reported as above.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: set[str] = set()
        self._debug = False

    def load_area(self, area: str) -> None:
        """Import ``ledger/cli/<area>.py`` and register its commands, once."""
        if area not in self._loaded:
            importlib.import_module(f"ledger.cli.{area}").register(self)
            self._loaded.add(area)

    def load_all(self) -> None:
        """Register every area's commands (``--help`` lists them all)."""
        for area in AREAS:
            self.load_area(area)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, importing only the area module that defines it.

        A name the table does not know loads every area before looking again, so a
        command added by an area without a table entry is still found (and click's
        "no such command" lists every real command).
        """
        command = self.commands.get(cmd_name)
        if command is None:
            area = COMMAND_AREAS.get(cmd_name)
            if area is not None:
                self.load_area(area)
                command = self.commands.get(cmd_name)
            if command is None:
                self.load_all()
                command = self.commands.get(cmd_name)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command name, sorted (loads every area first)."""
        self.load_all()
        return super().list_commands(ctx)

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        *,
        standalone_mode: bool = True,
        **kwargs: Any,
    ) -> Any:
        """Run the CLI, mapping every failure to its exit code (the one place).

        Without standalone mode (a program embedding the group) a LedgerError or a
        path error is printed the same way and its exit code returned; anything else
        propagates to the embedding program.
        """
        # --debug is read when the group's options are parsed (make_context); the
        # environment counts from the start, so a bug before that parse shows too.
        self._debug = _debug_from(os.environ)
        collector.tune()  # a caseledger process, not a program embedding the library
        if not standalone_mode:
            try:
                return super().main(args, prog_name, standalone_mode=False, **kwargs)
            except (LedgerError, OSError) as exc:
                return self._report(exc)
        try:
            code = super().main(args, prog_name, standalone_mode=False, **kwargs)
        except click.Abort as exc:
            if isinstance(exc.__context__, EOFError):
                _fail("error: end of input while reading a reply", 2)
            _fail(INTERRUPTED, 2)
        except KeyboardInterrupt:
            _interrupted()
        except click.UsageError as exc:
            try:
                command = (
                    exc.ctx.command_path if exc.ctx is not None else self._path_of(prog_name, args)
                )
            except KeyboardInterrupt:  # while _path_of imported a command module
                _interrupted()
            _fail(f"error: {exc.format_message()}", 2, f"see `{command} --help`")
        except click.ClickException as exc:
            _fail(f"error: {exc.format_message()}", 2)
        except (LedgerError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
                _broken_pipe()
            sys.exit(self._report(exc))
        except Exception as exc:
            # DuckDB turns the Ctrl-C that arrives while it runs a statement in this
            # process (building a bank, freezing gold) into RuntimeError("Query
            # interrupted"); it is the user's Ctrl-C, not a bug.
            if isinstance(exc, RuntimeError) and str(exc) == DUCKDB_INTERRUPTED:
                _interrupted()
            if self._debug:
                _print_traceback(exc)
            _fail(InternalError(exc, where=BUG_WHERE).cli_line(), InternalError.exit_code)
        try:
            sys.stdout.flush()  # what is still buffered meets a closed pipe here, not at exit
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            _broken_pipe()
        sys.exit(code if isinstance(code, int) else 0)

    def _report(self, exc: LedgerError | OSError) -> int:
        """Print an expected failure on stderr and return its exit code.

        A LedgerError prints its line (2 or 1, its own code). An OSError is a path the
        user gave that cannot be read or written (missing folder, permissions): their
        environment, not a bug, so "could not check" (2). Under ``--debug`` the
        traceback of an InternalError's bug, or of the OSError, comes first.
        """
        if isinstance(exc, LedgerError):
            if self._debug and isinstance(exc, InternalError):
                _print_traceback(exc.error)
            click.echo(exc.cli_line(), err=True)
            return exc.exit_code
        if self._debug:
            _print_traceback(exc)
        where = f": {exc.filename}" if exc.filename else ""
        click.echo(f"error: {exc.strerror or exc}{where}", err=True)
        click.echo("  hint: check the path and its permissions", err=True)
        return 2

    def _path_of(self, prog_name: str | None, args: Any) -> str:
        """The command a usage error without a click context belongs to, read from ``args``.

        Click raises "Option '--x' requires an argument." without one; the hint must
        still name ``caseledger run --help``, not the group's.
        """
        words = [prog_name or "caseledger"]
        command: click.Command = self
        rest = iter(sys.argv[1:] if args is None else list(args))
        for arg in rest:
            if not isinstance(command, click.Group):
                break
            if arg == "--ledger":
                next(rest, None)
            elif not arg.startswith("-"):
                # The top group loads the command's module on demand; subgroups are whole.
                sub = (
                    self.get_command(click.Context(self), arg)
                    if command is self
                    else command.commands.get(arg)
                )
                if sub is None:
                    break
                command = sub
                words.append(arg)
        return " ".join(words)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        """Parse the group's own options; ``--help`` / ``--version`` into a closed pipe: 141."""
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            _broken_pipe()
        self._debug = self._debug or bool(ctx.params.get("debug"))
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a ledger SQLite cannot read becomes a StoreError naming it."""
        try:
            return super().invoke(ctx)
        except sqlite3.DatabaseError as exc:
            # SQLite could open the file but not read it as a ledger (no events table,
            # a corrupt page): the check could not be made. Only here is the ledger's
            # name known; main() prints it.
            ledger = ctx.obj.local_path if isinstance(ctx.obj, Context) else "the ledger"
            raise StoreError(
                f"cannot read {ledger} as a caseledger ledger: {exc}",
                hint="check --ledger (or $CASELEDGER_LEDGER); `caseledger verify` checks a ledger",
            ) from exc
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                _broken_pipe()  # handled here: click's own handling of it would exit 1
            raise


@click.group(cls=_Group)
@click.option(
    "--ledger",
    "ledger",
    default=None,
    metavar="FILE|URL",
    help="Ledger file, or postgresql://... URL of a ledger database (default: "
    "$CASELEDGER_LEDGER or .caseledger/ledger.db).",
)
@click.option(
    "--debug",
    is_flag=True,
    help="A caseledger bug prints its traceback, not only its one line (also: CASELEDGER_DEBUG=1).",
)
@click.version_option(package_name="caseledger")
@click.pass_context
def main(ctx: click.Context, ledger: str | None, debug: bool) -> None:
    """caseledger: evaluate text-to-SQL models with signed, hash-chained evidence."""
    del debug  # read by _Group.make_context, which knows it before any command runs
    if not ledger:
        ledger = os.environ.get("CASELEDGER_LEDGER") or str(DEFAULT_LEDGER)
    # Keys and built banks of a ledger on a server live in a local folder (docs/stores.md).
    location = parse_location(ledger)
    if isinstance(location, Path) and location.is_dir():
        raise click.BadParameter(f"File {str(location)!r} is a directory.", param_hint="'--ledger'")
    home = os.environ.get("CASELEDGER_HOME")
    ctx.obj = Context(location, Path(home) if home else DEFAULT_HOME)
    wait = os.environ.get("CASELEDGER_LOCK_WAIT")
    if wait:
        from ledger.store import set_lock_wait

        set_lock_wait(_lock_wait(wait))


def _lock_wait(text: str) -> float:
    """``CASELEDGER_LOCK_WAIT``: seconds a writer waits for the write lock (docs/stores.md)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= MAX_LOCK_WAIT_S:  # also NaN
        raise UsageError(
            f"CASELEDGER_LOCK_WAIT={text!r} is not a number of seconds from 0 to {MAX_LOCK_WAIT_S}",
            hint="set it to how long a writer may wait for the write lock, e.g. 60, or unset it",
        )
    return seconds


# The area modules (ledger/cli/<area>.py), each with a ``register(group)`` function;
# ``adapters`` lists the adapter kinds, built-in and plug-in.
AREAS = (
    "log",
    "bank",
    "run",
    "report",
    "compare",
    "gate",
    "calibrate",
    "demo",
    "export",
    "exchange",
    "slices",
    "claims",
    "stores",
    "adapters",
)

# Which area registers each top-level command: ``caseledger run`` imports
# ledger/cli/run.py and nothing else of the CLI. tests/cli/test_lazy_commands.py checks
# it against what the areas really register.
COMMAND_AREAS: dict[str, str] = {
    "init": "log",
    "log": "log",
    "verify": "log",
    "checkpoint": "log",
    "prove": "log",
    "keys": "log",
    "bank": "bank",
    "run": "run",
    "report": "report",
    "runs": "report",
    "rebuild": "report",
    "rescore": "report",
    "compare": "compare",
    "gate": "gate",
    "baseline": "gate",
    "calibrate": "calibrate",
    "demo": "demo",
    "export": "export",
    "import": "exchange",
    "signers": "exchange",
    "slices": "slices",
    "claims": "claims",
    "ledger": "stores",
    "adapters": "adapters",
}


def load_all() -> dict[str, click.Command]:
    """Every top-level command by name, each area module imported and registered.

    ``main.commands`` alone holds only the commands loaded so far; code that needs
    them all (the docs test, the import-order test) calls this.
    """
    main.load_all()
    return dict(main.commands)
