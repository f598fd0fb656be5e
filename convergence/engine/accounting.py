"""Counting a batch off its traversal: nodes done or failed, successors released, rollback.

Called by the recorder (:mod:`convergence.engine.recording`), inside the transaction that
recorded the batch's results, for a traversal that is still the stack's current one; the
rollback functions are also called by the conclusion (:mod:`convergence.engine.conclusion`)
for a traversal that finished failed. Locks are taken in the order every transaction keeps:
the stack (when a failure may roll it back), the resources (successors claimed for the next
inline batch), the nodes, and the traversal's row last (its counters).
"""

from __future__ import annotations

from collections import Counter

from convergence.engine.claim import Batch, Claimer
from convergence.engine.context import EngineContext, next_step_delay
from convergence.engine.step import DONE, FAILED, PARKED, PENDING, RELEASED, RETRY, StepResult
from convergence.engine.traversals import begin_rollback, stack_event
from convergence.ports.store import Tx
from convergence.ports.views import DONE as DONE_STATE
from convergence.ports.views import FAILED as FAILED_STATE
from convergence.ports.views import READY, TRAVERSAL_FAILED, NodeView, StackView, TraversalView
from convergence.ports.work import FINISH, NODES, PLAN, Work, batches, polls

POLLS_PER_MESSAGE = 25
# Levels of kept cleanup nodes done in one transaction (``Accountant._keep_in_place``); the
# ones made ready past them are stepped, and their batch goes on from there.
KEPT_ROUNDS = 16


def rolls_back(stack: StackView, trav: TraversalView) -> bool:
    """Whether a failure of this traversal rolls the stack back (as the stack asks)."""
    return not stack.disable_rollback and trav.action in ("CREATE", "UPDATE")


def roll_back(tx: Tx, stack: StackView, trav: TraversalView, failure: str) -> list[Work]:
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


class Accountant:
    """Counts batches off the traversals of one engine (see the module's docstring)."""

    def __init__(self, ctx: EngineContext, claimer: Claimer) -> None:
        self.ctx = ctx
        self.claimer = claimer

    def account(self, tx: Tx, trav: TraversalView, stack: StackView,
                results: list[StepResult], owner: str,
                go_on: bool) -> tuple[list[Work], Batch | None]:
        """Nodes done or failed, successors released, the traversal's counters; a failure
        rolls back at once when the stack asks for it. Returns the follow-up work and, when
        ``go_on``, the next batch: released successors already claimed for ``owner``."""
        ctx = self.ctx
        follow: list[Work] = []
        done: list[int] = []
        failed: list[int] = []
        released: list[int] = []
        parked: list[int] = []  # waiting on an event of the engine's own: no poll
        wake_at: dict[int, float] = {}  # parked, until then at the latest
        failure = ""
        due: list[tuple[int, int, float]] = []  # polls: (seq, fencing token, delay)
        check_failed: set[int] = set()  # checked, found wrong: done, but counted as failed
        for r in results:
            if r.outcome == DONE:
                done.append(r.seq)
                if r.check_failed:
                    check_failed.add(r.seq)
                    failure = failure or r.reason
            elif r.outcome == RELEASED:
                released.append(r.seq)
            elif r.outcome == PARKED:
                parked.append(r.seq)
                if r.delay > 0:
                    wake_at[r.seq] = tx.now + r.delay
            elif r.outcome == FAILED:
                failed.append(r.seq)
                failure = failure or r.reason
            elif r.outcome in (PENDING, RETRY):
                ctx.stats.polls += 1
                delay = next_step_delay(r.outcome, r.delay, ctx.max_poll_delay)
                if r.changes:
                    due.append((r.seq, r.changes[0].token, delay))
                else:  # nothing of its record was touched: no token to check it by
                    follow.append(Work(NODES, trav.id, (r.seq,), delay))
        # Polls share messages, but fewer to a message than a batch: a poll that finds its
        # resource done reads it whole (a server: several calls), and a batch of them in one
        # message would be read one after the other while other workers wait idle.
        follow.extend(polls(trav.id, due, min(ctx.batch_size, POLLS_PER_MESSAGE)))
        if parked:
            # Woken while their step ran (the event came first): stepped again at once.
            released.extend(tx.park_nodes(trav.id, parked, wake_at))
        finished_nodes = tx.finish_nodes(trav.id, done, DONE_STATE)
        done = [n.seq for n in finished_nodes]
        failed_nodes = tx.finish_nodes(trav.id, failed, FAILED_STATE)
        failed = [n.seq for n in failed_nodes]
        if failed and rolls_back(stack, trav):
            return roll_back(tx, stack, trav, failure), None
        successors: Counter[int] = Counter()
        for node in finished_nodes:
            successors.update(node.successors)
        for node in failed_nodes:
            # The cleanups of versions it replaced as it ran (a create's failed attempts;
            # negative seqs) still run: what failed is deleted even though the node failed.
            successors.update(s for s in node.successors if s < 0)
        ready, kept = self._keep_in_place(tx, trav, finished_nodes,
                                          tx.release_successors(trav.id, successors))
        done.extend(kept)
        skipped = tx.skip_descendants(trav.id, failed) if failed else 0
        nxt: Batch | None = None
        if go_on and ready:
            # Claimed before the traversal's row is counted: resources before the traversal,
            # the order every transaction locks them in. (Released nodes are not done: a
            # traversal with ready ones is not finished.)
            take, ready = ready[:ctx.batch_size], ready[ctx.batch_size:]
            nxt = self.claimer.prepare(tx, trav, stack, take, owner, inline=True)
        finished = False
        if done or failed or skipped:
            checked_wrong = len(check_failed.intersection(done))
            remaining = tx.count_done(trav.id, len(done) + skipped - checked_wrong,
                                      len(failed) + checked_wrong, failure)
            finished = remaining <= 0
        follow.extend(batches(trav.id, [n.seq for n in ready] + released, ctx.batch_size))
        if finished:
            follow.append(Work(FINISH, trav.id))
        return follow, nxt

    @staticmethod
    def _keep_in_place(tx: Tx, trav: TraversalView, finished: list[NodeView],
                       ready: list[NodeView]) -> tuple[list[NodeView], list[int]]:
        """The cleanup nodes, among those just made ready, of records their converge node
        kept in place (in this batch or an earlier one): done at once, and their successors
        released, and so on down while such nodes are made ready (at most
        :data:`KEPT_ROUNDS` times); returns the ready nodes left, in seq order, and the ones
        done so.

        Such a node's step would do nothing: its record is the one the template keeps,
        converged and not replaced (a replaced record's converge node has moved to the new
        version). Stepping it would claim the record, step and record it for nothing: half
        the cost of an update that changes every resource in place (a layered one: the
        cleanups wait for those of what was built on them, long after their converge). Done
        here, in the same transaction, their successors (the cleanups of what the records
        required) wait for exactly what they waited for before."""
        if trav.action == "DELETE":  # cleanup nodes only: nothing converged
            return ready, []
        in_place = {n.record_id for n in finished
                    if n.phase == "converge" and n.record_id is not None}
        kept: list[int] = []
        fresh = ready  # the nodes made ready that were not looked at yet
        for _ in range(KEPT_ROUNDS):
            cleanups = [n for n in fresh if n.phase == "cleanup" and n.state == READY]
            if not cleanups:
                break
            unknown = [n.record_id for n in cleanups
                       if n.record_id is not None and n.record_id not in in_place]
            if unknown:
                in_place |= tx.converged_in_place(trav.id, unknown)
            idle = [n.seq for n in cleanups if n.record_id in in_place]
            if not idle:
                break
            done = tx.finish_nodes(trav.id, idle, DONE_STATE)
            kept.extend(n.seq for n in done)
            successors: Counter[int] = Counter()
            for node in done:
                successors.update(node.successors)
            gone = set(idle)
            fresh = tx.release_successors(trav.id, successors)
            ready = sorted([*(n for n in ready if n.seq not in gone), *fresh],
                           key=lambda n: n.seq)
        return ready, kept
