"""The queries of recovery: the sweeper's turn, and what it looks for in the database.

Callers: composed into ``transactions.Tx``; reached through the ports' ``Sweeps`` protocol by
the engine's sweeper (the periodic sweep), a worker's graceful shutdown (``release_owned``,
through the engine's ``let_go``) and ``convergence admin reset`` (``release_stack_leases``,
through ``convergence.services``). Each method does one thing in the transaction it is called
in; the sweeper composes them in short transactions of its own.

Nothing here decides what a lost piece of work means: it finds rows in a state that only a
crash, a lost message or a missed deadline leaves behind, and hands back their ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, update

from convergence.ports.views import (
    COMPLETE,
    FAILED,
    NODE_STATES,
    PARKED,
    PLANNING,
    READY,
    RUNNING,
    SUPERSEDED,
    TakenOver,
)
from convergence.store import dialect
from convergence.store.rows import (
    T_NODE,
    T_RES,
    T_STACK,
    T_SWEEP,
    T_TRAV,
    TxPart,
    chunks,
    keyed,
    node_state,
)

PURGE_ROWS = 20000  # node rows of ended plans deleted in one transaction at most

_TAKEN_COLUMNS = (T_RES.c.id, T_RES.c.stack_id, T_RES.c.name, T_RES.c.type,
                  T_RES.c.physical_id, T_RES.c.action, T_RES.c.status, T_RES.c.lease_owner)


def _taken(rows: Iterable[Any]) -> list[TakenOver]:
    return [TakenOver(r.id, r.stack_id, r.name, r.type, r.physical_id, r.action, r.status,
                      r.lease_owner) for r in rows]


class SweepQueries(TxPart):
    # the turn -----------------------------------------------------------------------------
    def take_turn(self, name: str, holder: str, period: float, hold: float) -> bool:
        """Take the job ``name`` for ``holder`` if nobody holds it and its last run ended at
        least ``period`` ago; held for at most ``hold`` seconds (a holder that dies lets go by
        then)."""
        now = self.now
        free = or_(T_SWEEP.c.held_until.is_(None), T_SWEEP.c.held_until < now,
                   T_SWEEP.c.holder == holder)
        rested = or_(T_SWEEP.c.finished_at.is_(None), T_SWEEP.c.finished_at <= now - period)
        taken = self.conn.execute(update(T_SWEEP).where(T_SWEEP.c.name == name, free, rested)
                                  .values(holder=holder, held_until=now + hold, started_at=now,
                                          runs=T_SWEEP.c.runs + 1))
        if taken.rowcount == 1:
            return True
        return dialect.insert_or_ignore(self.conn, T_SWEEP, "name", dict(
            name=name, holder=holder, held_until=now + hold, started_at=now, runs=1))

    def end_turn(self, name: str, holder: str) -> None:
        self.conn.execute(update(T_SWEEP).where(T_SWEEP.c.name == name,
                                                T_SWEEP.c.holder == holder)
                          .values(holder=None, held_until=None, finished_at=self.now))

    def last_run(self, name: str) -> float | None:
        """When the job last finished (None: never)."""
        value = self.conn.execute(select(T_SWEEP.c.finished_at)
                                  .where(T_SWEEP.c.name == name)).scalar()
        return float(value) if value is not None else None

    # leases -------------------------------------------------------------------------------
    def take_over_expired(self, limit: int) -> list[TakenOver]:
        """Leases past their deadline, and poll watches nobody kept: let go of them, with the
        fencing token bumped so that a late writer holding the old one is refused. The longest
        expired first, in the order of ``ix_resources_lease``: in the order of the key, the
        planner would rather read every record (it took 40 to 80 ms at 100,000 records, at
        every sweep) than the few under a lease."""
        expired = and_(T_RES.c.lease_expires.is_not(None), T_RES.c.lease_expires < self.now)
        found = _taken(self.conn.execute(select(*_TAKEN_COLUMNS).where(expired)
                                         .order_by(T_RES.c.lease_expires, T_RES.c.id)
                                         .limit(limit)))
        if not found:
            return []
        taken: set[int] = set()
        for chunk in chunks([t.record_id for t in found]):
            # The deadline is checked again: a holder that renewed meanwhile keeps its lease.
            rows = self.conn.execute(update(T_RES).where(T_RES.c.id.in_(chunk), expired).values(
                lease_owner=None, lease_expires=None, fencing_token=T_RES.c.fencing_token + 1,
            ).returning(T_RES.c.id))
            taken.update(r.id for r in rows)
        return [t for t in found if t.record_id in taken]

    def release_owned(self, owner_prefix: str) -> list[TakenOver]:
        """Let go of every lease whose owner starts with ``owner_prefix`` (a worker stopping,
        or one known dead), bumping the tokens: whatever it still writes is refused."""
        owned = T_RES.c.lease_owner.startswith(owner_prefix, autoescape=True)
        found = _taken(self.conn.execute(select(*_TAKEN_COLUMNS).where(owned)))
        if found:
            self.conn.execute(update(T_RES).where(
                T_RES.c.id.in_([t.record_id for t in found]), owned,
            ).values(lease_owner=None, lease_expires=None,
                     fencing_token=T_RES.c.fencing_token + 1))
        return found

    def release_stack_leases(self, stack_id: str) -> int:
        """Let go of every lease and poll watch on a stack's records (``admin reset``)."""
        result = self.conn.execute(update(T_RES).where(
            T_RES.c.stack_id == stack_id, T_RES.c.lease_expires.is_not(None),
        ).values(lease_owner=None, lease_expires=None, fencing_token=T_RES.c.fencing_token + 1))
        return int(result.rowcount)

    # nodes --------------------------------------------------------------------------------
    def ready_nodes_of(self, record_ids: Sequence[int]) -> dict[str, list[int]]:
        """The ready nodes of the stacks' current traversals that work on these records."""
        out: dict[str, list[int]] = {}
        for chunk in chunks(sorted(set(record_ids))):
            rows = self.conn.execute(
                select(T_NODE.c.traversal_id, T_NODE.c.seq)
                .join(T_RES, T_RES.c.id == T_NODE.c.record_id)
                .join(T_STACK, and_(T_STACK.c.id == T_RES.c.stack_id,
                                    T_STACK.c.traversal_id == T_NODE.c.traversal_id))
                .where(T_RES.c.id.in_(chunk), node_state() == READY))
            for r in rows:
                out.setdefault(r.traversal_id, []).append(r.seq)
        return out

    def _running(self, *, current: bool = True,
                 stalled_before: float | None = None) -> list[str]:
        """The running traversals (``current``: of stacks whose current traversal they are;
        ``stalled_before``: only those that counted no node off since then). Few, read by
        their state's index: each node query below then reads one traversal's nodes of one
        state by ``ix_nodes_state``, never every node of every plan."""
        query = select(T_TRAV.c.id).where(T_TRAV.c.state == RUNNING)
        if current:
            query = query.join(T_STACK, and_(T_STACK.c.id == T_TRAV.c.stack_id,
                                             T_STACK.c.traversal_id == T_TRAV.c.id))
        if stalled_before is not None:
            query = query.where(func.coalesce(T_TRAV.c.progressed_at, T_TRAV.c.created_at)
                                < stalled_before)
        return [r.id for r in self.conn.execute(query.order_by(T_TRAV.c.id))]

    def _nodes_of(self, traversal_ids: Sequence[str], limit: int,
                  where: Callable[[str], Any]) -> list[Any]:
        """Up to ``limit`` rows (traversal id, seq) of these traversals' nodes,
        ``where(traversal_id)`` selecting each one's."""
        found: list[Any] = []
        for traversal_id in traversal_ids:
            if len(found) >= limit:
                break
            rows = self.conn.execute(where(traversal_id).limit(limit - len(found)))
            found.extend(sorted(rows, key=lambda r: r.seq))
        return found

    def idle_ready_nodes(self, idle: float, limit: int) -> dict[str, list[int]]:
        """Ready nodes of running current traversals that nobody has touched for ``idle``
        seconds and whose record nobody holds or watches: their message was lost. They are
        touched, so the next sweep offers them again only after another ``idle``.

        Only traversals that have counted no node off for ``idle`` seconds either are looked
        at: one that moves is working through its queue (a million ready nodes wait their
        turn behind busy workers longer than a lease), and once a lost message is all that
        is left it stops moving and is found. So a sweep costs nothing per queued node."""
        def lost(traversal_id: str) -> Any:
            return (select(T_NODE.c.traversal_id, T_NODE.c.seq)
                    .outerjoin(T_RES, T_RES.c.id == T_NODE.c.record_id)
                    .where(keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.state == READY,
                           T_NODE.c.updated_at < self.now - idle,
                           or_(T_RES.c.id.is_(None), T_RES.c.lease_expires.is_(None),
                               T_RES.c.lease_expires < self.now)))

        stalled = self._running(stalled_before=self.now - idle)
        return self._mark_nodes(self._nodes_of(stalled, limit, lost), READY, READY)

    def parked_nodes_done_waiting(self, limit: int) -> dict[str, list[int]]:
        """Parked nodes of running current traversals whose nested stack is no longer in
        progress: the wake-up its end sent was lost (the message, not the row: the end and
        the wake commit together, so this is the broker's loss or a node parked by a step
        that read the child just before it ended). Made ready again, and returned."""
        child = T_STACK.alias("child")

        def done_waiting(traversal_id: str) -> Any:
            return (select(T_NODE.c.traversal_id, T_NODE.c.seq)
                    .join(child, child.c.parent_record_id == T_NODE.c.record_id)
                    .where(keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.state == PARKED,
                           child.c.status != "IN_PROGRESS"))

        rows = self._nodes_of(self._running(), limit, done_waiting)
        return self._mark_nodes(rows, PARKED, READY)

    def parked_nodes_due(self, limit: int) -> dict[str, list[int]]:
        """Parked nodes of running traversals whose deadline (``wake_at``) has passed: a wait
        that timed out, or a look at an event whose wake-up may have been lost. Made ready
        again, and returned."""
        def due(traversal_id: str) -> Any:
            return (select(T_NODE.c.traversal_id, T_NODE.c.seq)
                    .where(keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.state == PARKED,
                           T_NODE.c.wake_at.is_not(None), T_NODE.c.wake_at <= self.now))

        rows = self._nodes_of(self._running(current=False), limit, due)
        return self._mark_nodes(rows, PARKED, READY)

    def _mark_nodes(self, rows: Sequence[Any], was: str, state: str) -> dict[str, list[int]]:
        """The nodes of ``rows`` (traversal id, seq) by traversal, those still in state
        ``was`` set to ``state`` and touched now."""
        out: dict[str, list[int]] = {}
        for r in rows:
            out.setdefault(r.traversal_id, []).append(r.seq)
        for traversal_id, seqs in out.items():
            for chunk in chunks(seqs):
                self.conn.execute(update(T_NODE).where(
                    keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.seq.in_(chunk),
                    node_state() == was).values(state=state, updated_at=self.now))
        return out

    def next_sweep_due(self, plan_idle: float, node_idle: float) -> float | None:
        """The earliest moment a sweep may find something that is not lost yet: a lease or
        poll watch on a resource of an unfinished traversal runs out, a plan or a ready node
        has waited long enough to count as lost. None: nothing is under way."""
        unfinished = T_TRAV.c.state.in_((PLANNING, RUNNING))
        current = and_(T_TRAV.c.id == T_STACK.c.traversal_id, unfinished)
        lease = select(func.min(T_RES.c.lease_expires)).join(
            T_STACK, T_STACK.c.id == T_RES.c.stack_id).join(T_TRAV, current).where(
            T_RES.c.lease_expires.is_not(None))
        plan = select(func.min(T_TRAV.c.created_at) + plan_idle).join(T_STACK, current).where(
            T_TRAV.c.state == PLANNING)
        running = and_(current, T_TRAV.c.state == RUNNING)
        node = select(func.min(T_NODE.c.updated_at) + node_idle).select_from(T_STACK).join(
            T_TRAV, running).join(
            T_NODE, T_NODE.c.traversal_id == T_TRAV.c.id).where(T_NODE.c.state == READY)
        # A ready node counts as lost only once its traversal stopped moving too: the later
        # of the two bounds (never later than the moment itself: no lost node waits longer).
        moved = select(func.min(func.coalesce(T_TRAV.c.progressed_at, T_TRAV.c.created_at))
                       + node_idle).select_from(T_STACK).join(T_TRAV, running)
        found = [self.conn.execute(q).scalar() for q in (lease, plan, node)]
        if found[2] is not None:
            stalled = self.conn.execute(moved).scalar()
            found[2] = max(found[2], stalled) if stalled is not None else found[2]
        times = [float(v) for v in found if v is not None]
        return min(times) if times else None

    # traversals ---------------------------------------------------------------------------
    def stalled_plans(self, idle: float) -> list[str]:
        """Current traversals still PLANNING ``idle`` seconds after they were accepted, that
        no planner is working on (on PostgreSQL a planner holds the row locked: those are
        skipped)."""
        query = select(T_TRAV.c.id).join(T_STACK, T_STACK.c.traversal_id == T_TRAV.c.id).where(
            T_TRAV.c.state == PLANNING, T_TRAV.c.created_at < self.now - idle)
        query = dialect.lock_unless_locked(self.conn, query, of=T_TRAV)
        return [r.id for r in self.conn.execute(query)]

    def unconcluded_traversals(self) -> list[str]:
        """Running current traversals with nothing left to do: their finish was lost."""
        rows = self.conn.execute(select(T_TRAV.c.id).join(
            T_STACK, T_STACK.c.traversal_id == T_TRAV.c.id,
        ).where(T_TRAV.c.state == RUNNING, T_TRAV.c.nodes_remaining <= 0))
        return [r.id for r in rows]

    def overdue_traversals(self) -> list[str]:
        """Running (or planning) current traversals past their deadline."""
        rows = self.conn.execute(select(T_TRAV.c.id).join(
            T_STACK, T_STACK.c.traversal_id == T_TRAV.c.id,
        ).where(T_TRAV.c.state.in_((PLANNING, RUNNING)), T_TRAV.c.deadline.is_not(None),
                T_TRAV.c.deadline < self.now))
        return [r.id for r in rows]

    def purge_nodes(self, ended_before: float, traversals: int,
                    rows: int = PURGE_ROWS) -> int:
        """Delete the plans (node rows) of traversals that ended before ``ended_before``
        (nobody reads them once their traversal is over): up to ``rows`` rows of up to
        ``traversals`` traversals, so that a plan of a million nodes goes in short
        transactions over several sweeps rather than in one that holds the database."""
        ids = [r.id for r in self.conn.execute(select(T_TRAV.c.id).where(
            T_TRAV.c.state.in_((COMPLETE, FAILED, SUPERSEDED)),
            T_TRAV.c.finished_at < ended_before, T_TRAV.c.nodes_total > 0,
        ).order_by(T_TRAV.c.id).limit(traversals))]
        deleted = 0
        for traversal_id in ids:
            if deleted >= rows:
                break
            # Found state by state (``ix_nodes_state``: no index begins with the traversal),
            # then deleted by the key.
            wanted = rows - deleted
            seqs = list(self.conn.execute(select(T_NODE.c.seq).where(
                T_NODE.c.state.in_(NODE_STATES), keyed(T_NODE.c.traversal_id, traversal_id),
            ).limit(wanted)).scalars())
            for chunk in chunks(seqs):
                deleted += int(self.conn.execute(delete(T_NODE).where(
                    T_NODE.c.seq.in_(chunk), keyed(T_NODE.c.traversal_id, traversal_id),
                )).rowcount)
            if len(seqs) < wanted:
                # All that was left is gone: nodes_total 0 marks the plan as purged, so that the
                # traversal is not looked at again.
                self.conn.execute(update(T_TRAV).where(T_TRAV.c.id == traversal_id)
                                  .values(nodes_total=0))
        return deleted
