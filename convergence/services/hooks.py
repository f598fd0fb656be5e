"""Clearing a hook: a resource paused before its action (``convergence.engine.hooks``) goes on.

``POST .../resources/{name}/signal`` with ``{"unset_hook": "pre-create"}`` (Heat's shape, what
``openstack stack hook clear`` sends), ``convergence stack hook clear``: in one transaction
with the stack locked, the record's pending hook is marked cleared (its fencing token bumped)
and the node of the stack's current traversal that waits on it is woken; an event says the
hook was cleared. A hook that is not pending there is refused (NotSupported, 400), and one
whose record a step holds right now (it is being parked) is a Conflict to try again.

Callers: the API's signal route (``convergence.api.stack_extras``) and the CLI's embedded
client (``convergence.cli.local``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from convergence.engine.nesting import wake_records
from convergence.errors import Conflict, NotFound, NotSupported
from convergence.ports.store import Tx
from convergence.ports.views import NewEvent
from convergence.ports.work import Work
from convergence.services.heat_shapes import current_records
from convergence.services.queries import locked_stack
from convergence.services.stacks import send

if TYPE_CHECKING:
    from convergence.services.context import Runtime

HOOKS = ("pre-create", "pre-update", "pre-delete", "post-create", "post-update",
         "post-delete")


def clear_hook(rt: Runtime, tenant: str, name_or_id: str, resource: str, hook: str) -> None:
    """Clear ``hook`` on ``resource`` (see the module)."""
    if hook not in HOOKS:
        raise NotSupported(f'"{hook}" is not a valid hook: one of {", ".join(HOOKS)}.')
    wake: list[Work] = []

    def clear(tx: Tx) -> None:
        stack = locked_stack(tx, tenant, name_or_id)
        found = [r for r in current_records(tx.records(stack.id)) if r.name == resource]
        if not found:
            raise NotFound(f"The Resource ({resource}) could not be found in Stack "
                           f"{stack.name}.")
        record = found[0]
        outcome = tx.clear_hook(record.id, hook)
        if outcome == "not pending":
            raise NotSupported(f"The hook {hook} is not pending on resource {resource} of "
                               f"stack {stack.name}.")
        if outcome == "busy":
            raise Conflict(f"The Resource ({resource}) is being worked on; try again.")
        tx.add_events(stack.id, stack.traversal_id, stack.generation, [NewEvent(
            record.name, record.physical_id, record.type, "SIGNAL", "COMPLETE",
            f"Hook {hook} is cleared")])
        wake.extend(wake_records(tx, stack, [record.id], rt.settings.batch_size))

    rt.store.transact(clear)
    send(rt, wake)
    rt.engine.ctx.tell_observers()
