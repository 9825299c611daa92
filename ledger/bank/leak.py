"""The leak check: does a text carry reference SQL, gold, hidden field names or a private path?

DESIGN.md fine print, refined by issue 16 (docs/bank-format.md "The leak check"):

- A case's rendered prompt and its notes must not contain ITS OWN reference SQL
  (whitespace-collapsed, casefolded), gold digest or a whole gold row. In one
  database one question's answer is often a word of another question ("Marvel
  Comics"), so other cases' gold is not compared with it.
- The shared texts (semantic.json, prompt.md) must not contain ANY case's
  reference SQL or gold digest, nor a whole gold row of two or more cells of any
  case (a record of answers). A gold row of one cell (a category name) is
  vocabulary there and allowed.
- Every text: not the words ``reference_sql`` or ``required_ast``, the bank's
  gold digest, or a path of the bank folder, the built database, the ledger,
  the working directory or the repository.
- A case may carry ``leak_waiver: <reason>``: its own gold-row findings are then
  waived (recorded in the published case). Nothing else can be waived.

What counts as "a whole gold row" in free text: the row's non-NULL cells, in
column order, each as a separate token, joined by separators only (spaces,
punctuation such as ``, ; : | ( ) [ ] { } ' " = /`` and the words
null/none). Numbers also match without trailing zeros (``300.00`` as
``300``), timestamps also as ``YYYY-MM-DD HH:MM:SS``. Rows too short to be
told apart from ordinary text are skipped: a row needs two or more non-NULL
cells of at least 4 characters together, or one cell of at least 12.

Linear time: a row's regular expression runs only when every ASCII word of one
of each cell's forms is a word of the text (a set lookup: a match implies it,
because a cell starts and ends at word edges), so checking a text costs its
length plus the size of the gold it is compared with.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import cached_property
from pathlib import Path
from typing import Any

from ledger.events import GoldResult

__all__ = [
    "FORBIDDEN_WORDS",
    "LeakContext",
    "LeakRow",
    "leak_context",
    "leak_findings",
    "shared_findings",
]

FORBIDDEN_WORDS = ("reference_sql", "required_ast")
_MIN_ROW_CHARS = 4
_MIN_SINGLE_CELL_CHARS = 12
_W = "0-9a-z_"
# null/none separate cells only as whole words (so a cell's edges are word edges).
_SEP = rf"(?:[\s,;:|()\[\]{{}}'\"=/]|(?<![{_W}])(?:null|none)(?![{_W}]))+"
_WORD = re.compile(rf"[{_W}]+")
_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2})t(\d{2}:\d{2}:\d{2})(\.\d+)?z?")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
ALL_CASES = "(all cases)"


@dataclass(frozen=True)
class LeakRow:
    """One gold row as free text: its case, how it is shown, its pattern and its word filter.

    ``need`` holds, per cell, the word sets of its forms: the row can only match a
    text holding every word of one form of each cell.
    """

    case_id: str
    shown: str
    source: str
    cells: int
    need: tuple[tuple[frozenset[str], ...], ...]

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """The row's regular expression, compiled the first time the word filter lets it run."""
        return re.compile(self.source)

    def may_match(self, words: frozenset[str] | set[str]) -> bool:
        """False when the text (given by its word set) cannot contain this row."""
        return all(any(w <= words for w in forms) for forms in self.need)


@dataclass(frozen=True)
class _Case:
    reference_sql: str = ""
    digest: str = ""
    rows: tuple[LeakRow, ...] = ()


@dataclass(frozen=True)
class LeakContext:
    """Everything a text must not contain, precomputed once per bank (and paths).

    ``waivers``: case id -> the reason its own gold-row findings are waived.
    """

    reference_sql: tuple[tuple[str, str], ...]
    gold_digests: tuple[tuple[str, str], ...]
    gold_rows: tuple[LeakRow, ...]
    paths: tuple[str, ...]
    waivers: Mapping[str, str] = field(default_factory=dict)
    cases: Mapping[str, _Case] = field(default_factory=dict)


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


def _row(case_id: str, row: Iterable[Any]) -> LeakRow | None:
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
    source = rf"(?<![{_W}.])" + body + rf"(?!\.?[{_W}])"
    need = tuple(tuple(frozenset(_WORD.findall(f)) for f in forms) for forms in cells)
    return LeakRow(case_id, " | ".join(shown), source, len(cells), need)


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
    waivers: Mapping[str, str] | None = None,
) -> LeakContext:
    """Build the leak context from reference SQL by case id, gold results and private paths.

    ``paths`` should name the bank folder, the built database, the ledger, the
    working directory and the repository; ``cwd`` adds their cwd-relative forms.
    ``waivers`` maps a case id to the reason its own gold-row findings are waived.
    """
    refs = tuple((cid, _collapse(sql).rstrip("; ")) for cid, sql in references.items())
    digests: list[tuple[str, str]] = []
    rows: list[LeakRow] = []
    per_case: dict[str, list[LeakRow]] = {}
    for result in gold:
        digests.append((result.case_id, result.digest.removeprefix("sha256:").casefold()))
        for row in result.rows:
            found = _row(result.case_id, row)
            if found is not None:
                rows.append(found)
                per_case.setdefault(result.case_id, []).append(found)
    own_digest = dict(digests)
    if gold_digest:
        digests.append((ALL_CASES, gold_digest.removeprefix("sha256:").casefold()))
    all_paths = [*paths] + ([cwd] if cwd is not None else [])
    forms = sorted({f for p in all_paths for f in _path_forms(Path(p), cwd)}, key=lambda f: -len(f))
    own_sql = dict(refs)
    cases = {
        cid: _Case(own_sql.get(cid, ""), own_digest.get(cid, ""), tuple(per_case.get(cid, ())))
        for cid in {*own_sql, *own_digest}
    }
    return LeakContext(
        tuple(refs), tuple(digests), tuple(rows), tuple(forms), dict(waivers or {}), cases
    )


def _excerpt(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _common(folded: str, ctx: LeakContext, findings: list[str]) -> None:
    for word in FORBIDDEN_WORDS:
        if word in folded:
            findings.append(f"contains the word {word!r}")


def _paths(folded: str, ctx: LeakContext, findings: list[str]) -> None:
    for form in ctx.paths:
        if form.casefold() in folded:
            findings.append(f"contains the private path {form!r}")


def _sql(collapsed: str, cid: str, sql: str, findings: list[str]) -> None:
    if sql and sql in collapsed:
        findings.append(f"contains the reference SQL of case {cid}: {_excerpt(sql)!r}")


def _digest(folded: str, cid: str, hexdigest: str, findings: list[str]) -> None:
    if hexdigest and hexdigest in folded:
        findings.append(f"contains the gold digest of case {cid}: sha256:{hexdigest[:16]}...")


def _rows(folded: str, words: set[str], rows: Iterable[LeakRow], findings: list[str]) -> None:
    for row in rows:
        if not row.may_match(words):
            continue
        match = row.pattern.search(folded)
        if match:
            findings.append(
                f"contains a whole gold row of case {row.case_id} ({row.shown}): {match.group()!r}"
            )


def leak_findings(text: str, ctx: LeakContext, *, case_id: str | None = None) -> list[str]:
    """Every leak found in ``text`` as a sentence naming the case and the leaking text.

    ``case_id``: the text belongs to that case (its prompt or notes) and is
    compared with that case's reference SQL, digest and gold rows only (rows not
    at all when the case carries a waiver). None: compared with every case (the
    rule before issue 16; the runner's fallback for a text it cannot place).
    An empty list means the text may be sent.
    """
    findings: list[str] = []
    folded = text.casefold()
    collapsed = _collapse(text)
    _common(folded, ctx, findings)
    words = set(_WORD.findall(folded))
    if case_id is None:
        for cid, sql in ctx.reference_sql:
            _sql(collapsed, cid, sql, findings)
        for cid, hexdigest in ctx.gold_digests:
            _digest(folded, cid, hexdigest, findings)
        rows = (r for r in ctx.gold_rows if r.case_id not in ctx.waivers)
        _rows(folded, words, rows, findings)
    else:
        own = ctx.cases.get(case_id, _Case())
        _sql(collapsed, case_id, own.reference_sql, findings)
        _digest(folded, case_id, own.digest, findings)
        for cid, hexdigest in ctx.gold_digests:
            if cid == ALL_CASES:
                _digest(folded, cid, hexdigest, findings)
        if case_id not in ctx.waivers:
            _rows(folded, words, own.rows, findings)
    _paths(folded, ctx, findings)
    return findings


def shared_findings(text: str, ctx: LeakContext) -> list[str]:
    """The leaks of a text every prompt shares (semantic.json, prompt.md).

    Compared with every case's reference SQL and gold digest, and with every
    gold row of two or more cells; a one-cell gold row is vocabulary here.
    """
    findings: list[str] = []
    folded = text.casefold()
    collapsed = _collapse(text)
    _common(folded, ctx, findings)
    for cid, sql in ctx.reference_sql:
        _sql(collapsed, cid, sql, findings)
    for cid, hexdigest in ctx.gold_digests:
        _digest(folded, cid, hexdigest, findings)
    words = set(_WORD.findall(folded))
    _rows(folded, words, (r for r in ctx.gold_rows if r.cells > 1), findings)
    _paths(folded, ctx, findings)
    return findings
