"""External services for tests (PostgreSQL, Redis): where they are, and whether to skip or
fail without them.

Callers: any test tier that needs a real service (``tests/store``, ``tests/integration``).
Plain functions rather than fixtures, so that each tier builds the fixtures it needs (scope,
cleanup) on top.

Outside CI a missing service skips the test, so a laptop without the services can still run
the suite; in CI (the ``CI`` environment variable is set, as every CI system does) it fails,
so that a broken service container cannot silently turn those tests into skips.

``CONVERGENCE_TEST_POSTGRES_URL`` names the server and a database to administer it from
(default ``postgresql+psycopg2://postgres@127.0.0.1:5432/postgres``); tests get databases of
their own on that server, created on first use. A runtime on PostgreSQL needs encryption
keys (``CONVERGENCE_ENCRYPTION_KEYS``): :data:`TEST_ENCRYPTION_KEYS`, for the test's own
runtimes and, through :func:`encryption_environ`, the worker and API processes it starts.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet
from psycopg2 import errors, sql

from convergence.store.migrate import upgrade

# The key the secrets a test stores are encrypted with: one per test process, given to the
# processes it starts (workers, API servers) too.
TEST_ENCRYPTION_KEYS: tuple[str, ...] = (Fernet.generate_key().decode(),)


def encryption_environ() -> dict[str, str]:
    """The environment that gives a started process :data:`TEST_ENCRYPTION_KEYS`."""
    return {"CONVERGENCE_ENCRYPTION_KEYS": ",".join(TEST_ENCRYPTION_KEYS)}


_ADMIN_URL_VARIABLE = "CONVERGENCE_TEST_POSTGRES_URL"
_DEFAULT_ADMIN_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"
_CONNECT_TIMEOUT_SECONDS = 3


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def skip_or_fail(reason: str) -> None:
    """Skip the calling test, or fail it in CI, where every service must be there."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set: required services must be available)",
                    pytrace=False)
    pytest.skip(reason)


def _admin_url() -> str:
    return os.environ.get(_ADMIN_URL_VARIABLE) or _DEFAULT_ADMIN_URL


def _libpq_dsn(url: str) -> str:
    # libpq takes postgresql:// URIs itself; only SQLAlchemy's "+driver" has to go.
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme=parts.scheme.split("+", 1)[0]))


def _with_database(url: str, dbname: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + dbname))


@functools.cache
def _unreachable_reason() -> str | None:
    # Cached: when the server is down, every test would otherwise wait for the timeout.
    try:
        psycopg2.connect(_libpq_dsn(_admin_url()),
                         connect_timeout=_CONNECT_TIMEOUT_SECONDS).close()
    except psycopg2.Error as exc:
        where = urlsplit(_admin_url())  # host and port only: the URL may hold a password
        return f"PostgreSQL unreachable at {where.hostname}:{where.port or 5432}: {exc}".strip()
    return None


def require_postgres() -> None:
    """Skip (fail in CI) the calling test unless the PostgreSQL server answers."""
    reason = _unreachable_reason()
    if reason is not None:
        skip_or_fail(reason)


def own_name(dbname: str) -> str:
    """``dbname`` as this test process names it: with the suite spread over processes
    (pytest-xdist), each has databases of its own, so two never share one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return f"{dbname}_{worker}" if worker else dbname


def postgres_url(dbname: str) -> str:
    """SQLAlchemy URL of database ``dbname`` (this process's: :func:`own_name`) on the test
    server, created if missing."""
    require_postgres()
    dbname = own_name(dbname)
    connection = psycopg2.connect(_libpq_dsn(_admin_url()),
                                  connect_timeout=_CONNECT_TIMEOUT_SECONDS)
    try:
        connection.autocommit = True  # CREATE DATABASE cannot run inside a transaction
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,))
            if cursor.fetchone() is None:
                # Another test process may create it meanwhile.
                with contextlib.suppress(errors.DuplicateDatabase):
                    cursor.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    finally:
        connection.close()
    return _with_database(_admin_url(), dbname)


def reset_postgres_schema(url: str) -> None:
    """Empty database ``url``: drop and recreate its ``public`` schema."""
    connection = psycopg2.connect(_libpq_dsn(url), connect_timeout=_CONNECT_TIMEOUT_SECONDS)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute("DROP SCHEMA IF EXISTS public CASCADE")
            cursor.execute("CREATE SCHEMA public")
    finally:
        connection.close()


def fresh_database_url(request: pytest.FixtureRequest, folder: Path) -> str:
    """For a fixture parametrized ``"sqlite"`` / ``"postgresql"``: an empty database's URL, a
    SQLite file in ``folder`` or the test module's ``pg_database`` fixture with its schema
    reset and migrated to the head revision (a runtime opened on either is ready to use)."""
    if request.param == "sqlite":
        return f"sqlite:///{folder / 'convergence.db'}"
    url: str = request.getfixturevalue("pg_database")
    reset_postgres_schema(url)
    upgrade(url)
    return url


# Redis --------------------------------------------------------------------------------------
#
# ``CONVERGENCE_TEST_REDIS_URL`` names the server (default ``redis://127.0.0.1:6379``); a tier
# picks a database index of its own on it, so tiers never see each other's keys.

_REDIS_URL_VARIABLE = "CONVERGENCE_TEST_REDIS_URL"
_DEFAULT_REDIS_URL = "redis://127.0.0.1:6379"


def _redis_server_url() -> str:
    url = os.environ.get(_REDIS_URL_VARIABLE) or _DEFAULT_REDIS_URL
    return urlunsplit(urlsplit(url)._replace(path=""))


@functools.cache
def _redis_unreachable_reason() -> str | None:
    import redis

    try:
        client = redis.Redis.from_url(_redis_server_url(),
                                      socket_connect_timeout=_CONNECT_TIMEOUT_SECONDS,
                                      socket_timeout=_CONNECT_TIMEOUT_SECONDS)
        try:
            client.ping()
        finally:
            client.close()
    except redis.RedisError as exc:
        where = urlsplit(_redis_server_url())  # host and port only: the URL may hold a password
        return f"Redis unreachable at {where.hostname}:{where.port or 6379}: {exc}".strip()
    return None


def require_redis() -> None:
    """Skip (fail in CI) the calling test unless the Redis server answers."""
    reason = _redis_unreachable_reason()
    if reason is not None:
        skip_or_fail(reason)


_REDIS_CLAIM_KEY = "convergence-tests:claimed-by"


def claim_redis_db(candidates: range, owner: str,
                   ttl: int = 1800) -> tuple[str, Callable[[], None]]:
    """Claim one of ``candidates`` (database indexes) for ``owner``, emptied; and its release.

    For tiers whose processes share the database with each other (workers and the test), and
    that may run twice at once on one machine (two engineers, or an editor's test runner): a
    claim is a key set only if absent, so two runs never share an index. A run killed before
    releasing its index gives it back after ``ttl`` seconds.
    """
    import redis

    require_redis()
    for db in candidates:
        url = f"{_redis_server_url()}/{db}"
        client = redis.Redis.from_url(url, socket_connect_timeout=_CONNECT_TIMEOUT_SECONDS)
        try:
            if not client.set(_REDIS_CLAIM_KEY, owner, nx=True, ex=ttl):
                continue
            for key in client.scan_iter(count=1000):
                if key != _REDIS_CLAIM_KEY.encode():
                    client.delete(key)
        finally:
            client.close()

        def release(url: str = url) -> None:
            client = redis.Redis.from_url(url, socket_connect_timeout=_CONNECT_TIMEOUT_SECONDS)
            try:
                client.flushdb()
            finally:
                client.close()

        return url, release
    skip_or_fail(f"every Redis database in {candidates} is claimed by another test run")
    raise AssertionError("unreachable")


def drop_postgres_database(dbname: str) -> None:
    """Drop database ``dbname`` (this process's) of the test server, disconnecting its
    sessions."""
    require_postgres()
    dbname = own_name(dbname)
    connection = psycopg2.connect(_libpq_dsn(_admin_url()),
                                  connect_timeout=_CONNECT_TIMEOUT_SECONDS)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                           .format(sql.Identifier(dbname)))
    finally:
        connection.close()


def terminate_session(url: str | sa.URL, pid: int) -> None:
    """Cut PostgreSQL session ``pid`` (of the database at ``url``) from the server's side, as a
    restart or a failover does, through a connection of its own, and wait until it is gone."""
    other = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with other.connect() as connection:
            assert connection.execute(sa.text("SELECT pg_terminate_backend(:pid, 5000)"),
                                      {"pid": pid}).scalar_one()
    finally:
        other.dispose()
