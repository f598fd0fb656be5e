"""The dispatch port: what every dispatcher offers, accept work items to be run after their
countdown.

Implemented by ``convergence.dispatch.inprocess.InProcessDispatcher`` (threads, no broker) and
``convergence.dispatch.celery_dispatch.CeleryDispatcher`` (Celery on Redis); held by
``convergence.runtime.Runtime`` and used by the services and the sweeper's loops to send the
work a committed transaction made ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from convergence.ports.work import Work


class Dispatcher(Protocol):
    def dispatch(self, work: Sequence[Work]) -> None:
        """Queue work; called only after the transaction that made it ready has committed."""
        ...
