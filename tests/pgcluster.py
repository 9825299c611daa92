"""A throwaway PostgreSQL cluster for the tests: initdb, start on a Unix socket, stop.

The cluster is the Debian ``postgresql`` package's server (``.ci/run`` installs
the package when ``initdb`` is missing). Binaries are found on ``PATH`` (here
``/usr/local/bin/initdb`` links to the package) or else under
``/usr/lib/postgresql/<version>/bin`` (the newest version), where Debian keeps
them off ``PATH``.

Where it lives and who runs it:

- PostgreSQL refuses to run as root, and the tests (and CI) run as root. The
  server then runs as the ``postgres`` system user the Debian package creates
  (``nobody`` when there is none), switched to with ``subprocess``'s
  ``user=``/``group=`` (setresuid in the child: no ``su``/``runuser`` needed).
  As any other user the server runs as that user.
- The cluster folder is a private ``tempfile.mkdtemp`` folder (mode 0700, owned
  by the server's user), not pytest's tmp folder: pytest keeps
  ``/tmp/pytest-of-<user>`` at mode 0700 (re-tightened by every pytest start,
  including another engineer's), so a server running as another user could not
  reach a data folder inside it, and a Unix socket path must stay under 107
  bytes. The fixture removes the folder at the end.
- The server listens only on a Unix socket in that folder
  (``listen_addresses = ''``), never on TCP.
- Roles: ``cl_super`` (the bootstrap superuser) and ``cl_admin`` (LOGIN
  CREATEDB CREATEROLE, plus ``SET`` on the ``temp_file_limit`` parameter: the
  privileges ``docs/engines.md`` asks of ``CASELEDGER_PG_DSN``). Both log in by
  ``trust`` over the private socket; every other role (the banks' readers) must
  present its SCRAM password, as on a real server.

``stop`` is ``pg_ctl stop -m immediate``: nothing is worth flushing. It runs at
the end of the fixture or at interpreter exit; a test process killed outright
(SIGKILL, a timeout, a cancelled xdist worker) runs neither, so each cluster also
has a watchdog process: it waits for the end of a pipe only the test process
holds, and when that process is gone it sends the server SIGQUIT (immediate
shutdown) and removes the folder.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["ADMIN", "SUPERUSER", "PgCluster", "find_bin_dir"]

SUPERUSER = "cl_super"
ADMIN = "cl_admin"
PORT = 5432
START_TIMEOUT_S = 60

_SERVER_SETTINGS = """
# caseledger test cluster: Unix socket only, no durability (a throwaway cluster).
listen_addresses = ''
unix_socket_directories = '{socket_dir}'
unix_socket_permissions = 0700
port = {port}
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 32MB
max_connections = 60
timezone = 'UTC'
log_timezone = 'UTC'
password_encryption = 'scram-sha-256'
log_min_messages = warning
log_min_error_statement = panic
"""

#: The watchdog: reads stdin to its end (the test process died or stopped the cluster),
#: then stops the server the pid file names, if any, and removes the cluster folder.
_WATCHDOG = """
import os, shutil, signal, sys, time
sys.stdin.buffer.read()
pid_file, root = sys.argv[1], sys.argv[2]
try:
    with open(pid_file) as f:
        pid = int(f.readline())
    os.kill(pid, signal.SIGQUIT)
    for _ in range(300):
        os.kill(pid, 0)
        time.sleep(0.1)
except (OSError, ValueError):
    pass
shutil.rmtree(root, ignore_errors=True)
"""

_HBA = f"""
# TYPE  DATABASE  USER        METHOD
local   all       {SUPERUSER}  trust
local   all       {ADMIN}    trust
local   all       all         scram-sha-256
"""


def find_bin_dir() -> Path:
    """The folder holding initdb, pg_ctl and postgres (PATH first, then Debian's folders).

    Raises RuntimeError naming what to install: a test never skips because the
    server is missing.
    """
    found = shutil.which("initdb")
    if found is not None:
        folder = Path(found).resolve().parent
        if (folder / "pg_ctl").is_file() and (folder / "postgres").is_file():
            return folder
    candidates = []
    for initdb in Path("/usr/lib/postgresql").glob("*/bin/initdb"):
        version = initdb.parent.parent.name
        if re.fullmatch(r"\d+(\.\d+)?", version):
            candidates.append((tuple(int(p) for p in version.split(".")), initdb.parent))
    if candidates:
        return max(candidates)[1]
    raise RuntimeError(
        "PostgreSQL's initdb was not found on PATH nor under /usr/lib/postgresql/*/bin: "
        "install Debian's postgresql package (apt-get install postgresql; .ci/run does)"
    )


def _server_user() -> tuple[int, int] | None:
    """(uid, gid) to run the server as when we are root; None to run it as ourselves."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return entry.pw_uid, entry.pw_gid
    raise RuntimeError("running as root and there is neither a postgres nor a nobody user")


class PgCluster:
    """One running throwaway cluster; :meth:`start` makes one, :meth:`stop` ends it."""

    def __init__(self, root: Path, bin_dir: Path, user: tuple[int, int] | None) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.user = user
        self.data = root / "data"
        self.log = root / "server.log"
        self.socket_dir = root
        self.port = PORT
        self.running = False
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._alive_fd: int | None = None

    # ------------------------------------------------------------------ DSNs

    def dsn(self, user: str, dbname: str = "postgres") -> str:
        """A libpq DSN for ``user`` over the cluster's Unix socket."""
        return f"host={self.socket_dir} port={self.port} user={user} dbname={dbname}"

    @property
    def admin_dsn(self) -> str:
        """The DSN the engine gets as CASELEDGER_PG_DSN (CREATEDB CREATEROLE, not superuser)."""
        return self.dsn(ADMIN)

    @property
    def superuser_dsn(self) -> str:
        """The bootstrap superuser (for tests that check what the admin cannot do)."""
        return self.dsn(SUPERUSER)

    # ----------------------------------------------------------- lifecycle

    @classmethod
    def start(cls) -> PgCluster:
        """initdb a fresh cluster in a private temp folder, start it, create the admin role."""
        bin_dir = find_bin_dir()
        user = _server_user()
        root = Path(tempfile.mkdtemp(prefix="caseledger-pg-"))
        cluster = cls(root, bin_dir, user)
        atexit.register(cluster.stop)
        try:
            if user is not None:
                os.chown(root, *user)
            root.chmod(0o700)
            cluster._initdb()
            cluster._pg_ctl("start", "-w", "-t", str(START_TIMEOUT_S), "-l", str(cluster.log))
            cluster.running = True
            cluster._watch()
            cluster._create_admin()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _watch(self) -> None:
        """Start the watchdog; this process keeps the pipe's write end (not inherited by
        any child: os.pipe descriptors are close-on-exec) until :meth:`stop`."""
        read_fd, self._alive_fd = os.pipe()
        try:
            pid_file = str(self.data / "postmaster.pid")
            self._watchdog = subprocess.Popen(
                [sys.executable, "-c", _WATCHDOG, pid_file, str(self.root)],
                stdin=read_fd, start_new_session=True,
            )  # fmt: skip
        finally:
            os.close(read_fd)

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
        extra: dict[str, object] = {}
        if self.user is not None:
            extra = {"user": self.user[0], "group": self.user[1], "extra_groups": []}
        try:
            return subprocess.run(
                args, cwd=self.root, env=env, capture_output=True, text=True, check=True,
                timeout=START_TIMEOUT_S * 2, **extra,  # type: ignore[call-overload]
            )  # fmt: skip
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(
                f"{' '.join(args)} failed (exit {exc.returncode}):\n{exc.stdout}\n{exc.stderr}"
                f"\n{self.log_tail()}"
            ) from None

    def _initdb(self) -> None:
        self._run(
            str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", SUPERUSER,
            "--auth-local=trust", "--auth-host=reject", "-E", "UTF8", "--locale=C",
            "--no-sync", "--no-instructions",
        )  # fmt: skip
        settings = _SERVER_SETTINGS.format(socket_dir=self.socket_dir, port=self.port)
        with (self.data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write(settings)
        (self.data / "pg_hba.conf").write_text(_HBA, encoding="utf-8")

    def _pg_ctl(self, *args: str) -> None:
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), *args)

    def _create_admin(self) -> None:
        import psycopg

        with psycopg.connect(self.superuser_dsn, autocommit=True) as con:
            con.execute(f"CREATE ROLE {ADMIN} LOGIN CREATEDB CREATEROLE")
            con.execute(f"GRANT SET ON PARAMETER temp_file_limit TO {ADMIN}")

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server log (for error messages)."""
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no server log)"
        return "server log:\n" + "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server (immediate mode) and remove the cluster folder. Safe to call twice."""
        if self.running:
            self.running = False
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self._pg_ctl("stop", "-m", "immediate", "-w", "-t", "30")
        shutil.rmtree(self.root, ignore_errors=True)
        if self._alive_fd is not None:  # the watchdog finds nothing left and exits
            os.close(self._alive_fd)
            self._alive_fd = None
        if self._watchdog is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watchdog.wait(timeout=30)
            self._watchdog = None
