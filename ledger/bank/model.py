"""Validate a normalised bank source into a Bank: cases, semantic layer, prompt template, SQL."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from msgspec import UNSET

from ledger.bank.problems import Problems
from ledger.bank.purity import check_purity
from ledger.bank.source import BankSource, content_hash, read_source
from ledger.bounds import MAX_ROWS, MAX_WEIGHT, decimal_problem
from ledger.codec import sha256_hex
from ledger.engines.transpile import transpile
from ledger.events import (
    BENCHMARKS,
    DIFFICULTIES,
    DIMENSIONS,
    ENGINES,
    UNASSIGNED,
    BenchmarkCase,
    BenchmarkSource,
    CaseSpec,
)
from ledger.harness.ast_rules import KNOWN_RULES
from ledger.harness.compare import ROW_CONTRACTS

__all__ = [
    "CASE_FIELDS",
    "DIFFICULTIES",
    "DIMENSIONS",
    "PLACEHOLDERS",
    "SEMANTIC_KEYS",
    "Bank",
    "CaseDef",
    "known_rules",
    "load_bank",
    "validate_source",
]

PLACEHOLDERS = ("dialect", "schema", "semantic", "question", "output_schema")
SEMANTIC_KEYS = ("entities", "relations", "metrics", "dimensions", "business_rules")
TOP_FIELDS = ("bank", "version", "description", "engine", "benchmark", "cases")
_REQUIRED = ("id", "question", "reference_sql")
_OPTIONAL = (
    "dimension",
    "difficulty",
    "weight",
    "max_rows",
    "question_en",
    "row_order_significant",
    "abs_tolerance",
    "rel_tolerance",
    "required_ast",
    "notes",
    "leak_waiver",
    "rows",
    "benchmark",
)
#: max_rows of a case that gives none: this many times its gold rows, at least
#: DERIVED_MIN_ROWS (issue 16: imported questions carry no row bound).
DERIVED_ROWS_FACTOR = 10
DERIVED_MIN_ROWS = 100
#: A ``leak_waiver`` reason must say why, in at least this many characters.
MIN_WAIVER_CHARS = 20
CASE_FIELDS = _REQUIRED + _OPTIONAL
_BANK_ID = re.compile(r"[a-z0-9][a-z0-9_-]*")
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_CASE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_DECIMAL_STRING = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
PLACEHOLDER_RE = re.compile(r"\{\{([^{}\n]*)\}\}")


def known_rules() -> frozenset[str]:
    """The AST capability rule names a case may require (from ledger.harness.ast_rules)."""
    return frozenset(KNOWN_RULES)


@dataclass(frozen=True)
class CaseDef:
    """A case as written in cases.yaml, reference SQL included (never sent to a model)."""

    id: str
    dimension: str
    difficulty: str
    weight: Decimal
    question: str
    question_en: str | None
    reference_sql: str
    row_order_significant: bool
    abs_tolerance: Decimal
    rel_tolerance: Decimal
    max_rows: int | None  # None: derived from the gold (derived_max_rows)
    required_ast: tuple[str, ...]
    notes: str
    line: int | None = None
    index: int = -1
    leak_waiver: str | None = None
    rows: str = "multiset"  # the row contract (issue 16): multiset | set
    benchmark: BenchmarkCase | None = None

    def row_bound(self, gold_rows: int) -> int:
        """max_rows as published: the case's own, else derived from its gold row count."""
        if self.max_rows is not None:
            return self.max_rows
        return min(MAX_ROWS, max(DERIVED_MIN_ROWS, DERIVED_ROWS_FACTOR * gold_rows))

    def spec(self, gold_rows: int = 0) -> CaseSpec:
        """The published form: everything but the reference SQL text, which becomes its hash.

        ``gold_rows``: the gold's row count, for a case whose max_rows is derived.
        """
        return CaseSpec(
            id=self.id,
            dimension=self.dimension,
            difficulty=self.difficulty,
            weight=self.weight,
            question=self.question,
            question_en=self.question_en,
            row_order_significant=self.row_order_significant,
            abs_tolerance=self.abs_tolerance,
            rel_tolerance=self.rel_tolerance,
            max_rows=self.row_bound(gold_rows),
            required_ast=self.required_ast,
            notes=self.notes,
            reference_sql_sha256=sha256_hex(self.reference_sql.encode("utf-8")),
            # Left out of the bytes when absent: every bank without one keeps its bytes.
            leak_waiver=UNSET if self.leak_waiver is None else self.leak_waiver,
            # multiset (the default) is left out of the bytes: existing banks keep theirs.
            rows="set" if self.rows == "set" else UNSET,
            benchmark=UNSET if self.benchmark is None else self.benchmark,
        )


@dataclass(frozen=True)
class Bank:
    """A structurally valid bank (execution checks come with the build and gold)."""

    source: BankSource
    bank_id: str
    version: str
    description: str
    cases: tuple[CaseDef, ...]
    # The engine the bank runs on, and the one its SQL files are written for
    # (cases.yaml ``engine:``); they differ when published with ``--engine``.
    engine: str = "duckdb"
    written_for: str = "duckdb"
    # Issue 16: the public benchmark the bank was imported from (cases.yaml ``benchmark``).
    benchmark: BenchmarkSource | None = None

    def references(self) -> dict[str, str]:
        """Reference SQL by case id, in the dialect of the engine the bank runs on."""
        return {case.id: self.engine_sql(case.reference_sql) for case in self.cases}

    def engine_sql(self, sql: str) -> str:
        """``sql`` (written for ``written_for``) in the dialect of ``engine``."""
        if self.engine == self.written_for:
            return sql
        return transpile(sql, self.written_for, self.engine)

    @property
    def content_sha256(self) -> str:
        """The bank's content hash (``sha256:<hex>``)."""
        return self.source.content_sha256

    @property
    def ref(self) -> str:
        """``bank@version``."""
        return f"{self.bank_id}@{self.version}"

    def line_of(self, case: CaseDef, field: str) -> int | None:
        """The cases.yaml line of one field of a case (else the case's first line)."""
        return self.source.cases_lines.get(("cases", case.index, field), case.line)

    @property
    def schema_sql(self) -> str:
        """Normalised schema.sql."""
        return self.source.text("schema.sql")

    @property
    def seed_sql(self) -> str:
        """Normalised seed.sql."""
        return self.source.text("seed.sql")

    @property
    def prompt_template(self) -> str:
        """Normalised prompt.md."""
        return self.source.text("prompt.md")

    @property
    def semantic_json(self) -> str:
        """semantic.json as canonical JSON text."""
        return self.source.text("semantic.json").rstrip("\n")


class _CaseReader:
    """Reads one case mapping, recording problems with the case id and field."""

    def __init__(self, raw: dict[str, Any], index: int, src: BankSource, problems: Problems):
        self.raw, self.index, self.src, self.problems = raw, index, src, problems
        cid = raw.get("id")
        self.cid = cid if isinstance(cid, str) and cid else f"#{index + 1}"

    def line(self, field: str | None = None) -> int | None:
        lines = self.src.cases_lines
        return lines.get(("cases", self.index, field)) or lines.get(("cases", self.index))

    def bad(self, field: str, message: str) -> None:
        self.problems.add("cases.yaml", message, line=self.line(field), case=self.cid, field=field)

    def text(self, field: str, *, required: bool, default: str | None = "") -> str | None:
        value = self.raw.get(field)
        if value is None:
            if required:
                self.bad(field, "missing (required)")
            return default
        if not isinstance(value, str) or (required and not value.strip()):
            self.bad(field, f"must be a non-empty string, got {value!r:.60}")
            return default
        return value

    def decimal(
        self, field: str, *, required: bool, positive: bool, maximum: Decimal | None = None
    ) -> Decimal:
        value = self.raw.get(field)
        if value is None:
            if required:
                self.bad(field, "missing (required)")
            return Decimal(0)
        if isinstance(value, bool) or not isinstance(value, int | Decimal | str):
            self.bad(field, f"must be a decimal number or decimal string, got {value!r:.60}")
            return Decimal(0)
        if isinstance(value, str) and not _DECIMAL_STRING.fullmatch(value.strip()):
            self.bad(field, f"{value!r:.60} is not a decimal number")
            return Decimal(0)
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            self.bad(field, f"{value!r:.60} is not a decimal number")
            return Decimal(0)
        why = decimal_problem(number, maximum=maximum)
        if why is not None:
            self.bad(field, f"{str(value)[:60]} {why} (see the bounds in docs/bank-format.md)")
            return Decimal(0)
        if positive and number <= 0:
            self.bad(field, f"must be > 0, got {value}")
        elif not positive and number < 0:
            self.bad(field, f"must be >= 0, got {value}")
        return number

    def choice(self, field: str, allowed: tuple[str, ...]) -> str:
        value = self.raw.get(field)
        if value is None:
            # `dimension:` with nothing after it (YAML null): say so, not "unknown value None".
            self.bad(field, f"has no value: write one of {', '.join(allowed)}, or leave it out")
        elif value not in allowed:
            self.bad(field, f"unknown value {value!r:.60}, expected one of {', '.join(allowed)}")
        return value if isinstance(value, str) else ""

    def read(self, rules: frozenset[str]) -> CaseDef:
        for key in self.raw:
            if key not in CASE_FIELDS:
                self.bad(key, f"unknown field (known: {', '.join(CASE_FIELDS)})")
        cid = self.raw.get("id")
        if not isinstance(cid, str) or not _CASE_ID.fullmatch(cid):
            self.bad("id", f"must match {_CASE_ID.pattern}, got {cid!r:.60}")
        order = self.raw.get("row_order_significant", False)
        if not isinstance(order, bool):
            self.bad("row_order_significant", f"must be true or false, got {order!r:.60}")
        max_rows = self.raw.get("max_rows")
        if "max_rows" not in self.raw:
            pass  # derived from the gold (CaseDef.row_bound)
        elif max_rows is None:
            self.bad("max_rows", "must be a positive integer, got None (leave it away to derive)")
            max_rows = 0
        elif isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
            self.bad("max_rows", f"must be a positive integer, got {max_rows!r:.60}")
            max_rows = 0
        elif max_rows > MAX_ROWS:
            self.bad("max_rows", f"must be at most {MAX_ROWS:,}, got {max_rows}")
            max_rows = 0
        ast = self.raw.get("required_ast", [])
        if not isinstance(ast, list) or not all(isinstance(r, str) for r in ast):
            self.bad("required_ast", f"must be a list of rule names, got {ast!r:.60}")
            ast = []
        for rule in ast:
            if rule not in rules:
                self.bad(
                    "required_ast", f"unknown rule {rule!r} (known: {', '.join(sorted(rules))})"
                )
        if len(set(ast)) != len(ast):
            self.bad("required_ast", "a rule is listed twice")
        return CaseDef(
            id=self.cid,
            dimension=self.optional_choice("dimension", DIMENSIONS),
            difficulty=self.optional_choice("difficulty", DIFFICULTIES),
            weight=self.decimal("weight", required=True, positive=True, maximum=MAX_WEIGHT)
            if "weight" in self.raw
            else Decimal(1),
            question=self.text("question", required=True) or "",
            question_en=self.text("question_en", required=False, default=None),
            reference_sql=self.text("reference_sql", required=True) or "",
            row_order_significant=order is True,
            abs_tolerance=self.decimal("abs_tolerance", required=False, positive=False),
            rel_tolerance=self.decimal(
                "rel_tolerance", required=False, positive=False, maximum=Decimal(1)
            ),
            max_rows=None if max_rows is None else max_rows if isinstance(max_rows, int) else 0,
            required_ast=tuple(ast),
            notes=self.text("notes", required=False) or "",
            line=self.line(),
            index=self.index,
            leak_waiver=self.waiver(),
            rows=self.row_contract(order is True),
            benchmark=self.benchmark_ref(),
        )

    def optional_choice(self, field: str, allowed: tuple[str, ...]) -> str:
        """A dimension or difficulty; ``unassigned`` when the case gives none (it is not
        written out: a case either has a value or leaves the field away)."""
        if field not in self.raw:
            return UNASSIGNED
        return self.choice(field, allowed)

    def benchmark_ref(self) -> BenchmarkCase | None:
        """``benchmark``: the case's place in the benchmark it was imported from."""
        raw = self.raw.get("benchmark")
        if raw is None:
            return None
        known = ("index", "question_id", "difficulty", "order_by", "distinct", "rewritten")
        if not isinstance(raw, dict) or any(k not in known for k in raw):
            self.bad("benchmark", f"must be a mapping with keys {', '.join(known)}")
            return None
        index = raw.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            self.bad("benchmark", f"index must be an integer >= 0, got {index!r:.40}")
            return None
        texts = {k: raw.get(k) for k in ("question_id", "difficulty")}
        for key, value in texts.items():
            if value is not None and not isinstance(value, str | int):
                self.bad("benchmark", f"{key} must be a string, got {value!r:.40}")
                return None
        # Issue 31: Spider's gold facts; written only when true / present.
        for key in ("order_by", "rewritten"):
            if raw.get(key, True) is not True:
                self.bad("benchmark", f"{key} must be true when present, got {raw[key]!r:.40}")
                return None
        distinct = raw.get("distinct")
        if distinct is not None and distinct not in ("select", "other"):
            self.bad("benchmark", f"distinct must be select or other, got {distinct!r:.40}")
            return None
        return BenchmarkCase(
            index=index,
            question_id=None if texts["question_id"] is None else str(texts["question_id"]),
            difficulty=None if texts["difficulty"] is None else str(texts["difficulty"]),
            order_by=True if "order_by" in raw else UNSET,
            distinct=UNSET if distinct is None else distinct,
            rewritten=True if "rewritten" in raw else UNSET,
        )

    def row_contract(self, ordered: bool) -> str:
        """``rows``: multiset (the default: duplicate rows count) or set (they do not)."""
        if "rows" not in self.raw:
            return "multiset"
        value = self.choice("rows", ROW_CONTRACTS)
        if value == "set" and ordered:
            self.bad(
                "rows",
                "rows: set compares rows without their order, so it cannot be combined with "
                "row_order_significant: true (drop one of them)",
            )
        return value if value in ROW_CONTRACTS else "multiset"

    def waiver(self) -> str | None:
        """``leak_waiver``: the reason this case's own gold may appear in its prompt."""
        value = self.text("leak_waiver", required=False, default=None)
        if value is not None and len(value.strip()) < MIN_WAIVER_CHARS:
            self.bad(
                "leak_waiver",
                f"the reason must say why the case's own gold may appear in its prompt, in "
                f"at least {MIN_WAIVER_CHARS} characters; got {value!r:.60}",
            )
            return None
        return value


def _check_semantic(doc: Any, problems: Problems) -> None:
    name = "semantic.json"
    if not isinstance(doc, dict):
        problems.add(name, "must be a JSON object with keys " + ", ".join(SEMANTIC_KEYS))
        return
    for key in doc:
        if key not in SEMANTIC_KEYS:
            problems.add(name, f"unknown top-level key {key!r} (known: {', '.join(SEMANTIC_KEYS)})")
    for key in SEMANTIC_KEYS:
        items = doc.get(key)
        if not isinstance(items, list):
            problems.add(name, f"{key}: must be a list, got {items!r:.40}")
            continue
        for i, item in enumerate(items):
            if key == "business_rules":
                if not isinstance(item, str) or not item.strip():
                    problems.add(name, f"{key}[{i}]: must be a non-empty string")
            elif not isinstance(item, dict) or not isinstance(item.get("name"), str):
                problems.add(name, f"{key}[{i}]: must be an object with a string 'name'")


def _check_placeholders(template: str, problems: Problems) -> None:
    name = "prompt.md"
    seen: dict[str, int] = {}
    for match in PLACEHOLDER_RE.finditer(template):
        line = template.count("\n", 0, match.start()) + 1
        key = match.group(1)
        if key not in PLACEHOLDERS:
            problems.add(name, f"unknown placeholder {match.group()!r}", line=line)
        elif key in seen:
            problems.add(name, f"placeholder {match.group()!r} appears twice", line=line)
        seen.setdefault(key, line)
    for key in PLACEHOLDERS:
        if key not in seen:
            problems.add(name, f"placeholder '{{{{{key}}}}}' is missing (needed exactly once)")
    stray = PLACEHOLDER_RE.sub("", template)
    for marker in ("{{", "}}"):
        if marker in stray:
            line = stray.count("\n", 0, stray.index(marker)) + 1
            problems.add(
                name, f"unbalanced {marker!r} (placeholders look like {{{{name}}}})", line=line
            )


def validate_source(src: BankSource, *, engine: str | None = None) -> Bank:
    """Check everything that needs no database. Raises one BankError listing every problem."""
    problems = Problems(str(src.folder))
    doc = src.cases_doc
    lines = src.cases_lines
    if not isinstance(doc, dict):
        problems.add("cases.yaml", "must be a mapping with bank, version and cases", line=1)
        problems.raise_if_any()
    for key in doc:
        if key not in TOP_FIELDS:
            problems.add(
                "cases.yaml",
                f"unknown top-level field (known: {', '.join(TOP_FIELDS)})",
                line=lines.get((key,)),
                field=key,
            )
    bank_id, version = doc.get("bank"), doc.get("version")
    if not isinstance(bank_id, str) or not _BANK_ID.fullmatch(bank_id):
        problems.add(
            "cases.yaml",
            f"must match {_BANK_ID.pattern}, got {bank_id!r:.60}",
            line=lines.get(("bank",)),
            field="bank",
        )
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        problems.add(
            "cases.yaml",
            f"must be a string matching {_VERSION.pattern} (quote it), got {version!r:.60}",
            line=lines.get(("version",)),
            field="version",
        )
    description = doc.get("description", "")
    if not isinstance(description, str):
        problems.add(
            "cases.yaml", "must be a string", line=lines.get(("description",)), field="description"
        )
    raw_cases = doc.get("cases")
    cases: list[CaseDef] = []
    if not isinstance(raw_cases, list) or not raw_cases:
        problems.add(
            "cases.yaml",
            "must be a non-empty list of cases",
            line=lines.get(("cases",)),
            field="cases",
        )
        raw_cases = []
    rules = known_rules()
    first_line: dict[str, int | None] = {}
    for i, raw in enumerate(raw_cases):
        if not isinstance(raw, dict):
            problems.add(
                "cases.yaml", f"case #{i + 1} must be a mapping", line=lines.get(("cases", i))
            )
            continue
        case = _CaseReader(raw, i, src, problems).read(rules)
        if case.id in first_line:
            problems.add(
                "cases.yaml",
                f"duplicate case id (first at line {first_line[case.id]})",
                line=case.line,
                case=case.id,
                field="id",
            )
        first_line.setdefault(case.id, case.line)
        cases.append(case)
    _check_semantic(src.semantic_doc, problems)
    _check_placeholders(src.text("prompt.md"), problems)
    check_purity(src.text("schema.sql"), "schema.sql", problems)
    if "seed.sql" in src.files:
        check_purity(src.text("seed.sql"), "seed.sql", problems)
    benchmark = _benchmark_source(doc.get("benchmark"), lines, problems)
    written_for = doc.get("engine", "duckdb")
    if written_for not in ENGINES:
        problems.add(
            "cases.yaml",
            f"must be one of {', '.join(ENGINES)}, got {written_for!r:.60}",
            line=lines.get(("engine",)),
            field="engine",
        )
        written_for = "duckdb"
    if engine is not None and engine not in ENGINES:
        problems.add(str(src.folder), f"--engine must be one of {', '.join(ENGINES)}")
    problems.raise_if_any()
    runs_on = engine or written_for
    if runs_on != "duckdb":  # the engine is part of the bank's identity
        src = dataclasses.replace(src, content_sha256=content_hash(src.file_hashes, runs_on))
    return Bank(
        source=src,
        bank_id=str(bank_id),
        version=str(version),
        description=description if isinstance(description, str) else "",
        cases=tuple(cases),
        engine=runs_on,
        written_for=written_for,
        benchmark=benchmark,
    )


def _benchmark_source(raw: Any, lines: Any, problems: Problems) -> BenchmarkSource | None:
    """cases.yaml ``benchmark``: {name, questions, questions_sha256, rows} (issue 16)."""
    if raw is None:
        return None
    line = lines.get(("benchmark",))
    known = ("name", "questions", "questions_sha256", "rows")
    if not isinstance(raw, dict) or any(k not in known for k in raw):
        problems.add(
            "cases.yaml",
            f"must be a mapping with keys {', '.join(known)}",
            line=line,
            field="benchmark",
        )
        return None
    name, questions, digest = raw.get("name"), raw.get("questions"), raw.get("questions_sha256")
    rows = raw.get("rows", "set")
    if name not in BENCHMARKS:
        problems.add(
            "cases.yaml",
            f"name must be one of {', '.join(BENCHMARKS)}, got {name!r:.40}",
            line=line,
            field="benchmark",
        )
    if not isinstance(questions, str) or not questions:
        problems.add("cases.yaml", "questions must name the question file", line=line,
                     field="benchmark")  # fmt: skip
    if not isinstance(digest, str) or not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        problems.add("cases.yaml", "questions_sha256 must be sha256:<64 hex>", line=line,
                     field="benchmark")  # fmt: skip
    if rows not in ROW_CONTRACTS:
        problems.add("cases.yaml", f"rows must be one of {', '.join(ROW_CONTRACTS)}",
                     line=line, field="benchmark")  # fmt: skip
    if not (isinstance(name, str) and isinstance(questions, str) and isinstance(digest, str)):
        return None
    return BenchmarkSource(name=name, questions=questions, questions_sha256=digest,
                           rows=str(rows))  # fmt: skip


def load_bank(folder: Path, *, engine: str | None = None) -> Bank:
    """Read, normalise, hash and structurally validate a bank folder.

    ``engine`` publishes the bank for another engine than the one cases.yaml
    names (its SQL is transpiled with sqlglot); None: the bank's own.
    """
    return validate_source(read_source(folder), engine=engine)
