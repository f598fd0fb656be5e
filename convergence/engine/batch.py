"""Running a batch of nodes: claim, step, record; then on with what it released, inline.

Called by :meth:`Engine.run_nodes <convergence.engine.engine.Engine.run_nodes>` (a ``nodes``
work item from a dispatcher, or a poll). A batch costs two short transactions whatever its
size: one that checks the work item is still wanted and claims the nodes' records
(:mod:`convergence.engine.claim`), one that records every result
(:mod:`convergence.engine.recording`), which also claims the successors it released so that
the worker goes on with them while ``inline_seconds`` last (one commit per hop). The steps
(:mod:`convergence.engine.step`) run between the two, with no transaction open and no
database access of their own; the only other transactions are the rare ones that make
records: for nodes whose record vanished (:meth:`Claimer.make_records
<convergence.engine.claim.Claimer.make_records>`), and for the steps that must replace their
resource, whose new versions are made together, under the stack's lock, before those steps go
on against them (:meth:`BatchRunner._make_versions`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from convergence.engine.claim import Batch, Claimer
from convergence.engine.context import EngineContext
from convergence.engine.deletion import definition_policy
from convergence.engine.recording import Recorder
from convergence.engine.step import (
    DONE,
    RELEASED,
    REPLACE,
    Replacement,
    StepInput,
    Stepper,
    StepResult,
)
from convergence.logs import bind
from convergence.ports.store import Tx
from convergence.ports.views import READY, RUNNING, RecordChange, RecordView
from convergence.ports.work import Work, merge


class BatchRunner:
    """Runs batches of one engine (see the module's docstring)."""

    def __init__(self, ctx: EngineContext, stepper: Stepper, claimer: Claimer,
                 recorder: Recorder) -> None:
        self.ctx = ctx
        self.stepper = stepper
        self.claimer = claimer
        self.recorder = recorder

    def run_nodes(self, traversal_id: str, seqs: Sequence[int],
                  expects: Sequence[int] | None = None) -> list[Work]:
        """Run a batch; while ``inline_seconds`` last, go on with the successors it released,
        claiming them in the same transaction that recorded the batch (one commit per hop)."""
        ctx = self.ctx
        owner = ctx.owner()
        # While this runs, the leases it claims are renewed (and known lost if taken over).
        with ctx.leases.holding(owner):
            with ctx.store.begin() as tx:
                trav, stack = tx.traversal_and_stack(traversal_id)
                if trav is None or stack is None or trav.state != RUNNING or \
                        stack.traversal_id != trav.id:
                    ctx.stats.stale += 1
                    if expects is not None and stack is not None:
                        self.recorder.abandon_polled(tx, stack, traversal_id, seqs, expects)
                    return []
                if expects is not None:
                    seqs = self._still_due(tx, traversal_id, seqs, expects)
                    if not seqs:
                        ctx.stats.stale += 1  # duplicates of polls someone already made
                        return []
                loaded = tx.nodes(trav.id, seqs)
                if not any(n.state == READY for n in loaded):
                    # A redelivered message for work already done: the worker that did it may
                    # have died before passing its ready successors on, so offer them again.
                    return self.claimer.reoffer(tx, trav.id, loaded)
                batch = self.claimer.prepare(tx, trav, stack, loaded, owner)
            if batch is not None and batch.unmade:
                self.claimer.make_records(batch, owner)
            deadline = time.monotonic() + ctx.inline_seconds
            follow: list[Work] = []
            while batch is not None:
                follow.extend(batch.busy_work)
                results = self._steps(batch, owner)
                go_on = time.monotonic() < deadline and not ctx.stopping.is_set()
                recorded = {*batch.records, *(c.record_id for r in results for c in r.changes)}
                ctx.leases.leaving(owner, recorded)
                more, batch = self.recorder.record(batch, results, owner, go_on=go_on)
                # Recorded: their leases are let go of (the next batch's are in hand).
                ctx.leases.drop(owner, recorded - set(batch.records if batch else ()))
                follow.extend(more)
        return merge(follow, ctx.batch_size)

    @staticmethod
    def _still_due(tx: Tx, traversal_id: str, seqs: Sequence[int],
                   expects: Sequence[int]) -> list[int]:
        """The polled nodes whose record still has the token the poll was scheduled with:
        a newer one means someone polled it already (a duplicated delivery)."""
        wanted = dict(zip(seqs, expects, strict=True))
        nodes = tx.nodes(traversal_id, seqs)
        tokens = tx.tokens([n.record_id for n in nodes if n.record_id is not None])
        return [n.seq for n in nodes
                if n.record_id is not None and tokens.get(n.record_id) == wanted[n.seq]]

    def _steps(self, batch: Batch, owner: str) -> list[StepResult]:
        """Every node's step, in the batch's order; a step that asked for a replacement goes
        on, in its place, once the new versions are made (:meth:`_replace`)."""
        ctx = self.ctx
        results: list[StepResult] = [StepResult(n.seq, DONE) for n in batch.gone]
        # Steps that asked for a replacement: where their result goes, what they read, and the
        # seconds they took so far (a step's time is told once, when it is over).
        replacing: list[tuple[int, StepInput, float]] = []
        trav, stack = batch.trav, batch.stack
        for node in batch.nodes:
            assert node.record_id is not None
            record = batch.records[node.record_id]
            token = record.fencing_token
            if ctx.stopping.is_set():
                # This process was told to stop: the steps not started yet are let go of at
                # the batch's commit, and offered to the other workers at once.
                results.append(StepResult(node.seq, RELEASED,
                                          [RecordChange(record.id, token, {})]))
                continue
            # Every claim adds one to the token: more than one means someone claimed before.
            inp = StepInput(stack=stack, traversal_id=trav.id, generation=trav.generation,
                            template_id=trav.template_id, definition=batch.definition,
                            node=node, record=record, token=token, heads=batch.heads,
                            worked_on=token > 1, lease_good=lambda: ctx.leases.good(owner),
                            action=trav.action, observe=trav.observe)
            if batch.timed_out:
                results.append(self.stepper.fail(
                    inp, record, token, record.action if record.action != "INIT" else "CREATE",
                    "Timed out"))
                continue
            started = time.perf_counter()
            with bind(stack=stack.id, generation=trav.generation, resource=node.name,
                      node=node.seq):
                result = self.stepper.run(inp)
            seconds = time.perf_counter() - started
            if result.outcome == REPLACE:
                replacing.append((len(results), inp, seconds))
            elif ctx.on_step is not None:
                ctx.on_step(seconds)
            results.append(result)
        if replacing:
            self._replace(batch, owner, results, replacing)
        ctx.stats.nodes += len(results)
        return results

    def _replace(self, batch: Batch, owner: str, results: list[StepResult],
                 replacing: list[tuple[int, StepInput, float]]) -> None:
        """The steps that asked for a replacement: their new records made (one transaction),
        then each step gone on with against its new record, its result put in its place."""
        ctx = self.ctx
        wanted: list[tuple[StepInput, Replacement]] = []
        for i, inp, _ in replacing:
            needed = results[i].replacement
            assert needed is not None
            wanted.append((inp, needed))
        failure: Exception | None = None
        made: dict[int, RecordView] = {}
        try:
            made = self._make_versions(batch, owner, wanted)
        except Exception as exc:  # as a step that raised: each of them fails, or it is raised
            failure = exc
        for (i, inp, seconds), (_, needed) in zip(replacing, wanted, strict=True):
            started = time.perf_counter()
            with bind(stack=batch.stack.id, generation=batch.trav.generation,
                      resource=inp.node.name, node=inp.node.seq):
                results[i] = self.stepper.crashed(inp, failure) if failure is not None \
                    else self.stepper.replace(inp, needed, made.get(inp.node.seq))
            if ctx.on_step is not None:
                ctx.on_step(seconds + time.perf_counter() - started)

    def _make_versions(self, batch: Batch, owner: str,
                       wanted: list[tuple[StepInput, Replacement]]) -> dict[int, RecordView]:
        """The new version of each record to replace, by node: inserted (fenced on the old
        record's token), claimed for the batch's owner and pointed at by the node. Locked: a
        traversal planned after this commit sees the new versions, and one that superseded
        this traversal before it makes none. Missing from the answer: the old record was
        fenced off, or the traversal superseded (the current one takes it from here)."""
        ctx = self.ctx
        trav = batch.trav
        with ctx.store.begin() as tx:
            stack = tx.stack(batch.stack.id, lock=True, outputs=False)
            if stack is None or stack.traversal_id != trav.id:
                return {}
            new_ids: dict[int, int] = {}
            for inp, needed in wanted:
                policy = definition_policy(inp.definition, inp.record.name) \
                    if inp.definition is not None else None
                new_id = tx.insert_replacement(inp.record, inp.token, needed.rtype, policy)
                if new_id is not None:
                    new_ids[inp.node.seq] = new_id
            if not new_ids:
                return {}
            claimed = tx.claim_records(list(new_ids.values()), owner,
                                       tx.now + ctx.lease_seconds)
            ctx.leases.add(owner, claimed)
            added = 0
            for inp, _ in wanted:
                seq = inp.node.seq
                if seq in new_ids:
                    tx.set_node_record(trav.id, seq, new_ids[seq])
                    # The old version is deleted by this traversal, after its resource
                    # converged: one made while it ran has no cleanup node of its plan yet.
                    added += tx.add_cleanup_node(trav.id, seq, inp.record.id, inp.record.name)
            if added:
                tx.count_added(trav.id, added)  # the traversal's row last, as ever
            return {seq: claimed[new_id] for seq, new_id in new_ids.items()}
