"""The Celery app a worker runs: the dispatcher's app plus the tasks and the worker's hooks.

Callers: ``convergence worker`` (``convergence.cli.worker_cmd``) and ``workers/celery_worker.py``
(for ``celery -A workers.celery_worker worker``), each with the settings it built once from the
environment. Processes that only send work (the API, the CLI) use
``convergence.dispatch.celery_dispatch.make_celery`` instead: they need neither the tasks nor
the hooks.

:func:`make_worker_app` builds one :class:`~convergence.workers.process.WorkerProcess` for the
app. The tasks are closures over it, registered on this app only (not shared with other apps
of the process); Celery's worker signals are connected to its bound methods (Celery's signal
registry is the only place that holds it: no module state here). Its handlers act only once
the worker of this app has started, so that another app built in the same process (tests) is
left alone.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery, signals

from convergence.dispatch.celery_dispatch import TASK_NAME, make_celery
from convergence.services import webhooks
from convergence.settings import Settings
from convergence.workers.process import WorkerProcess


def make_worker_app(settings: Settings) -> Celery:
    """The Celery app of a worker, configured from ``settings``, with the
    ``convergence.execute`` and ``convergence.webhooks.deliver`` tasks and the hooks of the
    worker's life."""
    app = make_celery(settings)
    life = WorkerProcess(settings, app)

    def execute(work_json: dict[str, Any], attempt: int = 0) -> None:
        life.execute(work_json, attempt)

    def deliver(backoff_seconds: float | None = None, max_attempts: int | None = None,
                allowed_networks: list[str] | None = None) -> int:
        return life.deliver_webhooks(backoff_seconds, max_attempts, allowed_networks)

    app.task(name=TASK_NAME, shared=False)(execute)
    app.task(name=webhooks.TASK_NAME, shared=False)(deliver)  # notification webhooks
    # Workers log JSON lines through ``convergence.logs``, Celery's own lines included.
    signals.setup_logging.connect(_setup_logging, weak=False, dispatch_uid=__name__)
    # Heartbeats: a pool process beats from its start; SIGTERM (warm shutdown) marks it stopped.
    signals.worker_init.connect(life.started, weak=False)
    signals.worker_process_init.connect(life.process_started, weak=False)
    signals.worker_process_shutdown.connect(life.process_shutdown, weak=False)
    signals.worker_ready.connect(life.ready, weak=False)
    signals.worker_shutting_down.connect(life.shutting_down, weak=False)
    signals.worker_shutdown.connect(life.stopped, weak=False)
    return app


def _setup_logging(loglevel: int | str | None = None, **_: Any) -> None:
    from convergence.logs import configure_logging

    configure_logging("json", loglevel or logging.INFO)
