"""``OS::Heat::TestResource``: Heat's resource for testing the engine itself.

It stores a value, can be told to fail, to take time over each action (polled, never slept)
and to be replaced on update. Its property set is Heat's, so Heat's test templates run as is.
The engine's step calls :class:`TestResource` like any plugin; what it "creates" lives in its
backend, ``ctx.backends["test_entities"]`` (:mod:`convergence.plugins.heat.test_backend`: a
table in deployments, declared here and built by the registry;
:class:`~convergence.plugins.heat.test_entities.MemoryTestEntities` in unit tests), keyed by
the record's owner so that tests can count duplicates and leaks.

Waiting: an action does its work at once, then stays pending until ``ctx.now()`` reaches the
deadline kept in its poll state (none for ``-1``, which waits forever). Heat's knobs that have
no meaning here are accepted and ignored:

- ``attr_wait_secs``: Heat sleeps while resolving the ``output`` attribute, because it computes
  attributes when a dependent asks. Here attributes are stored when an action completes and
  dependents read the stored copy, so there is no moment at which to wait.
- ``client_name``/``entity_name``: Heat polls a real client while waiting, only to make load;
  there is no client to poll.
- ``constraint_prop_secs``: a delay of Heat's validation, which is not a plugin's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from convergence.plugins.base import (
    CREATE,
    DELETE,
    REPAIR,
    UPDATE,
    BackendFactory,
    Observation,
    PluginBase,
    PluginContext,
    Progress,
    ResourceFailure,
)
from convergence.plugins.heat.test_backend import TEST_ENTITIES, TestEntities, build
from convergence.template.properties import (
    BOOLEAN,
    MAP,
    NUMBER,
    STRING,
    PropertySchema,
    TypeSchema,
)

DEFAULT_VALUE = "test_string"
FAILED = "Test Resource failed"
# Long waits are re-checked at least this often, so a clock that jumps (or a preemption) is
# noticed without a worker holding on to the resource.
MAX_DELAY = 1.0


class TestResource(PluginBase):
    __test__ = False  # not a pytest test class

    # A pending wait holds nothing but a deadline, so abandoning it for a newer definition
    # leaves nothing half done.
    preemptible: ClassVar[bool] = True
    backends: ClassVar[Mapping[str, BackendFactory]] = {TEST_ENTITIES: build}
    observe_policy: ClassVar[str] = REPAIR  # what a test of the observer repairs

    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::TestResource",
        properties={
            "value": PropertySchema(STRING, "The value stored; the output attribute.",
                                    default=DEFAULT_VALUE, update_allowed=True),
            "update_replace": PropertySchema(BOOLEAN, "Replace, rather than update, when the "
                                             "value changes.", default=False,
                                             update_allowed=True),
            "update_replace_value": PropertySchema(STRING, "Changing it forces replacement."),
            "fail": PropertySchema(BOOLEAN, "Fail the action once its wait has elapsed.",
                                   default=False, update_allowed=True),
            "wait_secs": PropertySchema(NUMBER, "Seconds each action takes (-1: forever).",
                                        default=0, update_allowed=True),
            "action_wait_secs": PropertySchema(
                MAP, "Per-action overrides of wait_secs.", update_allowed=True,
                schema={a: PropertySchema(NUMBER, f"Seconds the {a} action takes.")
                        for a in ("create", "update", "delete")},
            ),
            "attr_wait_secs": PropertySchema(NUMBER, "Seconds resolving attributes takes.",
                                             default=0, update_allowed=True),
            "client_name": PropertySchema(STRING, "A client to poll while waiting.",
                                          default="", update_allowed=True),
            "entity_name": PropertySchema(STRING, "The client's entity to poll.", default="",
                                          update_allowed=True),
            "constraint_prop_secs": PropertySchema(NUMBER, "Seconds validation takes.",
                                                   default=0, update_allowed=True),
        },
        attributes=frozenset({"output"}),
        description="A resource for testing the engine.",
    )

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        entities = _backend(ctx)
        # Created even when told to fail, and removed when the failure is raised: while the
        # action is in progress the resource looks like any other that fails late.
        entity_id = _ensure(ctx, entities, None, _value(props))
        return _wait(ctx, CREATE, entity_id, props, _wait_secs(props, CREATE))

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        entities = _backend(ctx)
        entity_id = physical_id
        if not new.get("fail"):
            # Heat keeps the old value when told to fail. Setting an unchanged value again is
            # harmless and repairs an entity lost behind the engine's back.
            entity_id = _ensure(ctx, entities, physical_id, _value(new))
        # As Heat: only a change of the value takes the configured time; an update of the
        # other knobs completes (or fails) at once.
        changed = old.get("value") != new.get("value")
        return _wait(ctx, UPDATE, entity_id, new, _wait_secs(new, UPDATE) if changed else 0)

    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress:
        _remove(ctx, _backend(ctx), physical_id)
        return _wait(ctx, DELETE, physical_id, props, _wait_secs(props, DELETE))

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        if state.get("forever"):
            return Progress.pending(MAX_DELAY, state, physical_id)
        deadline = state.get("deadline")
        if deadline is not None:
            remaining = float(deadline) - ctx.now()
            if remaining > 0:
                return Progress.pending(min(remaining, MAX_DELAY), state, physical_id)
        if action == DELETE:
            # A delete ends with nothing of the resource's left, whatever happened while it
            # waited: a step that meant to bring the resource back (a newer definition) and
            # died before recording it may have made one, which only the owner key finds.
            _remove(ctx, _backend(ctx), physical_id)
        return _complete(ctx, action, physical_id, props)

    def discard(self, ctx: PluginContext, physical_id: str) -> None:
        # By id only: the owner key also finds the entity the record names.
        entities = _backend(ctx)
        if entities.get(physical_id) is not None:
            entities.delete(physical_id, guard=ctx.check_lease)

    def observe(self, ctx: PluginContext, physical_id: str,
                props: Mapping[str, Any]) -> Observation | None:
        """Its entity, if it still exists, and the value it holds."""
        value = _backend(ctx).get(physical_id)
        if value is None:
            return Observation.missing()
        return Observation.fine({"value": value} if "value" in props else {})

    def needs_replace(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        # The schema's rule covers update_replace_value, the one property not update_allowed;
        # Heat adds that a changed value replaces when the new definition says update_replace.
        if super().needs_replace(old, new):
            return True
        return old.get("value") != new.get("value") and bool(new.get("update_replace"))


def _backend(ctx: PluginContext) -> TestEntities:
    entities: TestEntities | None = ctx.backends.get(TEST_ENTITIES)
    if entities is None:
        raise ResourceFailure("OS::Heat::TestResource needs a test entity backend, and this "
                              "engine has none configured")
    return entities


def _value(props: Mapping[str, Any]) -> str:
    value = props.get("value")
    return DEFAULT_VALUE if value is None else str(value)


def _wait_secs(props: Mapping[str, Any], action: str) -> float:
    """Heat's rule: the action's own ``action_wait_secs`` entry, else ``wait_secs``."""
    secs = (props.get("action_wait_secs") or {}).get(action.lower())
    if secs is None:
        secs = props.get("wait_secs")
    return float(secs or 0)


def _ensure(ctx: PluginContext, entities: TestEntities, entity_id: str | None,
            value: str) -> str:
    """The record's entity, holding ``value``: the known one, else an adopted one, else new.

    Adoption is what makes a create repeated after a crash (entity made, id never recorded)
    end with one entity rather than two.
    """
    if entity_id is None or entities.get(entity_id) is None:
        found = entities.find(ctx.owner)
        if found is None:
            return entities.create(ctx.owner, value, guard=ctx.check_lease)
        entity_id = found[0]
    if entities.get(entity_id) != value:
        entities.update(entity_id, value, guard=ctx.check_lease)
    return entity_id


def _remove(ctx: PluginContext, entities: TestEntities, entity_id: str | None) -> None:
    """Remove the record's entity; what is already gone counts as removed.

    The owner's entity is looked up too: a create interrupted before the engine recorded the
    id leaves one that only the owner key finds.
    """
    if entity_id is not None and entities.get(entity_id) is not None:
        entities.delete(entity_id, guard=ctx.check_lease)
    found = entities.find(ctx.owner)
    if found is not None:
        entities.delete(found[0], guard=ctx.check_lease)


def _wait(ctx: PluginContext, action: str, entity_id: str | None, props: Mapping[str, Any],
          secs: float) -> Progress:
    """Pending until ``secs`` have passed (forever when negative, as in Heat), then complete."""
    if secs < 0:
        return Progress.pending(MAX_DELAY, {"forever": True}, entity_id)
    if secs == 0:
        return _complete(ctx, action, entity_id, props)
    return Progress.pending(min(secs, MAX_DELAY), {"deadline": ctx.now() + secs}, entity_id)


def _complete(ctx: PluginContext, action: str, entity_id: str | None,
              props: Mapping[str, Any]) -> Progress:
    """The end of an action's wait: fail if told to (never on delete), else publish output."""
    entities = _backend(ctx)
    if action == DELETE:
        return Progress.finished(entity_id)
    if props.get("fail"):
        if action == CREATE:
            # A failed create leaves nothing behind, as in Heat, where it stores nothing.
            _remove(ctx, entities, entity_id)
        raise ResourceFailure(FAILED)
    value = None if entity_id is None else entities.get(entity_id)
    if value is None:
        raise ResourceFailure(f"Test entity {entity_id} no longer exists")
    # Heat reads "output" from the stored data each time; the entity's value is that data.
    return Progress.finished(entity_id, {"output": value})
