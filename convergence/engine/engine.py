"""The engine: plan traversals and run batches of node steps, each in few transactions.

Called by the dispatchers (in-process and Celery) through :meth:`Engine.execute`, which takes a
:class:`~convergence.ports.work.Work` item and returns the follow-up work to dispatch after
its commit. A batch of nodes costs two short transactions whatever its size: one to claim the
records (a compare-and-swap that bumps each record's fencing token and sets a lease) and load
what the steps read, one to record every result fenced by its token, mark the nodes done,
release their successors (locked in a fixed order) and count them off the traversal. Plugins
are called between the two, with no transaction open.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from convergence.engine.definitions import DefinitionCache
from convergence.engine.deletion import definition_policy, record_policy
from convergence.engine.leases import LeaseKeeper
from convergence.engine.stackdata import RecordData
from convergence.engine.step import (
    DONE,
    FAILED,
    PENDING,
    RELEASED,
    RETRY,
    StepInput,
    Stepper,
    StepResult,
)
from convergence.engine.traversals import begin_rollback, stack_event
from convergence.graph.plan import RecordInfo, build_plan, choose_records
from convergence.logs import bind
from convergence.plugins.base import PluginContext, ResourcePlugin
from convergence.plugins.registry import PluginRegistry
from convergence.ports.store import Store, Tx
from convergence.ports.views import (
    COMPLETE,
    PLANNING,
    READY,
    RUNNING,
    TRAVERSAL_FAILED,
    NewEvent,
    NewOrphan,
    NodeView,
    Orphan,
    RecordChange,
    RecordOutline,
    RecordView,
    StackView,
    TemplateContent,
    TraversalView,
)
from convergence.ports.views import DONE as DONE_STATE
from convergence.ports.views import FAILED as FAILED_STATE
from convergence.ports.work import FINISH, NODES, PLAN, Work, batches, merge
from convergence.template import StackDefinition, StackIdentity, TemplateError, UnknownValue

log = logging.getLogger(__name__)

FIRST_BATCH = 8


@dataclass(slots=True)
class EngineStats:
    """Counters for benchmarks and tests (not for correctness)."""

    batches: int = 0
    nodes: int = 0
    polls: int = 0
    fenced_off: int = 0
    skipped_busy: int = 0
    stale: int = 0
    handed_over: int = 0
    by_outcome: Counter[str] = field(default_factory=Counter)


def owner_key(stack_id: str, record_id: int) -> str:
    """The key a plugin finds what it made for a record by (a tag, a name in the cloud)."""
    return f"{stack_id}/{record_id}"


@dataclass(slots=True)
class _Batch:
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
    # them under the stack's lock (see Engine._make_records).
    unmade: list[NodeView] = field(default_factory=list)


def abandon_operations(tx: Tx, stack: StackView, record_ids: Sequence[int]) -> list[NewEvent]:
    """Records of a stack with no traversal running that still wait on an operation nobody
    holds: FAILED, the operation abandoned (the next traversal finds what it made by the
    record's key); returns the events that say so."""
    if not record_ids:
        return []
    reason = f"abandoned: {stack.status_reason or f'Stack {stack.action} stopped'}"
    return [NewEvent(r.name, r.physical_id, r.type, r.action, "FAILED", reason)
            for r in tx.fail_operations(record_ids, reason)]


def _policies(definition: StackDefinition | None,
              items: Sequence[tuple[str, str]]) -> dict[str, str | None]:
    """The deletion policy of each new record's definition (see ``Tx.insert_records``)."""
    if definition is None:
        return {}
    return {name: definition_policy(definition, name) for name, _ in items}


def _info(r: RecordOutline) -> RecordInfo:
    # COMPLETE: no operation under way either (a pending one is IN_PROGRESS).
    intact = r.status == "COMPLETE" and r.action not in ("INIT", "DELETE")
    return RecordInfo(r.id, r.name, r.requires, r.replaced_by, r.template_id, intact)


class Engine:
    def __init__(self, store: Store, registry: PluginRegistry, *, worker_id: str = "",
                 lease_seconds: float = 30.0,
                 batch_size: int = 200, max_poll_delay: float = 1.0,
                 inline_seconds: float = 0.5, sweep_seconds: float = 5.0) -> None:
        self.store = store
        self.registry = registry
        self.worker_id = worker_id or f"engine-{uuid.uuid4().hex[:8]}"
        self.lease_seconds = lease_seconds
        self.batch_size = batch_size
        self.max_poll_delay = max_poll_delay
        self.inline_seconds = inline_seconds
        self.sweep_seconds = sweep_seconds
        self.leases = LeaseKeeper(store, lease_seconds)
        # Set when the process is told to stop: steps in hand finish, nothing more is taken
        # on inline (what they release goes back to the dispatcher, for others).
        self.stopping = threading.Event()
        self.stats = EngineStats()
        self.finishes = 0  # traversals this engine finished: lets waiters skip needless reads
        # Called, in order, after each transaction that recorded events: the API's event stream
        # and webhook deliverer register here (``convergence.api.stream``/``subscriptions``).
        self.observers: list[Callable[[], None]] = []
        self.on_step: Callable[[float], None] | None = None  # each step's seconds (metrics)
        self._plugins: dict[str, ResourcePlugin] = {}
        self.definitions = DefinitionCache(self._load_template, registry)
        self.stepper = Stepper(self._plugin, self._context, self._replace, store.clock,
                               self._deletion_policy, unreachable=store.unreachable)

    # wiring ---------------------------------------------------------------------------------
    def _load_template(self, template_id: str) -> TemplateContent:
        with self.store.read() as tx:
            return tx.template(template_id)

    def _plugin(self, type_name: str) -> ResourcePlugin | None:
        plugin = self._plugins.get(type_name)
        if plugin is None:
            cls = self.registry.plugin(type_name)
            if cls is None:
                return None
            plugin = self._plugins[type_name] = cls()  # type: ignore[assignment]
        return plugin

    def _context(self, stack: StackView, record: RecordView,
                 lease_good: Callable[[], bool] = lambda: True) -> PluginContext:
        return PluginContext(owner=owner_key(stack.id, record.id), stack_id=stack.id,
                             stack_name=stack.name, resource_name=record.name,
                             now=self.store.clock, backends=self.registry.backends,
                             lease_good=lease_good)

    def discard(self, orphan: Orphan, stack_name: str, lease_good: Callable[[], bool]) -> bool:
        """Have the orphan's plugin remove it (raises what the plugin raises); False if no
        plugin of its type is known here."""
        plugin = self._plugin(orphan.type)
        if plugin is None:
            return False
        plugin.discard(PluginContext(
            owner=owner_key(orphan.stack_id, orphan.record_id), stack_id=orphan.stack_id,
            stack_name=stack_name, resource_name=orphan.name, now=self.store.clock,
            backends=self.registry.backends, lease_good=lease_good), orphan.physical_id)
        return True

    def _replace(self, inp: StepInput, rtype: str) -> RecordView | None:
        """Create the new version of a record and point the node at it (one transaction)."""
        owner = inp.owner or self._owner()
        with self.store.begin() as tx:
            # Locked: a traversal planned after this commit sees the new version, and one that
            # superseded this traversal before it makes no version of its own.
            stack = tx.stack(inp.stack.id, lock=True)
            if stack is None or stack.traversal_id != inp.traversal_id:
                return None
            policy = definition_policy(inp.definition, inp.record.name) \
                if inp.definition is not None else None
            new_id = tx.insert_replacement(inp.record, inp.token, rtype, policy)
            if new_id is None:
                return None
            tx.set_node_record(inp.traversal_id, inp.node.seq, new_id)
            tx.claim_records([new_id], owner, tx.now + self.lease_seconds)
            self.leases.add(owner, [new_id])
            return tx.records_by_id([new_id])[new_id]

    def _deletion_policy(self, record: RecordView) -> str | None:
        """The deletion policy of what a record made; None: it cannot be told (see
        :func:`convergence.engine.deletion.record_policy`)."""
        return record_policy(record, self.definitions.get, self._load_template)

    def _owner(self) -> str:
        return f"{self.worker_id}/{uuid.uuid4().hex[:12]}"

    # dispatch entry point ------------------------------------------------------------------
    def execute(self, work: Work) -> list[Work]:
        with bind(traversal=work.traversal_id):  # on every line logged by plan/run/finish
            if work.kind == PLAN:
                return self.plan(work.traversal_id)
            if work.kind == NODES:
                return self.run_nodes(work.traversal_id, work.seqs, work.expect)
            if work.kind == FINISH:
                return self.finish(work.traversal_id)
        raise ValueError(f"unknown work kind {work.kind!r}")

    # planning -------------------------------------------------------------------------------
    def plan(self, traversal_id: str) -> list[Work]:
        """Plan a traversal once; planning again (a duplicate message) re-offers ready nodes.
        A plan the database picked as a deadlock's victim is made again at once."""
        return self.store.transact(lambda tx: self._plan_in(tx, traversal_id))

    def _plan_in(self, tx: Tx, traversal_id: str) -> list[Work]:
        found = tx.traversal(traversal_id)
        if found is None:
            return []
        # The stack is locked first (the order every transaction keeps), for as long as the
        # plan makes records: a newer request is accepted before this plan or after it, never
        # while it runs, so two plans never make a record each for one resource.
        stack = tx.stack(found.stack_id, lock=True)
        if stack is None or stack.traversal_id != traversal_id:
            return []
        # Locked: two copies of the plan message must not both plan.
        trav = tx.traversal(traversal_id, lock=True)
        if trav is None:
            return []
        if trav.state == RUNNING:
            return list(batches(trav.id, tx.ready_nodes(trav.id), self.batch_size))
        if trav.state != PLANNING:
            return []
        try:
            definition = self.definitions.get(trav.template_id, tx.template) \
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
        current.update(tx.insert_records(stack.id, missing, _policies(definition, missing)))
        plan = build_plan(wanted, current, infos)
        tx.insert_nodes(trav.id, plan.nodes)
        tx.start_running(trav.id, len(plan.nodes))
        ready = sorted(plan.ready)
        if not plan.nodes:
            return [Work(FINISH, traversal_id)]
        # A small first batch (run inline by the planner's worker) gets the first results out
        # at once; the rest go in full batches to whoever is free.
        first = ready[:FIRST_BATCH]
        return [*batches(traversal_id, first, self.batch_size),
                *batches(traversal_id, ready[FIRST_BATCH:], self.batch_size)]

    # running nodes --------------------------------------------------------------------------
    def run_nodes(self, traversal_id: str, seqs: Sequence[int],
                  expect: int | None = None) -> list[Work]:
        """Run a batch; while ``inline_seconds`` last, go on with the successors it released,
        claiming them in the same transaction that recorded the batch (one commit per hop)."""
        owner = self._owner()
        # While this runs, the leases it claims are renewed (and known lost if taken over).
        with self.leases.holding(owner):
            with self.store.begin() as tx:
                trav, stack = tx.traversal_and_stack(traversal_id)
                if trav is None or stack is None or trav.state != RUNNING or \
                        stack.traversal_id != trav.id:
                    self.stats.stale += 1
                    if expect is not None and stack is not None:
                        self._abandon_polled(tx, stack, traversal_id, seqs, expect)
                    return []
                loaded = tx.nodes(trav.id, seqs)
                if not any(n.state == READY for n in loaded):
                    # A redelivered message for work already done: the worker that did it may
                    # have died before passing its ready successors on, so offer them again.
                    return self._reoffer(tx, trav.id, loaded)
                if expect is not None:
                    ids = [n.record_id for n in loaded if n.record_id is not None]
                    if any(t != expect for t in tx.tokens(ids).values()):
                        self.stats.stale += 1  # a duplicate of a poll someone already made
                        return []
                batch: _Batch | None = self._prepare(tx, trav, stack, loaded, owner)
            if batch is not None and batch.unmade:
                self._make_records(batch, owner)
            deadline = time.monotonic() + self.inline_seconds
            follow: list[Work] = []
            while batch is not None:
                follow.extend(batch.busy_work)
                results = self._steps(batch, owner)
                go_on = time.monotonic() < deadline and not self.stopping.is_set()
                more, batch = self._record(batch, results, owner, go_on=go_on)
                follow.extend(more)
        return merge(follow, self.batch_size)

    def _prepare(self, tx: Tx, trav: TraversalView, stack: StackView,
                 loaded: Sequence[NodeView], owner: str, inline: bool = False
                 ) -> _Batch | None:
        """Claim the ready nodes' records and read what their steps need. ``inline``: in the
        transaction that recorded the batch before (nodes that need a record made are then
        sent on, to a batch of their own)."""
        self.stats.batches += 1
        nodes = [n for n in loaded if n.state == READY]
        if not nodes:
            return None
        record_ids = [n.record_id for n in nodes if n.record_id is not None]
        records = tx.claim_records(record_ids, owner, tx.now + self.lease_seconds)
        self.leases.add(owner, records)
        definition = self._definition(trav, tx)
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
            # that died): look again once the sweeper had a turn after its lease ran out (it
            # takes over expired leases, says so in an event, and offers the node again). A
            # superseded worker that finishes sooner hands the record over at once.
            self.stats.skipped_busy += len(busy)
            retry_at = tx.lease_expiry([n.record_id for n in busy if n.record_id is not None])
            delay = max((retry_at or tx.now) - tx.now, 0.0) + self.sweep_seconds + 0.5
            busy_work.append(Work(NODES, trav.id, tuple(n.seq for n in busy), delay))
        timed_out = trav.deadline is not None and tx.now > trav.deadline
        return _Batch(trav, stack, definition, [n for n in nodes if n not in busy], records,
                      heads, busy_work, timed_out, gone, unmade)

    def _vanished(self, tx: Tx, trav: TraversalView, stack: StackView,
                  definition: StackDefinition | None, nodes: list[NodeView],
                  unclaimed: list[NodeView], records: dict[int, RecordView],
                  owner: str) -> tuple[list[NodeView], list[NodeView], list[NodeView]]:
        """Nodes whose record no longer exists (a superseded traversal deleted it after this
        one was planned): a cleanup node has nothing left to do (gone); a converge node works
        on the name's current record, or, when the name has none, on one made for it
        (unmade: see :meth:`_make_records`)."""
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
            claimed = tx.claim_records(list(found.values()), owner, tx.now + self.lease_seconds)
            self.leases.add(owner, claimed)
            records.update(claimed)
        unmade = [n for n in rebuild if n.name not in found]
        moved = {n.seq: dataclasses.replace(n, record_id=found[n.name]) for n in rebuild
                 if n.name in found}
        keep = [moved.get(n.seq, n) for n in nodes if n not in gone and n not in unmade]
        return keep, gone, unmade

    def _make_records(self, batch: _Batch, owner: str) -> None:
        """Records for the batch's converge nodes whose name has none, made in a transaction
        of their own that locks the stack first and only while this traversal is the stack's
        current one. A newer request's plan makes the name's record itself; two traversals
        making one each would create the resource twice."""
        trav, definition = batch.trav, batch.definition
        assert definition is not None
        with self.store.begin() as tx:
            stack = tx.stack(trav.stack_id, lock=True)
            if stack is None or stack.traversal_id != trav.id:
                return  # superseded: the current traversal has the name
            names = [n.name for n in batch.unmade]
            found = {name: r.id for name, r in tx.heads(stack.id, names).items()}
            new = [(n.name, definition.resource_types[n.name]) for n in batch.unmade
                   if n.name not in found]
            found.update(tx.insert_records(stack.id, new, _policies(definition, new)))
            claimed = tx.claim_records(list(found.values()), owner, tx.now + self.lease_seconds)
            self.leases.add(owner, claimed)
            for n in batch.unmade:
                tx.set_node_record(trav.id, n.seq, found[n.name])
            busy = [n.seq for n in batch.unmade if found[n.name] not in claimed]
            if busy:  # a record made meanwhile, held: as for any busy node
                retry_at = tx.lease_expiry([found[n.name] for n in batch.unmade])
                delay = max((retry_at or tx.now) - tx.now, 0.0) + self.sweep_seconds + 0.5
                batch.busy_work.append(Work(NODES, trav.id, tuple(busy), delay))
        batch.records.update(claimed)
        batch.nodes.extend(dataclasses.replace(n, record_id=found[n.name])
                           for n in batch.unmade if found[n.name] in claimed)
        batch.unmade = []

    def _steps(self, batch: _Batch, owner: str) -> list[StepResult]:
        results: list[StepResult] = [StepResult(n.seq, DONE) for n in batch.gone]
        trav, stack = batch.trav, batch.stack
        for node in batch.nodes:
            assert node.record_id is not None
            record = batch.records[node.record_id]
            token = record.fencing_token
            if self.stopping.is_set():
                # This process was told to stop: the steps not started yet are let go of at
                # the batch's commit, and offered to the other workers at once.
                results.append(StepResult(node.seq, RELEASED,
                                          [RecordChange(record.id, token, {})]))
                continue
            # Every claim adds one to the token: more than one means someone claimed before.
            inp = StepInput(stack=stack, traversal_id=trav.id, generation=trav.generation,
                            template_id=trav.template_id, definition=batch.definition,
                            node=node, record=record, token=token, heads=batch.heads,
                            worked_on=token > 1, owner=owner,
                            lease_good=lambda: self.leases.good(owner))
            if batch.timed_out:
                results.append(self.stepper.fail(
                    inp, record, token, record.action if record.action != "INIT" else "CREATE",
                    "Timed out"))
                continue
            started = time.perf_counter()
            with bind(stack=stack.id, generation=trav.generation, resource=node.name,
                      node=node.seq):
                results.append(self.stepper.run(inp))
            if self.on_step is not None:
                self.on_step(time.perf_counter() - started)
        self.stats.nodes += len(results)
        return results

    def _reoffer(self, tx: Tx, traversal_id: str, nodes: Sequence[NodeView]) -> list[Work]:
        """Ready successors of done nodes that have waited a while (their message may be lost;
        the ones made ready a moment ago are surely still on their way)."""
        successors = {s for n in nodes if n.state == DONE_STATE for s in n.successors}
        grace = min(self.lease_seconds, 5.0)
        ready = [n.seq for n in tx.nodes(traversal_id, successors)
                 if n.state == READY and tx.now - n.updated_at > grace]
        return list(batches(traversal_id, ready, self.batch_size))

    def _definition(self, trav: TraversalView, tx: Tx) -> StackDefinition | None:
        if trav.template_id is None:
            return None
        return self.definitions.get(trav.template_id, tx.template)

    def _record(self, batch: _Batch, results: list[StepResult], owner: str,
                go_on: bool) -> tuple[list[Work], _Batch | None]:
        """The batch's one writing transaction; returns the follow-up work, and the next
        batch (its successors, already claimed) when ``go_on`` and there are any."""
        if not results:
            return [], None
        for r in results:
            self.stats.by_outcome[r.outcome] += 1
        # Locks are taken in one order everywhere: the stack, then resources, then nodes, then
        # the traversal. A failure may roll the stack back, so its stack is locked first.
        failing = any(r.outcome == FAILED for r in results)
        # A deadlock's victim (PostgreSQL picks one) is recorded again, from the start, at
        # once: the results are in hand and the leases still held.
        follow, nxt, told = self.store.transact(
            lambda tx: self._record_in(tx, batch, results, owner, go_on, failing))
        if told:
            self._tell_observers()
        return merge(follow, self.batch_size), nxt

    def _record_in(self, tx: Tx, batch: _Batch, results: list[StepResult], owner: str,
                   go_on: bool, failing: bool) -> tuple[list[Work], _Batch | None, bool]:
        """The body of :meth:`_record`: the follow-up work, the next batch, and whether any
        event was written."""
        trav = batch.trav
        if failing:
            tx.stack(trav.stack_id, lock=True)
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
                self.stats.fenced_off += 1
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
        follow, nxt = self._account(tx, now_trav, now_stack, kept, owner, go_on)
        return follow, nxt, bool(events)

    def _unwatched(self, tx: Tx, stack: StackView, kept: list[StepResult]) -> list[NewEvent]:
        """A superseded step that leaves its resource waiting on an operation, in a stack with
        no traversal running (cancelled without rollback, reset, failed meanwhile): nobody
        will poll the operation, so the resource is FAILED, as the cancel did to the ones
        nobody held, and an event says so."""
        if stack.status == "IN_PROGRESS":
            return []
        waiting = [r.changes[0].record_id for r in kept
                   if r.changes and r.outcome in (PENDING, RETRY)]
        return abandon_operations(tx, stack, waiting)

    def _abandon_polled(self, tx: Tx, stack: StackView, traversal_id: str,
                        seqs: Sequence[int], expect: int) -> None:
        """A poll for a traversal that stopped, of a stack with none running: the step that
        sent it recorded its operation as under way just as the stack stopped (it read the
        stack a moment before), and nobody else will poll it."""
        if stack.status == "IN_PROGRESS":
            return
        ids = [n.record_id for n in tx.nodes(traversal_id, seqs) if n.record_id is not None]
        mine = [i for i, token in tx.tokens(ids).items() if token == expect]
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

    def _orphan(self, batch: _Batch, result: StepResult) -> NewOrphan | None:
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
        # The new version of a replaced resource, inserted by the step: it named nothing.
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
            delay = min(max(result.delay, 0.0), self.max_poll_delay)
            changes = [dataclasses.replace(changes[0], watch=delay + self.lease_seconds),
                       *changes[1:]]
        return changes

    def _hand_over(self, tx: Tx, stack: StackView, record_ids: Sequence[int]) -> list[Work]:
        """The current traversal's ready nodes for records a superseded step just wrote: a
        node that found its record busy is waiting for exactly this."""
        self.stats.handed_over += len(record_ids)
        if not stack.traversal_id or not record_ids:
            return []
        seqs = tx.current_nodes_of(stack.traversal_id, record_ids)
        return list(batches(stack.traversal_id, seqs, self.batch_size))

    def _account(self, tx: Tx, trav: TraversalView, stack: StackView,
                 results: list[StepResult], owner: str,
                 go_on: bool) -> tuple[list[Work], _Batch | None]:
        """Nodes done or failed, successors released, the traversal's counters; a failure
        rolls back at once when the stack asks for it."""
        follow: list[Work] = []
        done: list[int] = []
        failed: list[int] = []
        released: list[int] = []
        failure = ""
        for r in results:
            if r.outcome == DONE:
                done.append(r.seq)
            elif r.outcome == RELEASED:
                released.append(r.seq)
            elif r.outcome == FAILED:
                failed.append(r.seq)
                failure = failure or r.reason
            elif r.outcome in (PENDING, RETRY):
                self.stats.polls += 1
                delay = min(max(r.delay, 0.0), self.max_poll_delay)
                follow.append(Work(NODES, trav.id, (r.seq,), delay, r.changes[0].token
                                   if r.changes else None))
        finished_nodes = tx.finish_nodes(trav.id, done, DONE_STATE)
        done = [n.seq for n in finished_nodes]
        failed = [n.seq for n in tx.finish_nodes(trav.id, failed, FAILED_STATE)]
        if failed and self._rolls_back(stack, trav):
            return self._roll_back(tx, stack, trav, failure), None
        successors: Counter[int] = Counter()
        for node in finished_nodes:
            successors.update(node.successors)
        ready = tx.release_successors(trav.id, successors)
        skipped = tx.skip_descendants(trav.id, failed) if failed else 0
        nxt: _Batch | None = None
        if go_on and ready:
            # Claimed before the traversal's row is counted: resources before the traversal,
            # the order every transaction locks them in. (Released nodes are not done: a
            # traversal with ready ones is not finished.)
            take, ready = ready[:self.batch_size], ready[self.batch_size:]
            nxt = self._prepare(tx, trav, stack, tx.nodes(trav.id, take), owner, inline=True)
        finished = False
        if done or failed or skipped:
            remaining = tx.count_done(trav.id, len(done) + skipped, len(failed), failure)
            finished = remaining <= 0
        follow.extend(batches(trav.id, ready + released, self.batch_size))
        if finished:
            follow.append(Work(FINISH, trav.id))
        return follow, nxt

    @staticmethod
    def _rolls_back(stack: StackView, trav: TraversalView) -> bool:
        return not stack.disable_rollback and trav.action in ("CREATE", "UPDATE")

    def _roll_back(self, tx: Tx, stack: StackView, trav: TraversalView,
                   failure: str) -> list[Work]:
        """The traversal failed: say so, then start the rollback that supersedes it."""
        locked = tx.stack(stack.id, lock=True)  # a request committed since is not overruled
        if locked is None or locked.traversal_id != trav.id:
            return []
        reason = f"Resource {trav.action} failed: {failure}"
        tx.end_traversal(trav.id, TRAVERSAL_FAILED)
        tx.update_stack(stack.id, status="FAILED", status_reason=reason,
                        observed_generation=trav.generation)
        tx.add_events(stack.id, trav.id, trav.generation, [
            stack_event(stack, trav.action, "FAILED", reason)])
        failed = tx.stack(stack.id)
        assert failed is not None
        rollback = begin_rollback(tx, failed, f"Rolling back: {reason}")
        return [Work(PLAN, rollback)]

    # finishing ------------------------------------------------------------------------------
    def finish(self, traversal_id: str) -> list[Work]:
        """Set the stack's outcome: status, reason, outputs, observed generation (or, for a
        failure the stack wants rolled back, start the rollback)."""
        follow: list[Work] = []
        with self.store.begin() as tx:
            trav = tx.traversal(traversal_id)
            if trav is None or trav.state != RUNNING:
                return []
            stack = tx.stack(trav.stack_id, lock=True)
            if stack is None or stack.traversal_id != trav.id:
                return []
            trav = tx.traversal(traversal_id)  # again, under the stack's lock: a copy of
            if trav is None or trav.state != RUNNING:  # this message may have finished it
                return []
            ok = trav.nodes_failed == 0 and not trav.failure
            self.finishes += 1
            if not ok and self._rolls_back(stack, trav):
                follow = self._roll_back(tx, stack, trav, trav.failure)
            else:
                self._conclude(tx, stack, trav, ok)
        self._tell_observers()
        return follow

    def _tell_observers(self) -> None:
        for observer in list(self.observers):
            observer()

    def _conclude(self, tx: Tx, stack: StackView, trav: TraversalView, ok: bool) -> None:
        status = "COMPLETE" if ok else "FAILED"
        values: dict[str, object] = {
            "action": trav.action, "status": status,
            "status_reason": f"Stack {trav.action} completed successfully" if ok
            else f"Resource {trav.action} failed: {trav.failure}",
            "observed_generation": trav.generation,
        }
        if ok:
            if trav.action != "ROLLBACK":  # a rollback's target is the one it went back to
                values["rollback_template_id"] = trav.template_id
            values["outputs"] = self._outputs(tx, stack, trav)
            if trav.action == "DELETE":
                values["deleted_at"] = tx.now
        if tx.finish_stack(stack.id, trav.id, **values):
            if not ok:
                # An operation started by an earlier traversal, whose node here was skipped
                # after the failure, has nobody left to watch it: say so rather than show it
                # in progress (the next traversal finds what it made by the record's key).
                # Resources before the traversal's row: the order every transaction keeps.
                tx.fail_pending_operations(
                    stack.id, f"abandoned: Stack {trav.action} failed")
            tx.end_traversal(trav.id, COMPLETE if ok else TRAVERSAL_FAILED)
            tx.add_events(stack.id, trav.id, trav.generation, [
                stack_event(stack, trav.action, status, str(values["status_reason"]))])

    def _outputs(self, tx: Tx, stack: StackView, trav: TraversalView) -> dict[str, object]:
        if trav.template_id is None:
            return {}
        definition = self.definitions.get(trav.template_id, tx.template)
        names = {ref.target for out in definition.template.outputs.values()
                 for ref in out.references}
        resolver = definition.resolver(StackIdentity(stack.name, stack.id, stack.tenant),
                                       data=RecordData(tx.heads(stack.id, names)))
        outputs: dict[str, object] = {}
        for name, out in definition.template.outputs.items():
            try:
                if not resolver.is_enabled(out.condition):
                    continue
                outputs[name] = {"value": resolver.output(name),
                                 "description": out.description or ""}
            except (TemplateError, UnknownValue) as exc:
                outputs[name] = {"value": None, "description": out.description or "",
                                 "error": str(exc)}
        return outputs

    # recovery -------------------------------------------------------------------------------
    def time_out(self, traversal_id: str) -> list[Work]:
        """A traversal past its deadline (found by the sweeper): it fails, and finishing it
        rolls back or not as the stack asks. Steps still running record what they did and
        hand over, as for any traversal that is no longer running."""
        with self.store.begin() as tx:
            trav = tx.traversal(traversal_id, lock=True)
            if trav is None or trav.deadline is None or tx.now <= trav.deadline:
                return []
            if trav.state == PLANNING:
                tx.start_running(trav.id, 0)
            elif trav.state != RUNNING:
                return []
            tx.count_done(trav.id, 0, 0, "Timed out")
        return [Work(FINISH, traversal_id)]

    def resume(self, traversal_id: str) -> list[Work]:
        """Work that re-drives a traversal from the database (after a crash or a Ctrl-C)."""
        with self.store.begin() as tx:
            trav = tx.traversal(traversal_id)
            if trav is None:
                return []
            if trav.state == PLANNING:
                return [Work(PLAN, trav.id)]
            if trav.state != RUNNING:
                return []
            ready = tx.ready_nodes(trav.id)
            remaining = trav.nodes_remaining
        if remaining <= 0:
            return [Work(FINISH, traversal_id)]
        return list(batches(traversal_id, ready, self.batch_size))


