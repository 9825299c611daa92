"""The PostgreSQL backend: one ledger per database, shared by many writers on many hosts.

The ledger lives in the schema ``caseledger`` of the database a ``postgresql://`` URL
names (docs/stores.md): tables ``meta``, ``events`` (the same columns as the SQLite
file, ``bytea`` for blobs, plus ``writer`` and ``node``), ``checkpoints`` and
``append_lock``. What the server enforces, whoever connects (docs/stores.md has the
table of who enforces what):

* ``events``, ``checkpoints``, ``meta`` and ``append_lock`` are append-only: row
  triggers refuse UPDATE and DELETE, statement triggers refuse TRUNCATE (also for the
  owner, unless the owner drops the triggers); the writer role is granted INSERT and
  SELECT only (:func:`grant_writer`), so it could not drop them;
* every inserted event row continues the log: a BEFORE INSERT trigger requires
  ``seq`` = the next leaf index (no gap, no reuse), ``leaf_hash`` = SHA-256(0x00 ||
  body) and ``chain`` = SHA-256(previous chain || leaf hash) (32 zero bytes before
  seq 0); ``leaf_hash`` (the event id) is UNIQUE. The same trigger sets ``writer`` to
  the connected role (``session_user``: whatever the client sent is overwritten) and
  ``node`` to the root of the largest complete Merkle subtree that ends at the row
  (:data:`SCHEMA_2`), so the tree head at any size is a fold of at most 63 stored
  nodes;
* a ``checkpoints`` row must be this log's tree head: its note must begin with the
  ledger's origin, its size (at most the number of events) and the root the server
  folds from the stored nodes. The trigger also takes the append lock and records
  the role (``writer``) and the number of events when it was added (``added``).

The server cannot check Ed25519 signatures (neither an event's nor a note's): the
writers do, before they append on top (``ledger.store.Ledger``), and ``verify`` does.

Appends: one transaction per batch. It first takes the append lock, a row lock
(``SELECT ... FOR UPDATE``) on the one row of ``append_lock``, which needs UPDATE on
that table: writers have it, readers do not, so a reader cannot hold writers up.
Writers queue there and each computes its seqs and chain from the head it then reads;
the lock is released by COMMIT or ROLLBACK, also when the writer's connection dies,
and a batch whose writer dies is rolled back whole. ``synchronous_commit = on`` is
set for the session: COMMIT returns once the batch is durable on the server. A writer
waits for the lock up to its busy timeout (``lock_timeout``), then fails with "ledger
is busy" naming the role and server pid of the session that holds it.

Schema versions: ``meta`` row ``schema`` (absent = 1). A ledger made before issue 29
(schema 1) is upgraded in one transaction by its owner (:meth:`PostgresBackend.upgrade`,
run by any writing command the owner runs, or ``caseledger ledger upgrade``); until
then writers refuse to append to it.

Reads page through ``events`` by seq (keyset, a page per query), so no cursor stays
open between two reads and memory stays flat.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql

from ledger.errors import StoreBusyError, StoreError, UsageError, first_line
from ledger.stores import FORMAT, DuplicateLeafError, redact
from ledger.stores.postgres_schema import _DDL, _FILL_NODES, SCHEMA, SCHEMA_2, SCHEMA_VERSION

__all__ = [
    "SCHEMA",
    "SCHEMA_2",
    "SCHEMA_VERSION",
    "PostgresBackend",
    "grant",
    "grant_reader",
    "grant_writer",
    "has_ledger",
    "upgrade",
]

# The append lock: needs UPDATE on append_lock (writers have it, readers do not).
#: Seconds a writer's batch may sit idle between two statements before the server ends
#: its session (``idle_in_transaction_session_timeout``, set for each batch). A batch's
#: own gaps (signing the next chunk) last well under a second.
IDLE_IN_TRANSACTION_S = 60.0

_LOCK = f"SELECT 1 FROM {SCHEMA}.append_lock WHERE id = 1 FOR UPDATE"  # noqa: S608 (a constant schema name)
# Whoever holds it: the lock row's xmax is the locking transaction, whose own id lock
# pg_locks shows with the holder's pid.
_LOCK_HOLDER = f"""
SELECT a.usename, l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock' AND l.granted
  AND l.transactionid = (SELECT xmax FROM {SCHEMA}.append_lock WHERE id = 1)
"""  # noqa: S608 (a constant schema name)

_INSERT = (
    f"INSERT INTO {SCHEMA}.events (seq, body, leaf_hash, chain, key_id, sig, stream, "  # noqa: S608 (a constant schema name; values are bound)
    "stream_seq, type) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


class PostgresBackend:
    """One open ledger database. Use :meth:`create` or :meth:`open`."""

    inserts_in_process = False  # the server writes; this process waits on the socket

    def __init__(
        self,
        url: str,
        conn: psycopg.Connection[Any],
        busy_timeout_s: float,
        schema_version: int = SCHEMA_VERSION,
    ) -> None:
        self.url = url
        self.name = redact(url)
        self.conn = conn
        self.busy_timeout_s = busy_timeout_s
        self.schema_version = schema_version
        #: A batch idle this long between two statements is ended by the server (issue
        #: 34): a writer stopped inside its transaction (SIGSTOP, a hung client) loses its
        #: session and the append lock with it, and the other writers go on.
        self.idle_timeout_s = IDLE_IN_TRANSACTION_S
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
                conn.execute(SCHEMA_2)
                conn.execute(
                    f"INSERT INTO {SCHEMA}.meta VALUES ('format', %s), ('schema', %s)",  # noqa: S608 (a constant schema name; values are bound)
                    (FORMAT, str(SCHEMA_VERSION)),
                )
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(
                f"cannot create a ledger at {name}: {first_line(exc)}",
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
            version = _schema_version(conn)
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{name} has ledger schema {version}; this caseledger knows schema "
                    f"{SCHEMA_VERSION} at most",
                    hint="use a newer caseledger",
                )
            if readonly:
                conn.execute("SET default_transaction_read_only = on")
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(
                f"cannot read the ledger at {name}: {first_line(exc)}",
                hint="the role needs USAGE on schema caseledger and SELECT on its tables "
                "(docs/stores.md)",
            ) from None
        except BaseException:
            conn.close()
            raise
        backend = cls(url, conn, busy_timeout_s, version)
        if not readonly and version < SCHEMA_VERSION and backend.owns_schema():
            backend.upgrade()
        return backend

    def owns_schema(self) -> bool:
        """Is the connected role the ``caseledger`` schema's owner (or a superuser)?"""
        row = self._fetchone(
            "SELECT pg_has_role(current_user, nspowner, 'USAGE') FROM pg_namespace "
            "WHERE nspname = %s",
            (SCHEMA,),
        )
        return bool(row and row[0])

    def upgrade(self) -> bool:
        """Bring a schema-1 ledger to schema 2, as its owner, in one transaction.

        Adds the columns, functions, triggers and the lock table of :data:`SCHEMA_2`,
        fills in the tree node of every stored row (rows stored before keep no
        ``writer``: the server did not record it), grants each role that may INSERT
        into ``events`` what a writer needs on the lock table, and records ``schema
        2``. Returns False when there was nothing to do (another owner's session may
        have done it). StoreError when the role is not the owner.
        """
        try:
            with self.conn.transaction():
                # Appends wait while the schema changes; a second upgrade waits here.
                self.conn.execute(
                    f"LOCK TABLE {SCHEMA}.meta, {SCHEMA}.events IN SHARE ROW EXCLUSIVE MODE"
                )
                if _schema_version(self.conn) >= SCHEMA_VERSION:
                    self.schema_version = SCHEMA_VERSION
                    return False
                self.conn.execute(SCHEMA_2)
                self.conn.execute(_FILL_NODES)
                writers = self.conn.execute(
                    "SELECT DISTINCT a.grantee::regrole::text FROM pg_class c, "
                    "aclexplode(c.relacl) a WHERE c.oid = %s::regclass "
                    "AND a.privilege_type = 'INSERT' AND a.grantee <> c.relowner "
                    "AND a.grantee <> 0 ORDER BY 1",
                    (f"{SCHEMA}.events",),
                ).fetchall()
                for (role,) in writers:
                    _grant_lock(self.conn, role)
                self.conn.execute(
                    f"INSERT INTO {SCHEMA}.meta VALUES ('schema', %s)",  # noqa: S608 (a constant schema name; values are bound)
                    (str(SCHEMA_VERSION),),
                )
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot upgrade the ledger at {self.name} to schema {SCHEMA_VERSION}: "
                f"{first_line(exc)}",
                hint="upgrade as the role that ran `caseledger init` (the schema's owner)",
            ) from None
        self.schema_version = SCHEMA_VERSION
        return True

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

    def checkpoints_since(self, mark: int) -> list[tuple[Any, Any, str | None]]:
        """(size, note, writer role) of the checkpoints added while the log held at least
        ``mark`` events (the server's ``added``), by size."""
        if self.schema_version < SCHEMA_VERSION:
            return []
        with self._errors():
            return self.conn.execute(
                f"SELECT size, note, writer FROM {SCHEMA}.checkpoints WHERE added >= %s "  # noqa: S608 (a constant schema name; values are bound)
                "ORDER BY size",
                (mark,),
            ).fetchall()

    def written_by(self, seq: int) -> str | None:
        """The role the server recorded as the writer of row ``seq`` (None before schema 2)."""
        if self.schema_version < SCHEMA_VERSION:
            return None
        row = self._fetchone(f"SELECT writer FROM {SCHEMA}.events WHERE seq = %s", (seq,))  # noqa: S608 (a constant schema name; values are bound)
        return None if row is None or row[0] is None else str(row[0])

    # ------------------------------------------------------------ writes

    def begin(self) -> None:
        """BEGIN, then the append lock (a row lock on ``append_lock``), waited for up to
        the busy timeout; StoreBusyError naming the session that holds it."""
        if self.schema_version < SCHEMA_VERSION:
            raise StoreError(
                f"the ledger at {self.name} has schema {self.schema_version}: the server "
                "neither records who writes each row nor checks checkpoints, so caseledger "
                "does not append to it",
                hint="its owner upgrades it once: caseledger --ledger postgresql://OWNER@... "
                "ledger upgrade (docs/stores.md, Schema versions)",
            )
        with self._errors():
            self.conn.execute("BEGIN")
        self._in_batch = True
        timeout_ms = max(1, round(self.busy_timeout_s * 1000))
        idle_ms = max(1, round(self.idle_timeout_s * 1000))
        try:
            with self._errors():
                self.conn.execute(f"SET LOCAL lock_timeout = {timeout_ms}")
                self.conn.execute(f"SET LOCAL idle_in_transaction_session_timeout = {idle_ms}")
                try:
                    self.conn.execute(_LOCK)
                except pg_errors.LockNotAvailable:
                    self.rollback()
                    raise StoreBusyError(
                        f"ledger is busy: {self._lock_holder()} has held the append lock on "
                        f"{self.name} for more than {self.busy_timeout_s:g} s",
                        hint="wait for that session to finish (or ask the database "
                        "administrator to end it: SELECT pg_terminate_backend(PID)), then retry",
                    ) from None
        except BaseException:
            self.rollback()  # the caller only rolls back batches that began
            raise

    def _lock_holder(self) -> str:
        """Who holds the append lock: the role and server pid of the transaction whose id
        the lock row's xmax names (readable by any role that may SELECT the table)."""
        try:
            row = self.conn.execute(_LOCK_HOLDER).fetchone()
        except psycopg.Error:
            row = None
        if row is None:
            return "another session (gone by now)"
        return f"role {row[0]} (server pid {row[1]})"

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
        """INSERT the note unless one is stored for that size (the server checks it)."""
        with self._errors():
            self.conn.execute(
                f"INSERT INTO {SCHEMA}.checkpoints (size, note) VALUES (%s, %s) "  # noqa: S608 (a constant schema name; values are bound)
                "ON CONFLICT (size) DO NOTHING",
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
                f"cannot {what} the ledger at {self.name}: {first_line(exc)}",
                hint="the server refused: events are append-only, and this role may lack "
                "INSERT or SELECT (docs/stores.md)",
            ) from None
        raise StoreError(f"cannot {what} the ledger at {self.name}: {first_line(exc)}") from None


def grant_writer(conn: psycopg.Connection[Any], role: str) -> None:
    """Let ``role`` append and read: USAGE on the schema, INSERT and SELECT, and the
    append lock (UPDATE on the lock table's one column, which only ``SELECT ... FOR
    UPDATE`` uses: the table's triggers refuse an actual UPDATE)."""
    ident = pg_sql.Identifier(role)
    for statement in (
        "GRANT USAGE ON SCHEMA {schema} TO {role}",
        "GRANT SELECT, INSERT ON {schema}.events, {schema}.checkpoints TO {role}",
        "GRANT SELECT ON {schema}.meta TO {role}",
    ):
        conn.execute(pg_sql.SQL(statement).format(schema=pg_sql.Identifier(SCHEMA), role=ident))
    _grant_lock(conn, role)


def _grant_lock(conn: psycopg.Connection[Any], role: str) -> None:
    conn.execute(
        pg_sql.SQL("GRANT SELECT, UPDATE (id) ON {schema}.append_lock TO {role}").format(
            schema=pg_sql.Identifier(SCHEMA), role=pg_sql.Identifier(role)
        )
    )


def _schema_version(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        f"SELECT value FROM {SCHEMA}.meta WHERE key = 'schema'"  # noqa: S608 (a constant schema name)
    ).fetchone()
    if row is None:
        return 1
    try:
        return int(row[0])
    except ValueError:
        raise StoreError(f"the ledger's meta row 'schema' is {row[0]!r}, not a number") from None


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
        raise UsageError(f"bad ledger URL {redact(url)}: {first_line(exc)}") from None
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot connect to the ledger at {redact(url)}: {first_line(exc)}",
            hint="check the URL, the server and the role's password (PGPASSWORD or ~/.pgpass)",
        ) from None
    return conn


def has_ledger(url: str) -> bool:
    """Does the database at ``url`` hold a ledger schema? (StoreError when unreachable.)"""
    with _connect(url) as conn:
        try:
            return _has_ledger(conn)
        except psycopg.Error as exc:
            raise StoreError(f"cannot read {redact(url)}: {first_line(exc)}") from None


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
            f"cannot grant privileges on the ledger at {redact(url)}: {first_line(exc)}",
            hint="grant as the role that ran `caseledger init` (the schema's owner); the "
            "roles must exist",
        ) from None


def upgrade(url: str) -> str:
    """Open the ledger at ``url`` as its owner and bring it to :data:`SCHEMA_VERSION`.

    Returns the line ``caseledger ledger upgrade`` prints. StoreError when the role
    is not the schema's owner (nothing changed).
    """
    backend = PostgresBackend.open(url, readonly=True, busy_timeout_s=10.0)
    try:
        if backend.schema_version >= SCHEMA_VERSION:
            return f"{backend.name}: already at schema {SCHEMA_VERSION}, nothing to do"
        backend.conn.execute("SET default_transaction_read_only = off")
        if not backend.owns_schema():
            raise StoreError(
                f"cannot upgrade the ledger at {backend.name}: the connected role does not "
                f"own schema {SCHEMA}",
                hint="connect as the role that ran `caseledger init`",
            )
        before = backend.schema_version
        done = backend.upgrade()
    finally:
        backend.close()
    if not done:
        return f"{backend.name}: already at schema {SCHEMA_VERSION}, nothing to do"
    return (
        f"upgraded {backend.name} from schema {before} to {SCHEMA_VERSION}: the server now "
        "records the role that writes each row and checkpoint, checks each checkpoint "
        "against the log, and the append lock is a row lock only writers may take"
    )


def _has_ledger(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.meta",)).fetchone()
    return row is not None and row[0] is not None
