"""Worker heartbeats: each process that runs steps upserts its ``workers`` row periodically.

Callers: the Celery worker's life (``convergence.workers.process``) starts one per worker
process; the API (``convergence.api.app``) starts one while it drives the in-process
dispatcher, since it runs steps too. :func:`list_services` (the processes heard from, in
Heat's ``GET /services`` shape) is read by ``convergence.api.services_api`` and
``convergence services``.

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
from datetime import UTC, datetime
from typing import Any

from convergence.ports.store import Store
from convergence.ports.views import WorkerInfo, WorkerView

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


RETENTION_SECONDS = 86400.0  # workers silent for longer than this are no longer listed


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def service_item(w: WorkerView, now: float, interval: float) -> dict[str, Any]:
    """A worker as Heat's ``GET /services`` lists an engine (plus ``kind``, ``pid`` and
    ``heartbeat_age``, in seconds)."""
    return {
        "id": w.id, "engine_id": w.id, "host": w.hostname, "hostname": w.hostname,
        "binary": f"convergence-{w.kind}", "topic": "engine", "report_interval": interval,
        "status": "up" if w.is_up(now, interval) else "down",
        "created_at": _iso(w.started_at), "updated_at": _iso(w.heartbeat_at),
        "deleted_at": _iso(w.stopped_at),
        "kind": w.kind, "pid": w.pid, "heartbeat_age": round(max(0.0, now - w.heartbeat_at), 1),
    }


def list_services(store: Store, interval: float) -> list[dict[str, Any]]:
    """The workers heard from within ``RETENTION_SECONDS``, as service items."""
    with store.read() as tx:
        now = tx.now
        workers = tx.workers(since=now - RETENTION_SECONDS)
    return [service_item(w, now, interval) for w in workers]
