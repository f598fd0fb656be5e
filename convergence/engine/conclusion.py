"""Ending traversals: the stack's outcome and outputs, a deadline passed, a traversal resumed.

Called through :class:`~convergence.engine.engine.Engine`: :meth:`Concluder.finish` for a
``finish`` work item (sent by the batch that counted the last node off, or by the sweeper for
one whose message was lost); :meth:`Concluder.time_out` by the sweeper, for a traversal past
its deadline; :meth:`Concluder.resume` by the services (``convergence.services``), to drive a
traversal on from the database after a crash or a Ctrl-C. Finishing sets the stack's status,
reason, outputs (resolved from the records, :mod:`convergence.engine.stackdata`) and observed
generation, or, for a failure the stack wants rolled back, starts the rollback
(:func:`convergence.engine.accounting.roll_back`).
"""

from __future__ import annotations

from convergence.engine.accounting import roll_back, rolls_back
from convergence.engine.context import EngineContext
from convergence.engine.nesting import wake_parent
from convergence.engine.stackdata import RecordData
from convergence.engine.traversals import stack_event, stop_children
from convergence.engine.trusts import release_trust
from convergence.ports.store import Tx
from convergence.ports.views import (
    COMPLETE,
    PLANNING,
    RUNNING,
    TRAVERSAL_FAILED,
    StackView,
    TraversalView,
)
from convergence.ports.work import FINISH, PLAN, Work, batches
from convergence.template import StackIdentity, TemplateError, UnknownValue


class Concluder:
    """Ends the traversals of one engine (see the module's docstring)."""

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx

    def finish(self, traversal_id: str) -> list[Work]:
        """Set the stack's outcome: status, reason, outputs, observed generation (or, for a
        failure the stack wants rolled back, start the rollback)."""
        follow: list[Work] = []
        with self.ctx.store.begin() as tx:
            trav = tx.traversal(traversal_id)
            if trav is None or trav.state != RUNNING:
                return []
            stack = tx.stack(trav.stack_id, lock=True, outputs=False)
            if stack is None or stack.traversal_id != trav.id:
                return []
            trav = tx.traversal(traversal_id)  # again, under the stack's lock: a copy of
            if trav is None or trav.state != RUNNING:  # this message may have finished it
                return []
            ok = trav.nodes_failed == 0 and not trav.failure
            self.ctx.finishes += 1
            if not ok and rolls_back(stack, trav):
                follow = roll_back(tx, stack, trav, trav.failure)
            elif self._conclude(tx, stack, trav, ok):
                # A nested stack's end wakes its parent's resource, in this transaction.
                ended = tx.stack(stack.id, outputs=False)
                follow = wake_parent(tx, ended) if ended is not None else []
            gone = ok and trav.action == "DELETE"
        if gone:  # its trust goes with it (what cannot now, the sweeper deletes)
            release_trust(self.ctx, stack)
        self.ctx.tell_observers()
        return follow

    def _conclude(self, tx: Tx, stack: StackView, trav: TraversalView, ok: bool) -> bool:
        status = "COMPLETE" if ok else "FAILED"
        secret: frozenset[str] = frozenset()  # the outputs the store keeps encrypted
        values: dict[str, object] = {
            "action": trav.action, "status": status,
            "status_reason": f"Stack {trav.action} completed successfully" if ok
            else f"Resource {trav.action} failed: {trav.failure}",
            "observed_generation": trav.generation,
        }
        if ok:
            # A rollback's target is the one it went back to; a check changed nothing.
            if trav.action not in ("ROLLBACK", "CHECK"):
                values["rollback_template_id"] = trav.template_id
            replaced = stack.rollback_template_id
            if trav.action == "UPDATE" and replaced is not None and \
                    replaced != trav.template_id:
                # The stack has moved on from it: its definition goes now, not when this
                # process's cache is full (a group of a million members would otherwise
                # hold both templates' definitions, a GiB each, through the outputs below).
                self.ctx.definitions.forget(replaced)
            values["outputs"], secret = self._outputs(tx, stack, trav)
            if trav.action == "DELETE":
                values["deleted_at"] = tx.now
        if tx.finish_stack(stack.id, trav.id, secret_outputs=secret, **values):
            if not ok:
                # An operation started by an earlier traversal, whose node here was skipped
                # after the failure, has nobody left to watch it: say so rather than show it
                # in progress (the next traversal finds what it made by the record's key).
                # Resources before the traversal's row: the order every transaction keeps.
                tx.fail_pending_operations(
                    stack.id, f"abandoned: Stack {trav.action} failed")
                stop_children(tx, stack, f"Stack {trav.action} failed")
            tx.end_traversal(trav.id, COMPLETE if ok else TRAVERSAL_FAILED)
            tx.add_events(stack.id, trav.id, trav.generation, [
                stack_event(stack, trav.action, status, str(values["status_reason"]))])
            return True
        return False

    def _outputs(self, tx: Tx, stack: StackView, trav: TraversalView
                 ) -> tuple[dict[str, object], frozenset[str]]:
        """The stack's outputs, and those whose values are secrets."""
        if trav.template_id is None:
            return {}, frozenset()
        definition = self.ctx.definitions.get(trav.template_id, tx.template)
        names = {ref.target for out in definition.template.outputs.values()
                 for ref in out.references}
        resolver = definition.resolver(StackIdentity(stack.name, stack.id, stack.tenant),
                                       data=RecordData(tx.head_values(stack.id, names)))
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
        return outputs, self.ctx.secrets.outputs(definition, trav.template_id)

    def time_out(self, traversal_id: str) -> list[Work]:
        """A traversal past its deadline (found by the sweeper): it fails, and finishing it
        rolls back or not as the stack asks. Steps still running record what they did and
        hand over, as for any traversal that is no longer running."""
        with self.ctx.store.begin() as tx:
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
        with self.ctx.store.begin() as tx:
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
        return list(batches(traversal_id, ready, self.ctx.batch_size))
