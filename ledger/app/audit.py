"""The auditor's export: what it takes to verify and recompute a ledger with no private key.

``export_audit`` writes one folder (docs/verification.md, "Auditing without the
operator's key"):

- ``ledger.db``: a consistent snapshot of the ledger, taken with SQLite's online
  backup API over a read-only connection, so a ledger being written is copied as
  of one committed transaction (a file copy of a WAL database can miss or tear the
  last batches);
- ``banks/<bank>@<version>/``: the files of every published bank, exactly the
  normalised bytes that were hashed, each checked against the per-file hashes of
  its BankPublished before it is written;
- ``checkpoint.note``: the newest signed checkpoint the snapshot holds (a
  CheckpointIssued note or an automatically stored one, whichever covers more);
- ``operator.pub``: the verifier key registered at seq 0 (for ``verify --key``);
- ``reports/``: the published reports, when given, each first rebuilt from the
  snapshot and compared byte for byte;
- ``README.md``: the exact commands, relative to the folder.

No private key is read or written. ``bank_folder`` and ``published_references``
are also how ``verify --recompute`` finds bank files, in either layout: ``<hex>/``
(what ``bank publish`` keeps beside a ledger) or ``<bank>@<version>/`` (an export).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ledger.app.reporting import report_bytes
from ledger.bank.model import Bank, validate_source
from ledger.bank.source import CALIBRATION_FILE, BankSource, content_hash, read_source
from ledger.codec import decode, leaf_hash, sha256_hex
from ledger.errors import BankError, StoreError, UsageError, VerificationError, broken
from ledger.events import BankPublished, CheckpointIssued, RunFinished, RunTotals
from ledger.store import Ledger
from ledger.store_rows import envelope_of
from projections.caseruns import BankInfo
from projections.report.build import stream_totals

__all__ = [
    "REPORT_FORMATS",
    "AuditExport",
    "ReportSpec",
    "audit_commands",
    "bank_folder",
    "check_bank_files",
    "check_run_totals",
    "export_audit",
    "newest_checkpoint",
    "published_bank",
    "published_references",
    "snapshot_ledger",
]

#: Report files an export can carry, in the order the README lists them.
REPORT_FORMATS = ("json", "md", "html")
LEDGER_FILE = "ledger.db"
CHECKPOINT_FILE = "checkpoint.note"
KEY_FILE = "operator.pub"
BANKS_DIR = "banks"
REPORTS_DIR = "reports"
README_FILE = "README.md"


# ----------------------------------------------------------------- bank files


def _ref(event: BankPublished) -> str:
    return f"{event.bank_id}@{event.version}"


def bank_folder(banks_dir: Path, event: BankPublished) -> Path | None:
    """The folder under ``banks_dir`` holding a published bank's files, if there is one.

    ``<hex of the content hash>/`` (the operator's store) is looked for first, then
    ``<bank>@<version>/`` (an audit export).
    """
    for name in (event.content_sha256.removeprefix("sha256:"), _ref(event)):
        if (banks_dir / name).is_dir():
            return banks_dir / name
    return None


def _raw_hashes(folder: Path, names: list[str]) -> dict[str, str | None]:
    # Used when the folder does not even parse: the file that broke it still shows up
    # as differing, because the published bytes always parse.
    return {
        n: sha256_hex((folder / n).read_bytes()) if (folder / n).is_file() else None for n in names
    }


def check_bank_files(folder: Path, event: BankPublished, seq: int) -> BankSource:
    """Read a bank folder and check every file against its BankPublished (at ``seq``).

    Files are compared after the same normalisation the content hash uses, so only a
    change that would change the bank hash is reported.

    Raises:
        VerificationError: naming the bank and each file that differs or is missing.
    """
    wanted = dict(event.files)
    if event.calibration_sha256 is not None:
        wanted[CALIBRATION_FILE] = event.calibration_sha256
    found: dict[str, str | None]
    source: BankSource | None
    try:
        source = read_source(folder)
        found = {**source.file_hashes, CALIBRATION_FILE: source.calibration_sha256}
    except BankError:
        source, found = None, _raw_hashes(folder, sorted(wanted))
    differ = [name for name in sorted(wanted) if found.get(name) != wanted[name]]
    if not differ and source is None:
        # Every published file is intact: what broke the read is a calibration.yaml
        # that was never published with this bank.
        raise VerificationError(
            f"seq {seq}: bank {_ref(event)}: {CALIBRATION_FILE} in {folder} was not "
            "published with this bank and does not load",
            seq=seq,
            hint=f"remove {folder / CALIBRATION_FILE}",
        )
    if differ:
        details = "; ".join(
            f"{name} is missing"
            if found.get(name) is None
            else f"{name} hashes to {found[name]}, published {wanted[name]}"
            for name in differ
        )
        raise VerificationError(
            f"seq {seq}: bank {_ref(event)}: {', '.join(differ)} in {folder} "
            f"differ{'s' if len(differ) == 1 else ''} from what BankPublished recorded ({details})",
            seq=seq,
            hint="these are not the bank files that were published; get them again from the "
            "operator (`caseledger export audit`)",
        )
    if source is None:
        raise broken("bank files checked but not read")
    content = content_hash(source.file_hashes, event.build.engine)
    if content != event.content_sha256:
        raise VerificationError(
            f"seq {seq}: bank {_ref(event)}: the per-file hashes of BankPublished give "
            f"{content}, but it records content {event.content_sha256}",
            seq=seq,
        )
    return source


def published_references(banks_dir: Path, event: BankPublished, seq: int) -> dict[str, str]:
    """Reference SQL by case id, from the checked files of a published bank under ``banks_dir``.

    Raises:
        UsageError: the files are not there (the check could not be made).
        VerificationError: they are there but differ from what was published.
    """
    bank = published_bank(banks_dir, event, seq)
    return bank.references()


def published_bank(banks_dir: Path, event: BankPublished, seq: int) -> Bank:
    """The loaded bank, from the checked files of a published bank under ``banks_dir``
    (what ``verify --recompute`` builds its database from).

    Raises:
        UsageError: the files are not there (the check could not be made).
        VerificationError: they are there but differ from what was published.
    """
    folder = bank_folder(banks_dir, event)
    if folder is None:
        hexhash = event.content_sha256.removeprefix("sha256:")
        raise UsageError(
            f"the files of bank {_ref(event)} (seq {seq}) are not in {banks_dir} "
            f"(looked for {_ref(event)}/ and {hexhash}/)",
            hint="pass --banks DIR with the folder holding them: an audit export "
            "(`caseledger export audit`) has them in banks/ beside its ledger.db",
        )
    source = check_bank_files(folder, event, seq)
    try:
        return validate_source(source, engine=event.build.engine)
    except BankError as exc:
        raise UsageError(
            f"bank {_ref(event)} in {folder} hashes as published but does not load: {exc.message}",
            hint="this caseledger version reads the bank differently; use the version "
            "that published it",
        ) from None


# ----------------------------------------------------------------- ledger parts


def check_run_totals(
    rows: Iterable[tuple[int, bytes, bytes]],
    seq: int,
    finished: RunFinished,
    bank: tuple[BankPublished, int] | None,
) -> None:
    """``verify --recompute``: re-derive the totals a RunFinished carries (issue 22).

    ``rows``: (seq, body, leaf hash) of the run's events before ``seq`` in stream
    order (read by the stream index of a ledger ``verify`` has just checked, or kept
    from the walk); each body must hash to its leaf and be numbered 0, 1, ... in the
    stream. They are folded with ``bank`` (the BankPublished its RunStarted names,
    and its seq) by the one definition ``caseledger runs`` uses
    (``projections.report.build.stream_totals``). A RunFinished without totals is
    not checked.

    Raises:
        VerificationError: naming ``seq`` and the first field that differs, or why the
            run can carry no totals (exit 1, as for a score that differs).
    """
    recorded = finished.totals
    if not isinstance(recorded, RunTotals):
        return
    stream = finished.stream
    items = []
    for count, (at, body, stored) in enumerate(rows):
        leaf = bytes(stored)
        head = envelope_of(at, body)
        if leaf_hash(body) != leaf or head.stream != stream or head.stream_seq != count:
            raise VerificationError(
                f"seq {at}: not event {count} of stream {stream} (read to re-derive the "
                f"totals of the RunFinished at seq {seq})",
                seq=at,
            )
        items.append((at, leaf, decode(body)))
    derived = None
    if bank is not None:
        derived = stream_totals(BankInfo(bank[1], bank[0]), items)
    if derived is None:
        raise VerificationError(
            f"seq {seq}: run.finished.v1 of {stream} carries totals, but the stream has no "
            "run on a published bank that can have them (a calibration run, a withdrawn "
            "run, or no RunStarted)",
            seq=seq,
        )
    for name in RunTotals.__struct_fields__:
        want, got = getattr(derived, name), getattr(recorded, name)
        if want != got:
            raise VerificationError(
                f"seq {seq}: run.finished.v1 of {stream}: totals.{name} is {got!r}, "
                f"re-derived from the run's events {want!r}",
                seq=seq,
            )


def snapshot_ledger(ledger_path: Path, dest: Path) -> None:
    """Copy a ledger as of one committed transaction into a new single-file ``dest``."""
    Ledger.open(ledger_path, readonly=True).close()  # a clear error when it is no ledger
    try:
        src = sqlite3.connect(ledger_path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            dst = sqlite3.connect(dest)
            try:
                src.backup(dst)
                # One self-contained file (no -wal beside it) that moves as it is.
                dst.execute("PRAGMA journal_mode=DELETE")
            finally:
                dst.close()
        finally:
            src.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot copy ledger {ledger_path}: {exc}") from None


def newest_checkpoint(ledger: Ledger) -> tuple[int, str] | None:
    """(tree size, signed note) of the checkpoint covering the most events, if any.

    Both kinds count: the notes of CheckpointIssued events and the checkpoints the
    store signs automatically (``Ledger.stored_checkpoints``).
    """
    found: list[tuple[int, str]] = []
    for row in ledger.events_of_type(CheckpointIssued):
        event = row.event()
        if not isinstance(event, CheckpointIssued):
            raise broken(f"seq {row.seq}: events_of_type gave another type")
        found.append((event.tree_size, event.note))
    found.extend(ledger.stored_checkpoints())
    return max(found, key=lambda cp: cp[0]) if found else None


def _operator_key(ledger: Ledger) -> str:
    entries = ledger.keyring().entries()
    if not entries or entries[0].registered_seq != 0:
        raise StoreError(f"{ledger.path} has no operator key registered at seq 0")
    return entries[0].verifier_key


# ----------------------------------------------------------------- reports and commands


@dataclass(frozen=True)
class ReportSpec:
    """How published reports were built (read from their report.json) and which formats exist."""

    at_size: int
    scorer: str | None
    runs: tuple[str, ...] | None
    with_gold: bool
    formats: tuple[str, ...]
    #: ``full`` for a ``caseledger-report/1`` report.json, ``compact`` for ``/2`` (issue 21),
    #: ``stats`` for ``/3`` (issue 32).
    detail: Literal["stats", "compact", "full"] = "full"

    def options(self) -> list[str]:
        """The ``report`` options that rebuild them (without ``--format``)."""
        out = ["--at-size", str(self.at_size)]
        if self.scorer is not None:
            out += ["--scorer", self.scorer]
        for run in self.runs or ():
            out += ["--run", run]
        if self.with_gold:
            out.append("--with-gold")
        return out


#: The ``--detail`` that rebuilds a report of each contract (every format: md and html
#: show the statistics only under ``/3``, issue 32).
_DETAIL_OF: dict[str, Literal["stats", "compact", "full"]] = {
    "caseledger-report/3": "stats",
    "caseledger-report/2": "compact",
}


def _report_spec(reports_dir: Path) -> ReportSpec:
    path = reports_dir / "report.json"
    if not path.is_file():
        raise UsageError(
            f"{reports_dir} holds no report.json",
            hint="pass the folder the published reports are in (report.json, and "
            "report.md / report.html when they were published)",
        )
    try:
        data = json.loads(path.read_text("utf-8"))
        size = data["checkpoint"]["tree_size"]
        scorer = data["scorer"]["requested"]
        runs = data["selection"]["runs"]
        view = data["view"]
        detail = _DETAIL_OF.get(str(data.get("contract")), "full")
        ok = (
            type(size) is int
            and (scorer is None or isinstance(scorer, str))
            and (runs is None or all(isinstance(r, str) for r in runs))
            and view in ("public", "internal-with-gold")
        )
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a caseledger report ({exc})") from None
    if not ok:
        raise UsageError(f"{path}: not a caseledger report (unexpected checkpoint/scorer/view)")
    formats = tuple(f for f in REPORT_FORMATS if (reports_dir / f"report.{f}").is_file())
    return ReportSpec(
        at_size=size,
        scorer=scorer,
        runs=None if runs is None else tuple(runs),
        with_gold=view == "internal-with-gold",
        formats=formats,
        detail=detail,
    )


def audit_commands(checkpoint_size: int, reports: ReportSpec | None) -> list[str]:
    """The commands an auditor runs inside the export folder: verify, then rebuild the reports.

    With published reports, each rebuild is piped into ``cmp`` against its copy in
    ``reports/`` (silent when the bytes are equal); without them, the reports at the
    checkpoint's size are written next to the ledger for comparison by hand.

    >>> audit_commands(7, None)[0]
    'caseledger --ledger ledger.db verify --key operator.pub --checkpoint checkpoint.note \
--banks banks --recompute'
    """
    base = ["caseledger", "--ledger", LEDGER_FILE]
    verify = ["verify", "--key", KEY_FILE, "--checkpoint", CHECKPOINT_FILE]
    lines = [shlex.join([*base, *verify, "--banks", BANKS_DIR, "--recompute"])]
    if reports is None:
        at = ["--at-size", str(checkpoint_size)]
        for fmt in REPORT_FORMATS:
            lines.append(shlex.join([*base, "report", *at, "--format", fmt, "-o", f"report.{fmt}"]))
        return lines
    for fmt in reports.formats:
        # `caseledger report` writes caseledger-report/3 by default (issue 32); a report
        # published under /1 or /2 is rebuilt with the --detail that names its contract, in
        # every format (before issue 32 md and html were the same under /1 and /2).
        detail = [] if reports.detail == "stats" else ["--detail", reports.detail]
        rebuild = shlex.join([*base, "report", *reports.options(), *detail, "--format", fmt])
        lines.append(f"{rebuild} | cmp - {REPORTS_DIR}/report.{fmt}")
    return lines


# ----------------------------------------------------------------- the export


@dataclass(frozen=True)
class AuditExport:
    """What ``export_audit`` wrote."""

    out_dir: Path
    size: int
    checkpoint_size: int
    banks: tuple[str, ...]
    reports: tuple[str, ...]
    commands: tuple[str, ...]


def _staging(out_dir: Path) -> Path:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise UsageError(
            f"{out_dir} already exists and is not an empty folder",
            hint="pick a new folder for the export (nothing was written)",
        )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    return stage


def _write_read_only(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o444)


def _export_banks(ledger: Ledger, banks_dir: Path, dest: Path) -> list[tuple[str, str]]:
    """Copy every published bank's checked files to ``dest/<bank>@<version>/``."""
    out: list[tuple[str, str]] = []
    for row in ledger.events_of_type(BankPublished):
        event = row.event()
        if not isinstance(event, BankPublished):
            raise broken(f"seq {row.seq}: events_of_type gave another type")
        folder = bank_folder(banks_dir, event)
        if folder is None:
            raise UsageError(
                f"the files of bank {_ref(event)} (seq {row.seq}) are not in {banks_dir}",
                hint="pass --banks DIR with the folder `bank publish` stored them in, or "
                "restore them there with `caseledger bank publish FOLDER`",
            )
        source = check_bank_files(folder, event, row.seq)
        target = dest / _ref(event)
        target.mkdir(parents=True)
        source.write_to(target, calibration=event.calibration_sha256 is not None)
        out.append((_ref(event), event.content_sha256))
    return out


def _export_reports(
    snapshot: Path, size: int, reports_dir: Path, dest: Path
) -> tuple[ReportSpec, list[str]]:
    spec = _report_spec(reports_dir)
    if spec.at_size > size:
        raise UsageError(
            f"{reports_dir / 'report.json'} was built at tree size {spec.at_size}, but the "
            f"ledger has {size} events",
            hint="export from the ledger the reports were built from",
        )
    dest.mkdir()
    names = []
    try:
        for fmt in spec.formats:
            name = f"report.{fmt}"
            given = (reports_dir / name).read_bytes()
            rebuilt, _, _ = report_bytes(
                snapshot,
                fmt=fmt,
                at_size=spec.at_size,
                runs=spec.runs,
                scorer=spec.scorer,
                with_gold=spec.with_gold,
                detail=spec.detail,
            )
            if rebuilt != given:
                raise VerificationError(
                    f"{reports_dir / name} is not what this ledger rebuilds at tree size "
                    f"{spec.at_size} ({len(given)} bytes given, {len(rebuilt)} rebuilt)",
                    hint="export the reports that were built from this ledger, or leave "
                    "--reports out",
                )
            _write_read_only(dest / name, given)
            names.append(f"{REPORTS_DIR}/{name}")
    finally:
        # Older read paths kept a projection cache beside the ledger, and a report now
        # reads through the tree index (a cache too, issue 21): never ship either.
        snapshot.with_name(snapshot.stem + ".projections.db").unlink(missing_ok=True)
        for cache in snapshot.parent.glob(snapshot.stem + ".index.db*"):
            cache.unlink(missing_ok=True)
    return spec, names


def _readme(
    *,
    size: int,
    checkpoint_size: int,
    key: str,
    banks: list[tuple[str, str]],
    reports: ReportSpec | None,
    commands: list[str],
) -> str:
    bank_lines = [f"  - `{BANKS_DIR}/{ref}/`: content `{sha}`" for ref, sha in banks] or [
        "  - (no bank was published)"
    ]
    lines = [
        "# caseledger audit export",
        "",
        "Everything needed to verify this ledger and re-derive every score, with no",
        "private key and no file of the operator's. Step by step: docs/verification.md,",
        '"Auditing without the operator\'s key".',
        "",
        f"- `{LEDGER_FILE}`: a snapshot of the ledger, {size} events.",
        f"- `{CHECKPOINT_FILE}`: the newest signed checkpoint, over the first "
        f"{checkpoint_size} events.",
        f"- `{KEY_FILE}`: the operator's verifier key, registered at seq 0:",
        "",
        f"      {key}",
        "",
        "  Trust it only if it equals the key the operator published apart from this",
        "  folder; everything below is checked against it.",
        "- the bank files exactly as published (normalised bytes, checked against the",
        "  per-file hashes of each BankPublished):",
        *bank_lines,
    ]
    if reports is not None:
        lines.append(
            f"- `{REPORTS_DIR}/`: the published reports, built at tree size {reports.at_size}."
        )
    lines += [
        "",
        "## Commands",
        "",
        "Run them inside this folder (exit 0 = holds, 1 = a check failed, 2 = could not check):",
        "",
        "```sh",
        *commands,
        "```",
        "",
        "The first verifies every event, signature and stream chain against the key and",
        "the checkpoint, then runs the SQL of every scored attempt again on a database",
        "built from the bank files in `banks/`, compares each result with the recorded one",
        "and scores every recorded attempt again from its evidence. It prints",
        "`verified: ...; scores recomputed` and a `recompute: ...` line counting the",
        "executions re-run, equal and not comparable (timeouts, memory stops).",
    ]
    if reports is not None:
        lines += [
            "The others rebuild each published report from the ledger; `cmp` prints",
            "nothing when the bytes are equal.",
        ]
    else:
        lines += [
            "The others rebuild the reports at the checkpoint's size; compare each with",
            "the report the operator published (`cmp report.json PUBLISHED/report.json`).",
            "When a published report names another tree size, use that in `--at-size`.",
        ]
    return "\n".join(lines) + "\n"


def export_audit(
    ledger_path: Path, out_dir: Path, *, banks_dir: Path, reports_dir: Path | None = None
) -> AuditExport:
    """Write the audit export of a ledger to ``out_dir`` (a new or empty folder).

    The folder appears whole or not at all: everything is written to a staging
    folder beside it and renamed at the end.

    Raises:
        UsageError / StoreError: no ledger, no checkpoint, bank files missing, the
            output folder not empty, unreadable reports (exit 2).
        VerificationError: a bank file or a given report differs from what the
            ledger says (exit 1).
    """
    stage = _staging(out_dir)
    try:
        snapshot = stage / LEDGER_FILE
        snapshot_ledger(ledger_path, snapshot)
        with Ledger.open(snapshot, readonly=True) as ledger:
            size = ledger.size()
            newest = newest_checkpoint(ledger)
            if newest is None:
                raise UsageError(
                    f"{ledger_path} holds no signed checkpoint to give the auditor",
                    hint="sign one first: caseledger checkpoint",
                )
            checkpoint_size, note = newest
            key = _operator_key(ledger)
            banks = _export_banks(ledger, banks_dir, stage / BANKS_DIR)
        (stage / CHECKPOINT_FILE).write_text(note, encoding="utf-8")
        (stage / KEY_FILE).write_text(key + "\n", encoding="utf-8")
        spec: ReportSpec | None = None
        report_files: list[str] = []
        if reports_dir is not None:
            spec, report_files = _export_reports(snapshot, size, reports_dir, stage / REPORTS_DIR)
        commands = audit_commands(checkpoint_size, spec)
        readme = _readme(
            size=size,
            checkpoint_size=checkpoint_size,
            key=key,
            banks=banks,
            reports=spec,
            commands=commands,
        )
        (stage / README_FILE).write_text(readme, encoding="utf-8")
        if out_dir.is_dir():
            out_dir.rmdir()  # empty, checked by _staging
        stage.rename(out_dir)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return AuditExport(
        out_dir=out_dir,
        size=size,
        checkpoint_size=checkpoint_size,
        banks=tuple(ref for ref, _ in banks),
        reports=tuple(report_files),
        commands=tuple(commands),
    )
