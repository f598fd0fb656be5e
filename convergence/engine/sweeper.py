"""The sweeper: whatever a crash, a lost message or a missed deadline left behind, found in the
database and driven on.

Every worker process runs :class:`SweepLoop` (and the embedded engine sweeps from its
dispatcher); a turn in the ``sweeps`` table makes sure that one of them sweeps at a time, once
a period. A sweep, each part in a short transaction of its own:

1. takes over expired leases (a worker died, or froze) and poll watches nobody kept (the poll's
   message was lost): each is let go with its fencing token bumped, so the late writer is
   refused, and an event says whose lease was taken over; the current traversal's node for
   the record is offered again;
2. offers again the ready nodes nobody has touched for a lease's length and nobody holds (their
   message was lost: a Redis restart, a worker killed with messages in hand), and wakes the
   parked nodes whose nested stack has ended (the wake-up's message was lost);
3. plans again the traversals still waiting to be planned (the planner died, or the API process
   died between committing the request and enqueueing its plan);
4. finishes the running traversals with nothing left to do (the finish message was lost);
5. fails the traversals past their deadline (finishing them rolls back, or not, per stack);
6. deletes the plans of traversals that ended long ago;
7. removes orphans, what steps made after their lease was taken over
   (:mod:`convergence.engine.orphans`), each under its record's lease;
8. deletes the trusts deleted stacks still name (:mod:`convergence.engine.trusts`).

What it returns is work for the dispatcher; every item is idempotent, so a sweep that offers
something that was not lost after all costs a duplicate, never a second action.

Callers: ``convergence.runtime`` (builds the :class:`Sweeper` the in-process dispatcher runs
periodically) and the worker process (``convergence.workers.process``: :class:`SweepLoop`,
:func:`let_go` at a graceful stop).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from convergence.background import Loop
from convergence.engine import orphans
from convergence.engine.engine import Engine
from convergence.engine.recording import abandon_operations
from convergence.engine.trusts import release_spent_trusts
from convergence.ports.store import Tx
from convergence.ports.views import NewEvent, TakenOver
from convergence.ports.work import FINISH, PLAN, Work, batches

log = logging.getLogger(__name__)

NAME = "sweeper"
LIMIT = 5000  # rows of one kind handled per sweep; the rest wait for the next
PLAN_RETENTION_SECONDS = 3600.0  # a traversal's plan is kept this long after it ended
PURGE_TRAVERSALS = 100
ORPHANS_LIMIT = 100  # orphans removed per sweep (one cloud call each)
TRUSTS_LIMIT = 20  # trusts of deleted stacks deleted per sweep (one cloud call each)


@dataclass(slots=True)
class SweepReport:
    ran: bool = False  # False: another process had the turn, or the period had not passed
    work: list[Work] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    # The earliest a lease (or poll watch) on an unfinished traversal's resource runs out:
    # when a sweep may find work that is held now.
    recheck_at: float | None = None


class Sweeper:
    """Sweeps the engine's database, as the engine's worker, once per ``period``."""

    def __init__(self, engine: Engine, period: float) -> None:
        self.engine = engine
        self.period = period

    @property
    def holder(self) -> str:
        return self.engine.worker_id

    @property
    def hold(self) -> float:
        """How long a turn is held at most: a sweeper killed mid-sweep keeps the others from
        sweeping this long. Short, since sweeping twice at once is safe (every change is
        conditional, under row locks), only wasteful."""
        return max(3 * self.period, 10.0)

    def periodic(self, force: bool) -> tuple[list[Work], float | None]:
        """A sweep, as the in-process dispatcher's periodic job."""
        report = self.sweep(force=force)
        return report.work, report.recheck_at

    def sweep(self, *, force: bool = False) -> SweepReport:
        """Sweep if it is this process's turn (``force``: whatever the period says, as long as
        nobody else is sweeping)."""
        store = self.engine.store
        lease = self.engine.lease_seconds
        with store.begin() as tx:
            if not tx.take_turn(NAME, self.holder, 0.0 if force else self.period * 0.8,
                                hold=self.hold):
                return SweepReport()
        report = SweepReport(ran=True)
        try:
            self._sweep(report)
            if force:  # someone waits for work: when may there be some?
                with store.begin() as tx:
                    due = tx.next_sweep_due(self.period, lease)
                report.recheck_at = None if due is None else due + 0.001
        finally:
            with store.begin() as tx:
                tx.end_turn(NAME, self.holder)
        if report.counts:
            log.info("sweep: %s", ", ".join(f"{k} {v}" for k, v in sorted(report.counts.items())))
        return report

    def _sweep(self, report: SweepReport) -> None:
        store, size = self.engine.store, self.engine.batch_size
        lease = self.engine.lease_seconds
        with store.begin() as tx:
            taken = tx.take_over_expired(LIMIT)
            if taken:
                _record_takeovers(tx, taken)
                report.counts["leases taken over"] += sum(t.owner is not None for t in taken)
                report.counts["polls taken over"] += sum(t.owner is None for t in taken)
                for traversal_id, seqs in tx.ready_nodes_of([t.record_id for t in taken]).items():
                    report.work.extend(batches(traversal_id, seqs, size))
        with store.begin() as tx:
            for traversal_id, seqs in tx.idle_ready_nodes(lease, LIMIT).items():
                report.counts["nodes offered again"] += len(seqs)
                report.work.extend(batches(traversal_id, seqs, size))
        with store.begin() as tx:
            for traversal_id, seqs in tx.parked_nodes_done_waiting(LIMIT).items():
                report.counts["parked nodes woken"] += len(seqs)
                report.work.extend(batches(traversal_id, seqs, size))
            for traversal_id, seqs in tx.parked_nodes_due(LIMIT).items():
                report.counts["parked nodes due"] += len(seqs)
                report.work.extend(batches(traversal_id, seqs, size))
        with store.begin() as tx:
            plans = tx.stalled_plans(self.period)
            finishes = tx.unconcluded_traversals()
            late = tx.overdue_traversals()
        report.work.extend(Work(PLAN, t) for t in plans)
        report.work.extend(Work(FINISH, t) for t in finishes)
        report.counts["plans"] += len(plans)
        report.counts["finishes"] += len(finishes)
        for traversal_id in late:
            work = self.engine.time_out(traversal_id)
            report.counts["timed out"] += bool(work)
            report.work.extend(work)
        with store.begin() as tx:
            purged = tx.purge_nodes(tx.now - PLAN_RETENTION_SECONDS, PURGE_TRAVERSALS)
        if purged:
            report.counts["plan rows purged"] += purged
        report.counts.update(orphans.reap(self.engine, ORPHANS_LIMIT))
        report.counts["trusts deleted"] += release_spent_trusts(self.engine.ctx, TRUSTS_LIMIT)
        for key in [k for k, v in report.counts.items() if not v]:
            del report.counts[key]


STOPPING, EXITED = "stopping", "exited"  # why a worker let go of leases (see let_go)


def _record_takeovers(tx: Tx, taken: Sequence[TakenOver], let_go: str = "") -> None:
    """An event on each resource taken over, in its stack's current generation; ``let_go``:
    let go of by its worker's node, as it stops (STOPPING) or as one of its pool processes
    exited (EXITED)."""
    stacks = tx.stacks_by_id({t.stack_id for t in taken})
    for t in taken:
        stack = stacks.get(t.stack_id)
        if stack is None:
            continue
        worker = None if t.owner is None else t.owner.rsplit("/", 1)[0]
        if let_go == STOPPING:
            reason = f"{worker} is stopping: handed over"
        elif let_go == EXITED:
            reason = f"{worker} exited: taken over"
        elif worker is not None:
            reason = f"lease of {worker} expired: taken over"
        else:
            reason = f"{t.action} not polled in time (its message was lost): taken over"
        tx.add_events(stack.id, stack.traversal_id, stack.generation, [
            NewEvent(t.name, t.physical_id, t.type, t.action, t.status, reason)])
    # An operation under way in a stack with no traversal running (stopped while a step
    # held it): nobody will go on with it, so it is abandoned rather than left IN_PROGRESS.
    for stack in stacks.values():
        if stack.status != "IN_PROGRESS":
            ids = [t.record_id for t in taken if t.stack_id == stack.id]
            tx.add_events(stack.id, stack.traversal_id, stack.generation,
                          abandon_operations(tx, stack, ids))


def let_go(engine: Engine, owner_prefix: str, why: str = STOPPING) -> list[Work]:
    """Release every lease whose owner starts with ``owner_prefix`` (a worker that stops, for
    itself; a node, for a pool process of its own that ``why`` = EXITED), with an event on
    each resource, and return the work that offers those resources to the others at once."""
    with engine.store.begin() as tx:
        released = tx.release_owned(owner_prefix)
        _record_takeovers(tx, released, why)
        ready = tx.ready_nodes_of([t.record_id for t in released])
    if released:
        log.info("let go of %d leases of %s", len(released), owner_prefix)
    return [w for traversal_id, seqs in ready.items()
            for w in batches(traversal_id, seqs, engine.batch_size)]


class SweepLoop(Loop):
    """Sweeps every ``period`` seconds on a daemon thread, sending what it finds through
    ``dispatch``; a sweep that fails (the database or the broker is away) is tried again at
    the next period."""

    def __init__(self, sweeper: Sweeper, dispatch: Callable[[Sequence[Work]], None]) -> None:
        super().__init__("sweeper", on_error_wait=sweeper.period)
        self._sweeper = sweeper
        self._dispatch = dispatch

    def turn(self, stop: threading.Event) -> float:
        report = self._sweeper.sweep()
        if report.work:
            self._dispatch(report.work)
        return self._sweeper.period
