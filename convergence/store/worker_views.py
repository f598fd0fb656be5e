"""What the store answers about worker processes: plain frozen values, no ORM objects.

Callers: ``Tx`` (``store/repository.py``) builds them; ``convergence.heartbeat`` writes them,
the services API (``convergence/api/services_api.py``) and ``convergence services`` read them.
"""

from __future__ import annotations

from dataclasses import dataclass

WORKER = "worker"  # a Celery worker process
API = "api"  # an API process running steps on its in-process dispatcher


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """Who is beating: what a heartbeat writes (the time is the transaction's)."""

    id: str
    hostname: str
    pid: int
    kind: str  # WORKER | API
    started_at: float


@dataclass(frozen=True, slots=True)
class WorkerView:
    id: str
    hostname: str
    pid: int
    kind: str
    started_at: float
    heartbeat_at: float
    stopped_at: float | None

    def is_up(self, now: float, heartbeat_seconds: float) -> bool:
        """Beating: not stopped, and the last heartbeat younger than three intervals."""
        return self.stopped_at is None and now - self.heartbeat_at < 3 * heartbeat_seconds
