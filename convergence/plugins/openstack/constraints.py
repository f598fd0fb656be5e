"""The cloud's custom constraints: ``nova.flavor``, ``glance.image``, ``neutron.network``...,
checked against the stack's cloud when a template is accepted, as Heat does.

Callers: every OpenStack resource type declares :data:`CHECKS` as its ``constraints``; the
plugin registry offers them to validation (``PluginRegistry.custom_constraints``), which the
use cases run when a stack is created or updated and on ``template validate``. The engine's
steps never check them: a template is checked once, when it is accepted.

A name or an id is looked up the way the resource types look it up (openstacksdk's
``find_*``), through the connection's short-lived look-up memory, so a thousand servers of one
flavor cost one call. A value the cloud does not have, or that several objects carry, is an
error naming it; a cloud that cannot answer now checks nothing (the resource fails with the
cloud's own message later if the value is wrong), so an outage of one service does not refuse
every stack.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from openstack import exceptions as sdk_exceptions

from convergence.plugins.base import CloudScope, ConstraintCheck, ResourceFailure, RetryLater
from convergence.plugins.openstack import clouds
from convergence.plugins.openstack.errors import translated
from convergence.plugins.openstack.lookups import cached

log = logging.getLogger(__name__)


def _finder(what: str, find: Callable[[Any], Callable[..., Any]]) -> ConstraintCheck:
    """A check that ``find(conn)(value)`` names exactly one ``what``."""

    def check(backends: Mapping[str, Any], scope: CloudScope, value: Any) -> str | None:
        backend = backends.get(clouds.CLOUDS)
        if backend is None or value in (None, "") or scope.cloudless:
            return None  # a cloudless stack's resources that need a cloud are refused anyway
        ref = str(value)
        try:
            conn = backend.connection(scope)
            with translated(f"looking up {what} {ref!r}"):
                found = cached(conn, ("constraint", what, ref),
                               lambda: find(conn)(ref, ignore_missing=True))
        except sdk_exceptions.DuplicateResource:
            return f"more than one {what} is named {ref!r}: give its id"
        except (RetryLater, ResourceFailure) as exc:
            log.warning("could not check %s %r against the cloud: %s", what, ref, exc)
            return None
        return None if found is not None else f"{what} {ref!r} not found in the cloud"

    return check


CHECKS: Mapping[str, ConstraintCheck] = {
    "nova.flavor": _finder("flavor", lambda c: c.compute.find_flavor),
    "nova.keypair": _finder("key pair", lambda c: c.compute.find_keypair),
    "nova.server": _finder("server", lambda c: c.compute.find_server),
    "nova.host_aggregate": _finder("host aggregate", lambda c: c.compute.find_aggregate),
    "glance.image": _finder("image", lambda c: c.image.find_image),
    "neutron.network": _finder("network", lambda c: c.network.find_network),
    "neutron.subnet": _finder("subnet", lambda c: c.network.find_subnet),
    "neutron.port": _finder("port", lambda c: c.network.find_port),
    "neutron.router": _finder("router", lambda c: c.network.find_router),
    "neutron.security_group": _finder("security group",
                                      lambda c: c.network.find_security_group),
    "neutron.qos_policy": _finder("QoS policy", lambda c: c.network.find_qos_policy),
    "cinder.volume": _finder("volume", lambda c: c.block_storage.find_volume),
    "cinder.snapshot": _finder("volume snapshot", lambda c: c.block_storage.find_snapshot),
    "cinder.backup": _finder("volume backup", lambda c: c.block_storage.find_backup),
    "cinder.vtype": _finder("volume type", lambda c: c.block_storage.find_type),
}
