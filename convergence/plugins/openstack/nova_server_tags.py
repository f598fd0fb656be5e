"""The tags the engine puts on the servers it makes: the record's key and the resource's mark.

Callers: ``convergence.plugins.openstack.nova_server`` (the boot request's tags, the tag
update, the ``tags`` attribute) and ``nova_server_networks`` (is the server holding a port an
older version of this resource?). Two tags ride on every server the engine boots:

- the owner tag of ``convergence.plugins.openstack.resource.owner_tag`` (``convergence:`` then
  the stack id and the record id), by which an interrupted create of the same record finds the
  server it made;
- the resource mark (``convergence-resource:`` then a digest of the stack id and the resource's
  name), the same on every version of one resource of one stack. A replacement is a new record,
  hence a new owner tag: the mark is what lets the new version recognise the old one, whose
  name proves nothing (the template may give any server that name).

Nova allows tags of 1 to 60 characters without ``/`` or ``,``: both fit. The template's own
tags come after them, and the engine's are never shown as the template's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from convergence.plugins.base import PluginContext
from convergence.plugins.openstack.resource import OWNER_PREFIX, owner_tag

RESOURCE_PREFIX = "convergence-resource:"


def resource_tag(ctx: PluginContext) -> str:
    """The mark every version of this stack's resource carries (32 hex digits of a digest)."""
    key = f"{ctx.stack_id}/{ctx.resource_name}".encode()
    return RESOURCE_PREFIX + hashlib.sha256(key).hexdigest()[:32]


def server_tags(ctx: PluginContext, props: Mapping[str, Any]) -> list[str]:
    """The tags a server of this record carries: the engine's two, then the template's."""
    return list(dict.fromkeys([owner_tag(ctx), resource_tag(ctx), *(props.get("tags") or [])]))


def template_tags(tags: Iterable[str]) -> list[str]:
    """A server's tags without the engine's own."""
    return [t for t in tags if not t.startswith((OWNER_PREFIX, RESOURCE_PREFIX))]


def older_version(ctx: PluginContext, tags: Iterable[str]) -> bool:
    """Whether a server with ``tags`` is another version of this very resource: it carries the
    resource's mark and an owner tag of this stack that is not this record's."""
    found = set(tags)
    stack = f"{OWNER_PREFIX}{ctx.stack_id}:"
    return resource_tag(ctx) in found and any(
        t.startswith(stack) and t != owner_tag(ctx) for t in found)
