"""Planning a traversal: the records it converges, its graph of nodes, the first work.

Called by :meth:`Engine.plan <convergence.engine.engine.Engine.plan>` (a ``plan`` work item:
the dispatchers, the sweeper re-planning a stalled traversal, the engine's own rollback). One
transaction, under the stack's lock: the records the target wants are chosen (an earlier
version made current again for a rollback, a new one made for each missing resource), the
graph is built (:func:`convergence.graph.plan.build_plan`) and stored, and the ready nodes go
out as the first batches.

A plan of many nodes is a bulk write, and the database is asked to take its figures again
before the batches run (:meth:`Store.refresh_statistics
<convergence.ports.store.Store.refresh_statistics>`): PostgreSQL's planner, with none yet on
the new rows, took a stack to hold 0.5 % of the records and read every batch's dependencies
by scanning the stack rather than looking up their names, so a batch cost grew with the stack
(a layered stack of 1,000,000 on a database never analysed: 488 ms a read, 1,200 nodes a
second; after an ANALYZE of 0.6 s, 10 ms and 3,650 a second; a chain of 1,000: each hop read
the 1,000 records, 4.0 ms a hop, then 0.1 ms).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from graphlib import TopologicalSorter

from convergence.engine.context import EngineContext, policies
from convergence.graph.plan import RecordInfo, build_plan, choose_records
from convergence.ports.store import Tx
from convergence.ports.views import PLANNING, RUNNING, RecordOutline
from convergence.ports.work import FINISH, Work, batches
from convergence.template import StackDefinition, TemplateError
from convergence.template.changes import same_resource

FIRST_BATCH = 8
# Nodes of a plan from which its rows are a bulk write the database's figures must take in
# (when they are a large share of what the figures count: ``Store.refresh_statistics``).
# Under it, a batch that reads a whole stack for want of figures reads a few hundred rows.
STATISTICS_AFTER_NODES = 500


def _info(r: RecordOutline) -> RecordInfo:
    # COMPLETE: no operation under way either (a pending one is IN_PROGRESS).
    intact = r.status == "COMPLETE" and r.action not in ("INIT", "DELETE")
    return RecordInfo(r.id, r.name, r.requires, r.replaced_by, r.template_id, intact)


class Planner:
    """Plans traversals of one engine (see the module's docstring)."""

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx

    def plan(self, traversal_id: str) -> list[Work]:
        """Plan a traversal once; planning again (a duplicate message) re-offers ready nodes.
        A plan the database picked as a deadlock's victim is made again at once."""
        planned: list[int] = []  # the plan's size, once it is stored
        work = self.ctx.store.transact(lambda tx: self._plan_in(tx, traversal_id, planned))
        if planned and planned[-1] >= STATISTICS_AFTER_NODES:
            self.ctx.store.refresh_statistics(planned[-1])
        return work

    def _plan_in(self, tx: Tx, traversal_id: str, planned: list[int]) -> list[Work]:
        batch_size = self.ctx.batch_size
        found = tx.traversal(traversal_id)
        if found is None:
            return []
        # The stack is locked first (the order every transaction keeps), for as long as the
        # plan makes records: a newer request is accepted before this plan or after it, never
        # while it runs, so two plans never make a record each for one resource.
        stack = tx.stack(found.stack_id, lock=True, outputs=False)
        if stack is None or stack.traversal_id != traversal_id:
            return []
        # Locked: two copies of the plan message must not both plan.
        trav = tx.traversal(traversal_id, lock=True)
        if trav is None:
            return []
        if trav.state == RUNNING:
            return list(batches(trav.id, tx.ready_nodes(trav.id), batch_size))
        if trav.state != PLANNING:
            return []
        try:
            definition = self.ctx.definitions.get(trav.template_id, tx.template) \
                if trav.template_id else None
        except TemplateError as exc:
            # Stored content is validated when accepted; a change of plugins since can
            # still make it invalid, and that is the traversal's failure, not a crash.
            tx.start_running(trav.id, 0)
            tx.count_done(trav.id, 0, 0, f"the template is no longer valid: {exc}")
            return [Work(FINISH, trav.id)]
        infos = [_info(r) for r in tx.record_outlines(stack.id)]
        wanted = dict(definition.dependencies) if definition else {}
        chosen = choose_records(infos, trav.template_id)
        heads = {i.name: i.id for i in infos if i.replaced_by is None}
        # An earlier version the target wants as it is becomes current again (rollback).
        # (Its replacement may be gone already, deleted by a traversal since.)
        tx.restore_records([(info.id, heads.get(info.name)) for info in chosen.values()
                            if info.replaced_by is not None])
        current = {name: r.id for name, r in chosen.items() if name in wanted}
        missing = [(name, definition.resource_types[name]) for name in wanted
                   if name not in current] if definition else []
        current.update(tx.insert_records(stack.id, missing, policies(definition, missing)))
        unchanged: frozenset[str] = frozenset()
        if definition is not None and trav.template_id is not None and not trav.observe \
                and trav.action in ("UPDATE", "ROLLBACK"):
            unchanged = self._unchanged(tx, definition, wanted, chosen, infos)
            # Converged to this template as they are: the next update compares them with it
            # (the templates records name stay few, however many updates left them alone).
            tx.keep_records([current[name] for name in unchanged], trav.template_id,
                            trav.generation)
        plan = build_plan(wanted, current, infos, unchanged)
        tx.insert_nodes(trav.id, plan.nodes)
        planned.append(len(plan.nodes))
        tx.start_running(trav.id, len(plan.nodes))
        ready = sorted(plan.ready)
        if not plan.nodes:
            return [Work(FINISH, traversal_id)]
        # A small first batch (run inline by the planner's worker) gets the first results out
        # at once; the rest go in full batches to whoever is free.
        first = ready[:FIRST_BATCH]
        return [*batches(traversal_id, first, batch_size),
                *batches(traversal_id, ready[FIRST_BATCH:], batch_size)]

    def _unchanged(self, tx: Tx, definition: StackDefinition,
                   wanted: Mapping[str, frozenset[str]], chosen: Mapping[str, RecordInfo],
                   infos: list[RecordInfo]) -> frozenset[str]:
        """The resources an update leaves alone: converged and intact, the only record of
        their name, defined alike in the template their record converged to and in the new
        one (:func:`~convergence.template.changes.same_resource`), and depending only on
        resources left alone too (so nothing they read can change)."""
        versions = Counter(i.name for i in infos)
        olds: dict[str, StackDefinition | None] = {}
        same: set[str] = set()
        for name in TopologicalSorter(wanted).static_order():
            record = chosen.get(name)
            if name not in wanted or record is None or not record.intact or \
                    record.replaced_by is not None or versions[name] != 1 or \
                    record.template_id is None:
                continue
            if not all(dep in same for dep in wanted[name]):
                continue
            tid = record.template_id
            if tid not in olds:
                try:
                    olds[tid] = self.ctx.definitions.get(tid, tx.template)
                except TemplateError:
                    olds[tid] = None
            old = olds[tid]
            schema = self.ctx.registry.lookup(definition.resource_types.get(name, ""))
            if schema is not None and schema.replaced_on_update:
                continue
            if old is not None and same_resource(
                    old, definition, name,
                    generates_stack=schema is not None and schema.generates_stack):
                same.add(name)
        return frozenset(same)
