"""One context-manager shape for everything that must be closed: ``with X(...) as x``
calls ``x.close()`` on the way out, whatever happened inside."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["Closing"]


class Closing:
    """A base for a class with a ``close()``: entering returns the object itself, leaving
    closes it (an exception inside still propagates)."""

    def close(self) -> None:
        """Release what the object holds (each subclass says what)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
