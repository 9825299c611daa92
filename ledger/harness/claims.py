"""The answer contract: is what a model's ``summary`` says true of its own result?

:func:`check_summary` reads the checkable claims of a summary (Chinese or
English) and checks each one against a result table (the executed result of
the attempt, and separately the case's gold result):

* ``supported``: the table shows it;
* ``contradicted``: the table shows otherwise, and the claim could be tied to
  one value of the table without guessing;
* ``unverifiable``: nothing in the table can decide it (or the claim could not
  be read for sure).

What is read (docs/claims.md lists every form):

============ ================================================================
kind         read as
============ ================================================================
number       a number with an optional unit: ``600``, ``1,200``, ``9,600``,
             ``3.5%``, ``0.6千元`` / ``0.96万`` (scale prefixes 千, 万, 亿,
             百万, thousand, million, billion, ``k``), ``¥600``, and Chinese
             numerals in front of a unit (``六百元``, ``三单``, ``两家``,
             ``百分之四十五``); units yuan, percent, orders, rows, items
bound        a number after ``超过``/``more than``/``at least``/... : an
             inequality
item         a name the result or gold shows as a text cell (``门店A``)
extreme      ``最高``/``最多``/``highest``/``most``/... with one named item
comparison   two named items with ``高于``/``比...多``/``more than``/...
direction    ``上升``/``下降``/``rose``/``fell``/... of the total, of one
             item, or of each item (``都``, ``each``, ``both``), checked on a
             row with two period columns
============ ================================================================

Conservative by construction: a claim is ``contradicted`` only when its subject
is one row (a named item, the total row, or the only row) and its unit names
one column of that row (by the column's name, or because the row has one
number). A negation (``不``, ``没有``, ``not``, ``no``) in the clause, an
approximate word (``约``, ``about``) without a match, percentage points,
dates, ordinals (``第3``, ``top 3``) and a bare year are never read as a
contradiction. Reading is a pure function of the text and the tables.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from ledger.engines.cells import type_class
from ledger.harness.claim_words import (
    _APPROX,
    _ARABIC,
    _BOUNDS,
    _CN_NUM,
    _COLUMN_HINTS,
    _DATES,
    _DOWN_WORDS,
    _EACH_WORDS,
    _GREATER,
    _KIND_WORDS,
    _LESS,
    _MAX_WORDS,
    _MIN_WORDS,
    _NEGATION,
    _ORDINAL,
    _RESPECTIVELY,
    _SCALE_RE,
    _SCALES,
    _TOTAL_LABELS,
    _TOTAL_WORDS,
    _UNIT_RE,
    _UP_WORDS,
    _cn_value,
    _fmt,
)

__all__ = [
    "CLAIMS_VERSION",
    "CONTRADICTED",
    "KINDS",
    "SUPPORTED",
    "UNVERIFIABLE",
    "VERDICTS",
    "Claim",
    "Reading",
    "Table",
    "check_summary",
    "judge",
    "read_claims",
]

#: The version of the reading and checking rules; recorded with every check.
CLAIMS_VERSION = "1.0.0"
SUPPORTED = "supported"
CONTRADICTED = "contradicted"
UNVERIFIABLE = "unverifiable"
VERDICTS = (SUPPORTED, CONTRADICTED, UNVERIFIABLE)
KINDS = ("number", "bound", "item", "extreme", "comparison", "direction")


@dataclass(frozen=True)
class Table:
    """A result: (column name, type name) pairs, rows of encoded cells, and whether
    the rows were cut short (then no claim about what is absent is decided)."""

    columns: tuple[tuple[str, str], ...]
    rows: tuple[tuple[Any, ...], ...]
    truncated: bool = False


@dataclass(frozen=True)
class Reading:
    """One claim as read from the text, before it is checked.

    ``subject``: a named item, ``"total"``, ``"each"`` (every item), a tuple of
    items, or None. ``value``/``tol``: the number and half a unit of its last
    written digit. ``unit``: yuan, percent, orders, rows, items or None. ``op``:
    ``=``, ``>``, ``>=``, ``<``, ``<=`` for numbers and bounds, ``max``/``min``
    for extremes, ``up``/``down`` for directions and comparisons.
    """

    kind: str
    text: str
    reading: str
    subject: Any = None
    value: Decimal | None = None
    tol: Decimal = Decimal(0)
    unit: str | None = None
    op: str = "="
    hint: str | None = None
    approx: bool = False
    negated: bool = False
    items: tuple[str, ...] = ()


@dataclass(frozen=True)
class Claim:
    """A checked claim: what was read, its verdict against the executed result, its
    verdict against gold (None when there was no gold to check against), and why."""

    kind: str
    text: str
    reading: str
    verdict: str
    detail: str
    gold_verdict: str | None = None


# ----------------------------------------------------------------- reading


def _clauses(summary: str) -> list[str]:
    """NFKC, then cut into clauses at sentence marks and at commas not between digits."""
    text = unicodedata.normalize("NFKC", summary)
    parts = re.split(r"[。；;！!？?()\n]+|(?<!\d),|,(?!\d{3})|\.(?=\s|$)", text)
    return [p.strip() for p in parts if p and p.strip()]


def _labels_in(clause: str, vocabulary: Sequence[str]) -> list[tuple[int, str]]:
    """Where each known label appears (longest first, no overlaps), by position."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, str]] = []
    for label in sorted(vocabulary, key=lambda s: (-len(s), s)):
        ascii_word = label.isascii()
        pattern = re.escape(label)
        if ascii_word:
            pattern = rf"(?<![A-Za-z0-9_]){pattern}(?![A-Za-z0-9_])"
        for m in re.finditer(pattern, clause):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            taken.append((m.start(), m.end()))
            found.append((m.start(), label))
    return sorted(found)


def _kind_hint(clause: str) -> str | None:
    for kind, pattern in _KIND_WORDS:
        if pattern.search(clause):
            return kind
    return None


@dataclass(frozen=True)
class _Num:
    start: int
    end: int
    value: Decimal
    tol: Decimal
    unit: str | None
    text: str
    more: bool = False


def _unit_at(clause: str, pos: int) -> tuple[str | None, int]:
    m = _UNIT_RE.match(clause, pos)
    if m is None or m.lastgroup is None:
        return None, pos
    return m.lastgroup, m.end()


def _numbers(clause: str) -> list[_Num]:
    """Every number of a clause with its unit (dates, times and ordinals left out)."""
    masked = _DATES.sub(lambda m: "\x00" * len(m.group()), clause)
    found: list[_Num] = []
    for m in _ARABIC.finditer(masked):
        if _ORDINAL.search(masked[: m.start()]):
            continue
        digits = m.group("int").replace(",", "")
        frac = m.group("frac") or ""
        try:
            value = Decimal(digits + frac)
        except InvalidOperation:
            continue
        tol = Decimal("0.5") / (Decimal(10) ** len(frac.lstrip(".")))
        end = m.end()
        if m.group("k"):
            value, tol = value * 1000, tol * 1000
        else:
            scale = _SCALE_RE.match(masked, end)
            if scale is not None:
                factor = _SCALES[scale.group(1).lower()]
                value, tol, end = value * factor, tol * factor, scale.end()
        more = re.match(r"\s*(?:多|余|几|来|\+)", masked[end:])
        if more is not None:
            end += more.end()
        unit, end = _unit_at(masked, end)
        if more is not None:
            unit = unit or "more"  # 600多元: more than 600, read as a lower bound
        if unit is None and m.group("cur"):
            unit = "yuan"
        if unit is None and end < len(masked) and masked[end].isascii() and masked[end].isalpha():
            continue  # glued to a word (3D, 5G): not a quantity
        is_more = more is not None
        if unit == "more":
            unit = None
        found.append(
            _Num(m.start(), end, value, tol, unit, clause[m.start() : end].strip(), is_more)
        )
    for m in _CN_NUM.finditer(masked):
        if any(n.start <= m.start() < n.end for n in found):
            continue
        cn = _cn_value(m.group("num"))
        end = m.end()
        unit, end = _unit_at(masked, end)
        if m.group("pct"):
            unit = "percent"
        if cn is None or unit is None or _ORDINAL.search(masked[: m.start()]):
            continue  # a Chinese numeral is read only before a unit (一共, 唯一 are words)
        found.append(
            _Num(m.start(), end, Decimal(cn), Decimal(0), unit, clause[m.start() : end].strip())
        )
    return sorted(found, key=lambda n: n.start)


def _bound_before(clause: str, start: int) -> str | None:
    before = clause[max(0, start - 16) : start]
    for pattern, op in _BOUNDS:
        if re.search(rf"(?:{pattern})\s*[¥￥$]?\s*$", before, re.IGNORECASE):
            return op
    return None


def _unit_name(unit: str | None) -> str:
    return {None: "", "percent": "%", "yuan": " yuan"}.get(unit, f" {unit}")


def read_claims(summary: str, vocabulary: Sequence[str]) -> list[Reading]:
    """The claims of a summary, in text order, read with the names of ``vocabulary``
    (the text cells of the result and gold: only those are read as named items)."""
    out: list[Reading] = []
    seen_items: set[str] = set()
    folded = unicodedata.normalize("NFKC", summary).lower()
    # Only the names the summary can contain (a result may have thousands of text cells).
    labels_all = [
        v for v in set(vocabulary) if v.lower() not in _TOTAL_LABELS and v.lower() in folded
    ]
    for clause in _clauses(summary):
        negated = _NEGATION.search(clause) is not None
        approx = _APPROX.search(clause) is not None
        labels = _labels_in(clause, labels_all)
        names = list(dict.fromkeys(lab for _, lab in labels))
        total = _TOTAL_WORDS.search(clause) is not None
        hint = _kind_hint(clause)
        for _, name in labels:
            if name not in seen_items:
                seen_items.add(name)
                out.append(Reading("item", clause, f"names {name}", subject=name, negated=negated))
        numbers = _numbers(clause)
        changes = bool(_UP_WORDS.search(clause) or _DOWN_WORDS.search(clause))
        paired = bool(_RESPECTIVELY.search(clause)) and len(numbers) == len(labels) > 1
        for i, num in enumerate(numbers):
            if num.unit == "percent_points":
                out.append(
                    Reading(
                        "number",
                        clause,
                        f"{num.text} (percentage points)",
                        unit=num.unit,
                        value=num.value,
                        negated=True,
                    )
                )
                continue
            subject: Any = None
            if paired:
                subject = labels[i][1]
            else:
                before = [lab for pos, lab in labels if pos < num.start]
                if before:
                    subject = before[-1]
                elif len(labels) == 1:
                    subject = labels[0][1]
                elif total:
                    subject = "total"
            op = _bound_before(clause, num.start) or "="
            if num.more:
                op = ">="
            kind = "number" if op == "=" else "bound"
            where = "" if subject is None else f" ({subject})"
            sign = "" if op == "=" else f"{op} "
            out.append(
                Reading(
                    kind,
                    clause,
                    f"{sign}{_fmt(num.value)}{_unit_name(num.unit)}{where}",
                    subject=subject,
                    value=num.value,
                    tol=num.tol,
                    unit=num.unit,
                    op=op,
                    hint=num.unit if num.unit in ("yuan", "percent", "orders") else hint,
                    # A number beside a change (上升, rose) may be the change, not a level.
                    approx=approx or num.more or changes,
                    negated=negated,
                )
            )
        extreme = (
            "max" if _MAX_WORDS.search(clause) else "min" if _MIN_WORDS.search(clause) else None
        )
        if extreme is not None and not (_MAX_WORDS.search(clause) and _MIN_WORDS.search(clause)):
            which = "highest" if extreme == "max" else "lowest"
            subject = names[0] if len(names) == 1 else None
            out.append(
                Reading(
                    "extreme",
                    clause,
                    f"{subject or '?'} is the {which}",
                    subject=subject,
                    op=extreme,
                    hint=hint,
                    negated=negated or len(names) != 1,
                )
            )
            continue
        greater, less = _GREATER.search(clause), _LESS.search(clause)
        if len(names) == 2 and (greater is None) != (less is None) and not numbers:
            first, second = names
            op = "up" if greater is not None else "down"
            word = "more than" if op == "up" else "less than"
            out.append(
                Reading(
                    "comparison",
                    clause,
                    f"{first} {word} {second}",
                    items=(first, second),
                    op=op,
                    hint=hint,
                    negated=negated,
                )
            )
            continue
        up, down = _UP_WORDS.search(clause), _DOWN_WORDS.search(clause)
        if (up is None) == (down is None):
            continue
        op = "up" if up is not None else "down"
        each = _EACH_WORDS.search(clause) is not None
        subject = None
        if total and not names:
            subject = "total"
        elif len(names) == 1 and not total:
            subject = names[0]
        elif len(names) > 1 and each:
            subject = tuple(names)
        elif each and not names:
            subject = "each"
        if isinstance(subject, tuple):
            label = " and ".join(subject)
        else:
            label = {None: "?", "total": "the total", "each": "each item"}.get(
                subject, str(subject)
            )
        out.append(
            Reading(
                "direction",
                clause,
                f"{label} went {op}",
                subject=subject,
                op=op,
                hint=hint,
                negated=negated or subject is None,
            )
        )
    return out


# ----------------------------------------------------------------- checking


def _number(cell: Any, type_name: str) -> Decimal | None:
    if type_class(type_name) != "numeric" or cell is None or isinstance(cell, bool):
        return None
    try:
        value = Decimal(str(cell))
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def _column_hint(name: str) -> str | None:
    low = name.lower()
    for kind, pattern in _COLUMN_HINTS:
        if pattern.search(low):
            return kind
    return None


class _View:
    """A table read for claims: label rows, the total row, numeric columns (each read once,
    so checking many claims against a large result stays linear)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.numeric = [i for i, (_, t) in enumerate(table.columns) if type_class(t) == "numeric"]
        self.text = [i for i, (_, t) in enumerate(table.columns) if type_class(t) == "string"]
        self.hints = {i: _column_hint(table.columns[i][0]) for i in self.numeric}
        self._by_name: dict[str, list[int]] = {}
        totals: list[int] = []
        items: list[int] = []
        for r, row in enumerate(table.rows):
            names = {row[i].strip().lower() for i in self.text if isinstance(row[i], str)}
            for name in names:
                self._by_name.setdefault(name, []).append(r)
            if names & _TOTAL_LABELS:
                totals.append(r)
            elif names:
                items.append(r)
        self._totals, self._items, self._total_set = totals, items, set(totals)
        self._values = [
            {c: _number(row[c], table.columns[c][1]) for c in self.numeric} for row in table.rows
        ]

    def rows_named(self, name: str) -> list[int]:
        return self._by_name.get(name.lower(), [])

    def is_total(self, r: int) -> bool:
        return r in self._total_set

    def item_rows(self) -> list[int]:
        """Rows with a text label that is not a total."""
        return self._items

    def total_rows(self) -> list[int]:
        if self._totals:
            return self._totals
        return [0] if len(self.table.rows) == 1 else []

    def columns_for(self, hint: str | None) -> list[int]:
        """Numeric columns that may carry ``hint``: those named for it, else the unnamed."""
        if hint is None:
            return list(self.numeric)
        named = [i for i in self.numeric if self.hints[i] == hint]
        return named or [i for i in self.numeric if self.hints[i] is None]

    def value(self, r: int, c: int) -> Decimal | None:
        return self._values[r].get(c)

    def labels(self) -> list[str]:
        """The text cells that read as names: two characters or more, not only digits, and
        not an all-lowercase ASCII word (``paid``, ``open``: a status, also a plain word)."""
        out = []
        for name_row in self.table.rows:
            for i in self.text:
                cell = name_row[i]
                if isinstance(cell, str) and _is_name(cell.strip()):
                    out.append(cell.strip())
        return out


def _is_name(text: str) -> bool:
    """Whether a text cell is read as a name (docs/claims.md).

    >>> [_is_name(t) for t in ("门店A", "Store 12", "Alice", "paid", "12", "A")]
    [True, True, True, False, False, False]
    """
    if len(text) < 2 or text.isdigit():
        return False
    return not (text.isascii() and text == text.lower() and not any(c.isdigit() for c in text))


def _matches(value: Decimal, tol: Decimal, unit: str | None, cell: Decimal, op: str) -> bool:
    candidates = [cell, cell * 100] if unit == "percent" else [cell]
    for c in candidates:
        if op == "=" and abs(c - value) <= tol:
            return True
        if op == ">" and c > value:
            return True
        if op == ">=" and c >= value:
            return True
        if op == "<" and c < value:
            return True
        if op == "<=" and c <= value:
            return True
    return False


def _subject_rows(view: _View, subject: Any) -> list[int] | None:
    """The rows a claim is about (None: no subject, the whole table)."""
    if subject == "total":
        return view.total_rows()
    if isinstance(subject, str):
        return view.rows_named(subject)
    if len(view.table.rows) == 1:
        return [0]
    return None


def _judge_number(c: Reading, view: _View) -> tuple[str, str]:
    if c.value is None:
        return UNVERIFIABLE, "no number"
    t = view.table
    if c.unit in ("rows", "items"):
        n = len(t.rows) if c.unit == "rows" else len(view.item_rows())
        counts = {len(t.rows)} if c.unit == "rows" else {len(t.rows), len(view.item_rows())}
        if any(_matches(c.value, c.tol, None, Decimal(k), c.op) for k in counts):
            return SUPPORTED, f"the result has {n} {c.unit}"
        if c.unit == "rows" and not t.truncated and not c.negated and not c.approx:
            return CONTRADICTED, f"the result has {len(t.rows)} rows"
    rows = _subject_rows(view, c.subject)
    columns = view.columns_for(c.hint)
    scope = range(len(t.rows)) if rows is None else rows
    for r in scope:
        for col in columns:
            cell = view.value(r, col)
            if cell is not None and _matches(c.value, c.tol, c.unit, cell, c.op):
                return SUPPORTED, f"{t.columns[col][0]} = {_fmt(cell)}" + (
                    "" if rows is None else f" in row {r + 1}"
                )
    if c.unit == "orders" and _matches(c.value, c.tol, None, Decimal(len(t.rows)), c.op):
        return SUPPORTED, f"the result has {len(t.rows)} rows"
    if c.subject == "total" and rows == [] and c.unit != "percent" and len(columns) == 1:
        items = view.item_rows() or list(range(len(t.rows)))
        values = [view.value(r, columns[0]) for r in items]
        if values and all(v is not None for v in values):
            total = sum((v for v in values if v is not None), Decimal(0))
            if _matches(c.value, c.tol, c.unit, total, c.op):
                return SUPPORTED, f"the sum of {t.columns[columns[0]][0]} is {_fmt(total)}"
    if c.negated or c.approx or rows is None or len(rows) != 1:
        return UNVERIFIABLE, "no value of the result decides it"
    if c.unit is None and c.subject is None:
        return UNVERIFIABLE, "a bare number with no unit and no subject"
    present = [col for col in columns if view.value(rows[0], col) is not None]
    if len(present) != 1:
        return UNVERIFIABLE, "more than one column could carry it"
    cell = view.value(rows[0], present[0])
    return CONTRADICTED, f"{t.columns[present[0]][0]} = {_fmt(cell or Decimal(0))}" + (
        f" in row {rows[0] + 1}" if len(t.rows) > 1 else ""
    )


def _judge_item(c: Reading, view: _View) -> tuple[str, str]:
    if view.rows_named(str(c.subject)):
        return SUPPORTED, "the result shows it"
    if c.negated or view.table.truncated:
        return UNVERIFIABLE, "the result does not show it"
    return CONTRADICTED, "the result does not show it"


def _one_column(view: _View, hint: str | None, rows: list[int]) -> list[int]:
    return [c for c in view.columns_for(hint) if all(view.value(r, c) is not None for r in rows)]


def _judge_extreme(c: Reading, view: _View) -> tuple[str, str]:
    if c.negated or c.subject is None:
        return UNVERIFIABLE, "not one named item"
    items = view.item_rows()
    mine = view.rows_named(str(c.subject))
    if len(items) < 2 or len(mine) != 1 or mine[0] not in items:
        return UNVERIFIABLE, "the result does not rank it among two or more items"
    columns = _one_column(view, c.hint, items)
    if not columns:
        return UNVERIFIABLE, "no number column to rank by"
    verdicts: set[bool | None] = set()
    for col in columns:
        values = [view.value(r, col) or Decimal(0) for r in items]
        best = max(values) if c.op == "max" else min(values)
        top = view.value(mine[0], col) == best
        verdicts.add(None if top and values.count(best) > 1 else top)
    if verdicts == {True}:
        if view.table.truncated:
            return UNVERIFIABLE, "the result was cut short"
        return SUPPORTED, f"{c.subject} is the {'highest' if c.op == 'max' else 'lowest'}"
    if verdicts == {False}:
        return CONTRADICTED, f"another item is {'higher' if c.op == 'max' else 'lower'}"
    if verdicts == {None}:
        return UNVERIFIABLE, "tied with another item"
    return UNVERIFIABLE, "the number columns disagree"


def _compare(view: _View, hint: str | None, a: int, b: int) -> int | None:
    """sign(value(a) - value(b)) when every candidate column agrees, else None."""
    signs = set()
    for col in _one_column(view, hint, [a, b]):
        va, vb = view.value(a, col) or Decimal(0), view.value(b, col) or Decimal(0)
        signs.add((va > vb) - (va < vb))
    return signs.pop() if len(signs) == 1 else None


def _judge_comparison(c: Reading, view: _View) -> tuple[str, str]:
    first, second = (view.rows_named(n) for n in c.items)
    if c.negated or len(first) != 1 or len(second) != 1:
        return UNVERIFIABLE, "the two items are not one row each"
    sign = _compare(view, c.hint, first[0], second[0])
    if sign is None:
        return UNVERIFIABLE, "no one number column compares them"
    if (sign > 0) == (c.op == "up") and sign != 0:
        return SUPPORTED, "the result shows it"
    return CONTRADICTED, "the result shows the opposite" if sign else "the two are equal"


_PERIOD_WORDS = (
    (re.compile(r"prev|previous|before|base|last|old|prior|上期|基期|上月|之前|旧"), 0),
    (re.compile(r"curr|current|after|new|this|latest|本期|新期|本月|当前|新"), 1),
)


def _period_key(name: str) -> tuple[str, tuple[int, ...]] | None:
    """(stem, order) of a column named for a period: its digits (rate_2026_08), or
    a before/after word (base_rate, new_rate); None otherwise."""
    low = name.lower()
    digits = tuple(int(d) for d in re.findall(r"\d+", low))
    if digits:
        return re.sub(r"\d+", "#", low), digits
    for pattern, order in _PERIOD_WORDS:
        if pattern.search(low):
            return pattern.sub("#", low), (order,)
    return None


def _period_pair(view: _View, hint: str | None) -> tuple[int, int] | None:
    """The (earlier, later) numeric columns of one measure, when exactly one pair is found."""
    groups: dict[str, list[tuple[tuple[int, ...], int]]] = {}
    for col in view.columns_for(hint) if hint else view.numeric:
        key = _period_key(view.table.columns[col][0])
        if key is not None:
            groups.setdefault(re.sub(r"[_\s]+", "_", key[0]), []).append((key[1], col))
    pairs = [sorted(g) for g in groups.values() if len(g) == 2 and g[0][0] != g[1][0]]
    if len(pairs) != 1 and hint is not None:
        return _period_pair(view, None) if not pairs else None
    if len(pairs) != 1:
        return None
    return pairs[0][0][1], pairs[0][1][1]


def _judge_direction(c: Reading, view: _View) -> tuple[str, str]:
    if c.negated:
        return UNVERIFIABLE, "no subject, or a negation"
    pair = _period_pair(view, c.hint)
    if pair is None:
        return UNVERIFIABLE, "no pair of period columns to compare"
    if c.subject == "total":
        rows = view.total_rows()
    elif c.subject == "each":
        rows = view.item_rows()
    elif isinstance(c.subject, tuple):
        found = [view.rows_named(n) for n in c.subject]
        if any(len(f) != 1 for f in found):
            return UNVERIFIABLE, "an item is not one row"
        rows = [f[0] for f in found]
    else:
        rows = view.rows_named(str(c.subject))
    if not rows or (c.subject != "each" and not isinstance(c.subject, tuple) and len(rows) != 1):
        return UNVERIFIABLE, "the subject is not one row of the result"
    before, after = pair
    names = (view.table.columns[before][0], view.table.columns[after][0])
    moved = []
    for r in rows:
        b, a = view.value(r, before), view.value(r, after)
        if b is None or a is None:
            return UNVERIFIABLE, "a period value is NULL"
        moved.append(("up" if a > b else "down" if a < b else "flat", r, b, a))
    wrong = [m for m in moved if m[0] != c.op]
    if not wrong:
        return SUPPORTED, f"{names[0]} -> {names[1]}: " + ", ".join(
            f"{_fmt(b)} -> {_fmt(a)}" for _, _, b, a in moved
        )
    _, r, b, a = wrong[0]
    return CONTRADICTED, f"row {r + 1}: {names[0]} {_fmt(b)} -> {names[1]} {_fmt(a)}"


_JUDGES = {
    "number": _judge_number,
    "bound": _judge_number,
    "item": _judge_item,
    "extreme": _judge_extreme,
    "comparison": _judge_comparison,
    "direction": _judge_direction,
}


def judge(claim: Reading, table: Table) -> tuple[str, str]:
    """The verdict of one read claim against one table, and a short reason."""
    return _judge(claim, _View(table))


def _judge(claim: Reading, view: _View) -> tuple[str, str]:
    if claim.unit == "percent_points":
        return UNVERIFIABLE, "percentage points are not checked"
    return _JUDGES[claim.kind](claim, view)


def check_summary(summary: str, result: Table, gold: Table | None = None) -> list[Claim]:
    """Read the claims of ``summary`` and check each against ``result`` (the executed
    result) and, when given, ``gold``. Named items are read from both tables' text
    cells, so a name only gold shows is read (and is not in the result)."""
    seen, truth = _View(result), None if gold is None else _View(gold)
    vocabulary = sorted(set(seen.labels()) | (set(truth.labels()) if truth is not None else set()))
    out = []
    for reading in read_claims(summary, vocabulary):
        verdict, detail = _judge(reading, seen)
        gold_verdict = None if truth is None else _judge(reading, truth)[0]
        out.append(
            Claim(reading.kind, reading.text, reading.reading, verdict, detail, gold_verdict)
        )
    return out
