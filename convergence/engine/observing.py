"""Steps that look at the cloud before they decide: a ``stack check``, an update that
converges with observed reality (``converge: true``), and an external resource
(``external_id``), read and adopted rather than made.

Callers: :class:`~convergence.engine.step.Stepper` is built on :class:`ObservingSteps`; its
``run`` hands a CHECK traversal's converge nodes to :meth:`ObservingSteps._check` and, in a
traversal that observes, asks :meth:`ObservingSteps._repair` first. A check changes nothing
in the cloud: it says per resource what the plugin's ``observe`` found (missing, in ERROR, or
changed behind the engine's back: drift) as ``CHECK_COMPLETE`` or ``CHECK_FAILED``. An update
that converges makes again what vanished, replaces what is in ERROR and changes drifted
properties back, from where the resource really is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from convergence.engine.outcomes import CHECK, DONE, StepInput, StepResult
from convergence.plugins.base import (
    CREATE,
    UPDATE,
    Observation,
    PluginContext,
    ResourceFailure,
    ResourcePlugin,
    RetryLater,
)
from convergence.ports.views import NewEvent, RecordChange, RecordView


class ObservingSteps:
    """The observing half of a stepper; the acting half (:class:`Stepper`) supplies the
    methods declared here."""

    _plugin: Callable[[str], ResourcePlugin | None]
    _context: Callable[..., PluginContext]  # (stack, record, lease_good[, token])

    def _act(self, inp: StepInput, plugin: ResourcePlugin, record: RecordView, token: int,
             verb: str, props: Mapping[str, Any], requires: list[int], *,
             old: Mapping[str, Any] | None = None) -> StepResult:
        raise NotImplementedError

    def _replacement(self, inp: StepInput, props: Mapping[str, Any], requires: list[int],
                     rtype: str, events: list[NewEvent] | None = None) -> StepResult:
        raise NotImplementedError

    def _refused_result(self, inp: StepInput, record: RecordView, token: int,
                        exc: RetryLater) -> StepResult:
        raise NotImplementedError

    def fail(self, inp: StepInput, record: RecordView, token: int, verb: str,
             reason: str) -> StepResult:
        raise NotImplementedError

    def _look(self, inp: StepInput, plugin: ResourcePlugin,
              record: RecordView) -> Observation | StepResult | None:
        """What the resource really is; a RETRY result when the cloud did not answer."""
        assert record.physical_id is not None
        ctx = self._context(inp.stack, record, inp.lease_good)
        try:
            return plugin.observe(ctx, record.physical_id, record.properties)
        except RetryLater as exc:
            return self._refused_result(inp, record, inp.token, exc)
        except ResourceFailure as exc:
            return Observation.broken(str(exc) or "could not be observed")

    def _repair(self, inp: StepInput, plugin: ResourcePlugin, record: RecordView,
                props: Mapping[str, Any], requires: list[int],
                rtype: str) -> StepResult | None:
        """Converging with observed reality: a resource gone behind the engine's back is
        made again, one in ERROR replaced, properties changed behind its back changed back
        (with the template's changes, if any). None: as the record says; decide as usual."""
        seen = self._look(inp, plugin, record)
        if seen is None or not isinstance(seen, Observation):
            return seen
        if not seen.exists:
            # The record's physical id is gone: the create's own event says so ("no longer
            # exists"), ending that id's story, and a new one is made under the same record.
            return self._act(inp, plugin, record, inp.token, CREATE, props, requires)
        event = NewEvent(record.name, record.physical_id, record.type, "CHECK", "FAILED",
                         seen.reason)
        if not seen.healthy:
            return self._replacement(inp, props, requires, rtype, [event])
        changed = drift(record.properties, seen.properties)
        if not changed:
            return None
        old = {**record.properties, **{k: now for k, (_, now) in changed.items()}}
        event = dataclasses.replace(event, reason=drift_reason(changed))
        if plugin.needs_replace(old, props):
            return self._replacement(inp, props, requires, rtype, [event])
        result = self._act(inp, plugin, record, inp.token, UPDATE, props, requires, old=old)
        result.events.insert(0, event)
        return result

    def _check(self, inp: StepInput) -> StepResult:
        """A CHECK: look at the resource and say what it is; change nothing in the cloud. A
        resource missing, in ERROR or changed behind the engine's back is CHECK_FAILED (the
        next update replaces it; one that converges repairs it)."""
        record = inp.record
        plugin = self._plugin(record.type)
        begun = NewEvent(record.name, record.physical_id, record.type, CHECK, "IN_PROGRESS",
                         "state changed")
        reason = ""
        if plugin is None:
            reason = f"resource type '{record.type}' is not available"
        elif record.status == "FAILED" and record.action != CHECK:
            reason = f"{record.action} failed: {record.status_reason}"
        elif record.physical_id is not None:
            seen = self._look(inp, plugin, record)
            if seen is not None and not isinstance(seen, Observation):
                return seen
            if seen is not None and not seen.healthy:
                reason = seen.reason
            elif seen is not None:
                changed = drift(record.properties, seen.properties)
                reason = drift_reason(changed) if changed else ""
        status = "FAILED" if reason else "COMPLETE"
        change = RecordChange(record.id, inp.token, {
            "action": CHECK, "status": status, "status_reason": reason})
        done = NewEvent(record.name, record.physical_id, record.type, CHECK, status,
                        reason or "state changed")
        return StepResult(inp.node.seq, DONE, [change], [begun, done],
                          reason=f"{record.name}: {reason}" if reason else "",
                          check_failed=reason)


    def _external(self, inp: StepInput, plugin: ResourcePlugin, external: Any,
                  props: Mapping[str, Any], requires: list[int], rtype: str) -> StepResult:
        """An external resource (``external_id``): the object is there already and not the
        stack's; its attributes are read, nothing is made (and its cleanup never deletes it:
        its policy is Retain)."""
        record = inp.record
        physical_id = str(external)
        if record.physical_id == physical_id and record.status == "COMPLETE" and \
                record.action != "INIT" and dict(record.properties) == dict(props):
            return StepResult(inp.node.seq, DONE, [RecordChange(record.id, inp.token, {
                "template_id": inp.template_id, "generation": inp.generation,
                "requires": requires})])
        ctx = self._context(inp.stack, record, inp.lease_good)
        try:
            progress = plugin.adopt(ctx, physical_id, props)
        except ResourceFailure as exc:
            return self.fail(inp, record, inp.token, CREATE, str(exc) or "not found")
        except RetryLater as exc:
            return self._refused_result(inp, record, inp.token, exc)
        attributes = dict(progress.attributes or {})
        ref = plugin.reference_id(physical_id, props, attributes)
        change = RecordChange(record.id, inp.token, {
            "physical_id": physical_id, "action": CREATE, "status": "COMPLETE",
            "status_reason": "external resource", "type": rtype, "properties": dict(props),
            "attributes": attributes, "reference_id": None if ref is None else str(ref),
            "operation": None, "template_id": inp.template_id, "generation": inp.generation,
            "requires": requires})
        event = NewEvent(record.name, physical_id, rtype, CREATE, "COMPLETE",
                         "external resource: adopted, not made")
        return StepResult(inp.node.seq, DONE, [change], [event])


def drift(recorded: Mapping[str, Any],
           actual: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The properties whose value in the cloud is not the one the record converged to."""
    return {k: (recorded.get(k), v) for k, v in actual.items() if recorded.get(k) != v}


def drift_reason(drift: Mapping[str, tuple[Any, Any]]) -> str:
    return "changed behind the engine's back: " + "; ".join(
        f"{k} is {now!r}, was {was!r}" for k, (was, now) in sorted(drift.items()))
