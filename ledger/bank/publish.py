"""Validate and publish a bank: build, freeze gold, check for leaks, append BankPublished."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from ledger.bank.build import build_database, build_settings, freeze_gold_at, gold_digest, tables_at
from ledger.bank.leak import leak_context, leak_findings, shared_findings
from ledger.bank.model import Bank, load_bank
from ledger.bank.problems import Problems
from ledger.bank.registry import DB_SUFFIX, REPO_ROOT, PublishedBank, bank_paths, list_published
from ledger.engines import discard
from ledger.engines.cells import type_class
from ledger.engines.duckdb_build import Progress, require_duckdb
from ledger.errors import BankError, StoreConflictError, broken
from ledger.events import LEDGER_STREAM, BankPublished, Column, EngineDifference, GoldResult
from ledger.harness.align import column_info
from ledger.harness.compare import compare
from ledger.harness.prompt import render_prompt
from ledger.keys import Signer
from ledger.store import Draft, Ledger

__all__ = ["Checked", "PublishResult", "check_built", "publish", "validate_bank"]

# Envelope used only to render prompts before the event exists; never stored.
_PREVIEW_ENVELOPE: dict[str, Any] = {
    "stream": LEDGER_STREAM,
    "stream_seq": 0,
    "stream_prev": None,
    "at": "1970-01-01T00:00:00.000000Z",
}


@dataclass(frozen=True)
class Checked:
    """A bank that built, froze its gold and passed the leak check: the BankPublished fields."""

    bank: Bank
    fields: dict[str, Any]

    def preview(self) -> BankPublished:
        """The event as it would be published (with a placeholder envelope)."""
        return BankPublished(**_PREVIEW_ENVELOPE, **self.fields)


@dataclass(frozen=True)
class PublishResult:
    """The published bank, and whether this call appended it (False: it was already there)."""

    published: PublishedBank
    created: bool


def _silent(_: str) -> None:
    return None


def _fields(
    bank: Bank,
    db_path: Path,
    differences: tuple[EngineDifference, ...] = (),
    progress: Progress = _silent,
) -> dict[str, Any]:
    tables = tables_at(db_path, bank)
    gold = freeze_gold_at(db_path, bank, progress=progress)
    settings = build_settings(bank)
    if differences:
        settings = msgspec.structs.replace(settings, engine_differences=differences)
    src = bank.source
    gold_rows = {g.case_id: len(g.rows) for g in gold}
    fields: dict[str, Any] = {
        "bank_id": bank.bank_id,
        "version": bank.version,
        "description": bank.description,
        "content_sha256": src.content_sha256,
        "files": dict(src.file_hashes),
        "calibration_sha256": src.calibration_sha256,
        "build": settings,
        "schema_sql": bank.engine_sql(bank.schema_sql),
        "tables": tables,
        "semantic_json": bank.semantic_json,
        "prompt_template": bank.prompt_template,
        "cases": tuple(case.spec(gold_rows[case.id]) for case in bank.cases),
        "gold": gold,
        "gold_digest": gold_digest(gold),
    }
    if bank.benchmark is not None:  # left out otherwise: existing banks keep their bytes
        fields["benchmark"] = bank.benchmark
    return fields


def _anti_memorisation(checked: Checked, paths: Iterable[Path], cwd: Path | None) -> None:
    bank, event = checked.bank, checked.preview()
    # Issue 16: a case's prompt and notes against its own gold and SQL; the
    # shared files against every case (docs/bank-format.md "The leak check").
    ctx = leak_context(
        {c.id: c.reference_sql for c in bank.cases},
        event.gold,
        gold_digest=event.gold_digest,
        paths=paths,
        cwd=cwd,
        waivers={c.id: c.leak_waiver for c in bank.cases if c.leak_waiver is not None},
    )
    problems = Problems(bank.ref)
    for spec in event.cases:
        for finding in leak_findings(render_prompt(event, spec), ctx, case_id=spec.id):
            problems.add("prompt.md", f"the rendered prompt {finding}", case=spec.id)
    for name in ("semantic.json", "prompt.md"):
        for finding in shared_findings(bank.source.text(name), ctx):
            problems.add(name, finding)
    for case in bank.cases:
        for finding in leak_findings(case.notes, ctx, case_id=case.id):
            line = bank.line_of(case, "notes")
            problems.add("cases.yaml", finding, line=line, case=case.id, field="notes")
    problems.raise_if_any(hint="a prompt must never carry answers; remove the leaking text")


def engine_differences(bank: Bank, built: Path, work: Path) -> tuple[EngineDifference, ...]:
    """The cases whose gold on ``bank.engine`` differs from their gold on the engine the
    bank's SQL is written for (none when they are the same engine).

    The source engine's database is built in ``work``. Two golds are the same when
    the scorer's comparator (the case's tolerances and order contract) matches every
    row with the columns aligned by position (the same query on both engines; only
    the names of unaliased expressions differ between them).
    """
    if bank.engine == bank.written_for:
        return ()
    source = dataclasses.replace(bank, engine=bank.written_for)
    source_db = work / f"source{DB_SUFFIX[bank.written_for]}"
    try:
        build_database(source, source_db)
        theirs = {g.case_id: g for g in freeze_gold_at(source_db, source)}
    finally:
        discard(bank.written_for, source_db)
    ours = {g.case_id: g for g in freeze_gold_at(built, bank)}
    found = []
    for case in bank.cases:
        a, b = theirs[case.id], ours[case.id]
        # The same query on both engines: column i is column i. An unaliased
        # expression is named by each engine its own way (SQLite keeps the source
        # text, ``COUNT(T1.id)``; DuckDB renders it, ``count(t1.id)``).
        columns = b.columns
        if len(columns) == len(a.columns):
            columns = tuple(
                msgspec.structs.replace(c, name=n.name)
                for c, n in zip(columns, a.columns, strict=True)
            )
        c = compare(
            a.columns,
            a.rows,
            columns,
            b.rows,
            abs_tolerance=case.abs_tolerance,
            rel_tolerance=case.rel_tolerance,
            order_significant=case.row_order_significant,
        )
        if c.alignment == "names" and c.matched == c.expected_rows == c.actual_rows and c.order_ok:
            continue
        found.append(
            EngineDifference(
                case_id=case.id,
                detail=_difference(bank.written_for, a, bank.engine, b.rows, columns),
            )
        )
    return tuple(found)


def _normalised_rows(columns: Sequence[Column], rows: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Each row as the comparator sees its cells (type class, value), by position."""
    values = [column_info(c, rows, i).normalised for i, c in enumerate(columns)]
    classes = [type_class(c.type) for c in columns]
    return [
        tuple((classes[i], values[i][r]) for i in range(len(columns))) for r in range(len(rows))
    ]


def _difference(
    source: str, a: GoldResult, engine: str, rows: Sequence[tuple[Any, ...]], columns: Any
) -> str:
    """What differs between the two golds (issue 31): the rows each side has that the
    other has not (up to three each, with how many), else where the order parts."""
    if len(a.columns) != len(columns):
        names = [c.name for c in a.columns], [c.name for c in columns]
        return (
            f"{source}: {len(a.columns)} columns {_preview([names[0]])}; "
            f"{engine}: {len(columns)} columns {_preview([names[1]])}"
        )
    mine, theirs = _normalised_rows(a.columns, a.rows), _normalised_rows(columns, rows)
    only_a = Counter(mine) - Counter(theirs)
    only_b = Counter(theirs) - Counter(mine)
    if not only_a and not only_b:
        at = next((i for i, (x, y) in enumerate(zip(mine, theirs, strict=True)) if x != y), 0)
        return (
            f"the same {len(a.rows)} rows in another order, from row {at + 1}: "
            f"{source} {_preview(a.rows[at : at + 1])}, {engine} {_preview(rows[at : at + 1])}"
        )

    def side(name: str, all_rows: Sequence[Any], keys: list[Any], only: Counter[Any]) -> str:
        left = Counter(only)
        differing = []
        for row, key in zip(all_rows, keys, strict=True):
            if left[key] > 0:
                left[key] -= 1
                differing.append(row)
        count = sum(only.values())
        shown = f", {count} not in the other" if count != len(all_rows) else ""
        return f"{name}: {len(all_rows)} rows{shown} {_preview(differing)}"

    kinds = [
        f"column {i + 1} ({x.name}) is {x.type} on {source}, {y.type} on {engine}"
        for i, (x, y) in enumerate(zip(a.columns, columns, strict=True))
        if type_class(x.type) != type_class(y.type)
    ]
    told = f"{'; '.join(kinds)}: " if kinds else ""
    return f"{told}{side(source, a.rows, mine, only_a)}; {side(engine, rows, theirs, only_b)}"


def _preview(rows: Iterable[Iterable[Any]]) -> str:
    first = [list(r) for r in list(rows)[:3]]
    return json.dumps(first, default=str, ensure_ascii=False)[:240]


def check_built(
    bank: Bank,
    db_path: Path,
    *,
    paths: Iterable[Path] = (),
    cwd: Path | None = None,
    differences: tuple[EngineDifference, ...] = (),
    progress: Progress = _silent,
) -> Checked:
    """Freeze gold on a built database, snapshot its tables and run the leak check
    (``progress`` gets "freezing gold k/N" and "leak check")."""
    checked = Checked(bank, _fields(bank, db_path, differences, progress))
    progress("leak check")
    _anti_memorisation(checked, [bank.source.folder, db_path, REPO_ROOT, *paths], cwd)
    return checked


def validate_bank(
    folder: Path,
    *,
    paths: Iterable[Path] = (),
    cwd: Path | None = None,
    engine: str | None = None,
    accept_engine_differences: bool = False,
    progress: Progress = _silent,
) -> Checked:
    """Everything publishing checks, with the database built in a temporary folder.

    ``progress`` gets one line per step ("reading <folder>", "building <ref> on
    <engine>", "loading table <name>", "freezing gold k/N", "leak check"), for a
    person waiting on a large bank; the result does not depend on it.
    """
    require_duckdb()
    progress(f"reading {folder}")
    bank = load_bank(folder, engine=engine)
    with tempfile.TemporaryDirectory(prefix="caseledger-bank-") as tmp:
        db_path = Path(tmp) / f"validate-{bank.source.hexhash}{DB_SUFFIX[bank.engine]}"
        try:
            build_database(bank, db_path, progress=progress)
            differences = _accepted(bank, db_path, Path(tmp), accept_engine_differences)
            return check_built(
                bank, db_path, paths=paths, cwd=cwd, differences=differences, progress=progress
            )
        finally:
            discard(bank.engine, db_path)


def _accepted(bank: Bank, built: Path, work: Path, accept: bool) -> tuple[EngineDifference, ...]:
    differences = engine_differences(bank, built, work)
    if differences and not accept:
        problems = Problems(f"{bank.ref} on {bank.engine}")
        for d in differences:
            problems.add(
                "cases.yaml",
                f"gold on {bank.engine} differs from gold on {bank.written_for}: {d.detail}",
                case=d.case_id,
                field="reference_sql",
            )
        problems.raise_if_any(
            hint="fix the reference SQL so both engines agree, or pass "
            "--accept-engine-differences to publish with the differences listed"
        )
    return differences


def _store_files(bank: Bank, files_dir: Path) -> None:
    if files_dir.is_dir():
        return  # content-addressed: same hash, same bytes
    tmp = files_dir.with_name(f".{files_dir.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    bank.source.write_to(tmp)
    try:
        tmp.rename(files_dir)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # another publisher won the race
        if not files_dir.is_dir():
            raise


def _place(bank: Bank, built: Path, db_path: Path, files_dir: Path) -> None:
    _store_files(bank, files_dir)
    if not db_path.exists():
        # Files an engine keeps beside its database (``<name>.password`` of a
        # PostgreSQL build) move with it.
        for side in sorted(built.parent.glob(f"{built.name}.*")):
            os.replace(side, db_path.with_name(db_path.name + side.name[len(built.name) :]))
        built.chmod(0o444)
        os.replace(built, db_path)


def _restore(found: PublishedBank, bank: Bank) -> None:
    # The ledger names this hash but the files beside it are gone (a copied ledger):
    # rebuild, and accept the rebuild only when its gold equals the published gold.
    if found.db_path.is_file() and found.files_dir.is_dir():
        return
    found.db_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=found.db_path.parent) as tmp:
        built = Path(tmp) / found.db_path.name
        build_database(bank, built)
        fields = _fields(bank, built)
        if fields["gold_digest"] != found.event.gold_digest:
            raise BankError(
                f"rebuilding {found.ref} gives gold {fields['gold_digest']}, the ledger has "
                f"{found.event.gold_digest} (seq {found.seq})"
            )
        _place(bank, built, found.db_path, found.files_dir)


def _existing(ledger: Ledger, home: Path, bank: Bank) -> PublishedBank | None:
    for found in list_published(ledger, home):
        if found.event.content_sha256 == bank.content_sha256:
            return found
        same = (found.event.bank_id, found.event.version, found.event.build.engine)
        if same == (bank.bank_id, bank.version, bank.engine):
            raise BankError(
                f"bank {bank.ref} is already published (seq {found.seq}) with content "
                f"{found.event.content_sha256}; {bank.source.folder} hashes to "
                f"{bank.content_sha256}",
                hint="a published version never changes: bump `version` in cases.yaml "
                "(e.g. v4 -> v5) and publish again",
            )
    return None


def publish(
    ledger: Ledger,
    signer: Signer,
    source_folder: Path,
    home: Path,
    *,
    cwd: Path | None = None,
    engine: str | None = None,
    accept_engine_differences: bool = False,
    progress: Progress = _silent,
) -> PublishResult:
    """Validate, build, freeze gold and append one BankPublished (a no-op when already published).

    The database goes to ``<home>/banks/<hex>.duckdb`` (``.sqlite``; for PostgreSQL
    a ``.postgres.json`` naming the server database) and the normalised files to
    ``<home>/banks/<hex>/``, both read-only from then on. ``engine``: publish for
    another engine than cases.yaml names (SQL transpiled; gold compared with the
    bank's own engine, differences refused unless ``accept_engine_differences``).
    ``progress``: the lines of :func:`validate_bank` (none after "reading" when the
    bank is already published).
    """
    require_duckdb()
    progress(f"reading {source_folder}")
    bank = load_bank(source_folder, engine=engine)
    found = _existing(ledger, home, bank)
    if found is not None:
        _restore(found, bank)
        return PublishResult(found, created=False)
    db_path, files_dir = bank_paths(home, bank.content_sha256, bank.engine)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=db_path.parent, prefix=".build-") as tmp:
        built = Path(tmp) / db_path.name
        try:
            build_database(bank, built, progress=progress)
            differences = _accepted(bank, built, Path(tmp), accept_engine_differences)
            private = [db_path, files_dir, home, ledger.path, built]
            checked = check_built(
                bank,
                built,
                paths=private,
                cwd=cwd or Path.cwd(),
                differences=differences,
                progress=progress,
            )
        except BaseException:
            discard(bank.engine, built)
            raise
        _place(bank, built, db_path, files_dir)
    draft = Draft(BankPublished, LEDGER_STREAM, checked.fields)
    for _ in range(3):
        size = ledger.size()
        with contextlib.suppress(StoreConflictError):
            (seq,) = ledger.append([draft], signer, expect_size=size)
            event = ledger.get(seq)
            published = event.event() if event is not None else None
            if not isinstance(published, BankPublished):
                raise broken(
                    f"seq {seq} was just appended as BankPublished but reads back otherwise"
                )
            return PublishResult(PublishedBank(published, seq, db_path, files_dir), True)
        # Someone appended meanwhile: maybe this very bank, maybe a conflicting version.
        found = _existing(ledger, home, bank)
        if found is not None:
            return PublishResult(found, created=False)
    raise BankError(f"could not publish {bank.ref}: the ledger kept moving", hint="retry")
