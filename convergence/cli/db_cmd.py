"""``convergence db ...``: schema maintenance for the configured database.

An operator runs ``convergence db upgrade`` when rolling out a version against PostgreSQL; the
embedded SQLite database migrates itself on start and needs no command, though this one
works for it as well. Registered on the ``convergence`` group by ``convergence.cli``; the store
(SQLAlchemy, Alembic) is imported when the command runs.
"""

from __future__ import annotations

import click

from convergence.settings import load_settings


@click.group()
def db() -> None:
    """Manage the database schema."""


@db.command("upgrade")
@click.option("--revision", default="head", show_default=True,
              help="The revision to migrate to.")
def upgrade(revision: str) -> None:
    """Migrate the database named by CONVERGENCE_DATABASE_URL to REVISION."""
    # Imported here so that commands that never touch the database start without loading
    # SQLAlchemy and Alembic.
    from convergence.store.db import redacted_url
    from convergence.store.migrate import MIGRATION_ERRORS
    from convergence.store.migrate import upgrade as upgrade_schema

    url = load_settings().database_url
    try:
        reached = upgrade_schema(url, revision)
    except MIGRATION_ERRORS as exc:
        raise click.ClickException(f"{redacted_url(url)}: {exc}") from exc
    click.echo(f"{redacted_url(url)}: at revision {reached or 'none (empty)'}")
