"""Private PostgreSQL and Redis servers for the fault tier, and a black-hole TCP listener.

Callers: :mod:`tests.faults.cluster` (the fault environment) and, through it, the fault tests
and ``benchmarks/soak.py``. The fault tier kills and restarts its services, so it never uses
the machine's shared ones: :class:`PrivatePostgres` is an ``initdb`` cluster in a temporary
folder on a free port, :class:`PrivateRedis` a ``redis-server`` child process that keeps
nothing on disk (a restart loses every queued message, as a crashed Redis does).

PostgreSQL refuses to run as root; as root, ``initdb`` and ``pg_ctl`` run as the ``postgres``
user (``runuser``), in a folder given to it. Nothing here uses pytest: a missing binary raises
:class:`ServiceUnavailable`, which the fixtures turn into a skip (a failure in CI).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psycopg2
import redis

START_TIMEOUT = 30.0


class ServiceUnavailable(RuntimeError):
    """A private service cannot be built on this machine (a binary or user is missing)."""


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def postgres_bindir() -> Path:
    """Where ``initdb`` and ``pg_ctl`` are: ``pg_config --bindir``, else the newest
    ``/usr/lib/postgresql/*/bin``."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                 timeout=10, check=True).stdout.strip()
            candidates.append(Path(out))
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                                           key=lambda p: int(p.split("/")[-2]), reverse=True)]
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    raise ServiceUnavailable("no PostgreSQL server binaries (initdb, pg_ctl) found: "
                             "tried pg_config --bindir and /usr/lib/postgresql/*/bin")


class PrivatePostgres:
    """A PostgreSQL cluster of its own: trust auth, loopback only, a free port."""

    def __init__(self, root: Path | None = None) -> None:
        self.bindir = postgres_bindir()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres and shutil.which("runuser") is None:
            raise ServiceUnavailable("running as root and no runuser to become postgres")
        # Not under pytest's tmp_path: as root that is a 0700 folder postgres cannot enter.
        self.root = root or Path(tempfile.mkdtemp(prefix="convergence-faults-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sock"
        self.logfile = self.root / "postgres.log"
        self.port = free_port()
        self._initdb()

    # processes ------------------------------------------------------------------------------
    def _run(self, *argv: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        command = list(argv)
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise ServiceUnavailable(f"{' '.join(argv[:2])} failed ({result.returncode}):\n"
                                     f"{result.stdout}\n{result.stderr}\n{self.log_tail()}")
        return result

    def _initdb(self) -> None:
        self.sockets.mkdir(parents=True, exist_ok=True)
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(self.sockets, "postgres", "postgres")
            os.chmod(self.root, 0o755)
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust",
                  "-U", "postgres", "--no-sync", "-E", "UTF8")

    def _options(self) -> str:
        # fsync off: a restart here is a process crash, not a power cut (the OS keeps what
        # was written), and it is faster. synchronous_commit stays on: off, a crash loses the
        # last commits, which a client was told had happened, and a request answered 202
        # would vanish for a reason that is not the engine's.
        return (f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 "
                "-c fsync=off -c full_page_writes=off -c max_connections=300")

    def start(self) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.logfile),
                  "-o", self._options(), "-w", "-t", str(int(START_TIMEOUT)), "start")

    def stop(self, mode: str = "fast") -> None:
        with contextlib.suppress(ServiceUnavailable):
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w",
                      "stop")

    def restart(self, mode: str = "immediate") -> None:
        """Stop (``immediate``: every backend killed, as a crash) and start again."""
        self.stop(mode)
        self.start()

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def dump(self, dbname: str, to: Path) -> None:
        """``pg_dump`` of ``dbname`` (plain SQL) to ``to``: the evidence of a failed soak."""
        result = self._run(str(self.bindir / "pg_dump"), "-h", "127.0.0.1", "-p",
                           str(self.port), "-U", "postgres", dbname, timeout=300)
        to.write_text(result.stdout)

    def log_tail(self, lines: int = 20) -> str:
        if not self.logfile.exists():
            return ""
        return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])

    # databases ------------------------------------------------------------------------------
    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def url(self, dbname: str) -> str:
        """SQLAlchemy URL of ``dbname``."""
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, dbname: str) -> str:
        connection = psycopg2.connect(self.dsn(), connect_timeout=5)
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{dbname}"')
        finally:
            connection.close()
        return self.url(dbname)

    def terminate_backends(self, dbname: str) -> int:
        """``pg_terminate_backend`` on every session of ``dbname`` but this one: how many."""
        connection = psycopg2.connect(self.dsn(), connect_timeout=5)
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE datname = %s AND pid <> pg_backend_pid()", (dbname,))
                row = cursor.fetchone()
        finally:
            connection.close()
        return int(row[0]) if row else 0


class PrivateRedis:
    """``redis-server`` as a child process on a fixed free port; nothing kept on disk."""

    def __init__(self, folder: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServiceUnavailable("redis-server is not installed")
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = folder / "redis.log"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, db=0, socket_timeout=5,
                           socket_connect_timeout=2)

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--daemonize", "no", "--dir", str(self.folder)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            client = self.client()
            try:
                if client.ping():
                    return
            except redis.RedisError:
                pass
            finally:
                client.close()
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise ServiceUnavailable("redis-server did not start:\n"
                                         + self.log.read_text(errors="replace")[-2000:])
            time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def restart(self) -> None:
        """Killed outright and started again on the same port: every message is lost."""
        self.kill()
        self.start()


class BlackHole:
    """A TCP listener that accepts connections and never answers: a broker that hangs."""

    def __init__(self) -> None:
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port = int(self._server.getsockname()[1])
        self._held: list[socket.socket] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="black-hole", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            self._held.append(connection)  # held open, never read, never answered

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        with contextlib.suppress(OSError):
            self._server.close()
        for connection in self._held:
            with contextlib.suppress(OSError):
                connection.close()
