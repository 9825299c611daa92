"""The store contract: every test runs against every store (SQLite file, PostgreSQL database).

A store must keep DESIGN.md's log whatever holds the rows: rows by the formulas
(leaf hash, chain, event/v2 signature), drafts completed from their stream head,
idempotent appends, optimistic appends by expected size, refusal of changes,
one chain from many concurrent writer processes, no partial batch after a SIGKILL,
tampering caught by ``verify`` at the right seq, streamed reads, automatic
checkpoints. Expected values are worked out here with hashlib and cryptography,
never read back from the store. Fixtures: tests/ledger/conftest.py.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import signal
import time
from pathlib import Path

import hypothesis.strategies as st
import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from hypothesis import HealthCheck, given, settings
from ledger_audit import TAMPERED
from ledger_testkit import adapter, fixed_clock, operator, prompt
from pgcluster import PgCluster
from store_kit import Store, caseledger, drop_pg_store, fresh_pg_store, merkle_root, sha256
from writer_kit import spawn, start_together

from ledger.errors import (
    ChainBrokenError,
    ProofError,
    SignatureError,
    StoreBusyError,
    StoreConflictError,
    StoreError,
    UsageError,
)
from ledger.events import PromptSent, RunFinished, SignerRegistered
from ledger.store import Draft, Ledger
from ledger.verify import verify_ledger


def finished(run: str) -> Draft:
    return Draft(RunFinished, run, {"status": "completed"})


# ----------------------------------------------------------------- rows and reads


def test_rows_follow_the_design_formulas(store: Store) -> None:
    ledger = store.create()
    drafts = [prompt("run-a", 0), prompt("run-b", 0), prompt("run-a", 1)]
    assert ledger.append(drafts, operator()) == [1, 2, 3]
    rows = store.rows()
    assert [r[0] for r in rows] == [0, 1, 2, 3]
    public = Ed25519PublicKey.from_public_bytes(operator().public_key)
    chain = bytes(32)
    for seq, body, leaf, stored_chain, key_id, sig, *_ in rows:
        assert leaf == sha256(b"\x00" + body)
        public.verify(sig, b"caseledger/event/v2\n" + chain + leaf)  # raises when wrong
        chain = sha256(chain + leaf)
        assert stored_chain == chain, seq
        assert key_id == operator().key_id
    # The query columns and the envelopes drafts got from their stream heads.
    assert [(r[6], r[7], r[8]) for r in rows] == [
        ("ledger", 0, "signer.registered.v1"),
        ("run-a", 0, "prompt.sent.v1"),
        ("run-b", 0, "prompt.sent.v1"),
        ("run-a", 1, "prompt.sent.v1"),
    ]
    a1 = ledger.get(3).event()  # type: ignore[union-attr]
    assert a1.stream_prev == "sha256:" + rows[1][2].hex()
    assert rows[1][1].startswith(
        b'{"at":"2026-12-02T10:00:00.000000Z","attempt":1,"case_id":"case-0000"'
    )
    genesis = ledger.get(0).event()  # type: ignore[union-attr]
    assert isinstance(genesis, SignerRegistered)
    assert (genesis.name, genesis.role, genesis.stream_prev) == ("test-operator", "operator", None)
    assert ledger.origin() == "caseledger/" + rows[0][2].hex()[:16]
    assert ledger.head() == (4, chain)


def test_both_stores_hold_the_same_bytes(pg_cluster: PgCluster, tmp_path: Path) -> None:
    """The same appends give byte-identical rows in SQLite and PostgreSQL (Ed25519 is
    deterministic), so a ledger's hashes, signatures and checkpoints do not depend on
    where it is stored."""
    sqlite = Store("sqlite", tmp_path / "ledger.db", tmp_path / "ledger.db")
    postgres = fresh_pg_store(pg_cluster)
    try:
        for where in (sqlite, postgres):
            ledger = where.create()
            ledger.register(adapter(), by=operator())
            ledger.append([prompt(f"run-{i % 3}", i) for i in range(300)], adapter())
            ledger.append([finished(f"run-{i}") for i in range(3)], operator())
            ledger.close()
        assert sqlite.rows() == postgres.rows()
        assert len(sqlite.rows()) == 305
        with sqlite.open() as a, postgres.open() as b:
            assert a.stored_checkpoints() == b.stored_checkpoints()
            assert [size for size, _ in a.stored_checkpoints()] == [305]
    finally:
        for ledger in sqlite.opened + postgres.opened:
            ledger.close()
        drop_pg_store(postgres)


def test_iteration_reads_every_row_in_order(store: Store) -> None:
    ledger = store.create()
    for i in range(0, 2500, 500):  # pages of 1,024 and 4,096 rows are crossed
        ledger.append([prompt(f"run-{j % 2}", j) for j in range(i, i + 500)], operator())
    rows = store.rows()
    assert len(rows) == 2501
    assert [(r.seq, r.leaf_hash, r.body) for r in ledger.iter_events()] == [
        (r[0], r[2], r[1]) for r in rows
    ]
    assert list(ledger.iter_bodies(1023, 1026)) == [(r[0], r[2], r[1]) for r in rows[1023:1026]]
    assert list(ledger.iter_bodies(2500)) == [(2500, rows[2500][2], rows[2500][1])]
    assert list(ledger.iter_bodies(2501)) == []
    assert list(ledger.iter_bodies(7, 3)) == []
    assert [r.seq for r in ledger.scan(1030)][-3:] == [1027, 1028, 1029]
    assert list(ledger.iter_chain_rows()) == [(r[0], r[1], r[2], r[3]) for r in rows]
    assert ledger.leaf_hashes(3) == [r[2] for r in rows[:3]]
    assert [r.seq for r in ledger.stream_events("run-1")] == list(range(2, 2501, 2))
    assert [r.seq for r in ledger.events_of_type(SignerRegistered)] == [0]
    assert ledger.streams() == ["ledger", "run-0", "run-1"]
    assert ledger.get(2501) is None
    with pytest.raises(ChainBrokenError, match="seq 2501: the ledger ends at size 2501, not 2600"):
        list(ledger.scan(2600))


def test_the_stream_index_reads_one_stream_below_a_size(store: Store) -> None:
    """The per-run read (issue 22) on every store: the rows the stream index files under
    one stream, below a size, in stream order, with the columns as stored."""
    ledger = store.create()
    ledger.append([prompt(f"run-{j % 2}", j) for j in range(1000)], operator())
    rows = store.rows()
    # seq 0 registers the operator; prompt j is seq j + 1, so run-1 holds seqs 2, 4, 6, ...
    assert [(seq, body, leaf) for seq, body, leaf in ledger.indexed_stream("run-1", 11)] == [
        (r[0], r[1], r[2]) for r in rows if r[0] in (2, 4, 6, 8, 10)
    ]
    columns = list(ledger.indexed_stream_columns("run-0", 8))
    assert [(c[0], c[3], c[4]) for c in columns] == [
        (1, 0, "prompt.sent.v1"),
        (3, 1, "prompt.sent.v1"),
        (5, 2, "prompt.sent.v1"),
        (7, 3, "prompt.sent.v1"),
    ]
    assert len(list(ledger.indexed_stream("run-1", 10_000))) == 500
    assert list(ledger.indexed_stream("run-1", 2)) == []
    assert list(ledger.indexed_stream("run-7", 10_000)) == []
    # A reader that stops early closes the store's cursor with the generator.
    reader = ledger.indexed_stream_columns("run-0", 10_000)
    assert next(reader)[0] == 1
    reader.close()
    ledger.append([prompt("run-1", 1000)], operator())
    assert [r[0] for r in ledger.indexed_stream("run-1", 10_000)][-2:] == [1000, 1001]


# ----------------------------------------------------------------- batches, idempotence


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(cuts=st.lists(st.integers(1, 299), max_size=6, unique=True))
def test_any_split_into_batches_stores_the_same_rows(
    kind: str,
    cuts: list[int],
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> None:
    drafts = [prompt(f"run-{i % 3}", i) for i in range(300)]
    bounds = [0, *sorted(cuts), 300]
    if kind == "sqlite":
        path = tmp_path_factory.mktemp("split") / "ledger.db"
        where = Store("sqlite", path, path)
    else:
        where = fresh_pg_store(request.getfixturevalue("pg_cluster"))
    try:
        ledger = where.create()
        for a, b in itertools.pairwise(bounds):
            assert ledger.append(drafts[a:b], operator()) == list(range(a + 1, b + 1))
        ledger.close()
        rows = where.rows()
    finally:
        if kind == "postgresql":
            drop_pg_store(where)
    # one batch, computed by hand: seq i+1 is draft i, chained in order
    chain = sha256(bytes(32) + rows[0][2])
    for i, row in enumerate(rows[1:]):
        assert row[0] == i + 1
        assert row[7] == i // 3  # stream_seq within run-(i % 3)
        chain = sha256(chain + row[2])
        assert row[3] == chain


def test_large_batch_refused_late_writes_nothing(store: Store) -> None:
    ledger = store.create()
    bad = Draft(RunFinished, "run-a", {"status": 7})  # not the declared shape
    with pytest.raises(UsageError, match="does not match its declared shape"):
        ledger.append([*(prompt("run-a", i) for i in range(600)), bad], operator())
    assert ledger.size() == 1
    assert ledger.append([prompt("run-a", 0)], operator()) == [1]
    assert len(store.rows()) == 2


def test_the_same_event_is_stored_once(store: Store) -> None:
    ledger = store.create()
    (seq,) = ledger.append([prompt("run-a", 0)], operator())
    event = ledger.get(seq).event()  # type: ignore[union-attr]
    assert ledger.append([event], operator()) == [1]
    assert ledger.append([event, event], operator()) == [1, 1]
    # a stored duplicate in the middle of a new batch: the rest is still appended
    assert ledger.append([prompt("run-b", 0), event, prompt("run-b", 1)], operator()) == [2, 1, 3]
    assert ledger.size() == 4
    assert verify_ledger(ledger).size == 4


def test_optimistic_append_by_expected_size(store: Store) -> None:
    ledger = store.create()
    other = store.open()
    other.append([prompt("run-a", 0)], operator())
    with pytest.raises(StoreConflictError, match="expected tree size 1, found 2"):
        ledger.append([prompt("run-b", 0)], operator(), expect_size=1)
    assert ledger.size() == 2
    assert ledger.append([prompt("run-b", 0)], operator(), expect_size=2) == [2]


def test_complete_event_must_continue_its_stream(store: Store) -> None:
    ledger = store.create()
    stray = PromptSent(
        stream="imp", stream_seq=3, stream_prev=None, at=fixed_clock(),
        case_id="c", attempt=1, prompt="p", prompt_sha256="sha256:00",
    )  # fmt: skip
    with pytest.raises(StoreConflictError, match="stream imp: event has stream_seq 3"):
        ledger.append([prompt("run-a", 0), stray], operator())
    assert ledger.size() == 1


def test_keyring_rules_hold(store: Store) -> None:
    ledger = store.create()
    with pytest.raises(UsageError, match="seq 1: signed by unregistered key id"):
        ledger.append([prompt("run-a", 0)], adapter())
    ledger.register(adapter(), by=operator())
    assert ledger.append([prompt("run-a", 0)], adapter()) == [2]
    ledger.retire("test-adapter", by=operator())
    with pytest.raises(UsageError, match="after it was retired at seq 3"):
        ledger.append([prompt("run-a", 1)], adapter())
    # a second process sees the same keyring from the stored events
    assert [e.name for e in store.open().keyring().entries()] == ["test-operator", "test-adapter"]


def test_create_and_open_refusals(store: Store) -> None:
    with pytest.raises(StoreError, match="no ledger at"):
        Ledger.open(store.location)
    store.create().close()
    with pytest.raises(StoreError, match="a ledger already exists at"):
        Ledger.create(store.owner_location, operator())
    with pytest.raises(UsageError, match="must be an operator"):
        Ledger.create(store.owner_location, adapter())
    reader = store.open(readonly=True)
    assert reader.size() == 1
    with pytest.raises(StoreError, match="read-only"):
        reader.append([prompt("run-a", 0)], operator())


def test_a_second_writer_waits_then_fails_busy(store: Store) -> None:
    store.create()
    other = store.open(busy_timeout_s=0.2)
    with store.hold_write_lock():
        started = time.monotonic()
        with pytest.raises(StoreBusyError, match=r"^ledger is busy"):
            other.append([prompt("run-a", 0)], operator())
        assert time.monotonic() - started >= 0.19
    assert other.append([prompt("run-a", 0)], operator()) == [1]


# ----------------------------------------------------------------- refusing changes


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET key_id = 'deadbeef' WHERE seq = 1",
        "UPDATE events SET body = body WHERE seq = 0",
        "DELETE FROM events WHERE seq = 2",
        "DELETE FROM checkpoints",
        "UPDATE checkpoints SET note = 'x'",
    ],
)
def test_changes_are_refused_by_the_store(store: Store, statement: str) -> None:
    """SQLite: the triggers. PostgreSQL: the writer role has no UPDATE/DELETE privilege
    (and the triggers refuse the owner, see the next test)."""
    ledger = store.create()
    ledger.append([prompt("run-a", 0), prompt("run-a", 1), finished("run-a")], operator())
    before = store.rows()
    with pytest.raises(Exception, match=r"append-only|permission denied") as caught:
        store.execute_as_writer(statement)
    if store.kind == "postgresql":
        assert "permission denied for table" in str(caught.value)
    else:
        assert "caseledger" in str(caught.value)
    assert store.rows() == before
    assert len(ledger.stored_checkpoints()) == 1


def test_postgres_triggers_refuse_the_owner_too(pg_cluster: PgCluster) -> None:
    where = fresh_pg_store(pg_cluster)
    try:
        where.create().append([prompt("run-a", 0), finished("run-a")], operator())
        owner = str(where.owner_location)

        refused = []
        for statement in (
            "UPDATE caseledger.events SET key_id = 'deadbeef' WHERE seq = 1",
            "DELETE FROM caseledger.events WHERE seq = 2",
            "TRUNCATE caseledger.events",
            "TRUNCATE caseledger.checkpoints",
            "DELETE FROM caseledger.checkpoints",
            "UPDATE caseledger.meta SET value = 'x'",
        ):
            with psycopg.connect(owner, autocommit=True) as con, pytest.raises(psycopg.Error) as e:
                con.execute(statement)
            refused.append(str(e.value).splitlines()[0])
        assert refused == [
            "caseledger events are append-only: UPDATE refused",
            "caseledger events are append-only: DELETE refused",
            "caseledger events are append-only: TRUNCATE refused",
            "caseledger checkpoints are append-only: TRUNCATE refused",
            "caseledger checkpoints are append-only: DELETE refused",
            "caseledger meta are append-only: UPDATE refused",
        ]
        # A row inserted by hand must continue the log: seq, leaf hash and chain.
        rows = where.rows()
        body = b'{"x":1}'
        leaf = sha256(b"\x00" + body)
        good_chain = sha256(rows[-1][3] + leaf)
        cases = [
            (5, leaf, good_chain, "seq 5 refused: the next seq is 3"),
            (2, leaf, good_chain, "seq 2 refused: the next seq is 3"),
            (3, sha256(body), good_chain, "seq 3: leaf_hash is not SHA-256(0x00 || body)"),
            (3, leaf, sha256(leaf), "seq 3: chain is not SHA-256(previous chain || leaf)"),
            (3, rows[1][2], sha256(rows[-1][3] + rows[1][2]), "events_leaf_hash_key"),
        ]
        for seq, leaf_hash, chain, message in cases:
            insert_body = rows[1][1] if leaf_hash == rows[1][2] else body
            with (
                psycopg.connect(str(where.location), autocommit=True) as con,
                pytest.raises(psycopg.Error, match=re.escape(message)),
            ):
                con.execute(
                    "INSERT INTO caseledger.events VALUES (%s, %s, %s, %s, 'k', '', 's', 0, 't')",
                    (seq, insert_body, leaf_hash, chain),
                )
        assert where.rows() == rows
    finally:
        drop_pg_store(where)


# ----------------------------------------------------------------- many processes


def test_four_writer_processes_make_one_chain(store: Store) -> None:
    store.create().close()
    runs = [f"run-{k}" for k in range(4)]
    writers = [spawn(store.location, run, 300, 10) for run in runs]
    start_together(writers)
    for w in writers:
        w.communicate(timeout=300)
        assert w.returncode == 0
    result = verify_ledger(store.location)
    assert result.size == 1 + 4 * 300
    assert result.streams == 5
    rows = store.rows()
    assert [r[0] for r in rows] == list(range(1201))
    for run in runs:
        mine = [r for r in rows if r[6] == run]
        assert [r[7] for r in mine] == list(range(300))
    # Interleaved: the writers ran together, each batch of 10 stayed contiguous.
    streams = [r[6] for r in rows[1:]]
    switches = sum(1 for a, b in itertools.pairwise(streams) if a != b)
    assert switches >= 3
    assert all(len(set(streams[i : i + 10])) == 1 for i in range(0, 1200, 10))


@pytest.mark.parametrize("delay", [0.05, 0.2])
def test_sigkill_mid_batch_leaves_no_partial_batch(store: Store, delay: float) -> None:
    store.create().close()
    batch = 5000
    writer = spawn(store.location, "run-k", 10 * batch, batch)
    start_together([writer])
    assert writer.stdout is not None
    assert writer.stdout.readline().split() == ["committed", str(batch)]
    time.sleep(delay)  # inside the next batch: signing 5,000 events takes longer than this
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL
    result = verify_ledger(store.location)
    assert (result.size - 1) % batch == 0
    assert result.size >= 1 + batch
    # The lock died with the process: the next writer appends at once.
    with store.open(busy_timeout_s=5) as ledger:
        assert ledger.append([prompt("after", 0)], operator()) == [result.size]
    assert verify_ledger(store.location).size == result.size + 1


# ----------------------------------------------------------------- tampering, checkpoints


def test_checkpoints_are_stored_after_finished_runs(store: Store) -> None:
    ledger = store.create()
    ledger.register(adapter(), by=operator())
    ledger.append([prompt("run-a", i) for i in range(5)], adapter())
    ledger.append([finished("run-a")], adapter())  # an adapter key signs no checkpoint
    assert ledger.stored_checkpoints() == []
    ledger.append([prompt("run-b", 0), finished("run-b")], operator())
    ((size, note),) = ledger.stored_checkpoints()
    assert size == 10
    leaves = [r[2] for r in store.rows()]
    origin = "caseledger/" + leaves[0].hex()[:16]
    root = base64.b64encode(merkle_root(leaves)).decode()
    assert note.startswith(f"{origin}\n10\n{root}\n\n\u2014 test-operator ")
    result = verify_ledger(store.location)
    assert result.stored_checkpoint_sizes == (10,)
    assert result.root_hash == merkle_root(leaves)


@TAMPERED
@pytest.mark.parametrize(
    ("statement", "params", "error", "message"),
    [
        ("UPDATE events SET body = %s WHERE seq = 4", (b'{"x":1}',), ChainBrokenError,
         "seq 4: body hashes to"),
        ("UPDATE events SET stream = 'run-z' WHERE seq = 3", (), ChainBrokenError,
         "seq 3: the row's columns say stream 'run-z'"),
        ("DELETE FROM events WHERE seq = 5", (), ChainBrokenError,
         r"seq 5: missing \(the next stored row is seq 6\)"),
        ("DELETE FROM events WHERE seq >= 7", (), ProofError,
         "seq 7: the ledger ends at size 7, but the checkpoint stored at size 9 covers 9 events"),
    ],
    ids=["body", "query column", "hole", "tail cut"],
)  # fmt: skip
def test_verify_catches_tampering(
    store: Store, statement: str, params: tuple[object, ...], error: type[Exception], message: str
) -> None:
    ledger = store.create()
    ledger.append([prompt("run-a", i) for i in range(7)] + [finished("run-a")], operator())
    ledger.close()
    assert verify_ledger(store.location).size == 9
    store.tamper(statement, params)
    with pytest.raises(error, match=message):
        verify_ledger(store.location)


@TAMPERED
@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("sig", bytes(64), "its signature does not verify under key test-operator ({key})"),
        ("key_id", "0badc0de", "signed by unregistered key id 0badc0de"),
    ],
    ids=["zero signature", "unregistered key"],
)  # fmt: skip
def test_no_writer_appends_on_top_of_a_row_verify_refuses(
    store: Store, column: str, value: object, problem: str
) -> None:
    """Issue 29: a head row that verify refuses (changed here behind the store's back;
    on PostgreSQL the same row a writer role could insert with raw SQL, see
    test_pg_enforcement.py) stops a writer opening the ledger, naming the seq (and on
    PostgreSQL the role the server recorded for the row); nothing is appended on top.
    (The writer that stored the row trusts its own rows; an UPDATE is refused to every
    role but a superuser.)"""
    ledger = store.create()
    ledger.append([prompt("run-a", 0), prompt("run-a", 1)], operator())
    store.tamper(f"UPDATE events SET {column} = %s WHERE seq = 2", (value,))  # noqa: S608 (a column of this test)
    before = store.rows()
    by = " (written by database role ledger_writer)" if store.kind == "postgresql" else ""
    expected = (
        f"append refused: seq 2{by}: {problem.format(key=operator().key_id)}; "
        "nothing was appended on top of it"
    )
    ledger.close()
    for attempt in range(2):
        with pytest.raises(SignatureError) as caught:
            store.open().append([prompt("run-a", 2 + attempt)], operator())
        assert (caught.value.message, caught.value.seq, caught.value.exit_code) == (expected, 2, 1)
        assert (caught.value.hint or "").startswith(
            "the ledger's owner must remove that row"
            if store.kind == "postgresql"
            else "the ledger file was changed behind caseledger's back"
        )
    assert store.rows() == before


# ----------------------------------------------------------------- the command line


def test_the_command_line_works_on_every_store(store: Store, tmp_path: Path) -> None:
    """init (granting the writer role on PostgreSQL), publish, run, verify, report."""
    home = tmp_path / "home"
    grant = ["--grant-writer", "ledger_writer"] if store.kind == "postgresql" else []
    done = caseledger(store.owner_location, "init", *grant, cwd=tmp_path, home=home)
    assert done.returncode == 0, done.stderr
    shown = str(store.owner_location).replace(":owner-pw@", ":***@")
    assert done.stdout.startswith(f"created ledger {shown}\n")
    assert "owner-pw" not in done.stdout + done.stderr
    key_home = home if store.kind == "postgresql" else Path(store.location).parent
    assert (key_home / "keys" / "operator.key").is_file()
    if store.kind == "postgresql":
        assert done.stdout.splitlines()[1] == (
            "granted ledger_writer: append (INSERT, SELECT; UPDATE of the append lock)"
        )
    again = caseledger(store.owner_location, "init", cwd=tmp_path, home=home)
    assert again.returncode == 2
    assert f"error: a ledger already exists at {shown}" in again.stderr
    steps = [
        ["bank", "publish", "sales-fixture"],
        ["run", "--bank", "sales-fixture", "--adapter", "reference", "--run-id", "self"],
        ["verify"],
    ]
    for args in steps:
        done = caseledger(store.location, *args, cwd=tmp_path, home=home)
        assert done.returncode == 0, (args, done.stderr)
    assert done.stdout.startswith("verified: ")
    report = caseledger(store.location, "report", "--format", "json", cwd=tmp_path, home=home)
    assert report.returncode == 0, report.stderr
    head = json.loads(report.stdout)["checkpoint"]
    assert f"root {head['root_hash']}" in done.stdout  # the report's tree is the verified one
    with store.open(readonly=True) as ledger:
        assert head["tree_size"] == ledger.size()
        assert ledger.streams()[1:] == ["self"]
    # a command that needs a ledger file says so instead of failing obscurely
    if store.kind == "postgresql":
        out = tmp_path / "audit"
        args = ["export", "audit", "-o", str(out)]
        done = caseledger(store.location, *args, cwd=tmp_path, home=home)
        assert done.returncode == 2
        assert "this command needs a ledger file" in done.stderr
        assert "writer-pw" not in done.stderr


def test_ledger_copy_between_stores_keeps_every_byte(pg_cluster: PgCluster, tmp_path: Path) -> None:
    """SQLite -> PostgreSQL -> SQLite: every copy verifies, holds the same rows and
    stored checkpoints, and rebuilds the report byte for byte."""
    home = tmp_path / "home"
    first = tmp_path / "first.db"
    for args in (
        ["init"],
        ["bank", "publish", "sales-fixture"],
        ["run", "--bank", "sales-fixture", "--adapter", "reference", "--run-id", "self"],
    ):
        done = caseledger(first, *args, cwd=tmp_path, home=home)
        assert done.returncode == 0, (args, done.stderr)
    server = fresh_pg_store(pg_cluster)
    back = tmp_path / "back.db"
    try:
        done = caseledger("", "ledger", "copy", str(first), str(server.owner_location),
                          cwd=tmp_path, home=home)  # fmt: skip
        assert done.returncode == 0, done.stderr
        with Ledger.open(first, readonly=True) as source:
            size = source.size()
            checkpoints = source.stored_checkpoints()
        shown = str(server.owner_location).replace(":owner-pw@", ":***@")
        assert done.stdout.startswith(f"copied {size} events from {first} to {shown}; verified: ")
        sqlite_rows = Store("sqlite", first, first).rows()
        assert server.rows() == sqlite_rows
        done = caseledger("", "ledger", "copy", str(server.owner_location), str(back),
                          cwd=tmp_path, home=home)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert Store("sqlite", back, back).rows() == sqlite_rows
        with Ledger.open(server.owner_location) as copy:
            assert copy.stored_checkpoints() == checkpoints
        assert len(checkpoints) == 2  # after BankPublished and after RunFinished
        for fmt in ("json", "md", "html"):
            built = [
                caseledger(where, "report", "--format", fmt, cwd=tmp_path, home=home)
                for where in (first, server.owner_location, back)
            ]
            assert all(b.returncode == 0 for b in built), [b.stderr for b in built]
            assert built[0].stdout == built[1].stdout == built[2].stdout
            assert len(built[0].stdout) > 1000
        # a second copy onto an existing ledger is refused, nothing changed
        again = caseledger("", "ledger", "copy", str(first), str(back), cwd=tmp_path, home=home)
        assert again.returncode == 2
        assert f"error: a ledger already exists at {back}" in again.stderr
    finally:
        drop_pg_store(server)
