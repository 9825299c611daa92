"""What the store contract tests need of each store: an empty place and raw access to it.

``Store`` is an empty place for a ledger (a SQLite file, or a fresh PostgreSQL
database on the throwaway cluster of tests/pgcluster.py) with the raw access its
tests need: the rows as stored, a change past the triggers, a statement with the
writer's own rights, the write lock held from another connection.

On the cluster (set up by the bootstrap superuser, as a database administrator would):

* ``ledger_owner`` owns each test's database and creates the ledger schema in it
  (``caseledger init`` as the owner);
* ``ledger_writer`` (password ``writer-pw``, SCRAM over the socket) is granted what
  docs/stores.md says a writer gets: USAGE on the schema, INSERT and SELECT.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from ledger_testkit import fixed_clock, operator
from pgcluster import PgCluster

from ledger.keys import Signer
from ledger.store import Ledger
from ledger.stores import Location
from ledger.stores.postgres import grant_writer

OWNER, WRITER, WRITER_PASSWORD = "ledger_owner", "ledger_writer", "writer-pw"
_DATABASES = itertools.count()


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def merkle_root(leaves: list[bytes]) -> bytes:
    """RFC 9162 section 2.1.1, written out: MTH of the leaf hashes given."""
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return sha256(b"\x01" + merkle_root(leaves[:k]) + merkle_root(leaves[k:]))


def pg_url(cluster: PgCluster, user: str, password: str, dbname: str) -> str:
    """A ``postgresql://`` URL over the cluster's Unix socket."""
    return f"postgresql://{user}:{password}@/{dbname}?host={cluster.socket_dir}&port={cluster.port}"


@dataclass
class Store:
    """One empty place for a ledger, with the raw access its tests need."""

    kind: str
    location: Location  # what writers open
    owner_location: Location  # what creates the ledger
    cluster: PgCluster | None = None
    dbname: str = ""
    opened: list[Ledger] = field(default_factory=list)

    def create(self, signer: Signer | None = None, **kw: Any) -> Ledger:
        """Create the ledger (as the owner), grant the writer, reopen it as the writer."""
        ledger = Ledger.create(self.owner_location, signer or operator(), clock=fixed_clock, **kw)
        ledger.close()
        if self.kind == "postgresql":
            with self.superuser() as con:
                grant_writer(con, WRITER)
        return self.open()

    def open(self, **kw: Any) -> Ledger:
        """The ledger as a writer opens it (fixed clock unless given)."""
        kw.setdefault("clock", fixed_clock)
        ledger = Ledger.open(self.location, **kw)
        self.opened.append(ledger)
        return ledger

    @contextlib.contextmanager
    def superuser(self) -> Iterator[psycopg.Connection[Any]]:
        """A superuser connection to the test's database (PostgreSQL only)."""
        assert self.cluster is not None
        with psycopg.connect(self.cluster.dsn("cl_super", self.dbname), autocommit=True) as con:
            yield con

    def execute_as_writer(self, sql: str) -> None:
        """Run one statement with the writer's own rights (a raw connection, not the store)."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(Path(self.location), isolation_level=None)
            try:
                conn.execute(sql)
            finally:
                conn.close()
        else:
            with psycopg.connect(str(self.location), autocommit=True) as con:
                con.execute(sql.replace("events", "caseledger.events").replace(
                    "checkpoints", "caseledger.checkpoints"
                ))  # fmt: skip

    def tamper(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        """Change rows behind the store's back, past its triggers (what an attacker can do)."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(Path(self.location), isolation_level=None)
            try:
                for name in (
                    "events_refuse_update",
                    "events_refuse_delete",
                    "checkpoints_refuse_delete",
                ):
                    conn.execute(f"DROP TRIGGER IF EXISTS {name}")
                conn.execute(sql.replace("%s", "?"), params)
            finally:
                conn.close()
        else:
            with self.superuser() as con:
                con.execute("SET search_path = caseledger")
                con.execute("SET session_replication_role = replica")  # user triggers off
                con.execute(sql, params)

    def rows(self) -> list[tuple[Any, ...]]:
        """Every stored column of every event row by seq, read without the store."""
        query = "SELECT seq, body, leaf_hash, chain, key_id, sig, stream, stream_seq, type "
        if self.kind == "sqlite":
            with contextlib.closing(sqlite3.connect(Path(self.location))) as conn:
                return conn.execute(query + "FROM events ORDER BY seq").fetchall()
        with self.superuser() as con:
            return [tuple(r) for r in con.execute(query + "FROM caseledger.events ORDER BY seq")]

    @contextlib.contextmanager
    def hold_write_lock(self) -> Iterator[None]:
        """Hold the store's write lock from another connection (a writer mid-batch)."""
        if self.kind == "sqlite":
            holder = sqlite3.connect(Path(self.location), isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            try:
                yield
            finally:
                holder.execute("ROLLBACK")
                holder.close()
        else:
            with psycopg.connect(str(self.location), autocommit=True) as holder:
                holder.execute("BEGIN")
                holder.execute("SELECT 1 FROM caseledger.append_lock WHERE id = 1 FOR UPDATE")
                try:
                    yield
                finally:
                    holder.execute("ROLLBACK")


def fresh_pg_store(cluster: PgCluster) -> Store:
    """A new database owned by the owner role; the writer may connect to it."""
    dbname = f"ledger_{os.getpid()}_{next(_DATABASES)}"
    with psycopg.connect(cluster.superuser_dsn, autocommit=True) as con:
        con.execute(f"CREATE DATABASE {dbname} OWNER {OWNER}")
        con.execute(f"REVOKE ALL ON DATABASE {dbname} FROM PUBLIC")
        con.execute(f"GRANT CONNECT ON DATABASE {dbname} TO {WRITER}")
    return Store(
        "postgresql",
        pg_url(cluster, WRITER, WRITER_PASSWORD, dbname),
        pg_url(cluster, OWNER, "owner-pw", dbname),
        cluster,
        dbname,
    )


def drop_pg_store(store: Store) -> None:
    assert store.cluster is not None
    with psycopg.connect(store.cluster.superuser_dsn, autocommit=True) as con:
        con.execute(f"DROP DATABASE IF EXISTS {store.dbname} WITH (FORCE)")


def setup_roles(cluster: PgCluster) -> None:
    """The owner and writer roles (once per cluster)."""
    with psycopg.connect(cluster.superuser_dsn, autocommit=True) as con:
        con.execute(f"CREATE ROLE {OWNER} LOGIN PASSWORD 'owner-pw'")
        con.execute(f"CREATE ROLE {WRITER} LOGIN PASSWORD '{WRITER_PASSWORD}'")


#: The installed ``caseledger`` command beside this interpreter.
CASELEDGER = str(Path(sys.executable).parent / "caseledger")


def caseledger(
    location: object, *args: str, cwd: Path, home: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``caseledger --ledger LOCATION ARGS`` in a real process (keys in ``home``)."""
    return subprocess.run(
        [CASELEDGER, "--ledger", str(location), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "CASELEDGER_HOME": str(home)},
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
