"""The Celery dispatcher: work items as Celery tasks on Redis, sent here, run by the workers.

Callers: :func:`convergence.runtime.open_runtime` builds a :class:`CeleryDispatcher` when a
broker is configured (API and CLI processes enqueue through it; the API also reads its app,
to send webhook deliveries, and its :data:`QUEUES`, for ``/metrics``); the worker's life
(``convergence.workers``) builds its app on :func:`make_celery`, registers the task
:data:`TASK_NAME` whose body is :func:`run_message`, and sends follow-up work through a
:class:`CeleryDispatcher` of its own. This module only sends and drives work: it knows nothing
of the worker process (its runtime, signals, pool), and Celery is imported here and in
``convergence.workers`` only.

A message carries one :class:`~convergence.ports.work.Work` as its JSON dict (ids only); the
task ``convergence.execute`` runs ``Engine.execute`` and sends the follow-up work. Delivery is
at least once (``acks_late``, ``reject_on_worker_lost``; the visibility timeout is far longer
than any step or countdown) and every step is idempotent, so a duplicate costs a few queries.

To save broker hops a task keeps going inline with ONE follow-up item that is due now, for a
short time budget, and sends every other follow-up at once so other workers take them in
parallel. Planning has a queue of its own, so that new traversals are not stuck behind the
steps of a large one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from celery import Celery
from kombu.entity import Exchange, Queue

from convergence.ports.work import PLAN, Work
from convergence.settings import Settings

log = logging.getLogger(__name__)

TASK_NAME = "convergence.execute"
PLAN_QUEUE = "convergence.plan"
STEP_QUEUE = "convergence.steps"
QUEUES = (PLAN_QUEUE, STEP_QUEUE)
# Longer than any step and any countdown (polls wait at most ``poll_seconds``): a message is
# redelivered only when its worker is gone. A worker killed outright has its unacknowledged
# messages back after this long; the sweeper re-drives traversals sooner from the database.
VISIBILITY_TIMEOUT = 3600
INLINE_BUDGET_SECONDS = 0.5
MAX_ATTEMPTS = 5
RETRY_DELAY_SECONDS = 0.5

Execute = Callable[[Work], list[Work]]
Send = Callable[[Sequence[Work]], None]


def make_celery(settings: Settings) -> Celery:
    """A Celery app configured from ``settings``: the broker, the queues and the delivery
    guarantees. Enough to send work and to ask the workers (``control.ping``); a worker's app
    adds the tasks and its hooks (``convergence.workers.app.make_worker_app``)."""
    if not settings.broker_url:
        raise ValueError("no broker configured: set CONVERGENCE_BROKER_URL (a redis:// URL)")
    app = Celery("convergence", broker=settings.broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT},
        broker_connection_retry_on_startup=True,
        task_default_queue=STEP_QUEUE,
        # Each queue its own exchange and key (a shared binding would deliver to both). A
        # worker consumes both queues unless told otherwise.
        task_queues=[Queue(name, Exchange(name), routing_key=name)  # type: ignore[no-untyped-call]
                     for name in QUEUES],
        worker_send_task_events=False,
        worker_hijack_root_logger=False,
    )
    return app


class CeleryDispatcher:
    """The ``Dispatcher`` that sends work to Celery workers (see the module docstring).

    ``sent`` counts the work items this dispatcher sent (a worker's figures for the
    benchmarks, ``convergence.workers.stats``)."""

    def __init__(self, settings: Settings, app: Celery | None = None) -> None:
        self.app = app if app is not None else make_celery(settings)
        self.sent = 0

    def dispatch(self, work: Sequence[Work]) -> None:
        self.send(work)

    def send(self, work: Sequence[Work], attempt: int = 0, delay: float = 0.0) -> None:
        """Enqueue work items (after the transaction that made them ready has committed);
        ``attempt``: how many times they failed already, ``delay``: not before so long."""
        self.sent += len(work)
        for w in work:
            countdown = max(w.countdown, delay)
            self.app.send_task(TASK_NAME, args=[w.to_json()],
                               kwargs={"attempt": attempt} if attempt else None,
                               countdown=countdown if countdown > 0 else None,
                               queue=PLAN_QUEUE if w.kind == PLAN else STEP_QUEUE)

    def close(self) -> None:
        """Release the broker connections this dispatcher opened."""
        self.app.close()


def run_message(dispatcher: CeleryDispatcher, execute: Execute, work_json: dict[str, Any],
                attempt: int = 0, stopping: Callable[[], bool] = lambda: False) -> None:
    """The body of the :data:`TASK_NAME` task: :func:`drive` the message's work with
    ``execute``, sending follow-ups and retries through ``dispatcher``. An item that failed
    :data:`MAX_ATTEMPTS` times is given up on (the sweeper re-drives it from the database)."""

    def retry(work: Work, attempt: int) -> None:
        if attempt >= MAX_ATTEMPTS:
            log.error("giving up on %s after %d attempts; the sweeper re-drives it", work,
                      attempt)
            return
        dispatcher.send([work], attempt, RETRY_DELAY_SECONDS * attempt)

    drive(execute, dispatcher.send, retry, Work.from_json(work_json), attempt,
          stopping=stopping)


def drive(execute: Execute, send_now: Send, retry: Callable[[Work, int], None], first: Work,
          attempt: int = 0, budget: float = INLINE_BUDGET_SECONDS,
          monotonic: Callable[[], float] = time.monotonic,
          stopping: Callable[[], bool] = lambda: False) -> None:
    """Run ``first``, then follow-up work due now inline while ``budget`` (from the end of
    ``first``) lasts and the worker is not ``stopping``.

    Only one follow-up item continues here; the others are sent at once, so that a wave of
    ready nodes spreads over the workers. An item that raises is handed to ``retry`` with its
    attempt number; what it would have released stays in the database, for its retry.
    """
    deadline: float | None = None
    work: Work | None = first
    while work is not None:
        try:
            follow = execute(work)
        except Exception:
            log.exception("work %s failed (attempt %d)", work, attempt + 1)
            retry(work, attempt + 1)
            return
        attempt = 0
        work = None
        if deadline is None:
            # The budget counts from the end of the first item: a long plan still goes on
            # with its first batch here, rather than queueing it behind other work.
            deadline = monotonic() + budget
        if monotonic() < deadline and not stopping():
            now = [w for w in follow if w.countdown <= 0]
            if now:
                work = now[0]
                follow = [w for w in follow if w is not work]
        send_now(follow)
