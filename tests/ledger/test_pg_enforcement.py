"""Issue 29 item 3: on PostgreSQL no database role can poison the shared log.

Every test runs on a real throwaway cluster (tests/pgcluster.py) with the roles a
database administrator makes (tests/ledger/store_kit.py): the schema's owner, a writer
with what ``init --grant-writer`` grants, and here also a reader with what
``--grant-reader`` grants. The attacks are raw SQL through psycopg as the writer or
reader role; the rows they insert are built in this file with hashlib and
cryptography (DESIGN.md's formulas), never by the store. What must hold:

* the server records which role wrote each row and checkpoint, whatever the client
  sends, and refuses a checkpoint whose size or root is not the log's;
* a row or note the server cannot check (an Ed25519 signature) stops the next honest
  writer before it appends on top, with exit 1 naming the seq (or size) and the role,
  and nothing is appended;
* the reader role can neither take the append lock nor hold a writer up; a writer that
  waits for the lock names the role and server pid holding it;
* a ledger made before (schema 1) is upgraded by its owner, with every stored row's
  tree node filled in; until then writers refuse to append to it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ledger_testkit import STRANGER_SEED, fixed_clock, operator, prompt
from pgcluster import PgCluster
from store_kit import (
    WRITER,
    Store,
    drop_pg_store,
    fresh_pg_store,
    merkle_root,
    pg_url,
    sha256,
)

from ledger.errors import ProofError, SignatureError, StoreBusyError, StoreError
from ledger.events import RunFinished
from ledger.keys import Signer
from ledger.store import Draft, Ledger
from ledger.stores.postgres import _DDL, grant_reader
from ledger.verify import verify_ledger

READER, READER_PASSWORD = "ledger_reader", "reader-pw"
OPERATOR_KEY_ID = operator().key_id


@pytest.fixture
def pg(pg_cluster: PgCluster) -> Iterator[Store]:
    """A fresh database on the cluster, a reader role that may connect to it."""
    where = fresh_pg_store(pg_cluster)
    with psycopg.connect(pg_cluster.superuser_dsn, autocommit=True) as con:
        exists = con.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (READER,)).fetchone()
        if exists is None:
            con.execute(f"CREATE ROLE {READER} LOGIN PASSWORD '{READER_PASSWORD}'")
        con.execute(f"GRANT CONNECT ON DATABASE {where.dbname} TO {READER}")
    try:
        yield where
    finally:
        for ledger in where.opened:
            with contextlib.suppress(Exception):
                ledger.close()
        drop_pg_store(where)


def reader_url(where: Store) -> str:
    assert where.cluster is not None
    return pg_url(where.cluster, READER, READER_PASSWORD, where.dbname)


def owner_url(where: Store) -> str:
    return str(where.owner_location)


def as_role(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True)


def stored(where: Store, sql: str) -> list[tuple[Any, ...]]:
    with where.superuser() as con:
        return [tuple(r) for r in con.execute(sql)]


def forged_row(where: Store, sig: bytes) -> tuple[Any, ...]:
    """The next events row, built by hand: a PromptSent of a new stream at the right seq,
    with its leaf hash and chain right and the signature given."""
    ((seq, chain),) = stored(
        where, "SELECT seq, chain FROM caseledger.events ORDER BY seq DESC LIMIT 1"
    )
    body = json.dumps(
        {
            "at": fixed_clock(),
            "attempt": 1,
            "case_id": "forged",
            "prompt": "forced in by the writer role",
            "prompt_sha256": "sha256:" + "0" * 64,
            "stream": "run-forged",
            "stream_prev": None,
            "stream_seq": 0,
            "type": "prompt.sent.v1",
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    leaf = sha256(b"\x00" + body)
    return (seq + 1, body, leaf, sha256(bytes(chain) + leaf), OPERATOR_KEY_ID, sig,
            "run-forged", 0, "prompt.sent.v1")  # fmt: skip


INSERT_ROW = (
    "INSERT INTO caseledger.events (seq, body, leaf_hash, chain, key_id, sig, stream, "
    "stream_seq, type, writer) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


def note_text(where: Store, size: int) -> str:
    """The tlog-checkpoint body over the first ``size`` leaves, computed here."""
    leaves = [
        bytes(r[0]) for r in stored(where, "SELECT leaf_hash FROM caseledger.events ORDER BY seq")
    ]
    origin = "caseledger/" + leaves[0].hex()[:16]
    return f"{origin}\n{size}\n{base64.b64encode(merkle_root(leaves[:size])).decode()}\n"


def home_with_operator(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    operator().save(home / "keys" / "operator.key")
    return home


def caseledger(location: str, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "caseledger"), "--ledger", location, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "CASELEDGER_HOME": str(home)},
        cwd=home.parent,
        timeout=120,
        check=False,
    )


# ----------------------------------------------------------------- who wrote each row


def test_the_server_records_the_writing_role_whatever_the_client_sends(pg: Store) -> None:
    ledger = pg.create()  # genesis by the owner, then the writer
    ledger.append([prompt("run-a", 0), prompt("run-a", 1)], operator())
    with as_role(str(pg.location)) as con:
        con.execute(INSERT_ROW, (*forged_row(pg, bytes(64)), "ledger_owner"))  # claims the owner
    assert stored(pg, "SELECT seq, writer FROM caseledger.events ORDER BY seq") == [
        (0, "ledger_owner"),
        (1, WRITER),
        (2, WRITER),
        (3, WRITER),  # not the owner it claimed
    ]


def test_an_unsigned_row_stops_the_next_honest_writer(pg: Store, tmp_path: Path) -> None:
    """The writer role's row with the right seq, leaf hash and chain but a zero
    signature passes the server (it cannot check Ed25519); every honest writer then
    refuses to append on top of it: the one that was already writing, a fresh one, and
    the command line (exit 1), each naming seq 3 and the role, and nothing is added."""
    honest = pg.create()
    honest.append([prompt("run-a", 0), prompt("run-a", 1)], operator())
    with as_role(str(pg.location)) as con:
        con.execute(INSERT_ROW, (*forged_row(pg, bytes(64)), None))
    before = pg.rows()
    assert len(before) == 4
    expected = (
        f"append refused: seq 3 (written by database role {WRITER}): its signature does not "
        f"verify under key test-operator ({OPERATOR_KEY_ID}); nothing was appended on top of it"
    )
    for writer in (honest, pg.open()):
        with pytest.raises(SignatureError) as caught:
            writer.append([prompt("run-a", 2)], operator())
        assert caught.value.message == expected
        assert (caught.value.seq, caught.value.exit_code) == (3, 1)
    home = home_with_operator(tmp_path)
    done = caseledger(str(pg.location), "checkpoint", home=home)
    assert done.returncode == 1, done.stderr
    assert expected in done.stderr
    assert "Traceback" not in done.stderr
    assert pg.rows() == before  # nothing on top, no checkpoint event
    assert stored(pg, "SELECT count(*) FROM caseledger.checkpoints") == [(0,)]
    # verify names the same row
    with pytest.raises(SignatureError, match=r"^seq 3: signature does not verify"):
        verify_ledger(str(pg.location))
    # The repair docs/stores.md gives the owner: the bad row is the head, remove it.
    with where_owner(pg) as con, con.transaction():
        con.execute("ALTER TABLE caseledger.events DISABLE TRIGGER events_refuse_change")
        con.execute("DELETE FROM caseledger.events WHERE seq = 3")
        con.execute("ALTER TABLE caseledger.events ENABLE TRIGGER events_refuse_change")
    assert pg.rows() == before[:3]
    assert pg.open().append([prompt("run-a", 2)], operator()) == [3]
    assert verify_ledger(str(pg.location)).size == 4


def test_a_row_signed_by_an_unregistered_key_is_refused_naming_the_role(pg: Store) -> None:
    """A writer machine signing with a key of its own that the ledger never registered."""
    honest = pg.create()
    stranger = Signer.from_seed("test-operator", STRANGER_SEED)
    row = list(forged_row(pg, bytes(64)))
    prev_chain = stored(pg, "SELECT chain FROM caseledger.events WHERE seq = 0")[0][0]
    row[4] = stranger.key_id
    row[5] = stranger.sign(b"caseledger/event/v2\n" + bytes(prev_chain) + row[2])
    with as_role(str(pg.location)) as con:
        con.execute(INSERT_ROW, (*row, None))
    with pytest.raises(SignatureError) as caught:
        honest.append([prompt("run-a", 0)], operator())
    assert caught.value.message == (
        f"append refused: seq 1 (written by database role {WRITER}): signed by unregistered "
        f"key id {stranger.key_id}; nothing was appended on top of it"
    )
    assert len(pg.rows()) == 2


# ----------------------------------------------------------------- checkpoints


def test_the_server_refuses_a_checkpoint_that_is_not_the_log_tree_head(pg: Store) -> None:
    ledger = pg.create()
    ledger.append([prompt("run-a", i) for i in range(12)], operator())  # 13 events
    good = note_text(pg, 13)
    junk = [
        (13, "junk\n"),
        (13, good.replace("\n13\n", "\n12\n")),  # the size line is not the row's size
        (12, note_text(pg, 13).replace("\n13\n", "\n12\n")),  # the root of 13, said to be 12
        (14, note_text(pg, 13).replace("\n13\n", "\n14\n")),  # more events than the log holds
        (13, "caseledger/0000000000000000" + good[good.index("\n") :]),  # another log's origin
    ]
    with as_role(str(pg.location)) as con:
        for size, text in junk:
            with pytest.raises(psycopg.errors.IntegrityConstraintViolation) as caught:
                con.execute(
                    "INSERT INTO caseledger.checkpoints (size, note) VALUES (%s, %s)",
                    (size, text + "\n— x AAAA\n"),
                )
            assert f"caseledger checkpoints: size {size} refused" in str(caught.value)
        with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="holds 13 events"):
            con.execute(
                "INSERT INTO caseledger.checkpoints (size, note) VALUES (14, %s)",
                (note_text(pg, 13).replace("\n13\n", "\n14\n"),),
            )
    assert stored(pg, "SELECT count(*) FROM caseledger.checkpoints") == [(0,)]
    # The log's own tree head at every size is accepted (its signature is the writers' check).
    operator_note = operator().sign_note(note_text(pg, 5))
    with as_role(str(pg.location)) as con:
        con.execute(
            "INSERT INTO caseledger.checkpoints (size, note, writer, added) VALUES (5, %s, 'x', 0)",
            (operator_note,),
        )
    assert stored(pg, "SELECT size, writer, added FROM caseledger.checkpoints") == [(5, WRITER, 13)]
    ledger.append([prompt("run-a", 12)], operator())  # an operator's note: nothing to refuse
    assert verify_ledger(str(pg.location)).stored_checkpoint_sizes == (5,)


def test_a_checkpoint_signed_by_another_key_stops_the_next_honest_writer(
    pg: Store, tmp_path: Path
) -> None:
    """A note with the right origin, size and root (which the server checks) signed by a
    key the ledger does not hold as an operator's: the server cannot check Ed25519, the
    next writer does, before appending anything."""
    honest = pg.create()
    honest.append([prompt("run-a", i) for i in range(6)], operator())  # 7 events
    stranger = Signer.from_seed("test-operator", STRANGER_SEED)
    with as_role(str(pg.location)) as con:
        con.execute(
            "INSERT INTO caseledger.checkpoints (size, note) VALUES (7, %s)",
            (stranger.sign_note(note_text(pg, 7)),),
        )
    before = pg.rows()
    for writer in (honest, pg.open()):
        with pytest.raises(ProofError) as caught:
            writer.append([prompt("run-a", 6)], operator())
        assert caught.value.message.startswith(
            f"append refused: the checkpoint stored at size 7 (added by database role {WRITER}) "
            "is not a checkpoint signed by an operator key of this ledger: "
        )
        assert caught.value.message.endswith("; nothing was appended")
        assert caught.value.exit_code == 1
    done = caseledger(str(pg.location), "checkpoint", home=home_with_operator(tmp_path))
    assert done.returncode == 1
    assert f"the checkpoint stored at size 7 (added by database role {WRITER})" in done.stderr
    assert pg.rows() == before


def test_a_finished_run_stores_a_checkpoint_the_server_accepts(pg: Store) -> None:
    """The honest path through the server's check: the note a writer signs for its
    batch is the log's tree head (origin, size, root computed here)."""
    ledger = pg.create()
    ledger.append([prompt("run-a", i) for i in range(10)], operator())
    ledger.append([Draft(RunFinished, "run-a", {"status": "completed"})], operator())
    ((size, note, writer, added),) = stored(
        pg, "SELECT size, note, writer, added FROM caseledger.checkpoints"
    )
    assert (size, writer, added) == (12, WRITER, 12)
    assert note.startswith(note_text(pg, 12) + "\n— test-operator ")


# ----------------------------------------------------------------- the append lock


def test_the_reader_role_cannot_take_or_hold_the_append_lock(pg: Store) -> None:
    ledger = pg.create()
    with where_owner(pg) as con:
        grant_reader(con, READER)
    with as_role(reader_url(pg)) as reader:
        for statement in (
            "SELECT 1 FROM caseledger.append_lock FOR UPDATE",
            "SELECT 1 FROM caseledger.append_lock FOR KEY SHARE",
            "LOCK TABLE caseledger.append_lock IN EXCLUSIVE MODE",
            "LOCK TABLE caseledger.events IN SHARE MODE",
        ):
            reader.execute("BEGIN")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                reader.execute(statement)
            reader.execute("ROLLBACK")
        # What the reader may take, held while a writer appends: the advisory lock the
        # store used to take, and the shared locks of plain reads.
        old_key = int.from_bytes(sha256(b"caseledger/append")[:8], signed=True)
        reader.execute("SELECT pg_advisory_lock(%s)", (old_key,))
        reader.execute("BEGIN")
        reader.execute("LOCK TABLE caseledger.append_lock IN ACCESS SHARE MODE")
        reader.execute("SELECT count(*) FROM caseledger.events").fetchone()
        writer = pg.open(busy_timeout_s=1.0)
        assert writer.append([prompt("run-a", 0)], operator()) == [1]
        assert ledger.append([prompt("run-a", 1)], operator()) == [2]
        reader.execute("ROLLBACK")
    assert len(pg.rows()) == 3
    # The writer's UPDATE privilege on the lock table serves FOR UPDATE only.
    with as_role(str(pg.location)) as writer_con:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            writer_con.execute("UPDATE caseledger.append_lock SET id = 1")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            writer_con.execute("DELETE FROM caseledger.append_lock")
    assert stored(pg, "SELECT id FROM caseledger.append_lock") == [(1,)]


def test_a_waiting_writer_names_who_holds_the_lock(pg: Store) -> None:
    pg.create()
    waiting = pg.open(busy_timeout_s=0.3)
    with as_role(str(pg.location)) as holder:
        (pid,) = holder.execute("SELECT pg_backend_pid()").fetchone()  # type: ignore[misc]
        holder.execute("BEGIN")
        holder.execute("SELECT 1 FROM caseledger.append_lock FOR UPDATE")
        with pytest.raises(StoreBusyError) as caught:
            waiting.append([prompt("run-a", 0)], operator())
        holder.execute("ROLLBACK")
    assert caught.value.message.startswith(
        f"ledger is busy: role {WRITER} (server pid {pid}) has held the append lock on "
    )
    assert caught.value.exit_code == 2
    assert waiting.append([prompt("run-a", 0)], operator()) == [1]


@contextlib.contextmanager
def where_owner(where: Store) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(owner_url(where), autocommit=True) as con:
        yield con


# ----------------------------------------------------------------- schema 1 ledgers


def test_a_schema_1_ledger_is_upgraded_by_its_owner(pg: Store, tmp_path: Path) -> None:
    """A ledger made before issue 29: the owner's upgrade fills in the tree node of every
    stored row (checked against the RFC 9162 subtree computed here) and the server's
    root at every size; writers refuse to append until then."""
    source = tmp_path / "source.db"
    with Ledger.create(source, operator(), clock=fixed_clock) as made:
        made.append([prompt(f"run-{i % 2}", i) for i in range(12)], operator())
        rows = [r[:9] for r in made.scan_rows()]
    leaves = [r[2] for r in rows]
    assert len(rows) == 13
    with where_owner(pg) as con:  # what `init` made before: the schema-1 DDL
        con.execute(_DDL)
        con.execute("INSERT INTO caseledger.meta VALUES ('format', 'caseledger-ledger/1')")
        with con.cursor() as cur:
            cur.executemany(
                "INSERT INTO caseledger.events VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", rows
            )
        con.execute(
            "INSERT INTO caseledger.checkpoints VALUES (13, %s)",
            (operator().sign_note(note_text(pg, 13)),),
        )
        for statement in (  # what --grant-writer granted then
            "GRANT USAGE ON SCHEMA caseledger TO {w}",
            "GRANT SELECT, INSERT ON caseledger.events, caseledger.checkpoints TO {w}",
            "GRANT SELECT ON caseledger.meta TO {w}",
        ):
            con.execute(statement.format(w=WRITER))
    writer = pg.open()
    with pytest.raises(StoreError) as caught:
        writer.append([prompt("run-a", 99)], operator())
    assert caught.value.exit_code == 2
    assert "has schema 1" in caught.value.message
    assert "ledger upgrade" in (caught.value.hint or "")
    assert verify_ledger(str(pg.location)).size == 13  # reading needs no upgrade
    refused = caseledger(str(pg.location), "ledger", "upgrade", home=tmp_path / "writer-home")
    assert refused.returncode == 2
    assert "the connected role does not own schema caseledger" in refused.stderr
    assert stored(pg, "SELECT count(*) FROM caseledger.meta") == [(1,)]  # nothing changed
    done = caseledger(owner_url(pg), "ledger", "upgrade", home=tmp_path / "owner-home")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("upgraded ")
    again = caseledger(owner_url(pg), "ledger", "upgrade", home=tmp_path / "owner-home")
    assert again.returncode == 0, again.stderr
    assert "already at schema 2" in again.stdout
    nodes = stored(pg, "SELECT seq, node, writer FROM caseledger.events ORDER BY seq")
    for seq, node, who in nodes:
        width = (seq + 1) & -(seq + 1)  # the lowest set bit of seq + 1
        assert bytes(node) == merkle_root(leaves[seq + 1 - width : seq + 1]), seq
        assert who is None  # the server did not record who wrote rows before schema 2
    with pg.superuser() as con:
        for size in range(1, 14):
            (root,) = con.execute("SELECT caseledger.tree_root(%s)", (size,)).fetchone()  # type: ignore[misc]
            assert bytes(root) == merkle_root(leaves[:size]), size
    writer = pg.open()  # the upgrade granted the writer the lock table
    assert writer.append([prompt("run-a", 99)], operator()) == [13]
    assert stored(pg, "SELECT writer FROM caseledger.events WHERE seq = 13") == [(WRITER,)]
    assert verify_ledger(str(pg.location)).size == 14


def test_the_server_tree_head_is_rfc_9162_at_every_size(pg: Store) -> None:
    """The nodes the server stores per row and the root it folds from them, against
    RFC 9162 written out here, at every size of a 300-event log appended in uneven
    batches (exhaustive over the sizes: every shape of size's binary expansion up to
    300 is met, which sampling would not promise)."""
    ledger = pg.create()
    for start, stop in ((0, 1), (1, 64), (64, 65), (65, 200), (200, 299)):
        ledger.append([prompt(f"run-{i % 3}", i) for i in range(start, stop)], operator())
    leaves = [bytes(r[2]) for r in pg.rows()]
    assert len(leaves) == 300
    with pg.superuser() as con:
        nodes = [
            bytes(r[0]) for r in con.execute("SELECT node FROM caseledger.events ORDER BY seq")
        ]
        roots = [
            bytes(con.execute("SELECT caseledger.tree_root(%s)", (size,)).fetchone()[0])  # type: ignore[index]
            for size in range(1, 301)
        ]
        assert con.execute("SELECT caseledger.tree_root(0)").fetchone() == (None,)
        assert con.execute("SELECT caseledger.tree_root(301)").fetchone() == (None,)
    for seq, node in enumerate(nodes):
        width = (seq + 1) & -(seq + 1)
        assert node == merkle_root(leaves[seq + 1 - width : seq + 1]), seq
    assert roots == [merkle_root(leaves[:size]) for size in range(1, 301)]
