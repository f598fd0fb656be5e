"""Operations: whether the database answers, the figures the metrics read from the store, and
the processes running steps (Heat's service list), each one read.

Callers: the API's operations endpoints (``convergence.api.ops``: ``/readyz`` and
``/metrics``) and its service list (``convergence.api.services_api``), the CLI's embedded
``convergence services`` (``convergence.cli.local``), the tests and the benchmarks. The
heartbeats the service list reads are written by ``convergence.workers.heartbeat``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from convergence.heat_fields import iso
from convergence.ports.store import Store
from convergence.ports.views import WorkerView

if TYPE_CHECKING:
    from convergence.services.context import Runtime

RETENTION_SECONDS = 86400.0  # workers silent for longer than this are no longer listed


def ping_database(rt: Runtime) -> None:
    """Raises when the database does not answer a trivial query."""
    with rt.store.read() as tx:
        tx.ping()


def store_stats(rt: Runtime) -> tuple[dict[str, int], dict[tuple[str, str], int], int]:
    """Live stacks by ``ACTION_STATUS``, traversals by (action, state), and the orphans
    waiting to be removed: three cheap queries."""
    with rt.store.read() as tx:
        return tx.stack_counts(), tx.traversal_counts(), tx.count_orphans()


# The service list --------------------------------------------------------------------------------

def service_item(w: WorkerView, now: float, interval: float) -> dict[str, Any]:
    """A worker as Heat's ``GET /services`` lists an engine (plus ``kind``, ``pid`` and
    ``heartbeat_age``, in seconds)."""
    return {
        "id": w.id, "engine_id": w.id, "host": w.hostname, "hostname": w.hostname,
        "binary": f"convergence-{w.kind}", "topic": "engine", "report_interval": interval,
        "status": "up" if w.is_up(now, interval) else "down",
        "created_at": iso(w.started_at), "updated_at": iso(w.heartbeat_at),
        "deleted_at": iso(w.stopped_at),
        "kind": w.kind, "pid": w.pid, "heartbeat_age": round(max(0.0, now - w.heartbeat_at), 1),
    }


def list_services(store: Store, interval: float) -> list[dict[str, Any]]:
    """The workers heard from within ``RETENTION_SECONDS``, as service items (``interval``:
    the heartbeat interval, ``Settings.heartbeat_seconds``)."""
    with store.read() as tx:
        now = tx.now
        workers = tx.workers(since=now - RETENTION_SECONDS)
    return [service_item(w, now, interval) for w in workers]
