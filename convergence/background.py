"""A background loop: a daemon thread that takes turns until stopped, and can be woken.

Subclassed by the API's in-process dispatcher driver (``convergence.api.app``), the webhook
deliverer (``convergence.services.webhooks``), the sweeper's loop
(``convergence.engine.sweeper``) and a worker node's pool watch (``convergence.workers.pool``):
each defines a ``turn`` that does its work and says how long to wait before the next one;
``wake`` cuts the wait short (new work was dispatched, events were committed). A turn that raises is
logged and the loop goes on, since the database or a receiver may come back.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class Loop:
    def __init__(self, name: str, on_error_wait: float = 1.0) -> None:
        self._name = name
        self._on_error_wait = on_error_wait
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def turn(self, stop: threading.Event) -> float:
        """Do one round of work; return how long to wait before the next."""
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            # Cleared before the turn, so that a wake during the turn is not lost.
            self._wake.clear()
            try:
                wait = self.turn(self._stop)
            except Exception:
                log.exception("%s: a turn failed", self._name)
                wait = self._on_error_wait
            if wait > 0:
                self._wake.wait(wait)
