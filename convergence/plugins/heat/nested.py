"""Nested stacks: ``OS::Heat::Stack`` and template resources (a type naming a template file).

Each resource is a child stack made through the engine's own stacks (the ``stacks`` backend,
:class:`~convergence.plugins.base.ChildStacks`): create, update and delete start the child's
request and *park* (``Progress.parked``): the node holds nothing until the child's end wakes
it; then the poll reads the child's outcome. The child's outputs become the resource's
attributes (materialised in its record: reading one never loads the child), with
``OS::stack_id`` and ``OS::stack_name``. A change of properties (or of a template resource's
file) updates the child in place, never replaces it; a newer definition arriving while the
child works takes it over at once (``preemptible``): the child's new request supersedes the
one under way.

A template resource's properties are its child's parameters; the engine's step hands the
child's template, files and environment in ``ctx.child`` (:mod:`convergence.template.nesting`)
and records ``{"parameters": ..., "template": <digest>}``. Its plugin is
:class:`TemplateResource`, which the registry hands out for any type naming a template.

Callers: the engine's steps (through the registry), and the group plugins built on
:class:`NestedStackBase`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, cast

from convergence.plugins.base import (
    CREATE,
    DELETE,
    UPDATE,
    BackendFactory,
    ChildStacks,
    ChildState,
    Observation,
    PluginBase,
    PluginContext,
    PluginHost,
    Progress,
    ResourceFailure,
)
from convergence.template.nesting import ChildTemplate
from convergence.template.properties import MAP, NUMBER, STRING, PropertySchema, TypeSchema

STACK_ID, STACK_NAME = "OS::stack_id", "OS::stack_name"


def _stacks_backend(host: PluginHost) -> object | None:
    return host.stacks


def stacks_of(ctx: PluginContext) -> ChildStacks:
    found = ctx.backends.get("stacks")
    if found is None:
        raise ResourceFailure("nested stacks are not available in this process")
    return cast(ChildStacks, found)


class NestedStackBase(PluginBase):
    """A resource that is a child stack: what :meth:`child` says it is made of."""

    preemptible: ClassVar[bool] = True
    backends: ClassVar[Mapping[str, BackendFactory]] = {"stacks": _stacks_backend}

    def child(self, ctx: PluginContext, props: Mapping[str, Any],
              current: ChildState | None = None) -> ChildTemplate:
        """What the child is made of for ``props`` (``current``: the child as it is, for a
        type whose template depends on it)."""
        raise NotImplementedError

    def timeout(self, props: Mapping[str, Any]) -> int | None:
        return None

    def attributes(self, state: ChildState, props: Mapping[str, Any]) -> dict[str, Any]:
        """The resource's attributes once its child is there: the child's outputs."""
        return {STACK_ID: state.id, STACK_NAME: state.name, **state.outputs}

    # actions --------------------------------------------------------------------------------
    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        state = stacks_of(ctx).create(ctx, self.child(ctx, props), self.timeout(props))
        return self._progress(ctx, state, props)

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        if physical_id is None:
            return self.create(ctx, new)
        state = stacks_of(ctx).update(ctx, physical_id, self.child(ctx, new),
                                      self.timeout(new))
        return self._progress(ctx, state, new)

    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress:
        if physical_id is None:
            return Progress.finished(None)
        return self._deleting(stacks_of(ctx).delete(ctx, physical_id), physical_id)

    def discard(self, ctx: PluginContext, physical_id: str) -> None:
        stacks_of(ctx).delete(ctx, physical_id)

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        stacks = stacks_of(ctx)
        found = stacks.state(ctx, physical_id) if physical_id is not None else None
        if action == DELETE:
            if found is not None and not found.deleted and found.action != DELETE:
                found = stacks.delete(ctx, found.id)  # not deleting (yet): ask again
            return self._deleting(found, physical_id)
        if found is None or found.deleted:
            if action == CREATE and physical_id is None:
                return self.create(ctx, props)
            raise ResourceFailure(f"nested stack {physical_id} is gone")
        if found.status != "IN_PROGRESS" and found.template_id != state.get("template_id"):
            # The child was last asked for something else than this operation wants.
            found = stacks.update(ctx, found.id, self.child(ctx, props, found),
                                  self.timeout(props))
        return self._progress(ctx, found, props)

    def needs_replace(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        return False  # a nested stack is updated in place, whatever changed

    def observe(self, ctx: PluginContext, physical_id: str,
                props: Mapping[str, Any]) -> Observation | None:
        found = stacks_of(ctx).state(ctx, physical_id)
        if found is None or found.deleted:
            return Observation.missing("the nested stack is gone")
        if found.status == "FAILED":
            return Observation.broken(f"the nested stack is {found.action}_FAILED: "
                                      f"{found.reason}")
        return Observation.fine()

    def reference_id(self, physical_id: str | None, props: Mapping[str, Any],
                     attributes: Mapping[str, Any]) -> Any:
        # As Heat: a child's own ``OS::stack_id`` output stands for it, else its id.
        return attributes.get(STACK_ID, physical_id)

    # where a child stands -------------------------------------------------------------------
    def _progress(self, ctx: PluginContext, state: ChildState,
                  props: Mapping[str, Any]) -> Progress:
        if state.status == "IN_PROGRESS":
            return Progress.parked({"template_id": state.template_id}, state.id)
        if state.status == "FAILED" or state.action not in (CREATE, UPDATE):
            raise ResourceFailure(f"nested stack {state.name} is {state.action}_"
                                  f"{state.status}: {state.reason}")
        return Progress.finished(state.id, self.attributes(state, props))

    @staticmethod
    def _deleting(state: ChildState | None, physical_id: str | None) -> Progress:
        if state is None or state.deleted:
            return Progress.finished(physical_id)
        if state.status == "FAILED":
            raise ResourceFailure(f"nested stack {state.name} is DELETE_FAILED: "
                                  f"{state.reason}")
        return Progress.parked({}, state.id)


class StackResource(NestedStackBase):
    """``OS::Heat::Stack``: a child stack of a template given as a property."""

    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::Stack",
        properties={
            "template": PropertySchema(STRING, "The template of the nested stack.",
                                       required=True, update_allowed=True),
            "parameters": PropertySchema(MAP, "The parameter values of the nested stack.",
                                         default={}, update_allowed=True),
            "timeout": PropertySchema(NUMBER, "Minutes the nested stack's requests may "
                                      "take.", update_allowed=True),
            "context": PropertySchema(MAP, "The context the nested stack is made in "
                                      "(region_name: only this engine's own region).",
                                      schema={"region_name": PropertySchema(STRING)}),
        },
        attributes=frozenset({"outputs", "stack_name", STACK_ID, STACK_NAME}),
        description="A nested stack made from a template given as a property; its outputs "
                    "are read with get_attr [name, outputs, output].",
    )

    def child(self, ctx: PluginContext, props: Mapping[str, Any],
              current: ChildState | None = None) -> ChildTemplate:
        region = (props.get("context") or {}).get("region_name")
        if region:
            raise ResourceFailure(f"context.region_name: a stack in another region "
                                  f"({region}) is not supported; leave it out to make "
                                  "the stack beside this one")
        return ChildTemplate(str(props["template"]),
                             parameters=dict(props.get("parameters") or {}))

    def timeout(self, props: Mapping[str, Any]) -> int | None:
        value = props.get("timeout")
        return None if value is None else max(int(value), 1)

    def attributes(self, state: ChildState, props: Mapping[str, Any]) -> dict[str, Any]:
        return {STACK_ID: state.id, STACK_NAME: state.name, "stack_name": state.name,
                "outputs": dict(state.outputs)}


class TemplateResource(NestedStackBase):
    """A resource whose type names a template: a child stack of that file, its properties
    the child's parameters, its attributes the child's outputs."""

    schema: ClassVar[TypeSchema] = TypeSchema(
        name="template resource", properties=None, attributes=None,
        description="A nested stack made from a template file named as a resource type.")

    def child(self, ctx: PluginContext, props: Mapping[str, Any],
              current: ChildState | None = None) -> ChildTemplate:
        if ctx.child is None:
            raise ResourceFailure("the template of this template resource is not known")
        return ctx.child
