"""Worker heartbeats: which processes run steps, and whether they still beat.

Callers: composed into ``transactions.Tx``; reached through the ports' ``Workers`` protocol by
the heartbeats of worker and API processes (``convergence.workers``) and the services' view of
them (``convergence services``, ``GET /services``).
"""

from __future__ import annotations

from sqlalchemy import insert, select, update

from convergence.ports.views import WorkerInfo, WorkerView
from convergence.store.rows import T_WORKER, TxPart, worker_view


class WorkerQueries(TxPart):
    def heartbeat(self, worker: WorkerInfo) -> None:
        """Upsert the worker's row with a heartbeat at this transaction's time (a worker
        beating again after a stop is running again)."""
        done = self.conn.execute(update(T_WORKER).where(T_WORKER.c.id == worker.id).values(
            hostname=worker.hostname, pid=worker.pid, kind=worker.kind,
            heartbeat_at=self.now, stopped_at=None))
        if done.rowcount == 0:
            self.conn.execute(insert(T_WORKER).values(
                id=worker.id, hostname=worker.hostname, pid=worker.pid, kind=worker.kind,
                started_at=worker.started_at, heartbeat_at=self.now, stopped_at=None))

    def workers(self, since: float | None = None) -> list[WorkerView]:
        """The workers that beat at or after ``since`` (all when None), oldest first."""
        query = select(T_WORKER).order_by(T_WORKER.c.started_at, T_WORKER.c.id)
        if since is not None:
            query = query.where(T_WORKER.c.heartbeat_at >= since)
        return [worker_view(r) for r in self.conn.execute(query)]

    def stop_worker(self, worker_id: str) -> bool:
        """Mark a worker stopped (graceful shutdown); False when it has no row."""
        done = self.conn.execute(update(T_WORKER).where(T_WORKER.c.id == worker_id)
                                 .values(stopped_at=self.now))
        return bool(done.rowcount)
