"""The two layouts of a SQLite ledger file's ``events`` table (issue 21, fast durable append).

Files made since issue 21 keep no index on the random leaf hash; a UNIQUE index on
(stream, stream_seq) refuses a second copy of an event instead (equal bodies have
equal stream and stream_seq). Files made before keep ``leaf_hash UNIQUE`` and a plain
stream index. The same code appends to both, and in both the same event twice is
stored once. The old layout is taken from the checked-in legacy-v1 fixture itself.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from ledger_audit import EARLIER_RELEASE
from ledger_testkit import fixed_clock, operator, prompt

from ledger import store as store_module
from ledger.errors import StoreConflictError
from ledger.events import PromptSent
from ledger.store import Ledger
from ledger.stores import FORMAT
from ledger.verify import verify_ledger

LEGACY = Path(__file__).parents[1] / "data" / "legacy-v1" / "ledger.db"


def _schema(path: Path) -> dict[str, str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL")
        return {name: " ".join(sql.split()) for name, sql in rows}
    finally:
        conn.close()


def _unique_indexes(path: Path) -> dict[str, list[str]]:
    """name -> columns of each UNIQUE index of ``events`` (automatic ones included)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out: dict[str, list[str]] = {}
        for _, name, unique, *_ in conn.execute("PRAGMA index_list(events)"):
            if unique:
                out[name] = [r[2] for r in conn.execute(f"PRAGMA index_info('{name}')")]
        return out
    finally:
        conn.close()


def _old_layout_ledger(path: Path) -> Ledger:
    """An empty ledger file with legacy-v1's schema (copied from the fixture), then genesis."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for sql in _schema(LEGACY).values():
        conn.execute(sql)
    conn.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
    conn.close()
    ledger = Ledger.open(path, clock=fixed_clock)
    signer = operator()
    ledger.append([store_module._registration(signer, fixed_clock())], signer)
    return ledger


def test_new_files_index_stream_positions_not_leaf_hashes(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    Ledger.create(path, operator(), clock=fixed_clock).close()
    assert _unique_indexes(path) == {"events_by_stream": ["stream", "stream_seq"]}
    assert "leaf_hash BLOB NOT NULL," in _schema(path)["events"]
    # The legacy fixture has the other layout: the leaf hash is its unique key.
    assert list(_unique_indexes(LEGACY).values()) == [["leaf_hash"]]


def test_sqlite_itself_refuses_a_second_row_at_a_stream_position(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    ledger = Ledger.create(path, operator(), clock=fixed_clock)
    ledger.append([prompt("run-a", 0)], operator())
    ledger.close()
    conn = sqlite3.connect(path, isolation_level=None)
    clash = r"UNIQUE constraint failed: events\.stream, events\.stream_seq"
    with pytest.raises(sqlite3.IntegrityError, match=clash):
        # Another body at run-a#0: only the stream position clashes.
        conn.execute(
            "INSERT INTO events VALUES (2, x'7b7d', x'00', x'00', 'k', x'00', 'run-a', 0, 't')"
        )
    conn.close()


@pytest.mark.parametrize("layout", ["new", "old"])
def test_the_same_event_twice_is_stored_once_in_either_layout(layout: str, tmp_path: Path) -> None:
    path = tmp_path / f"{layout}.db"
    if layout == "new":
        ledger = Ledger.create(path, operator(), clock=fixed_clock)
    else:
        ledger = _old_layout_ledger(path)
    before = _unique_indexes(path)
    assert ledger.append([prompt("run-a", 0), prompt("run-a", 1)], operator()) == [1, 2]
    first, second = (ledger.get(s).event() for s in (1, 2))  # type: ignore[union-attr]
    # Stored copies: their seqs come back and nothing is written.
    assert ledger.append([second, first], operator()) == [2, 1]
    assert ledger.append([prompt("run-b", 0), first, prompt("run-b", 1)], operator()) == [3, 1, 4]
    assert ledger.size() == 5
    # A different event at a stored stream position is a fork: refused, nothing written.
    fork = PromptSent(
        stream="run-a", stream_seq=1, stream_prev=first.stream_prev, at=fixed_clock(),
        case_id="other", attempt=1, prompt="p", prompt_sha256="sha256:00",
    )  # fmt: skip
    with pytest.raises(StoreConflictError, match="stream run-a: stream_seq 1 is already stored"):
        ledger.append([prompt("run-c", 0), fork], operator())
    assert ledger.size() == 5
    ledger.close()
    assert verify_ledger(path).size == 5
    assert _unique_indexes(path) == before  # a file keeps its layout


@EARLIER_RELEASE
def test_the_legacy_fixture_finds_its_stored_events_by_stream_position(tmp_path: Path) -> None:
    path = shutil.copy(LEGACY, tmp_path / "ledger.db")
    ledger = Ledger.open(Path(path), clock=fixed_clock)
    size = ledger.size()
    stored = [ledger.get(seq) for seq in (0, size // 2, size - 1)]
    events = [s.event() for s in stored if s is not None]
    # All stored already: nothing is signed, so no key of that release is needed.
    assert ledger.append(events, operator()) == [0, size // 2, size - 1]
    assert ledger.size() == size
    ledger.close()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layout=st.sampled_from(["new", "old"]),
    batches=st.lists(
        st.lists(st.tuples(st.booleans(), st.integers(0, 40)), min_size=1, max_size=6),
        min_size=1,
        max_size=5,
    ),
)
def test_re_appended_events_keep_their_seqs(layout: str, batches: list[list[tuple[bool, int]]]):
    """Batches mixing new drafts and stored events: only the drafts are written.

    Each item is (new draft?, n): a new draft of stream ``run-<n % 3>``, or the stored
    event number ``n`` (modulo what is stored) appended again.
    """
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.db"
        if layout == "new":
            ledger = Ledger.create(path, operator(), clock=fixed_clock)
        else:
            ledger = _old_layout_ledger(path)
        counts = [0, 0, 0]
        for batch in batches:
            items: list[object] = []
            expected: list[int | None] = []
            size = ledger.size()
            fresh = 0
            for new, n in batch:
                if new or size == 1:
                    items.append(prompt(f"run-{n % 3}", counts[n % 3]))
                    counts[n % 3] += 1
                    expected.append(size + fresh)
                    fresh += 1
                else:
                    seq = 1 + n % (size - 1)
                    items.append(ledger.get(seq).event())  # type: ignore[union-attr]
                    expected.append(seq)
            assert ledger.append(items, operator()) == expected  # type: ignore[arg-type]
            assert ledger.size() == size + fresh
        ledger.close()
        assert verify_ledger(path).size == 1 + sum(counts)
