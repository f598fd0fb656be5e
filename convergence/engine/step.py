"""One node's step, between the two transactions of a batch: decide, then act through the plugin.

Called by the batch runner (:mod:`convergence.engine.batch`) for each node it claimed. Reads
only what the batch loaded (the node's record, its direct dependencies' records, the
definition) and returns a :class:`StepResult`: what to write (fenced), which events to record,
and whether the node is done, failed, pending (to be polled again after a delay) or in need
of a new version of its record (``REPLACE``). No database access happens here, so a slow cloud
call holds no transaction open: a step that must replace its resource asks for the new record
before it calls the cloud at all (a :class:`Replacement`, no effect done yet), the batch makes
the records of every such step in one transaction of its own, and then has each step go on
against its new record (:meth:`Stepper.replace`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from convergence.engine.decide import Action, Desired, Observed, decide_cleanup, decide_converge
from convergence.engine.deletion import RETAIN, SNAPSHOT, definition_policy
from convergence.engine.hooks import (
    Unhooked,
    hold_after,
    hold_after_delete,
    hooks_of,
    pause,
    settle,
    should_pause,
    unhook,
)
from convergence.engine.nesting import nested_context, nested_properties
from convergence.engine.observing import ObservingSteps
from convergence.engine.outcomes import (
    CHECK,
    DONE,
    FAILED,
    PARKED,
    PENDING,
    RELEASED,
    REPLACE,
    RETRY,
    Replacement,
    StepInput,
    StepResult,
)
from convergence.engine.secrets import SecretMarks
from convergence.engine.stackdata import RecordData
from convergence.plugins.base import (
    CREATE,
    DELETE,
    UPDATE,
    PluginContext,
    Progress,
    ResourceFailure,
    ResourcePlugin,
    RetryLater,
)
from convergence.ports.views import NewEvent, RecordChange, RecordView
from convergence.template import StackIdentity, TemplateError, UnknownValue
from convergence.template.properties import with_defaults

log = logging.getLogger(__name__)
# The values a step answers with live in ``outcomes``; named here too, for the batch runner,
# the recorder and the accountant that read them.
__all__ = ["CHECK", "DONE", "FAILED", "PARKED", "PENDING", "RELEASED", "REPLACE", "RETRY",
           "Replacement", "StepInput", "StepResult", "Stepper", "observed_of"]

def observed_of(record: RecordView, worked_on: bool = True) -> Observed:
    return Observed(
        type=record.type, action=record.action, status=record.status,
        physical_id=record.physical_id, properties=record.properties,
        template_id=record.template_id, operation=record.operation,
        replaced_by=record.replaced_by, worked_on=worked_on,
    )


class Stepper(ObservingSteps):
    """Runs node steps with a plugin registry, a clock and the plugins' backends."""

    def __init__(self, plugins: Callable[[str], ResourcePlugin | None],
                 context: Callable[..., PluginContext],  # (stack, record, lease_good[, token])
                 now: Callable[[], float],
                 deletion_policy: Callable[[RecordView], str | None] = lambda record: "Delete",
                 *, unreachable: Callable[[BaseException], bool],
                 action_retry_limit: int = 5,
                 hooks: Callable[[RecordView], frozenset[str]] = lambda record: frozenset(),
                 secrets: SecretMarks) -> None:
        self._plugin = plugins
        self._secrets = secrets  # which values the store keeps encrypted
        # The hooks on what a record made, from the template it converged to (pre-delete).
        self._hooks = hooks
        self._retry_limit = action_retry_limit
        # Calls the cloud refused in a row, by record: the next wait doubles each time (up to
        # a minute), unless the cloud asked for longer. Kept per process: a crash only
        # starts the backoff over.
        self._refused: dict[int, int] = {}
        # Untranslated exceptions in a row, by record: engine faults, tried again a few times.
        self._faults: dict[int, int] = {}
        self._context = context
        self._now = now
        self._deletion_policy = deletion_policy
        # Whether an exception says the engine's database is away (``Store.unreachable``).
        self._unreachable = unreachable

    def run(self, inp: StepInput) -> StepResult:
        """The node's step; a ``REPLACE`` result is to be gone on with by :meth:`replace`."""
        try:
            if inp.action == CHECK:  # looks, changes nothing
                if inp.node.phase == "converge":
                    return self._check(inp)
                return StepResult(inp.node.seq, DONE,
                                  [RecordChange(inp.record.id, inp.token, {})])
            unhooked = unhook(inp.record)
            if unhooked.had:
                inp = dataclasses.replace(inp, record=unhooked.record)
            if inp.node.phase == "converge":
                return settle(_stamp(inp, self._converge(inp, unhooked), self._secrets),
                              unhooked)
            return settle(self._cleanup(inp, unhooked), unhooked)
        except Exception as exc:  # a plugin bug must fail the resource, not the worker
            return self.crashed(inp, exc)

    def replace(self, inp: StepInput, needed: Replacement, new: RecordView | None
                ) -> StepResult:
        """Go on with a step that asked for a replacement, now that its new record was made
        and claimed for the batch (``new``; None: the old one was fenced off, or the traversal
        superseded, and the current traversal takes it from here): create the new version."""
        try:
            if new is None:
                return StepResult(inp.node.seq, RETRY,
                                  [RecordChange(inp.record.id, inp.token, {})], delay=0.0)
            plugin = self._plugin(needed.rtype)
            assert plugin is not None  # the step found it before it asked
            result = self._act(inp, plugin, new, new.fencing_token, CREATE, needed.properties,
                               needed.requires, replacing=inp.record, attempt=needed.attempt,
                               replaced_values=needed.failed)
            result.events[:0] = needed.events
            return _stamp(inp, result, self._secrets)
        except Exception as exc:  # as in run
            return self.crashed(inp, exc)

    def crashed(self, inp: StepInput, exc: Exception) -> StepResult:
        """A step that raised what no plugin translated: an engine fault, not the
        resource's. It is tried again later (doubling the wait), ``action_retry_limit``
        times in a row in this process; then the resource fails with the exception, never
        silently. The database being away is raised again (the batch is offered again)."""
        if self._unreachable(exc):
            # The engine's database is away (a plugin's own backend says RetryLater): not
            # the resource's fault. The batch ends here and its work is offered again.
            raise exc
        log.exception("step of %s failed unexpectedly", inp.node.name, exc_info=exc)
        if inp.action == CHECK:  # a check that could not look: that resource's check failed
            result = self.fail(inp, inp.record, inp.token, CHECK, f"{type(exc).__name__}: {exc}")
            result.outcome, result.check_failed = DONE, result.reason
            return result
        faults = self._faults.get(inp.record.id, 0)
        if faults < self._retry_limit:
            self._faults[inp.record.id] = faults + 1
            return StepResult(inp.node.seq, RETRY,
                              [RecordChange(inp.record.id, inp.token, {})],
                              delay=min(2.0 ** min(faults, 16), 60.0),
                              reason=f"engine fault: {type(exc).__name__}: {exc}")
        self._faults.pop(inp.record.id, None)
        return self.fail(inp, inp.record, inp.token, inp.record.action if
                         inp.record.action != "INIT" else CREATE,
                         f"{type(exc).__name__}: {exc}")

    # converge -------------------------------------------------------------------------------
    def _converge(self, inp: StepInput, unhooked: Unhooked) -> StepResult:
        definition = inp.definition
        assert definition is not None and inp.template_id is not None
        name, record = inp.node.name, inp.record
        rtype = definition.resource_types[name]
        plugin = self._plugin(rtype)
        if plugin is None:
            return self.fail(inp, record, inp.token, CREATE,
                                f"resource type '{rtype}' is not available")
        try:
            resolver = definition.resolver(
                StackIdentity(inp.stack.name, inp.stack.id, inp.stack.tenant),
                data=RecordData(inp.heads))
            props = with_defaults(plugin.schema.properties, resolver.properties(name))
            props = nested_properties(definition, name, plugin, props, resolver.resolve)
        except UnknownValue as exc:
            return self.fail(inp, record, inp.token, _action_for(record),
                                f"a value it needs is not available: {exc.what}")
        except TemplateError as exc:
            return self.fail(inp, record, inp.token, _action_for(record), str(exc))
        requires = [inp.heads[d].id for d in sorted(definition.dependencies.get(name, ()))
                    if d in inp.heads]
        external = definition.template.resources[name].external_id
        if external is not None:
            return self._external(inp, plugin, resolver.resolve(external), props, requires,
                                  rtype)
        op = record.operation
        if op is not None and op.get("action") != DELETE:
            started = op.get("properties") or {}
            if dict(started) != dict(props):
                # The operation under way was started for another definition.
                if plugin.preemptible:
                    return self._preempt(inp, plugin, record, str(op.get("action", CREATE)),
                                         started, props, requires, rtype)
                # Not preemptible: see it to its end, record what it made, then go again.
                return self._act(inp, plugin, record, inp.token,
                                 str(op.get("action", CREATE)), started, requires,
                                 poll=True, settle=True)
        if inp.observe and record.physical_id is not None and \
                record.action not in ("INIT", "DELETE"):
            repaired = self._repair(inp, plugin, record, props, requires, rtype)
            if repaired is not None:
                return repaired
        observed = observed_of(record)
        replace = observed.action not in ("INIT", "DELETE") and \
            plugin.needs_replace(record.properties, props)
        renew = plugin.schema.replaced_on_update and inp.action == UPDATE and \
            record.generation != inp.generation
        action = decide_converge(observed, Desired(rtype, props, inp.template_id), replace,
                                 renew)
        if action is Action.NOTHING:
            change = RecordChange(record.id, inp.token, {
                "template_id": inp.template_id, "generation": inp.generation,
                "requires": requires})
            return StepResult(inp.node.seq, DONE, [change])
        if action in (Action.CREATE, Action.UPDATE, Action.REPLACE):
            hooked = CREATE if action is Action.CREATE else UPDATE
            hook = should_pause(hooks_of(definition, name), hooked, unhooked)
            if hook is not None:
                return pause(inp, record, hooked, hook)
        if action is Action.REPLACE:
            return self._replacement(inp, props, requires, rtype)
        verb = CREATE if action is Action.CREATE else UPDATE
        if action is Action.POLL:
            op = record.operation or {}
            verb = str(op.get("action", CREATE))
        result = self._act(inp, plugin, record, inp.token, verb, props, requires,
                           poll=action is Action.POLL)
        return hold_after(inp, result, verb, hooks_of(definition, name), unhooked)

    @staticmethod
    def _replacement(inp: StepInput, props: Mapping[str, Any], requires: list[int],
                     rtype: str, events: list[NewEvent] | None = None) -> StepResult:
        """Ask the batch for a new version of the record (nothing done yet): the step goes on
        in :meth:`replace`."""
        return StepResult(inp.node.seq, REPLACE, replacement=Replacement(
            rtype, props, requires, list(events or [])))

    def _preempt(self, inp: StepInput, plugin: ResourcePlugin, record: RecordView, verb: str,
                 started: Mapping[str, Any], props: Mapping[str, Any], requires: list[int],
                 rtype: str) -> StepResult:
        """Abandon the wait of an operation started for an older definition and converge to
        the new one from where the resource is: as an update of what the operation was making,
        a replacement if the change needs one, or a fresh create if nothing was made yet."""
        event = NewEvent(record.name, record.physical_id, rtype, verb, "IN_PROGRESS",
                         f"{verb} in progress abandoned: converging to generation "
                         f"{inp.generation}")
        if record.physical_id is not None and plugin.needs_replace(started, props):
            return self._replacement(inp, props, requires, rtype, [event])
        if record.physical_id is None:
            result = self._act(inp, plugin, record, inp.token, CREATE, props, requires)
        else:
            result = self._act(inp, plugin, record, inp.token, UPDATE, props, requires,
                               old=started)
        result.events.insert(0, event)
        return result

    def _act(self, inp: StepInput, plugin: ResourcePlugin, record: RecordView, token: int,
             verb: str, props: Mapping[str, Any], requires: list[int], *,
             poll: bool = False, replacing: RecordView | None = None,
             old: Mapping[str, Any] | None = None, settle: bool = False,
             attempt: int | None = None,
             replaced_values: Mapping[str, Any] | None = None) -> StepResult:
        """Start (or poll) ``verb`` toward ``props``. ``old``: the properties an update starts
        from (default: the record's). ``settle``: the operation is an older definition's; once
        it ends, record what it made and go again (the node is not done). ``attempt``: which
        try of a create this is (default: the one its operation under way says, or the
        first); ``replaced_values``: what to record of the version ``replacing`` replaces."""
        if attempt is None:
            attempt = int((record.operation or {}).get("attempt", 1))
        ctx = self._context(inp.stack, record, inp.lease_good, token)
        if inp.definition is not None:
            ctx = nested_context(ctx, inp.definition, inp.node.name, plugin, props)
        try:
            _check_lease(inp)
            if poll:
                op = record.operation or {}
                progress = plugin.poll(ctx, verb, record.physical_id,
                                       op.get("properties", props), op.get("state", {}))
            elif verb == CREATE:
                progress = plugin.create(ctx, props)
            else:
                progress = plugin.update(ctx, record.physical_id,
                                         record.properties if old is None else old, props)
        except ResourceFailure as exc:
            if verb == CREATE and exc.physical_id is not None and not settle and \
                    attempt <= self._retry_limit:
                result = self._try_again(inp, record, token, exc, props, requires, attempt,
                                         replacing is not None)
            else:
                result = self.fail(inp, record, token, verb, str(exc) or "failed")
                if exc.physical_id is not None:  # what failed is there: its record names it
                    result.changes[0].values["physical_id"] = exc.physical_id
                    result.events[-1] = dataclasses.replace(
                        result.events[-1], physical_resource_id=exc.physical_id)
            if replacing is not None:
                result.changes.append(RecordChange(replacing.id, inp.token,
                                                   dict(replaced_values or {})))
            return result
        except RetryLater as exc:
            result = self._refused_result(inp, record, token, exc)
            if replacing is not None:
                result.changes.append(RecordChange(replacing.id, inp.token,
                                                   dict(replaced_values or {})))
            return result
        self._refused.pop(record.id, None)
        self._faults.pop(record.id, None)
        rtype = inp.definition.resource_types[inp.node.name] if inp.definition else record.type
        physical_id = progress.physical_id or record.physical_id
        events: list[NewEvent] = []
        if record.physical_id is not None and physical_id != record.physical_id:
            # The plugin adopts what the record's key finds: making another means the one the
            # record named is gone (a failed create removed it, or it vanished). The record
            # forgets it now, so its story ends now, with its own id.
            events.append(NewEvent(record.name, record.physical_id, record.type, DELETE,
                                   "COMPLETE", f"no longer exists: {verb} made {physical_id} "
                                   f"in its place"))
        if not poll:
            events.append(NewEvent(record.name, physical_id, rtype, verb, "IN_PROGRESS",
                                   "state changed"))
        if not progress.done:
            change = RecordChange(record.id, token, {
                "physical_id": physical_id, "action": verb, "status": "IN_PROGRESS",
                "type": rtype, "operation": {"action": verb, "state": dict(progress.state),
                                             "properties": dict(props), "attempt": attempt},
                # While in progress it may be built on the old dependencies and the new: a
                # traversal planned meanwhile deletes neither before this one moves away.
                "requires": sorted(set(record.requires) | set(requires)),
            })
            result = StepResult(inp.node.seq, PARKED if progress.park else PENDING, [change],
                                events, delay=progress.delay)
        else:
            # An update that reports no attributes keeps the ones it had (a RandomString's
            # value must survive an in-place update).
            attributes = dict(progress.attributes) if progress.attributes is not None \
                else dict(record.attributes)
            ref = plugin.reference_id(physical_id, props, attributes)
            values: dict[str, Any] = {
                "physical_id": physical_id, "action": verb, "status": "COMPLETE",
                "status_reason": "", "type": rtype, "properties": dict(props),
                "attributes": attributes, "reference_id": None if ref is None else str(ref),
                "operation": None, "template_id": inp.template_id,
                "generation": inp.generation, "requires": requires,
            }
            if settle:  # converged to the older definition only: that is what it records
                values.update(template_id=record.template_id, generation=record.generation,
                              requires=list(record.requires))
            change = RecordChange(record.id, token, values)
            events.append(NewEvent(record.name, physical_id, rtype, verb, "COMPLETE",
                                   "state changed"))
            result = StepResult(inp.node.seq, RETRY if settle else DONE, [change], events)
        if replacing is not None:
            result.changes.append(RecordChange(replacing.id, inp.token,
                                               dict(replaced_values or {})))
        return result

    def _refused_result(self, inp: StepInput, record: RecordView, token: int,
                        exc: RetryLater) -> StepResult:
        """Try again later: as long as the cloud asked, doubling while it keeps refusing."""
        refused = self._refused.get(record.id, 0)
        self._refused[record.id] = refused + 1
        delay = max(exc.delay, min(exc.delay * 2 ** min(refused, 16), 60.0))
        return StepResult(inp.node.seq, RETRY, [RecordChange(record.id, token, {})],
                          delay=delay, reason=str(exc))

    def _try_again(self, inp: StepInput, record: RecordView, token: int,
                   exc: ResourceFailure, props: Mapping[str, Any], requires: list[int],
                   attempt: int, replacing: bool) -> StepResult:
        """A create that failed in the cloud, tried again: a new version is made and the one
        that failed is deleted after (by a cleanup node of this traversal), never adopted as
        if it were good. The failure is in the events, with the cloud's message."""
        failed_id = exc.physical_id
        rtype = inp.definition.resource_types[inp.node.name] if inp.definition else record.type
        reason = f"{exc} (attempt {attempt} of {self._retry_limit + 1}: trying again)"
        failed = {"physical_id": failed_id, "action": CREATE, "status": "FAILED",
                  "status_reason": reason, "operation": None}
        event = NewEvent(record.name, failed_id, record.type, CREATE, "FAILED", reason)
        if replacing:
            # Already the new version of a replacement (its create failed at once): poll it
            # now; the poll finds it failed and replaces it, as any failure found by a poll.
            change = RecordChange(record.id, token, {
                "physical_id": failed_id, "action": CREATE, "status": "IN_PROGRESS",
                "type": rtype, "operation": {"action": CREATE, "state": {},
                                             "properties": dict(props), "attempt": attempt}})
            return StepResult(inp.node.seq, PENDING, [change], [], delay=0.0)
        return StepResult(inp.node.seq, REPLACE, replacement=Replacement(
            rtype, props, requires, [event], attempt=attempt + 1, failed=failed))

    # cleanup --------------------------------------------------------------------------------
    def _cleanup(self, inp: StepInput, unhooked: Unhooked) -> StepResult:
        record = inp.record
        head = inp.heads.get(record.name)
        wanted = inp.definition is not None and \
            record.name in inp.definition.resource_types and \
            head is not None and head.id == record.id
        action = decide_cleanup(observed_of(record, inp.worked_on), wanted)
        if action is Action.NOTHING:
            return StepResult(inp.node.seq, DONE, [RecordChange(record.id, inp.token, {})])
        if action is Action.FORGET:
            return StepResult(inp.node.seq, DONE,
                              [RecordChange(record.id, inp.token, {}, delete=True)])
        policy = self._deletion_policy(record) if action is Action.DELETE else None
        if action is Action.DELETE and policy is None:
            return self.fail(inp, record, inp.token, DELETE, "its deletion_policy cannot be "
                             "read from the template it was converged to: nothing deleted")
        if policy == RETAIN:
            # Retain: the engine lets go of the resource and the cloud keeps it, in whatever
            # state it is (a create under way included), as Heat's delete honours the policy.
            event = NewEvent(record.name, record.physical_id, record.type, DELETE, "COMPLETE",
                             "retained: deletion_policy is Retain")
            return StepResult(inp.node.seq, DONE,
                              [RecordChange(record.id, inp.token, {}, delete=True)], [event])
        if action is Action.DELETE:
            hook = should_pause(self._hooks(record), DELETE, unhooked)
            if hook is not None:
                return pause(inp, record, DELETE, hook)
        plugin = self._plugin(record.type)
        if plugin is None:
            return self.fail(inp, record, inp.token, DELETE,
                                f"resource type '{record.type}' is not available")
        ctx = self._context(inp.stack, record, inp.lease_good)
        events: list[NewEvent] = []
        try:
            _check_lease(inp)
            if action is Action.POLL:
                op = record.operation or {}
                progress: Progress = plugin.poll(ctx, DELETE, record.physical_id,
                                                 record.properties, op.get("state", {}))
            else:
                events.append(NewEvent(record.name, record.physical_id, record.type, DELETE,
                                       "IN_PROGRESS", "state changed"))
                # Snapshot: the plugin takes one first (one that cannot fails, keeping all).
                delete = plugin.snapshot_delete if policy == SNAPSHOT else plugin.delete
                progress = delete(ctx, record.physical_id, record.properties)
        except ResourceFailure as exc:
            return self.fail(inp, record, inp.token, DELETE, str(exc) or "delete failed")
        except RetryLater as exc:
            return StepResult(inp.node.seq, RETRY, [RecordChange(record.id, inp.token, {})],
                              delay=exc.delay, reason=str(exc))
        if not progress.done:
            change = RecordChange(record.id, inp.token, {
                "action": DELETE, "status": "IN_PROGRESS",
                "operation": {"action": DELETE, "state": dict(progress.state)}})
            return StepResult(inp.node.seq, PARKED if progress.park else PENDING, [change],
                              events, delay=progress.delay)
        events.append(NewEvent(record.name, record.physical_id, record.type, DELETE,
                               "COMPLETE", "state changed"))
        return hold_after_delete(inp, StepResult(
            inp.node.seq, DONE, [RecordChange(record.id, inp.token, {}, delete=True)], events),
            self._hooks(record), unhooked)

    # failures -------------------------------------------------------------------------------
    def fail(self, inp: StepInput, record: RecordView, token: int, verb: str,
                reason: str) -> StepResult:
        message = f"{record.name}: {reason}"
        change = RecordChange(record.id, token, {
            "action": verb, "status": "FAILED", "status_reason": reason, "operation": None})
        event = NewEvent(record.name, record.physical_id, record.type, verb, "FAILED", reason)
        return StepResult(inp.node.seq, FAILED, [change], [event], reason=message)


def _stamp(inp: StepInput, result: StepResult, secrets: SecretMarks) -> StepResult:
    """Every record a converge step changed keeps the deletion policy of the definition it
    acted for (:mod:`convergence.engine.deletion`): its cleanup then needs no template. A
    change with no values (a lease let go of, the old version of a replacement) is left
    alone: nothing was done to that record under this definition. What it writes that is
    secret is marked for the store to keep encrypted (:mod:`convergence.engine.secrets`)."""
    policy = definition_policy(inp.definition, inp.node.name) if inp.definition else None
    if policy is not None:
        result.changes = [dataclasses.replace(c, values={**c.values, "deletion_policy": policy})
                          if c.values and not c.delete else c for c in result.changes]
    return secrets.mark(inp, result)


def _check_lease(inp: StepInput) -> None:
    """Before a call to the cloud: a lease lost while this worker was away (frozen, or too
    slow to renew) leaves the resource to whoever holds it now."""
    if not inp.lease_good():
        raise RetryLater("the lease was lost: the resource is someone else's now", 0.0)


def _action_for(record: RecordView) -> str:
    """The action a failure before acting is reported under."""
    if record.action == "INIT" or (record.action == CREATE and record.status != "COMPLETE"):
        return CREATE
    return UPDATE
