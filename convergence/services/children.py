"""Nested stacks, as the resources that make them reach the engine's own stacks: create,
update, delete and read a child stack of a resource record.

The plugins of nested stacks (``OS::Heat::Stack``, template resources, the groups:
``convergence.plugins.heat``) find this through ``ctx.backends["stacks"]`` (the
:class:`~convergence.plugins.base.ChildStacks` port); ``convergence.runtime`` builds one per
runtime and attaches the runtime to it. Each call is one short transaction of its own, made
from a step with no transaction open, like a call to a cloud; each is idempotent: a child is
found by the record that owns it (``stacks.parent_record_id``), so a step repeated after a
crash finds the child its first attempt made. A child is a real stack: its own traversals, in
the same scheduler, in parallel with the rest; its end wakes the parent's parked node
(:mod:`convergence.engine.nesting`).

A child gets its parent's tenant, cloud and trust, the parent's timeout unless given one, and
no rollback of its own (its parent's rollback updates it back). Refused, as the resource's
failure: a template that does not validate, a tree deeper than ``max_nested_depth`` or holding
more than ``max_tree_resources`` resources.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from typing import Any

from convergence.engine.definitions import build_definition
from convergence.engine.traversals import begin_traversal
from convergence.errors import Conflict
from convergence.plugins.base import ChildState, PluginContext, ResourceFailure
from convergence.ports.store import Tx
from convergence.ports.views import StackView, TemplateContent, template_id
from convergence.services.admission import check_content
from convergence.services.context import Attached
from convergence.services.stacks import start
from convergence.services.templates import store_template
from convergence.template import StackDefinition, TemplateError
from convergence.template.nesting import ChildTemplate


def child_state(stack: StackView) -> ChildState:
    outputs = {name: (out.get("value") if isinstance(out, dict) else out)
               for name, out in (stack.outputs or {}).items()}
    return ChildState(id=stack.id, name=stack.name, action=stack.action, status=stack.status,
                      reason=stack.status_reason, template_id=stack.template_id,
                      outputs=outputs, deleted=stack.deleted_at is not None)


def child_name(parent: StackView, resource: str, record_id: int) -> str:
    """As Heat names them (``<parent>-<resource>-<short id>``), the id derived from the
    owning record, so that a repeated create names the same stack."""
    short = hashlib.sha1(f"{parent.id}/{record_id}".encode()).hexdigest()[:12]
    return f"{parent.name}-{resource}-{short}"[-255:]


def tree_size(definition: StackDefinition) -> int:
    """The resources a definition makes, its template resources' children included."""
    return len(definition.resource_types) + sum(tree_size(d)
                                                for d in definition.nested.values())


class ChildStackService(Attached):
    """The :class:`~convergence.plugins.base.ChildStacks` of one runtime (see the module)."""

    def unattached(self) -> Exception:
        return ResourceFailure("nested stacks are not available in this process")

    # the port -------------------------------------------------------------------------------
    def create(self, ctx: PluginContext, child: ChildTemplate,
               timeout_mins: int | None = None) -> ChildState:
        rt = self.rt
        parent_id, record_id = _owner(ctx)
        content = _content(child)
        with rt.store.read() as tx:
            parent = tx.stack(parent_id)
            found = tx.child_stack(record_id)
            tree = tx.tree_resources(parent.root_id or parent.id) \
                if parent is not None and rt.settings.max_tree_resources else 0
        if parent is None or parent.deleted_at is not None:
            raise ResourceFailure(f"stack {parent_id} is gone")
        if found is not None and found.deleted_at is None:
            # Made by an earlier attempt (or by a traversal since stopped): converged to
            # what is wanted now.
            return self.update(ctx, found.id, child, timeout_mins)
        depth = parent.nested_depth + 1
        limit = rt.settings.max_nested_depth
        if depth > limit:
            raise ResourceFailure(f"nested stacks go deeper than {limit} levels "
                                  "(max_nested_depth)")
        definition = self._accept(content, depth, child.generated)
        if rt.settings.max_tree_resources and \
                tree + tree_size(definition) > rt.settings.max_tree_resources:
            raise ResourceFailure(
                f"the stack tree of {parent.name} would hold {tree + tree_size(definition)} "
                f"resources, more than {rt.settings.max_tree_resources} "
                "(max_tree_resources)")
        name = child_name(parent, ctx.resource_name, record_id)
        child_id = str(uuid.uuid4())

        def made(tx: Tx) -> tuple[StackView, str | None]:
            again = tx.child_stack(record_id)
            if again is not None and again.deleted_at is None:
                return again, None
            tid = store_template(tx, content, definition)
            tx.insert_stack(child_id, parent.tenant, name,
                            timeout_mins=timeout_mins or parent.timeout_mins,
                            disable_rollback=True)
            tx.update_stack(child_id, parent_id=parent.id, parent_resource=ctx.resource_name,
                            parent_record_id=record_id, nested_depth=depth,
                            root_id=parent.root_id or parent.id, cloud=parent.cloud,
                            trust_id=parent.trust_id)
            stack = tx.stack(child_id)
            assert stack is not None
            traversal_id = begin_traversal(tx, stack, "CREATE", tid)
            made_stack = tx.stack(child_id)
            assert made_stack is not None
            return made_stack, traversal_id

        try:
            stack, traversal_id = rt.store.transact(made)
        except Conflict:
            raise ResourceFailure(f"a stack named {name} exists already") from None
        self._start(traversal_id)
        return child_state(stack)

    def existing(self, ctx: PluginContext) -> ChildState | None:
        _, record_id = _owner(ctx)
        with self.rt.store.read() as tx:
            found = tx.child_stack(record_id)
        return child_state(found) if found is not None and found.deleted_at is None else None

    def update(self, ctx: PluginContext, child_id: str, child: ChildTemplate,
               timeout_mins: int | None = None) -> ChildState:
        rt = self.rt
        parent_id, _ = _owner(ctx)
        content = _content(child)
        tid = template_id(content)
        with rt.store.read() as tx:
            current = self._mine(tx, parent_id, child_id, outputs=False)
            if current.template_id == tid and current.status != "FAILED" and \
                    current.action in ("CREATE", "UPDATE"):  # on its way there, or there
                return child_state(self._mine(tx, parent_id, child_id))
        definition = self._accept(content, current.nested_depth, child.generated)

        def updated(tx: Tx) -> tuple[StackView, str | None]:
            stack = self._mine(tx, parent_id, child_id, lock=True, outputs=False)
            if stack.template_id == tid and stack.status != "FAILED" and \
                    stack.action in ("CREATE", "UPDATE"):
                return self._mine(tx, parent_id, child_id), None
            if stack.action == "DELETE" and stack.status == "IN_PROGRESS":
                raise ResourceFailure(f"nested stack {stack.name} is being deleted")
            store_template(tx, content, definition)
            if timeout_mins is not None and timeout_mins != stack.timeout_mins:
                tx.update_stack(stack.id, timeout_mins=timeout_mins)
                stack = self._mine(tx, parent_id, child_id, outputs=False)
            traversal_id = begin_traversal(tx, stack, "UPDATE", tid)
            # In progress now: what it outputs is read when it ends, not here.
            return self._mine(tx, parent_id, child_id, outputs=False), traversal_id

        stack, traversal_id = self.rt.store.transact(updated)
        self._start(traversal_id)
        return child_state(stack)

    def delete(self, ctx: PluginContext, child_id: str) -> ChildState | None:
        parent_id, _ = _owner(ctx)

        def deleting(tx: Tx) -> tuple[StackView | None, str | None]:
            stack = tx.stack(child_id, lock=True)
            if stack is None:
                return None, None
            if stack.parent_id != parent_id:
                raise ResourceFailure(f"stack {child_id} is not a nested stack of this one")
            if stack.deleted_at is not None or \
                    (stack.action == "DELETE" and stack.status == "IN_PROGRESS"):
                return stack, None
            return stack, begin_traversal(tx, stack, "DELETE", None)

        stack, traversal_id = self.rt.store.transact(deleting)
        self._start(traversal_id)
        if stack is None:
            return None
        with self.rt.store.read() as tx:
            now = tx.stack(stack.id)
        return child_state(now) if now is not None else None

    def state(self, ctx: PluginContext, child_id: str) -> ChildState | None:
        parent_id, _ = _owner(ctx)
        with self.rt.store.read() as tx:
            stack = tx.stack(child_id)
        if stack is None or stack.parent_id != parent_id:
            return None
        return child_state(stack)

    def resources(self, ctx: PluginContext, child_id: str) -> dict[str, str]:
        with self.rt.store.read() as tx:
            if not _is_child(tx, ctx, child_id):
                return {}
            # Outlines: no properties or attributes read, however big the group.
            return {r.name: r.status for r in tx.record_outlines(child_id)
                    if r.replaced_by is None}

    def references(self, ctx: PluginContext, child_id: str) -> dict[str, str]:
        with self.rt.store.read() as tx:
            if not _is_child(tx, ctx, child_id):
                return {}
            names = [r.name for r in tx.record_outlines(child_id) if r.replaced_by is None]
            return {r.name: str(r.reference_id if r.reference_id is not None
                                else r.physical_id)
                    for r in tx.head_values(child_id, names).values()
                    if r.physical_id is not None}

    # helpers --------------------------------------------------------------------------------
    def _accept(self, content: TemplateContent, depth: int,
                generated: bool = False) -> StackDefinition:
        """Validate a child's content as a request's is (sizes, template, the nesting left
        below it), or fail the resource naming what is wrong; the definition is kept for the
        engine of this process. A ``generated`` text (a group's) is not weighed: the user
        sent none of it."""
        rt = self.rt
        try:
            check_content(dataclasses.replace(content, text="") if generated else content,
                          rt.settings)
            definition = build_definition(
                content, rt.registry,
                max_nesting=max(rt.settings.max_nested_depth - depth, 0))
        except TemplateError as exc:
            raise ResourceFailure(f"the nested stack's template is not valid: {exc}") \
                from None
        rt.engine.definitions.put(template_id(content), definition)
        return definition

    @staticmethod
    def _mine(tx: Tx, parent_id: str, child_id: str, lock: bool = False,
              outputs: bool = True) -> StackView:
        stack = tx.stack(child_id, lock=lock, outputs=outputs)
        if stack is None or stack.deleted_at is not None:
            raise ResourceFailure(f"nested stack {child_id} is gone")
        if stack.parent_id != parent_id:
            raise ResourceFailure(f"stack {child_id} is not a nested stack of this one")
        return stack

    def _start(self, traversal_id: str | None) -> None:
        """Send a committed traversal's plan (what is lost, the sweeper plans)."""
        if traversal_id is not None:
            start(self.rt, traversal_id)


def _is_child(tx: Tx, ctx: PluginContext, child_id: str) -> bool:
    """Whether ``child_id`` is a nested stack of the stack ``ctx`` works in."""
    stack = tx.stack(child_id, outputs=False)
    return stack is not None and stack.parent_id == _owner(ctx)[0]


def _owner(ctx: PluginContext) -> tuple[str, int]:
    """The parent stack and the record a plugin call works for (``ctx.owner``)."""
    stack_id, _, record = ctx.owner.rpartition("/")
    return stack_id, int(record)


def _content(child: ChildTemplate) -> TemplateContent:
    environments: tuple[Any, ...] = (dict(child.environment),) if child.environment else ()
    return TemplateContent(child.text, dict(child.files), environments,
                           dict(child.parameters))
