"""The small pool of threads the simulated cloud's software-configuration agent polls and
applies deployments on.

Callers: ``convergence_simcloud.agent.Agent`` makes one :class:`Workers`, submits a poll of
one server at a time to it and shuts it down when the agent stops.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable


class Workers:
    """A small pool of daemon threads, grown on demand up to ``size``: the agent joins them
    when it stops (a pool of the standard library would hold the interpreter's exit until a
    running script ended)."""

    def __init__(self, size: int, name: str) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._queued = 0
        self._size = size
        self._name = name

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            self._queued += 1
            if self._queued > self._idle and len(self._threads) < self._size:
                thread = threading.Thread(target=self._work, daemon=True,
                                          name=f"{self._name}-{len(self._threads)}")
                self._threads.append(thread)
                thread.start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            job = self._jobs.get()
            with self._lock:
                self._idle -= 1
                if job is not None:
                    self._queued -= 1
            if job is None:
                return
            job()

    def shutdown(self) -> None:
        """Let the jobs under way end, then end the threads."""
        with self._lock:
            threads = list(self._threads)
            self._threads.clear()
        for _ in threads:
            self._jobs.put(None)
        for thread in threads:
            thread.join()
