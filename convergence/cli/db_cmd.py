"""``convergence db ...``: schema maintenance for the configured database.

An operator runs ``convergence db upgrade`` when rolling out a version against PostgreSQL; the
embedded SQLite database migrates itself on start and needs no command, though this one
works for it as well. ``convergence db rotate-keys`` ends a rotation of the encryption keys:
every stored secret sealed again with the first of ``CONVERGENCE_ENCRYPTION_KEYS``
(``convergence.store.rekeying``). Registered on the ``convergence`` group by
``convergence.cli``; the store (SQLAlchemy, Alembic) is imported when the command runs.
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


@db.command("rotate-keys")
def rotate_keys() -> None:
    """Encrypt every stored secret again with the first of CONVERGENCE_ENCRYPTION_KEYS.

    Put a new key first in the setting of every process (the old ones after it), run this,
    then drop the old keys. Secrets still stored in clear (written before encryption) are
    encrypted too."""
    from convergence.engine.secrets import typed_fields
    from convergence.errors import ConfigurationError
    from convergence.plugins.registry import PluginRegistry
    from convergence.store.db import make_engine, redacted_url
    from convergence.store.migrate import MIGRATION_ERRORS
    from convergence.store.rekeying import rekey
    from convergence.store.sealing import open_sealer

    try:
        settings = load_settings()
        sealer = open_sealer(settings.database_url, settings.encryption_keys)
    except (ValueError, ConfigurationError) as exc:
        raise click.UsageError(str(exc)) from None
    registry = PluginRegistry.from_entry_points()
    typed = {name: fields for name in registry.names()
             if (fields := typed_fields(registry.lookup(name))) is not None}
    engine = make_engine(settings.database_url)
    try:
        done = rekey(engine, sealer, typed)
    except ConfigurationError as exc:
        raise click.ClickException(str(exc)) from None
    except MIGRATION_ERRORS as exc:
        raise click.ClickException(f"{redacted_url(settings.database_url)}: {exc}") from exc
    finally:
        engine.dispose()
    click.echo(f"{redacted_url(settings.database_url)}: encrypted again with the first of "
               f"{sealer.keys} key(s): {done.templates} template(s), {done.records} "
               f"resource record(s), {done.subscriptions} webhook subscription(s), "
               f"{done.keys} service key(s)"
               + (f"; {done.skipped} record(s) changed meanwhile (encrypted by that change)"
                  if done.skipped else ""))
