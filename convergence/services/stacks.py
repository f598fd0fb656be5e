"""The requests that change a stack: create, update, delete, cancel, reset, abandon, and mark a
resource's health. Each is accepted in one transaction with the stack's row locked (requests
on one stack queue up, each seeing the generation the one before it set); a request that
starts work sends its traversal's plan once committed.

Callers: the API's routes (``convergence.api.stacks``, ``actions``, ``stack_extras``), the
CLI's embedded client and commands (``convergence.cli.local``, ``admin_cmd``, ``demo_cmd``),
the benchmarks and the tests. A request is refused with ``TemplateError`` (its input),
``NotFound``, ``Conflict`` (the stack's state) or ``PreconditionFailed`` (``If-Match``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from convergence.engine.context import scope_of
from convergence.engine.traversals import begin_rollback, begin_traversal, stop_traversal
from convergence.engine.trusts import release_trust
from convergence.errors import Conflict, NotFound, PreconditionFailed
from convergence.plugins.base import DEFAULT_SCOPE, CloudScope, Delegation
from convergence.ports.store import Tx
from convergence.ports.views import NewEvent, RecordView, StackView, TemplateContent
from convergence.ports.work import PLAN, Work
from convergence.services.admission import check_stack_name
from convergence.services.credentials import delegated_scope
from convergence.services.heat_shapes import current_records, export_blob
from convergence.services.queries import locked_stack, stack_or_404
from convergence.services.templates import (
    accept,
    check_scope,
    put_template,
    requested_content,
    template_content,
)

if TYPE_CHECKING:
    from convergence.services.context import Runtime

log = logging.getLogger(__name__)

CANCELLABLE = ("CREATE", "UPDATE")


def _expect(stack: StackView, expected_generation: int | None) -> None:
    """``If-Match``: refuse to act on a stack that moved past the generation the client saw
    (checked inside the request's transaction, so two careful writers cannot both pass)."""
    if expected_generation is not None and expected_generation != stack.generation:
        raise PreconditionFailed(
            f"The Stack ({stack.name}) is at generation {stack.generation}, not "
            f"{expected_generation}.")


def _refuse_nested(stack: StackView, what: str) -> None:
    """A nested stack is its parent's: its requests come from its parent's resource."""
    if stack.parent_id is not None:
        raise Conflict(f"The Stack ({stack.name}) is a nested stack (of resource "
                       f"{stack.parent_resource} of stack {stack.parent_id}); it cannot be "
                       f"{what} on its own: change its parent stack.")


def _refuse_while_deleting(stack: StackView, what: str) -> None:
    if stack.action == "DELETE":
        raise Conflict(f"The Stack ({stack.name}) is being deleted; it cannot be {what}.")


def start(rt: Runtime, traversal_id: str) -> None:
    """Send a committed traversal's plan. The request is accepted once committed: if the
    broker cannot take the message now, the sweeper plans the traversal (it finds every
    traversal left waiting to be planned), so the caller is not told it failed."""
    try:
        rt.dispatcher.dispatch([Work(PLAN, traversal_id)])
    except Exception:
        log.exception("could not send the plan of traversal %s: the sweeper will", traversal_id)


def send(rt: Runtime, work: Sequence[Work]) -> None:
    """Send committed work (a nested stack's parent woken); what is lost, the sweeper finds."""
    if not work:
        return
    try:
        rt.dispatcher.dispatch(list(work))
    except Exception:
        log.exception("could not send %d work items: the sweeper will", len(work))


# Create, update, delete ----------------------------------------------------------------------

def create_stack(rt: Runtime, tenant: str, name: str, template: str, *,
                 files: Mapping[str, str] | None = None, environments: Sequence[Any] = (),
                 parameters: Mapping[str, Any] | None = None, timeout_mins: int | None = None,
                 disable_rollback: bool = False, observe: bool = False,
                 scope: CloudScope = DEFAULT_SCOPE,
                 caller: Delegation | None = None, delegated: bool = False) -> StackView:
    """Accept a new stack: generation 1, CREATE_IN_PROGRESS committed before returning.

    Unless ``disable_rollback``, a failed create is rolled back (everything it made deleted).
    ``observe``: the stack opts in to the observer (``convergence.engine.observer``).
    ``scope``: the cloud its resources live in (kept for the stack's life; its custom
    constraints are checked against that cloud). ``delegated`` (keystone mode): the engine
    works in the stack's project through a trust ``caller`` (a caller Keystone authenticated,
    in that project) gives it now, deleted with the stack; with no caller, or a trust the
    identity service refuses, the stack reaches no cloud (``convergence.services.
    credentials``). A template needing a cloud the stack cannot reach is refused
    (TemplateError), as a name Heat would refuse is, and input over the size limits.
    """
    check_stack_name(name)
    check_scope(rt, scope)
    content = template_content(template, files, environments, parameters)
    why = None
    if delegated or caller is not None:
        scope, why = delegated_scope(rt, scope, caller)
    stack_id = str(uuid.uuid4())

    def accepted(tx: Tx) -> tuple[StackView, str]:
        if tx.find_stack(tenant, name) is not None:
            raise Conflict(f"The Stack ({name}) already exists.")
        tid = put_template(rt, tx, content)
        # Two creates of one name that both passed the look-up: the unique index on live
        # names refuses the second (Conflict), whichever commits first.
        tx.insert_stack(stack_id, tenant, name, timeout_mins=timeout_mins,
                        disable_rollback=disable_rollback)
        extra: dict[str, Any] = {"observe": True} if observe else {}
        if scope.cloud is not None or scope.trust_id is not None:
            extra.update(cloud=scope.cloud, trust_id=scope.trust_id)
        if extra:
            tx.update_stack(stack_id, **extra)
        stack = tx.stack(stack_id)
        assert stack is not None
        traversal_id = begin_traversal(tx, stack, "CREATE", tid)
        return stack_or_404(tx, tenant, stack_id), traversal_id

    try:
        accept(rt, content, scope, tenant=tenant, why=why)
        stack, traversal_id = rt.store.transact(accepted)
    except BaseException:
        if scope.trust_id is not None:  # nothing refers to the trust made for it
            try:
                rt.registry.release(scope)
            except Exception:  # the refusal is what the caller is told, not this
                log.warning("the trust of a refused stack %s was not deleted", name,
                            exc_info=True)
        raise
    start(rt, traversal_id)
    return stack


def update_stack(rt: Runtime, tenant: str, name_or_id: str, template: str | None = None, *,
                 files: Mapping[str, str] | None = None, environments: Sequence[Any] | None = None,
                 parameters: Mapping[str, Any] | None = None, existing: bool = False,
                 timeout_mins: int | None = None,
                 clear_parameters: Sequence[str] = (), disable_rollback: bool | None = None,
                 expected_generation: int | None = None, converge: bool = False,
                 observe: bool | None = None, scope: CloudScope | None = None,
                 caller: Delegation | None = None, delegated: bool = False) -> StackView:
    """Accept an update; it supersedes whatever traversal is running.

    Whose credentials the stack uses is kept, but for a stack that has none of its tenant's
    yet (made before they were required, or with no resource that needed a cloud):
    ``scope`` (token mode: the project's mapped cloud, or none) replaces the default cloud,
    and ``delegated`` (keystone mode) makes the trust ``caller`` gives now (see
    :func:`create_stack`), stored with the stack as this update is accepted.

    ``converge`` (Heat's ``converge: true``): the update converges with observed reality
    too: what vanished from the cloud is made again, what is in ERROR replaced, and what was
    changed behind the engine's back changed back. ``observe`` opts the stack in to the
    observer, or out (None keeps its setting).

    ``existing`` (PATCH): start from the stack's current template, environment and parameters
    and apply what is given on top; ``clear_parameters`` drops kept values (back to defaults).
    ``disable_rollback`` changes the stack's setting (None keeps it); ``expected_generation``
    refuses the update (PreconditionFailed) if the stack moved past it.

    What a PATCH builds on is the stack's template as the accepting transaction finds it, with
    the stack row locked: two PATCHes never merge from one copy, so neither undoes the other.
    The merge is made and validated first from a plain read (no lock held while a large
    template is validated); when another request was accepted in between, it is made again
    from what the lock found.
    """
    def requested(current: TemplateContent | None) -> TemplateContent:
        content = requested_content(current, template, files, environments, parameters,
                                    existing=existing, clear_parameters=clear_parameters)
        accept(rt, content, wanted_scope, tenant=tenant, why=why)
        return content

    with rt.store.read() as tx:
        stack = stack_or_404(tx, tenant, name_or_id)
        based_on = stack.template_id
        current = tx.template(based_on) if based_on else None
    _refuse_nested(stack, "updated")
    _refuse_while_deleting(stack, "updated")
    _expect(stack, expected_generation)
    wanted_scope, why = scope_of(stack), None
    if scope is not None and wanted_scope == DEFAULT_SCOPE:
        wanted_scope = scope
    if (delegated or caller is not None) and wanted_scope.trust_id is None:
        wanted_scope, why = delegated_scope(
            rt, DEFAULT_SCOPE if wanted_scope.cloudless else wanted_scope, caller)
    made = wanted_scope if wanted_scope.trust_id != stack.trust_id else None
    try:
        stack, traversal_id = _accept_update(rt, tenant, stack, requested, requested(current),
                                             wanted_scope, timeout_mins=timeout_mins,
                                             disable_rollback=disable_rollback,
                                             observe=observe, existing=existing,
                                             expected_generation=expected_generation,
                                             converge=converge)
    except BaseException:
        if made is not None:
            _release_quietly(rt, made, stack.name)
        raise
    if made is not None and stack.trust_id != made.trust_id:
        _release_quietly(rt, made, stack.name)  # another request gave the stack its trust
    start(rt, traversal_id)
    return stack


def _release_quietly(rt: Runtime, scope: CloudScope, name: str) -> None:
    """Delete a trust nothing refers to (a refused request's): the refusal is what the
    caller is told, not a failure to clean up after it."""
    try:
        rt.registry.release(scope)
    except Exception:
        log.warning("the trust made for a refused request on stack %s was not deleted", name,
                    exc_info=True)


def _accept_update(rt: Runtime, tenant: str, stack: StackView,
                   requested: Callable[[TemplateContent | None], TemplateContent],
                   content: TemplateContent, scope: CloudScope, *, timeout_mins: int | None,
                   disable_rollback: bool | None, observe: bool | None, existing: bool,
                   expected_generation: int | None, converge: bool) -> tuple[StackView, str]:
    """The transaction of :func:`update_stack`: the stack locked, its new generation and
    traversal, and the credentials it was given (when it had none of its own)."""
    based_on, stack_id = stack.template_id, stack.id

    def accepted(tx: Tx) -> tuple[StackView, str]:
        stack = locked_stack(tx, tenant, stack_id)
        _refuse_while_deleting(stack, "updated")
        _expect(stack, expected_generation)
        wanted = content
        if existing and stack.template_id != based_on:
            wanted = requested(tx.template(stack.template_id) if stack.template_id else None)
        changes: dict[str, Any] = {}
        if timeout_mins is not None:
            changes["timeout_mins"] = timeout_mins
        if disable_rollback is not None:
            changes["disable_rollback"] = disable_rollback
        if observe is not None:
            changes["observe"] = observe
        if scope != scope_of(stack) and stack.trust_id is None:
            changes.update(cloud=scope.cloud, trust_id=scope.trust_id)
        if changes:
            tx.update_stack(stack.id, **changes)
            stack = stack_or_404(tx, tenant, stack.id)
        traversal_id = begin_traversal(tx, stack, "UPDATE", put_template(rt, tx, wanted),
                                       observe=converge)
        return stack_or_404(tx, tenant, stack.id), traversal_id

    return rt.store.transact(accepted)


def delete_stack(rt: Runtime, tenant: str, name_or_id: str, *,
                 expected_generation: int | None = None) -> StackView:
    """Delete wins over everything before it."""

    def accepted(tx: Tx) -> tuple[StackView, str | None]:
        stack = locked_stack(tx, tenant, name_or_id)
        if stack.deleted_at is not None:
            return stack, None
        _refuse_nested(stack, "deleted")
        _expect(stack, expected_generation)
        traversal_id = begin_traversal(tx, stack, "DELETE", None)
        return stack_or_404(tx, tenant, stack.id), traversal_id

    stack, traversal_id = rt.store.transact(accepted)
    if traversal_id is not None:
        start(rt, traversal_id)
    return stack


def check_stack(rt: Runtime, tenant: str, name_or_id: str, *,
                expected_generation: int | None = None) -> StackView:
    """Accept a check: every resource is looked at in the cloud (missing, in ERROR or changed
    behind the engine's back fails its check) and nothing is changed; the stack ends
    ``CHECK_COMPLETE`` or ``CHECK_FAILED``. Refused (409) while another request of the stack
    is in progress, or for a stack never created."""

    def accepted(tx: Tx) -> tuple[StackView, str]:
        stack = locked_stack(tx, tenant, name_or_id)
        _refuse_nested(stack, "checked")
        _refuse_while_deleting(stack, "checked")
        _expect(stack, expected_generation)
        if stack.status == "IN_PROGRESS":
            raise Conflict(f"The Stack ({stack.name}) has an action ({stack.action}) in "
                           "progress; it cannot be checked now.")
        if stack.template_id is None:
            raise Conflict(f"The Stack ({stack.name}) has no template to check against.")
        traversal_id = begin_traversal(tx, stack, "CHECK", stack.template_id, observe=True)
        return stack_or_404(tx, tenant, stack.id), traversal_id

    stack, traversal_id = rt.store.transact(accepted)
    start(rt, traversal_id)
    return stack


# Cancel and reset ----------------------------------------------------------------------------

def cancel_stack(rt: Runtime, tenant: str, name_or_id: str, *, rollback: bool = True,
                 expected_generation: int | None = None) -> StackView:
    """Cancel the create or update in progress (Heat's ``cancel_update`` and
    ``cancel_without_rollback``); it gets a generation like any request.

    With ``rollback`` the stack goes back to the last template that converged (for a create:
    to nothing), ending ``ROLLBACK_COMPLETE``; without, the running traversal stops where it
    is and the stack is ``CREATE_FAILED`` or ``UPDATE_FAILED`` at once. Conflict unless a
    create or update is in progress.
    """
    wakes: list[Work] = []

    def accepted(tx: Tx) -> tuple[StackView, str | None]:
        stack = locked_stack(tx, tenant, name_or_id)
        _refuse_nested(stack, "cancelled")
        _expect(stack, expected_generation)
        if stack.status != "IN_PROGRESS" or stack.action not in CANCELLABLE:
            raise Conflict(f"The Stack ({stack.name}) is {stack.stack_status}: only a create "
                           "or an update in progress can be cancelled.")
        traversal_id: str | None = None
        if rollback:
            traversal_id = begin_rollback(
                tx, stack, f"Stack {stack.action} cancelled: rolling back")
        else:
            wakes[:] = stop_traversal(tx, stack, f"Stack {stack.action} cancelled")
        return stack_or_404(tx, tenant, stack.id), traversal_id

    stack, traversal_id = rt.store.transact(accepted)
    if traversal_id is not None:
        start(rt, traversal_id)
    send(rt, wakes)
    return stack


def reset_stack(rt: Runtime, tenant: str, name_or_id: str) -> tuple[StackView, int]:
    """For an operator (``convergence admin reset``): let go of every lease and poll watch on
    the stack's resources (late writers are then refused) and, if a request is in progress,
    stop it where it is, as a cancel without rollback does; the stack ends FAILED and takes
    any request after. Returns the stack and how many leases were let go of.

    Nothing needs this to recover from a crash (the sweeper does that): it is for a human who
    wants a stack out of whatever it is doing now.
    """
    wakes: list[Work] = []

    def reset(tx: Tx) -> tuple[StackView, int]:
        stack = locked_stack(tx, tenant, name_or_id)
        released = tx.release_stack_leases(stack.id)
        if stack.status == "IN_PROGRESS":
            wakes[:] = stop_traversal(tx, stack,
                                      f"Stack {stack.action} reset by an administrator")
        return stack_or_404(tx, tenant, stack.id), released

    result = rt.store.transact(reset)
    send(rt, wakes)
    return result


# Abandon and mark-unhealthy --------------------------------------------------------------------

def abandon_stack(rt: Runtime, tenant: str, name_or_id: str) -> dict[str, Any]:
    """Forget a stack, keeping its physical resources; returns its export blob.

    The stack's records are removed and the stack ends DELETE_COMPLETE (readable by id, not
    listed), as Heat's abandon does. Refused (Conflict) while a traversal is in progress: a
    step in flight could otherwise act on resources the blob does not show.
    """
    abandoned: list[StackView] = []

    def abandon(tx: Tx) -> dict[str, Any]:
        stack = locked_stack(tx, tenant, name_or_id)
        abandoned[:] = [stack]
        if stack.deleted_at is not None:
            raise NotFound(f"The Stack ({name_or_id}) could not be found.")
        _refuse_nested(stack, "abandoned")
        if stack.status == "IN_PROGRESS":
            raise Conflict(f"Stack {stack.name} already has an action ({stack.action}) in "
                           "progress.")
        content = tx.template(stack.template_id) if stack.template_id else None
        blob = export_blob(stack, content, tx.records(stack.id))
        _forget(tx, stack, "Stack abandoned: its resources were kept")
        return blob

    blob = rt.store.transact(abandon)
    if abandoned:
        # What is kept is the caller's, in the caller's project: the engine's trust goes.
        release_trust(rt.engine.ctx, abandoned[0])
    return blob


def _forget(tx: Tx, stack: StackView, reason: str) -> None:
    """Abandon a stack and its nested stacks: records forgotten, the stacks ended."""
    for child in tx.child_stacks(stack.id):
        locked = tx.stack(child.id, lock=True)
        if locked is not None and locked.deleted_at is None:
            _forget(tx, locked, f"{reason} (with its parent stack {stack.name})")
    tx.supersede_traversals(stack.id, keep="")
    tx.forget_records(stack.id)
    tx.update_stack(stack.id, action="DELETE", status="COMPLETE", status_reason=reason,
                    traversal_id=None, deleted_at=tx.now)
    tx.add_events(stack.id, None, stack.generation, [NewEvent(
        stack.name, stack.id, "OS::Heat::Stack", "DELETE", "COMPLETE", reason)])


def mark_resource_health(rt: Runtime, tenant: str, name_or_id: str, resource: str,
                         unhealthy: bool, reason: str = "") -> RecordView:
    """Mark a resource (by name or physical id) unhealthy: CHECK_FAILED, which the next
    update replaces; or healthy again: a CHECK_FAILED one becomes CHECK_COMPLETE.

    Conflict while a step holds the resource's lease.
    """
    def mark(tx: Tx) -> RecordView:
        stack = locked_stack(tx, tenant, name_or_id)
        current = current_records(tx.records(stack.id))
        found = [r for r in current if r.name == resource] or \
            [r for r in current if r.physical_id and r.physical_id == resource]
        if not found:
            raise NotFound(f"The Resource ({resource}) could not be found in Stack "
                           f"{stack.name}.")
        record = found[0]
        if unhealthy:
            status, why = "FAILED", reason or "state changed by resource_mark_unhealthy"
        elif record.action == "CHECK" and record.status == "FAILED":
            status, why = "COMPLETE", reason or "state changed by resource_mark_unhealthy"
        else:
            return record
        if not tx.set_record_state(record.id, "CHECK", status, why):
            raise Conflict(f"The Resource ({record.name}) is being worked on; try again.")
        tx.add_events(stack.id, None, stack.generation, [NewEvent(
            record.name, record.physical_id, record.type, "CHECK", status, why)])
        return tx.records_by_id([record.id])[record.id]

    return rt.store.transact(mark)
