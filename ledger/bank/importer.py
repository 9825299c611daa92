"""Import public benchmarks as banks (issue 16): BIRD and Spider.

One bank folder per database. The database file becomes the bank's
``data.sqlite`` (copied unchanged; hashed by a canonical dump), ``schema.sql``
is the file's own CREATE statements, and every question becomes a case whose
``benchmark`` field records its index in the question file (the key of the
benchmark's prediction files) and the benchmark's own id and difficulty.
Fields the benchmark has no value for stay out of cases.yaml (dimension
``unassigned``, weight 1, max_rows derived from the gold), so nothing is
invented. Column descriptions a benchmark ships go to ``semantic.json``.

The bank runs on SQLite, the engine the benchmark's SQL is written for;
``engine="duckdb"`` writes a DuckDB bank instead (schema and reference SQL
transpiled by sqlglot, the rows loaded from the same file) and the caller
compares the two golds (``ledger.app.importing``).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.adapters.benchmark_files import bank_id_for
from ledger.bank.source import canonical_text
from ledger.engines.data_files import DATA_SQLITE, file_sha256
from ledger.errors import UsageError
from ledger.harness.benchmark_sql import spider_distinct, spider_order_by, spider_rewritten

__all__ = [
    "BIRD_DIFFICULTY",
    "ImportedBank",
    "Question",
    "read_bird",
    "read_spider",
    "write_bank",
]

#: BIRD's difficulty labels and the bank's.
BIRD_DIFFICULTY = {"simple": "easy", "moderate": "medium", "challenging": "hard"}

PROMPT = """You write one SQL query that answers a question about the database below.

## SQL dialect
{{dialect}}

## Schema
```sql
{{schema}}
```

## Semantic layer (column descriptions)
```json
{{semantic}}
```

## Question
{{question}}

## Answer format
Reply with exactly one JSON object that matches this JSON Schema, and nothing else:
```json
{{output_schema}}
```
"""


@dataclass(frozen=True)
class Question:
    """One benchmark question, as the benchmark gives it."""

    index: int  # position in the question file, from 0
    db_id: str
    question: str
    sql: str
    question_id: str | None = None
    evidence: str = ""
    difficulty: str | None = None


@dataclass(frozen=True)
class ImportedBank:
    """What ``write_bank`` wrote: the folder, the bank id and its cases."""

    folder: Path
    bank_id: str
    db_id: str
    cases: int
    database: Path


@dataclass
class _Columns:
    """Column descriptions per table (from BIRD's database_description or Spider's names)."""

    tables: dict[str, list[dict[str, str]]] = field(default_factory=dict)


def _load_json(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise UsageError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not valid JSON: {exc}") from None


def _text(item: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = item.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise UsageError(
            f"{where}: field {key!r} must be a non-empty string, got {value!r:.60}",
            hint="the file must be in the benchmark's published format",
        )
    return value


def read_bird(path: Path) -> list[Question]:
    """BIRD's question file: a JSON list of objects with ``question_id``, ``db_id``,
    ``question``, ``evidence``, ``SQL`` and ``difficulty``."""
    doc = _load_json(path)
    if not isinstance(doc, list):
        raise UsageError(f"{path}: must be a JSON list of questions (BIRD's dev.json layout)")
    out = []
    for index, item in enumerate(doc):
        where = f"{path}: question #{index} (index {index})"
        if not isinstance(item, dict):
            raise UsageError(f"{where}: must be an object")
        difficulty = item.get("difficulty")
        if difficulty is not None and difficulty not in BIRD_DIFFICULTY:
            raise UsageError(
                f"{where}: difficulty {difficulty!r} is not one of {', '.join(BIRD_DIFFICULTY)}"
            )
        qid = item.get("question_id")
        out.append(
            Question(
                index=index,
                db_id=_text(item, "db_id", where),
                question=_text(item, "question", where),
                sql=_text(item, "SQL", where),
                question_id=None if qid is None else str(qid),
                evidence=_text(item, "evidence", where, required=False),
                difficulty=difficulty,
            )
        )
    return out


def read_spider(path: Path, gold: Path | None = None) -> list[Question]:
    """Spider's question file (dev.json): objects with ``db_id``, ``question``, ``query``.

    ``gold``: Spider's gold file (``gold_example.txt``'s layout: one ``SQL<TAB>db_id``
    line per question, in the question file's order), the file Spider's evaluator scores
    against (issue 31). Each question's reference SQL is then its line's SQL instead of
    ``query``; a line count or a ``db_id`` that does not match is refused.
    """
    questions = _read_spider_questions(path)
    if gold is None:
        return questions
    try:
        lines = [ln for ln in gold.read_text(encoding="utf-8").split("\n") if ln.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read Spider gold file {gold}: {exc}") from None
    if len(lines) != len(questions):
        raise UsageError(
            f"{gold}: {len(lines)} gold lines for the {len(questions)} questions of {path}",
            hint="give the gold file that goes with this question file, one line per question",
        )
    out = []
    for number, (line, q) in enumerate(zip(lines, questions, strict=True), start=1):
        sql, tab, db_id = line.rstrip("\r").rpartition("\t")
        if not tab or not sql.strip():
            raise UsageError(f"{gold}:{number}: not 'SQL<TAB>db_id'")
        if db_id.strip() != q.db_id:
            raise UsageError(
                f"{gold}:{number}: db_id {db_id.strip()!r}, but question #{q.index} of "
                f"{path} is on {q.db_id!r}"
            )
        out.append(dataclasses.replace(q, sql=sql.strip()))
    return out


def _read_spider_questions(path: Path) -> list[Question]:
    doc = _load_json(path)
    if not isinstance(doc, list):
        raise UsageError(f"{path}: must be a JSON list of questions (Spider's dev.json layout)")
    out = []
    for index, item in enumerate(doc):
        where = f"{path}: question #{index}"
        if not isinstance(item, dict):
            raise UsageError(f"{where}: must be an object")
        out.append(
            Question(
                index=index,
                db_id=_text(item, "db_id", where),
                question=_text(item, "question", where),
                sql=_text(item, "query", where),
            )
        )
    return out


def spider_descriptions(tables_json: Path, db_id: str) -> dict[str, list[dict[str, str]]]:
    """Spider's natural-language table and column names (tables.json) for one database."""
    doc = _load_json(tables_json)
    if not isinstance(doc, list):
        raise UsageError(f"{tables_json}: must be a JSON list of databases (Spider's tables.json)")
    for db in doc:
        if isinstance(db, dict) and db.get("db_id") == db_id:
            tables = db.get("table_names_original") or []
            natural = db.get("column_names") or []
            original = db.get("column_names_original") or []
            out: dict[str, list[dict[str, str]]] = {str(t): [] for t in tables}
            for (t_index, name), (_, said) in zip(original, natural, strict=False):
                if not isinstance(t_index, int) or t_index < 0 or t_index >= len(tables):
                    continue  # the "*" column
                out[str(tables[t_index])].append({"name": str(name), "description": str(said)})
            return out
    raise UsageError(f"{tables_json}: has no database {db_id!r}")


def bird_descriptions(folder: Path) -> dict[str, list[dict[str, str]]]:
    """BIRD's ``database_description/<table>.csv`` files of one database, when present:
    column name, description and value description per table."""
    found: dict[str, list[dict[str, str]]] = {}
    desc = folder / "database_description"
    if not desc.is_dir():
        return found
    for path in sorted(desc.glob("*.csv")):
        rows: list[dict[str, str]] = []
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        for row in csv.DictReader(text.splitlines()):
            name = (row.get("original_column_name") or "").strip()
            if not name:
                continue
            item = {"name": name}
            for key, label in (
                ("column_description", "description"),
                ("value_description", "values"),
                ("data_format", "format"),
            ):
                value = " ".join((row.get(key) or "").split())
                if value:
                    item[label] = value
            rows.append(item)
        found[path.stem] = rows
    return found


def _schema_sql(database: Path) -> str:
    con = sqlite3.connect(database.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        rows = con.execute(
            "SELECT type, name, sql FROM sqlite_schema WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND sql IS NOT NULL ORDER BY rowid"
        ).fetchall()
    finally:
        con.close()
    tables = [str(sql).strip().rstrip(";") + ";\n" for kind, _, sql in rows if kind == "table"]
    views = [str(sql).strip().rstrip(";") + ";\n" for kind, _, sql in rows if kind == "view"]
    return "\n".join(tables + views)


def _relations(database: Path) -> list[dict[str, str]]:
    con = sqlite3.connect(database.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        names = [
            str(r[0])
            for r in con.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
            )
        ]
        out = []
        for table in names:
            keys: dict[int, list[tuple[str, str, str]]] = {}
            for row in con.execute("SELECT * FROM pragma_foreign_key_list(?)", (table,)):
                keys.setdefault(int(row[0]), []).append((str(row[2]), str(row[3]), str(row[4])))
            for number, parts in sorted(keys.items()):
                parent = parts[0][0]
                out.append(
                    {
                        "name": f"{table}_fk{number}",
                        "from": ", ".join(f"{table}.{c}" for _, c, _ in parts),
                        "to": ", ".join(f"{parent}.{p}" if p != "None" else parent
                                        for _, _, p in parts),
                    }
                )  # fmt: skip
        return out
    finally:
        con.close()


def _semantic(descriptions: dict[str, list[dict[str, str]]], database: Path) -> str:
    entities: list[dict[str, Any]] = [
        {"name": table, "table": table, **({"columns": columns} if columns else {})}
        for table, columns in sorted(descriptions.items())
    ]
    doc = {
        "entities": entities,
        "relations": _relations(database),
        "metrics": [],
        "dimensions": [],
        "business_rules": [],
    }
    return json.dumps(doc, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def question_text(q: Question) -> str:
    """The question as the model sees it: BIRD puts its evidence ("external
    knowledge") beside the question, so the bank does too."""
    if q.evidence.strip():
        return f"External knowledge: {q.evidence.strip()}\n{q.question.strip()}"
    return q.question.strip()


def _case(q: Question, benchmark: str, sql: str) -> dict[str, Any]:
    case: dict[str, Any] = {
        "id": f"q{q.question_id}" if q.question_id is not None else f"q{q.index}",
        "question": question_text(q),
        "reference_sql": sql.strip(),
    }
    if q.difficulty is not None:
        case["difficulty"] = BIRD_DIFFICULTY[q.difficulty]
    ref: dict[str, Any] = {"index": q.index}
    if q.question_id is not None:
        ref["question_id"] = q.question_id
    if q.difficulty is not None:
        ref["difficulty"] = q.difficulty
    if benchmark == "spider":  # what Spider's rule reads in the gold's own text (issue 31)
        if spider_order_by(q.sql):
            ref["order_by"] = True
        distinct = spider_distinct(q.sql)
        if distinct is not None:
            ref["distinct"] = distinct
        if spider_rewritten(q.sql):
            ref["rewritten"] = True
    case["benchmark"] = ref
    if benchmark not in ("bird", "spider"):
        raise UsageError(f"unknown benchmark {benchmark!r}")
    return case


def write_bank(
    *,
    benchmark: str,
    questions_file: Path,
    questions: Sequence[Question],
    database: Path,
    out: Path,
    version: str = "v1",
    descriptions: dict[str, list[dict[str, str]]] | None = None,
    engine: str = "sqlite",
    transpile: Any = None,
) -> ImportedBank:
    """Write one bank folder for one database at ``out`` (which must not exist).

    ``transpile``: for ``engine="duckdb"``, a function (sql, from, to) -> sql.
    """
    if not database.is_file():
        raise UsageError(
            f"{database}: database not found",
            hint="--databases names the folder holding <db_id>/<db_id>.sqlite",
        )
    if out.exists():
        raise UsageError(f"{out}: already exists", hint="remove it or choose another -o folder")
    db_id = questions[0].db_id if questions else database.stem
    bank_id = bank_id_for(db_id)
    schema = _schema_sql(database)
    # Every table of the database is an entity; a described one carries its columns.
    described: dict[str, list[dict[str, str]]] = {t: [] for t in _table_names(database)}
    described.update(descriptions or {})
    cases = []
    for q in questions:
        sql = q.sql if engine == "sqlite" else transpile(q.sql, "sqlite", engine)
        cases.append(_case(q, benchmark, sql))
    doc: dict[str, Any] = {
        "bank": bank_id,
        "version": version,
        "description": f"{benchmark.upper()} questions on the {db_id} database "
        f"(imported from {questions_file.name})",
        "benchmark": {
            "name": benchmark,
            "questions": questions_file.name,
            "questions_sha256": file_sha256(questions_file),
            # The benchmark's own row contract: BIRD compares sets, Spider multisets.
            "rows": "multiset" if benchmark == "spider" else "set",
        },
        "cases": cases,
    }
    if engine != "duckdb":
        doc["engine"] = engine
    tmp = out.with_name(f".{out.name}.import")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        shutil.copyfile(database, tmp / DATA_SQLITE)
        (tmp / "schema.sql").write_text(
            schema if engine == "sqlite" else transpile(schema, "sqlite", engine),
            encoding="utf-8",
        )
        (tmp / "semantic.json").write_text(_semantic(described, database), encoding="utf-8")
        (tmp / "prompt.md").write_text(PROMPT, encoding="utf-8")
        (tmp / "cases.yaml").write_text(_yaml(doc), encoding="utf-8")
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ImportedBank(out, bank_id, db_id, len(cases), database)


def _table_names(database: Path) -> Iterable[str]:
    con = sqlite3.connect(database.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        return [
            str(r[0])
            for r in con.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
            )
        ]
    finally:
        con.close()


def _yaml(doc: dict[str, Any]) -> str:
    """cases.yaml as block YAML a person can read (strings as JSON-quoted scalars,
    multi-line SQL as literal blocks), loading back to exactly ``doc``."""
    lines = ["# Imported by `caseledger bank import`; the benchmark's own fields only."]
    for key in ("bank", "version", "description", "engine"):
        if key in doc:
            lines.append(f"{key}: {canonical_text(doc[key])}")
    lines.append(f"benchmark: {canonical_text(doc['benchmark'])}")
    lines.append("cases:")
    for case in doc["cases"]:
        first = True
        for key, value in case.items():
            lead = "  - " if first else "    "
            first = False
            lines.append(f"{lead}{key}: {canonical_text(value)}")
    return "\n".join(lines) + "\n"
