"""The store: transactions on one database, each offering every aggregate's queries.

:class:`Store` (built by ``convergence.runtime``) implements the ports' ``Store`` protocol
(:mod:`convergence.ports.store`): ``with store.begin() as tx`` opens a transaction, ``read``
one that only reads, ``transact`` runs a piece of work again when the database picked it as a
deadlock's victim. :class:`Tx` is the ports' ``Tx``: one class composed of each aggregate's
part (stacks, traversals, nodes, records and leases, resource pages, events, webhooks,
workers, orphans, sweeps, holds, software configuration), which the engine, the sweeper and
the services compose inside one transaction.

Queries are Core statements on the model tables, batched where a step handles many nodes at
once: claiming leases, loading records, decrementing successors and writing events are one
statement per batch, not per node, which is what keeps a traversal linear and cheap per
resource. Writes to a resource record are fenced: they carry the fencing token the writer got
when it claimed the record, and are refused (not applied) when a later claim bumped the token.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import DBAPIError

from convergence.store import dialect, errors
from convergence.store.db import READ_ONLY
from convergence.store.events import EventQueries
from convergence.store.holds import HoldQueries
from convergence.store.nodes import NodeQueries
from convergence.store.orphans import OrphanQueries
from convergence.store.records import RecordQueries
from convergence.store.resource_pages import ResourcePageQueries
from convergence.store.sealing import Sealer, random_sealer
from convergence.store.software import SoftwareQueries
from convergence.store.stacks import StackQueries
from convergence.store.sweeps import SweepQueries
from convergence.store.traversals import TraversalQueries
from convergence.store.webhooks import WebhookQueries
from convergence.store.workers import WorkerQueries

R = TypeVar("R")
log = logging.getLogger(__name__)
# The tables a plan writes in bulk (its records and nodes).
_ANALYSED = ("resources", "nodes")
# A table whose figures count fewer rows than ten times what was just written to it has them
# taken again: autovacuum's own rule (``autovacuum_analyze_scale_factor``, 0.1 by default).
_STALE_SHARE = 0.1


class Tx(StackQueries, TraversalQueries, NodeQueries, RecordQueries, ResourcePageQueries,
         EventQueries, WebhookQueries, WorkerQueries, OrphanQueries, SweepQueries, HoldQueries,
         SoftwareQueries):
    """One transaction's worth of primitives. Obtained from ``Store.begin``."""

    def __init__(self, conn: Connection, now: float, sealer: Sealer | None = None) -> None:
        self.conn = conn
        self.now = now
        self.sealer = sealer or random_sealer()  # the store's (a key of its own: tests)

    def ping(self) -> None:
        """A trivial query: raises when the database does not answer."""
        self.conn.execute(select(1))


class Store:
    """Opens transactions on one database. ``sealer``: what the secrets it keeps are
    encrypted with (``convergence.store.sealing``; the runtime hands the process's; without
    one, a key of this store's own)."""

    def __init__(self, engine: Engine, clock: Callable[[], float] = time.time,
                 sealer: Sealer | None = None) -> None:
        self.engine = engine
        self.clock = clock
        self.sealer = sealer or random_sealer()

    @contextmanager
    def begin(self) -> Iterator[Tx]:
        with self.engine.begin() as conn:
            yield Tx(conn, self.clock(), self.sealer)

    @contextmanager
    def read(self) -> Iterator[Tx]:
        """A transaction for reading only. On SQLite it takes no write lock (a deferred
        BEGIN reads a snapshot of the WAL), so reads do not queue behind traversals; it must
        not write: a write there could not wait for the lock as ``begin``'s do."""
        with self.engine.connect() as conn:
            conn = conn.execution_options(**{READ_ONLY: True})
            with conn.begin():
                yield Tx(conn, self.clock(), self.sealer)

    def transact(self, work: Callable[[Tx], R], attempts: int = 3) -> R:
        """Run ``work`` in a transaction, again (from the start, in a new one) when the
        database chose it as a deadlock's victim or refused to serialize it: what a request
        does must not fail for a lock order it did not pick."""
        for attempt in range(1, attempts + 1):
            try:
                with self.begin() as tx:
                    return work(tx)
            except DBAPIError as exc:
                if attempt == attempts or not dialect.transient(exc):
                    raise
        raise AssertionError("unreachable")

    def refresh_statistics(self, written: int) -> None:
        """PostgreSQL: ANALYZE the records and nodes (a sample of the rows: about 0.6 s at a
        million) when ``written`` new rows are a tenth or more of what the planner's figures
        say a table holds, as its autovacuum would within a minute if it runs at all (never
        analysed: figures of no rows). The batches that start meanwhile would otherwise be
        planned without figures on the new rows. SQLite keeps no figures the engine's
        statements rely on: nothing."""
        if self.engine.dialect.name != "postgresql":
            return
        try:
            with self.engine.connect() as conn:
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
                tables = ", ".join(f"to_regclass('{t}')" for t in _ANALYSED)
                counted: dict[str, float] = dict(conn.exec_driver_sql(
                    f"SELECT relname, reltuples FROM pg_class WHERE oid IN ({tables})").all())
                stale = [t for t in _ANALYSED
                         if written >= _STALE_SHARE * max(counted.get(t, 0.0), 0.0)]
                if stale:
                    conn.exec_driver_sql(f"ANALYZE {', '.join(stale)}")
        except DBAPIError as exc:  # not the tables' owner, the database gone: plans go on
            log.warning("could not refresh the planner's statistics: %s",
                        type(exc.orig).__name__ if exc.orig is not None else exc)

    def unreachable(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the database could not be reached or dropped the connection
        (:func:`convergence.store.errors.unreachable`)."""
        return errors.unreachable(exc)
