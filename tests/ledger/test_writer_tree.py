"""Issue 34: a fresh writer that read a stream through the tree index (a SQLite file's
``ledger.index.db``, or the index a server ledger gets in memory) signs its next
checkpoint from that verified tree: under the write lock it reads only the rows after
it, and the head it signs is that of every row (``store_kit.merkle_root``, RFC 9162 as
written, over SHA-256(0x00 || body) of the stored bodies).
"""

from __future__ import annotations

import base64
from typing import Any

from ledger_testkit import operator, prompt
from store_kit import Store, merkle_root, sha256

from ledger import stream_read
from ledger.events import RunFinished
from ledger.store import Draft, Ledger


def _watch(ledger: Ledger) -> list[tuple[int, int | None, bool]]:
    """Every ranged read of the ledger's store as (start, stop, under the write lock)."""
    backend: Any = ledger._db
    seen: list[tuple[int, int | None, bool]] = []
    locked = [False]
    select, begin, commit, rollback = (
        backend.select, backend.begin, backend.commit, backend.rollback
    )  # fmt: skip

    def selected(columns: str, start: int, stop: int | None, fetch: int) -> Any:
        seen.append((start, stop, locked[0]))
        return select(columns, start, stop, fetch)

    def begun() -> None:
        begin()
        locked[0] = True

    def ended(fn: Any) -> Any:
        def end() -> None:
            locked[0] = False
            fn()

        return end

    backend.select, backend.begin = selected, begun
    backend.commit, backend.rollback = ended(commit), ended(rollback)
    return seen


def test_a_fresh_writer_signs_from_the_index_tree_on_every_store(store: Store) -> None:
    first = store.create()
    first.append([prompt("run-a", i) for i in range(300)], operator())
    first.append([Draft(RunFinished, "run-a", {"status": "completed"})], operator())
    first.append([prompt("run-b", i) for i in range(40)], operator())  # no checkpoint
    checkpointed = 1 + 300 + 1
    assert [n for n, _ in first.stored_checkpoints()] == [checkpointed]
    fresh = store.open()
    assert len(stream_read.stream_events(fresh, "run-a")) == 301
    seen = _watch(fresh)
    fresh.append([Draft(RunFinished, "run-b", {"status": "completed"})], operator())
    under_lock = [r for r in seen if r[2]]
    assert under_lock
    # Nothing below the tree the writer took was read under the lock but single rows.
    taken = checkpointed if store.kind == "sqlite" else checkpointed + 40
    assert all(r[0] >= taken or r[1] == r[0] + 1 for r in under_lock), under_lock
    bodies = [row[1] for row in store.rows()]
    assert len(bodies) == checkpointed + 40 + 1
    size, note = fresh.stored_checkpoints()[-1]
    assert size == len(bodies)
    assert base64.b64decode(note.split("\n")[2]) == merkle_root(
        [sha256(b"\x00" + bytes(body)) for body in bodies]
    )
