"""Names the OpenStack resource types give what they make when the template names nothing.

Callers: the types whose objects carry no tags (``OS::Nova::Flavor``, ``OS::Nova::ServerGroup``)
find what an interrupted create made by the name :func:`physical_name` gives, and
``OS::Cinder::Volume`` names its volumes with it, as Heat does with its physical resource
names. The name is Heat's shape (``<stack>-<resource>-<suffix>``) but its suffix is derived
from the record's key rather than drawn at random: the same record always gets the same name,
which is what lets a create that was cut short be found again instead of made twice.
"""

from __future__ import annotations

import base64
import hashlib

from convergence.plugins.base import PluginContext

SUFFIX = 12  # characters, as Heat's short ids


def physical_name(ctx: PluginContext, limit: int = 255) -> str:
    """``<stack>-<resource>-<suffix>``, at most ``limit`` characters; the same for the same
    record (the suffix is a digest of its key), different for every other."""
    digest = hashlib.sha256(ctx.owner.encode()).digest()
    suffix = base64.b32encode(digest).decode().lower()[:SUFFIX]
    head = f"{ctx.stack_name}-{ctx.resource_name}"
    room = limit - SUFFIX - 1
    if len(head) > room:  # Heat keeps both ends of a name it shortens
        half = room // 2
        head = head[:half] + head[len(head) - (room - half):]
    return f"{head}-{suffix}"
