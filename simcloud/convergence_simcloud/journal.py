"""The journal of the requests a simulated cloud answered: what tests and benchmarks count.

Callers: ``convergence_simcloud.state.SimCloud`` holds one :class:`Journal` (in memory only, not
part of the saved state); ``convergence_simcloud.control``'s middleware adds an :class:`Entry`
per answered request and its ``/_sim/journal`` route reads them by sequence number, so a test
can note ``last`` before an operation and count the cloud calls the operation made after it.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass

JOURNAL_SIZE = 200_000  # entries kept; the oldest go first


@dataclass(frozen=True)
class Entry:
    """One request the cloud answered."""

    seq: int
    at: float  # the cloud's clock when the request came
    method: str
    path: str
    query: str
    status: int
    service: str | None
    project_id: str | None
    seconds: float = 0.0  # wall time spent answering (not the cloud's clock): its latency


class Journal:
    """The last :data:`JOURNAL_SIZE` requests, each with a growing sequence number."""

    def __init__(self, size: int = JOURNAL_SIZE) -> None:
        self._entries: collections.deque[Entry] = collections.deque(maxlen=size)
        self._lock = threading.Lock()
        self._seq = 0

    def add(self, at: float, method: str, path: str, query: str, status: int,
            service: str | None, project_id: str | None, seconds: float = 0.0) -> None:
        with self._lock:
            self._seq += 1
            self._entries.append(Entry(self._seq, at, method, path, query, status, service,
                                       project_id, seconds))

    def entries(self, since: int = 0) -> list[Entry]:
        with self._lock:
            return [e for e in self._entries if e.seq > since]

    @property
    def last(self) -> int:
        return self._seq

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
