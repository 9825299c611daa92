"""Read and validate a bank's optional calibration.yaml (variants, controls, reviews, relations).

The file sits beside the five bank files and has its own hash: it never
changes the bank hash or any score (DESIGN.md "Question bank"). Every problem
names the file, line, case and field, and all of them are raised together as
one BankError, as for the bank files themselves.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ledger.bank.model import Bank
from ledger.bank.problems import Problems
from ledger.bank.purity import check_purity
from ledger.bank.source import CALIBRATION_FILE, canonical_text, normalise_text, parse_yaml
from ledger.calibration.operators import OPERATOR_NAMES
from ledger.errors import broken

__all__ = [
    "MEASURES",
    "Calibration",
    "CaseCalibration",
    "EquivalentMutant",
    "Relation",
    "RelationSide",
    "Variant",
    "load_calibration",
    "parse_calibration",
]

DIALECT = "duckdb"
MEASURES = ("money", "count")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_TOP = ("variants", "cases", "relations")
_VARIANT_FIELDS = ("id", "description", "sql", "stale")
_CASE_FIELDS = ("alternative_sql", "non_interfering", "equivalent_mutants")
_EQUIVALENT_FIELDS = ("operator", "reason")
_RELATION_FIELDS = ("id", "measure", "total", "parts", "description")
_SIDE_FIELDS = ("case", "column", "where", "where_not")
_DML = (exp.Insert, exp.Update, exp.Delete)


@dataclass(frozen=True)
class Variant:
    """A copy of the seed with extra DML statements applied after seed.sql."""

    id: str
    description: str
    sql: tuple[str, ...]
    stale: bool = False


@dataclass(frozen=True)
class EquivalentMutant:
    """A reviewed survivor: ``operator`` is an operator name (every site) or ``name#site``."""

    operator: str
    reason: str

    def covers(self, mutant_id: str) -> bool:
        """True when this review names the mutant itself or its whole operator."""
        return self.operator == mutant_id or self.operator == mutant_id.partition("#")[0]


@dataclass(frozen=True)
class CaseCalibration:
    """Per-case calibration data."""

    alternative_sql: tuple[str, ...] = ()
    non_interfering: tuple[str, ...] = ()
    equivalent_mutants: tuple[EquivalentMutant, ...] = ()


@dataclass(frozen=True)
class RelationSide:
    """One side of a partition relation: a case's column, over the rows the filters keep."""

    case: str
    column: str
    where: tuple[tuple[str, Any], ...] = ()
    where_not: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Relation:
    """``sum(parts.column) == total.column`` (one total row) on the gold of a bank."""

    id: str
    measure: str
    total: RelationSide
    parts: RelationSide
    description: str = ""


@dataclass(frozen=True)
class Calibration:
    """A validated calibration.yaml and its hash (``sha256:<hex>`` of its canonical form)."""

    sha256: str
    variants: tuple[Variant, ...]
    cases: dict[str, CaseCalibration]
    relations: tuple[Relation, ...]

    def variant(self, variant_id: str) -> Variant:
        """A variant by id (KeyError when absent)."""
        for v in self.variants:
            if v.id == variant_id:
                return v
        raise KeyError(variant_id)

    def case(self, case_id: str) -> CaseCalibration:
        """The calibration of one case (empty when the file says nothing about it)."""
        return self.cases.get(case_id, CaseCalibration())


def _sha(doc: Any) -> str:
    return "sha256:" + hashlib.sha256((canonical_text(doc) + "\n").encode("utf-8")).hexdigest()


class _Reader:
    """Walks the parsed document, recording problems with their line, case and field."""

    def __init__(self, lines: dict[tuple[Any, ...], int], problems: Problems) -> None:
        self.lines, self.problems = lines, problems

    def bad(self, path: tuple[Any, ...], message: str, *, case: str | None = None) -> None:
        line = None
        for cut in range(len(path), -1, -1):
            line = self.lines.get(path[:cut])
            if line is not None:
                break
        field = ".".join(str(p) for p in path[2 if case else 0 :]) or None
        self.problems.add(CALIBRATION_FILE, message, line=line, case=case, field=field)

    def keys(self, value: dict[str, Any], allowed: tuple[str, ...], path: tuple[Any, ...],
             case: str | None = None) -> None:  # fmt: skip
        for key in value:
            if key not in allowed:
                self.bad((*path, key), f"unknown field (known: {', '.join(allowed)})", case=case)

    def strings(self, value: Any, path: tuple[Any, ...], case: str | None = None) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(s, str) and s.strip() for s in value):
            self.bad(path, "must be a list of non-empty strings", case=case)
            return []
        return list(value)


def _statements(sql: str) -> list[exp.Expr] | str:
    try:
        return [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except SqlglotError as exc:
        return str(exc).splitlines()[0]


def _variants(raw: Any, r: _Reader) -> list[Variant]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        r.bad(("variants",), "must be a list of variants")
        return []
    out: list[Variant] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        path: tuple[Any, ...] = ("variants", i)
        if not isinstance(item, dict):
            r.bad(path, f"variant #{i + 1} must be a mapping with id, description and sql")
            continue
        r.keys(item, _VARIANT_FIELDS, path)
        vid = item.get("id")
        if not isinstance(vid, str) or not _ID.fullmatch(vid):
            r.bad((*path, "id"), f"must match {_ID.pattern}, got {vid!r}")
            vid = f"#{i + 1}"
        elif vid in seen:
            r.bad((*path, "id"), f"duplicate variant id {vid!r}")
        seen.add(vid)
        desc = item.get("description")
        if not isinstance(desc, str) or not desc.strip():
            r.bad((*path, "description"), "must be a non-empty string")
            desc = ""
        stale = item.get("stale", False)
        if not isinstance(stale, bool):
            r.bad((*path, "stale"), f"must be true or false, got {stale!r}")
        sql = r.strings(item.get("sql"), (*path, "sql"))
        if not sql:
            r.bad((*path, "sql"), "must list at least one INSERT, UPDATE or DELETE statement")
        for j, text in enumerate(sql):
            where = (*path, "sql", j)
            parsed = _statements(text)
            if isinstance(parsed, str):
                r.bad(where, f"variant {vid}: does not parse: {parsed}")
            elif len(parsed) != 1 or not isinstance(parsed[0], _DML):
                r.bad(where, f"variant {vid}: must be exactly one INSERT, UPDATE or DELETE")
            sub = Problems(CALIBRATION_FILE)
            check_purity(text, CALIBRATION_FILE, sub)
            for p in sub.items:
                r.bad(where, f"variant {vid}: {p.message}")
        out.append(Variant(vid, desc, tuple(sql), stale is True))
    return out


def _equivalents(raw: Any, path: tuple[Any, ...], cid: str, r: _Reader) -> list[EquivalentMutant]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        r.bad(path, "must be a list of {operator, reason}", case=cid)
        return []
    out = []
    for i, item in enumerate(raw):
        where = (*path, i)
        if not isinstance(item, dict):
            r.bad(where, "must be a mapping with operator and reason", case=cid)
            continue
        r.keys(item, _EQUIVALENT_FIELDS, where, cid)
        op, reason = item.get("operator"), item.get("reason")
        name, sep, site = op.partition("#") if isinstance(op, str) else ("", "", "")
        if name not in OPERATOR_NAMES or (sep and not site.isdigit()):
            r.bad((*where, "operator"), f"unknown operator {op!r} (write NAME or NAME#SITE; "
                  f"operators: {', '.join(OPERATOR_NAMES)})", case=cid)  # fmt: skip
        if not isinstance(reason, str) or not reason.strip():
            r.bad((*where, "reason"), "must say why the mutant is equivalent", case=cid)
        out.append(EquivalentMutant(str(op), str(reason or "")))
    return out


def _cases(raw: Any, bank: Bank, variants: set[str], r: _Reader) -> dict[str, CaseCalibration]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        r.bad(("cases",), "must be a mapping from case id to its calibration")
        return {}
    known = {c.id for c in bank.cases}
    out: dict[str, CaseCalibration] = {}
    for cid, item in raw.items():
        path: tuple[Any, ...] = ("cases", cid)
        if cid not in known:
            r.bad(path, f"no such case in bank {bank.ref}", case=cid)
            continue
        if not isinstance(item, dict):
            r.bad(path, "must be a mapping", case=cid)
            continue
        r.keys(item, _CASE_FIELDS, path, cid)
        alternatives = r.strings(item.get("alternative_sql"), (*path, "alternative_sql"), cid)
        non_interfering = r.strings(item.get("non_interfering"), (*path, "non_interfering"), cid)
        for j, vid in enumerate(non_interfering):
            if vid not in variants:
                r.bad((*path, "non_interfering", j), f"no variant {vid!r}", case=cid)
        if len(set(non_interfering)) != len(non_interfering):
            r.bad((*path, "non_interfering"), "a variant is listed twice", case=cid)
        equivalents = _equivalents(
            item.get("equivalent_mutants"), (*path, "equivalent_mutants"), cid, r
        )
        out[cid] = CaseCalibration(tuple(alternatives), tuple(non_interfering), tuple(equivalents))
    return out


def _side(raw: Any, path: tuple[Any, ...], known: set[str], r: _Reader) -> RelationSide | None:
    if not isinstance(raw, dict):
        r.bad(path, "must be a mapping with case and column")
        return None
    r.keys(raw, _SIDE_FIELDS, path)
    case, column = raw.get("case"), raw.get("column")
    if case not in known:
        r.bad((*path, "case"), f"no such case {case!r}")
    if not isinstance(column, str) or not column:
        r.bad((*path, "column"), "must name a result column")
    filters = []
    for key in ("where", "where_not"):
        value = raw.get(key, {})
        if not isinstance(value, dict):
            r.bad((*path, key), "must map result column names to values")
            value = {}
        filters.append(tuple(sorted(value.items())))
    return RelationSide(str(case), str(column), filters[0], filters[1])


def _relations(raw: Any, bank: Bank, r: _Reader) -> list[Relation]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        r.bad(("relations",), "must be a list of relations")
        return []
    known = {c.id for c in bank.cases}
    out = []
    for i, item in enumerate(raw):
        path: tuple[Any, ...] = ("relations", i)
        if not isinstance(item, dict):
            r.bad(path, "must be a mapping with id, measure, total and parts")
            continue
        r.keys(item, _RELATION_FIELDS, path)
        rid, measure = item.get("id"), item.get("measure")
        if not isinstance(rid, str) or not _ID.fullmatch(rid):
            r.bad((*path, "id"), f"must match {_ID.pattern}, got {rid!r}")
        if measure not in MEASURES:
            r.bad((*path, "measure"), f"must be one of {', '.join(MEASURES)} (distinct counts "
                  f"and ratios do not add up over a partition), got {measure!r}")  # fmt: skip
        total = _side(item.get("total"), (*path, "total"), known, r)
        parts = _side(item.get("parts"), (*path, "parts"), known, r)
        desc = item.get("description", "")
        if total is not None and parts is not None:
            out.append(Relation(str(rid), str(measure), total, parts, str(desc or "")))
    return out


def parse_calibration(text: str, bank: Bank) -> Calibration:
    """Validate calibration.yaml text against ``bank``. Raises one BankError naming each problem."""
    problems = Problems(f"{bank.ref} {CALIBRATION_FILE}")
    doc, lines = parse_yaml(text, CALIBRATION_FILE, problems)
    problems.raise_if_any(hint=f"fix {CALIBRATION_FILE} (docs/calibration.md)")
    doc = {} if doc is None else doc
    r = _Reader(lines, problems)
    if not isinstance(doc, dict):
        r.bad((), "must be a mapping with variants, cases and relations")
        problems.raise_if_any(hint=f"fix {CALIBRATION_FILE} (docs/calibration.md)")
    r.keys(doc, _TOP, ())
    variants = _variants(doc.get("variants"), r)
    cases = _cases(doc.get("cases"), bank, {v.id for v in variants}, r)
    relations = _relations(doc.get("relations"), bank, r)
    problems.raise_if_any(hint=f"fix {CALIBRATION_FILE} (docs/calibration.md)")
    return Calibration(_sha(doc), tuple(variants), cases, tuple(relations))


def load_calibration(bank: Bank) -> Calibration | None:
    """The bank folder's calibration.yaml, validated; None when the bank has none.

    The hash is checked against the one the bank loader computed, so the
    calibration used is the one a BankPublished event names.
    """
    path = bank.source.folder / CALIBRATION_FILE
    if bank.source.calibration is None or not path.is_file():
        return None
    problems = Problems(f"{bank.ref} {CALIBRATION_FILE}")
    text = normalise_text(path.read_bytes(), CALIBRATION_FILE, problems)
    problems.raise_if_any()
    if text is None:
        raise broken(f"{CALIBRATION_FILE} had no problem but no text")
    calibration = parse_calibration(text, bank)
    if calibration.sha256 != bank.source.calibration_sha256:
        problems.add(CALIBRATION_FILE, "changed while the bank was being read; run again")
        problems.raise_if_any()
    return calibration
