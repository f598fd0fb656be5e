"""Claiming a batch: the ready nodes' records leased to one owner, and what their steps read.

Called by the batch runner (:mod:`convergence.engine.batch`), in the transaction that checks a
``nodes`` work item, and by the accounting (:mod:`convergence.engine.accounting`), which claims
the successors a batch released in the very transaction that recorded it (one commit per
hop). A claim is a compare-and-swap that bumps each record's fencing token and sets a lease
(kept alive by :class:`~convergence.engine.leases.LeaseKeeper`); a node whose record another
worker holds is sent on as work for later, and one whose record a superseded traversal
deleted moves to its name's current record, or to one made for it (:meth:`Claimer.make_records`,
in a transaction of its own under the stack's lock).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from convergence.engine.context import EngineContext, policies
from convergence.ports.store import Tx
from convergence.ports.views import (
    DONE,
    READY,
    NodeView,
    RecordView,
    StackView,
    TraversalView,
)
from convergence.ports.work import NODES, Work, batches
from convergence.template import StackDefinition


@dataclass(slots=True)
class Batch:
    """Claimed ready nodes of one traversal and what their steps read."""

    trav: TraversalView
    stack: StackView
    definition: StackDefinition | None
    nodes: list[NodeView]
    records: dict[int, RecordView]
    heads: dict[str, RecordView]
    busy_work: list[Work]
    timed_out: bool
    gone: list[NodeView] = field(default_factory=list)  # nothing left to do: done
    # Converge nodes whose record vanished and whose name has none left: a record is made for
    # them under the stack's lock (see Claimer.make_records).
    unmade: list[NodeView] = field(default_factory=list)


class Claimer:
    """Claims batches for one engine (see the module's docstring)."""

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx

    def prepare(self, tx: Tx, trav: TraversalView, stack: StackView,
                loaded: Sequence[NodeView], owner: str, inline: bool = False) -> Batch | None:
        """Claim the ready nodes' records and read what their steps need. ``inline``: in the
        transaction that recorded the batch before (nodes that need a record made are then
        sent on, to a batch of their own)."""
        ctx = self.ctx
        ctx.stats.batches += 1
        nodes = [n for n in loaded if n.state == READY]
        if not nodes:
            return None
        record_ids = [n.record_id for n in nodes if n.record_id is not None]
        records = tx.claim_records(record_ids, owner, tx.now + ctx.lease_seconds)
        ctx.leases.add(owner, records)
        definition = ctx.definition(trav, tx)
        unclaimed = [n for n in nodes if n.record_id not in records]
        gone: list[NodeView] = []
        unmade: list[NodeView] = []
        if unclaimed:
            nodes, gone, unmade = self._vanished(tx, trav, stack, definition, nodes, unclaimed,
                                                 records, owner)
        names: set[str] = set()
        for n in [*nodes, *unmade]:
            if n.phase == "cleanup":
                names.add(n.name)
            elif definition is not None:
                names |= set(definition.dependencies.get(n.name, ()))
        heads = tx.heads(stack.id, names)
        busy = [n for n in nodes if n.record_id is None or n.record_id not in records]
        busy_work: list[Work] = []
        if unmade and inline:
            busy_work.append(Work(NODES, trav.id, tuple(n.seq for n in unmade)))
            unmade = []
        if busy:
            # Another worker holds these (a duplicate message, a poll in flight, or a worker
            # that died): look again once the sweeper had a turn after its lease ran out. A
            # superseded worker that finishes sooner hands the record over at once.
            ctx.stats.skipped_busy += len(busy)
            delay = ctx.busy_delay(tx, [n.record_id for n in busy if n.record_id is not None])
            busy_work.append(Work(NODES, trav.id, tuple(n.seq for n in busy), delay))
        timed_out = trav.deadline is not None and tx.now > trav.deadline
        return Batch(trav, stack, definition, [n for n in nodes if n not in busy], records,
                     heads, busy_work, timed_out, gone, unmade)

    def _vanished(self, tx: Tx, trav: TraversalView, stack: StackView,
                  definition: StackDefinition | None, nodes: list[NodeView],
                  unclaimed: list[NodeView], records: dict[int, RecordView],
                  owner: str) -> tuple[list[NodeView], list[NodeView], list[NodeView]]:
        """Nodes whose record no longer exists (a superseded traversal deleted it after this
        one was planned): a cleanup node has nothing left to do (gone); a converge node works
        on the name's current record, or, when the name has none, on one made for it
        (unmade: see :meth:`make_records`)."""
        exists = tx.tokens([n.record_id for n in unclaimed if n.record_id is not None])
        missing = [n for n in unclaimed if n.record_id not in exists]
        if not missing:
            return nodes, [], []
        gone = [n for n in missing if n.phase == "cleanup" or definition is None or
                n.name not in definition.resource_types]
        rebuild = [n for n in missing if n not in gone]
        found: dict[str, int] = {}
        if rebuild:
            found = {name: r.id for name, r in tx.heads(stack.id, [n.name for n in rebuild])
                     .items()}
            for n in rebuild:
                if n.name in found:
                    tx.set_node_record(trav.id, n.seq, found[n.name])
            claimed = tx.claim_records(list(found.values()), owner,
                                       tx.now + self.ctx.lease_seconds)
            self.ctx.leases.add(owner, claimed)
            records.update(claimed)
        unmade = [n for n in rebuild if n.name not in found]
        moved = {n.seq: dataclasses.replace(n, record_id=found[n.name]) for n in rebuild
                 if n.name in found}
        keep = [moved.get(n.seq, n) for n in nodes if n not in gone and n not in unmade]
        return keep, gone, unmade

    def make_records(self, batch: Batch, owner: str) -> None:
        """Records for the batch's converge nodes whose name has none, made in a transaction
        of their own that locks the stack first and only while this traversal is the stack's
        current one. A newer request's plan makes the name's record itself; two traversals
        making one each would create the resource twice."""
        ctx = self.ctx
        trav, definition = batch.trav, batch.definition
        assert definition is not None
        with ctx.store.begin() as tx:
            stack = tx.stack(trav.stack_id, lock=True, outputs=False)
            if stack is None or stack.traversal_id != trav.id:
                return  # superseded: the current traversal has the name
            names = [n.name for n in batch.unmade]
            found = {name: r.id for name, r in tx.heads(stack.id, names).items()}
            new = [(n.name, definition.resource_types[n.name]) for n in batch.unmade
                   if n.name not in found]
            found.update(tx.insert_records(stack.id, new, policies(definition, new)))
            claimed = tx.claim_records(list(found.values()), owner, tx.now + ctx.lease_seconds)
            ctx.leases.add(owner, claimed)
            for n in batch.unmade:
                tx.set_node_record(trav.id, n.seq, found[n.name])
            busy = [n.seq for n in batch.unmade if found[n.name] not in claimed]
            if busy:  # a record made meanwhile, held: as for any busy node
                delay = ctx.busy_delay(tx, [found[n.name] for n in batch.unmade])
                batch.busy_work.append(Work(NODES, trav.id, tuple(busy), delay))
        batch.records.update(claimed)
        batch.nodes.extend(dataclasses.replace(n, record_id=found[n.name])
                           for n in batch.unmade if found[n.name] in claimed)
        batch.unmade = []

    def reoffer(self, tx: Tx, traversal_id: str, nodes: Sequence[NodeView]) -> list[Work]:
        """Ready successors of done nodes that have waited a while (their message may be lost;
        the ones made ready a moment ago are surely still on their way)."""
        successors = {s for n in nodes if n.state == DONE for s in n.successors}
        grace = min(self.ctx.lease_seconds, 5.0)
        ready = [n.seq for n in tx.nodes(traversal_id, successors)
                 if n.state == READY and tx.now - n.updated_at > grace]
        return list(batches(traversal_id, ready, self.ctx.batch_size))
