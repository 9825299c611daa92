"""Where a command's ``-o`` goes: standard output, a device in place, a regular file atomically.

The one helper for every command that writes a file (docs/cli.md "Output files"):

- ``-o -`` writes to standard output, the same bytes ``-o FILE`` writes;
- ``-o`` onto something that exists and is not a regular file (``/dev/null``, a
  character device, a FIFO) writes into it in place: it is opened and written,
  never unlinked or renamed over (as root, a rename would replace the machine's
  ``/dev/null`` with a regular file);
- a regular file, or a new one, is written under a temporary name beside it and
  renamed into place when complete: Ctrl-C or a full disk leaves the old file or
  the whole new one, never half of one. An existing file keeps its permissions.
  A symbolic link stays a link: the file it points to is the one replaced;
- a folder is refused (exit 2), nothing written.

A command that writes a folder (``demo -o``, ``baseline freeze -o``, ``bank import
-o``, ``export audit -o``) calls :func:`output_folder` first: a ``-o`` that exists
and is not a folder (a file, ``/dev/null``) is refused before any work.

An error writing names the path the user gave, not the temporary file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from ledger.errors import UsageError

__all__ = ["STDOUT", "is_stdout", "open_output", "output_file", "output_folder", "write_output"]

#: The ``-o`` value that means standard output.
STDOUT = Path("-")


def is_stdout(target: Path) -> bool:
    """Whether ``target`` is ``-`` (standard output)."""
    return str(target) == "-"


def _in_place(target: Path) -> os.stat_result | None:
    """The status of ``target`` when it must be written in place (not a regular file).

    None for a regular file or a path that does not exist yet (both are written
    atomically). A folder is refused.
    """
    try:
        st = target.stat()  # follows a symbolic link: what it points to decides
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, str(target)) from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(
            f"cannot write {target}: it is a folder",
            hint="pass a file name to -o (or - for standard output)",
        )
    return None if stat.S_ISREG(st.st_mode) else st


@contextlib.contextmanager
def _atomic(target: Path) -> Iterator[Path]:
    """A temporary name beside the regular (or new) file ``target``, renamed onto it at
    the end of the block; removed after an error."""
    real = Path(os.path.realpath(target))  # a link stays a link; its file is replaced
    tmp = real.with_name(f".{real.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(real.stat().st_mode))
        os.replace(tmp, real)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise type(exc)(exc.errno, exc.strerror, str(target)) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def open_output(target: Path) -> Iterator[BinaryIO]:
    """A binary file to write the output of ``-o target`` into (see the module doc).

    The output is in place when the block ends without an error; after an error a
    regular file is left as it was (a device or standard output has what was written).
    """
    if is_stdout(target):
        sys.stdout.flush()  # text already printed comes first
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    if _in_place(target) is not None:
        # Opened for writing, never replaced: a character device or a FIFO stays one.
        try:
            with target.open("wb") as device:
                yield device
        except OSError as exc:
            raise type(exc)(exc.errno, exc.strerror, str(target)) from None
        return
    with _atomic(target) as tmp, tmp.open("wb") as f:
        yield f


def write_output(target: Path, chunks: Iterable[bytes]) -> None:
    """Write the bytes ``chunks`` give to ``-o target``, a piece at a time (module doc)."""
    with open_output(target) as out:
        for piece in chunks:
            out.write(piece)


@contextlib.contextmanager
def output_file(target: Path) -> Iterator[Path]:
    """A file name for a writer that needs one (DuckDB's ``COPY ... TO``), for ``-o target``.

    For a regular or new file it is the temporary name beside ``target``, renamed into
    place at the end; for standard output or a device it is a scratch file whose bytes
    are then written through :func:`open_output`.
    """
    if is_stdout(target) or _in_place(target) is not None:
        with tempfile.TemporaryDirectory(prefix="caseledger-out-") as scratch:
            tmp = Path(scratch) / "output"
            yield tmp
            with tmp.open("rb") as src, open_output(target) as dst:
                shutil.copyfileobj(src, dst)
        return
    with _atomic(target) as tmp:
        yield tmp


def output_folder(target: Path) -> None:
    """Refuse (exit 2, before any work) a ``-o`` folder that exists and is not a folder.

    A device or a file there would only be found out after the work, as an error of
    the last step (``Not a directory: DIR/ledger.db-wal``); it is never replaced.
    """
    if target.exists() and not target.is_dir():
        raise UsageError(
            f"cannot write into {target}: it is not a folder",
            hint="pass a new or existing folder to -o (nothing was written)",
        )
