"""Nested stacks as the engine sees them: what a step hands the resources that are nested
stacks, and a nested stack's end, told to its parent.

:func:`nested_properties` and :func:`nested_context` are the step's
(:mod:`convergence.engine.step`): a template resource's properties become its child's
parameters beside the digest of what its child is made from, and its plugin is handed that
child (:mod:`convergence.template.nesting`); a group is handed the parent's files and
environment and records the ``get_attr`` paths the template reads of it.

:func:`wake_parent`: the parked node of the resource that made a nested stack is woken in the
transaction that ends the child, so the parent never polls. Called by
:mod:`convergence.engine.conclusion` (a child's traversal finished) and
:mod:`convergence.engine.traversals` (a child stopped: cancelled without rollback, reset, or
stopped with its parent). The sweeper finds, with ``Tx.parked_nodes_done_waiting``, what a
lost message left parked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from convergence.plugins.base import PluginContext, ResourcePlugin
from convergence.ports.store import Tx
from convergence.ports.views import StackView
from convergence.ports.work import Work, batches
from convergence.template import StackDefinition
from convergence.template.files import is_template_reference
from convergence.template.nesting import (
    ATTRIBUTE_PATHS,
    CAPACITY,
    UPDATE_POLICY,
    attribute_paths,
    group_context,
    template_child,
    template_digest,
)

WAKE_BATCH = 200


def nested_properties(definition: StackDefinition, name: str, plugin: ResourcePlugin,
                      props: dict[str, Any],
                      resolve: Callable[[Any], Any] = lambda v: v) -> dict[str, Any]:
    """The properties a resource records and its plugin is called with (``resolve``: the
    step's resolver, for the resource's ``update_policy``)."""
    if is_template_reference(definition.resource_types[name]):
        # A template resource: its properties are its child's parameters, and what the
        # child is made from counts as one more (a new file updates the child).
        return {"parameters": props, "template": template_digest(definition, name)}
    if plugin.schema.generates_stack:
        # A group: what the template reads of it is part of what its child offers, and its
        # update policy says how its members change (rolling, in batches).
        out = {**props, ATTRIBUTE_PATHS: attribute_paths(definition, name)}
        policy = definition.template.resources[name].update_policy
        if policy:
            out[UPDATE_POLICY] = resolve(policy)
        capacity = (definition.scaling.get("capacity") or {}).get(name)
        if capacity is not None:
            out[CAPACITY] = capacity
        return out
    return props


def nested_context(ctx: PluginContext, definition: StackDefinition, name: str,
                   plugin: ResourcePlugin, props: Mapping[str, Any]) -> PluginContext:
    """``ctx`` with the child a nested stack's plugin needs (unchanged for other types)."""
    rtype = definition.resource_types.get(name)
    if rtype is None:
        return ctx
    if "parameters" in props and is_template_reference(rtype):
        return dataclasses.replace(ctx, child=template_child(definition, name,
                                                             props["parameters"]))
    if plugin.schema.generates_stack:
        return dataclasses.replace(ctx, child=group_context(definition, name))
    return ctx


def wake_records(tx: Tx, stack: StackView, record_ids: list[int],
                 size: int = WAKE_BATCH) -> list[Work]:
    """The event the nodes of these records of ``stack`` wait on came: wake them in its
    current traversal (parked: ready again, and offered; still stepping: marked woken, so
    that the park their step records does not hold). Returns the work that offers them."""
    if stack.traversal_id is None or not record_ids:
        return []
    seqs = tx.wake_nodes(stack.traversal_id, record_ids)
    return list(batches(stack.traversal_id, seqs, size))


def wake_parent(tx: Tx, stack: StackView) -> list[Work]:
    """If ``stack`` is nested: wake the node of its parent's current traversal that works on
    the record that made it (parked: ready again, and offered; still stepping: marked woken,
    so that the park its step records does not hold). Returns the work that offers it."""
    if stack.parent_id is None or stack.parent_record_id is None:
        return []
    parent = tx.stack(stack.parent_id, outputs=False)
    if parent is None:
        return []
    return wake_records(tx, parent, [stack.parent_record_id])
