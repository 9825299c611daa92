"""``bank import bird|spider``: write one bank per database, then validate each (issue 16).

Validation is the one publish runs (build, gold, leak check), so a user learns
at import time whether every question became a usable case. With
``engine="duckdb"`` the bank is converted (SQL transpiled by sqlglot, rows
loaded from the same SQLite file) and every case whose gold differs between
SQLite and DuckDB is reported.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ledger.bank.importer import (
    ImportedBank,
    Question,
    bird_descriptions,
    read_bird,
    read_spider,
    spider_descriptions,
    write_bank,
)
from ledger.bank.publish import validate_bank
from ledger.engines.sqlite_integrity import foreign_key_violations, format_violations
from ledger.engines.transpile import transpile
from ledger.errors import UsageError
from ledger.events import EngineDifference, ForeignKeyViolation

__all__ = ["ImportResult", "import_benchmark"]


@dataclass(frozen=True)
class ImportResult:
    """One imported bank: where it is, its size, its gold and its data's broken keys."""

    bank: ImportedBank
    ref: str
    content_sha256: str
    gold_rows: int
    differences: tuple[EngineDifference, ...]
    violations: tuple[ForeignKeyViolation, ...]


def _select(
    questions: list[Question], db_ids: tuple[str, ...], source: Path
) -> dict[str, list[Question]]:
    by_db: dict[str, list[Question]] = {}
    for q in questions:
        by_db.setdefault(q.db_id, []).append(q)
    if not db_ids:
        return by_db
    missing = [d for d in db_ids if d not in by_db]
    if missing:
        raise UsageError(
            f"{source}: no questions for database {', '.join(missing)}",
            hint=f"databases in the file: {', '.join(sorted(by_db))}",
        )
    return {d: by_db[d] for d in db_ids}


def import_benchmark(
    benchmark: str,
    questions_file: Path,
    databases: Path,
    out: Path,
    *,
    db_ids: tuple[str, ...] = (),
    tables_json: Path | None = None,
    gold: Path | None = None,
    engine: str = "sqlite",
    version: str = "v1",
    progress: Callable[[str], None] = lambda _: None,
) -> list[ImportResult]:
    """Import every (or each named) database of a BIRD or Spider question file.

    Banks go to ``out/<db_id>/``. ``gold`` (Spider only): Spider's gold file, whose SQL
    becomes the reference SQL (what Spider's evaluator scores against). Raises UsageError
    for a file that is not in the benchmark's layout (naming the file and question) and
    BankError when a bank does not validate (the folder is kept so the user can look at it).
    """
    if benchmark == "bird":
        if gold is not None:
            raise UsageError("--gold is for Spider (BIRD's gold SQL is in its question file)")
        questions = read_bird(questions_file)
    else:
        questions = read_spider(questions_file, gold)
        if tables_json is None:
            raise UsageError("spider import needs --tables TABLES.json (Spider's tables.json)")
    if engine not in ("sqlite", "duckdb"):
        raise UsageError(f"--engine must be sqlite or duckdb, got {engine}")
    selected = sorted(_select(questions, db_ids, questions_file).items())
    _check_paths([db_id for db_id, _ in selected], databases, out, questions_file)
    results = []
    for db_id, qs in selected:
        folder = databases / db_id
        database = folder / f"{db_id}.sqlite"
        if benchmark == "bird":
            described = bird_descriptions(folder)
        else:
            described = spider_descriptions(tables_json or Path(), db_id)
        progress(f"{db_id}: {len(qs)} questions, database {database}")
        results.append(
            _import_one(benchmark, questions_file, qs, database, out / db_id,
                        described, engine, version, progress)
        )  # fmt: skip
    return results


def _check_paths(db_ids: list[str], databases: Path, out: Path, source: Path) -> None:
    """Every database file there and no bank folder in the way, before any work: an
    import stops before it writes anything rather than after some of its banks."""
    missing = [databases / d / f"{d}.sqlite" for d in db_ids]
    missing = [p for p in missing if not p.is_file()]
    if missing:
        found = [d for d in db_ids if (databases / d / f"{d}.sqlite").is_file()]
        shown = "; ".join(str(p) for p in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise UsageError(
            f"{source}: database not found for {len(missing)} of the {len(db_ids)} "
            f"databases it names: {shown}{more}",
            hint="--databases names the folder holding <db_id>/<db_id>.sqlite"
            + (f"; import the ones there with --db-id {' --db-id '.join(found)}" if found else ""),
        )
    taken = [out / d for d in db_ids if (out / d).exists()]
    if taken:
        raise UsageError(
            f"{taken[0]}: already exists", hint="remove it or choose another -o folder"
        )


def _import_one(
    benchmark: str,
    questions_file: Path,
    questions: list[Question],
    database: Path,
    target: Path,
    described: dict[str, list[dict[str, str]]],
    engine: str,
    version: str,
    progress: Callable[[str], None],
) -> ImportResult:
    def write(
        out: Path, on: str = "sqlite", transpile: Callable[..., str] | None = None
    ) -> ImportedBank:
        return write_bank(
            benchmark=benchmark,
            questions_file=questions_file,
            questions=questions,
            database=database,
            out=out,
            version=version,
            descriptions=described,
            engine=on,
            transpile=transpile,
        )

    if not database.is_file():
        raise UsageError(
            f"{database}: database not found",
            hint="--databases names the folder holding <db_id>/<db_id>.sqlite",
        )
    violations = foreign_key_violations(database)
    differences: tuple[EngineDifference, ...] = ()
    if engine == "duckdb" and violations:
        total = sum(v.count for v in violations)
        raise UsageError(
            f"{database}: {total:,} rows break {len(violations)} foreign key(s) that "
            "DuckDB enforces, so the data cannot be loaded into DuckDB as it is: "
            + "; ".join(format_violations(violations)[:-1][:3]),
            hint="import it on sqlite (the default), which keeps the data as it is "
            "and records the broken keys",
        )
    if engine == "duckdb":
        with tempfile.TemporaryDirectory(prefix="caseledger-import-") as tmp:
            original = write(Path(tmp) / "sqlite")
            progress(f"{original.db_id}: comparing gold on sqlite and duckdb")
            converted = validate_bank(
                original.folder, engine="duckdb", accept_engine_differences=True
            )
            differences = converted.fields["build"].engine_differences
        bank = write(target, "duckdb", transpile)
    else:
        bank = write(target)
    progress(f"{bank.db_id}: validating {bank.folder}")
    checked = validate_bank(bank.folder, progress=progress)
    gold_rows = sum(len(g.rows) for g in checked.fields["gold"])
    return ImportResult(
        bank, checked.bank.ref, checked.bank.content_sha256, gold_rows, differences, violations
    )
