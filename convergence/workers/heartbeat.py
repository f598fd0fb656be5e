"""Worker heartbeats: each process that runs steps upserts its ``workers`` row periodically.

Callers: the Celery worker's life (``convergence.workers.process``) starts one per worker
process; the API (``convergence.api.app``) starts one while it drives the in-process
dispatcher, since it runs steps too. The rows are read back as Heat's service list by the use
case ``convergence.services.operations.list_services`` (``GET /services``, ``convergence
services``).

A daemon thread beats every ``Settings.heartbeat_seconds``; :meth:`Heartbeat.stop` (the
graceful-shutdown path: SIGTERM, the app's lifespan ending) marks the row stopped. A worker
is "up" while its last heartbeat is younger than three intervals
(:meth:`~convergence.ports.views.WorkerView.is_up`); a killed one simply goes silent.
"""

from __future__ import annotations

import logging
import os
import socket
import threading

from convergence.ports.store import Store
from convergence.ports.views import WorkerInfo

log = logging.getLogger(__name__)


def worker_info(worker_id: str, kind: str, now: float) -> WorkerInfo:
    """This process, as ``worker_id`` of ``kind``, starting at ``now``."""
    return WorkerInfo(id=worker_id, hostname=socket.gethostname(), pid=os.getpid(), kind=kind,
                      started_at=now)


class Heartbeat:
    """Beats for one worker on a daemon thread until stopped."""

    def __init__(self, store: Store, info: WorkerInfo, interval: float) -> None:
        self.store = store
        self.info = info
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> bool:
        """Upsert the row now; False (logged) when the database did not take it."""
        try:
            with self.store.begin() as tx:
                tx.heartbeat(self.info)
            return True
        except Exception:
            log.exception("heartbeat of %s failed", self.info.id)
            return False

    def start(self) -> None:
        """Beat once at once, then every ``interval`` seconds on a daemon thread."""
        if self._thread is not None:
            return
        self._stop.clear()
        self.beat()
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.beat()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop beating and mark the worker stopped (a graceful shutdown)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        try:
            with self.store.begin() as tx:
                tx.stop_worker(self.info.id)
        except Exception:
            log.exception("could not mark %s stopped", self.info.id)
