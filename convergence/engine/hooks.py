"""Hooks: a resource's step pauses before its create, update or delete (or after its create or
update, before anything built on it goes on) until someone clears the hook, as Heat's
breakpoints (``resource_registry.resources.<name>.hooks``).

The step that would act parks instead (no worker, no lease, no timer): its record is in
progress with ``{"hook": "pre-create", "hooked": "CREATE", "was": [...]}`` as its operation
(the state it had kept), its status reason and an event (in that earlier state, as Heat
tells it) say ``CREATE paused until Hook pre-create is cleared``. Clearing the hook
(``convergence.services.hooks``) marks it ``cleared`` and wakes the node; the step goes on with
the action. A hook is the action's whatever request causes it (a resource an update creates
pauses at ``pre-create``; a replacement at ``pre-update``); pending when its traversal is
superseded, it is pending on the new traversal's node if that node still does the action, and
is dropped otherwise.

Callers: the step (:mod:`convergence.engine.step`). Pure: values in, values out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from convergence.engine.outcomes import DONE, PARKED, StepInput, StepResult
from convergence.ports.views import NewEvent, RecordChange, RecordView
from convergence.template import StackDefinition

PRE = {"CREATE": "pre-create", "UPDATE": "pre-update", "DELETE": "pre-delete"}
POST = {"CREATE": "post-create", "UPDATE": "post-update"}


def reason(action: str, hook: str) -> str:
    """Heat's words for a paused action."""
    return f"{action} paused until Hook {hook} is cleared"


def hooks_of(definition: StackDefinition | None, name: str) -> frozenset[str]:
    """The hooks the definition's environment sets on resource ``name``."""
    if definition is None:
        return frozenset()
    return definition.environment.resource_registry.hooks_for(name)


@dataclasses.dataclass(frozen=True, slots=True)
class Unhooked:
    """A record as the step decides on it, its hook operation set aside: ``cleared``, the
    hook someone cleared (the step goes on with the action); ``pending``, the hook still
    waited on (kept if the step still does that action); ``had``, whether the record carried
    one (its result must clear it)."""

    record: RecordView
    cleared: str | None = None
    pending: str | None = None
    had: bool = False


def unhook(record: RecordView) -> Unhooked:
    op: Mapping[str, Any] = record.operation or {}
    hook = op.get("hook")
    if not hook:
        return Unhooked(record)
    was = op.get("was") or [record.action, record.status]
    bare = dataclasses.replace(record, operation=None, action=str(was[0]), status=str(was[1]))
    if op.get("cleared"):
        return Unhooked(bare, cleared=str(hook), had=True)
    return Unhooked(bare, pending=str(hook), had=True)


def pause(inp: StepInput, record: RecordView, action: str, hook: str) -> StepResult:
    """Park before ``action``: the record says so (operation, status reason) and an event
    too, in the record's current state (as Heat tells it)."""
    why = reason(action, hook)
    # In progress while it waits (an update plans it, a cancel abandons it), the state it
    # had kept beside the hook: it is that again when the hook goes.
    change = RecordChange(record.id, inp.token, {
        "operation": {"hook": hook, "hooked": action, "was": [record.action, record.status]},
        "action": action, "status": "IN_PROGRESS", "status_reason": why})
    event = NewEvent(record.name, record.physical_id, record.type, record.action,
                     record.status, why)
    return StepResult(inp.node.seq, PARKED, [change], [event])


def should_pause(hooks: frozenset[str], action: str, unhooked: Unhooked) -> str | None:
    """The hook to pause on before ``action`` (None: go on)."""
    hook = PRE.get(action)
    if hook is None or hook not in hooks or unhooked.cleared == hook:
        return None
    return hook


def hold_after(inp: StepInput, result: StepResult, action: str, hooks: frozenset[str],
               unhooked: Unhooked) -> StepResult:
    """A create or update that just finished, on a resource hooked ``post-<action>``: its
    result is recorded but the node parks (its dependents wait) until the hook is cleared;
    the record is in progress meanwhile and is what the action made again after."""
    hook = POST.get(action)
    if hook is None or hook not in hooks or unhooked.cleared == hook or \
            result.outcome != DONE or not result.changes:
        return result
    change = result.changes[0]
    if change.delete or change.values.get("status") != "COMPLETE":
        return result
    why = reason(action, hook)
    change.values.update(operation={"hook": hook, "hooked": action, "was": [action, "COMPLETE"]},
                         status="IN_PROGRESS", status_reason=why)
    record = inp.record
    result.events.append(NewEvent(record.name, change.values.get("physical_id",
                                                                 record.physical_id),
                                  change.values.get("type", record.type), action, "COMPLETE",
                                  why))
    result.outcome = PARKED
    return result


def hold_after_delete(inp: StepInput, result: StepResult, hooks: frozenset[str],
                      unhooked: Unhooked) -> StepResult:
    """A delete that just finished, on a resource hooked ``post-delete``: the record stays
    (in progress, DELETE_COMPLETE again once the hook is cleared, then forgotten) and the
    node parks, holding what waits for the delete."""
    hook = "post-delete"
    if hook not in hooks or unhooked.cleared == hook or result.outcome != DONE:
        return result
    record = inp.record
    why = reason("DELETE", hook)
    result.changes = [RecordChange(record.id, inp.token, {
        "operation": {"hook": hook, "hooked": "DELETE", "was": ["DELETE", "COMPLETE"]},
        "action": "DELETE", "status": "IN_PROGRESS", "status_reason": why})]
    result.events.append(NewEvent(record.name, record.physical_id, record.type, "DELETE",
                                  "COMPLETE", why))
    result.outcome = PARKED
    return result


def settle(result: StepResult, unhooked: Unhooked) -> StepResult:
    """A result for a record that carried a hook operation: the hook goes with what the step
    wrote (the action ran, or the node no longer does it), unless the step paused again or
    wrote nothing (tried again later: a cleared hook stays cleared)."""
    if not unhooked.had or result.outcome == PARKED:
        return result
    record_id = unhooked.record.id
    for change in result.changes:
        if change.record_id == record_id and change.values and not change.delete:
            if "operation" not in change.values:
                change.values["operation"] = None
            change.values.setdefault("action", unhooked.record.action)
            change.values.setdefault("status", unhooked.record.status)
            change.values.setdefault("status_reason", "")
            break
    return result
