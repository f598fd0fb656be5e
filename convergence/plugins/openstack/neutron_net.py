"""``OS::Neutron::Net`` and ``OS::Neutron::Subnet``: Neutron networks and their subnets.

Callers: the registry (entry points ``OS::Neutron::Net`` and ``OS::Neutron::Subnet``); the
engine's steps call them through the plugin port. Property schemas, what updates in place and
the attributes are Heat's (its resource type reference); the record's key rides on each object
as a Neutron tag, which is how a create interrupted between the cloud's answer and the
engine's write is found again rather than made twice. ``value_specs`` are passed to Neutron as
they are, as Heat does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from convergence.plugins.base import PluginContext
from convergence.plugins.openstack.resource import OpenStackResource, owner_tag
from convergence.template.properties import (
    BOOLEAN,
    INTEGER,
    LIST,
    MAP,
    STRING,
    PropertySchema,
    TypeSchema,
)

TAGS = PropertySchema(LIST, "Tags on the object (the engine adds its own).", update_allowed=True,
                      item=PropertySchema(STRING))
VALUE_SPECS = PropertySchema(MAP, "Extra settings passed to Neutron as they are.",
                             default={}, update_allowed=True)


def tagged(listing: Any, tag: str) -> Any | None:
    """The first object of a Neutron listing call carrying ``tag``."""
    return next(iter(listing(tags=tag)), None)


def with_tags(ctx: PluginContext, props: Mapping[str, Any]) -> list[str]:
    return [owner_tag(ctx), *(props.get("tags") or [])]


def neutron_tags(conn: Any, obj: Any, ctx: PluginContext, new: Mapping[str, Any]) -> None:
    """Set the object's tags to the template's, the record's key kept."""
    conn.network.set_tags(obj, with_tags(ctx, new))


class Net(OpenStackResource):
    noun = "network"
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Neutron::Net",
        description="A Neutron network.",
        properties={
            "name": PropertySchema(STRING, "The network's name.", update_allowed=True),
            "value_specs": VALUE_SPECS,
            "admin_state_up": PropertySchema(BOOLEAN, "Whether the network is up.",
                                             default=True, update_allowed=True),
            "tenant_id": PropertySchema(STRING, "The project owning it (admins only)."),
            "shared": PropertySchema(BOOLEAN, "Whether other projects may use it.",
                                     update_allowed=True),
            "dhcp_agent_ids": PropertySchema(LIST, "The DHCP agents to schedule it on.",
                                             update_allowed=True, item=PropertySchema(STRING)),
            "port_security_enabled": PropertySchema(
                BOOLEAN, "Whether its ports have port security by default.",
                update_allowed=True),
            "qos_policy": PropertySchema(STRING, "A QoS policy's name or id.",
                                         update_allowed=True),
            "dns_domain": PropertySchema(STRING, "The DNS domain of its ports.",
                                         update_allowed=True),
            "availability_zone_hints": PropertySchema(LIST, "Zones for its DHCP and routers.",
                                                      item=PropertySchema(STRING)),
            "tags": TAGS,
        },
        attributes=frozenset({"status", "name", "subnets", "admin_state_up", "tenant_id",
                              "port_security_enabled", "mtu", "qos_policy_id", "segments",
                              "l2_adjacency", "show"}),
    )

    def _body(self, props: Mapping[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = dict(props.get("value_specs") or {})
        for key in ("name", "admin_state_up", "shared", "port_security_enabled", "dns_domain",
                    "availability_zone_hints"):
            if props.get(key) is not None:
                body[key] = props[key]
        if props.get("tenant_id"):
            body["project_id"] = props["tenant_id"]
        if props.get("qos_policy"):
            body["qos_policy_id"] = props["qos_policy"]
        return body

    def find(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any | None:
        return tagged(conn.network.networks, owner_tag(ctx))

    def make(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any:
        return conn.network.create_network(**self._body(props), tags=with_tags(ctx, props))

    def fetch(self, conn: Any, physical_id: str) -> Any:
        return conn.network.get_network(physical_id)

    def remove(self, conn: Any, physical_id: str) -> None:
        conn.network.delete_network(physical_id, ignore_missing=False)

    def change(self, conn: Any, ctx: PluginContext, physical_id: str,
               old: Mapping[str, Any], new: Mapping[str, Any]) -> Any:
        body = {k: v for k, v in self._body(new).items()
                if k != "project_id" and v != self._body(old).get(k)}
        obj = conn.network.update_network(physical_id, **body) if body \
            else self.fetch(conn, physical_id)
        if new.get("tags") != old.get("tags"):
            neutron_tags(conn, obj, ctx, new)
        return obj

    def attributes(self, conn: Any, obj: Any, props: Mapping[str, Any]) -> dict[str, Any]:
        return {"status": obj.status, "name": obj.name, "subnets": list(obj.subnet_ids or []),
                "admin_state_up": obj.is_admin_state_up, "tenant_id": obj.project_id,
                "port_security_enabled": obj.is_port_security_enabled, "mtu": obj.mtu,
                "qos_policy_id": obj.qos_policy_id, "segments": list(obj.segments or []),
                "l2_adjacency": obj.is_l2_adjacency if hasattr(obj, "is_l2_adjacency")
                else None, "show": obj.to_dict(computed=False)}


ALLOCATION_POOL = PropertySchema(MAP, schema={
    "start": PropertySchema(STRING, "The pool's first address.", required=True,
                            custom_constraint="ip_addr"),
    "end": PropertySchema(STRING, "The pool's last address.", required=True,
                          custom_constraint="ip_addr")})
HOST_ROUTE = PropertySchema(MAP, schema={
    "destination": PropertySchema(STRING, "A CIDR.", required=True, custom_constraint="net_cidr"),
    "nexthop": PropertySchema(STRING, "An address.", required=True, custom_constraint="ip_addr")})


class Subnet(OpenStackResource):
    noun = "subnet"
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Neutron::Subnet",
        description="A subnet of a Neutron network.",
        properties={
            "network": PropertySchema(STRING, "The network's name or id.",
                                      custom_constraint="neutron.network"),
            "network_id": PropertySchema(STRING, "Deprecated: use network.",
                                         custom_constraint="neutron.network"),
            "subnetpool": PropertySchema(STRING, "A subnet pool to take the CIDR from."),
            "prefixlen": PropertySchema(INTEGER, "The prefix length from the pool.", min=0),
            "cidr": PropertySchema(STRING, "The subnet's CIDR.", custom_constraint="net_cidr"),
            "ip_version": PropertySchema(INTEGER, "4 or 6.", default=4,
                                         allowed_values=(4, 6)),
            "dns_nameservers": PropertySchema(LIST, "DNS servers of its hosts.", default=[],
                                              update_allowed=True,
                                              item=PropertySchema(STRING)),
            "gateway_ip": PropertySchema(STRING, "The gateway's address ('' or null: none).",
                                         update_allowed=True),
            "enable_dhcp": PropertySchema(BOOLEAN, "Whether DHCP serves it.", default=True,
                                          update_allowed=True),
            "ipv6_address_mode": PropertySchema(
                STRING, "IPv6 address mode.",
                allowed_values=("dhcpv6-stateful", "dhcpv6-stateless", "slaac")),
            "ipv6_ra_mode": PropertySchema(
                STRING, "IPv6 router advertisement mode.",
                allowed_values=("dhcpv6-stateful", "dhcpv6-stateless", "slaac")),
            "allocation_pools": PropertySchema(LIST, "Address ranges to allocate from.",
                                               update_allowed=True, item=ALLOCATION_POOL),
            "host_routes": PropertySchema(LIST, "Routes handed to its hosts.",
                                          update_allowed=True, item=HOST_ROUTE),
            "name": PropertySchema(STRING, "The subnet's name.", update_allowed=True),
            "value_specs": VALUE_SPECS,
            "tenant_id": PropertySchema(STRING, "The project owning it (admins only)."),
            "segment": PropertySchema(STRING, "A network segment's id.", update_allowed=True),
            "tags": TAGS,
        },
        attributes=frozenset({"name", "network_id", "tenant_id", "allocation_pools",
                              "gateway_ip", "host_routes", "ip_version", "cidr",
                              "dns_nameservers", "enable_dhcp", "subnetpool_id", "show"}),
    )

    def _network_id(self, conn: Any, props: Mapping[str, Any]) -> str:
        ref = props.get("network") or props.get("network_id")
        return str(conn.network.find_network(ref, ignore_missing=False).id)

    def _changeable(self, props: Mapping[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = dict(props.get("value_specs") or {})
        for key in ("name", "dns_nameservers", "enable_dhcp", "host_routes", "segment"):
            if props.get(key) is not None:
                body[key] = props[key]
        if props.get("segment") is not None:
            body["segment_id"] = body.pop("segment")
        if "gateway_ip" in props and props["gateway_ip"] is not None:
            body["gateway_ip"] = props["gateway_ip"] or None
        if props.get("allocation_pools"):
            body["allocation_pools"] = [{"start": p["start"], "end": p["end"]}
                                        for p in props["allocation_pools"]]
        return body

    def find(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any | None:
        return tagged(conn.network.subnets, owner_tag(ctx))

    def make(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any:
        body = self._changeable(props)
        body.update(network_id=self._network_id(conn, props), ip_version=props["ip_version"])
        for key in ("cidr", "prefixlen", "ipv6_address_mode", "ipv6_ra_mode"):
            if props.get(key) is not None:
                body[key] = props[key]
        if props.get("subnetpool"):
            body["subnet_pool_id"] = props["subnetpool"]
        if props.get("tenant_id"):
            body["project_id"] = props["tenant_id"]
        return conn.network.create_subnet(**body, tags=with_tags(ctx, props))

    def fetch(self, conn: Any, physical_id: str) -> Any:
        return conn.network.get_subnet(physical_id)

    def remove(self, conn: Any, physical_id: str) -> None:
        conn.network.delete_subnet(physical_id, ignore_missing=False)

    def change(self, conn: Any, ctx: PluginContext, physical_id: str,
               old: Mapping[str, Any], new: Mapping[str, Any]) -> Any:
        before = self._changeable(old)
        body = {k: v for k, v in self._changeable(new).items() if v != before.get(k)}
        if "gateway_ip" in old and old.get("gateway_ip") is not None and \
                new.get("gateway_ip") is None:
            body["gateway_ip"] = None
        obj = conn.network.update_subnet(physical_id, **body) if body \
            else self.fetch(conn, physical_id)
        if new.get("tags") != old.get("tags"):
            neutron_tags(conn, obj, ctx, new)
        return obj

    def attributes(self, conn: Any, obj: Any, props: Mapping[str, Any]) -> dict[str, Any]:
        return {"name": obj.name, "network_id": obj.network_id, "tenant_id": obj.project_id,
                "allocation_pools": list(obj.allocation_pools or []),
                "gateway_ip": obj.gateway_ip, "host_routes": list(obj.host_routes or []),
                "ip_version": obj.ip_version, "cidr": obj.cidr,
                "dns_nameservers": list(obj.dns_nameservers or []),
                "enable_dhcp": obj.is_dhcp_enabled, "subnetpool_id": obj.subnet_pool_id,
                "show": obj.to_dict(computed=False)}
