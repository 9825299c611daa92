"""Exceptions: one base class whose diagnostics() tells the user what to do next."""

from __future__ import annotations


class LedgerError(Exception):
    """Base class of every caseledger error.

    ``exit_code`` is what the CLI exits with: 1 means a check ran and failed,
    2 means the check could not be made (bad input, missing file, usage).
    """

    exit_code: int = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def diagnostics(self) -> str:
        """The message, plus what to do next when we know it."""
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message

    def cli_line(self) -> str:
        """What the CLI prints on stderr: ``error: `` and the diagnostics."""
        return f"error: {self.diagnostics()}"


class UsageError(LedgerError):
    """Bad arguments or options."""


class InternalError(LedgerError):
    """A caseledger bug: an unexpected exception stopped the command (exit 1).

    Never signed as evidence: the work it interrupted (an attempt's batch, a
    rescore's batch, a baseline folder) is not recorded. The CLI prints one line,
    ``internal error: <ExceptionType>: <message> (this is a caseledger bug; ...)``,
    preceded by the traceback of ``error`` only under ``--debug`` / ``CASELEDGER_DEBUG=1``.
    """

    exit_code = 1

    def __init__(self, error: BaseException, *, where: str) -> None:
        detail = str(error).splitlines()[0] if str(error) else ""
        super().__init__(
            f"internal error: {type(error).__name__}: {detail} (this is a caseledger bug; {where})"
        )
        self.error = error

    def cli_line(self) -> str:
        """The one line, without the ``error:`` prefix of other errors."""
        return self.message


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none): how
    a message quotes a driver's or parser's error.

    >>> first_line(ValueError("bad value\\nmore detail")), first_line(KeyError())
    ('bad value', 'KeyError')
    """
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def broken(what: str) -> InternalError:
    """The InternalError for a state the code rules out (``raise broken(...)``).

    Used instead of ``assert``, which ``python -O`` removes: a check that guards
    evidence must hold in every interpreter mode, and a failure is a named bug
    (exit 1, nothing recorded), never a traceback.
    """
    return InternalError(AssertionError(what), where="nothing was recorded")


class BankError(LedgerError):
    """A question bank is malformed, leaks, or conflicts with a published version."""


class AdapterError(LedgerError):
    """An adapter could not be configured (not a model failure: those are events)."""


class SandboxError(LedgerError):
    """The execution sandbox itself failed."""


class StoreError(LedgerError):
    """The ledger file is missing, unreadable or not a caseledger ledger."""


class StoreBusyError(StoreError):
    """Another process holds the write lock for longer than we were willing to wait."""


class StoreConflictError(StoreError):
    """An optimistic append named an expected tree size that the log has moved past."""


class EncodingError(LedgerError):
    """A value cannot be put into canonical bytes (NaN, Infinity, float, unknown type)."""


class VerificationError(LedgerError):
    """A verification ran and failed. ``seq`` names the first bad sequence number."""

    exit_code = 1

    def __init__(self, message: str, *, seq: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.seq = seq


class ChainBrokenError(VerificationError):
    """A leaf hash, chain hash or stream link does not match."""


class SignatureError(VerificationError):
    """A signature is invalid, by an unknown key, or by a key outside its validity window."""


class ProofError(VerificationError):
    """A Merkle inclusion or consistency proof, or a checkpoint, does not verify."""


class SecretLeakError(UsageError):
    """The store refused an event whose encoded body holds a registered secret.

    Nothing of the batch is appended; the message names the event and stream, never the secret.
    """


class DiskFullError(LedgerError):
    """A write found no space left on its device (exit 2: could not do it here).

    Names the folder whose disk is full and what was being written; what was already
    recorded stays, and nothing half-written is kept (a batch is one transaction, a
    built database is moved into place only when complete).
    """

    def __init__(self, folder: object, doing: str, *, hint: str | None = None) -> None:
        self.folder, self.doing = folder, doing
        super().__init__(
            f"disk full: no space left on the disk of {folder}/ while {doing}",
            hint=hint or f"free space on that disk (df {folder}), then run the command again",
        )


#: errno values of a full device: no space, and a user's quota used up.
_FULL_ERRNOS = frozenset({28, 122})  # ENOSPC, EDQUOT (Linux)
#: SQLite's primary result code for a full disk (``sqlite3.SQLITE_FULL``).
_SQLITE_FULL = 13


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says its device is full: an OSError with ENOSPC or EDQUOT,
    SQLite's SQLITE_FULL ("database or disk is full"), or DuckDB's IO or fatal error
    quoting the system's "No space left on device".

    >>> disk_full(OSError(28, "No space left on device"))
    True
    >>> disk_full(RuntimeError("FATAL Error: ... No space left on device"))
    True
    >>> disk_full(OSError(2, "No such file or directory"))
    False
    """
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == _SQLITE_FULL:
        return True
    return "No space left on device" in str(exc) or "Disk quota exceeded" in str(exc)
