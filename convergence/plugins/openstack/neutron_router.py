"""``OS::Neutron::Router`` and ``OS::Neutron::RouterInterface``: routers, their gateway to an
external network, and the subnets or ports they route for.

Callers: the registry (entry points ``OS::Neutron::Router`` and
``OS::Neutron::RouterInterface``); the engine's steps call them through the plugin port.
Schemas, what updates in place and the attributes are Heat's.

A router carries the record's key as a Neutron tag, like a network. Its gateway
(``external_gateway_info``: the external network by name or id, SNAT, fixed addresses) updates
in place; ``l3_agent_ids`` (admins only) are set through Neutron's agent scheduler.

An interface is no object of its own in Neutron: it is a port of the router. Its physical id is
Heat's, ``ROUTER_ID:subnet_id=SUBNET_ID`` or ``ROUTER_ID:port_id=PORT_ID``, and the router and
the subnet (or port) are its key: a create finds the interface already there (made by an
interrupted attempt) and adopts it; a delete removes it and is done when the router no longer
has it (already gone counts as done). A removal Neutron refuses for now (409: floating IPs or
routes still need it) is asked again later, as the base translates it.
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
    RetryLater,
)
from convergence.plugins.openstack.errors import Absent, translated
from convergence.plugins.openstack.names import physical_name
from convergence.plugins.openstack.neutron_net import (
    TAGS,
    VALUE_SPECS,
    neutron_tags,
    tagged,
    with_tags,
)
from convergence.plugins.openstack.neutron_port import cloud_message, refused, resolve
from convergence.plugins.openstack.resource import OpenStackResource, owner_tag
from convergence.template.properties import (
    BOOLEAN,
    LIST,
    MAP,
    STRING,
    PropertySchema,
    TypeSchema,
)

GATEWAY = PropertySchema(MAP, "The router's gateway to an external network.",
                         update_allowed=True, schema={
    "network": PropertySchema(STRING, "The external network (name or id).", required=True,
                              update_allowed=True, custom_constraint="neutron.network"),
    "enable_snat": PropertySchema(BOOLEAN, "Whether the gateway does source NAT.",
                                  update_allowed=True),
    "external_fixed_ips": PropertySchema(
        LIST, "The gateway's addresses on the external network.", update_allowed=True,
        item=PropertySchema(MAP, schema={
            "ip_address": PropertySchema(STRING, "An external address.",
                                         custom_constraint="ip_addr"),
            "subnet": PropertySchema(STRING, "The external subnet (name or id).",
                                     custom_constraint="neutron.subnet")})),
})
INTERFACE_OWNER = "network:router_interface"


class Router(OpenStackResource):
    noun = "router"
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Neutron::Router",
        description="A Neutron router.",
        properties={
            "name": PropertySchema(STRING, "The router's name.", update_allowed=True),
            "external_gateway_info": GATEWAY,
            "value_specs": VALUE_SPECS,
            "admin_state_up": PropertySchema(BOOLEAN, "Whether the router is up.",
                                             default=True, update_allowed=True),
            "l3_agent_ids": PropertySchema(LIST, "The L3 agents to host it (admins only).",
                                           update_allowed=True, item=PropertySchema(STRING)),
            "distributed": PropertySchema(BOOLEAN, "Whether it is distributed (admins only)."),
            "ha": PropertySchema(BOOLEAN, "Whether it is highly available (admins only)."),
            "tags": TAGS,
        },
        attributes=frozenset({"status", "external_gateway_info", "name", "admin_state_up",
                              "tenant_id", "routes", "show"}),
    )

    def _gateway(self, conn: Any, info: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """Neutron's ``external_gateway_info`` for the property's value (None: no gateway)."""
        if not info:
            return None
        gateway: dict[str, Any] = {
            "network_id": resolve(conn.network.find_network, "network", info["network"])}
        if info.get("enable_snat") is not None:
            gateway["enable_snat"] = info["enable_snat"]
        if info.get("external_fixed_ips") is not None:
            fixed_ips = []
            for entry in info["external_fixed_ips"]:
                fixed: dict[str, Any] = {}
                if entry.get("subnet"):
                    fixed["subnet_id"] = resolve(conn.network.find_subnet, "subnet",
                                                 entry["subnet"])
                if entry.get("ip_address"):
                    fixed["ip_address"] = entry["ip_address"]
                fixed_ips.append(fixed)
            gateway["external_fixed_ips"] = fixed_ips
        return gateway

    def _agents(self, conn: Any, router_id: str, wanted: list[str]) -> None:
        """Host the router on exactly the agents ``wanted`` (Heat's replace of agents)."""
        try:
            router = conn.network.get_router(router_id)
            for agent in list(conn.network.routers_hosting_l3_agents(router)):
                if agent.id not in wanted:
                    conn.network.remove_router_from_agent(agent, router)
            hosting = {a.id for a in conn.network.routers_hosting_l3_agents(router)}
            for agent_id in wanted:
                if agent_id not in hosting:
                    conn.network.add_router_to_agent(conn.network.get_agent(agent_id), router)
        except sdk_exceptions.NotFoundException as exc:
            # An agent that is not there, or a cloud without the agent scheduler: not the
            # router's own absence, which the base would read a 404 as.
            raise ResourceFailure(f"placing router {router_id} on L3 agents {wanted}: "
                                  f"{cloud_message(exc)}") from exc

    def find(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any | None:
        return tagged(conn.network.routers, owner_tag(ctx))

    def make(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any:
        body: dict[str, Any] = dict(props.get("value_specs") or {})
        for key in ("name", "admin_state_up", "distributed", "ha"):
            if props.get(key) is not None:
                body[key] = props[key]
        body.setdefault("name", physical_name(ctx))
        gateway = self._gateway(conn, props.get("external_gateway_info"))
        if gateway is not None:
            body["external_gateway_info"] = gateway
        doing = f"creating router {ctx.resource_name}"
        with refused(doing, "NetworkNotFound", "SubnetNotFound", "IpAddressAlreadyAllocated",
                     "IpAddressGenerationFailure"):
            router = conn.network.create_router(**body, tags=with_tags(ctx, props))
            if props.get("l3_agent_ids"):
                self._agents(conn, router.id, list(props["l3_agent_ids"]))
        return router

    def fetch(self, conn: Any, physical_id: str) -> Any:
        return conn.network.get_router(physical_id)

    def remove(self, conn: Any, physical_id: str) -> None:
        conn.network.delete_router(physical_id, ignore_missing=False)

    def change(self, conn: Any, ctx: PluginContext, physical_id: str,
               old: Mapping[str, Any], new: Mapping[str, Any]) -> Any:
        changed = {k for k in set(old) | set(new) if old.get(k) != new.get(k)}
        body: dict[str, Any] = dict(new.get("value_specs") or {}) \
            if "value_specs" in changed else {}
        for key in ("name", "admin_state_up"):
            if key in changed and new.get(key) is not None:
                body[key] = new[key]
        if "name" in changed and new.get("name") is None:
            body["name"] = physical_name(ctx)
        if "external_gateway_info" in changed:
            body["external_gateway_info"] = self._gateway(conn,
                                                          new.get("external_gateway_info"))
        with refused(f"updating router {physical_id}", "NetworkNotFound", "SubnetNotFound",
                     "IpAddressAlreadyAllocated", "IpAddressGenerationFailure"):
            obj = conn.network.update_router(physical_id, **body) if body \
                else self.fetch(conn, physical_id)
            if "l3_agent_ids" in changed:
                self._agents(conn, physical_id, list(new.get("l3_agent_ids") or []))
        if "tags" in changed:
            neutron_tags(conn, obj, ctx, new)
        return obj

    def actual(self, obj: Any) -> dict[str, Any]:
        return {"name": obj.name, "admin_state_up": obj.is_admin_state_up}

    def attributes(self, conn: Any, obj: Any, props: Mapping[str, Any]) -> dict[str, Any]:
        return {"status": obj.status, "external_gateway_info": obj.external_gateway_info,
                "name": obj.name, "admin_state_up": obj.is_admin_state_up,
                "tenant_id": obj.project_id, "routes": list(obj.routes or []),
                "show": obj.to_dict(computed=False)}


# -- interfaces --------------------------------------------------------------------------------

def interface_id(router_id: str, key: str, value: str) -> str:
    """Heat's physical id of an interface: ``ROUTER_ID:subnet_id=ID`` or ``...:port_id=ID``."""
    return f"{router_id}:{key}={value}"


def parse_interface_id(physical_id: str) -> tuple[str, str, str]:
    """``(router_id, key, value)`` of an interface's physical id (Heat's oldest form,
    ``ROUTER_ID:SUBNET_ID``, included)."""
    tokens = physical_id.replace("=", ":").split(":")
    if len(tokens) == 2:
        tokens.insert(1, "subnet_id")
    if len(tokens) != 3 or tokens[1] not in ("subnet_id", "port_id"):
        raise ResourceFailure(f"{physical_id!r} is not a router interface's id")
    return tokens[0], tokens[1], tokens[2]


class RouterInterface(OpenStackResource):
    noun = "router interface"
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Neutron::RouterInterface",
        description="A router's interface on a subnet or a port.",
        properties={
            "router": PropertySchema(STRING, "The router (name or id).",
                                     custom_constraint="neutron.router"),
            "router_id": PropertySchema(STRING, "Deprecated: use router.",
                                        custom_constraint="neutron.router"),
            "subnet": PropertySchema(STRING, "The subnet (name or id); or give port.",
                                     custom_constraint="neutron.subnet"),
            "subnet_id": PropertySchema(STRING, "Deprecated: use subnet.",
                                        custom_constraint="neutron.subnet"),
            "port": PropertySchema(STRING, "The port (name or id); or give subnet.",
                                   custom_constraint="neutron.port"),
            "port_id": PropertySchema(STRING, "Deprecated: use port.",
                                      custom_constraint="neutron.port"),
        },
        attributes=frozenset({"show"}),
    )

    @staticmethod
    def _wanted(props: Mapping[str, Any]) -> tuple[str, str, str]:
        """``(router, key, reference)`` the properties ask for, not resolved yet."""
        router = props.get("router") or props.get("router_id")
        subnet = props.get("subnet") or props.get("subnet_id")
        port = props.get("port") or props.get("port_id")
        if not router:
            raise ResourceFailure("a router interface needs its router: give 'router'")
        if bool(subnet) == bool(port):
            raise ResourceFailure("a router interface needs exactly one of 'subnet' and "
                                  "'port'")
        return str(router), ("subnet_id" if subnet else "port_id"), str(subnet or port)

    def needs_replace(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        """A property renamed (``router_id`` to ``router``) with the same value keeps the
        interface: only another router, subnet or port replaces it."""
        try:
            return self._wanted(old) != self._wanted(new)
        except ResourceFailure:
            return super().needs_replace(old, new)

    def _target(self, conn: Any, props: Mapping[str, Any]) -> tuple[str, str, str]:
        router, key, ref = self._wanted(props)
        router_id = resolve(conn.network.find_router, "router", router)
        if key == "subnet_id":
            return router_id, key, resolve(conn.network.find_subnet, "subnet", ref)
        return router_id, key, resolve(conn.network.find_port, "port", ref)

    @staticmethod
    def _present(conn: Any, router_id: str, key: str, value: str) -> bool:
        """Whether the router has the interface (its port on the subnet, or the port)."""
        ports = conn.network.ports(device_id=router_id, device_owner=INTERFACE_OWNER)
        if key == "port_id":
            return any(p.id == value for p in ports)
        return any(ip.get("subnet_id") == value for p in ports for ip in p.fixed_ips or [])

    def _finished(self, router_id: str, key: str, value: str) -> Progress:
        physical_id = interface_id(router_id, key, value)
        return Progress.finished(physical_id, {"show": {"id": physical_id,
                                                        "router_id": router_id, key: value}})

    # -- the plugin port -----------------------------------------------------------------------
    def observe(self, ctx: PluginContext, physical_id: str,
                props: Mapping[str, Any]) -> Observation | None:
        conn = self.connection(ctx)
        router_id, key, value = parse_interface_id(physical_id)
        with translated(f"reading router interface {physical_id}"):
            if self._present(conn, router_id, key, value):
                return Observation.fine()
        return Observation.missing(f"router {router_id} has no interface with {key} {value}")

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        conn = self.connection(ctx)
        doing = f"creating router interface {ctx.resource_name}"
        try:
            with translated(doing):
                router_id, key, value = self._target(conn, props)
                if not self._present(conn, router_id, key, value):
                    ctx.check_lease()
                    # 409s here are for good: the subnet's gateway address or the port is
                    # someone else's.
                    with refused(doing, "PortInUse", "IpAddressInUse"):
                        conn.network.add_interface_to_router(router_id, **{
                            "subnet" if key == "subnet_id" else "port": value})
        except Absent as exc:  # the router, subnet or port named went away meanwhile
            raise ResourceFailure(str(exc)) from None
        return self._finished(router_id, key, value)

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        return self.create(ctx, new)

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        if action == DELETE:
            return self._removing(ctx, physical_id, props)
        return self.create(ctx, props)

    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress:
        return self._removing(ctx, physical_id, props)

    def discard(self, ctx: PluginContext, physical_id: str) -> None:
        if not self._removing(ctx, physical_id, {}).done:
            raise RetryLater(f"router interface {physical_id} is being removed",
                             self.delete_delay)

    def _removing(self, ctx: PluginContext, physical_id: str | None,
                  props: Mapping[str, Any]) -> Progress:
        """Remove the interface while the router has it; done when it no longer has it."""
        conn = self.connection(ctx)
        doing = f"removing router interface {physical_id or ctx.resource_name}"
        try:
            with translated(doing):
                if physical_id is None:
                    # Nothing was recorded: an interrupted create may still have added it.
                    router_id, key, value = self._target(conn, props)
                else:
                    router_id, key, value = parse_interface_id(physical_id)
                present = self._present(conn, router_id, key, value)
                if present:
                    ctx.check_lease()
                    conn.network.remove_interface_from_router(router_id, **{
                        "subnet" if key == "subnet_id" else "port": value})
                    present = self._present(conn, router_id, key, value)
        except Absent:
            return Progress.finished(physical_id)
        except ResourceFailure:
            if physical_id is None:
                return Progress.finished(None)  # its router, subnet or port is gone: so is it
            raise
        found = interface_id(router_id, key, value)
        if present:  # accepted but not done yet: asked again at the next look
            return Progress.pending(self.delete_delay, {"phase": "removing"}, found)
        return Progress.finished(found)
