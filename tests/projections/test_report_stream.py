"""Issue 21: a report is built one run at a time and its CaseRuns spliced in from a spool.

The streamed bytes (``ledger.app.reporting``) must equal the report built whole in
memory from one fold of the log (``read_state`` + ``build_report`` + ``render``), for
every format and option; the pinned demo baselines and the legacy fixture tests pin
those bytes against earlier releases. Real ledger (real run, real signatures).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.app.reporting import report_bytes, report_chunks
from ledger.app.snapshot import read_state, run_snapshots
from ledger.errors import UsageError
from ledger.store import Ledger
from projections.report import markdown
from projections.report.build import build_report, build_report_v3, splice_caseruns, to_json
from projections.report.render import render
from projections.report.significance import section_statistics


def _whole(path: Path, fmt: str, **options: object) -> bytes:
    """The report as the builder before issue 21 made it: one fold, the whole report.
    ``stats=True``: ``caseledger-report/3`` (issue 32), its views with the statistics."""
    at_size = options.pop("at_size", None)
    stats = options.pop("stats", False)
    runs = options.get("runs")
    with Ledger.open(path, readonly=True) as ledger:
        snap = read_state(ledger, at_size=at_size, runs=runs)  # type: ignore[arg-type]
    if stats and fmt == "json":
        return to_json(build_report_v3(snap.state, root_hash=snap.root, **options))  # type: ignore[arg-type]
    report = build_report(snap.state, root_hash=snap.root, **options)  # type: ignore[arg-type]
    if stats:
        return render(report, fmt, [section_statistics(s) for s in report.sections])
    return render(report, fmt)


OPTIONS: list[dict[str, object]] = [
    {},
    {"runs": ["model-a"]},
    {"runs": ["self-test", "model-a"], "with_gold": True},
    {"scorer": "2.1.0"},
    {"include_withdrawn": True},
]


@pytest.mark.parametrize("fmt", ["json", "md", "html"])
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(map(str, o)) or "all")
def test_streamed_report_equals_the_whole_report(
    real_ledger: Path, fmt: str, options: dict[str, object]
) -> None:
    streamed, size, _ = report_bytes(real_ledger, fmt=fmt, **options)  # type: ignore[arg-type]
    assert streamed == _whole(real_ledger, fmt, **options)
    with Ledger.open(real_ledger, readonly=True) as ledger:
        assert size == ledger.size()


@pytest.mark.parametrize("fmt", ["json", "md", "html"])
@pytest.mark.parametrize("options", OPTIONS[:3], ids=lambda o: ",".join(map(str, o)) or "all")
def test_streamed_v3_report_equals_the_whole_report(
    real_ledger: Path, fmt: str, options: dict[str, object]
) -> None:
    # Issue 32: caseledger-report/3 and its views, streamed and whole, are the same bytes.
    streamed, _, _ = report_bytes(real_ledger, fmt=fmt, detail="stats", **options)  # type: ignore[arg-type]
    assert streamed == _whole(real_ledger, fmt, stats=True, **options)


def test_streamed_report_at_every_third_of_the_log(real_ledger: Path) -> None:
    # Prefixes cut a run in the middle, before the second run starts, and at 0.
    with Ledger.open(real_ledger, readonly=True) as ledger:
        size = ledger.size()
    for stop in (0, 1, size // 3, size // 2, 2 * size // 3, size - 1):
        got, at, _ = report_bytes(real_ledger, fmt="json", at_size=stop)
        assert at == stop
        assert got == _whole(real_ledger, "json", at_size=stop)


def test_the_two_sections_of_the_real_ledger_are_spliced(real_ledger: Path) -> None:
    # model-a (7 cases x 3 attempts = 21 CaseRuns) and the self-test (7 x 1 = 7), each
    # in its own section: the CaseRuns land in the section of their run.
    data, _, _ = report_bytes(real_ledger, fmt="json")
    doc = msgspec.json.decode(data)
    got = [
        (s["kind"], len(s["caseruns"]), {c["run"] for c in s["caseruns"]}) for s in doc["sections"]
    ]
    assert got == [("models", 21, {"model-a"}), ("self_test", 7, {"self-test"})]


def test_one_run_per_snapshot(real_ledger: Path) -> None:
    with Ledger.open(real_ledger, readonly=True) as ledger:
        seen = [sorted(s.state.runs) for s in run_snapshots(ledger)]
        assert seen == [["model-a"], ["self-test"]]
        assert [sorted(s.state.runs) for s in run_snapshots(ledger, runs=["self-test", "x"])] == [
            ["self-test"]
        ]


def test_errors_before_any_byte(real_ledger: Path) -> None:
    asked = report_chunks(real_ledger, fmt="json", runs=["nope", "model-a"])
    with pytest.raises(UsageError, match="no run nope in the first"), asked:
        pytest.fail("nothing is given before the checks")
    with pytest.raises(UsageError, match="out of range"):
        report_bytes(real_ledger, fmt="json", at_size=10**9)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.text(alphabet=st.sampled_from(list('"caseruns:[]{},\\ ')), max_size=40).map(
        lambda t: t + '"caseruns":[]'
    )
)
def test_splice_is_not_fooled_by_texts(real_ledger: Path, text: str) -> None:
    # A question that spells the key is escaped in the bytes, so the splice still
    # finds exactly one empty list per section: the same bytes as encoding it whole.
    with Ledger.open(real_ledger, readonly=True) as ledger:
        snap = read_state(ledger)
    whole = build_report(snap.state, root_hash=snap.root)
    sections = []
    for s in whole.sections:
        cases = [msgspec.structs.replace(c, question=text) for c in s.cases]
        sections.append(msgspec.structs.replace(s, cases=cases))
    whole = msgspec.structs.replace(whole, sections=sections)
    skeleton = msgspec.structs.replace(
        whole, sections=[msgspec.structs.replace(s, caseruns=[]) for s in whole.sections]
    )
    pieces = [[b",".join(to_json(c)[:-1] for c in s.caseruns)] for s in whole.sections]
    assert b"".join(splice_caseruns(skeleton, pieces)) == to_json(whole)


def test_cli_report_streams_to_a_file_and_stdout(real_ledger: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ledger.cli import main

    out = tmp_path / "r.json"
    runner = CliRunner()
    argv = ["--ledger", str(real_ledger), "report", "--detail", "full", "-o", str(out)]
    done = runner.invoke(main, argv)
    assert done.exit_code == 0, done.output
    assert out.read_bytes() == _whole(real_ledger, "json")
    done = runner.invoke(main, ["--ledger", str(real_ledger), "report", "--format", "md"])
    assert done.exit_code == 0
    assert done.stdout_bytes == _whole(real_ledger, "md", stats=True)  # the default: /3


@pytest.mark.parametrize("edit", ["drop", "shrink", "move"])
def test_a_stream_dropped_from_the_index_is_not_dropped_from_a_report(
    real_ledger: Path, edit: str
) -> None:
    # A report of every run lists its runs from the index's stream heads: a head
    # dropped (or made smaller, or pointed at another event) must make the index be
    # rebuilt, never a report without the run.
    honest, _, _ = report_bytes(real_ledger, fmt="json")  # builds the index
    index = real_ledger.with_name("ledger.index.db")
    conn = sqlite3.connect(index)
    if edit == "drop":
        conn.execute("DELETE FROM streams WHERE stream = 'model-a'")
    elif edit == "shrink":
        conn.execute(
            "UPDATE streams SET stream_seq = stream_seq - 1, seq = seq - 1 WHERE stream = 'model-a'"
        )
    else:  # the ledger stream's head grows by model-a's count, model-a goes
        (count,) = conn.execute(
            "SELECT stream_seq + 1 FROM streams WHERE stream = 'model-a'"
        ).fetchone()
        conn.execute("DELETE FROM streams WHERE stream = 'model-a'")
        conn.execute(
            "UPDATE streams SET stream_seq = stream_seq + ? WHERE stream = 'ledger'", (count,)
        )
    conn.commit()
    conn.close()
    assert report_bytes(real_ledger, fmt="json")[0] == honest
    with Ledger.open(real_ledger, readonly=True) as ledger:
        assert [sorted(s.state.runs) for s in run_snapshots(ledger)] == [["model-a"], ["self-test"]]


def test_markdown_comes_in_pieces_of_at_most_the_line_budget(
    real_ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Markdown is written a few lines at a time: each piece ends a line, holds at
    most ``_LINES`` lines, and the pieces joined are the report's bytes."""
    whole = _whole(real_ledger, "md")
    monkeypatch.setattr(markdown, "_LINES", 7)
    with report_chunks(real_ledger, fmt="md") as (chunks, _, _):
        pieces = list(chunks)
    assert b"".join(pieces) == whole
    assert len(pieces) == -(-whole.count(b"\n") // 7)  # ceiling: every piece but the last full
    assert all(p.endswith(b"\n") and p.count(b"\n") <= 7 for p in pieces)


def test_markdown_reads_the_caseruns_as_it_writes_their_rows(real_ledger: Path) -> None:
    """The first piece is out before the CaseRuns are all read: the table is not held whole."""
    with Ledger.open(real_ledger, readonly=True) as ledger:
        snap = read_state(ledger)
    report = build_report(snap.state, root_hash=snap.root)
    read: list[int] = []

    def counted(caseruns: list[object]) -> Iterator[object]:
        for n, c in enumerate(caseruns, start=1):
            read.append(n)
            yield c

    section = report.sections[0]
    total = len(section.caseruns)
    assert total == 21  # the real ledger's first section: enough rows for pieces of 4 lines
    lazy = msgspec.structs.replace(section, caseruns=_Again(lambda: counted(section.caseruns)))
    report = msgspec.structs.replace(report, sections=[lazy, *report.sections[1:]])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(markdown, "_LINES", 4)
        pieces = markdown.render_markdown_chunks(report)
        seen = ""
        while "### CaseRuns" not in seen:
            seen += next(pieces)
        at_table = len(read)
        next(pieces)
        assert at_table <= 4  # the piece with the table's title holds at most 4 of its lines
        assert len(read) <= at_table + 4 < total  # the next piece: 4 lines, 4 more rows
        "".join(pieces)
    assert read[-1] == total


class _Again:
    """An iterable that makes a new iterator each time (as the report's spool does)."""

    def __init__(self, make: Callable[[], Iterator[object]]) -> None:
        self._make = make

    def __iter__(self) -> Iterator[object]:
        return self._make()
