"""Schema migrations, run from code: no alembic.ini and no repository checkout needed.

Callers: ``convergence db upgrade`` (PostgreSQL is migrated explicitly, by an operator, before
new code runs) and every entry point through ``ensure_schema`` (the embedded SQLite database
migrates itself on start). ``migrations/env.py`` uses ``migration_connection`` too, so that
``alembic -c convergence/store/alembic.ini ...`` behaves exactly like ``upgrade``.

A migration run is one transaction: PostgreSQL has transactional DDL, and the SQLite engine
(``db.py``) makes SQLite's DDL transactional as well. A run that fails leaves the schema as it
was, and processes that start together migrate one after the other (SQLite's write lock, a
PostgreSQL advisory lock), the later ones finding nothing left to do. Within one process runs
are also serialised by a plain lock: Alembic keeps the running migration in module globals
(``alembic.context``, ``alembic.op``), so two overlapping runs would mix up their state.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import Engine, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from convergence.store.db import (
    MIGRATIONS_DIR,
    current_revisions,
    head_revisions,
    is_sqlite,
    make_engine,
    redacted_url,
    script_directory,
)

# Arbitrary but fixed: every Convergence process migrating a PostgreSQL database takes the
# same advisory lock ("conv" in ASCII).
_PG_MIGRATION_LOCK = 0x636F6E76
_PROCESS_LOCK = threading.Lock()


class SchemaError(RuntimeError):
    """The database schema is not the one this code needs, and was not migrated here."""


# What a migration command reports as a one-line failure rather than a traceback: the
# database is unreachable or refuses us, the revision is unknown, the schema is foreign.
MIGRATION_ERRORS: tuple[type[Exception], ...] = (SchemaError, OperationalError, CommandError)


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        # The value goes through configparser interpolation: escape %-encoded passwords.
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


@contextmanager
def migration_connection(engine: Engine) -> Iterator[Connection]:
    """A connection inside the single transaction of a migration run, serialised with others.

    On SQLite, foreign keys are not enforced during the run: batch migrations rebuild a table
    by copy, drop and rename, and dropping a referenced table would delete or refuse rows
    meanwhile. They are checked once, before commit, instead (SQLite's documented procedure
    for schema changes). The pragma only takes effect outside a transaction, hence the raw
    connection before BEGIN.
    """
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as connection:
        if sqlite:
            _set_sqlite_foreign_keys(connection, enabled=False)
        try:
            with connection.begin():
                if engine.dialect.name == "postgresql":
                    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                                       {"key": _PG_MIGRATION_LOCK})
                yield connection
                if sqlite:
                    violations = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                    if violations:
                        raise SchemaError(f"migration broke foreign keys: {violations[:10]}")
        finally:
            if sqlite and not connection.invalidated:
                _set_sqlite_foreign_keys(connection, enabled=True)


def _set_sqlite_foreign_keys(connection: Connection, *, enabled: bool) -> None:
    driver_connection = connection.connection.driver_connection
    assert driver_connection is not None
    driver_connection.execute(f"PRAGMA foreign_keys={'ON' if enabled else 'OFF'}")


def upgrade(engine_or_url: Engine | str, revision: str = "head") -> str | None:
    """Migrate the database to ``revision``; returns the revision(s) it is at afterwards.

    Idempotent: a database already there is left untouched.
    """
    own_engine = isinstance(engine_or_url, str)
    engine = make_engine(engine_or_url) if isinstance(engine_or_url, str) else engine_or_url
    try:
        with _PROCESS_LOCK, migration_connection(engine) as connection:
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
        return _describe(current_revisions(engine))
    finally:
        if own_engine:
            engine.dispose()


def current_revision(engine: Engine) -> str | None:
    return _describe(current_revisions(engine))


def ensure_schema(engine: Engine) -> None:
    """Make sure the schema is current: migrate embedded SQLite, refuse anything else stale.

    Called by every entry point before it touches the tables. A SQLite database belongs to
    this installation, so upgrading it on start is what its single user wants; a shared
    PostgreSQL database is migrated by an operator (``convergence db upgrade``) when the
    deployment is rolled out, not by whichever worker happens to start first.
    """
    current, heads = current_revisions(engine), head_revisions()
    if current == heads:
        return
    unknown = current - _known_revisions()
    if unknown:
        raise SchemaError(
            f"database {redacted_url(engine.url)} is at revision {_describe(unknown)}, which "
            "this version of Convergence does not know: it was migrated by a newer version")
    if is_sqlite(engine.url):
        upgrade(engine)
        return
    raise SchemaError(
        f"database {redacted_url(engine.url)} is at revision {_describe(current) or 'none'}, "
        f"this version needs {_describe(heads)}: run `convergence db upgrade`")


def _known_revisions() -> frozenset[str]:
    return frozenset(script.revision for script in script_directory().walk_revisions())


def _describe(revisions: frozenset[str]) -> str | None:
    return ", ".join(sorted(revisions)) or None
