"""Engines and sessions: the one place a database connection is configured.

Callers: every entry point (CLI, API, worker) builds one engine per process with
``make_engine(settings.database_url)`` and one ``make_sessionmaker(engine)``; the migration
code (``store/migrate.py``, ``store/migrations/env.py``) and the benchmarks use the same engine
so that they see exactly the connection behaviour the engine runs with.

Two backends are supported:

- SQLite, the embedded default. The ``sqlite3`` driver's legacy transaction handling is
  replaced with SQLAlchemy's recipe: the driver never emits BEGIN itself, and we emit
  ``BEGIN IMMEDIATE`` when SQLAlchemy begins a transaction. That gives transactional DDL,
  working SAVEPOINTs and repeatable reads; and because the write lock is taken at BEGIN rather
  than at the first write, concurrent writers queue on ``busy_timeout`` instead of failing with
  "database is locked" when a read lock cannot be upgraded (SQLite does not wait in that case,
  as waiting could deadlock). Writing transactions run one at a time, which WAL keeps short
  by letting commits skip most fsyncs; transactions that only read (``READ_ONLY``) begin
  deferred and read a snapshot beside the writer, never waiting for it.
- PostgreSQL, through psycopg2 (other PostgreSQL drivers work without the psycopg2 tuning).

``sqlite:///:memory:`` uses a single shared connection (``StaticPool``) so that every thread
sees the same database; it is for tests, and two threads cannot both be inside a transaction
on it at once (the second BEGIN fails) — concurrency tests need a file.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Any

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.engine import URL, Connection
from sqlalchemy.exc import InvalidatePoolError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

# Execution option marking statements that only open a transaction (SQLite's BEGIN), so that
# statement counters can leave them out: PostgreSQL's BEGIN is sent by the driver, unseen by
# SQLAlchemy, and the two backends should report the same figures for the same work.
TRANSACTION_CONTROL = "convergence_transaction_control"
# Execution option of a transaction that only reads (``Store.read``): on SQLite it begins
# deferred, without the write lock.
READ_ONLY = "convergence_read_only"

_SQLITE_PRAGMAS = (
    # First: the pragmas after it (journal_mode needs a lock) then wait for a busy database
    # instead of failing at once with "database is locked" (processes starting together).
    "PRAGMA busy_timeout=30000",
    "PRAGMA journal_mode=WAL",
    # With WAL, NORMAL loses at most the last commits on power loss, never consistency.
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    # 64 MiB of pages per connection (the default is 2 MiB), filled only as pages are read:
    # a batch's records, nodes and index pages of a stack of a million resources stay in
    # memory from one batch to the next instead of being read again.
    "PRAGMA cache_size=-65536",
    # The WAL is copied back into the database (a checkpoint, with an fsync) every 20,000
    # pages rather than SQLite's 1,000: a batch's records, events and nodes dirty pages all
    # over their random-ordered indexes (names, physical ids), so one commit nearly filled the
    # default and every commit paid a checkpoint. A page changed by many commits is now
    # copied back once. Measured on a 30,000-resource create: 24 s -> 17 s (CPU 18.5 -> 15.7).
    # What a power loss can lose grows with it (the last commits since the checkpoint; never
    # consistency); a crash of the process loses nothing. After a checkpoint the WAL file is
    # cut back to 32 MiB.
    "PRAGMA wal_autocheckpoint=20000",
    "PRAGMA journal_size_limit=33554432",
)

# Per process: API workers and Celery workers each hold a pool; PostgreSQL's default
# max_connections (100) has to cover them all.
_PG_POOL_SIZE = 10
_PG_MAX_OVERFLOW = 10
# Recycle before common server and proxy idle timeouts cut connections from under the pool.
_PG_POOL_RECYCLE_SECONDS = 1800
# A pooled connection idle for longer than this is tested before it is handed out (one
# round trip); one given back more recently is handed out as it is. A worker's hop is a dozen
# statements, and testing the connection at every transaction was one round trip in eleven.
# Production pools keep the same window (HikariCP's ``aliveBypassWindowMs``, 500 ms).
PING_AFTER_IDLE_SECONDS = 0.5


def is_sqlite(url: str | URL) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def sqlite_folder(url: str | URL) -> str | None:
    """The folder of a SQLite database file; None for another database or one in memory."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return str(os.path.dirname(os.path.abspath(str(parsed.database))))


def redacted_url(url: str | URL) -> str:
    """The URL without its password, for messages."""
    return make_url(url).render_as_string(hide_password=True)


def make_engine(url: str, *, echo: bool = False) -> Engine:
    """The engine for ``url``, configured for this project's transaction semantics."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        # SQLAlchemy 2.1 picks psycopg (3) for a bare postgresql://; we depend on psycopg2.
        parsed = parsed.set(drivername="postgresql+psycopg2")
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed, echo)
    if backend == "postgresql":
        return _postgresql_engine(parsed, echo)
    raise ValueError(f"unsupported database {redacted_url(parsed)}: use sqlite or postgresql")


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    # Rows read in a transaction stay usable after it commits: the engine hands plain values
    # on to other steps rather than re-reading each attribute lazily.
    return sessionmaker(bind=engine, expire_on_commit=False)


@functools.cache
def script_directory() -> ScriptDirectory:
    """The migration scripts shipped in this package (no alembic.ini needed)."""
    return ScriptDirectory(str(MIGRATIONS_DIR))


def head_revisions() -> frozenset[str]:
    return frozenset(script_directory().get_heads())


def current_revisions(engine: Engine) -> frozenset[str]:
    """The revisions the database is at; empty if it was never migrated."""
    with engine.connect() as connection:
        return frozenset(MigrationContext.configure(connection).get_current_heads())


def schema_is_current(engine: Engine) -> bool:
    """Whether the database is migrated to exactly this code's head revision(s)."""
    return current_revisions(engine) == head_revisions()


def _is_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"


def _sqlite_engine(url: URL, echo: bool) -> Engine:
    memory = _is_memory(url)
    if not memory and not url.query.get("uri"):
        # A fresh installation has no data directory yet; sqlite3 would fail to open the file.
        assert url.database is not None
        Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False}, "echo": echo,
                              "hide_parameters": True}
    if memory:
        kwargs["poolclass"] = StaticPool
    else:
        # The connection used last is used next: its page cache is warm (a connection's own
        # writes keep it valid; another connection's writes make SQLite drop it).
        kwargs["pool_use_lifo"] = True
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # None: the driver emits no BEGIN of its own; _on_begin below does it.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            for pragma in _SQLITE_PRAGMAS:
                cursor.execute(pragma)
        finally:
            cursor.close()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, _record: ConnectionPoolEntry, _proxy: Any) -> None:
        # Returning a connection that used an isolation_level execution option makes the
        # dialect restore driver-managed transactions (isolation_level ""); undo that.
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        options = connection.get_execution_options()
        if options.get("isolation_level") == "AUTOCOMMIT":
            return
        # IMMEDIATE takes the write lock now, so a transaction that reads and then writes
        # never needs the lock upgrade that fails at once under contention. A reader says so
        # (``Store.read``) and takes no lock: with WAL it reads a snapshot beside the writer.
        begin = "BEGIN" if options.get(READ_ONLY) else "BEGIN IMMEDIATE"
        connection.exec_driver_sql(begin, execution_options={TRANSACTION_CONTROL: True})

    return engine


def _postgresql_engine(url: URL, echo: bool) -> Engine:
    kwargs: dict[str, Any] = {
        "echo": echo,
        # A statement's values (a stack's parameters, hidden ones too) never reach an error
        # message, a log line or an API answer.
        "hide_parameters": True,
        # The connection given back last is taken next: it needs no test (see
        # _ping_when_idle) and the others stay idle, to be closed by the pool's recycling.
        "pool_use_lifo": True,
        "pool_size": _PG_POOL_SIZE,
        "max_overflow": _PG_MAX_OVERFLOW,
        "pool_recycle": _PG_POOL_RECYCLE_SECONDS,
    }
    if url.get_driver_name() == "psycopg2":
        # Batches executemany() of UPDATE/DELETE into few round trips (INSERTs already use
        # multi-row VALUES); the planner writes one row per node.
        kwargs["executemany_mode"] = "values_plus_batch"
        if "application_name" not in url.query:
            # Names our sessions in pg_stat_activity.
            kwargs["connect_args"] = {"application_name": "convergence"}
    engine = create_engine(url, **kwargs)
    _ping_when_idle(engine)
    return engine


def _ping_when_idle(engine: Engine) -> None:
    """Workers outlive database restarts and failovers: a connection that sat in the pool for
    more than :data:`PING_AFTER_IDLE_SECONDS` is tested before use, and one found dead is
    replaced, with every other connection the pool held then. A connection cut
    within the window fails its first statement instead, as one cut in the middle of a
    transaction does: every caller already takes that as the database being away, and the
    pool then replaces every connection it held before the failure."""

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info["returned_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
        # Never given back: connected just now (a new connection's ``info`` starts empty).
        returned = record.info.get("returned_at")
        if returned is None or time.monotonic() - returned <= PING_AFTER_IDLE_SECONDS:
            return
        try:
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute("SELECT 1")
            finally:
                cursor.close()
        except Exception as exc:
            # Dead: so are the others of its time (a restart, a failover); the pool replaces
            # them all, and connects again for this checkout.
            raise InvalidatePoolError(f"pooled connection failed its test: {exc}") from exc
