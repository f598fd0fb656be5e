"""A nested stack's end, told to its parent: the parked node of the resource that made it is
woken, in the transaction that ends the child, so the parent never polls.

Callers: :mod:`convergence.engine.conclusion` (a child's traversal finished),
:mod:`convergence.engine.traversals` (a child stopped: cancelled without rollback, reset, or
stopped with its parent) and the services' abandon (``convergence.services.stacks``). The
sweeper finds, with ``Tx.parked_nodes_done_waiting``, what a lost message left parked.
"""

from __future__ import annotations

from convergence.ports.store import Tx
from convergence.ports.views import StackView
from convergence.ports.work import Work, batches

WAKE_BATCH = 200


def wake_parent(tx: Tx, stack: StackView) -> list[Work]:
    """If ``stack`` is nested: wake the node of its parent's current traversal that works on
    the record that made it (parked: ready again, and offered; still stepping: marked woken,
    so that the park its step records does not hold). Returns the work that offers it."""
    if stack.parent_id is None or stack.parent_record_id is None:
        return []
    parent = tx.stack(stack.parent_id)
    if parent is None or parent.traversal_id is None:
        return []
    seqs = tx.wake_nodes(parent.traversal_id, [stack.parent_record_id])
    return list(batches(parent.traversal_id, seqs, WAKE_BATCH))
