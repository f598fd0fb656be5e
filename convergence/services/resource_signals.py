"""Signals to resources: ``POST .../resources/{name}/signal`` and the signed URLs, routed by
what the resource is, with Heat's semantics.

- ``{"unset_hook": ...}``: a hook cleared (``convergence.services.hooks``);
- a scaling policy: its group scaled (``convergence.services.scaling``);
- a wait condition handle (``OS::Heat::WaitConditionHandle``, ``UpdateWaitConditionHandle``):
  the signal kept (``status`` SUCCESS or FAILURE, ``reason``, ``data``, ``id``: a signal with
  the id of an earlier one replaces it, none is numbered), a SIGNAL event, and the wait
  conditions of the stack's current traversal woken to count again;
- a software deployment: its agent's report (``convergence.services.software.report``);
- any other type: NotSupported (400), as Heat answers.

Callers: the API's signal route (``convergence.api.stack_extras``), the signed URLs
(``convergence.api.signed``) and the CLI's embedded client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from convergence.engine.nesting import wake_records
from convergence.errors import Conflict, InvalidParameter, NotFound
from convergence.ports.store import Tx
from convergence.ports.views import NewEvent, RecordView
from convergence.ports.work import Work
from convergence.services import hooks, scaling, software
from convergence.services.heat_shapes import current_records
from convergence.services.queries import stack_or_404
from convergence.services.stacks import send

if TYPE_CHECKING:
    from convergence.services.context import Runtime

HANDLES = ("OS::Heat::WaitConditionHandle", "OS::Heat::UpdateWaitConditionHandle")
WAITERS = ("OS::Heat::WaitCondition",)
DEPLOYMENTS = ("OS::Heat::SoftwareDeployment", "OS::Heat::StructuredDeployment")
SUCCESS, FAILURE = "SUCCESS", "FAILURE"


def signal(rt: Runtime, tenant: str, name_or_id: str, resource: str,
           details: Any = None, record_id: int | None = None) -> str:
    """Signal ``resource`` of a stack (see the module); returns what it did. ``record_id``
    (a signed URL's): the version of the resource the URL was made for, NotFound when it is
    not the current one (a replaced handle's URL never feeds its replacement)."""
    if isinstance(details, Mapping) and "unset_hook" in details:
        hooks.clear_hook(rt, tenant, name_or_id, resource, str(details["unset_hook"]))
        return f"Hook {details['unset_hook']} is cleared"
    with rt.store.read() as tx:
        stack = stack_or_404(tx, tenant, name_or_id)
        found = [r for r in current_records(tx.records(stack.id)) if r.name == resource]
    if not found or record_id not in (None, found[0].id):
        raise NotFound(f"The Resource ({resource}) could not be found in Stack {stack.name}.")
    record = found[0]
    if record.type in HANDLES:
        return handle_signal(rt, record, details)
    if record.type in DEPLOYMENTS:
        if record.physical_id is None:
            raise Conflict(f"The Resource ({resource}) is not made yet: it takes signals "
                           "once it is.")
        taken = software.report(rt, record.physical_id, details if details is not None
                                else {}, tenant=tenant)
        return "report taken" if taken else "no run in progress: report ignored"
    return scaling.signal_resource(rt, tenant, stack.id, resource, details, record_id)


def handle_details(details: Any) -> tuple[str | None, str, str, Any]:
    """(id, status, reason, data) of a wait condition handle's signal; InvalidParameter when
    it is not one."""
    if details is None:
        details = {}
    if not isinstance(details, Mapping):
        raise InvalidParameter("body", "A wait condition signal must be a JSON object.")
    status = details.get("status", SUCCESS)
    if status not in (SUCCESS, FAILURE):
        raise InvalidParameter("status", f"A wait condition signal's status must be "
                                         f"{SUCCESS} or {FAILURE}, not {status!r}.")
    signal_id = details.get("id")
    return (None if signal_id in (None, "") else str(signal_id), str(status),
            str(details.get("reason") or ""), details.get("data"))


def handle_signal(rt: Runtime, handle: RecordView, details: Any) -> str:
    """Keep a handle's signal and wake the stack's wait conditions."""
    signal_id, status, reason, data = handle_details(details)
    if handle.physical_id is None or handle.action == "INIT":
        raise Conflict(f"The Resource ({handle.name}) is not made yet: it takes signals "
                       "once it is.")
    handle_id = handle.physical_id
    wake: list[Work] = []

    def kept(tx: Tx) -> str:
        # The stack's row locked: signals to one handle queue up, so one without an id is
        # numbered after every one before it (none is overwritten).
        stack = tx.stack(handle.stack_id, lock=True)
        if stack is None:
            raise NotFound(f"The Resource ({handle.name}) could not be found.")
        given = signal_id or str(len(tx.handle_signals(handle_id)) + 1)
        text = reason or f"Signal {given} received"
        tx.add_handle_signal(handle_id, stack.id, given, status, text, data)
        said = f"Signal: status:{status} reason:{text}"
        tx.add_events(stack.id, stack.traversal_id, stack.generation, [NewEvent(
            handle.name, handle_id, handle.type, "SIGNAL", "COMPLETE", said)])
        if stack.traversal_id is not None:
            waiters = [r.id for r in tx.records(stack.id) if r.type in WAITERS]
            wake.extend(wake_records(tx, stack, waiters, rt.settings.batch_size))
        return said

    said = rt.store.transact(kept)
    send(rt, wake)
    rt.engine.ctx.tell_observers()
    return said
