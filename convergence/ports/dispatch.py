"""The dispatch port: what every dispatcher offers, accepting work items to run.

A dispatcher takes work items (:mod:`convergence.ports.work`) and runs each once its countdown
has passed.

Implemented by ``convergence.dispatch.inprocess.InProcessDispatcher`` (threads, no broker) and
``convergence.dispatch.celery_dispatch.CeleryDispatcher`` (Celery on Redis); held by
``convergence.runtime.Runtime`` (``Runtime.dispatcher``) and used to send the work a committed
transaction made ready: by the services (a new traversal's plan, a resumed stack), the
sweeper's loop (``convergence.engine.sweeper.SweepLoop``) and a stopping worker letting go of
its leases (``convergence.workers.process``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from convergence.ports.work import Work


class Dispatcher(Protocol):
    def dispatch(self, work: Sequence[Work]) -> None:
        """Queue work; called only after the transaction that made it ready has committed."""
        ...


class LocalDispatcher(Dispatcher, Protocol):
    """A dispatcher whose queue this process runs (embedded mode): a caller waiting for a
    request's end drives it here instead of waiting for a worker."""

    def pending(self) -> int:
        """How many work items are queued."""
        ...

    def run(self, until: Callable[[], bool] | None = None) -> bool:
        """Run queued work until ``until()`` holds or nothing is left; True if it held."""
        ...
