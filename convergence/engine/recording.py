"""Recording a batch's results: the batch's one writing transaction.

Called by the batch runner (:mod:`convergence.engine.batch`) once its steps are done. Every
change is fenced by the token its record was claimed with (``Tx.apply_many``): a result whose
lease was taken over meanwhile is refused, and what its step made that the record does not
name is noted as an orphan for the sweeper to remove (:mod:`convergence.engine.orphans`). The
events of what was recorded are added; a traversal superseded while its steps ran hands its
records over to the current one; otherwise the nodes are counted off
(:mod:`convergence.engine.accounting`). The engine's observers are told once the transaction
committed. Also here: failing the operations nobody will poll any more
(:func:`abandon_operations`, used by the sweeper too).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from convergence.engine.accounting import Accountant
from convergence.engine.claim import Batch
from convergence.engine.context import EngineContext, next_step_delay
from convergence.engine.step import FAILED, PARKED, PENDING, RETRY, StepResult
from convergence.ports.store import Tx
from convergence.ports.views import RUNNING, NewEvent, NewOrphan, RecordChange, StackView
from convergence.ports.work import Work, batches, merge

log = logging.getLogger(__name__)


def abandon_operations(tx: Tx, stack: StackView, record_ids: Sequence[int]) -> list[NewEvent]:
    """Records of a stack with no traversal running that still wait on an operation nobody
    holds: FAILED, the operation abandoned (the next traversal finds what it made by the
    record's key); returns the events that say so."""
    if not record_ids:
        return []
    reason = f"abandoned: {stack.status_reason or f'Stack {stack.action} stopped'}"
    return [NewEvent(r.name, r.physical_id, r.type, r.action, "FAILED", reason)
            for r in tx.fail_operations(record_ids, reason)]


class Recorder:
    """Records batches of one engine (see the module's docstring)."""

    def __init__(self, ctx: EngineContext, accountant: Accountant) -> None:
        self.ctx = ctx
        self.accountant = accountant

    def record(self, batch: Batch, results: list[StepResult], owner: str,
               go_on: bool) -> tuple[list[Work], Batch | None]:
        """The batch's one writing transaction; returns the follow-up work, and the next
        batch (its successors, already claimed) when ``go_on`` and there are any."""
        if not results:
            return [], None
        for r in results:
            self.ctx.stats.by_outcome[r.outcome] += 1
        # Locks are taken in one order everywhere: the stack, then resources, then nodes, then
        # the traversal. A failure may roll the stack back, so its stack is locked first.
        failing = any(r.outcome == FAILED for r in results)
        # A deadlock's victim (PostgreSQL picks one) is recorded again, from the start, at
        # once: the results are in hand and the leases still held.
        follow, nxt, told = self.ctx.store.transact(
            lambda tx: self._record_in(tx, batch, results, owner, go_on, failing))
        if told:
            self.ctx.tell_observers()
        return merge(follow, self.ctx.batch_size), nxt

    def _record_in(self, tx: Tx, batch: Batch, results: list[StepResult], owner: str,
                   go_on: bool, failing: bool) -> tuple[list[Work], Batch | None, bool]:
        """The body of :meth:`record`: the follow-up work, the next batch, and whether any
        event was written."""
        trav = batch.trav
        if failing:
            tx.stack(trav.stack_id, lock=True, outputs=False)
        now_trav, now_stack = tx.traversal_and_stack(trav.id)
        assert now_trav is not None and now_stack is not None
        current = now_stack.traversal_id == trav.id and now_trav.state == RUNNING
        events: list[NewEvent] = []
        applied = tx.apply_many([c for r in results for c in self._watched(r, current)])
        kept: list[StepResult] = []
        lost: list[NewOrphan] = []
        late: list[NewEvent] = []  # the events of the fenced-off steps that made orphans
        for r in results:
            if r.changes and r.changes[0].record_id not in applied:
                # Our lease was taken over (we were too slow, or frozen): what this step
                # did is its new holder's to find and record, and what it made that the
                # holder does not adopt is the sweeper's to remove.
                self.ctx.stats.fenced_off += 1
                orphan = self._orphan(batch, r)
                log.warning("fenced off: the lease of record %d was taken over; this "
                            "step's result is not recorded%s", r.changes[0].record_id,
                            "" if orphan is None else
                            f"; {orphan.physical_id}, which it made, is noted as an orphan")
                if orphan is not None:
                    lost.append(orphan)
                    late.extend(r.events)
                continue
            events.extend(r.events)
            kept.append(r)
        events.extend(self._note_orphans(tx, lost, late))
        if not current:
            events.extend(self._unwatched(tx, now_stack, kept))
        tx.add_events(now_stack.id, trav.id, trav.generation, events)
        if not current:
            # Superseded while the steps ran: what they did is recorded (fenced); the
            # resources go on in the current traversal, from where they really are.
            follow = self._hand_over(tx, now_stack, [
                c.record_id for r in kept for c in r.changes])
            return follow, None, bool(events)
        follow, nxt = self.accountant.account(tx, now_trav, now_stack, kept, owner, go_on)
        return follow, nxt, bool(events)

    @staticmethod
    def _unwatched(tx: Tx, stack: StackView, kept: list[StepResult]) -> list[NewEvent]:
        """A superseded step that leaves its resource waiting on an operation, in a stack with
        no traversal running (cancelled without rollback, reset, failed meanwhile): nobody
        will poll the operation, so the resource is FAILED, as the cancel did to the ones
        nobody held, and an event says so."""
        if stack.status == "IN_PROGRESS":
            return []
        waiting = [r.changes[0].record_id for r in kept
                   if r.changes and r.outcome in (PENDING, PARKED, RETRY)]
        return abandon_operations(tx, stack, waiting)

    @staticmethod
    def abandon_polled(tx: Tx, stack: StackView, traversal_id: str,
                       seqs: Sequence[int], expects: Sequence[int]) -> None:
        """A poll for a traversal that stopped, of a stack with none running: the step that
        sent it recorded its operation as under way just as the stack stopped (it read the
        stack a moment before), and nobody else will poll it."""
        if stack.status == "IN_PROGRESS":
            return
        wanted = dict(zip(seqs, expects, strict=True))
        expected = {n.record_id: wanted[n.seq] for n in tx.nodes(traversal_id, seqs)
                    if n.record_id is not None}
        mine = [i for i, token in tx.tokens(expected).items() if token == expected[i]]
        events = abandon_operations(tx, stack, mine)
        tx.add_events(stack.id, stack.traversal_id, stack.generation, events)

    @staticmethod
    def _note_orphans(tx: Tx, lost: list[NewOrphan], late: list[NewEvent]) -> list[NewEvent]:
        """Note what refused steps made (for the sweeper to remove) and return the events of
        its making: the ledger tells its life from the step that made it to its removal. One
        its record names by now was found and adopted by the new holder: no orphan."""
        if not lost:
            return []
        names = {r.id: r.physical_id for r in tx.records_by_id(o.record_id for o in lost)
                 .values()}
        orphaned = [o for o in lost if names.get(o.record_id) != o.physical_id]
        tx.note_orphans(orphaned)
        made = {o.physical_id for o in orphaned}
        return [e for e in late if e.physical_resource_id in made]

    @staticmethod
    def _orphan(batch: Batch, result: StepResult) -> NewOrphan | None:
        """What a refused result names that its record did not when the step began: made (or
        found) by the step, and unknown to the record's new holder unless it adopts it."""
        change = result.changes[0]
        made = change.values.get("physical_id")
        if not made:
            return None
        record = batch.records.get(change.record_id)
        if record is not None:
            if made == record.physical_id:
                return None
            return NewOrphan(record.id, batch.stack.id, record.name, record.type, str(made))
        # The new version of a replaced resource, made for the step: it named nothing.
        node = next(n for n in batch.nodes if n.seq == result.seq)
        old = batch.records.get(node.record_id) if node.record_id is not None else None
        types = batch.definition.resource_types if batch.definition is not None else {}
        rtype = types.get(node.name) or (old.type if old is not None else "")
        return NewOrphan(change.record_id, batch.stack.id, node.name, rtype, str(made))

    def _watched(self, result: StepResult, current: bool) -> list[RecordChange]:
        """A result's changes; a node to be polled again keeps a watch on its record: if no
        poll comes by then (its message was lost), the sweeper takes the resource over."""
        changes = result.changes
        if current and changes and result.outcome in (PENDING, RETRY):
            delay = next_step_delay(result.outcome, result.delay, self.ctx.max_poll_delay)
            changes = [dataclasses.replace(changes[0], watch=delay + self.ctx.lease_seconds),
                       *changes[1:]]
        return changes

    def _hand_over(self, tx: Tx, stack: StackView, record_ids: Sequence[int]) -> list[Work]:
        """The current traversal's ready nodes for records a superseded step just wrote: a
        node that found its record busy is waiting for exactly this."""
        self.ctx.stats.handed_over += len(record_ids)
        if not stack.traversal_id or not record_ids:
            return []
        seqs = tx.current_nodes_of(stack.traversal_id, record_ids)
        return list(batches(stack.traversal_id, seqs, self.ctx.batch_size))
