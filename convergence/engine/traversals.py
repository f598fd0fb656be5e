"""Starting, superseding and stopping traversals: the one place a stack's generation moves.

Callers: ``convergence.services`` (every accepted request) and the engine (a failure that rolls
back: :mod:`convergence.engine.accounting`; the stack's events of a traversal's end:
:mod:`convergence.engine.conclusion`). Each function works inside the caller's transaction,
so the new generation, the traversal row, the stack's status and the events that tell the
story commit together.
"""

from __future__ import annotations

from convergence.engine.nesting import wake_parent
from convergence.ports.store import Tx
from convergence.ports.views import TRAVERSAL_FAILED, NewEvent, StackView
from convergence.ports.work import Work

STACK_TYPE = "OS::Heat::Stack"
# An event status of our own (Heat has none for it): the traversal of ``generation`` stopped
# because a newer request took over; its reason names the newer generation.
SUPERSEDED_STATUS = "SUPERSEDED"


def stack_event(stack: StackView, action: str, status: str, reason: str) -> NewEvent:
    return NewEvent(stack.name, stack.id, STACK_TYPE, action, status, reason)


def _supersede(tx: Tx, stack: StackView, generation: int, keep: str) -> None:
    """Stop the stack's running traversal (if any), saying so in its own generation."""
    tx.supersede_traversals(stack.id, keep=keep)
    if stack.status == "IN_PROGRESS" and stack.traversal_id:
        tx.add_events(stack.id, stack.traversal_id, stack.generation, [stack_event(
            stack, stack.action, SUPERSEDED_STATUS,
            f"Stack {stack.action} (generation {stack.generation}) superseded by "
            f"generation {generation}")])


def begin_traversal(tx: Tx, stack: StackView, action: str, template_id: str | None, *,
                    stack_template_id: str | None = None, reason: str = "",
                    observe: bool = False) -> str:
    """Start a traversal toward the stack's next generation; it supersedes the running one.

    ``template_id`` is what the traversal converges to (None: nothing, every resource goes);
    ``stack_template_id`` is what the stack records as its template (default: the traversal's,
    or the one it has when the traversal has none); ``observe``: its steps look at the cloud
    before they decide (a CHECK; an update that converges with observed reality).
    """
    generation = stack.generation + 1
    deadline = tx.now + stack.timeout_mins * 60 if stack.timeout_mins else None
    traversal_id = tx.insert_traversal(stack.id, generation, action, template_id, deadline,
                                       observe)
    _supersede(tx, stack, generation, keep=traversal_id)
    reason = reason or f"Stack {action} started"
    tx.update_stack(stack.id, generation=generation, traversal_id=traversal_id,
                    template_id=stack_template_id or template_id or stack.template_id,
                    action=action, status="IN_PROGRESS", status_reason=reason)
    tx.add_events(stack.id, traversal_id, generation, [
        stack_event(stack, action, "IN_PROGRESS", reason)])
    return traversal_id


def begin_rollback(tx: Tx, stack: StackView, reason: str) -> str:
    """Roll the stack back to the last template that converged (none: remove everything)."""
    return begin_traversal(tx, stack, "ROLLBACK", stack.rollback_template_id,
                           stack_template_id=stack.rollback_template_id or stack.template_id,
                           reason=reason)


def stop_traversal(tx: Tx, stack: StackView, reason: str) -> list[Work]:
    """Cancel without rollback: a new generation that does nothing; the stack ends FAILED.

    Records left waiting on an operation are marked FAILED (their operation is abandoned; the
    next traversal finds what it made by the record's key), so nothing shows IN_PROGRESS in a
    stack that is not. Its nested stacks in progress stop too, and a nested stack's parent is
    told (returned: the work that wakes its node).
    """
    # The children first: each is locked after this stack, as every transaction does.
    stop_children(tx, stack, reason)
    generation = stack.generation + 1
    # Records before the traversal row: the order in which steps lock them too.
    tx.fail_pending_operations(stack.id, reason)
    traversal_id = tx.insert_traversal(stack.id, generation, stack.action, None, None)
    _supersede(tx, stack, generation, keep=traversal_id)
    tx.end_traversal(traversal_id, TRAVERSAL_FAILED, from_state=None)
    tx.update_stack(stack.id, generation=generation, observed_generation=generation,
                    traversal_id=traversal_id, status="FAILED", status_reason=reason)
    tx.add_events(stack.id, traversal_id, generation, [
        stack_event(stack, stack.action, "FAILED", reason)])
    stopped = tx.stack(stack.id)
    return wake_parent(tx, stopped) if stopped is not None else []


def stop_children(tx: Tx, stack: StackView, reason: str) -> None:
    """Stop the nested stacks of ``stack`` that are in progress (its own request ended
    without them: failed, and not rolled back), as a cancel without rollback does."""
    for child in tx.child_stacks(stack.id, in_progress=True):
        locked = tx.stack(child.id, lock=True)
        if locked is not None and locked.status == "IN_PROGRESS":
            stop_traversal(tx, locked, f"{reason} (in its parent stack {stack.name})")
