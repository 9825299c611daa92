"""``caseledger export caseruns``: the CaseRuns table written as Parquet or CSV with DuckDB.

The rows come from :func:`projections.caseruns_table.caserun_rows` over the state
``read_state`` folds (every body and the chain checked while read), so the file says
what a report built at the same tree size says. The column list and types are
``projections.caseruns_table.COLUMNS`` (docs/formats.md "CaseRuns table"). The file
is written through ``ledger.app.output`` (``-`` is standard output, a device is
written in place, a regular file under a temporary name renamed into place: Ctrl-C
or an error leaves the old file or the whole new one).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import msgspec

from ledger.app.output import is_stdout, output_file
from ledger.app.snapshot import read_state
from ledger.errors import UsageError
from ledger.store import Ledger
from ledger.stores import Location
from projections.caseruns_table import COLUMNS, caserun_rows, withdrawn_runs

__all__ = ["FORMATS", "CaseRunsExport", "export_caseruns"]

FORMATS = ("parquet", "csv")
# How DuckDB writes each format: one file, rows in the order given.
_COPY_OPTIONS = {"parquet": "FORMAT parquet", "csv": "FORMAT csv, HEADER true"}


@dataclass(frozen=True)
class CaseRunsExport:
    """What was written: rows, runs, the tree head the rows were read at, and the
    withdrawn runs left out ((run id, reason); empty with ``include_withdrawn``)."""

    rows: int
    runs: int
    size: int
    root: bytes
    left_out: tuple[tuple[str, str], ...] = ()


def export_caseruns(
    location: Location,
    out: Path,
    *,
    fmt: str,
    runs: Sequence[str] | None = None,
    include_withdrawn: bool = False,
) -> CaseRunsExport:
    """Write the CaseRuns of ``runs`` (default: all) to ``out`` in ``fmt`` (parquet, csv).

    Withdrawn runs are left out (and listed in the result) unless ``include_withdrawn``.
    """
    with Ledger.open(location, readonly=True) as ledger:
        snap = read_state(ledger, runs=runs)
    rows = caserun_rows(snap.state, runs, include_withdrawn=include_withdrawn)
    left_out = () if include_withdrawn else tuple(withdrawn_runs(snap.state, runs))
    # Through newline-delimited JSON (decimals as strings, exact), typed by DuckDB.
    encoder = msgspec.json.Encoder(decimal_format="string")
    # Names and SQL types come from COLUMNS only (no user text), values from a file.
    with tempfile.TemporaryDirectory(prefix="caseledger-export-") as scratch:
        source = Path(scratch) / "rows.jsonl"
        with source.open("wb") as fh:
            for n, row in enumerate(rows):
                fh.write(encoder.encode({"_n": n, **row}))
                fh.write(b"\n")
        _write(source, out, fmt, empty=not rows)
    return CaseRunsExport(
        rows=len(rows),
        runs=len({row["run"] for row in rows}),
        size=snap.size,
        root=snap.root,
        left_out=left_out,
    )


def _names() -> list[str]:
    return [name for name, _, _ in COLUMNS]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _write(source: Path, out: Path, fmt: str, *, empty: bool) -> None:
    """COPY the rows (in their order) to ``out`` through ``ledger.app.output.output_file``."""
    read_as = {"_n": "BIGINT"} | {
        name: ("VARCHAR" if kind.startswith(("DECIMAL", "DOUBLE")) else kind)
        for name, kind, _ in COLUMNS
    }
    columns = "{" + ", ".join(f"{_literal(n)}: {_literal(t)}" for n, t in read_as.items()) + "}"
    select = ", ".join(f"CAST({_quote(n)} AS {kind}) AS {_quote(n)}" for n, kind, _ in COLUMNS)
    if empty:
        # No rows: a file with the columns and their types only.
        nulls = ", ".join(f"NULL AS {_quote(n)}" for n in _names())
        query = f"SELECT {select} FROM (SELECT {nulls}) WHERE false"  # noqa: S608 (names are COLUMNS constants)
    else:
        query = (
            f"SELECT {select} FROM read_json({_literal(str(source))}, "  # noqa: S608 (COLUMNS constants, a quoted path)
            f"format = 'newline_delimited', columns = {columns}) ORDER BY _n"
        )
    if not is_stdout(out) and not out.parent.is_dir():
        raise UsageError(
            f"cannot write {out}: there is no folder {out.parent}",
            hint="create the folder first, or pass another -o",
        )
    with output_file(out) as tmp, duckdb.connect(":memory:") as db:
        db.execute("SET threads = 1")  # one writer thread: the same bytes every time
        db.execute(f"COPY ({query}) TO {_literal(str(tmp))} ({_COPY_OPTIONS[fmt]})")
