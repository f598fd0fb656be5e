"""``OS::Neutron::FloatingIP`` and ``OS::Neutron::FloatingIPAssociation``: public addresses
from an external network, and their mapping to a port's fixed address.

Callers: the registry (entry points ``OS::Neutron::FloatingIP`` and
``OS::Neutron::FloatingIPAssociation``); the engine's steps call them through the plugin port.
Schemas, what updates in place and the attributes are Heat's.

A floating IP carries the record's key as a Neutron tag. It is made first, then associated with
its port (``port_id``, ``fixed_ip_address``), in the same step: moving it to another port, or
off any, is an update in place. An association changes a floating IP it does not own: its
physical id is the floating IP's id, an update re-associates (taking the old floating IP off the
port when the floating IP changes), a delete takes it off the port (a floating IP already gone,
or already moved to another port by someone else, counts as done).

Neutron associates a floating IP only when a router joins the port's subnet to the floating
network (else 404 ``ExternalGatewayForFloatingIPNotFound``). Heat orders a floating IP after
the router interfaces and gateways of its template by implicit dependencies the engine does not
draw; so the association waits, polled, up to :data:`REACH_WAIT` seconds for that router
before the resource fails with Neutron's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from openstack import exceptions as sdk_exceptions

from convergence.plugins.base import (
    DELETE,
    Observation,
    PluginContext,
    Progress,
    ResourceFailure,
)
from convergence.plugins.openstack import implicit
from convergence.plugins.openstack.errors import Absent, translated
from convergence.plugins.openstack.neutron_net import tagged, with_tags
from convergence.plugins.openstack.neutron_port import (
    cloud_message,
    neutron_type,
    refused,
    resolve,
)
from convergence.plugins.openstack.resource import OpenStackResource, owner_tag
from convergence.template.properties import MAP, STRING, PropertySchema, TypeSchema

REACH_WAIT = 300.0  # seconds an association waits for a router to reach the port's subnet
REACH_DELAY = 2.0  # seconds between two tries meanwhile
UNREACHABLE = "ExternalGatewayForFloatingIPNotFound"
ASSOCIATING = "associating"  # the phase of a step waiting for that router


class Unreachable(Exception):
    """No router joins the port's subnet to the floating network yet (Neutron's message)."""


def associate(conn: Any, fip_id: str, port_id: str | None, fixed_ip: str | None) -> Any:
    """Map the floating IP to ``port_id`` (None: to no port); answers the floating IP.

    Raises :class:`Unreachable` while no router reaches the port; a port or address that is
    not there fails the resource (the SDK's 404 is otherwise the floating IP's own absence).
    """
    try:
        with refused(f"associating floating IP {fip_id}", "PortNotFound"):
            return conn.network.update_ip(fip_id, port_id=port_id, fixed_ip_address=fixed_ip)
    except sdk_exceptions.NotFoundException as exc:
        if neutron_type(exc) == UNREACHABLE:
            raise Unreachable(cloud_message(exc)) from exc
        raise


def waiting(ctx: PluginContext, physical_id: str, since: float | None,
            exc: Unreachable) -> Progress:
    """Pending while :data:`REACH_WAIT` has not passed since the first try; then failed."""
    now = ctx.now()
    started = now if since is None else since
    if now - started >= REACH_WAIT:
        raise ResourceFailure(f"associating floating IP {physical_id}: {exc}")
    return Progress.pending(REACH_DELAY, {"phase": ASSOCIATING, "since": started},
                            physical_id)


def since_of(state: Mapping[str, Any]) -> float | None:
    """When an association waiting for its router first tried (None: not waiting)."""
    if state.get("phase") != ASSOCIATING:
        return None
    return float(state.get("since") or 0.0)


class FloatingIP(OpenStackResource):
    noun = "floating IP"
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Neutron::FloatingIP",
        description="A Neutron floating IP.",
        implicit=implicit.floating_ip,
        properties={
            "floating_network": PropertySchema(
                STRING, "The external network to take the address from (name or id).",
                custom_constraint="neutron.network"),
            "floating_network_id": PropertySchema(STRING, "Deprecated: use floating_network.",
                                                  custom_constraint="neutron.network"),
            "floating_subnet": PropertySchema(STRING, "The external subnet to take it from.",
                                              custom_constraint="neutron.subnet"),
            "value_specs": PropertySchema(MAP, "Extra settings passed to Neutron as they are.",
                                          default={}),
            "port_id": PropertySchema(STRING, "The port to map it to.", update_allowed=True,
                                      custom_constraint="neutron.port"),
            "fixed_ip_address": PropertySchema(STRING, "Which of the port's addresses.",
                                               update_allowed=True,
                                               custom_constraint="ip_addr"),
            "floating_ip_address": PropertySchema(STRING, "The address wanted (admins only).",
                                                  custom_constraint="ip_addr"),
            "dns_name": PropertySchema(STRING, "Its DNS name.", update_allowed=True,
                                       custom_constraint="rel_dns_name"),
            "dns_domain": PropertySchema(STRING, "Its DNS domain.", update_allowed=True,
                                         custom_constraint="dns_domain"),
        },
        attributes=frozenset({"router_id", "tenant_id", "floating_network_id",
                              "fixed_ip_address", "floating_ip_address", "port_id", "show"}),
    )

    def find(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any | None:
        return tagged(conn.network.ips, owner_tag(ctx))

    def make(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any:
        ref = props.get("floating_network") or props.get("floating_network_id")
        if not ref:
            raise ResourceFailure("a floating IP needs its network: give 'floating_network'")
        if props.get("fixed_ip_address") and not props.get("port_id"):
            raise ResourceFailure("'fixed_ip_address' needs 'port_id'")
        body: dict[str, Any] = dict(props.get("value_specs") or {})
        body["floating_network_id"] = resolve(conn.network.find_network, "network", ref)
        if props.get("floating_subnet"):
            body["subnet_id"] = resolve(conn.network.find_subnet, "subnet",
                                        props["floating_subnet"])
        for key in ("floating_ip_address", "dns_name", "dns_domain"):
            if props.get(key):
                body[key] = props[key]
        # Made without its port: the association is a step of its own (see ``_associated``).
        with refused(f"creating floating IP {ctx.resource_name}", "NetworkNotFound",
                     "SubnetNotFound", "IpAddressAlreadyAllocated",
                     "IpAddressGenerationFailure"):
            return conn.network.create_ip(**body, tags=with_tags(ctx, props))

    def fetch(self, conn: Any, physical_id: str) -> Any:
        return conn.network.get_ip(physical_id)

    def remove(self, conn: Any, physical_id: str) -> None:
        conn.network.delete_ip(physical_id, ignore_missing=False)

    def actual(self, obj: Any) -> dict[str, Any]:
        return {"port_id": obj.port_id, "fixed_ip_address": obj.fixed_ip_address}

    def attributes(self, conn: Any, obj: Any, props: Mapping[str, Any]) -> dict[str, Any]:
        return {"router_id": obj.router_id, "tenant_id": obj.project_id,
                "floating_network_id": obj.floating_network_id,
                "fixed_ip_address": obj.fixed_ip_address,
                "floating_ip_address": obj.floating_ip_address, "port_id": obj.port_id,
                "show": obj.to_dict(computed=False)}

    def _associated(self, ctx: PluginContext, conn: Any, obj: Any, props: Mapping[str, Any],
                    action: str, since: float | None = None) -> Progress:
        """Map ``obj`` as the properties say, then where it stands (pending while no router
        reaches its port)."""
        port_id, fixed_ip = props.get("port_id") or None, props.get("fixed_ip_address") or None
        if obj.port_id != port_id or (fixed_ip and obj.fixed_ip_address != fixed_ip):
            ctx.check_lease()
            try:
                obj = associate(conn, str(obj.id), port_id, fixed_ip)
            except Unreachable as exc:
                return waiting(ctx, str(obj.id), since, exc)
        return self.progress(conn, obj, props, action)

    # -- the plugin port -----------------------------------------------------------------------
    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        conn = self.connection(ctx)
        with translated(f"creating floating IP {ctx.resource_name}"):
            obj = self.find(conn, ctx, props)
            if obj is None:
                ctx.check_lease()
                obj = self.make(conn, ctx, props)
        return self._step(ctx, conn, str(obj.id), props, "CREATE", None)

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        if physical_id is None:
            return self.create(ctx, new)
        conn = self.connection(ctx)
        body = {k: new.get(k) or "" for k in ("dns_name", "dns_domain")
                if old.get(k) != new.get(k)}
        if body:
            try:
                with translated(f"updating floating IP {physical_id}"):
                    ctx.check_lease()
                    conn.network.update_ip(physical_id, **body)
            except Absent:
                raise ResourceFailure(f"floating IP {physical_id} no longer exists") from None
        return self._step(ctx, conn, physical_id, new, "UPDATE", None)

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        since = since_of(state)
        if action == DELETE or physical_id is None or since is None:
            return super().poll(ctx, action, physical_id, props, state)
        return self._step(ctx, self.connection(ctx), physical_id, props, action, since)

    def _step(self, ctx: PluginContext, conn: Any, physical_id: str,
              props: Mapping[str, Any], action: str, since: float | None) -> Progress:
        try:
            with translated(f"associating floating IP {physical_id}"):
                obj = self.fetch(conn, physical_id)
                return self._associated(ctx, conn, obj, props, action, since)
        except Absent:
            raise ResourceFailure(f"floating IP {physical_id} vanished") from None


class FloatingIPAssociation(OpenStackResource):
    noun = "floating IP association"
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Neutron::FloatingIPAssociation",
        description="A floating IP mapped to a port.",
        implicit=implicit.association,
        properties={
            "floatingip_id": PropertySchema(STRING, "The floating IP's id.", required=True,
                                            update_allowed=True),
            "port_id": PropertySchema(STRING, "The port to map it to.", required=True,
                                      update_allowed=True, custom_constraint="neutron.port"),
            "fixed_ip_address": PropertySchema(STRING, "Which of the port's addresses.",
                                               update_allowed=True,
                                               custom_constraint="ip_addr"),
        },
        attributes=frozenset({"show"}),
    )

    def _map(self, ctx: PluginContext, props: Mapping[str, Any],
             since: float | None) -> Progress:
        """Map the floating IP to the port if it is not already; pending while no router
        reaches the port."""
        conn = self.connection(ctx)
        fip_id = str(props["floatingip_id"])
        port_id, fixed_ip = str(props["port_id"]), props.get("fixed_ip_address") or None
        try:
            with translated(f"associating floating IP {fip_id}"):
                fip = conn.network.get_ip(fip_id)
                if fip.port_id != port_id or (fixed_ip and fip.fixed_ip_address != fixed_ip):
                    ctx.check_lease()
                    try:
                        fip = associate(conn, fip_id, port_id, fixed_ip)
                    except Unreachable as exc:
                        return waiting(ctx, fip_id, since, exc)
        except Absent:
            raise ResourceFailure(f"floating IP {fip_id} not found") from None
        return Progress.finished(fip_id, {"show": fip.to_dict(computed=False)})

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        return self._map(ctx, props, None)

    def observe(self, ctx: PluginContext, physical_id: str,
                props: Mapping[str, Any]) -> Observation | None:
        """The floating IP's port (and address) now: another one is drift, put back by an
        update that converges."""
        conn = self.connection(ctx)
        try:
            with translated(f"reading floating IP {physical_id}"):
                fip = conn.network.get_ip(physical_id)
        except Absent:
            return Observation.missing(f"floating IP {physical_id} not found in the cloud")
        found = {"port_id": fip.port_id, "fixed_ip_address": fip.fixed_ip_address}
        return Observation.fine({k: v for k, v in found.items() if k in props})

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        if old.get("floatingip_id") != new.get("floatingip_id"):
            self._unmap(ctx, str(old.get("floatingip_id") or physical_id or ""),
                        old.get("port_id"))
        return self._map(ctx, new, None)

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        if action == DELETE:
            return self.delete(ctx, physical_id, props)
        return self._map(ctx, props, since_of(state))

    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress:
        fip_id = physical_id or props.get("floatingip_id")
        if fip_id:
            self._unmap(ctx, str(fip_id), props.get("port_id"))
        return Progress.finished(physical_id)

    def discard(self, ctx: PluginContext, physical_id: str) -> None:
        self._unmap(ctx, physical_id, None)

    def _unmap(self, ctx: PluginContext, fip_id: str, port_id: str | None) -> None:
        """Take the floating IP off ``port_id`` (None: off any port); one that is gone, or on
        another port now, is left as it is."""
        if not fip_id:
            return
        conn = self.connection(ctx)
        try:
            with translated(f"disassociating floating IP {fip_id}"):
                fip = conn.network.get_ip(fip_id)
                if fip.port_id is None or (port_id is not None and fip.port_id != port_id):
                    return
                ctx.check_lease()
                conn.network.update_ip(fip_id, port_id=None)
        except Absent:
            return
