"""The PostgreSQL engine: a bank in its own database on a real server, queried by a locked role.

The server is given by ``CASELEDGER_PG_DSN`` (an admin with CREATEDB and
CREATEROLE; docs/engines.md lists the privileges). ``build`` creates, for one
bank database file ``target``:

- an owner role ``cl_owner_<key>`` that owns the database ``cl_<key>`` and runs
  schema.sql and seed.sql (logged in as itself for the build only, then
  NOLOGIN without a password);
- a login role ``cl_reader_<key>`` with CONNECT on that database, USAGE on its
  ``public`` schema and SELECT on its tables, nothing else; its role settings
  make every session read-only with a statement timeout, an idle-in-transaction
  timeout, ``work_mem``, ``temp_file_limit``, a fixed ``search_path`` and UTC;
- ``target``: a small JSON file naming the database and the roles, and beside it
  ``<target>.password`` (mode 0600) with the reader's password, generated at
  build time and sent to the server only as a SCRAM verifier.

``<key>`` is the target's parent folder name (the bank's content hash), cut to 24
characters, and 10 hex digits of the target's absolute path, so two homes
building the same bank on one server never meet.

Queries of a model run in :class:`PostgresExecutor`: one worker process (spawn)
holding one connection as the reader, an address-space limit on that process
(a result that does not fit is ``memory``, not a dead harness), each query one
``DECLARE ... NO SCROLL CURSOR`` in a ``READ ONLY`` transaction (PostgreSQL's own
parser then accepts exactly one SELECT/VALUES/TABLE query, and the extended
protocol refuses a second statement), ``max_rows + 1`` rows fetched in chunks
under the result caps, then ROLLBACK and DISCARD ALL so nothing of the session
carries over to the next query. The timeout is enforced three times: the
server's ``statement_timeout``, a watchdog in the worker that cancels the
running statement at the deadline, and the parent, which kills the worker after
a grace and terminates its backend. After a timeout, a crash and ``close`` the
executor checks ``pg_stat_activity`` until no backend of the executor is left.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import psycopg
from psycopg import sql as pgsql

from ledger.engines.base import EngineQueryError
from ledger.engines.data_files import DataFiles, load_hint, parents_first
from ledger.engines.postgres_bankfile import ENV_VAR, FORMAT, BankFile, read_bank_file
from ledger.engines.postgres_catalog import (
    ALLOWED_FROM,
    DATA_FILE,
    DENY_RULES,
    GRAMMAR_FUNCTIONS,
    all_rules,
    catalog,
    judge_function,
)
from ledger.engines.postgres_executor import PostgresExecutor
from ledger.engines.postgres_worker import (
    CURSOR,
    FETCH_MAX,
    TypeNames,
    classify_error,
    column_type,
    configure,
    declare,
    describe,
    why_unsendable,
)
from ledger.engines.watchdog import parse_memory_limit
from ledger.errors import BankError, SandboxError, UsageError, first_line
from ledger.events import Column, TableSchema

__all__ = [
    "ALLOWED_FROM",
    "BANK_SCHEMA",
    "DATA_FILE",
    "DENY_RULES",
    "ENV_VAR",
    "GRAMMAR_FUNCTIONS",
    "MIN_SERVER_VERSION",
    "READER_SETTINGS",
    "SESSION_PINS",
    "BankNames",
    "PostgresEngine",
    "PostgresExecutor",
    "all_rules",
    "bank_names",
    "catalog",
    "classify_error",
    "column_type",
    "from_environment",
    "judge_function",
    "parse_memory_limit",
]

#: The schema of the bank's database that holds its tables (the reader's search_path).
BANK_SCHEMA = "public"
#: server_version_num of the oldest server the engine accepts (GRANT SET ON PARAMETER, PG15).
MIN_SERVER_VERSION = 150000

#: Settings that keep a query's rows and their text the same on every run (issue 30):
#: no parallel plan (a Gather returns its workers' rows in whatever order they come, which
#: LIMIT without ORDER BY and string_agg without ORDER BY would see), and the locale and
#: interval settings the server's configuration would otherwise decide (money, to_char's
#: TM, L, D and G patterns, an interval's text). Every reader session has them, from the
#: role and from the connection (a bank built before they were added).
SESSION_PINS: tuple[tuple[str, str], ...] = (
    ("max_parallel_workers_per_gather", "0"),
    ("IntervalStyle", "postgres"),
    ("lc_monetary", "C"),
    ("lc_numeric", "C"),
    ("lc_time", "C"),
)
#: Settings of every reader role (ALTER ROLE ... SET): what a session of the reader gets
#: even when it is not opened by the executor.
READER_SETTINGS: tuple[tuple[str, str], ...] = (
    ("default_transaction_read_only", "on"),
    ("statement_timeout", "5s"),
    ("idle_in_transaction_session_timeout", "10s"),
    ("work_mem", "64MB"),
    ("temp_file_limit", "256MB"),
    ("search_path", BANK_SCHEMA),
    ("TimeZone", "UTC"),
    ("DateStyle", "ISO"),
    ("client_connection_check_interval", "1s"),
    ("cursor_tuple_fraction", "1"),
    *SESSION_PINS,
)
#: Concurrent sessions one reader may hold.
READER_CONNECTION_LIMIT = 32
#: Functions whose EXECUTE the build revokes from PUBLIC in the bank's database. Only a
#: superuser admin can (they belong to the bootstrap superuser); docs/engines.md says
#: which of them PostgreSQL already keeps from PUBLIC.
REVOKED_FUNCTIONS = (
    "pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_stat_file",
    "lo_import", "lo_export", "set_config",
)  # fmt: skip
#: How long a reference (gold) query may run.
REFERENCE_TIMEOUT_S = 60.0
_NAME_BODY = 24


# ------------------------------------------------------------------------- environment


def from_environment(environ: Mapping[str, str]) -> PostgresEngine:
    """The engine for the server named by ``CASELEDGER_PG_DSN`` in ``environ``.

    Raises UsageError with what to set when the variable is missing or empty.
    """
    dsn = environ.get(ENV_VAR, "").strip()
    if not dsn:
        raise UsageError(
            f"{ENV_VAR} is not set: the postgres engine needs a PostgreSQL server",
            hint=(
                f"set {ENV_VAR} to a libpq connection string of a role with CREATEDB and "
                "CREATEROLE (e.g. 'host=db.example port=5432 user=caseledger dbname=postgres'; "
                "docs/engines.md lists the privileges)"
            ),
        )
    return PostgresEngine(dsn=dsn)


# ------------------------------------------------------------------------ bank names


class BankNames(msgspec.Struct, frozen=True):
    """The server-side names of one built bank."""

    database: str
    owner: str
    reader: str


def bank_names(target: Path) -> BankNames:
    """Database and role names for a bank database file ``target`` (at most 45 characters).

    >>> bank_names(Path("/h/banks/0123456789abcdef0123456789abcdef/pg.json")).database[:28]
    'cl_0123456789abcdef01234567_'
    """
    folder = re.sub(r"[^a-z0-9]", "", target.absolute().parent.name.lower())[:_NAME_BODY]
    tag = hashlib.sha256(str(target.absolute()).encode("utf-8")).hexdigest()[:10]
    key = f"{folder or 'bank'}_{tag}"
    return BankNames(database=f"cl_{key}", owner=f"cl_owner_{key}", reader=f"cl_reader_{key}")


def _password_path(target: Path) -> Path:
    return target.with_name(target.name + ".password")


def _write_private(path: Path, text: str, mode: int) -> None:
    """Write ``text`` to ``path`` through a temp file created with ``mode`` (atomic)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


# ----------------------------------------------------------------------- connections


def _conninfo(dsn: str, **overrides: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    params.update(overrides)
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()})


def _options(settings: Iterable[tuple[str, str]]) -> str:
    """A libpq ``options`` value setting each GUC (spaces and backslashes escaped)."""
    parts = []
    for name, value in settings:
        escaped = value.replace("\\", "\\\\").replace(" ", "\\ ")
        parts.append(f"-c {name}={escaped}")
    return " ".join(parts)


def _scram(con: psycopg.Connection[Any], password: str, role: str) -> str:
    """The SCRAM-SHA-256 verifier of ``password`` (the server never sees the password)."""
    raw = con.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
    return raw.decode("ascii")


def _ident(name: str) -> pgsql.Identifier:
    return pgsql.Identifier(name)


# ------------------------------------------------------------------------ the engine


class PostgresEngine:
    """The ``postgres`` engine over the server of one admin DSN (see the module doc).

    The DSN is used only as given here; nothing reads the environment but
    :func:`from_environment`.
    """

    name = "postgres"
    dialect = "postgres"

    def __init__(self, *, dsn: str) -> None:
        if not dsn.strip():
            raise UsageError(f"an empty {ENV_VAR}", hint="give a libpq connection string")
        self._dsn = dsn
        self._version: str | None = None

    # ------------------------------------------------------------- server

    def _connect(self, what: str, **overrides: str) -> psycopg.Connection[Any]:
        try:
            con = psycopg.connect(_conninfo(self._dsn, **overrides), autocommit=True)
        except psycopg.Error as exc:
            raise UsageError(
                f"cannot connect to the PostgreSQL server of {ENV_VAR} ({what}): {first_line(exc)}",
                hint=f"check {ENV_VAR} and that the server is running (docs/engines.md)",
            ) from None
        configure(con)
        return con

    def version(self) -> str:
        """The server's ``server_version`` (e.g. ``15.18 (Debian 15.18-0+deb12u1)``)."""
        if self._version is None:
            with self._connect("version") as con:
                self._version = str(_scalar(con, "SHOW server_version"))
        return self._version

    def dialect_notes(self) -> str:
        """The prompt paragraph: which SQL the model must write (no server needed)."""
        return (
            "Write one PostgreSQL query (SELECT, WITH ... SELECT or VALUES). Unquoted "
            "identifiers fold to lower case; quote mixed-case names with double quotes and "
            "strings with single quotes. The tables are in the schema public. Integer "
            "division truncates (7 / 2 = 3): cast to numeric for an exact quotient; numeric "
            "keeps its scale; real is a 4-byte float. The session time zone is UTC: a "
            "timestamp with time zone is an instant, shown in a zone with AT TIME ZONE "
            "'<zone>'. Use date_trunc, EXTRACT, interval '1 day', || for concatenation, "
            "LIMIT/OFFSET, FILTER (WHERE ...) and window functions; there is no QUALIFY and "
            "no GROUP BY ALL. Clocks, random values and settings are not available: write "
            "dates as literals."
        )

    def _admin(self, dbname: str | None = None) -> psycopg.Connection[Any]:
        overrides = {"application_name": "caseledger-admin"}
        if dbname is not None:
            overrides["dbname"] = dbname
        return self._connect("admin", **overrides)

    # -------------------------------------------------------------- build

    def build(
        self, schema_sql: str, seed_sql: str, target: Path, *, data: DataFiles | None = None
    ) -> None:
        """Create the bank's database, roles, target file and password file (see module doc).

        Atomic: on any failure (Ctrl-C included) the database, the roles and the
        files this call created are removed again. Raises BankError naming
        schema.sql or seed.sql and PostgreSQL's message when the bank's SQL fails.
        """
        target = Path(target)
        secret = _password_path(target)
        for path in (target, secret):
            if path.exists():
                raise BankError(f"refusing to overwrite {path}")
        names = bank_names(target)
        admin = self._admin()
        created: list[str] = []
        try:
            version = self._check_server(admin)
            self._check_free(admin, names)
            target.parent.mkdir(parents=True, exist_ok=True)
            owner_pw, reader_pw = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
            q = pgsql.SQL
            admin.execute(
                q("CREATE ROLE {} LOGIN CONNECTION LIMIT 4 PASSWORD {}").format(
                    _ident(names.owner), pgsql.Literal(_scram(admin, owner_pw, names.owner))
                )
            )
            created.append("owner")
            admin.execute(q("GRANT {} TO CURRENT_USER").format(_ident(names.owner)))
            admin.execute(
                q("CREATE ROLE {} LOGIN NOINHERIT CONNECTION LIMIT {} PASSWORD {}").format(
                    _ident(names.reader),
                    pgsql.Literal(READER_CONNECTION_LIMIT),
                    pgsql.Literal(_scram(admin, reader_pw, names.reader)),
                )
            )
            created.append("reader")
            # Membership lets the admin terminate the reader's backends (drop, cleanup).
            admin.execute(q("GRANT {} TO CURRENT_USER").format(_ident(names.reader)))
            for setting, value in READER_SETTINGS:
                admin.execute(
                    q("ALTER ROLE {} SET {} = {}").format(
                        _ident(names.reader), _ident(setting), pgsql.Literal(value)
                    )
                )
            ctype = self._create_database(admin, names)
            created.append("database")
            self._load(names, owner_pw, schema_sql, seed_sql, version, data)
            admin.execute(q("ALTER ROLE {} NOLOGIN PASSWORD NULL").format(_ident(names.owner)))
            if _scalar(
                admin, "SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user"
            ):
                self._revoke_functions(names)
            _write_private(secret, reader_pw + "\n", 0o600)
            created.append("secret")
            body = BankFile(
                format=FORMAT, database=names.database, schema=BANK_SCHEMA, owner=names.owner,
                reader=names.reader, password_file=secret.name, server_version=version,
                collate="C", ctype=ctype,
            )  # fmt: skip
            text = json.dumps(msgspec.to_builtins(body), indent=1, sort_keys=True) + "\n"
            _write_private(target, text, 0o644)
        except BaseException:
            with contextlib.suppress(Exception):
                admin.close()
            self._undo(names, created, secret)
            raise
        admin.close()

    def _check_server(self, admin: psycopg.Connection[Any]) -> str:
        number = int(_scalar(admin, "SHOW server_version_num"))
        version = str(_scalar(admin, "SHOW server_version"))
        if number < MIN_SERVER_VERSION:
            raise BankError(
                f"the postgres engine needs PostgreSQL 15 or newer; the server runs {version}",
                hint=f"point {ENV_VAR} at a newer server",
            )
        return version

    def _check_free(self, admin: psycopg.Connection[Any], names: BankNames) -> None:
        taken = admin.execute(
            "SELECT datname FROM pg_catalog.pg_database WHERE datname = %s UNION ALL "
            "SELECT rolname FROM pg_catalog.pg_roles WHERE rolname IN (%s, %s)",
            [names.database, names.owner, names.reader],
        ).fetchall()
        if taken:
            shown = ", ".join(str(r[0]) for r in taken)
            raise BankError(
                f"the server already has {shown} but no bank file names it "
                "(a build that was killed before it could clean up?)",
                hint=f"drop them: DROP DATABASE {names.database}; DROP ROLE {names.reader}; "
                f"DROP ROLE {names.owner}",
            )

    def _create_database(self, admin: psycopg.Connection[Any], names: BankNames) -> str:
        """CREATE DATABASE with byte-order collation (DuckDB's); returns the ctype used."""
        for ctype in ("C.UTF-8", "C"):
            statement = pgsql.SQL(
                "CREATE DATABASE {} OWNER {} TEMPLATE template0 ENCODING 'UTF8' "
                "LC_COLLATE 'C' LC_CTYPE {}"
            ).format(_ident(names.database), _ident(names.owner), pgsql.Literal(ctype))
            try:
                admin.execute(statement)
            except psycopg.errors.InvalidParameterValue:
                continue  # this server has no C.UTF-8 locale
            return ctype
        raise BankError("the server accepts neither the C.UTF-8 nor the C locale")

    def _load(
        self,
        names: BankNames,
        owner_pw: str,
        schema_sql: str,
        seed_sql: str,
        version: str,
        data: DataFiles | None = None,
    ) -> None:
        """Run schema.sql and seed.sql (or copy the data files' rows) logged in as the
        owner, then grant the reader."""
        owner = self._connect(
            "bank owner", user=names.owner, password=owner_pw, dbname=names.database,
            application_name="caseledger-build",
            options=_options([("search_path", BANK_SCHEMA), ("TimeZone", "UTC")]),
        )  # fmt: skip
        q = pgsql.SQL
        try:
            for file_name, text in (("schema.sql", schema_sql), ("seed.sql", seed_sql)):
                if not text.strip():
                    continue
                try:
                    with owner.transaction():
                        owner.execute(text.encode("utf-8"))
                except psycopg.Error as exc:
                    raise BankError(
                        f"{file_name}{_position(exc, text)}: PostgreSQL error: {first_line(exc)}",
                        hint=f"fix {file_name} so it runs on PostgreSQL {version}",
                    ) from None
            if data is not None:
                _copy_rows(owner, data)
            db, schema, reader = (
                _ident(names.database), _ident(BANK_SCHEMA), _ident(names.reader)
            )  # fmt: skip
            for statement in (
                q("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(db),
                q("GRANT CONNECT ON DATABASE {} TO {}").format(db, reader),
                q("REVOKE ALL ON SCHEMA {} FROM PUBLIC").format(schema),
                q("GRANT USAGE ON SCHEMA {} TO {}").format(schema, reader),
                q("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(schema, reader),
                q("REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA {} FROM PUBLIC").format(schema),
                q("ANALYZE"),
            ):
                owner.execute(statement)
        finally:
            owner.close()

    def _revoke_functions(self, names: BankNames) -> None:
        """REVOKE EXECUTE FROM PUBLIC on every form of REVOKED_FUNCTIONS and dblink* (superuser)."""
        with self._admin(names.database) as con:
            rows = con.execute(
                "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p "
                "WHERE p.proname = ANY(%s) OR p.proname LIKE 'dblink%%' ORDER BY 1",
                [list(REVOKED_FUNCTIONS)],
            ).fetchall()
            for (signature,) in rows:
                con.execute(
                    pgsql.SQL("REVOKE EXECUTE ON FUNCTION {} FROM PUBLIC").format(
                        pgsql.SQL(signature)  # a regprocedure the server printed itself
                    )
                )

    def _undo(self, names: BankNames, created: list[str], secret: Path) -> None:
        """Remove what a failed build created (on a fresh connection: the old may be broken)."""
        if "secret" in created:
            with contextlib.suppress(FileNotFoundError):
                secret.unlink()
        statements = []
        if "database" in created:
            statements.append(
                pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_ident(names.database))
            )
        for kind, role in (("reader", names.reader), ("owner", names.owner)):
            if kind in created:
                statements.append(pgsql.SQL("DROP ROLE IF EXISTS {}").format(_ident(role)))
        if not statements:
            return
        with contextlib.suppress(UsageError, psycopg.Error), self._admin() as con:
            for statement in statements:
                con.execute(statement)

    def drop(self, target: Path) -> None:
        """Drop a built bank: its database (ending its sessions), its roles and its files.

        A server engine keeps a database per build: a temporary build (a recompute,
        a calibration variant) must be dropped when it is no longer needed.
        """
        target = Path(target)
        bank = read_bank_file(target)
        names = BankNames(database=bank.database, owner=bank.owner, reader=bank.reader)
        with self._admin() as con:
            con.execute(
                pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_ident(names.database))
            )
            for role in (names.reader, names.owner):
                con.execute(pgsql.SQL("DROP ROLE IF EXISTS {}").format(_ident(role)))
        for path in (target.with_name(bank.password_file), target):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    # ----------------------------------------------------------- reading

    def reader_conninfo(
        self, database: Path, settings: Iterable[tuple[str, str]] = (), app: str = "caseledger"
    ) -> str:
        """The libpq connection string of the bank's reader (with its password: never log it)."""
        bank = read_bank_file(database)
        password = _read_password(database, bank)
        options = [("search_path", bank.schema), ("TimeZone", "UTC"), ("DateStyle", "ISO")]
        options += [("default_transaction_read_only", "on"), ("cursor_tuple_fraction", "1")]
        options += SESSION_PINS
        return _conninfo(
            self._dsn, user=bank.reader, password=password, dbname=bank.database,
            application_name=app, options=_options([*options, *settings]),
        )  # fmt: skip

    def _reader(self, database: Path, timeout_s: float) -> psycopg.Connection[Any]:
        info = self.reader_conninfo(
            database, [("statement_timeout", f"{int(timeout_s * 1000)}")], "caseledger-gold"
        )
        try:
            con = psycopg.connect(info, autocommit=True, prepare_threshold=None)
        except psycopg.Error as exc:
            raise BankError(
                f"{database}: cannot connect as the bank's reader: {first_line(exc)}",
                hint="publish the bank again, or check the server of " + ENV_VAR,
            ) from None
        configure(con)
        return con

    def tables(self, database: Path) -> tuple[TableSchema, ...]:
        """The bank's tables and views of its schema, columns in order, sorted by name."""
        bank = read_bank_file(database)
        with self._reader(database, REFERENCE_TIMEOUT_S) as con:
            rows = con.execute(
                "SELECT c.relname::text, a.attname::text, a.atttypid::int8, a.atttypmod "
                "FROM pg_catalog.pg_class AS c "
                "JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
                "JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'v', 'm', 'p', 'f') "
                "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY c.relname, a.attnum",
                [bank.schema],
            ).fetchall()
            types = TypeNames().names(con, [(int(r[2]), int(r[3])) for r in rows])
        out: dict[str, list[Column]] = {}
        for (table, column, _, _), type_name in zip(rows, types, strict=True):
            out.setdefault(str(table), []).append(Column(name=str(column), type=type_name))
        return tuple(TableSchema(name=t, columns=tuple(c)) for t, c in sorted(out.items()))

    def reference(
        self, database: Path, sql: str
    ) -> tuple[tuple[Column, ...], list[tuple[Any, ...]]]:
        """Run a reference query as the reader (read-only): typed columns and raw rows.

        Raises EngineQueryError with PostgreSQL's message when it fails or is not
        exactly one query.
        """
        unsendable = why_unsendable(sql)
        if unsendable is not None:
            raise EngineQueryError(f"cannot be sent to PostgreSQL: {unsendable}")
        with self._reader(database, REFERENCE_TIMEOUT_S) as con:
            try:
                con.execute("BEGIN READ ONLY")
                declare(con, sql)
                columns: tuple[Column, ...] | None = None
                rows: list[tuple[Any, ...]] = []
                types = TypeNames()
                while True:
                    cur = con.execute(f"FETCH FORWARD {FETCH_MAX} FROM {CURSOR}")
                    batch = cur.fetchall()
                    if columns is None:
                        columns = describe(con, cur, types)
                    rows.extend(tuple(r) for r in batch)
                    if len(batch) < FETCH_MAX:
                        break
            except (psycopg.Error, UnicodeError, ValueError) as exc:
                raise EngineQueryError(first_line(exc)) from None
            finally:
                with contextlib.suppress(psycopg.Error):
                    con.execute("ROLLBACK")
        return columns or (), rows

    def executor(
        self, database: Path, *, timeout_s: float = 5.0, memory_limit: str = "512MB"
    ) -> PostgresExecutor:
        """A sandboxed executor over the bank (see :class:`PostgresExecutor`)."""
        return PostgresExecutor(
            self, Path(database), timeout_s=timeout_s, memory_limit=memory_limit
        )

    def admin_conninfo(self, **overrides: str) -> str:
        """The admin's connection string with ``overrides`` (for the executor's cleanup)."""
        return _conninfo(self._dsn, **overrides)


def _scalar(con: psycopg.Connection[Any], query: str) -> Any:
    row = con.execute(query.encode("ascii")).fetchone()
    if row is None:
        raise SandboxError(f"PostgreSQL returned no row for {query!r}")
    return row[0]


def _position(exc: psycopg.Error, text: str) -> str:
    """`` line N`` of the error's position in ``text`` (PostgreSQL counts characters from 1)."""
    raw = exc.diag.statement_position
    if not raw or not raw.isdigit():
        return ""
    return f" line {text[: int(raw) - 1].count(chr(10)) + 1}"


def _read_password(database: Path, bank: BankFile) -> str:
    path = Path(database).with_name(bank.password_file)
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise BankError(
            f"{path}: the reader's password file is missing", hint="publish the bank again"
        ) from None
    if mode & 0o077:
        raise BankError(
            f"{path}: the reader's password file is readable by others (mode {mode & 0o777:o})",
            hint=f"chmod 600 {path}",
        )
    return text


def _copy_rows(owner: psycopg.Connection[Any], data: DataFiles) -> None:
    """COPY every data file's rows into the table of its name (the tables of a
    ``data.sqlite``: every table schema.sql created)."""
    rows = owner.execute(
        "SELECT c.relname, a.attname FROM pg_catalog.pg_attribute AS a "
        "JOIN pg_catalog.pg_class AS c ON c.oid = a.attrelid "
        "JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY c.relname, a.attnum",
        [BANK_SCHEMA],
    ).fetchall()
    tables: dict[str, list[str]] = {}
    for table, column in rows:
        tables.setdefault(str(table), []).append(str(column))
    wanted = {t: t for t in tables} if data.kind == "data.sqlite" else data.tables()
    # Parents before children: PostgreSQL checks each foreign key as rows arrive.
    keys = owner.execute(
        "SELECT c.relname, p.relname FROM pg_catalog.pg_constraint AS k "
        "JOIN pg_catalog.pg_class AS c ON c.oid = k.conrelid "
        "JOIN pg_catalog.pg_class AS p ON p.oid = k.confrelid "
        "JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE k.contype = 'f' AND n.nspname = %s",
        [BANK_SCHEMA],
    ).fetchall()
    order = parents_first(sorted(wanted), [(str(c), str(p)) for c, p in keys])
    for table in order:
        name = wanted[table]
        if table not in tables:
            raise BankError(
                f"{name}: schema.sql creates no table {table!r}",
                hint="name each data file after a table that schema.sql creates",
            )
        columns = tuple(tables[table])
        statement = pgsql.SQL("COPY {} ({}) FROM STDIN").format(
            _ident(table), pgsql.SQL(", ").join(_ident(c) for c in columns)
        )
        try:
            with owner.transaction(), owner.cursor().copy(statement) as copy:
                for batch in data.rows(table, columns).batches():
                    for row in batch:
                        copy.write_row(row)
        except psycopg.Error as exc:
            raise BankError(
                f"{name}: cannot load table {table}: PostgreSQL error: {first_line(exc)}",
                hint=load_hint(str(exc)),
            ) from None
