"""``convergence worker``: run engine steps from the broker (a Celery worker, in this process).

The worker's life is ``convergence.workers`` (:func:`~convergence.workers.app.make_worker_app`);
this command checks the schema, builds the settings once and hands them over.

Configured by the environment like every entry point (``CONVERGENCE_BROKER_URL`` is required,
``CONVERGENCE_DATABASE_URL`` names the shared PostgreSQL database). The worker migrates
nothing: it refuses to start unless the schema is the one this code needs, which
``convergence db upgrade`` provides. SIGTERM is Celery's warm shutdown: running steps finish,
messages not yet acknowledged go back to the broker.
"""

from __future__ import annotations

import os
import socket

import click

from convergence.settings import load_settings


@click.command()
@click.option("--concurrency", "-c", type=click.IntRange(min=1), default=None,
              help="Processes (or threads) running steps; default: the number of CPUs.")
@click.option("--loglevel", "-l", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error", "critical"],
                                case_sensitive=False))
@click.option("--pool", type=click.Choice(["prefork", "threads", "solo"]), default="prefork",
              show_default=True, help="How steps run in parallel.")
@click.option("--hostname", "-n", default=None,
              help="The worker's name; default: convergence-<pid>@<host>.")
def worker(concurrency: int | None, loglevel: str, pool: str, hostname: str | None) -> None:
    """Run steps from the broker named by CONVERGENCE_BROKER_URL until stopped."""
    # Imported here so that other commands start without loading Celery and SQLAlchemy.
    from convergence.cli.api_cmd import refuse_without_keys
    from convergence.store.db import make_engine, redacted_url, schema_is_current
    from convergence.store.migrate import MIGRATION_ERRORS
    from convergence.workers.app import make_worker_app

    settings = load_settings()
    if not settings.broker_url:
        raise click.UsageError("CONVERGENCE_BROKER_URL is not set: a worker needs a broker "
                               "(without one, commands run steps in-process)")
    refuse_without_keys(settings)
    db = make_engine(settings.database_url)
    try:
        current = schema_is_current(db)
    except MIGRATION_ERRORS as exc:
        raise click.ClickException(f"{redacted_url(settings.database_url)}: {exc}") from exc
    finally:
        db.dispose()  # before Celery forks its pool: children open connections of their own
    if not current:
        raise click.ClickException(f"{redacted_url(settings.database_url)} is not at this "
                                   "version's schema: run `convergence db upgrade`")
    app = make_worker_app(settings)  # the settings built once here, for the whole node
    argv = ["worker", f"--loglevel={loglevel}", f"--pool={pool}",
            f"--hostname={hostname or f'convergence-{os.getpid()}@{socket.gethostname()}'}",
            "--without-gossip", "--without-mingle"]
    if concurrency is not None:
        argv.append(f"--concurrency={concurrency}")
    app.worker_main(argv)
