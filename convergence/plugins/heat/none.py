"""``OS::Heat::None``: accepts any properties, offers any attribute (as None), never changes.

Used mostly in environments to switch other types off (``OS::Foo: OS::Heat::None``). The
engine's step calls it like any plugin; every action finishes at once. Its :func:`owner_uuid`
is also what the other stateless Heat types here (``Value``, ``RandomString``) use as their
physical id.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, ClassVar

from convergence.plugins.base import PluginBase, PluginContext, Progress
from convergence.template.properties import TypeSchema

# Fixed forever: changing it would change the physical id of every existing resource.
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "plugins.heat.convergence")


def owner_uuid(owner: str) -> str:
    """A physical id for a resource that has nothing physical behind it.

    Derived from the record's owner key, so a create repeated after a crash yields the same id
    rather than a second one.
    """
    return str(uuid.uuid5(_NAMESPACE, owner))


class NoneResource(PluginBase):
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::None",
        properties=None,
        attributes=None,
        description="A resource that does nothing; any properties are accepted and ignored.",
    )

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        # No attributes are stored: the engine reads a missing name as None, which is what
        # Heat's None gives for any attribute.
        return Progress.finished(owner_uuid(ctx.owner), {})

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        return Progress.finished(physical_id or owner_uuid(ctx.owner), {})

    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress:
        return Progress.finished(physical_id)

    def needs_replace(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        # Heat's None never updates nor replaces, whatever its (ignored) properties become:
        # that is what makes it safe to map a real type to it in an environment.
        return False
