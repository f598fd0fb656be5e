"""A scaling policy's signal: Heat's ``POST .../resources/{policy}/signal``.

The policy's group gets a new size (Heat's arithmetic, ``new_capacity``), within its bounds
and outside the policy's cooldown; the size becomes part of the stack's desired state (the
stored content's ``scaling``: what the autoscaler decided, beside the user's input) and a new
generation of the stack converges to it. An update of the stack's own is not undone: the
signal builds on the content the stack has when its row is locked, exactly as a PATCH does,
and a template given later starts over from ``desired_capacity`` (as Heat's update does).

Signals never queue up behind one another: each one reads the size the signal before it set
(under the stack's lock) and starts the generation that goes there, which supersedes the one
before; a storm of signals ends in as few traversals as the sizes need (a signal in cooldown,
or one that changes nothing, starts none), and none is lost. Each signal leaves an event on
the policy (``SIGNAL_COMPLETE``) saying what it did.

Callers: the API's signal route (``convergence.api.stack_extras``) and the CLI.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from convergence.engine.traversals import begin_traversal
from convergence.errors import Conflict, NotFound, NotSupported
from convergence.plugins.heat.autoscaling import group_size, new_capacity
from convergence.ports.store import Tx
from convergence.ports.views import NewEvent, RecordView, template_id
from convergence.services.heat_shapes import current_records
from convergence.services.queries import locked_stack, stack_or_404
from convergence.services.stacks import start
from convergence.services.templates import store_template

if TYPE_CHECKING:
    from convergence.services.context import Runtime

POLICY, GROUP = "OS::Heat::ScalingPolicy", "OS::Heat::AutoScalingGroup"
SIGNAL = "SIGNAL"


def signal_resource(rt: Runtime, tenant: str, name_or_id: str, resource: str,
                    details: Any = None, record_id: int | None = None) -> str:
    """Signal ``resource``; returns what the signal did (as its event says). NotSupported
    for a resource that takes no signals, NotFound for none of that name (or, given
    ``record_id``, a signed URL's, when that version is not the current one), Conflict for a
    stack being deleted or a policy not made yet."""
    with rt.store.read() as tx:
        stack = stack_or_404(tx, tenant, name_or_id)
        records = {r.name: r for r in current_records(tx.records(stack.id))}
    policy = records.get(resource)
    if policy is None or record_id not in (None, policy.id):
        raise NotFound(f"The Resource ({resource}) could not be found in Stack {stack.name}.")
    if policy.type != POLICY:
        raise NotSupported(f"Signal resource during {policy.action} is not supported: the "
                           f"resource type {policy.type} does not take signals.")
    if policy.physical_id is None or policy.action == "INIT":
        raise Conflict(f"The Resource ({resource}) is not made yet: it takes signals once "
                       "it is.")
    group = _group_of(policy, records.values())
    if isinstance(details, Mapping) and details.get("state") not in (None, "alarm"):
        # An alarm service telling of an alarm that went back to normal: nothing to do.
        return _note(rt, tenant, stack.id, policy, f"alarm state {details['state']}: "
                     "not scaling")
    outcome: list[str] = []

    def accepted(tx: Tx) -> str | None:
        locked = locked_stack(tx, tenant, stack.id)
        if locked.action == "DELETE" or locked.template_id is None:
            raise Conflict(f"The Stack ({locked.name}) is being deleted: no scaling.")
        content = tx.template(locked.template_id)
        scaling = dict(content.scaling)
        capacity = dict(scaling.get("capacity") or {})
        signalled = dict(scaling.get("signalled") or {})
        props = policy.properties
        bounds = group.properties
        cooldown = props.get("cooldown")
        if cooldown is None:
            cooldown = bounds.get("cooldown") or 0
        last = signalled.get(policy.name)
        # The signal's time is when it got the lock: a signal that began before another
        # but waited for its lock comes after it (its clock read, at the transaction's
        # start, may be earlier than the time the other one stamped).
        now = tx.now if last is None else max(tx.now, float(last))
        if last is not None and now < float(last) + float(cooldown):
            outcome.append(f"cooldown in progress ({cooldown}s): not scaling")
        else:
            current = capacity.get(group.name)
            if current is None:
                current = group.attributes.get("current_size")
            if current is None:
                current = group_size(bounds, None)
            wanted = new_capacity(int(current), float(props["scaling_adjustment"]),
                                  str(props["adjustment_type"]),
                                  props.get("min_adjustment_step"),
                                  int(bounds.get("min_size", 0)), int(bounds.get("max_size", 0)))
            if wanted == int(current):
                outcome.append(f"{group.name} stays at {current} members")
            else:
                capacity[group.name] = wanted
                signalled[policy.name] = now
                outcome.append(f"scaling {group.name} from {current} to {wanted} members")
                new = dataclasses.replace(content, scaling={"capacity": capacity,
                                                            "signalled": signalled})
                definition = rt.engine.definitions.get(locked.template_id, tx.template)
                tid = template_id(new)
                rt.engine.definitions.put(tid, dataclasses.replace(
                    definition, scaling=dict(new.scaling)))
                store_template(tx, new, definition)
                traversal = begin_traversal(
                    tx, locked, "UPDATE", tid,
                    reason=f"Stack UPDATE started: {outcome[0]} (signal to {policy.name})")
                tx.add_events(locked.id, traversal, locked.generation + 1, [_event(
                    policy, outcome[0])])
                return traversal
        tx.add_events(locked.id, locked.traversal_id, locked.generation,
                      [_event(policy, outcome[0])])
        return None

    traversal_id = rt.store.transact(accepted)
    if traversal_id is not None:
        start(rt, traversal_id)
    rt.engine.ctx.tell_observers()
    return outcome[0]


def _group_of(policy: RecordView, records: Iterable[RecordView]) -> RecordView:
    """The group a policy scales: the resource its ``auto_scaling_group_id`` refers to."""
    wanted = str(policy.properties.get("auto_scaling_group_id"))
    for r in records:
        if r.type == GROUP and wanted in (str(r.reference_id), str(r.physical_id), r.name):
            return r
    raise NotSupported(f"The scaling policy {policy.name} names {wanted}, which is no "
                       "autoscaling group of this stack.")


def _event(policy: RecordView, reason: str) -> NewEvent:
    return NewEvent(policy.name, policy.physical_id, policy.type, SIGNAL, "COMPLETE",
                    f"Signal: {reason}")


def _note(rt: Runtime, tenant: str, stack_id: str, policy: RecordView, reason: str) -> str:
    def note(tx: Tx) -> None:
        stack = locked_stack(tx, tenant, stack_id)
        tx.add_events(stack.id, stack.traversal_id, stack.generation, [_event(policy, reason)])

    rt.store.transact(note)
    rt.engine.ctx.tell_observers()
    return reason
