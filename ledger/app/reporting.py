"""Build a report's bytes from a ledger file (the application layer around projections.report).

A report is built one run at a time (issue 21): the log is folded per run through
the verified tree index (:func:`ledger.app.snapshot.run_snapshots`), each run's
entry is kept (a few KB: counters, per-case scores, what fairness reads) and its
CaseRuns are written to a temporary spool file as canonical JSON; then the
report's skeleton (every section with no CaseRuns) is encoded and each section's
CaseRuns are copied into its bytes from the spool. Memory is bounded by the
largest run, not by the number of CaseRuns, and the bytes are those the whole
report in memory gives (:func:`projections.report.build.build_report`, the same
parts). Every byte of the log is checked before the first byte of the report is
written, so a bad event still prints nothing.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, cast

import msgspec

from ledger.app.snapshot import read_state, run_snapshots
from ledger.codec import canonical_json
from ledger.errors import InternalError, UsageError
from ledger.store import Ledger
from ledger.stores import Location
from projections.caseruns import BankInfo
from projections.report import schema as S
from projections.report.build import (
    Detail,
    RunPart,
    assemble,
    assemble_v2,
    assemble_v3,
    caserun_json,
    run_part,
    splice_caseruns,
    unknown_error,
    withdrawn_error,
    withdrawn_run,
)
from projections.report.html import render_html_chunks
from projections.report.markdown import render_markdown_chunks
from projections.report.render import render
from projections.report.significance import section_statistics

__all__ = ["report_bytes", "report_chunks"]

#: Bytes copied from the spool at a time.
_CHUNK = 1 << 20
#: CaseRuns decoded at a time when Markdown and HTML read them back from the spool.
_BATCH = 64


def report_bytes(
    ledger_path: Location,
    *,
    fmt: str,
    at_size: int | None = None,
    runs: Sequence[str] | None = None,
    scorer: str | None = None,
    with_gold: bool = False,
    include_withdrawn: bool = False,
    detail: Detail = "full",
) -> tuple[bytes, int, bytes]:
    """The report bytes, the tree size they were built at and that tree's root hash.

    The same ledger prefix, format and options always give the same bytes. Every
    event the report is built from is checked against its leaf hash and the chain
    while it is read, and the root is the tree head of exactly those leaves.
    ``detail``: JSON as ``caseledger-report/1`` (``full``, every published report's
    contract before issue 21, so they all still rebuild byte for byte), the compact
    ``caseledger-report/2`` (``compact``, the default before issue 32) or
    ``caseledger-report/3`` (``stats``, ``/2`` with each section's statistics: what
    ``caseledger report`` writes by default). Markdown and HTML show the statistics (a
    headline, error bars, pairwise tables, rank groups) with ``stats`` only, and are the
    same with ``full`` and ``compact``.
    """
    with report_chunks(
        ledger_path,
        fmt=fmt,
        at_size=at_size,
        runs=runs,
        scorer=scorer,
        with_gold=with_gold,
        include_withdrawn=include_withdrawn,
        detail=detail,
    ) as (chunks, size, root):
        return b"".join(chunks), size, root


@dataclass
class _Spool:
    """Each run's CaseRuns as canonical JSON joined by commas, in a temporary file."""

    file: IO[bytes]
    #: run id -> (offset, length) of its CaseRuns in the file.
    where: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: prompt SHA-256 -> (offset, length) of its ``"sha256:...":"text"`` entry (report/2).
    prompts: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: run id -> (offset, length) of each batch of up to ``_BATCH`` of its CaseRuns.
    batches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def put(self, part: RunPart) -> None:
        """Write the part's CaseRuns (and, compact, the prompts not written yet) out and
        empty its lists: memory keeps offsets, not texts."""
        self.file.seek(0, 2)
        for sha, text in sorted(part.prompts.items()):
            if sha not in self.prompts:
                start = self.file.tell()
                self.file.write(canonical_json(sha) + b":" + canonical_json(text))
                self.prompts[sha] = (start, self.file.tell() - start)
        part.prompts = {}
        caseruns: list[S.CaseRun | S.CompactCaseRun] = [*part.compact, *part.caseruns]
        if not caseruns:
            return
        start = self.file.tell()
        batches = self.batches[part.run] = []
        for i, caserun in enumerate(caseruns):
            if i:
                self.file.write(b",")
            if i % _BATCH == 0:
                batches.append((self.file.tell(), 0))
            self.file.write(caserun_json(caserun))
            batches[-1] = (batches[-1][0], self.file.tell() - batches[-1][0])
        self.where[part.run] = (start, self.file.tell() - start)
        part.caseruns, part.compact = [], []

    def _read(self, offset: int, left: int) -> Iterator[bytes]:
        self.file.seek(offset)
        while left:
            piece = self.file.read(min(left, _CHUNK))
            if not piece:
                raise OSError("the report's spool file ended early")
            left -= len(piece)
            yield piece

    def prompt_chunks(self) -> Iterator[bytes]:
        """The prompts table's entries in key order, joined by commas (report/2)."""
        for i, sha in enumerate(sorted(self.prompts)):
            if i:
                yield b","
            yield from self._read(*self.prompts[sha])

    def chunks(self, runs: Iterable[str]) -> Iterator[bytes]:
        """The CaseRuns of ``runs`` in that order, joined by commas, in pieces."""
        first = True
        for run in runs:
            found = self.where.get(run)
            if found is None:
                continue
            if not first:
                yield b","
            first = False
            yield from self._read(*found)

    def caseruns(self, runs: Sequence[str]) -> list[S.CaseRun]:
        """The CaseRuns of ``runs`` for Markdown and HTML: a list the renderers iterate
        (as often as they need), read back from the spool one run at a time."""
        return cast(list[S.CaseRun], _SpooledCaseRuns(self, list(runs)))


class _SpooledCaseRuns:
    """An iterable over the spooled CaseRuns of some runs, decoded ``_BATCH`` at a time, so
    a renderer that iterates a section's CaseRuns never holds more than a batch of them."""

    def __init__(self, spool: _Spool, runs: list[str]) -> None:
        self._spool, self._runs = spool, runs

    def __iter__(self) -> Iterator[S.CaseRun]:
        decoder: msgspec.json.Decoder[list[S.CaseRun]] = msgspec.json.Decoder(list[S.CaseRun])
        spool = self._spool
        for run in self._runs:
            for offset, length in spool.batches.get(run, []):
                data = b"".join(spool._read(offset, length))
                yield from decoder.decode(b"[" + data + b"]")


def _runs_in_order(section: S.Section) -> list[str]:
    """The runs of a section in the order its CaseRuns are listed (run id)."""
    return sorted(e.run for e in section.runs)


@contextlib.contextmanager
def report_chunks(
    ledger_path: Location,
    *,
    fmt: str,
    at_size: int | None = None,
    runs: Sequence[str] | None = None,
    scorer: str | None = None,
    with_gold: bool = False,
    include_withdrawn: bool = False,
    detail: Detail = "full",
) -> Iterator[tuple[Iterator[bytes], int, bytes]]:
    """The report's bytes as an iterator of pieces, the tree size and the root hash.

    Every run is folded, checked and summarised before this yields, so an error
    (a bad byte, an unknown or withdrawn run) is raised before any byte is given;
    the pieces are read from a temporary spool that lives until the block ends.
    Options as :func:`report_bytes`.
    """
    wanted = None if runs is None else sorted(set(runs))
    compact = fmt == "json" and detail != "full"
    with Ledger.open(ledger_path, readonly=True) as ledger, tempfile.TemporaryFile() as f:
        spool = _Spool(f)
        parts: list[RunPart] = []
        banks: dict[str, BankInfo] = {}
        seen: list[str] = []
        listed: list[S.WithdrawnRun] = []
        size: int | None = None
        root = b""
        pending: UsageError | None = None
        for snap in run_snapshots(ledger, at_size=at_size, runs=wanted):
            size, root, state = snap.size, snap.root, snap.state
            banks.update(state.banks)
            for run_id in sorted(state.runs):
                if wanted is not None and run_id not in wanted:
                    continue
                seen.append(run_id)
                info = state.runs[run_id]
                gone = withdrawn_run(info, include_withdrawn)
                if gone is not None:
                    listed.append(gone)
                    if not include_withdrawn:
                        continue
                if pending is not None:
                    continue
                try:
                    part = run_part(state, run_id, scorer, detail if compact else "full")
                except UsageError as exc:  # raised after the checks a report makes first
                    pending = exc
                    continue
                spool.put(part)
                parts.append(part)
            del state, snap
        if size is None:  # no run at this size: the tree head of the banks' fold
            snap = read_state(ledger, at_size=at_size, runs=())
            size, root = snap.size, snap.root
            banks.update(snap.state.banks)
        chosen = sorted(seen)
        listed.sort(key=lambda w: w.run)
        if wanted is not None:
            unknown = sorted(set(wanted) - set(seen))
            if unknown:
                raise unknown_error(unknown, size)
            if listed and not include_withdrawn:
                raise withdrawn_error(listed)
        if pending is not None:
            raise pending
        if not include_withdrawn:
            chosen = [r for r in chosen if r not in {w.run for w in listed}]
        how: dict[str, Any] = {
            "size": size,
            "root_hash": root,
            "scorer": scorer,
            "selection": None if wanted is None else chosen,
            "with_gold": with_gold,
            "withdrawn": listed,
        }
        skeleton: S.Report | S.ReportV2 | S.ReportV3
        if not compact:
            skeleton = assemble(parts, banks, **how)
        elif detail == "stats":
            skeleton = assemble_v3(parts, banks, **how)
        else:
            skeleton = assemble_v2(parts, banks, **how)
        del parts
        if fmt == "json":
            sources = [spool.chunks(_runs_in_order(s)) for s in skeleton.sections]
            yield splice_caseruns(skeleton, sources, spool.prompt_chunks()), size, root
            return
        if not isinstance(skeleton, S.Report):  # compact is JSON only
            raise InternalError(TypeError(type(skeleton).__name__), where="report views")
        # Issue 32: the statistics of each section, from its run entries (md/html, /3 only).
        stats = [section_statistics(s) for s in skeleton.sections] if detail == "stats" else None
        whole = msgspec.structs.replace(
            skeleton,
            sections=[
                msgspec.structs.replace(s, caseruns=spool.caseruns(_runs_in_order(s)))
                for s in skeleton.sections
            ],
        )
        if fmt == "html":  # written section by section, the evidence blob run by run
            pieces = render_html_chunks(whole, stats)
            yield (piece.encode("utf-8") for piece in pieces), size, root
            return
        if fmt == "md":  # written in pieces, each section's CaseRuns rows as they are read
            pieces = render_markdown_chunks(whole, stats)
            yield (piece.encode("utf-8") for piece in pieces), size, root
            return
        yield iter([render(whole, fmt, stats)]), size, root
