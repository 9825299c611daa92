"""The leak check: does a text carry reference SQL, gold, hidden field names or a private path?

DESIGN.md fine print: a rendered prompt must not contain any case's reference
SQL (whitespace-collapsed, casefolded), the words ``reference_sql`` or
``required_ast``, a gold digest or a whole gold row, or a path of the bank
folder, the built database, the ledger, the working directory or the
repository. Publishing runs it over every rendered prompt and over
semantic.json, prompt.md and case notes; the runner runs it again before
sending each prompt. The same function serves both.

What counts as "a whole gold row" in free text: the row's non-NULL cells, in
column order, each as a separate token, joined by separators only (spaces,
punctuation such as ``, ; : | ( ) [ ] { } ' " = /`` and the words
null/none). Numbers also match without trailing zeros (``300.00`` as
``300``), timestamps also as ``YYYY-MM-DD HH:MM:SS``. Rows too short to be
told apart from ordinary text are skipped: a row needs two or more non-NULL
cells of at least 4 characters together, or one cell of at least 12.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from ledger.events import GoldResult

__all__ = ["FORBIDDEN_WORDS", "LeakContext", "leak_context", "leak_findings"]

FORBIDDEN_WORDS = ("reference_sql", "required_ast")
_MIN_ROW_CHARS = 4
_MIN_SINGLE_CELL_CHARS = 12
_SEP = r"(?:[\s,;:|()\[\]{}'\"=/]|null|none)+"
_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2})t(\d{2}:\d{2}:\d{2})(\.\d+)?z?")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class LeakContext:
    """Everything a text must not contain, precomputed once per bank (and paths)."""

    reference_sql: tuple[tuple[str, str], ...]
    gold_digests: tuple[tuple[str, str], ...]
    gold_rows: tuple[tuple[str, str, re.Pattern[str]], ...]
    paths: tuple[str, ...]


def _collapse(text: str) -> str:
    return " ".join(text.split()).casefold()


def _cell_forms(cell: Any) -> list[str]:
    if cell is None:
        return []
    if isinstance(cell, bool):
        return ["true" if cell else "false"]
    if isinstance(cell, int):
        return [str(cell)]
    if not isinstance(cell, str):
        return []  # nested values (lists, structs) are not matched as row tokens
    text = cell.casefold()
    forms = [text]
    if _NUMBER.fullmatch(text):
        try:
            plain = format(Decimal(text).normalize(), "f")
        except InvalidOperation:
            plain = text
        forms.append(plain)
    match = _TIMESTAMP.fullmatch(text)
    if match:
        day, clock, frac = match.group(1), match.group(2), match.group(3) or ""
        forms += [f"{day} {clock}", f"{day} {clock}{frac}", f"{day}t{clock}"]
    return sorted(set(forms), key=lambda f: (-len(f), f))


def _row_pattern(row: Iterable[Any]) -> tuple[str, re.Pattern[str]] | None:
    cells = [forms for forms in (_cell_forms(c) for c in row) if forms]
    if not cells:
        return None
    shown = [forms[0] for forms in cells]
    total = sum(len(s) for s in shown)
    if len(cells) == 1 and total < _MIN_SINGLE_CELL_CHARS:
        return None
    if len(cells) > 1 and total < _MIN_ROW_CHARS:
        return None
    alts = ["(?:" + "|".join(re.escape(f) for f in forms) + ")" for forms in cells]
    # Token edges: a cell must not be part of a longer number or word.
    body = _SEP.join(alts)
    pattern = re.compile(r"(?<![0-9a-z_.])" + body + r"(?!\.?[0-9a-z_])")
    return " | ".join(shown), pattern


def _path_forms(path: Path, cwd: Path | None) -> list[str]:
    forms: list[str] = []
    resolved = path.resolve()
    for candidate in (str(path), str(resolved)):
        if "/" in candidate.strip("/") or (candidate.startswith("/") and len(candidate) >= 4):
            forms.append(candidate.rstrip("/"))
    if cwd is not None:
        try:
            rel = resolved.relative_to(cwd.resolve())
        except ValueError:
            rel = None
        # A bare name ("retail") is ordinary text; only a relative path with a "/" is a path.
        if rel is not None and "/" in str(rel):
            forms.append(str(rel))
    return [f for f in forms if f not in ("", ".", "/")]


def leak_context(
    references: Mapping[str, str],
    gold: Iterable[GoldResult],
    *,
    gold_digest: str | None = None,
    paths: Iterable[Path] = (),
    cwd: Path | None = None,
) -> LeakContext:
    """Build the leak context from reference SQL by case id, gold results and private paths.

    ``paths`` should name the bank folder, the built database, the ledger, the
    working directory and the repository; ``cwd`` adds their cwd-relative forms.
    """
    refs = tuple((cid, _collapse(sql).rstrip("; ")) for cid, sql in references.items())
    digests: list[tuple[str, str]] = []
    rows: list[tuple[str, str, re.Pattern[str]]] = []
    for result in gold:
        digests.append((result.case_id, result.digest.removeprefix("sha256:").casefold()))
        for row in result.rows:
            found = _row_pattern(row)
            if found is not None:
                rows.append((result.case_id, *found))
    if gold_digest:
        digests.append(("(all cases)", gold_digest.removeprefix("sha256:").casefold()))
    all_paths = [*paths] + ([cwd] if cwd is not None else [])
    forms = sorted({f for p in all_paths for f in _path_forms(Path(p), cwd)}, key=lambda f: -len(f))
    return LeakContext(tuple(refs), tuple(digests), tuple(rows), tuple(forms))


def _excerpt(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def leak_findings(text: str, ctx: LeakContext) -> list[str]:
    """Every leak found in ``text`` as a sentence naming the case and the leaking text.

    An empty list means the text may be sent.
    """
    findings: list[str] = []
    folded = text.casefold()
    collapsed = _collapse(text)
    for word in FORBIDDEN_WORDS:
        if word in folded:
            findings.append(f"contains the word {word!r}")
    for cid, sql in ctx.reference_sql:
        if sql and sql in collapsed:
            findings.append(f"contains the reference SQL of case {cid}: {_excerpt(sql)!r}")
    for cid, hexdigest in ctx.gold_digests:
        if hexdigest in folded:
            findings.append(f"contains the gold digest of case {cid}: sha256:{hexdigest[:16]}...")
    for cid, shown, pattern in ctx.gold_rows:
        match = pattern.search(folded)
        if match:
            findings.append(f"contains a whole gold row of case {cid} ({shown}): {match.group()!r}")
    for form in ctx.paths:
        if form.casefold() in folded:
            findings.append(f"contains the private path {form!r}")
    return findings
