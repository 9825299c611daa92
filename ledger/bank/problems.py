"""Bank problems: findings naming file, line, case and field, raised together as one BankError."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.errors import BankError

__all__ = ["Problem", "Problems"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a bank, and where it is."""

    file: str
    message: str
    line: int | None = None
    case: str | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        parts = [where]
        if self.case is not None:
            parts.append(f"case {self.case}")
        if self.field is not None:
            parts.append(f"field {self.field}")
        return ": ".join([*parts, self.message])


@dataclass
class Problems:
    """Collects problems so a user sees all of them at once (sqlglot-style), then raises."""

    bank: str
    items: list[Problem] = field(default_factory=list)

    def add(
        self,
        file: str,
        message: str,
        *,
        line: int | None = None,
        case: str | None = None,
        field: str | None = None,
    ) -> None:
        """Record one problem."""
        self.items.append(Problem(file, message, line, case, field))

    def raise_if_any(
        self, hint: str = "fix the bank files and run `caseledger bank validate`"
    ) -> None:
        """Raise one BankError listing every problem recorded so far."""
        if not self.items:
            return
        count = len(self.items)
        head = f"bank {self.bank}: {count} problem{'s' if count != 1 else ''}"
        body = "\n".join(f"  {p}" for p in self.items)
        raise BankError(f"{head}\n{body}", hint=hint)
