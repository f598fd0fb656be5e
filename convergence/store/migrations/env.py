"""Alembic environment: how every migration run connects and what it compares against.

Callers: Alembic itself, loading this file by path, when ``convergence.store.migrate`` runs a
command (the connection arrives in ``config.attributes["connection"]``, already inside the
run's transaction) or when a developer runs ``alembic -c convergence/store/alembic.ini ...``
(the URL comes from the config's ``sqlalchemy.url``, else from the settings, i.e.
``CONVERGENCE_DATABASE_URL``).
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection

from convergence.settings import load_settings
from convergence.store.db import is_sqlite, make_engine
from convergence.store.migrate import migration_connection
from convergence.store.models import Base

config = context.config
target_metadata = Base.metadata

if config.config_file_name is not None:
    # Keep the application's loggers when run from the alembic command line.
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or load_settings().database_url


def run_migrations_offline() -> None:
    url = _url()
    context.configure(
        url=url,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=is_sqlite(url),
    )
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        # Autogenerate should see every difference, not only added and dropped objects.
        compare_type=True,
        compare_server_default=True,
        # The SQLite engine makes DDL transactional (db.py); Alembic assumes it is not and
        # would otherwise commit after each migration.
        transactional_ddl=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(_url())
    try:
        with migration_connection(engine) as own_connection:
            _run(own_connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
