"""The PostgreSQL backend: one ledger per database, shared by many writers on many hosts.

The ledger lives in the schema ``caseledger`` of the database a ``postgresql://`` URL
names (docs/stores.md): tables ``meta``, ``events`` (the same columns as the SQLite
file, ``bytea`` for blobs) and ``checkpoints``. What the server enforces, whoever
connects:

* ``events``, ``checkpoints`` and ``meta`` are append-only: row triggers refuse
  UPDATE and DELETE, statement triggers refuse TRUNCATE (also for the owner, unless
  the owner drops the triggers); the writer role is granted INSERT and SELECT only
  (:func:`grant_writer`), so it could not drop them;
* every inserted event row continues the log: a BEFORE INSERT trigger requires
  ``seq`` = the next leaf index (no gap, no reuse), ``leaf_hash`` = SHA-256(0x00 ||
  body) and ``chain`` = SHA-256(previous chain || leaf hash) (32 zero bytes before
  seq 0); ``leaf_hash`` (the event id) is UNIQUE. Signatures are Ed25519, which the
  server cannot check: ``verify`` does.

Appends: one transaction per batch. It first takes a transaction-level advisory lock
(``pg_advisory_xact_lock``), so writers queue and each computes its seqs and chain
from the head it then reads; the lock is released by COMMIT or ROLLBACK, also when
the writer's connection dies, and a batch whose writer dies is rolled back whole.
``synchronous_commit = on`` is set for the session: COMMIT returns once the batch is
durable on the server. A writer waits for the lock up to its busy timeout
(``lock_timeout``), then fails with "ledger is busy".

Reads page through ``events`` by seq (keyset, a page per query), so no cursor stays
open between two reads and memory stays flat.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql

from ledger.errors import StoreBusyError, StoreError, UsageError
from ledger.stores import FORMAT, DuplicateLeafError, redact

__all__ = [
    "APPEND_LOCK_KEY",
    "SCHEMA",
    "PostgresBackend",
    "grant",
    "grant_reader",
    "grant_writer",
    "has_ledger",
]

SCHEMA = "caseledger"
#: The advisory lock every append takes (the first 8 bytes of SHA-256("caseledger/append")).
APPEND_LOCK_KEY = int.from_bytes(hashlib.sha256(b"caseledger/append").digest()[:8], signed=True)

# The schema name is spelled out: it is SCHEMA.
_DDL = """
CREATE SCHEMA caseledger;
REVOKE ALL ON SCHEMA caseledger FROM PUBLIC;
CREATE TABLE caseledger.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE caseledger.events (
    seq        BIGINT PRIMARY KEY CHECK (seq >= 0),
    body       BYTEA NOT NULL,
    leaf_hash  BYTEA NOT NULL CONSTRAINT events_leaf_hash_key UNIQUE,
    chain      BYTEA NOT NULL,
    key_id     TEXT NOT NULL,
    sig        BYTEA NOT NULL,
    stream     TEXT NOT NULL,
    stream_seq BIGINT NOT NULL,
    type       TEXT NOT NULL
);
CREATE INDEX events_by_stream ON caseledger.events (stream, stream_seq);
CREATE INDEX events_by_type ON caseledger.events (type, seq);
CREATE TABLE caseledger.checkpoints (size BIGINT PRIMARY KEY CHECK (size > 0), note TEXT NOT NULL);
REVOKE ALL ON ALL TABLES IN SCHEMA caseledger FROM PUBLIC;

CREATE FUNCTION caseledger.refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'caseledger % are append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;

CREATE FUNCTION caseledger.check_append() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    last_seq   BIGINT;
    last_chain BYTEA;
BEGIN
    SELECT seq, chain INTO last_seq, last_chain
        FROM caseledger.events ORDER BY seq DESC LIMIT 1;
    IF NEW.seq IS DISTINCT FROM coalesce(last_seq + 1, 0) THEN
        RAISE EXCEPTION 'caseledger events: seq % refused: the next seq is %',
            NEW.seq, coalesce(last_seq + 1, 0) USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.leaf_hash IS DISTINCT FROM sha256('\\x00'::bytea || NEW.body) THEN
        RAISE EXCEPTION 'caseledger events: seq %: leaf_hash is not SHA-256(0x00 || body)',
            NEW.seq USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.chain IS DISTINCT FROM sha256(
        coalesce(last_chain, decode(repeat('00', 32), 'hex')) || NEW.leaf_hash
    ) THEN
        RAISE EXCEPTION 'caseledger events: seq %: chain is not SHA-256(previous chain || leaf)',
            NEW.seq USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER events_check_append BEFORE INSERT ON caseledger.events
    FOR EACH ROW EXECUTE FUNCTION caseledger.check_append();
CREATE TRIGGER events_refuse_change BEFORE UPDATE OR DELETE ON caseledger.events
    FOR EACH ROW EXECUTE FUNCTION caseledger.refuse_change();
CREATE TRIGGER events_refuse_truncate BEFORE TRUNCATE ON caseledger.events
    FOR EACH STATEMENT EXECUTE FUNCTION caseledger.refuse_change();
CREATE TRIGGER checkpoints_refuse_change BEFORE UPDATE OR DELETE ON caseledger.checkpoints
    FOR EACH ROW EXECUTE FUNCTION caseledger.refuse_change();
CREATE TRIGGER checkpoints_refuse_truncate BEFORE TRUNCATE ON caseledger.checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION caseledger.refuse_change();
CREATE TRIGGER meta_refuse_change BEFORE UPDATE OR DELETE ON caseledger.meta
    FOR EACH ROW EXECUTE FUNCTION caseledger.refuse_change();
CREATE TRIGGER meta_refuse_truncate BEFORE TRUNCATE ON caseledger.meta
    FOR EACH STATEMENT EXECUTE FUNCTION caseledger.refuse_change();
"""

_INSERT = f"INSERT INTO {SCHEMA}.events VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"  # noqa: S608 (a constant schema name; values are bound)


class PostgresBackend:
    """One open ledger database. Use :meth:`create` or :meth:`open`."""

    inserts_in_process = False  # the server writes; this process waits on the socket

    def __init__(self, url: str, conn: psycopg.Connection[Any], busy_timeout_s: float) -> None:
        self.url = url
        self.name = redact(url)
        self.conn = conn
        self.busy_timeout_s = busy_timeout_s
        self._in_batch = False

    # ------------------------------------------------------------ open / create

    @classmethod
    def create(cls, url: str) -> PostgresBackend:
        """Make the ``caseledger`` schema (tables, triggers, privileges) in an empty database.

        The connecting role becomes the owner of the schema; give writers their own
        role with :func:`grant_writer`. StoreError when the database already holds one.
        """
        conn = _connect(url)
        name = redact(url)
        try:
            if _has_ledger(conn):
                raise StoreError(
                    f"a ledger already exists at {name}",
                    hint="use it, or point --ledger at another database",
                )
            with conn.transaction():
                conn.execute(_DDL)  # one transaction: a half-made ledger never has a schema
                conn.execute(
                    f"INSERT INTO {SCHEMA}.meta VALUES ('format', %s)",  # noqa: S608 (a constant schema name; values are bound)
                    (FORMAT,),
                )
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(
                f"cannot create a ledger at {name}: {_first_line(exc)}",
                hint="the role needs CREATE on the database (docs/stores.md)",
            ) from None
        except BaseException:
            conn.close()
            raise
        return cls(url, conn, 10.0)

    @classmethod
    def open(cls, url: str, *, readonly: bool, busy_timeout_s: float) -> PostgresBackend:
        """An existing ledger database; StoreError when there is none or it cannot be read."""
        conn = _connect(url)
        name = redact(url)
        try:
            if not _has_ledger(conn):
                raise StoreError(
                    f"no ledger at {name} (the database has no {SCHEMA}.meta table)",
                    hint=f"run `caseledger --ledger {name} init`, or check the URL",
                )
            row = conn.execute(
                f"SELECT value FROM {SCHEMA}.meta WHERE key = 'format'"  # noqa: S608 (a constant schema name)
            ).fetchone()
            if row is None or row[0] != FORMAT:
                found = row[0] if row else "nothing"
                raise StoreError(f"{name} is not a {FORMAT} ledger (format says {found})")
            if readonly:
                conn.execute("SET default_transaction_read_only = on")
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(
                f"cannot read the ledger at {name}: {_first_line(exc)}",
                hint="the role needs USAGE on schema caseledger and SELECT on its tables "
                "(docs/stores.md)",
            ) from None
        except BaseException:
            conn.close()
            raise
        return cls(url, conn, busy_timeout_s)

    def close(self) -> None:
        """Close the connection (the server rolls back an open batch)."""
        self.conn.close()

    # ------------------------------------------------------------ reads

    def head(self) -> tuple[int, bytes] | None:
        """(seq, chain) of the last row."""
        row = self._fetchone(f"SELECT seq, chain FROM {SCHEMA}.events ORDER BY seq DESC LIMIT 1")  # noqa: S608 (a constant schema name)
        return None if row is None else (int(row[0]), bytes(row[1]))

    def select(
        self, columns: str, start: int, stop: int | None, fetch: int
    ) -> Iterator[tuple[Any, ...]]:
        """Rows of ``start <= seq < stop`` in seq order, one page of ``fetch`` per query."""
        keyed = columns.split(",", 1)[0].strip() == "seq"
        wanted = columns if keyed else f"seq, {columns}"
        bound = "" if stop is None else " AND seq < %(stop)s"
        query = (
            f"SELECT {wanted} FROM {SCHEMA}.events WHERE seq >= %(start)s{bound} "  # noqa: S608 (column lists are constants of ledger.stores; values are bound)
            "ORDER BY seq LIMIT %(fetch)s"
        )
        params: dict[str, int | None] = {"start": start, "stop": stop, "fetch": fetch}
        while True:
            with self._errors():
                rows = self.conn.execute(query, params).fetchall()
            if keyed:
                yield from rows
            else:
                yield from (row[1:] for row in rows)
            if len(rows) < fetch:
                return
            params["start"] = int(rows[-1][0]) + 1

    def chain_at(self, seq: int) -> bytes | None:
        """The stored chain of row ``seq``."""
        row = self._fetchone(f"SELECT chain FROM {SCHEMA}.events WHERE seq = %s", (seq,))  # noqa: S608 (a constant schema name; values are bound)
        return None if row is None else bytes(row[0])

    def rows_at(
        self, keys: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
        """(stream, stream_seq) -> [(seq, leaf hash)] of stored rows, by the stream index."""
        found: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
        query = (
            f"SELECT stream, stream_seq, seq, leaf_hash FROM {SCHEMA}.events "  # noqa: S608 (a constant schema name; values are bound)
            "WHERE (stream, stream_seq) IN (SELECT * FROM unnest(%s::text[], %s::bigint[])) "
            "ORDER BY seq"
        )
        unique = list(dict.fromkeys(keys))
        for i in range(0, len(unique), 1000):
            chunk = unique[i : i + 1000]
            with self._errors():
                rows = self.conn.execute(
                    query, ([k[0] for k in chunk], [k[1] for k in chunk])
                ).fetchall()
            for stream, stream_seq, seq, leaf in rows:
                found.setdefault((stream, int(stream_seq)), []).append((int(seq), bytes(leaf)))
        return found

    def stream_head(self, stream: str) -> tuple[int, bytes, int] | None:
        """(stream_seq, leaf hash, seq) of the stream's last row by the stream index."""
        row = self._fetchone(
            f"SELECT stream_seq, leaf_hash, seq FROM {SCHEMA}.events WHERE stream = %s "  # noqa: S608 (a constant schema name; values are bound)
            "ORDER BY stream_seq DESC LIMIT 1",
            (stream,),
        )
        return None if row is None else (int(row[0]), bytes(row[1]), int(row[2]))

    def body_of(self, leaf: bytes) -> tuple[int, bytes] | None:
        """(seq, body) stored under ``leaf``."""
        row = self._fetchone(f"SELECT seq, body FROM {SCHEMA}.events WHERE leaf_hash = %s", (leaf,))  # noqa: S608 (a constant schema name; values are bound)
        return None if row is None else (int(row[0]), row[1])

    def stream_rows(self, stream: str, stop: int) -> Iterator[tuple[int, bytes, bytes, Any, Any]]:
        """(seq, body, leaf hash, stream_seq, type) of the stream's rows below ``stop``
        by the stream index."""
        with self._errors():
            rows = self.conn.execute(
                f"SELECT seq, body, leaf_hash, stream_seq, type FROM {SCHEMA}.events "  # noqa: S608 (a constant schema name; values are bound)
                "WHERE stream = %s AND seq < %s ORDER BY stream_seq",
                (stream, stop),
            ).fetchall()
        for seq, body, leaf, stream_seq, kind in rows:
            yield int(seq), bytes(body), bytes(leaf), stream_seq, kind

    def bodies_of_types(
        self, types: Sequence[str], start: int, stop: int
    ) -> Iterator[tuple[int, bytes]]:
        """(seq, body) of rows of these types in ``start <= seq < stop``."""
        with self._errors():
            rows = self.conn.execute(
                f"SELECT seq, body FROM {SCHEMA}.events WHERE type = ANY(%s) "  # noqa: S608 (a constant schema name; values are bound)
                "AND seq >= %s AND seq < %s ORDER BY seq",
                (list(types), start, stop),
            ).fetchall()
        for seq, body in rows:
            yield int(seq), body

    def checkpoints(self) -> list[tuple[Any, Any]]:
        """(size, note) rows by size."""
        with self._errors():
            return self.conn.execute(
                f"SELECT size, note FROM {SCHEMA}.checkpoints ORDER BY size"  # noqa: S608 (a constant schema name)
            ).fetchall()

    # ------------------------------------------------------------ writes

    def begin(self) -> None:
        """BEGIN, then the append advisory lock, waited for up to the busy timeout."""
        with self._errors():
            self.conn.execute("BEGIN")
        self._in_batch = True
        timeout_ms = max(1, round(self.busy_timeout_s * 1000))
        try:
            with self._errors():
                self.conn.execute(f"SET LOCAL lock_timeout = {timeout_ms}")
                try:
                    self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK_KEY,))
                except pg_errors.LockNotAvailable:
                    raise StoreBusyError(
                        f"ledger is busy: other writers have held the append lock on "
                        f"{self.name} for more than {self.busy_timeout_s:g} s",
                        hint="wait for the other caseledger commands to finish, then retry",
                    ) from None
        except BaseException:
            self.rollback()  # the caller only rolls back batches that began
            raise

    def commit(self) -> None:
        """COMMIT: durable on the server when it returns (synchronous_commit = on)."""
        with self._errors():
            self.conn.execute("COMMIT")
        self._in_batch = False

    def rollback(self) -> None:
        """ROLLBACK (nothing to do when the connection is gone: the server rolled back)."""
        self._in_batch = False
        if self.conn.closed:
            return
        with contextlib.suppress(psycopg.OperationalError, psycopg.InterfaceError):
            self.conn.execute("ROLLBACK")

    def savepoint(self) -> None:
        """SAVEPOINT batch."""
        with self._errors():
            self.conn.execute("SAVEPOINT batch")

    def rollback_to_savepoint(self) -> None:
        """ROLLBACK TO SAVEPOINT batch."""
        with self._errors():
            self.conn.execute("ROLLBACK TO SAVEPOINT batch")

    def release_savepoint(self) -> None:
        """RELEASE SAVEPOINT batch."""
        with self._errors():
            self.conn.execute("RELEASE SAVEPOINT batch")

    def insert(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """INSERT the rows (pipelined); a clash on the leaf hash is a DuplicateLeafError."""
        try:
            with self.conn.cursor() as cur:
                cur.executemany(_INSERT, rows)
        except pg_errors.UniqueViolation as exc:
            if exc.diag.constraint_name == "events_leaf_hash_key":
                raise DuplicateLeafError from None
            self._fail("write to", exc)
        except psycopg.Error as exc:
            self._fail("write to", exc)

    def insert_checkpoint(self, size: int, note: str) -> None:
        """INSERT the note unless one is stored for that size."""
        with self._errors():
            self.conn.execute(
                f"INSERT INTO {SCHEMA}.checkpoints VALUES (%s, %s) ON CONFLICT (size) DO NOTHING",  # noqa: S608 (a constant schema name; values are bound)
                (size, note),
            )

    # ------------------------------------------------------------ helpers

    def _fetchone(self, query: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        with self._errors():
            return self.conn.execute(query, params).fetchone()

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn a server or connection error into a StoreError naming the ledger."""
        try:
            yield
        except psycopg.Error as exc:
            self._fail("use", exc)

    def _fail(self, what: str, exc: psycopg.Error) -> NoReturn:
        if isinstance(exc, pg_errors.InsufficientPrivilege):
            raise StoreError(
                f"cannot {what} the ledger at {self.name}: {_first_line(exc)}",
                hint="the server refused: events are append-only, and this role may lack "
                "INSERT or SELECT (docs/stores.md)",
            ) from None
        raise StoreError(f"cannot {what} the ledger at {self.name}: {_first_line(exc)}") from None


def grant_writer(conn: psycopg.Connection[Any], role: str) -> None:
    """Let ``role`` append and read: USAGE on the schema, INSERT and SELECT, nothing else."""
    ident = pg_sql.Identifier(role)
    for statement in (
        "GRANT USAGE ON SCHEMA {schema} TO {role}",
        "GRANT SELECT, INSERT ON {schema}.events, {schema}.checkpoints TO {role}",
        "GRANT SELECT ON {schema}.meta TO {role}",
    ):
        conn.execute(pg_sql.SQL(statement).format(schema=pg_sql.Identifier(SCHEMA), role=ident))


def grant_reader(conn: psycopg.Connection[Any], role: str) -> None:
    """Let ``role`` read the ledger (reports, verify): USAGE and SELECT only."""
    ident = pg_sql.Identifier(role)
    for statement in (
        "GRANT USAGE ON SCHEMA {schema} TO {role}",
        "GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}",
    ):
        conn.execute(pg_sql.SQL(statement).format(schema=pg_sql.Identifier(SCHEMA), role=ident))


def _connect(url: str) -> psycopg.Connection[Any]:
    try:
        conn = psycopg.connect(url, autocommit=True)
        # Durable at COMMIT whatever the server's default (a user-level setting).
        conn.execute("SET synchronous_commit = on")
    except psycopg.ProgrammingError as exc:
        raise UsageError(f"bad ledger URL {redact(url)}: {_first_line(exc)}") from None
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot connect to the ledger at {redact(url)}: {_first_line(exc)}",
            hint="check the URL, the server and the role's password (PGPASSWORD or ~/.pgpass)",
        ) from None
    return conn


def has_ledger(url: str) -> bool:
    """Does the database at ``url`` hold a ledger schema? (StoreError when unreachable.)"""
    with _connect(url) as conn:
        try:
            return _has_ledger(conn)
        except psycopg.Error as exc:
            raise StoreError(f"cannot read {redact(url)}: {_first_line(exc)}") from None


def grant(url: str, *, writers: Sequence[str] = (), readers: Sequence[str] = ()) -> None:
    """Connect as the ledger's owner and grant writer and reader roles their privileges."""
    try:
        with _connect(url) as conn:
            for role in writers:
                grant_writer(conn, role)
            for role in readers:
                grant_reader(conn, role)
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot grant privileges on the ledger at {redact(url)}: {_first_line(exc)}",
            hint="grant as the role that ran `caseledger init` (the schema's owner); the "
            "roles must exist",
        ) from None


def _has_ledger(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.meta",)).fetchone()
    return row is not None and row[0] is not None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
